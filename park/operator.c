/* operator.c: named operators of `stepq serve`: their roles, their
 * tokens (made here from 32 random bytes, stored only as SHA-256), and
 * who a presented token belongs to, compared in constant time.
 *
 * Why a plain SHA-256 and no salt: a salt (or a slow hash) protects
 * guessable secrets, a password, from a stolen table. A token here is 256
 * random bits: no table of precomputed hashes covers it and no guess finds
 * it, so a salt would add nothing but the need to hash the presented
 * token once per operator. An HMAC with a key kept apart from the store
 * would only help against a stolen table whose tokens could be guessed,
 * which they cannot. */
#include "park/park.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "queue/audit.h"

static const char *const role_names[] = {"viewer", "resolver", "admin"};

const char *
park_role_name(enum park_role role)
{
    return (unsigned)role < 3 ? role_names[role] : "unknown";
}

int
park_role_from_name(const char *name, enum park_role *out)
{
    for (int i = 0; name != NULL && i < 3; i++) {
        if (strcmp(name, role_names[i]) == 0) {
            *out = (enum park_role)i;
            return 0;
        }
    }
    return -EINVAL;
}

static void
hex(const unsigned char *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

int
park_token_new(char out[PARK_TOKEN_SIZE])
{
    unsigned char raw[32];

    if (RAND_bytes(raw, sizeof(raw)) != 1)
        return -EIO;
    memcpy(out, PARK_TOKEN_PREFIX, sizeof(PARK_TOKEN_PREFIX) - 1);
    hex(raw, sizeof(raw), out + sizeof(PARK_TOKEN_PREFIX) - 1);
    OPENSSL_cleanse(raw, sizeof(raw));
    return 0;
}

void
park_token_hash(const char *token, size_t len, char out[65])
{
    unsigned char d[SHA256_DIGEST_LENGTH];

    SHA256((const unsigned char *)token, len, d);
    hex(d, sizeof(d), out);
}

int
park_operator_name_check(const char *name, char *err, size_t len)
{
    size_t n = name != NULL ? strlen(name) : 0;

    if (n == 0 || n > 64 ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789._@-") != n) {
        snprintf(err, len,
                 "operator name %s: use 1 to 64 letters, digits, '.', '_', "
                 "'@' or '-'",
                 name != NULL ? name : "(none)");
        return -EINVAL;
    }
    return 0;
}

int
park_operator_find(q_db *db, const char *token, size_t len,
                   struct park_caller *who, size_t *nops)
{
    struct q_operator *ops = NULL;
    char h[65];
    size_t n = 0;
    int found = -1, rc = q_operators_list(db, &ops, &n);

    if (rc != 0)
        return rc;
    *nops = n;
    park_token_hash(token, len, h);
    /* Every stored hash is compared, in full, whatever matched: the time
     * taken tells nothing of which one did, or how much of it. */
    for (size_t i = 0; i < n; i++) {
        bool same = strlen(ops[i].token_sha256) == 64 &&
                    CRYPTO_memcmp(ops[i].token_sha256, h, 64) == 0;
        found = same ? (int)i : found;
    }
    if (found < 0) {
        q_operators_free(ops, n);
        return -ENOENT;
    }
    snprintf(who->name, sizeof(who->name), "%s", ops[found].name);
    rc = park_role_from_name(ops[found].role, &who->role);
    q_operators_free(ops, n);
    return rc == 0 ? 0 : -EIO; /* a role this stepq does not know */
}

int
park_operator_add(q_db *db, const char *name, enum park_role role,
                  const struct park_audit *by, char token[PARK_TOKEN_SIZE])
{
    struct park_audit a = *by;
    char h[65];
    cJSON *d = cJSON_CreateObject();
    int rc;

    cJSON_AddStringToObject(d, "name", name);
    cJSON_AddStringToObject(d, "role", park_role_name(role));
    a.action = "operator.add";
    a.detail = d;
    if ((rc = park_token_new(token)) == 0 && (rc = q_tx_begin(db)) == 0) {
        park_token_hash(token, strlen(token), h);
        rc = park_audited(
            db, q_operator_add(db, name, park_role_name(role), h, a.now), &a);
    }
    cJSON_Delete(d);
    return rc;
}

int
park_operator_rotate(q_db *db, const char *name, const struct park_audit *by,
                     char token[PARK_TOKEN_SIZE])
{
    struct park_audit a = *by;
    char h[65];
    cJSON *d = cJSON_CreateObject();
    int rc;

    cJSON_AddStringToObject(d, "name", name);
    a.action = "operator.rotate";
    a.detail = d;
    if ((rc = park_token_new(token)) == 0 && (rc = q_tx_begin(db)) == 0) {
        park_token_hash(token, strlen(token), h);
        rc = park_audited(db, q_operator_rotate(db, name, h, a.now), &a);
    }
    cJSON_Delete(d);
    return rc;
}

int
park_operator_remove(q_db *db, const char *name, const struct park_audit *by)
{
    struct park_audit a = *by;
    cJSON *d = cJSON_CreateObject();
    int rc;

    cJSON_AddStringToObject(d, "name", name);
    a.action = "operator.remove";
    a.detail = d;
    if ((rc = q_tx_begin(db)) == 0)
        rc = park_audited(db, q_operator_remove(db, name), &a);
    cJSON_Delete(d);
    return rc;
}

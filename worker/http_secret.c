/* http_secret.c: the values a request carries that must not come back out
 * of stepq. A request remembers the secrets it was built with (the tier's
 * key, env: header and query values, values of credential headers), and
 * the client replaces each of them by "***" in the answer before anyone
 * sees it: an endpoint that echoes a key in an error ("Incorrect API key
 * provided: sk-...") must not put it in the ledger, a park item, a log
 * line or a job's output. */
#include "worker/http_internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

/* Shorter values are not secrets worth the name, and replacing them would
 * mangle ordinary text. */
#define SECRET_MIN 4

void
http_request_add_secret(struct http_request *r, const char *value)
{
    if (value == NULL || strlen(value) < SECRET_MIN)
        return;
    for (size_t i = 0; i < r->nsecrets; i++) {
        if (strcmp(r->secrets[i], value) == 0)
            return;
    }
    r->secrets = xrealloc(r->secrets, (r->nsecrets + 1) * sizeof(char *));
    r->secrets[r->nsecrets++] = xstrdup(value);
}

void
http__secrets_copy(const struct http_request *r, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (r->nsecrets == 0)
        return;
    *out = xcalloc(r->nsecrets, sizeof(char *));
    for (size_t i = 0; i < r->nsecrets; i++)
        (*out)[i] = xstrdup(r->secrets[i]);
    *n = r->nsecrets;
}

void
http__secrets_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        http__free_secret(v[i]);
    free(v);
}

/* Replaces every s (k bytes) in the len bytes at p by "***", in place
 * (the text only shrinks); returns the new length. p may hold NULs. */
static size_t
scrub(char *p, size_t len, const char *s, size_t k)
{
    size_t rd = 0, wr = 0;

    while (rd + k <= len) {
        const char *c = memchr(p + rd, s[0], len - rd - k + 1);
        size_t at;
        if (c == NULL)
            break;
        at = (size_t)(c - p);
        memmove(p + wr, p + rd, at - rd);
        wr += at - rd;
        rd = at;
        if (memcmp(p + rd, s, k) == 0) {
            memcpy(p + wr, "***", 3);
            wr += 3;
            rd += k;
        } else {
            p[wr++] = p[rd++];
        }
    }
    memmove(p + wr, p + rd, len - rd);
    return wr + (len - rd);
}

void
http__scrub(struct http_response *res, char *const *secrets, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t k = strlen(secrets[i]);
        char *e = res->error_text;
        e[scrub(e, strlen(e), secrets[i], k)] = '\0';
        res->body_len = scrub(res->body, res->body_len, secrets[i], k);
        res->body[res->body_len] = '\0';
        for (size_t h = 0; h < res->nheaders; h++) {
            char *v = res->headers[h].value;
            v[scrub(v, strlen(v), secrets[i], k)] = '\0';
        }
    }
}

/* secret.c: the values a request carries that must not come back out
 * of stepq. A request remembers the secrets it was built with (the tier's
 * key, env: header and query values, values of credential headers), and
 * the client replaces each of them by "***" in the answer before anyone
 * sees it: an endpoint that echoes a key in an error ("Incorrect API key
 * provided: sk-...") must not put it in the ledger, a park item, a log
 * line or a job's output. Only true secrets are masked; the body as it
 * came stays beside the masked one (raw), so that what the answer is (a
 * completion, an output that parses) is judged on what the endpoint
 * sent. */
#include "http/internal.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

/* A shorter value is never masked: it cannot be told from ordinary text
 * (a header "x-portkey-retry: false" would turn every "false" of an
 * answer into "***"), and no real key is that short. */
#define SECRET_MIN 8

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

/* Whether the len bytes at p hold s (k bytes). */
static bool
holds(const char *p, size_t len, const char *s, size_t k)
{
    for (const char *c = p; (size_t)(c - p) + k <= len; c++) {
        c = memchr(c, s[0], len - (size_t)(c - p) - k + 1);
        if (c == NULL)
            return false;
        if (memcmp(c, s, k) == 0)
            return true;
    }
    return false;
}

void
http__scrub(struct http_response *res, char ***secrets, size_t *n)
{
    bool in_body = false;

    for (size_t i = 0; i < *n; i++) {
        const char *sec = (*secrets)[i];
        size_t k = strlen(sec);
        char *e = res->error_text;
        e[scrub(e, strlen(e), sec, k)] = '\0';
        for (size_t h = 0; h < res->nheaders; h++) {
            char *v = res->headers[h].value;
            v[scrub(v, strlen(v), sec, k)] = '\0';
        }
        in_body = in_body || holds(res->body, res->body_len, sec, k);
    }
    if (!in_body)
        return;
    /* The answer as it came is kept beside the masked one, for the checks
     * of what it is (a completion whose output parses) only. */
    res->raw = res->body;
    res->raw_len = res->body_len;
    res->body = xmalloc(res->raw_len + 1);
    memcpy(res->body, res->raw, res->raw_len + 1);
    for (size_t i = 0; i < *n; i++) {
        const char *sec = (*secrets)[i];
        res->body_len = scrub(res->body, res->body_len, sec, strlen(sec));
    }
    res->body[res->body_len] = '\0';
    res->secrets = *secrets;
    res->nsecrets = *n;
    *secrets = NULL;
    *n = 0;
}

char *
http_response_mask(const struct http_response *res, const char *text)
{
    size_t len = strlen(text);
    char *out = xmalloc(len + 1);

    memcpy(out, text, len + 1);
    for (size_t i = 0; i < res->nsecrets; i++)
        len = scrub(out, len, res->secrets[i], strlen(res->secrets[i]));
    out[len] = '\0';
    return out;
}

void
http_response_move(struct http_response *dst, struct http_response *src)
{
    *dst = *src;
    src->body = NULL;
    src->body_len = 0;
    src->headers = NULL;
    src->nheaders = 0;
    src->raw = NULL;
    src->raw_len = 0;
    src->secrets = NULL;
    src->nsecrets = 0;
}

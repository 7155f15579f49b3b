/* usage.c: the stored text of a tier's usage (struct q_tier_usage), one
 * column of the tier's row in every backend, so that `stepq copy` moves
 * it as it moves any text. */
#include "queue/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
q__usage_format(const struct q_tier_usage *u, char *buf, size_t size)
{
    size_t len;
    int n;

    buf[0] = '\0';
    if (u->last_s <= 0)
        return;
    n = snprintf(buf, size, "%" PRId64, u->last_s);
    len = n > 0 && (size_t)n < size ? (size_t)n : size;
    for (int64_t back = 0; back < Q_TIER_USAGE_SLOTS && back < u->last_s;
         back++) {
        size_t i = (size_t)((u->last_s - back) % Q_TIER_USAGE_SLOTS);
        if (u->requests[i] == 0 && u->tokens[i] == 0)
            continue;
        n = snprintf(buf + len, size - len, " %" PRId64 ":%" PRIu32 ":%" PRIu32,
                     back, u->requests[i], u->tokens[i]);
        if (n < 0 || (size_t)n >= size - len)
            return; /* Q__USAGE_TEXT holds any usage: not reached */
        len += (size_t)n;
    }
}

/* Reads a decimal number in [0, max] at *p, moving *p past it. */
static bool
number(const char **p, uint64_t max, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (**p < '0' || **p > '9')
        return false;
    errno = 0;
    v = strtoull(*p, &end, 10);
    if (errno != 0 || v > max)
        return false;
    *p = end;
    *out = v;
    return true;
}

/* Reads one " BACK:REQUESTS:TOKENS" of a usage whose newest second is
 * last, at *p, into u; false (and *p anywhere) when it is not one. */
static bool
entry(const char **p, uint64_t last, struct q_tier_usage *u)
{
    uint64_t back, req, tok;
    size_t i;

    if (**p != ' ')
        return false;
    (*p)++;
    if (!number(p, Q_TIER_USAGE_SLOTS - 1, &back) || back >= last || **p != ':')
        return false;
    (*p)++;
    if (!number(p, UINT32_MAX, &req) || **p != ':')
        return false;
    (*p)++;
    if (!number(p, UINT32_MAX, &tok))
        return false;
    i = (size_t)((last - back) % Q_TIER_USAGE_SLOTS);
    u->requests[i] = (uint32_t)req;
    u->tokens[i] = (uint32_t)tok;
    return true;
}

void
q__usage_parse(const char *text, struct q_tier_usage *u)
{
    const char *p = text;
    uint64_t last;

    memset(u, 0, sizeof(*u));
    if (p == NULL || *p == '\0')
        return;
    if (!number(&p, INT64_MAX, &last)) {
        return;
    }
    u->last_s = (int64_t)last;
    while (*p != '\0') {
        if (!entry(&p, last, u)) {
            memset(u, 0, sizeof(*u)); /* not ours: nothing is known */
            return;
        }
    }
}

/* tier_text.c: the stored text of what a tier used and has in flight
 * (struct q_tier_usage, struct q_tier_flight), two text columns of the
 * tier's row in every backend, so that `stepq copy` moves them as it
 * moves any text. */
#include "queue/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "queue/tiers.h"

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

/* Reads " A:B" at *p: A in [0, amax], B in [0, bmax]. */
static bool
pair(const char **p, uint64_t amax, uint64_t *a, uint64_t bmax, uint64_t *b)
{
    if (**p != ' ')
        return false;
    (*p)++;
    if (!number(p, amax, a) || **p != ':')
        return false;
    (*p)++;
    return number(p, bmax, b);
}

/* ---- usage ----------------------------------------------------------- */

void
q__usage_format(const struct q_tier_usage *u, char *buf, size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    if (u->last_s <= 0 || !q__append(buf, size, &len, "%" PRId64, u->last_s))
        return;
    for (int64_t back = 0; back < Q_TIER_USAGE_SLOTS && back < u->last_s;
         back++) {
        size_t i = (size_t)((u->last_s - back) % Q_TIER_USAGE_SLOTS);
        if (u->requests[i] == 0 && u->tokens[i] == 0)
            continue;
        if (!q__append(buf, size, &len, " %" PRId64 ":%" PRIu32 ":%" PRIu32,
                       back, u->requests[i], u->tokens[i]))
            return;
    }
}

void
q__usage_parse(const char *text, struct q_tier_usage *u)
{
    const char *p = text;
    uint64_t last, back, req, tok;

    memset(u, 0, sizeof(*u));
    if (p == NULL || *p == '\0')
        return;
    if (!number(&p, INT64_MAX, &last))
        return;
    u->last_s = (int64_t)last;
    while (*p != '\0') {
        size_t i;
        /* " BACK:REQUESTS" then ":TOKENS" */
        if (!pair(&p, Q_TIER_USAGE_SLOTS - 1, &back, UINT32_MAX, &req) ||
            back >= last || *p++ != ':' || !number(&p, UINT32_MAX, &tok)) {
            memset(u, 0, sizeof(*u)); /* not ours: nothing is known */
            return;
        }
        i = (size_t)((last - back) % Q_TIER_USAGE_SLOTS);
        u->requests[i] = (uint32_t)req;
        u->tokens[i] = (uint32_t)tok;
    }
}

/* ---- flight ---------------------------------------------------------- */

void
q__flight_format(const struct q_tier_flight *f, char *buf, size_t size)
{
    size_t len = 0;
    int64_t prev = 0;

    buf[0] = '\0';
    if (f->n == 0 && f->probe_until == 0)
        return;
    if (!q__append(buf, size, &len, "%" PRId64, f->probe_until))
        return;
    for (int i = 0; i < f->n; i++) {
        if (!q__append(buf, size, &len, " %" PRId64 ":%" PRIu32,
                       f->at[i] - prev, f->count[i]))
            return;
        prev = f->at[i];
    }
}

void
q__flight_parse(const char *text, struct q_tier_flight *f)
{
    const char *p = text;
    uint64_t probe, d, c;
    int64_t at = 0;

    memset(f, 0, sizeof(*f));
    if (p == NULL || *p == '\0')
        return;
    if (!number(&p, INT64_MAX, &probe))
        return;
    f->probe_until = (int64_t)probe;
    while (*p != '\0') {
        if (f->n == Q_TIER_FLIGHT_MAX ||
            !pair(&p, (uint64_t)(INT64_MAX / 1000 - at), &d, UINT32_MAX, &c) ||
            d == 0 || c == 0) {
            memset(f, 0, sizeof(*f)); /* not ours: nothing is known */
            return;
        }
        at += (int64_t)d;
        f->at[f->n] = at;
        f->count[f->n++] = (uint32_t)c;
    }
}

/* use.c: what a tier used and has in flight, kept in its row (pure:
 * no I/O, no clock). Usage counts the sends and tokens of each second of
 * the last minute, for `stepq tiers` and the adaptive pace; the flight
 * counts the sends not answered yet by the second they expire, so a send
 * whose worker died stops counting then, with no log of sends to read or
 * prune. */
#include "tier/internal.h"

#include <assert.h>
#include <stdbool.h>
#include <string.h>

#include "queue/tiers.h"

static uint32_t
count_plus(uint32_t have, int64_t add)
{
    int64_t v = (int64_t)have + add;

    if (v < 0)
        return 0;
    return v > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* ---- usage: a minute, per second ----------------------------------- */

void
tier__usage_add(struct q_tier_usage *u, int64_t at, int64_t requests,
                int64_t tokens)
{
    int64_t s = at / 1000;
    size_t i;

    if (s <= 0)
        return;
    if (s > u->last_s) {
        /* The seconds between the newest counted and s start empty. */
        int64_t from = u->last_s > 0 && s - u->last_s < Q_TIER_USAGE_SLOTS
                           ? u->last_s + 1
                           : s - Q_TIER_USAGE_SLOTS + 1;
        for (int64_t k = from; k <= s; k++) {
            i = (size_t)(k % Q_TIER_USAGE_SLOTS);
            u->requests[i] = u->tokens[i] = 0;
        }
        u->last_s = s;
    } else if (s <= u->last_s - Q_TIER_USAGE_SLOTS) {
        return; /* past the window: no longer counted */
    }
    assert(s > u->last_s - Q_TIER_USAGE_SLOTS && s <= u->last_s);
    i = (size_t)(s % Q_TIER_USAGE_SLOTS);
    u->requests[i] = count_plus(u->requests[i], requests);
    u->tokens[i] = count_plus(u->tokens[i], tokens);
}

void
tier__usage_sum(const struct q_tier_usage *u, int64_t now, int64_t window_ms,
                int64_t *requests, int64_t *tokens)
{
    int64_t now_s = now / 1000, span = window_ms / 1000;
    int64_t from, to = now_s < u->last_s ? now_s : u->last_s;

    if (span > Q_TIER_USAGE_SLOTS)
        span = Q_TIER_USAGE_SLOTS;
    from = now_s - span + 1;
    if (from < u->last_s - Q_TIER_USAGE_SLOTS + 1)
        from = u->last_s - Q_TIER_USAGE_SLOTS + 1;
    if (from < 1)
        from = 1;
    *requests = *tokens = 0;
    for (int64_t s = from; s <= to; s++) {
        size_t i = (size_t)(s % Q_TIER_USAGE_SLOTS);
        *requests += u->requests[i];
        *tokens += u->tokens[i];
    }
}

/* The span is counted from the start of the first second in the window
 * that has sends: a tier that began sending two seconds ago has a rate of
 * its sends over two seconds, not ten. */
void
tier__usage_since(const struct q_tier_usage *u, int64_t now, int64_t window_ms,
                  int64_t *requests, int64_t *span_ms)
{
    int64_t now_s = now / 1000, span = window_ms / 1000, first = 0;
    int64_t from, to = now_s < u->last_s ? now_s : u->last_s;

    if (span > Q_TIER_USAGE_SLOTS)
        span = Q_TIER_USAGE_SLOTS;
    from = now_s - span + 1;
    if (from < u->last_s - Q_TIER_USAGE_SLOTS + 1)
        from = u->last_s - Q_TIER_USAGE_SLOTS + 1;
    if (from < 1)
        from = 1;
    *requests = 0;
    for (int64_t s = from; s <= to; s++) {
        uint32_t n = u->requests[(size_t)(s % Q_TIER_USAGE_SLOTS)];
        if (n > 0 && first == 0)
            first = s;
        *requests += n;
    }
    *span_ms = first > 0 ? now - first * 1000 : 0;
    if (*span_ms < 1000)
        *span_ms = 1000;
}

/* ---- flight: sends not answered, by the second they expire --------- */

/* The second from which a send that expires at expires_at (ms) no longer
 * counts: rounded up, so that it counts at least as long. */
static int64_t
flight_second(int64_t expires_at)
{
    return expires_at <= 0 ? 0 : (expires_at + 999) / 1000;
}

#ifndef NDEBUG
/* Whether f is as q__flight_parse and every change here keep it: at most
 * Q_TIER_FLIGHT_MAX seconds, strictly ascending, each with a count. For
 * assert. */
static bool
flight_ok(const struct q_tier_flight *f)
{
    if (f->n < 0 || f->n > Q_TIER_FLIGHT_MAX)
        return false;
    for (int i = 0; i < f->n; i++) {
        if (f->count[i] == 0 || (i > 0 && f->at[i] <= f->at[i - 1]))
            return false;
    }
    return true;
}
#endif

static void
flight_remove(struct q_tier_flight *f, int i, int k)
{
    assert(i >= 0 && k >= 0 && i + k <= f->n);
    memmove(&f->at[i], &f->at[i + k],
            (size_t)(f->n - i - k) * sizeof(f->at[0]));
    memmove(&f->count[i], &f->count[i + k],
            (size_t)(f->n - i - k) * sizeof(f->count[0]));
    f->n -= k;
}

void
tier__flight_prune(struct q_tier_flight *f, int64_t now)
{
    int k = 0;

    while (k < f->n && f->at[k] * 1000 <= now)
        k++;
    if (k > 0)
        flight_remove(f, 0, k);
    if (f->probe_until <= now)
        f->probe_until = 0;
}

void
tier__flight_add(struct q_tier_flight *f, int64_t expires_at, bool probe,
                 int64_t now)
{
    int64_t s = flight_second(expires_at);
    int i = 0;

    assert(flight_ok(f));
    tier__flight_prune(f, now);
    if (probe && expires_at > f->probe_until)
        f->probe_until = expires_at;
    while (i < f->n && f->at[i] < s)
        i++;
    if (i < f->n && f->at[i] == s) {
        f->count[i] = count_plus(f->count[i], 1);
    } else if (f->n < Q_TIER_FLIGHT_MAX) {
        memmove(&f->at[i + 1], &f->at[i],
                (size_t)(f->n - i) * sizeof(f->at[0]));
        memmove(&f->count[i + 1], &f->count[i],
                (size_t)(f->n - i) * sizeof(f->count[0]));
        f->at[i] = s;
        f->count[i] = 1;
        f->n++;
    } else if (i < f->n) {
        /* Full: the send counts until the next later second... */
        f->count[i] = count_plus(f->count[i], 1);
    } else {
        /* ...or the last second moves on to it: counted longer, never
         * shorter. */
        f->at[f->n - 1] = s;
        f->count[f->n - 1] = count_plus(f->count[f->n - 1], 1);
    }
    assert(flight_ok(f) && tier__flight_count(f, now) > 0);
}

void
tier__flight_end(struct q_tier_flight *f, int64_t expires_at, bool probe,
                 int64_t now)
{
    int64_t s = flight_second(expires_at);

    if (probe)
        f->probe_until = 0;
    /* A send counts in the first second at or after its own (a full
     * flight may have moved it later). One whose own second has passed
     * counts no more (what held it is gone, or goes soon): taking it out
     * again would take out another. */
    for (int i = 0; i < f->n && s * 1000 > now; i++) {
        if (f->at[i] < s)
            continue;
        if (--f->count[i] == 0)
            flight_remove(f, i, 1);
        break;
    }
    tier__flight_prune(f, now);
    assert(flight_ok(f));
}

int64_t
tier__flight_count(const struct q_tier_flight *f, int64_t now)
{
    int64_t n = 0;

    for (int i = 0; i < f->n; i++) {
        if (f->at[i] * 1000 > now)
            n += f->count[i];
    }
    return n;
}

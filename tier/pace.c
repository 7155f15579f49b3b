/* pace.c: the pace of a tier. The rate in force (the declared limit
 * or the one the endpoint's headers taught, times the adaptive pace), the
 * request and token buckets admission takes from (GCRA: each is one
 * theoretical arrival time kept in the tier's row), the limits learned from
 * headers, and the adaptive pace itself: down on a 429 despite pacing, back
 * up with every second without one. All of it is pure; tier.c reads and
 * writes the state around it.
 */
#include "tier/tier.h"

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <strings.h>

#include "queue/tiers.h"
#include "tier/internal.h"

/* Sends an estimate of a tier's own rate needs before it is believed:
 * TAKEN_MIN at all, SEEN_MIN in the last ten seconds before the last
 * minute is asked instead. */
#define TAKEN_MIN 5
#define SEEN_MIN  10

/* Adaptive pace: a 429 despite pacing multiplies the pace by PACE_DOWN (at
 * most once per PACE_DOWN_EVERY_MS, so one burst of 429s counts once); each
 * second without one gives back PACE_UP of the ceiling. */
#define PACE_DOWN          0.7
#define PACE_MIN           0.05
#define PACE_DOWN_EVERY_MS 1000
#define PACE_UP            0.01
/* Limits learned from 429s alone (no limit declared, none in headers):
 * a 429 while the tier is busy (sending at PACE_BUSY of its rate or more)
 * measures the rate the endpoint took, and the pace starts again
 * PACE_LEARNED below it. The pace climbs past the ceiling (up to
 * PACE_PROBE_MAX times it) while the tier is busy, since a measure is low
 * when the tier had less to send than the endpoint would take. */
#define PACE_LEARNED   0.9
#define PACE_PROBE_MAX 10.0
#define PACE_BUSY      0.8
/* Limits past these are not believed (a header with a typo, or a day's
 * allowance sent as if it were a minute's is still below them). */
#define LIMIT_MAX 100000000

/* A declared limit per window_s, as a per-minute figure. */
static double
per_minute(const struct config_tier *t, int64_t declared)
{
    double w = t->window_s > 0 ? t->window_s : 60.0;
    return declared > 0 ? (double)declared * 60.0 / w : 0.0;
}

/* The smaller of the positive ones; 0 when neither is. */
static double
ceiling(double declared, int64_t learned)
{
    if (learned > 0 && (declared <= 0 || (double)learned < declared))
        return (double)learned;
    return declared;
}

/* The pace goes above 1 only over a request ceiling learned from 429s. */
static double
pace_of(const struct q_tier_state *st)
{
    return st->pace > 0 && st->pace <= PACE_PROBE_MAX ? st->pace : 1.0;
}

static double
pace_within(const struct q_tier_state *st)
{
    double p = pace_of(st);

    return p < 1 ? p : 1.0;
}

double
tier_rate_rpm(const struct config_tier *t, const struct q_tier_state *st)
{
    double declared = per_minute(t, t->rpm);

    return ceiling(declared, st->learned_rpm) *
           (declared > 0 ? pace_within(st) : pace_of(st));
}

double
tier_rate_tpm(const struct config_tier *t, const struct q_tier_state *st)
{
    return ceiling(per_minute(t, t->tpm), st->learned_tpm) * pace_within(st);
}

/* The request bucket, with the guard struct tier__bucket describes. */
bool
tier__request_bucket(const struct config_tier *t, const struct q_tier_state *st,
                     struct tier__bucket *b)
{
    double rate = tier_rate_rpm(t, st), interval, burst, guard;

    if (rate <= 0)
        return false;
    interval = 60000.0 / rate;
    burst = t->burst > 0 ? (double)t->burst : rate / 60.0;
    if (burst < 1)
        burst = 1;
    burst = (double)(int64_t)burst;
    guard = interval / 2 < 50 ? interval / 2 : 50;
    b->cost_ms = interval;
    b->cap_ms = burst * interval - guard;
    if (burst <= 1) {
        /* A bucket of one has no burst to keep a guard in: space the
         * requests 5% (at most 50 ms, the guard of a larger bucket) wider
         * instead. What it covers is the time from admission to arrival,
         * which varies: the attempt's commit comes between them, and
         * PostgreSQL's under load took 30 ms longer for one send than for
         * the one before it (requests admitted 1,020 ms apart arrived 988
         * ms apart at a limit of one a second). */
        b->cost_ms = interval + (interval / 20 < 50 ? interval / 20 : 50);
        b->cap_ms = b->cost_ms;
    }
    return true;
}

/* The token bucket holds one second's worth of the token pace. A request
 * larger than that goes when the bucket is full, and the debt it leaves
 * holds the next ones back. */
bool
tier__token_bucket(const struct config_tier *t, const struct q_tier_state *st,
                   int64_t est_tokens, struct tier__bucket *b)
{
    double rate = tier_rate_tpm(t, st);

    if (rate <= 0)
        return false;
    b->cost_ms = (double)(est_tokens > 0 ? est_tokens : 0) * 60000.0 / rate;
    b->cap_ms = 1000.0;
    return true;
}

/* When the bucket whose theoretical arrival time is tat takes the request:
 * now, or the ms it must wait for. */
int64_t
tier__bucket_ready_at(double tat, const struct tier__bucket *b, int64_t now)
{
    double from = tat > (double)now ? tat : (double)now, at;

    if (b->cost_ms >= b->cap_ms) /* larger than the bucket: wait till full */
        at = from - (double)now > 0 ? tat : (double)now;
    else
        at = from + b->cost_ms - b->cap_ms;
    if (at <= (double)now)
        return now;
    return (int64_t)at + ((double)(int64_t)at < at);
}

double
tier__bucket_take(double tat, const struct tier__bucket *b, int64_t now)
{
    assert(b->cost_ms >= 0 && b->cap_ms > 0);
    return (tat > (double)now ? tat : (double)now) + b->cost_ms;
}

/* What the tier's own sends say the endpoint takes, per minute: the sends
 * it took (those refused were taken out of the count as they were
 * answered, and those still in flight prove nothing yet) over the span
 * they were sent in. The last ten seconds, or the last minute when they
 * hold too few to tell (a limit of a few a minute). 0: too few. */
static double
taken_rpm(const struct q_tier_state *st, int64_t now)
{
    static const int64_t windows[] = {10000, 60000};
    int64_t n = 0, span = 1000, flying = tier__flight_count(&st->flight, now);

    for (size_t i = 0; i < sizeof(windows) / sizeof(windows[0]); i++) {
        tier__usage_since(&st->usage, now, windows[i], &n, &span);
        n -= flying;
        if (n >= SEEN_MIN)
            break;
    }
    return n >= TAKEN_MIN ? (double)n * 60000.0 / (double)span : 0;
}

/* Whether the tier's sends of the last ten seconds (those the endpoint
 * took or has not answered) keep up with PACE_BUSY of its rate. */
static bool
busy(const struct q_tier_state *st, double rate, int64_t now)
{
    int64_t n, span;

    tier__usage_since(&st->usage, now, 10000, &n, &span);
    return (double)n * 60000.0 / (double)span >= PACE_BUSY * rate;
}

/* The tier's rate went over what the endpoint takes: lower the pace (once
 * per PACE_DOWN_EVERY_MS, however many answers of one burst say so).
 * When no limit is declared and the answer named none (learn), and the
 * tier knew no rate or was busy, the 429 measures the limit: the rate
 * the endpoint took (never above the rate that was refused) becomes the
 * rate, less PACE_LEARNED, and the ceiling when it is the highest seen.
 * The ceiling never falls: it is the scale the pace climbs back by (a
 * hundredth of it a second) and its floor (PACE_MIN of it), so that 429s
 * that come whatever the rate (an endpoint refusing a share of requests,
 * or one that takes less while cooling down after each 429) cannot wear
 * the rate down to nothing; nor does a measure lower the pace by more
 * than PACE_DOWN (what the endpoint took counts the time the tier cooled
 * down after its 429s). A 429 while the tier sent less than its rate
 * (one at a time in doubt, little to send, most sends refused) says
 * nothing of the limit: the pace falls by PACE_DOWN, as for a known limit.
 * With too few sends to tell and no rate known, only the cooldown acts. */
void
tier__pace_down(const struct config_tier *t, struct q_tier_state *st,
                bool learn, int64_t now)
{
    double rate = tier_rate_rpm(t, st), took = 0;

    if (now - st->pace_down_at < PACE_DOWN_EVERY_MS)
        return;
    if (learn && (rate <= 0 || busy(st, rate, now)))
        took = taken_rpm(st, now);
    if (took > 0) {
        double down = pace_of(st) * PACE_DOWN;
        if (rate > 0 && took > rate)
            took = rate;
        if (st->learned_rpm < 1 || took >= (double)st->learned_rpm + 0.5)
            st->learned_rpm = took < 1 ? 1 : (int64_t)(took + 0.5);
        st->pace = PACE_LEARNED * took / (double)st->learned_rpm;
        if (st->pace < down)
            st->pace = down;
    } else if (rate > 0) {
        st->pace = pace_within(st) * PACE_DOWN;
    } else {
        return;
    }
    if (st->pace < PACE_MIN)
        st->pace = PACE_MIN;
    assert(st->pace >= PACE_MIN && st->pace <= PACE_PROBE_MAX);
    st->pace_down_at = now;
    st->pace_up_at = now;
}

/* Each second without a 429 gives back PACE_UP of the ceiling. Over a
 * ceiling learned from 429s (learn: no limit declared, the answer named
 * none), it goes on past 1 while the tier's sends of the last ten seconds
 * keep up with PACE_BUSY of its rate: a rate measured while the tier had
 * less to send is found again, and one that was right ends in a 429 that
 * measures it anew. */
void
tier__pace_up(const struct config_tier *t, struct q_tier_state *st, bool learn,
              int64_t now)
{
    double p = pace_of(st), max = 1, rate;

    if (learn && per_minute(t, t->rpm) <= 0 && st->learned_rpm > 0 &&
        (rate = tier_rate_rpm(t, st)) > 0) {
        if (busy(st, rate, now))
            max = PACE_PROBE_MAX;
        else
            max = p > 1 ? p : 1; /* holds what it reached */
    }
    if (p < max && now > st->pace_up_at) {
        p += PACE_UP * (double)(now - st->pace_up_at) / 1000.0;
        p = p > max ? max : p;
    }
    st->pace = p > max ? max : p;
    assert(st->pace <= PACE_PROBE_MAX);
    st->pace_up_at = now;
}

/* A tier whose rate is not known at all (no rpm or max_inflight declared,
 * none learned) is met with a ramp (TCP's slow start) for its first
 * RAMP_MS of sending: half as many sends in flight as the endpoint took
 * in that time, plus one (at least RAMP_FLOOR), so that what it takes
 * grows by half with each round of answers and a limit is found by a few
 * 429s (about a third of what the endpoint took before it refused), not
 * by a flood of the worker's whole concurrency. Past RAMP_MS without a
 * 429 the tier is taken to have no limit and the ramp ends, so that an
 * endpoint that answers slowly is not held to a few sends per answer. */
#define RAMP_MS    3000
#define RAMP_FLOOR 4

bool
tier__ramp_full(const struct config_tier *t, const struct q_tier_state *st,
                int64_t now)
{
    int64_t n, span, allowed;

    if (tier_rate_rpm(t, st) > 0 || t->max_inflight > 0 || st->in_flight <= 0)
        return false;
    /* Over the last minute: with a span under RAMP_MS, all of it is
     * in the last RAMP_MS. */
    tier__usage_since(&st->usage, now, 60000, &n, &span);
    if (span >= RAMP_MS)
        return false;
    allowed = (n - st->in_flight) / 2 + 1;
    return st->in_flight >= (allowed > RAMP_FLOOR ? allowed : RAMP_FLOOR);
}

void
tier__learn_limits(struct q_tier_state *st, const struct tier_outcome *o)
{
    if (o->limit_rpm > 0 && o->limit_rpm <= LIMIT_MAX)
        st->learned_rpm = o->limit_rpm;
    if (o->limit_tpm > 0 && o->limit_tpm <= LIMIT_MAX)
        st->learned_tpm = o->limit_tpm;
}

static bool
name_is(const char *name, const char *want)
{
    return strcasecmp(name, want) == 0;
}

void
tier_limits_from_headers(const struct policy_header *h, size_t n, int64_t *rpm,
                         int64_t *tpm)
{
    *rpm = *tpm = 0;
    for (size_t i = 0; h != NULL && i < n; i++) {
        int64_t v;
        if (h[i].name == NULL || h[i].value == NULL ||
            policy_parse_count(h[i].value, &v) != 0 || v <= 0 || v > LIMIT_MAX)
            continue; /* Azure's -1 and the like */
        if (name_is(h[i].name, "x-ratelimit-limit-requests") ||
            name_is(h[i].name, "anthropic-ratelimit-requests-limit"))
            *rpm = v;
        else if (name_is(h[i].name, "x-ratelimit-limit-tokens") ||
                 name_is(h[i].name, "anthropic-ratelimit-tokens-limit"))
            *tpm = v;
    }
}

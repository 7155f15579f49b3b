/* tier.c: admission and tier state.
 *
 * Providers enforce their limits in short slices (OpenAI may hold 60,000
 * RPM to 1,000 a second; Anthropic refills a token bucket continuously),
 * so a tier is paced, not windowed: a request bucket and a token bucket,
 * each kept as one number in the tier's row (GCRA's theoretical arrival
 * time), shared by every process on the database. Admission is one row
 * read and one row write per send, plus the send log that tells what is
 * in flight.
 */
#include "worker/tier.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A probe or request whose worker died stops counting as in flight after
 * its timeout plus this margin. */
#define EXPIRY_MARGIN_MS 30000
/* Hint for "wait until one in flight finishes" (the worker also wakes its
 * waiting runs when an answer settles). */
#define INFLIGHT_RETRY_MS 250
/* Sends are kept in the log this long: `stepq tiers` counts the last
 * minute, and a peer whose clock lags ours must still see them. */
#define SEND_LOG_MS (2 * 60000)
/* Adaptive pace: a 429 despite pacing multiplies the pace by PACE_DOWN (at
 * most once per PACE_DOWN_EVERY_MS, so one burst of 429s counts once); each
 * second without one gives back PACE_UP of the ceiling. */
#define PACE_DOWN          0.7
#define PACE_MIN           0.05
#define PACE_DOWN_EVERY_MS 1000
#define PACE_UP            0.01
/* Limits past these are not believed (a header with a typo, or a day's
 * allowance sent as if it were a minute's is still below them). */
#define LIMIT_MAX           100000000
#define RESET_MAX_MS        (24 * 3600 * 1000)
#define THROTTLE_DEFAULT_MS 1000

void
tier_outcome_init(struct tier_outcome *o)
{
    *o = (struct tier_outcome){.result = TIER_RESULT_NEUTRAL,
                               .tokens = -1,
                               .sent_at = -1,
                               .throttle_ms = -1,
                               .remaining_requests = -1,
                               .requests_reset_at = -1,
                               .remaining_tokens = -1,
                               .tokens_reset_at = -1};
}

/* Allowance windows are aligned to the epoch, so a "day" is a UTC day:
 * most providers reset daily caps at midnight UTC. */
static int64_t
allowance_start(const struct config_tier *t, int64_t now)
{
    int64_t w = t->allowance_window_s * 1000;
    return w > 0 ? now - now % w : 0;
}

int64_t
tier_wall_until(const struct config_tier *t, int64_t now)
{
    if (t->allowance_tokens > 0 && t->allowance_window_s > 0)
        return allowance_start(t, now) + t->allowance_window_s * 1000;
    return now + 3600 * 1000;
}

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

static double
pace_of(const struct q_tier_state *st)
{
    return st->pace > 0 && st->pace <= 1 ? st->pace : 1.0;
}

double
tier_rate_rpm(const struct config_tier *t, const struct q_tier_state *st)
{
    return ceiling(per_minute(t, t->rpm), st->learned_rpm) * pace_of(st);
}

double
tier_rate_tpm(const struct config_tier *t, const struct q_tier_state *st)
{
    return ceiling(per_minute(t, t->tpm), st->learned_tpm) * pace_of(st);
}

/* The request bucket: one request costs 60000/rate ms of "theoretical
 * arrival time" (GCRA); the bucket holds burst requests. A send admitted
 * now reaches the endpoint a loop turn later, and that delay varies: the
 * guard keeps half a request (at most 50 ms) of the burst unused, so a
 * send that arrives early still finds a token. It lowers the first burst,
 * not the pace. */
struct bucket {
    double cost_ms; /* what this request costs */
    double cap_ms;  /* what the bucket holds, less the guard */
};

static bool
request_bucket(const struct config_tier *t, const struct q_tier_state *st,
               struct bucket *b)
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
         * requests 2% (at most 20 ms) wider instead. */
        b->cost_ms = interval + (interval / 50 < 20 ? interval / 50 : 20);
        b->cap_ms = b->cost_ms;
    }
    return true;
}

/* The token bucket holds one second's worth of the token pace. A request
 * larger than that goes when the bucket is full, and the debt it leaves
 * holds the next ones back. */
static bool
token_bucket(const struct config_tier *t, const struct q_tier_state *st,
             int64_t est_tokens, struct bucket *b)
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
static int64_t
bucket_ready_at(double tat, const struct bucket *b, int64_t now)
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

static double
bucket_take(double tat, const struct bucket *b, int64_t now)
{
    return (tat > (double)now ? tat : (double)now) + b->cost_ms;
}

static void
say_no(struct tier_verdict *out, const char *reason, int64_t retry_at)
{
    out->admitted = false;
    out->probe = false;
    out->reason = reason;
    out->retry_at = retry_at;
}

/* A wall whose time is over leaves the tier in doubt: the next request
 * finds out whether it really lifted. */
static bool
in_doubt(const struct q_tier_state *st, int64_t now)
{
    return st->doubt || (st->exhausted_until > 0 && st->exhausted_until <= now);
}

void
tier_evaluate(const struct config_tier *t, const struct q_tier_state *st,
              int64_t now, int64_t est_tokens, bool continuing,
              struct tier_verdict *out)
{
    int64_t used = st->allowance_used, at;
    struct bucket b;
    bool probe = false;

    if (st->exhausted_until > now) {
        say_no(out, "exhausted", st->exhausted_until);
        return;
    }
    if (st->breaker == Q_BREAKER_OPEN && now < st->open_until) {
        say_no(out, "breaker_open", st->open_until);
        return;
    }
    if (st->breaker != Q_BREAKER_CLOSED) {
        /* Cooldown over (or half-open): exactly one probe at a time. */
        if (st->probe_in_flight) {
            say_no(out, "half_open_probe", now + INFLIGHT_RETRY_MS);
            return;
        }
        probe = true;
    }
    if (st->limited_until > now) {
        say_no(out, "cooldown", st->limited_until);
        return;
    }
    if (t->max_inflight > 0 && st->in_flight >= t->max_inflight) {
        say_no(out, "max_inflight", now + INFLIGHT_RETRY_MS);
        return;
    }
    if (in_doubt(st, now) && st->in_flight > 0) {
        say_no(out, "in_doubt", now + INFLIGHT_RETRY_MS);
        return;
    }
    if (request_bucket(t, st, &b) &&
        (at = bucket_ready_at(st->req_tat, &b, now)) > now) {
        say_no(out, "rpm", at);
        return;
    }
    if (token_bucket(t, st, est_tokens, &b) &&
        (at = bucket_ready_at(st->tok_tat, &b, now)) > now) {
        say_no(out, "tpm", at);
        return;
    }
    if (t->allowance_tokens > 0) {
        double cap = (double)t->allowance_tokens;
        if (st->allowance_since < allowance_start(t, now))
            used = 0; /* a new window began */
        if (!continuing)
            cap *= t->degrade_at;
        if ((double)(used + est_tokens) > cap) {
            say_no(out, "allowance", tier_wall_until(t, now));
            return;
        }
    }
    out->admitted = true;
    out->probe = probe;
    out->reason = NULL;
    out->retry_at = now;
}

/* Loads a tier's state inside the caller's transaction, with the
 * allowance rolled over when its window ended. */
static int
load(q_db *db, const struct config_tier *t, int64_t now, bool full,
     struct q_tier_state *st)
{
    /* Admission needs no window counts (the buckets are in the row), and
     * what is in flight only under a cap (the queue counts it anyway in
     * doubt and while the breaker is not closed). */
    struct q_tier_window win = {60000, full ? -1 : 0, full,
                                full || t->max_inflight > 0};
    int rc = q_tier_load(db, t->name, now, &win, st);

    if (rc == 0 && t->allowance_tokens > 0 &&
        st->allowance_since < allowance_start(t, now)) {
        st->allowance_used = 0;
        st->allowance_since = allowance_start(t, now);
    }
    return rc;
}

static int
admit_locked(q_db *db, const struct config_tier *t, int64_t now,
             int64_t est_tokens, bool continuing, struct tier_verdict *v,
             int64_t *send_id)
{
    struct q_tier_state st;
    struct bucket b;
    int64_t expires = now + (int64_t)(t->timeout_s * 1000) + EXPIRY_MARGIN_MS;
    int rc;

    if ((rc = q_tier_prune(db, t->name, now - SEND_LOG_MS)) != 0 ||
        (rc = load(db, t, now, false, &st)) != 0)
        return rc;
    tier_evaluate(t, &st, now, est_tokens, continuing, v);
    if (!v->admitted)
        return 0;
    if (v->probe)
        st.breaker = Q_BREAKER_HALF_OPEN;
    if (in_doubt(&st, now)) {
        st.doubt = true;
        st.exhausted_until = 0;
        st.exhausted_reason[0] = '\0';
    }
    if (request_bucket(t, &st, &b))
        st.req_tat = bucket_take(st.req_tat, &b, now);
    if (token_bucket(t, &st, est_tokens, &b))
        st.tok_tat = bucket_take(st.tok_tat, &b, now);
    st.allowance_used += est_tokens;
    if ((rc = q_tier_send_add(db, t->name, now, est_tokens, v->probe, expires,
                              send_id)) != 0)
        return rc;
    return q_tier_store(db, t->name, &st);
}

int
tier_admit(q_db *db, const struct config_tier *t, int64_t now,
           int64_t est_tokens, bool continuing, struct tier_verdict *v,
           int64_t *send_id)
{
    struct tier_verdict got;
    int64_t id = 0;
    int rc = q_tx_begin(db);

    if (rc != 0)
        return rc;
    rc = admit_locked(db, t, now, est_tokens < 0 ? 0 : est_tokens, continuing,
                      &got, &id);
    if (rc != 0) {
        q_tx_rollback(db);
        return rc;
    }
    if ((rc = q_tx_commit(db)) != 0)
        return rc;
    *v = got;
    if (got.admitted)
        *send_id = id;
    return 0;
}

static void
apply_breaker(const struct config_tier *t, struct q_tier_state *st,
              enum tier_result r, int64_t now)
{
    switch (r) {
    case TIER_RESULT_OK:
        st->breaker = Q_BREAKER_CLOSED;
        st->failures = 0;
        st->open_until = 0;
        st->doubt = false;
        break;
    case TIER_RESULT_FAILURE:
        st->failures++;
        st->doubt = true;
        if (st->breaker == Q_BREAKER_HALF_OPEN ||
            st->failures >= t->breaker.failures) {
            st->breaker = Q_BREAKER_OPEN;
            st->open_until = now + (int64_t)(t->breaker.cooldown_s * 1000);
        }
        break;
    case TIER_RESULT_NEUTRAL:
        break;
    }
}

static void
keep_later(int64_t *slot, int64_t v)
{
    if (v > *slot)
        *slot = v;
}

/* Sends an estimate of a tier's own rate needs before it is believed. */
#define SEEN_MIN 10

/* The tier's rate went over what the endpoint takes: lower the pace (once
 * per PACE_DOWN_EVERY_MS, however many answers of one burst say so). With
 * no limit known at all, the rate of the last ten seconds (seen, counted
 * before the refused send left the log) becomes the ceiling the pace
 * applies to, once there are enough sends to tell; until then only the
 * cooldown acts. */
static void
pace_down(const struct config_tier *t, struct q_tier_state *st, int64_t seen,
          int64_t now)
{
    if (now - st->pace_down_at < PACE_DOWN_EVERY_MS)
        return;
    if (tier_rate_rpm(t, st) <= 0) {
        if (seen < SEEN_MIN)
            return;
        st->learned_rpm = seen * 6;
    }
    st->pace = pace_of(st) * PACE_DOWN;
    if (st->pace < PACE_MIN)
        st->pace = PACE_MIN;
    st->pace_down_at = now;
    st->pace_up_at = now;
}

/* Each second without a 429 gives back PACE_UP of the ceiling. */
static void
pace_up(struct q_tier_state *st, int64_t now)
{
    double p = pace_of(st);

    if (p < 1 && now > st->pace_up_at) {
        p += PACE_UP * (double)(now - st->pace_up_at) / 1000.0;
        st->pace = p > 1 ? 1 : p;
    }
    st->pace_up_at = now;
}

/* "Remaining 0" means the tier waits for the reset. When the endpoint
 * also said its limit, the reset of one request's share comes sooner (a
 * token bucket refills continuously): the wait is the smaller of the two,
 * counted from when the request left, which is when the endpoint counted
 * it. Resets past a day are not believed. */
static int64_t
remaining_wait_until(int64_t remaining, int64_t reset_at, int64_t limit,
                     int64_t sent_at, int64_t now)
{
    int64_t until = reset_at, from = sent_at > 0 ? sent_at : now;

    if (remaining != 0 || reset_at <= now || reset_at - now > RESET_MAX_MS)
        return 0;
    if (limit > 0 && from + 60000 / limit < until)
        until = from + 60000 / limit;
    return until;
}

static int
settle_locked(q_db *db, const struct config_tier *t, int64_t send_id,
              int64_t now, const struct tier_outcome *o, bool *reopened)
{
    struct q_tier_state st;
    int64_t old = 0;
    bool held;
    int rc;

    if ((rc = load(db, t, now, false, &st)) != 0)
        return rc;
    held = st.doubt || st.breaker == Q_BREAKER_HALF_OPEN;
    if (o->paced_down && tier_rate_rpm(t, &st) <= 0) {
        struct q_tier_window win = {10000, -1, false, false};
        struct q_tier_state seen;
        if ((rc = q_tier_load(db, t->name, now, &win, &seen)) != 0)
            return rc;
        st.window_requests = seen.window_requests;
    }
    /* A send the endpoint refused for its rate (or that never left) used
     * none of the allowance: it leaves the log. */
    if (o->uncounted)
        rc = q_tier_send_drop(db, send_id, &old);
    else
        rc = q_tier_send_done(db, send_id, o->tokens, now, &old);
    if (rc != 0)
        return rc;
    if (o->uncounted)
        st.allowance_used -= old;
    else if (o->tokens >= 0)
        st.allowance_used += o->tokens - old;
    if (st.allowance_used < 0)
        st.allowance_used = 0;
    apply_breaker(t, &st, o->result, now);
    if (o->exhausted_until > st.exhausted_until) {
        st.exhausted_until = o->exhausted_until;
        snprintf(st.exhausted_reason, sizeof(st.exhausted_reason), "%s",
                 o->exhausted_reason ? o->exhausted_reason : "hard_quota");
    }
    if (o->limit_rpm > 0 && o->limit_rpm <= LIMIT_MAX)
        st.learned_rpm = o->limit_rpm;
    if (o->limit_tpm > 0 && o->limit_tpm <= LIMIT_MAX)
        st.learned_tpm = o->limit_tpm;
    keep_later(&st.limited_until,
               remaining_wait_until(o->remaining_requests, o->requests_reset_at,
                                    o->limit_rpm, o->sent_at, now));
    keep_later(&st.limited_until,
               remaining_wait_until(o->remaining_tokens, o->tokens_reset_at, 0,
                                    o->sent_at, now));
    if (o->throttle_ms >= 0) {
        /* The whole tier cools down for the wait the endpoint named. */
        int64_t wait =
            o->throttle_ms > 0 ? o->throttle_ms : THROTTLE_DEFAULT_MS;
        keep_later(&st.limited_until,
                   now + (wait < RESET_MAX_MS ? wait : RESET_MAX_MS));
        if (o->paced_down)
            pace_down(t, &st, st.window_requests, now);
    } else if (o->result == TIER_RESULT_OK) {
        pace_up(&st, now);
    }
    *reopened = t->max_inflight > 0 ||
                (held && !st.doubt && st.breaker == Q_BREAKER_CLOSED);
    return q_tier_store(db, t->name, &st);
}

int
tier_settle(q_db *db, const struct config_tier *t, int64_t send_id, int64_t now,
            const struct tier_outcome *o, bool *reopened)
{
    bool again = false;
    int rc = q_tx_begin(db);

    if (rc != 0)
        return rc;
    rc = settle_locked(db, t, send_id, now, o, &again);
    if (rc != 0) {
        q_tx_rollback(db);
        return rc;
    }
    if ((rc = q_tx_commit(db)) != 0)
        return rc;
    if (reopened != NULL)
        *reopened = again;
    return 0;
}

int
tier_snapshot(q_db *db, const struct config_tier *t, int64_t now, bool full,
              struct q_tier_state *out)
{
    struct q_tier_state st;
    int rc = load(db, t, now, full, &st);

    if (rc == 0)
        *out = st;
    return rc;
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

/* FNV-1a over the fields that define where and how requests go; a change
 * of any of them lifts an auth wall. Not a secret: no key is hashed, only
 * the name of its environment variable. */
static void
config_hash(const struct config_tier *t, char out[65])
{
    const char *parts[] = {t->name, t->base_url, t->model,
                           t->api_key_env ? t->api_key_env : ""};
    uint64_t h = 1469598103934665603ULL;

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(parts); i++) {
        for (const char *p = parts[i]; *p; p++) {
            h ^= (unsigned char)*p;
            h *= 1099511628211ULL;
        }
        h ^= 0xff;
        h *= 1099511628211ULL;
    }
    snprintf(out, 65, "%016llx", (unsigned long long)h);
}

static int
sync_locked(q_db *db, const struct config_tier *t)
{
    struct q_tier_state st;
    char hash[65];
    int rc;

    if ((rc = q_tier_load(db, t->name, 0, NULL, &st)) != 0)
        return rc;
    config_hash(t, hash);
    st.doubt = true;
    if (strcmp(hash, st.config_hash) != 0 &&
        strcmp(st.exhausted_reason, "auth") == 0) {
        st.exhausted_until = 0;
        st.exhausted_reason[0] = '\0';
    }
    memcpy(st.config_hash, hash, sizeof(hash));
    return q_tier_store(db, t->name, &st);
}

int
tier_sync_config(q_db *db, const struct config_tier *t)
{
    int rc = q_tx_begin(db);

    if (rc != 0)
        return rc;
    rc = sync_locked(db, t);
    if (rc != 0) {
        q_tx_rollback(db);
        return rc;
    }
    return q_tx_commit(db);
}

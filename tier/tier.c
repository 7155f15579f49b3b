/* tier.c: admission and tier state in the database: evaluate, admit,
 * settle, snapshot and the config sync. The pace (rates, buckets, learned
 * limits, adaptive pace) is in pace.c.
 *
 * Providers enforce their limits in short slices (OpenAI may hold 60,000
 * RPM to 1,000 a second; Anthropic refills a token bucket continuously),
 * so a tier is paced, not windowed: a request bucket and a token bucket,
 * each kept as one number in the tier's row (GCRA's theoretical arrival
 * time), shared by every process on the database. Admission is one row
 * read and one row write per send: what is in flight (struct
 * q_tier_flight) and what the last minute used (struct q_tier_usage) are
 * counted in the row too, not read from a log of sends.
 */
#include "tier/tier.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "queue/tiers.h"
#include "tier/internal.h"

/* A probe or request whose worker died stops counting as in flight after
 * its timeout plus this margin. */
#define EXPIRY_MARGIN_MS 30000
/* Hint for "wait until one in flight finishes" (the worker also wakes its
 * waiting runs when an answer settles). */
#define INFLIGHT_RETRY_MS 250
/* Resets past a day are not believed (the bound every header has). */
#define RESET_MAX_MS        POLICY_HEADER_WAIT_MAX_MS
#define THROTTLE_DEFAULT_MS 1000

void
tier_outcome_init(struct tier_outcome *o)
{
    *o = (struct tier_outcome){.result = TIER_RESULT_NEUTRAL,
                               .tokens = -1,
                               .charged = -1,
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
    struct tier__bucket b;
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
        /* One at a time: "failing" after a server error or timeout (a step
         * that prefers the tier passes it over), "in_doubt" when its state
         * is only unknown (worker start, a wall just ended: it waits). */
        say_no(out, st->failures > 0 ? "failing" : "in_doubt",
               now + INFLIGHT_RETRY_MS);
        return;
    }
    if (tier__ramp_full(t, st, now)) {
        say_no(out, "ramp", now + INFLIGHT_RETRY_MS);
        return;
    }
    if (tier__request_bucket(t, st, &b) &&
        (at = tier__bucket_ready_at(st->req_tat, &b, now)) > now) {
        say_no(out, "rpm", at);
        return;
    }
    if (tier__token_bucket(t, st, est_tokens, &b) &&
        (at = tier__bucket_ready_at(st->tok_tat, &b, now)) > now) {
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

bool
tier_reason_is_pace(const char *reason)
{
    static const char *const paced[] = {"rpm",          "tpm",      "cooldown",
                                        "max_inflight", "in_doubt", "ramp"};

    for (size_t i = 0; reason != NULL && i < STEPQ_ARRAY_LEN(paced); i++) {
        if (strcmp(reason, paced[i]) == 0)
            return true;
    }
    return false;
}

/* Loads a tier's state inside the caller's transaction, with the
 * allowance rolled over when its window ended. */
static int
load(q_db *db, const struct config_tier *t, int64_t now, bool full,
     struct q_tier_state *st)
{
    int rc = q_tier_load(db, t->name, st);

    if (rc != 0)
        return rc;
    st->in_flight = tier__flight_count(&st->flight, now);
    st->probe_in_flight = st->flight.probe_until > now;
    /* Admission needs no window counts: the buckets are in the row. */
    if (full)
        tier__usage_sum(&st->usage, now, 60000, &st->window_requests,
                        &st->window_tokens);
    if (t->allowance_tokens > 0 &&
        st->allowance_since < allowance_start(t, now)) {
        st->allowance_used = 0;
        st->allowance_since = allowance_start(t, now);
    }
    return 0;
}

/* A send is known to tier_settle by when it expires and whether it is
 * the probe: all the flight needs to take it out again. send_handle makes
 * the handle, send_expires and send_is_probe read it back. */
static int64_t
send_handle(int64_t expires, bool probe)
{
    return expires * 2 + (probe ? 1 : 0);
}

static int64_t
send_expires(int64_t handle)
{
    return handle / 2;
}

static bool
send_is_probe(int64_t handle)
{
    return handle % 2 != 0;
}

static int
admit_locked(q_db *db, const struct config_tier *t, int64_t now,
             int64_t est_tokens, bool continuing, struct tier_verdict *v,
             int64_t *send_id)
{
    struct q_tier_state st;
    struct tier__bucket b;
    int64_t expires = now + (int64_t)(t->timeout_s * 1000) + EXPIRY_MARGIN_MS;
    int rc;

    if ((rc = load(db, t, now, false, &st)) != 0)
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
    if (tier__request_bucket(t, &st, &b))
        st.req_tat = tier__bucket_take(st.req_tat, &b, now);
    if (tier__token_bucket(t, &st, est_tokens, &b))
        st.tok_tat = tier__bucket_take(st.tok_tat, &b, now);
    st.allowance_used += est_tokens;
    tier__usage_add(&st.usage, now, 1, est_tokens);
    tier__flight_add(&st.flight, expires, v->probe, now);
    /* What it admitted is paid for: the buckets' next free moment is not
     * before now. */
    assert(!tier__request_bucket(t, &st, &b) || st.req_tat >= (double)now);
    assert(est_tokens >= 0 && st.allowance_used >= est_tokens);
    if ((rc = q_tier_store(db, t->name, &st)) == 0)
        *send_id = send_handle(expires, v->probe);
    return rc;
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

/* "Remaining 0" means the tier waits for the reset. When the endpoint
 * also said its limit, the reset of one request's share comes sooner (a
 * token bucket refills continuously): the wait is the smaller of the two,
 * counted from when the request left, which is when the endpoint counted
 * it, plus the guard of a bucket of one (5% of the share, at most 50 ms:
 * pace.c), since the next request may take less time to arrive than
 * this one did (it came 8 ms early, and a 429 taught a slower pace).
 * Resets past a day are not believed. */
static int64_t
remaining_wait_until(int64_t remaining, int64_t reset_at, int64_t limit,
                     int64_t sent_at, int64_t now)
{
    int64_t until = reset_at, from = sent_at > 0 ? sent_at : now;
    int64_t share = limit > 0 ? 60000 / limit : 0;

    if (remaining != 0 || reset_at <= now || reset_at - now > RESET_MAX_MS)
        return 0;
    if (limit > 0 && from + share < until)
        until = from + share + (share / 20 < 50 ? share / 20 : 50);
    return until;
}

/* The request bucket holds nothing at until: it did not fill while the
 * tier was stopped, so the runs waiting for it go out one a share apart
 * when it opens, in order, not as one burst of the bucket's size. */
static void
empty_bucket_until(const struct config_tier *t, struct q_tier_state *st,
                   int64_t until)
{
    struct tier__bucket b;
    double tat;

    if (!tier__request_bucket(t, st, &b))
        return;
    tat = (double)until + b.cap_ms - b.cost_ms;
    if (st->req_tat < tat)
        st->req_tat = tat;
}

static int
settle_locked(q_db *db, const struct config_tier *t, int64_t send_id,
              int64_t now, const struct tier_outcome *o, bool *reopened)
{
    struct q_tier_state st;
    int64_t old = o->charged > 0 ? o->charged : 0;
    int64_t sent = o->sent_at >= 0 ? o->sent_at : now;
    /* With no limit declared and none in the answer's headers, the
     * tier's rate is learned from its 429s (pace.c). */
    bool learn = t->rpm <= 0 && o->limit_rpm <= 0;
    bool held, was_open;
    int rc;

    if ((rc = load(db, t, now, false, &st)) != 0)
        return rc;
    held = st.doubt || st.breaker == Q_BREAKER_HALF_OPEN;
    was_open = st.breaker == Q_BREAKER_OPEN;
    /* The send is no longer in flight (one that expired meanwhile, its
     * worker having lost the store for that long, is gone already). */
    tier__flight_end(&st.flight, send_expires(send_id), send_is_probe(send_id),
                     now);
    /* A send the endpoint refused for its rate (or that never left) used
     * none of the allowance, and is not counted as used; otherwise the
     * reported tokens replace the estimate. Both in the second it was
     * admitted in, while that is still counted. */
    if (o->uncounted) {
        st.allowance_used -= old;
        tier__usage_add(&st.usage, sent, -1, -old);
    } else if (o->tokens >= 0) {
        st.allowance_used += o->tokens - old;
        tier__usage_add(&st.usage, sent, 0, o->tokens - old);
    }
    if (st.allowance_used < 0)
        st.allowance_used = 0;
    apply_breaker(t, &st, o->result, now);
    if (o->exhausted_until > st.exhausted_until) {
        st.exhausted_until = o->exhausted_until;
        snprintf(st.exhausted_reason, sizeof(st.exhausted_reason), "%s",
                 o->exhausted_reason ? o->exhausted_reason : "hard_quota");
    }
    tier__learn_limits(&st, o);
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
            tier__pace_down(t, &st, learn, now);
        empty_bucket_until(t, &st, st.limited_until);
    } else if (o->result == TIER_RESULT_OK) {
        tier__pace_up(t, &st, learn, now);
    }
    /* A success also lets a tier's ramp send more (pace.c). */
    *reopened = t->max_inflight > 0 ||
                (held && !st.doubt && st.breaker == Q_BREAKER_CLOSED) ||
                (o->result == TIER_RESULT_OK && tier_rate_rpm(t, &st) <= 0);
    /* An opening (not a failure while already open) is an event the
     * morning report counts; it joins the turn as the state does. */
    if (!was_open && st.breaker == Q_BREAKER_OPEN &&
        (rc = q_tier_event_add(db, t->name, now, "breaker_open")) != 0)
        return rc;
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
tier_unsent(q_db *db, const struct config_tier *t, int64_t send_id, int64_t est,
            int64_t at, int64_t now)
{
    struct tier_outcome o;

    tier_outcome_init(&o);
    o.uncounted = true;
    o.charged = est;
    o.sent_at = at;
    return tier_settle(db, t, send_id, now, &o, NULL);
}

int
tier_forget_send(q_db *db, const struct config_tier *t, int64_t sent_at,
                 int64_t now)
{
    struct q_tier_state st;
    int64_t expires =
        sent_at + (int64_t)(t->timeout_s * 1000) + EXPIRY_MARGIN_MS;
    int rc = q_tx_begin(db);

    if (rc != 0)
        return rc;
    if ((rc = load(db, t, now, false, &st)) == 0) {
        /* admit_locked set a probe's end to its exact expiry. */
        tier__flight_end(&st.flight, expires, st.flight.probe_until == expires,
                         now);
        rc = q_tier_store(db, t->name, &st);
    }
    if (rc != 0) {
        q_tx_rollback(db);
        return rc;
    }
    return q_tx_commit(db);
}

static void config_hash(const struct config_tier *t, char out[65]);

/* A config whose hash differs from the one stored with the tier's state
 * has changed since: it lifts an auth wall (the key, or where it goes, is
 * new). */
static void
lift_auth_wall(struct q_tier_state *st, const char hash[65])
{
    if (strcmp(hash, st->config_hash) != 0 &&
        policy_reason_is_config_wall(st->exhausted_reason)) {
        st->exhausted_until = 0;
        st->exhausted_reason[0] = '\0';
    }
}

int
tier_snapshot(q_db *db, const struct config_tier *t, int64_t now, bool full,
              struct q_tier_state *out)
{
    struct q_tier_state st;
    char hash[65];
    int rc = load(db, t, now, full, &st);

    if (rc != 0)
        return rc;
    /* Shown as the next worker will find it (sync_locked). */
    if (full && policy_reason_is_config_wall(st.exhausted_reason)) {
        config_hash(t, hash);
        lift_auth_wall(&st, hash);
    }
    *out = st;
    return 0;
}

static void
fnv_part(uint64_t *h, const char *s)
{
    for (const char *p = s; *p; p++) {
        *h ^= (unsigned char)*p;
        *h *= 1099511628211ULL;
    }
    *h ^= 0xff;
    *h *= 1099511628211ULL;
}

/* FNV-1a over the fields that define where and how requests go; a change
 * of any of them lifts an auth wall. Not a secret: no key is hashed, only
 * the name of its environment variable (and env: values are hashed as
 * written, "env:NAME"). auth, headers and query are hashed only when set,
 * so a config without them keeps the hash it had before they existed. */
static void
config_hash(const struct config_tier *t, char out[65])
{
    const char *parts[] = {t->name, t->base_url, t->model,
                           t->api_key_env ? t->api_key_env : ""};
    uint64_t h = 1469598103934665603ULL;

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(parts); i++)
        fnv_part(&h, parts[i]);
    /* The api moves the key to another header: only when not openai. */
    if (t->api != CONFIG_API_OPENAI)
        fnv_part(&h, config_api_name(t->api));
    if (t->auth != CONFIG_AUTH_DEFAULT) {
        fnv_part(&h, config_auth_name(t->auth));
        fnv_part(&h, t->auth_header ? t->auth_header : "");
    }
    for (size_t i = 0; i < t->nheaders; i++) {
        fnv_part(&h, t->headers[i].name);
        fnv_part(&h, t->headers[i].value);
    }
    if (t->nquery > 0)
        fnv_part(&h, "?");
    for (size_t i = 0; i < t->nquery; i++) {
        fnv_part(&h, t->query[i].name);
        fnv_part(&h, t->query[i].value);
    }
    /* TLS settings too (a client certificate refused is a 401 or 403):
     * only when set, like auth. */
    if (t->ca_file || t->ca_path || t->client_cert) {
        const char *tls[] = {t->ca_file, t->ca_path, t->client_cert,
                             t->client_key};
        fnv_part(&h, "tls");
        for (size_t i = 0; i < STEPQ_ARRAY_LEN(tls); i++)
            fnv_part(&h, tls[i] ? tls[i] : "");
    }
    snprintf(out, 65, "%016llx", (unsigned long long)h);
}

static int
sync_locked(q_db *db, const struct config_tier *t, int64_t now)
{
    struct q_tier_state st;
    char hash[65];
    int rc;

    if ((rc = q_tier_load(db, t->name, &st)) != 0)
        return rc;
    /* Sends of workers that died with them in flight stopped counting
     * when they expired; a worker starting clears them away. */
    tier__flight_prune(&st.flight, now);
    config_hash(t, hash);
    st.doubt = true;
    lift_auth_wall(&st, hash);
    memcpy(st.config_hash, hash, sizeof(hash));
    return q_tier_store(db, t->name, &st);
}

int
tier_sync_config(q_db *db, const struct config_tier *t, int64_t now)
{
    int rc = q_tx_begin(db);

    if (rc != 0)
        return rc;
    rc = sync_locked(db, t, now);
    if (rc != 0) {
        q_tx_rollback(db);
        return rc;
    }
    return q_tx_commit(db);
}

/* tier.c: admission and tier state. */
#include "worker/tier.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A probe or request whose worker died stops counting as in flight after
 * its timeout plus this margin. */
#define EXPIRY_MARGIN_MS 30000
/* Hint for "wait until one in flight finishes". */
#define INFLIGHT_RETRY_MS 250

static int64_t
window_ms(const struct config_tier *t)
{
    int64_t ms = (int64_t)(t->window_s * 1000.0);
    return ms > 0 ? ms : 60000;
}

/* Admission counts a slightly longer window than the endpoint does: a send
 * is stamped when admitted but reaches the endpoint a loop turn later, and
 * that delay varies. Without the guard, a send admitted the moment the
 * window frees a slot can arrive while the endpoint still counts the old
 * one, and earn a 429 (measured: up to 125 ms under load). The guard is
 * 1/40 of the window, at most 250 ms: 0.4% of a minute's requests. */
static int64_t
admit_window_ms(const struct config_tier *t)
{
    int64_t w = window_ms(t), guard = w / 40;
    return w + (guard < 250 ? guard : 250);
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

void
tier_evaluate(const struct config_tier *t, const struct q_tier_state *st,
              int64_t now, int64_t est_tokens, bool continuing,
              struct tier_verdict *out)
{
    int64_t w = admit_window_ms(t), used = st->allowance_used;
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
        say_no(out, "rate_limit_headers", st->limited_until);
        return;
    }
    if (t->max_inflight > 0 && st->in_flight >= t->max_inflight) {
        say_no(out, "max_inflight", now + INFLIGHT_RETRY_MS);
        return;
    }
    if (t->rpm > 0 && st->window_requests >= t->rpm) {
        say_no(out, "rpm", st->window_oldest + w);
        return;
    }
    /* A request larger than the whole tpm still goes when the window is
     * empty; otherwise it could never be sent. */
    if (t->tpm > 0 && st->window_requests > 0 &&
        st->window_tokens + est_tokens > t->tpm) {
        say_no(out, "tpm", st->window_oldest + w);
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
    /* Admission needs rpm rows at most, and tokens only under a tpm. */
    struct q_tier_window win = {full ? window_ms(t) : admit_window_ms(t),
                                full ? -1 : t->rpm, full || t->tpm > 0,
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
    int64_t expires = now + (int64_t)(t->timeout_s * 1000) + EXPIRY_MARGIN_MS;
    int rc;

    /* Keep a window's margin: another worker's clock may lag ours, and its
     * window must still see the sends it covers. */
    if ((rc = q_tier_prune(db, t->name, now - 2 * window_ms(t))) != 0 ||
        (rc = load(db, t, now, false, &st)) != 0)
        return rc;
    tier_evaluate(t, &st, now, est_tokens, continuing, v);
    if (!v->admitted)
        return 0;
    if (v->probe)
        st.breaker = Q_BREAKER_HALF_OPEN;
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
        break;
    case TIER_RESULT_FAILURE:
        st->failures++;
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

static int
settle_locked(q_db *db, const struct config_tier *t, int64_t send_id,
              int64_t now, const struct tier_outcome *o)
{
    struct q_tier_state st;
    int64_t old = 0;
    int rc;

    if ((rc = load(db, t, now, false, &st)) != 0)
        return rc;
    /* A send the endpoint refused for its rate did not count there: drop
     * it from our window too, or the tier runs a request short. */
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
    if (o->limited_until > st.limited_until)
        st.limited_until = o->limited_until;
    return q_tier_store(db, t->name, &st);
}

int
tier_settle(q_db *db, const struct config_tier *t, int64_t send_id, int64_t now,
            const struct tier_outcome *o)
{
    int rc = q_tx_begin(db);

    if (rc != 0)
        return rc;
    rc = settle_locked(db, t, send_id, now, o);
    if (rc != 0) {
        q_tx_rollback(db);
        return rc;
    }
    return q_tx_commit(db);
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
    if (strcmp(hash, st.config_hash) == 0)
        return 0;
    if (strcmp(st.exhausted_reason, "auth") == 0) {
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

/* tier.h: admission to a tier (breaker, paced token buckets, cooldown,
 * doubt, allowance, in-flight cap, walls and rate-limit headers), with the
 * state shared in the database so every worker on it respects one tier's
 * limits together.
 *
 * tier_evaluate() is the pure rule; tier_admit() and tier_settle() run it
 * and record the result in one write transaction, so two processes cannot
 * both take the last slot of a window.
 */
#ifndef STEPQ_TIER_TIER_H
#define STEPQ_TIER_TIER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "common/defs.h"
#include "policy/policy.h"
#include "queue/queue.h"
#include "queue/tiers.h"

/* What admission says. reason is static: "exhausted", "breaker_open",
 * "half_open_probe", "cooldown", "max_inflight", "in_doubt", "failing",
 * "ramp", "rpm", "tpm", "allowance". */
struct tier_verdict {
    bool admitted;
    bool probe;         /* admitted as the one half-open probe */
    const char *reason; /* why not; NULL when admitted */
    int64_t retry_at;   /* earliest time it could say yes (ms) */
};

/* The pace in force: the ceiling (the smaller of the declared limit, per
 * minute, and the one the endpoint's headers taught) times the tier's pace
 * factor. 0: no limit known, requests are not paced. */
double tier_rate_rpm(const struct config_tier *t,
                     const struct q_tier_state *st);
double tier_rate_tpm(const struct config_tier *t,
                     const struct q_tier_state *st);

/* tier_evaluate decides admission for a request of est_tokens at now from
 * the tier's config and state. continuing: the step already sent on this
 * tier (it may use the allowance headroom above degrade_at). Pure. */
void tier_evaluate(const struct config_tier *t, const struct q_tier_state *st,
                   int64_t now, int64_t est_tokens, bool continuing,
                   struct tier_verdict *out);

/* tier_reason_is_pace reports whether a refusal's reason (a verdict's)
 * only paces the tier: its bucket refills ("rpm", "tpm"), its cooldown
 * ends ("cooldown"), its in-flight cap frees ("max_inflight"), its one
 * request in doubt comes back ("in_doubt"), its ramp lets one more go
 * ("ramp"). A step waits for such a tier
 * when it prefers it; a wall ("exhausted", "allowance") or a failing tier
 * ("breaker_open", "half_open_probe", and "failing": one at a time after a
 * server error or timeout) it passes over. */
bool tier_reason_is_pace(const char *reason);

/* tier_admit evaluates and, when admitted, takes the request from the
 * tier's buckets, counts it in flight and charges est_tokens, all in one
 * transaction (a savepoint inside the caller's). *send_id (> 0) is the
 * send's handle for tier_settle(): when it expires and whether it is the
 * probe. Returns 0 (look at v->admitted) or -EIO/-EAGAIN. */
STEPQ_MUST_CHECK int tier_admit(q_db *db, const struct config_tier *t,
                                int64_t now, int64_t est_tokens,
                                bool continuing, struct tier_verdict *v,
                                int64_t *send_id);

enum tier_result {
    TIER_RESULT_OK,      /* success: closes the breaker, ends a doubt */
    TIER_RESULT_FAILURE, /* server_error or timeout: counts for the breaker,
                            puts the tier in doubt */
    TIER_RESULT_NEUTRAL  /* anything else: no breaker change */
};

/* What an answer taught about the tier. Fields not known are -1 (times,
 * counts) or 0 (limits). */
struct tier_outcome {
    enum tier_result result;
    int64_t tokens;  /* usage reported; < 0: keep the estimate */
    int64_t charged; /* what tier_admit charged the send (its est_tokens),
                        which tokens and uncounted correct; < 0: 0 */
    int64_t exhausted_until;      /* > 0: a quota wall until then */
    const char *exhausted_reason; /* borrowed; e.g. "daily_cap" */
    bool uncounted;      /* refused for its rate: refund the allowance */
    int64_t sent_at;     /* when the request was admitted */
    int64_t throttle_ms; /* >= 0: a soft throttle; the tier cools down
                            this long (the server's wait) */
    bool paced_down;     /* the throttle lowers the tier's pace */
    int64_t remaining_requests, requests_reset_at; /* -1: not said */
    int64_t remaining_tokens, tokens_reset_at;     /* -1: not said */
    int64_t limit_rpm, limit_tpm; /* limit headers; 0: not said */
};

/* tier_outcome_init sets every field to "not known" and result NEUTRAL. */
void tier_outcome_init(struct tier_outcome *o);

/* tier_limits_from_headers reads the limit headers (x-ratelimit-limit-*,
 * anthropic-ratelimit-*-limit) into *rpm and *tpm, per minute; 0 where
 * not said or not believable (negative, zero, absurd). */
void tier_limits_from_headers(const struct policy_header *h, size_t n,
                              int64_t *rpm, int64_t *tpm);

/* tier_settle records the answer to send send_id (settled once): the
 * send is no longer in flight, its tokens corrected, the breaker, doubt,
 * pace, cooldown, limits and walls updated, in one transaction (a
 * savepoint inside the caller's). *reopened (may be NULL) tells whether
 * requests refused for what was in flight may now go (a doubt or probe
 * ended, or the tier has an in-flight cap). Returns 0 or the store's
 * error (nothing changed). */
STEPQ_MUST_CHECK int tier_settle(q_db *db, const struct config_tier *t,
                                 int64_t send_id, int64_t now,
                                 const struct tier_outcome *o, bool *reopened);
/* tier_unsent gives back the admission of send send_id, which never went
 * out: settled as a send the endpoint did not count, its estimate est
 * (0: none) taken back from the second at (-1: now) it was admitted in.
 * Returns 0 or the store's error, as tier_settle. */
STEPQ_MUST_CHECK int tier_unsent(q_db *db, const struct config_tier *t,
                                 int64_t send_id, int64_t est, int64_t at,
                                 int64_t now);

/* tier_forget_send takes out of t's flight the send of an attempt whose
 * worker died with it in flight: admitted at sent_at (the attempt's
 * started_at), it would count until its expiry, timeout_s + 30 s later,
 * and hold the tier (in doubt, one request at a time) for every worker
 * meanwhile. Called when the attempt is settled in doubt, after its job's
 * lease ended. A send already expired is not taken out twice. Returns 0
 * or the store's error (nothing changed); a savepoint in the caller's
 * transaction. */
STEPQ_MUST_CHECK int tier_forget_send(q_db *db, const struct config_tier *t,
                                      int64_t sent_at, int64_t now);

/* tier_snapshot reads the tier's state at now. full: count the last
 * minute's sends and tokens, and show an auth wall that t's config (changed
 * since) lifts as lifted, as the next worker will find it (for `stepq
 * tiers`); else only what admission needs. */
STEPQ_MUST_CHECK int tier_snapshot(q_db *db, const struct config_tier *t,
                                   int64_t now, bool full,
                                   struct q_tier_state *out);

/* tier_wall_until is when a quota wall with no known reset ends: the end
 * of the tier's allowance window if it has one, else one hour from now. */
int64_t tier_wall_until(const struct config_tier *t, int64_t now);

/* ---- walls of http endpoints (host.c) ------------------------------- */

/* The state of an http step's host is kept as a tier row named
 * TIER_HOST_PREFIX "HOST:PORT" (the config refuses tier names with that
 * prefix): a wall a host answered holds its later sends too. */
#define TIER_HOST_PREFIX "host:"

/* tier_host_key writes the row name of url's host ("host:h.example:443",
 * the scheme's port when none is written) into out. -EINVAL when url is
 * not http(s) with a host, or the name does not fit in len. */
int tier_host_key(const char *url, char *out, size_t len);

/* tier_host_wall reads the wall of host key at now: *until its end (0:
 * none, or over) and reason (a copy, at most 31 bytes; "" when none).
 * Returns 0 or the store's error. */
STEPQ_MUST_CHECK int tier_host_wall(q_db *db, const char *key, int64_t now,
                                    int64_t *until, char reason[32]);

/* tier_host_wall_until is when a wall a host answered at now ends: its
 * reset when it named one (a daily cap's reset within the hour is not
 * believed), else the end of the UTC day for a daily cap, else an hour. */
int64_t tier_host_wall_until(const struct policy_class *c, int64_t now);

/* tier_host_wall_set records that host key is walled until until for
 * reason, in its own transaction level. Returns 0 or the store's error. */
STEPQ_MUST_CHECK int tier_host_wall_set(q_db *db, const char *key,
                                        int64_t until, const char *reason);

/* tier_host_wall_lift ends host key's wall now (an operator who knows it
 * lifted), in its own transaction level. Returns 0 or the store's error. */
STEPQ_MUST_CHECK int tier_host_wall_lift(q_db *db, const char *key);

/* tier_sync_config lifts an "auth" wall when the tier's config changed
 * since it was set (docs/reference.md: the tier is off until the config
 * changes), remembers the config, puts the tier in doubt (a worker
 * starting does not know what happened while none ran), and forgets the
 * sends in flight that expired before now (of workers that died). One
 * transaction; a failure changes nothing. */
STEPQ_MUST_CHECK int tier_sync_config(q_db *db, const struct config_tier *t,
                                      int64_t now);

#endif

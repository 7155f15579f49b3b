/* tier.h: admission to a tier (breaker, windows, allowance, in-flight cap,
 * walls and rate-limit headers), with the state shared in the database so
 * every worker on it respects one tier's limits together.
 *
 * tier_evaluate() is the pure rule; tier_admit() and tier_settle() run it
 * and record the result in one write transaction, so two processes cannot
 * both take the last slot of a window.
 */
#ifndef STEPQ_WORKER_TIER_H
#define STEPQ_WORKER_TIER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "common/defs.h"
#include "queue/queue.h"

/* What admission says. reason is static: "exhausted" (or the wall's own
 * reason such as "daily_cap"), "breaker_open", "half_open_probe",
 * "rate_limit_headers", "max_inflight", "rpm", "tpm", "allowance". */
struct tier_verdict {
    bool admitted;
    bool probe;         /* admitted as the one half-open probe */
    const char *reason; /* why not; NULL when admitted */
    int64_t retry_at;   /* earliest time it could say yes (ms) */
};

/* tier_evaluate decides admission for a request of est_tokens at now from
 * the tier's config and state. continuing: the step already sent on this
 * tier (it may use the allowance headroom above degrade_at). Pure. */
void tier_evaluate(const struct config_tier *t, const struct q_tier_state *st,
                   int64_t now, int64_t est_tokens, bool continuing,
                   struct tier_verdict *out);

/* tier_admit evaluates and, when admitted, logs the send and charges
 * est_tokens, all in one transaction. *send_id identifies the send for
 * tier_settle(). Returns 0 (look at v->admitted) or -EIO/-EBUSY. */
STEPQ_MUST_CHECK int tier_admit(q_db *db, const struct config_tier *t,
                                int64_t now, int64_t est_tokens,
                                bool continuing, struct tier_verdict *v,
                                int64_t *send_id);

enum tier_result {
    TIER_RESULT_OK,      /* success: closes the breaker */
    TIER_RESULT_FAILURE, /* server_error or timeout: counts for the breaker */
    TIER_RESULT_NEUTRAL  /* anything else: no breaker change */
};

/* What an answer taught about the tier. */
struct tier_outcome {
    enum tier_result result;
    int64_t tokens;               /* usage reported; < 0: keep the estimate */
    int64_t exhausted_until;      /* > 0: a quota wall until then */
    const char *exhausted_reason; /* borrowed; e.g. "daily_cap" */
    int64_t limited_until;        /* > 0: headers said 0 remaining until then */
    bool uncounted; /* refused for its rate: not in the endpoint's window */
};

/* tier_settle records the answer to send send_id: the send is done, its
 * tokens corrected, the breaker and walls updated. -ENOENT/-EALREADY for
 * an unknown or already settled send. */
STEPQ_MUST_CHECK int tier_settle(q_db *db, const struct config_tier *t,
                                 int64_t send_id, int64_t now,
                                 const struct tier_outcome *o);

/* tier_snapshot reads the tier's state at now. full: count the whole
 * window (for `stepq tiers`); else only what admission needs. */
STEPQ_MUST_CHECK int tier_snapshot(q_db *db, const struct config_tier *t,
                                   int64_t now, bool full,
                                   struct q_tier_state *out);

/* tier_wall_until is when a quota wall with no known reset ends: the end
 * of the tier's allowance window if it has one, else one hour from now. */
int64_t tier_wall_until(const struct config_tier *t, int64_t now);

/* tier_sync_config lifts an "auth" wall when the tier's config changed
 * since it was set (SPEC: the tier is off until the config changes), and
 * remembers the config. */
STEPQ_MUST_CHECK int tier_sync_config(q_db *db, const struct config_tier *t);

#endif

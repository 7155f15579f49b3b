/* tiers.h: what admission shares between workers, stored: each tier's
 * state (its buckets, walls, breaker, what it used and has in flight)
 * and the budgets' windows in money. Part of queue/'s contract (see
 * queue/queue.h for the conventions every call follows). */
#ifndef STEPQ_QUEUE_TIERS_H
#define STEPQ_QUEUE_TIERS_H

#include "queue/queue.h"

/* ---- tier state (shared by every worker on the database) ------------ */

enum q_breaker { Q_BREAKER_CLOSED = 0, Q_BREAKER_OPEN, Q_BREAKER_HALF_OPEN };

/* q_breaker_name gives "closed", "open" or "half_open". */
const char *q_breaker_name(enum q_breaker b);

/* A tier's sends of the last minute, per second: slot s % Q_TIER_USAGE_SLOTS
 * holds second s (epoch seconds) while s is within the slots behind
 * last_s. Kept in the tier's row (the worker counts a send into it when
 * it admits it, and corrects it when the answer comes), so counting a
 * window reads no send log. */
#define Q_TIER_USAGE_SLOTS 60
struct q_tier_usage {
    int64_t last_s; /* the newest second counted, 0: none */
    uint32_t requests[Q_TIER_USAGE_SLOTS];
    uint32_t tokens[Q_TIER_USAGE_SLOTS];
};

/* A tier's sends not answered yet, by the second they stop counting:
 * count[i] sends expire in second at[i] (epoch seconds, ascending, each
 * count > 0), and a half-open probe is out until probe_until (ms, 0:
 * none). A send whose worker died stops counting when it expires. Kept in
 * the tier's row, so that admitting and answering a send write the row
 * (once per transaction) and no log of sends. A full list counts a send
 * in a later second: longer, never shorter. */
#define Q_TIER_FLIGHT_MAX 96
struct q_tier_flight {
    int n;
    int64_t probe_until;
    int64_t at[Q_TIER_FLIGHT_MAX];
    uint32_t count[Q_TIER_FLIGHT_MAX];
};

/* A tier's stored state, and what is derived from it at a moment. A tier
 * with no row yet reads as all zero (breaker closed, nothing used), except
 * pace 1 and doubt true: nothing is known of it yet. */
struct q_tier_state {
    enum q_breaker breaker;
    int failures;              /* consecutive breaker failures */
    int64_t open_until;        /* breaker cooldown end */
    int64_t exhausted_until;   /* a quota wall until then */
    char exhausted_reason[32]; /* "daily_cap", "auth", ... or "" */
    int64_t limited_until;     /* rate-limit headers said 0 remaining */
    int64_t allowance_used;    /* tokens in the current allowance window */
    int64_t allowance_since;   /* start of that window */
    char config_hash[65];      /* the tier config it was last used with */
    /* Pacing (see tier/tier.h): token buckets as GCRA theoretical
     * arrival times in ms (fractional), the pace factor in force, and
     * what the endpoint's headers taught. */
    double req_tat;       /* request bucket */
    double tok_tat;       /* token bucket */
    double pace;          /* (0, 1]: share of the ceiling in force */
    int64_t pace_down_at; /* last multiplicative decrease */
    int64_t pace_up_at;   /* last additive increase */
    int64_t learned_rpm;  /* limit headers: requests per minute, 0 unknown */
    int64_t learned_tpm;  /* limit headers: tokens per minute, 0 unknown */
    bool doubt;           /* one request at a time until one succeeds */
    struct q_tier_usage usage;   /* sends and tokens per second */
    struct q_tier_flight flight; /* sends in flight */
    /* Not stored: derived from usage and flight by the loader above the
     * store (tier/tier.c), 0 when not asked for. */
    int64_t window_requests; /* sends in the last minute */
    int64_t window_tokens;   /* their tokens */
    int64_t in_flight;       /* sends not answered and not expired */
    bool probe_in_flight;    /* a half-open probe is out */
};

/* q_tier_load reads tier's stored state (the derived fields 0). Inside a
 * transaction it is the row as the transaction last stored it. */
STEPQ_MUST_CHECK int q_tier_load(q_db *db, const char *tier,
                                 struct q_tier_state *out);
/* q_tier_store writes the stored fields of st (not the derived ones).
 * Deferred in a transaction. */
STEPQ_MUST_CHECK int q_tier_store(q_db *db, const char *tier,
                                  const struct q_tier_state *st);
/* q_tier_event_add records that event ("breaker_open") happened to tier
 * at at (ms), for the morning report. Deferred in a transaction, as
 * q_tier_store is. -EINVAL for a NULL or empty tier or event. */
STEPQ_MUST_CHECK int q_tier_event_add(q_db *db, const char *tier, int64_t at,
                                      const char *event);

/* ---- budgets: money shared by every worker ---------------------------- */

/* One window of one budget (a day, a schedule's run: the caller names it),
 * in nano-dollars: spent is what settled sends cost, reserved the worst
 * cases of sends still out. */
struct q_budget {
    char *name;   /* owned */
    char *window; /* owned */
    int64_t spent_nusd;
    int64_t reserved_nusd;
    int64_t updated_at;
};

/* q_budget_reserve adds amount_nusd to the reserved money of budget name's
 * window when spent + reserved + amount stays within limit_nusd, in one
 * statement: of workers reserving at once, none passes the limit. Returns
 * 0; -EDQUOT when it would pass it (nothing changed); -EINVAL for an
 * empty name or window, a negative amount or limit; or the storage
 * error. */
STEPQ_MUST_CHECK int q_budget_reserve(q_db *db, const char *name,
                                      const char *window, int64_t limit_nusd,
                                      int64_t amount_nusd, int64_t now);
/* q_budget_settle takes reserved_nusd off the window's reserved money
 * (never below 0) and adds spent_nusd to its spent money: a send that was
 * answered (spent: what it cost) or never went out (spent 0). Returns 0,
 * -EINVAL as q_budget_reserve, or the storage error. */
STEPQ_MUST_CHECK int q_budget_settle(q_db *db, const char *name,
                                     const char *window, int64_t reserved_nusd,
                                     int64_t spent_nusd, int64_t now);
/* q_budgets_list reads every window written since (updated_at >= since),
 * by name then window. Caller owns *out (NULL when *n is 0); free with
 * q_budgets_free (NULL is a no-op). */
STEPQ_MUST_CHECK int q_budgets_list(q_db *db, int64_t since,
                                    struct q_budget **out, size_t *n);
void q_budgets_free(struct q_budget *b, size_t n);

#endif

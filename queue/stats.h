/* stats.h: read-only summaries of the attempts ledger and the park table,
 * for `stepq demo` and other reports.
 *
 * Nothing here writes. Every function returns 0 or -EIO (SQLite failure,
 * logged where it happened); out-params are untouched on failure. The
 * statements are prepared per call rather than cached: these run a few
 * times a second at most.
 */
#ifndef STEPQ_QUEUE_STATS_H
#define STEPQ_QUEUE_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "common/defs.h"
#include "queue/queue.h"

/* One group of attempts with the same tier, outcome, reason and decision.
 * Strings are owned; NULL where the ledger has none (tier NULL: an http
 * step; outcome NULL: in flight, or in doubt after a crash). */
struct q_attempt_group {
    char *tier;
    char *outcome;
    char *reason;
    char *decision;
    int64_t count;
};

/* q_stats_attempts counts every attempt in the ledger by tier, outcome,
 * reason and decision, ordered by tier (NULL last), then count, largest
 * first. Caller owns *out; free with q_attempt_groups_free(). *n may be 0
 * (then *out is NULL). */
STEPQ_MUST_CHECK int q_stats_attempts(q_db *db, struct q_attempt_group **out,
                                      size_t *n);
/* q_attempt_groups_free frees n groups and the array; NULL is a no-op. */
void q_attempt_groups_free(struct q_attempt_group *g, size_t n);

/* An open park item, with its job's name. Strings are owned. */
struct q_park_brief {
    int64_t id;
    int64_t job_id;
    char *job_name;
    char *step;   /* the step's name */
    char *reason; /* the outcome that parked it, or "in_doubt" */
    char *error;  /* may be NULL */
    char *tier;   /* NULL for http steps */
    int attempts;
    int64_t parked_at;
};

/* q_stats_park_open lists open park items by id, at most limit (0: all).
 * Caller owns *out; free with q_park_briefs_free(). */
STEPQ_MUST_CHECK int q_stats_park_open(q_db *db, size_t limit,
                                       struct q_park_brief **out, size_t *n);
/* q_park_briefs_free frees n items and the array; NULL is a no-op. */
void q_park_briefs_free(struct q_park_brief *p, size_t n);

#endif

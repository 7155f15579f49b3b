/* report.h: read-only summaries of the store: the status counts and
 * breakdowns, and the morning report of what happened since a time.
 * Part of queue/'s contract (see queue/queue.h for the conventions
 * every call follows). */
#ifndef STEPQ_QUEUE_REPORT_H
#define STEPQ_QUEUE_REPORT_H

#include "queue/queue.h"

/* ---- reports: read-only summaries ------------------------------------ */

/* These run a few times a second at most (the demo, status views). Each
 * returns 0 or -EIO; out-params are untouched on failure. */

/* One group of attempts with the same tier, outcome, reason and decision.
 * Strings are owned; NULL where the ledger has none (tier NULL: an http
 * step; outcome NULL: in flight, or in doubt after a crash). tokens: as
 * reported, else estimated; priced: how many have a cost, cost_nusd what
 * those cost (nano-dollars), as q_report_tiers counts them. */
struct q_attempt_group {
    char *tier;
    char *outcome;
    char *reason;
    char *decision;
    int64_t count;
    int64_t tokens, priced, cost_nusd;
};

/* q_stats_attempts counts every attempt ENDED since the store began (its
 * outcome set) by tier, outcome, reason and decision, ordered by tier
 * (NULL last), then count, largest first; outcome is never NULL. It
 * reads the ledger's running totals, not the ledger: an attempt in
 * flight (or in doubt after a crash) is not counted until it ends, and
 * then counts once in its outcome's group; one that a prune or a job's
 * deletion removed still counts, so no group's count goes down. A few
 * rows are read, whatever the ledger's size. Caller owns *out; free with
 * q_attempt_groups_free(). *n may be 0 (then *out is NULL). */
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

/* The upper bounds (ms) of the buckets of q_stats_latency. */
#define Q_LATENCY_NBUCKETS 10
#define Q_LATENCY_BOUNDS_MS                                                    \
    {                                                                          \
        100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000           \
    }

/* The finished attempts of one tier: how many, their latencies summed,
 * and le[i], how many took at most bound i (cumulative). tier owned. */
struct q_latency_group {
    char *tier;
    int64_t count;
    int64_t sum_ms;
    int64_t le[Q_LATENCY_NBUCKETS];
};

/* q_stats_latency groups the finished attempts of chat steps (those with
 * a tier) recorded since the store began by tier, ordered by tier: from
 * the running totals, as q_stats_attempts, so a prune takes nothing
 * away. Caller owns *out; free with q_latency_groups_free(). */
STEPQ_MUST_CHECK int q_stats_latency(q_db *db, struct q_latency_group **out,
                                     size_t *n);
void q_latency_groups_free(struct q_latency_group *g, size_t n);

/* A worker holding running jobs: how many, and the latest end of their
 * leases (each heartbeat moves it on). worker owned. */
struct q_worker_brief {
    char *worker;
    int64_t held;
    int64_t lease_until;
};

/* q_stats_workers lists the workers that hold running jobs, by id.
 * Caller owns *out; free with q_worker_briefs_free(). */
STEPQ_MUST_CHECK int q_stats_workers(q_db *db, struct q_worker_brief **out,
                                     size_t *n);
void q_worker_briefs_free(struct q_worker_brief *w, size_t n);

/* q_stats_oldest_due sets *run_at to the earliest run_at of a queued job
 * due at now (0: none is due). */
STEPQ_MUST_CHECK int q_stats_oldest_due(q_db *db, int64_t now, int64_t *run_at);

/* ---- the morning report: what happened since a time ------------------ */

/* These read what happened at or after since (ms), for `stepq report`;
 * each returns 0 or the storage error, out-params untouched on failure,
 * and *n may be 0 (then *out is NULL). */

/* q_report_jobs counts the jobs created at or after since by their state
 * now (counts[Q_JOB_QUEUED] ...). */
STEPQ_MUST_CHECK int q_report_jobs(q_db *db, int64_t since,
                                   int64_t counts[Q_JOB_NSTATES]);

/* What the attempts of one tier (tier NULL: http steps) started at or
 * after since came to: how many, the tokens they used (as reported, else
 * estimated), and how many ended in each outcome (in_flight: no outcome
 * yet, or none ever after a crash); and how many times its breaker opened
 * at or after since (q_tier_event_add "breaker_open"): a tier with
 * openings and no attempt is listed with requests 0. tier owned. */
struct q_report_tier {
    char *tier;
    int64_t requests, tokens;
    int64_t ok, soft_throttle, hard_quota, truncated, schema_invalid, refused,
        server_error, timeout, unknown, in_flight;
    int64_t breaker_opened;
    /* priced: how many of them have a cost (their tier has a price);
     * cost_nusd: what those cost, in nano-dollars */
    int64_t priced, cost_nusd;
};

/* q_report_tiers lists them by tier (NULL last). It reads the ledger as
 * it is (attempts a prune removed are not counted); the totals since the
 * store began are q_stats_attempts'. Caller owns *out; free with
 * q_report_tiers_free(). */
STEPQ_MUST_CHECK int q_report_tiers(q_db *db, int64_t since,
                                    struct q_report_tier **out, size_t *n);
void q_report_tiers_free(struct q_report_tier *t, size_t n);

/* One reason attempts failed for (every outcome but ok; none while in
 * flight) since a time: how many, and the latest such attempt as the
 * example. Strings owned; tier and body may be NULL. */
struct q_report_failure {
    char *outcome, *reason;
    int64_t count;
    int64_t job_id;
    int step, attempt, status; /* status 0: none (a transport error) */
    char *tier, *body;
};

/* q_report_failures lists at most limit (0: all) by count, largest first
 * (then outcome and reason). Caller owns *out; free with
 * q_report_failures_free(). */
STEPQ_MUST_CHECK int q_report_failures(q_db *db, int64_t since, size_t limit,
                                       struct q_report_failure **out,
                                       size_t *n);
void q_report_failures_free(struct q_report_failure *f, size_t n);

/* One job whose attempts started at or after since have a cost: the
 * tokens and the cost (nano-dollars) of those attempts. Strings owned;
 * key NULL when the job has none. */
struct q_report_job {
    int64_t id;
    char *name;
    char *key;
    int64_t tokens, cost_nusd;
};

/* q_report_costliest lists such jobs, the most costly first (then by id),
 * at most limit (0: all). Caller owns *out; free with
 * q_report_jobs_free(). */
STEPQ_MUST_CHECK int q_report_costliest(q_db *db, int64_t since, size_t limit,
                                        struct q_report_job **out, size_t *n);
void q_report_jobs_free(struct q_report_job *j, size_t n);

/* q_report_slowest lists the jobs that ended (succeeded, failed or
 * cancelled) at or after since, the longest from created_at to
 * updated_at first (then by id), at most limit. Caller owns *out; free
 * with q_jobs_free(). */
/* q_report_failed lists the jobs that failed at or after since (by when
 * they ended), with or without attempts (a job whose step could not be
 * built fails before any), the latest first, at most limit (0: all). spec
 * is NULL. Caller owns *out (q_jobs_free). */
STEPQ_MUST_CHECK int q_report_failed(q_db *db, int64_t since, size_t limit,
                                     struct q_job **out, size_t *n);
/* q_report_keyed lists the jobs created at or after since whose key
 * begins with prefix (not empty), the oldest first (then by id), at most
 * limit (0: all); spec is NULL. Caller owns *out (q_jobs_free). -EINVAL
 * for an empty prefix. */
STEPQ_MUST_CHECK int q_report_keyed(q_db *db, const char *prefix, int64_t since,
                                    size_t limit, struct q_job **out,
                                    size_t *n);
STEPQ_MUST_CHECK int q_report_slowest(q_db *db, int64_t since, size_t limit,
                                      struct q_job **out, size_t *n);

/* q_job_by_key reads the job whose dedupe key is key: 0 with *out set
 * (release with q_job_cleanup), -ENOENT when none has it. */
STEPQ_MUST_CHECK int q_job_by_key(q_db *db, const char *key, struct q_job *out);

#endif

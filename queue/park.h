/* park.h: park items, the steps that wait for a human, and the retries of
 * a job an operator ran again. Part of queue/'s contract (see
 * queue/queue.h for the conventions every call follows). */
#ifndef STEPQ_QUEUE_PARK_H
#define STEPQ_QUEUE_PARK_H

#include "queue/queue.h"

/* ---- park items ------------------------------------------------------ */

/* A new park item. Strings are borrowed. */
struct q_park_new {
    int64_t job_id;
    int step;
    const char *step_name;
    const char *reason; /* the outcome that parked it, or "in_doubt" */
    int attempts;
    const char *request_sha256; /* may be NULL */
    const char *request;        /* the body as sent, may be NULL */
    const char *error;          /* "HTTP 429: daily quota exceeded" */
    const char *tier;           /* NULL for http steps */
    int64_t parked_at;
};

/* q_park_add records a park item and marks the step parked; *id gets its
 * id. (The job itself is parked with q_park_job.) */
STEPQ_MUST_CHECK int q_park_add(q_db *db, const struct q_park_new *p,
                                int64_t *id);

/* A park item as stored. Owned strings; NULL where absent. */
struct q_park_item {
    int64_t id;
    int64_t job_id;
    int step;
    char *step_name;
    char *reason;
    int attempts;
    char *request_sha256;
    char *request;
    char *error;
    char *tier;
    int64_t parked_at;
    bool open;
    char *resolution; /* "retry", "skip", "done", "fail", "cancel" */
    char *resolved_by;
    int64_t resolved_at;
    char *note;
    /* what the operator gave a tool call's item: the approved arguments
     * (JSON text), or the answer to a question; NULL: none */
    char *answer;
};

/* q_park_item_cleanup frees the strings of it. */
void q_park_item_cleanup(struct q_park_item *it);
/* q_park_items_free frees n items and the array. */
void q_park_items_free(struct q_park_item *items, size_t n);
/* q_park_get loads item id; -ENOENT if there is none. */
STEPQ_MUST_CHECK int q_park_get(q_db *db, int64_t id, struct q_park_item *out);

/* Which park items a listing or a bulk resolution takes. */
struct q_park_filter {
    bool all;           /* resolved ones too (listing only) */
    const char *reason; /* NULL: any */
    const char *tier;   /* NULL: any */
    int64_t job_id;     /* 0: any */
    /* > 0: only items resolved at or after this time (listing only; all
     * is then implied). */
    int64_t resolved_since;
};

/* q_park_list lists matching items, open ones first, then by id. Caller
 * owns *out (q_park_items_free). */
STEPQ_MUST_CHECK int q_park_list(q_db *db, const struct q_park_filter *f,
                                 struct q_park_item **out, size_t *n);

/* What closing an item records. Strings are borrowed. */
struct q_park_close {
    const char *resolution; /* "retry", "skip", "done", "fail", "cancel" */
    const char *by;
    const char *note; /* may be NULL */
    int64_t now;
    const char *answer; /* a tool call's approved args or answer, or NULL */
};

/* The primitives a resolution is made of (park/ composes them in one
 * transaction; see park_resolve). */

/* q_park_close marks open item id resolved as c says. -ENOENT for an
 * unknown id, -EALREADY when it is already resolved. */
STEPQ_MUST_CHECK int q_park_close(q_db *db, int64_t id,
                                  const struct q_park_close *c);
/* q_job_requeue_parked makes parked job job_id queued at now, due at
 * run_at (now, or later: an operator's "not before"), with its deadline at
 * deadline_at (an operator's go-ahead gives it its whole deadline_s
 * again). -EALREADY when the job is not parked (cancelled, or already
 * going on). */
STEPQ_MUST_CHECK int q_job_requeue_parked(q_db *db, int64_t job_id, int64_t now,
                                          int64_t run_at, int64_t deadline_at);
/* q_job_wake makes queued job job_id due at now if due later (a foreach
 * job whose element ended). -EALREADY: not queued, or due already. */
STEPQ_MUST_CHECK int q_job_wake(q_db *db, int64_t job_id, int64_t now);
/* q_job_end_parked ends parked job job_id: Q_JOB_FAILED with error
 * (copied), or Q_JOB_SUCCEEDED (error NULL) when an operator finished its
 * last step. -EALREADY when the job is not parked, -EINVAL for another
 * state. */
STEPQ_MUST_CHECK int q_job_end_parked(q_db *db, int64_t job_id,
                                      enum q_job_state state, const char *error,
                                      int64_t now);

/* How a parked step goes on. Strings are borrowed. */
struct q_step_reset {
    enum q_step_state state; /* pending (retry), skipped or succeeded */
    const char *output;      /* succeeded: the step's output (NULL: keep) */
    int reset_after;         /* attempts up to this number no longer count
                                (a retry's fresh start); 0: keep counting */
    const char *pin_tier;    /* the step runs only on this tier, or NULL */
};

/* q_step_reset sets the state, output, reset_after and pin_tier of step
 * index of job job_id (making its row if it has none). */
STEPQ_MUST_CHECK int q_step_reset(q_db *db, int64_t job_id, int index,
                                  const struct q_step_reset *r);

/* ---- job retries: a failed, cancelled or done job run again --------- */

/* A retry as asked for. Strings are borrowed. */
struct q_retry_new {
    int64_t job_id;
    enum q_job_state expect; /* the state the job must still be in */
    int from;                /* steps from this index on run again */
    const char *by;          /* who asked */
    int64_t now;             /* when it is retried */
    int64_t run_at;          /* when it is due again (now or later) */
    int64_t deadline_at;     /* its new deadline */
};

/* q_job_retry queues job r->job_id again, in one level of its own: only
 * while it is in state r->expect (else -EALREADY, and -ENOENT for an
 * unknown id), it becomes queued, due at r->run_at, with its deadline at
 * r->deadline_at, no error and no lease; each step from index r->from on
 * is pending again without output or pinned tier, its attempts so far
 * no longer counted (reset_after: the step's last attempt number; the
 * ledger keeps them, and the step its tokens), and an attempt of theirs
 * left without result ends at r->now with outcome "unknown", reason
 * "retried"; and a retry row records
 * who, when, from which step, and the state and error the job had. *id
 * gets the row's id. Steps before r->from are left as they are. */
STEPQ_MUST_CHECK int q_job_retry(q_db *db, const struct q_retry_new *r,
                                 int64_t *id);

/* A retry as recorded. Owned strings; NULL where absent. */
struct q_retry {
    int64_t id;
    int64_t job_id;
    int from; /* step index */
    char *by;
    int64_t at;
    enum q_job_state prior_state;
    char *prior_error;
};

/* q_retries_list loads the retries of job job_id, oldest first. Caller
 * owns *out; free with q_retries_free(). */
STEPQ_MUST_CHECK int q_retries_list(q_db *db, int64_t job_id,
                                    struct q_retry **out, size_t *n);
/* q_retries_free frees n retries and the array; NULL is a no-op. */
void q_retries_free(struct q_retry *r, size_t n);

#endif

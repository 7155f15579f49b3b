/* batch.h: the batches of a tier in batch mode and their items, recorded
 * before they are sent. Part of queue/'s contract (see queue/queue.h
 * for the conventions every call follows). */
#ifndef STEPQ_QUEUE_BATCH_H
#define STEPQ_QUEUE_BATCH_H

#include "queue/queue.h"

/* ---- batches (a tier in batch mode: docs/reference.md "Batches") ------ */

/* A batch's life: recorded before it is sent (SUBMITTING, no provider id
 * yet), known to the provider (SUBMITTED), ended at the provider with its
 * results to apply (ENDED), every item's attempt finished (DONE). */
enum q_batch_state {
    Q_BATCH_SUBMITTING = 0,
    Q_BATCH_SUBMITTED = 1,
    Q_BATCH_ENDED = 2,
    Q_BATCH_DONE = 3,
};

struct q_batch {
    int64_t id;
    char *tier;        /* owned */
    char *api;         /* owned: "openai" or "anthropic" */
    char *key;         /* owned: unique; the metadata that names it */
    char *provider_id; /* owned; NULL until the provider's answer is kept */
    int state;         /* enum q_batch_state */
    int64_t items;     /* its items (ledger attempts) */
    char *worker;      /* owned: who holds it (submits and polls) */
    int64_t lease_until;
    int64_t created_at;
    int64_t updated_at;
};

/* One item of a batch: a ledger attempt, finished once its result (or
 * its failure) is applied. */
struct q_batch_item {
    int64_t attempt_id;
    int64_t job_id;
    int step;
    bool finished;
};

/* q_batch_create records a batch of tier (api, key: both borrowed, key
 * unique) in state SUBMITTING, held by worker until lease_until, before
 * anything is sent. *id gets its id. Returns 0; -EINVAL for a missing
 * name; -EEXIST for a key used before; storage errors. */
STEPQ_MUST_CHECK int q_batch_create(q_db *db, const char *tier, const char *api,
                                    const char *key, const char *worker,
                                    int64_t lease_until, int64_t now,
                                    int64_t *id);
/* q_batch_item_add records that attempt attempt_id (of job_id's step)
 * is an item of batch batch_id, and counts it in the batch's items.
 * Returns 0; -ENOENT when there is no such batch; -EEXIST when the
 * attempt is an item already; storage errors. */
STEPQ_MUST_CHECK int q_batch_item_add(q_db *db, int64_t batch_id,
                                      int64_t attempt_id, int64_t job_id,
                                      int step);
/* What q_batch_set changes: the batch's state moves forward only. */
struct q_batch_set {
    const char *worker;      /* the holder: must hold it or its lease ended */
    int64_t lease_until;     /* the holder's new lease */
    int state;               /* enum q_batch_state; never backwards */
    const char *provider_id; /* NULL: unchanged */
    int64_t now;
};
/* q_batch_set takes batch id for s->worker (when it holds it, or its
 * holder's lease has ended) and sets its state, lease and provider id.
 * Returns 0; -EBUSY when another worker holds it, or it is unknown, or
 * its state would go back; -EINVAL for a bad state; storage errors. */
STEPQ_MUST_CHECK int q_batch_set(q_db *db, int64_t id,
                                 const struct q_batch_set *s);
/* q_batches_open lists the batches of tier not DONE, oldest first.
 * Caller owns *out (q_batches_free). Returns 0 or a storage error. */
STEPQ_MUST_CHECK int q_batches_open(q_db *db, const char *tier,
                                    struct q_batch **out, size_t *n);
/* q_batch_items lists batch_id's items by attempt id, each finished when
 * its attempt has a result. Caller frees *out with free(). Returns 0 or a
 * storage error (no items: *n 0). */
STEPQ_MUST_CHECK int q_batch_items(q_db *db, int64_t batch_id,
                                   struct q_batch_item **out, size_t *n);
/* q_batch_of_attempt sets *batch_id to the batch attempt_id is an item
 * of. Returns 0, -ENOENT when it is none's, or a storage error. */
STEPQ_MUST_CHECK int q_batch_of_attempt(q_db *db, int64_t attempt_id,
                                        int64_t *batch_id);
/* q_batch_item_settle keeps what item attempt_id's usage would have cost
 * at its tier's realtime price (the report's savings). Returns 0, -ENOENT
 * when the attempt is no batch's item, or a storage error. */
STEPQ_MUST_CHECK int q_batch_item_settle(q_db *db, int64_t attempt_id,
                                         int64_t realtime_nusd);
/* What a tier's batch items that finished since a time cost, against what
 * the same usage would have cost realtime (items settled with a realtime
 * cost only). */
struct q_report_batch {
    char *tier; /* owned */
    int64_t items;
    int64_t cost_nusd;
    int64_t realtime_nusd;
};
/* q_report_batches lists it per tier, by name. Caller owns *out
 * (q_report_batches_free). Returns 0 or a storage error. */
STEPQ_MUST_CHECK int q_report_batches(q_db *db, int64_t since,
                                      struct q_report_batch **out, size_t *n);
void q_report_batches_free(struct q_report_batch *r, size_t n);
/* q_batches_free frees what q_batches_open returned. NULL is a no-op. */
void q_batches_free(struct q_batch *b, size_t n);

#endif

/* batch.c: the batches' storage calls (declared in queue/queue.h): the
 * arguments every backend would check alike, checked once here, the call
 * passed to the open store's table, and the rows freed. */
#include "queue/internal.h"

#include <errno.h>
#include <stdlib.h>

#include "queue/batch.h"

static bool
blank(const char *s)
{
    return s == NULL || *s == '\0';
}

int
q_batch_create(q_db *db, const char *tier, const char *api, const char *key,
               const char *worker, int64_t lease_until, int64_t now,
               int64_t *id)
{
    if (blank(tier) || blank(api) || blank(key) || blank(worker))
        return -EINVAL;
    return db->ops->batch_create(db, tier, api, key, worker, lease_until, now,
                                 id);
}

int
q_batch_item_add(q_db *db, int64_t batch_id, int64_t attempt_id, int64_t job_id,
                 int step)
{
    if (batch_id <= 0 || attempt_id <= 0 || job_id <= 0 || step < 0)
        return -EINVAL;
    return db->ops->batch_item_add(db, batch_id, attempt_id, job_id, step);
}

int
q_batch_set(q_db *db, int64_t id, const struct q_batch_set *s)
{
    if (s->state < Q_BATCH_SUBMITTING || s->state > Q_BATCH_DONE ||
        blank(s->worker))
        return -EINVAL;
    return db->ops->batch_set(db, id, s);
}

int
q_batches_open(q_db *db, const char *tier, struct q_batch **out, size_t *n)
{
    if (blank(tier))
        return -EINVAL;
    return db->ops->batches_open(db, tier, out, n);
}

int
q_batch_items(q_db *db, int64_t batch_id, struct q_batch_item **out, size_t *n)
{
    return db->ops->batch_items(db, batch_id, out, n);
}

int
q_batch_of_attempt(q_db *db, int64_t attempt_id, int64_t *batch_id)
{
    return db->ops->batch_of_attempt(db, attempt_id, batch_id);
}

int
q_batch_item_settle(q_db *db, int64_t attempt_id, int64_t realtime_nusd)
{
    if (attempt_id <= 0 || realtime_nusd < 0)
        return -EINVAL;
    return db->ops->batch_item_settle(db, attempt_id, realtime_nusd);
}

int
q_report_batches(q_db *db, int64_t since, struct q_report_batch **out,
                 size_t *n)
{
    return db->ops->report_batches(db, since, out, n);
}

void
q__report_batch_clean(void *e)
{
    free(((struct q_report_batch *)e)->tier);
}

void
q_report_batches_free(struct q_report_batch *r, size_t n)
{
    q__array_free(r, n, sizeof(*r), q__report_batch_clean);
}

void
q__batch_clean(void *e)
{
    struct q_batch *b = e;

    free(b->tier);
    free(b->api);
    free(b->key);
    free(b->provider_id);
    free(b->worker);
}

void
q_batches_free(struct q_batch *b, size_t n)
{
    q__array_free(b, n, sizeof(*b), q__batch_clean);
}

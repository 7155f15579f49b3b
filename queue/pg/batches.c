/* batches.c: PostgreSQL storage of the batches of a tier in batch mode
 * (tables batches and batch_items). Each call is one statement, run at
 * once, in a transaction or not; the meaning is the SQLite backend's
 * (queue/sqlite/batches.c). */
#include "queue/pg/internal.h"

#include <errno.h>
#include <stdlib.h>

#include "queue/batch.h"

/* Runs st, which returns a row when it did its work: 0 with that row's
 * first column in *id (may be NULL), else none (-ENOENT). */
static int
run_one(struct q__pg *db, enum q__pg_stmt_id st, const struct q__pg_params *p,
        int64_t *id, const char *what)
{
    PGresult *r = NULL;
    int rc = q__pg_run(db, st, p, &r, what);

    if (rc == 0 && PQntuples(r) == 0)
        rc = -ENOENT;
    else if (rc == 0 && id != NULL)
        *id = q__pg_int(r, 0, 0);
    PQclear(r);
    return rc;
}

int
q__pg_batch_create(q_db *db, const char *tier, const char *api, const char *key,
                   const char *worker, int64_t lease_until, int64_t now,
                   int64_t *id)
{
    struct q__pg_params p = {0};
    int rc;

    q__pg_p_text(&p, tier);
    q__pg_p_text(&p, api);
    q__pg_p_text(&p, key);
    q__pg_p_text(&p, worker);
    q__pg_p_int(&p, lease_until);
    q__pg_p_int(&p, now);
    rc = run_one(q__pg(db), ST_BATCH_CREATE, &p, id, "recording a batch");
    return rc == -ENOENT ? -EEXIST : rc;
}

int
q__pg_batch_item_add(q_db *db, int64_t batch_id, int64_t attempt_id,
                     int64_t job_id, int step)
{
    struct q__pg_params p = {0};
    int64_t other = 0;
    int rc;

    q__pg_p_int(&p, batch_id);
    q__pg_p_int(&p, attempt_id);
    q__pg_p_int(&p, job_id);
    q__pg_p_int(&p, step);
    rc = run_one(q__pg(db), ST_BATCH_ITEM_ADD, &p, NULL,
                 "recording a batch item");
    if (rc == -ENOENT) {
        rc = q__pg_batch_of_attempt(db, attempt_id, &other);
        return rc == 0 ? -EEXIST : rc;
    }
    return rc;
}

int
q__pg_batch_set(q_db *db, int64_t id, const struct q_batch_set *s)
{
    struct q__pg_params p = {0};
    int rc;

    q__pg_p_int(&p, id);
    q__pg_p_text(&p, s->worker);
    q__pg_p_int(&p, s->lease_until);
    q__pg_p_int(&p, s->state);
    q__pg_p_text(&p, s->provider_id);
    q__pg_p_int(&p, s->now);
    rc = run_one(q__pg(db), ST_BATCH_SET, &p, NULL, "updating a batch");
    return rc == -ENOENT ? -EBUSY : rc;
}

static void
read_batch(const PGresult *res, int r, void *elem)
{
    struct q_batch *b = elem;

    b->id = q__pg_int(res, r, 0);
    b->tier = q__pg_text(res, r, 1);
    b->api = q__pg_text(res, r, 2);
    b->key = q__pg_text(res, r, 3);
    b->provider_id = q__pg_text(res, r, 4);
    b->state = (int)q__pg_int(res, r, 5);
    b->items = q__pg_int(res, r, 6);
    b->worker = q__pg_text(res, r, 7);
    b->lease_until = q__pg_int(res, r, 8);
    b->created_at = q__pg_int(res, r, 9);
    b->updated_at = q__pg_int(res, r, 10);
}

int
q__pg_batches_open(q_db *db, const char *tier, struct q_batch **out, size_t *n)
{
    struct q__pg_params p = {0};
    void *v = NULL;
    int rc;

    q__pg_p_text(&p, tier);
    rc = q__pg_select(q__pg(db), ST_BATCHES_OPEN, &p, sizeof(struct q_batch),
                      read_batch, &v, n, "reading batches");
    if (rc == 0)
        *out = v;
    return rc;
}

static void
read_item(const PGresult *res, int r, void *elem)
{
    struct q_batch_item *it = elem;

    it->attempt_id = q__pg_int(res, r, 0);
    it->job_id = q__pg_int(res, r, 1);
    it->step = (int)q__pg_int(res, r, 2);
    it->finished = q__pg_int(res, r, 3) != 0;
}

int
q__pg_batch_items(q_db *db, int64_t batch_id, struct q_batch_item **out,
                  size_t *n)
{
    struct q__pg_params p = {0};
    void *v = NULL;
    int rc;

    q__pg_p_int(&p, batch_id);
    rc =
        q__pg_select(q__pg(db), ST_BATCH_ITEMS, &p, sizeof(struct q_batch_item),
                     read_item, &v, n, "reading a batch's items");
    if (rc == 0)
        *out = v;
    return rc;
}

int
q__pg_batch_of_attempt(q_db *db, int64_t attempt_id, int64_t *batch_id)
{
    struct q__pg_params p = {0};

    q__pg_p_int(&p, attempt_id);
    return run_one(q__pg(db), ST_BATCH_OF_ATTEMPT, &p, batch_id,
                   "finding an attempt's batch");
}

int
q__pg_batch_item_settle(q_db *db, int64_t attempt_id, int64_t realtime_nusd)
{
    struct q__pg_params p = {0};

    q__pg_p_int(&p, attempt_id);
    q__pg_p_int(&p, realtime_nusd);
    return run_one(q__pg(db), ST_BATCH_ITEM_SETTLE, &p, NULL,
                   "settling a batch item");
}

static void
read_report(const PGresult *res, int r, void *elem)
{
    struct q_report_batch *b = elem;

    b->tier = q__pg_text(res, r, 0);
    b->items = q__pg_int(res, r, 1);
    b->cost_nusd = q__pg_int(res, r, 2);
    b->realtime_nusd = q__pg_int(res, r, 3);
}

int
q__pg_report_batches(q_db *db, int64_t since, struct q_report_batch **out,
                     size_t *n)
{
    struct q__pg_params p = {0};
    void *v = NULL;
    int rc;

    q__pg_p_int(&p, since);
    rc = q__pg_select(q__pg(db), ST_REPORT_BATCHES, &p,
                      sizeof(struct q_report_batch), read_report, &v, n,
                      "reporting batches");
    if (rc == 0)
        *out = v;
    return rc;
}

/* batches.c: PostgreSQL storage of the batches of a tier in batch mode
 * (tables batches and batch_items). Each call is one statement, run at
 * once, in a transaction or not; the meaning is the SQLite backend's
 * (queue/sqlite/batches.c). */
#include "queue/pg/internal.h"

#include <errno.h>
#include <stdlib.h>

#include "queue/batch.h"

static const struct q__pg_sql create_sql = {
    "q_batch_create",
    "INSERT INTO batches (tier, api, key, worker, lease_until, created_at,"
    " updated_at) VALUES ($1::text, $2::text, $3::text, $4::text,"
    " $5::bigint, $6::bigint, $6::bigint)"
    " ON CONFLICT (key) DO NOTHING RETURNING id"};

/* The item and the batch's count in one statement. */
static const struct q__pg_sql item_add_sql = {
    "q_batch_item_add",
    "WITH i AS (INSERT INTO batch_items (attempt_id, batch_id, job_id, step)"
    " SELECT $2::bigint, id, $3::bigint, $4::bigint FROM batches"
    " WHERE id = $1::bigint ON CONFLICT (attempt_id) DO NOTHING"
    " RETURNING batch_id)"
    " UPDATE batches SET items = items + 1 WHERE id IN (SELECT batch_id"
    " FROM i) RETURNING id"};

/* $1 id, $2 worker, $3 lease_until, $4 state, $5 provider_id, $6 now */
static const struct q__pg_sql set_sql = {
    "q_batch_set",
    "UPDATE batches SET worker = $2::text, lease_until = $3::bigint,"
    " state = $4::bigint, provider_id = coalesce($5::text, provider_id),"
    " updated_at = greatest(updated_at, $6::bigint)"
    " WHERE id = $1::bigint AND state <= $4::bigint"
    " AND (worker = $2::text OR lease_until <= $6::bigint) RETURNING id"};

static const struct q__pg_sql open_sql = {
    "q_batches_open",
    "SELECT id, tier, api, key, provider_id, state, items, worker,"
    " lease_until, created_at, updated_at FROM batches"
    " WHERE tier = $1::text AND state < 3 ORDER BY id"};

static const struct q__pg_sql items_sql = {
    "q_batch_items",
    "SELECT i.attempt_id, i.job_id, i.step,"
    " CASE WHEN a.finished_at IS NULL THEN 0 ELSE 1 END"
    " FROM batch_items i LEFT JOIN attempts a ON a.id = i.attempt_id"
    " WHERE i.batch_id = $1::bigint ORDER BY i.attempt_id"};

static const struct q__pg_sql of_attempt_sql = {
    "q_batch_of_attempt",
    "SELECT batch_id FROM batch_items WHERE attempt_id = $1::bigint"};

static const struct q__pg_sql settle_sql = {
    "q_batch_item_settle",
    "UPDATE batch_items SET realtime_nusd = $2::bigint"
    " WHERE attempt_id = $1::bigint RETURNING attempt_id"};

/* Bytewise, as SQLite's BINARY orders them. */
static const struct q__pg_sql report_sql = {
    "q_report_batches",
    "SELECT b.tier, count(*), sum(coalesce(a.cost_nusd, 0)),"
    " sum(i.realtime_nusd) FROM batch_items i"
    " JOIN batches b ON b.id = i.batch_id"
    " JOIN attempts a ON a.id = i.attempt_id"
    " WHERE i.realtime_nusd IS NOT NULL AND a.finished_at >= $1::bigint"
    " GROUP BY b.tier ORDER BY b.tier COLLATE \"C\""};

/* Runs sql, which returns a row when it did its work: 0 with that row's
 * first column in *id (may be NULL), else none (-ENOENT). */
static int
run_one(struct q__pg *db, const struct q__pg_sql *sql,
        const struct q__pg_params *p, int64_t *id, const char *what)
{
    PGresult *r = NULL;
    int rc = q__pg_run(db, sql, p, &r, what);

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
    rc = run_one(q__pg(db), &create_sql, &p, id, "recording a batch");
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
    rc = run_one(q__pg(db), &item_add_sql, &p, NULL, "recording a batch item");
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
    rc = run_one(q__pg(db), &set_sql, &p, NULL, "updating a batch");
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
    rc = q__pg_select(q__pg(db), &open_sql, &p, sizeof(struct q_batch),
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
    rc = q__pg_select(q__pg(db), &items_sql, &p, sizeof(struct q_batch_item),
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
    return run_one(q__pg(db), &of_attempt_sql, &p, batch_id,
                   "finding an attempt's batch");
}

int
q__pg_batch_item_settle(q_db *db, int64_t attempt_id, int64_t realtime_nusd)
{
    struct q__pg_params p = {0};

    q__pg_p_int(&p, attempt_id);
    q__pg_p_int(&p, realtime_nusd);
    return run_one(q__pg(db), &settle_sql, &p, NULL, "settling a batch item");
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
    rc = q__pg_select(q__pg(db), &report_sql, &p, sizeof(struct q_report_batch),
                      read_report, &v, n, "reporting batches");
    if (rc == 0)
        *out = v;
    return rc;
}

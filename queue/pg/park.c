/* park.c: PostgreSQL storage of park items and the primitives a
 * resolution is made of (park/ composes them): close an item, re-queue or
 * fail a parked job, reset a parked step. Each call is one statement; the
 * meaning is the SQLite backend's (queue/sqlite/park.c). */
#include "queue/pg/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The item and the step's parked state in one statement. */
static const struct q__pg_sql park_add_sql = {
    "q_park_add",
    "WITH ins AS (INSERT INTO park (job_id, step, step_name, reason,"
    "   attempts, request_sha256, request, error, tier, parked_at)"
    "   VALUES ($1::bigint, $2::bigint, $3::text, $4::text, $5::bigint,"
    "   $6::text, $7::text, $8::text, $9::text, $10::bigint) RETURNING id),"
    " step AS (INSERT INTO steps (job_id, idx, state, tier)"
    "   SELECT $1::bigint, $2::bigint, 4, $9::text FROM ins"
    "   ON CONFLICT (job_id, idx) DO UPDATE SET state = excluded.state,"
    "   tier = coalesce(excluded.tier, steps.tier))"
    " SELECT id FROM ins"};

#define PARK_COLS                                                              \
    "id, job_id, step, step_name, reason, attempts, request_sha256,"           \
    " request, error, tier, parked_at, (state = 'open')::int, resolution,"     \
    " resolved_by, resolved_at, note"

static const struct q__pg_sql park_get_sql = {
    "q_park_get", "SELECT " PARK_COLS " FROM park WHERE id = $1::bigint"};

static const struct q__pg_sql park_list_sql = {
    "q_park_list", "SELECT " PARK_COLS " FROM park"
                   " WHERE ($1::boolean OR state = 'open')"
                   " AND ($2::text IS NULL OR reason = $2::text)"
                   " AND ($3::text IS NULL OR tier = $3::text)"
                   " AND ($4::bigint = 0 OR job_id = $4::bigint)"
                   " ORDER BY state = 'open' DESC, id"};

/* The UPDATE that decides a race: only one resolve finds it open (a
 * second waits for the row and then finds it resolved). The EXISTS tells
 * an unknown item from a resolved one. */
static const struct q__pg_sql park_close_sql = {
    "q_park_close",
    "WITH upd AS (UPDATE park SET state = 'resolved', resolution = $2::text,"
    "   resolved_by = $3::text, resolved_at = $4::bigint, note = $5::text"
    "   WHERE id = $1::bigint AND state = 'open' RETURNING id)"
    " SELECT (SELECT count(*) FROM upd),"
    " EXISTS (SELECT 1 FROM park WHERE id = $1::bigint)::int"};

static const struct q__pg_sql requeue_sql = {
    "q_park_requeue",
    "UPDATE jobs SET state = 0, run_at = $2::bigint, updated_at = $2::bigint"
    " WHERE id = $1::bigint AND state = 4 RETURNING id"};

static const struct q__pg_sql fail_parked_sql = {
    "q_park_fail_parked",
    "UPDATE jobs SET state = 3, error = $2::text, updated_at = $3::bigint"
    " WHERE id = $1::bigint AND state = 4 RETURNING id"};

static const struct q__pg_sql step_reset_sql = {
    "q_park_step_reset",
    "INSERT INTO steps (job_id, idx, state, output, reset_after, pin_tier)"
    " VALUES ($1::bigint, $2::bigint, $3::bigint, $4::text, $5::bigint,"
    " $6::text) ON CONFLICT (job_id, idx) DO UPDATE SET"
    " state = excluded.state, output = coalesce(excluded.output, steps.output),"
    " reset_after = greatest(steps.reset_after, excluded.reset_after),"
    " pin_tier = excluded.pin_tier"};

/* Runs sql with p and sets *rows to how many rows it returned. */
static int
run_count(q_db *db, const struct q__pg_sql *sql, const struct q__pg_params *p,
          int *rows, const char *what)
{
    PGresult *res = NULL;
    int rc = q__pg_run(q__pg(db), sql, p, &res, what);

    if (rc != 0)
        return rc;
    *rows = PQntuples(res);
    PQclear(res);
    return 0;
}

int
q__pg_park_add(q_db *db, const struct q_park_new *p, int64_t *id)
{
    struct q__pg_params pp = {0};
    PGresult *res = NULL;
    int rc;

    q__pg_p_int(&pp, p->job_id);
    q__pg_p_int(&pp, p->step);
    q__pg_p_text(&pp, p->step_name);
    q__pg_p_text(&pp, p->reason);
    q__pg_p_int(&pp, p->attempts);
    q__pg_p_text(&pp, p->request_sha256);
    q__pg_p_text(&pp, p->request);
    q__pg_p_text(&pp, p->error);
    q__pg_p_text(&pp, p->tier);
    q__pg_p_int(&pp, p->parked_at);
    rc = q__pg_run(q__pg(db), &park_add_sql, &pp, &res, "parking a step");
    if (rc != 0)
        return rc;
    if (PQntuples(res) == 1)
        *id = q__pg_int(res, 0, 0);
    else
        rc = -EIO;
    PQclear(res);
    return rc;
}

static void
read_park(const PGresult *res, int r, void *elem)
{
    struct q_park_item *p = elem;

    p->id = q__pg_int(res, r, 0);
    p->job_id = q__pg_int(res, r, 1);
    p->step = (int)q__pg_int(res, r, 2);
    p->step_name = q__pg_text(res, r, 3);
    p->reason = q__pg_text(res, r, 4);
    p->attempts = (int)q__pg_int(res, r, 5);
    p->request_sha256 = q__pg_text(res, r, 6);
    p->request = q__pg_text(res, r, 7);
    p->error = q__pg_text(res, r, 8);
    p->tier = q__pg_text(res, r, 9);
    p->parked_at = q__pg_int(res, r, 10);
    p->open = q__pg_int(res, r, 11) != 0;
    p->resolution = q__pg_text(res, r, 12);
    p->resolved_by = q__pg_text(res, r, 13);
    p->resolved_at = q__pg_int(res, r, 14);
    p->note = q__pg_text(res, r, 15);
}

int
q__pg_park_get(q_db *db, int64_t id, struct q_park_item *out)
{
    struct q__pg_params p = {0};
    PGresult *res = NULL;
    int rc;

    q__pg_p_int(&p, id);
    rc = q__pg_run(q__pg(db), &park_get_sql, &p, &res, "reading a park item");
    if (rc != 0)
        return rc;
    if (PQntuples(res) == 0) {
        rc = -ENOENT;
    } else {
        memset(out, 0, sizeof(*out));
        read_park(res, 0, out);
    }
    PQclear(res);
    return rc;
}

int
q__pg_park_list(q_db *db, const struct q_park_filter *f,
                struct q_park_item **out, size_t *n)
{
    struct q__pg_params p = {0};
    PGresult *res = NULL;
    void *v = NULL;
    int rc;

    q__pg_p_bool(&p, f->all);
    q__pg_p_text(&p, f->reason);
    q__pg_p_text(&p, f->tier);
    q__pg_p_int(&p, f->job_id);
    rc = q__pg_run(q__pg(db), &park_list_sql, &p, &res, "listing park items");
    if (rc != 0)
        return rc;
    q__pg_rows(res, sizeof(struct q_park_item), read_park, &v, n);
    PQclear(res);
    *out = v;
    return 0;
}

int
q__pg_park_close(q_db *db, int64_t id, const struct q_park_close *c)
{
    struct q__pg_params p = {0};
    PGresult *res = NULL;
    int rc;

    if (c == NULL || c->resolution == NULL)
        return -EINVAL;
    q__pg_p_int(&p, id);
    q__pg_p_text(&p, c->resolution);
    q__pg_p_text(&p, c->by);
    q__pg_p_int(&p, c->now);
    q__pg_p_text(&p, c->note);
    rc = q__pg_run(q__pg(db), &park_close_sql, &p, &res,
                   "resolving a park item");
    if (rc != 0)
        return rc;
    if (q__pg_int(res, 0, 0) == 0)
        rc = q__pg_int(res, 0, 1) != 0 ? -EALREADY : -ENOENT;
    PQclear(res);
    return rc;
}

int
q__pg_job_requeue_parked(q_db *db, int64_t job_id, int64_t now)
{
    struct q__pg_params p = {0};
    int rows = 0, rc;

    q__pg_p_int(&p, job_id);
    q__pg_p_int(&p, now);
    rc = run_count(db, &requeue_sql, &p, &rows, "re-queueing a parked job");
    if (rc == 0 && rows == 0)
        rc = -EALREADY;
    return rc;
}

int
q__pg_job_fail_parked(q_db *db, int64_t job_id, const char *error, int64_t now)
{
    struct q__pg_params p = {0};
    int rows = 0, rc;

    q__pg_p_int(&p, job_id);
    q__pg_p_text(&p, error);
    q__pg_p_int(&p, now);
    rc = run_count(db, &fail_parked_sql, &p, &rows, "failing a parked job");
    if (rc == 0 && rows == 0)
        rc = -EALREADY;
    return rc;
}

int
q__pg_step_reset(q_db *db, int64_t job_id, int index,
                 const struct q_step_reset *r)
{
    struct q__pg_params p = {0};

    q__pg_p_int(&p, job_id);
    q__pg_p_int(&p, index);
    q__pg_p_int(&p, r->state);
    q__pg_p_text(&p, r->output);
    q__pg_p_int(&p, r->reset_after);
    q__pg_p_text(&p, r->pin_tier);
    return q__pg_run(q__pg(db), &step_reset_sql, &p, NULL,
                     "resetting a parked step");
}

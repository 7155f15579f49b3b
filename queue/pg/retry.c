/* retry.c: PostgreSQL storage of a job's retries (`jobs retry`), one
 * statement each; the meaning is the SQLite backend's
 * (queue/sqlite/retry.c). */
#include "queue/pg/internal.h"

#include <errno.h>

#include "queue/park.h"

/* The job locked as it is (only in the state the caller saw: a retry
 * that waited for the row finds it moved, EvalPlanQual), then the row,
 * the job, the attempts left without result and the steps from $3 on. The
 * EXISTS tells an unknown job from one in another state. */
static const struct q__pg_sql retry_sql = {
    "q_job_retry",
    "WITH old AS (SELECT id, state, error FROM jobs WHERE id = $1::bigint"
    "   AND state = $2::bigint FOR UPDATE),"
    " r AS (INSERT INTO job_retries (job_id, from_step, retried_by,"
    "   retried_at, prior_state, prior_error) SELECT id, $3::bigint,"
    "   $4::text, $5::bigint, state, error FROM old RETURNING id),"
    " j AS (UPDATE jobs SET state = 0, run_at = $7::bigint,"
    "   deadline_at = $6::bigint, error = NULL, lease_owner = NULL,"
    "   lease_until = NULL, updated_at = $5::bigint"
    "   WHERE id IN (SELECT id FROM old)),"
    " a AS (UPDATE attempts SET finished_at = $5::bigint,"
    "   outcome = 'unknown', reason = 'retried'"
    "   WHERE job_id IN (SELECT id FROM old) AND step >= $3::bigint"
    "   AND finished_at IS NULL),"
    " s AS (UPDATE steps SET state = 0, output = NULL, pin_tier = NULL,"
    "   reset_after = greatest(steps.reset_after, (SELECT"
    "   coalesce(max(a.attempt), 0) FROM attempts a"
    "   WHERE a.job_id = steps.job_id AND a.step = steps.idx))"
    "   WHERE steps.job_id IN (SELECT id FROM old) AND steps.idx >= $3::bigint)"
    " SELECT coalesce((SELECT id FROM r), 0),"
    " EXISTS (SELECT 1 FROM jobs WHERE id = $1::bigint)::int"};

static const struct q__pg_sql retries_list_sql = {
    "q_retries_list",
    "SELECT id, job_id, from_step, retried_by, retried_at, prior_state,"
    " prior_error FROM job_retries WHERE job_id = $1::bigint ORDER BY id"};

int
q__pg_job_retry(q_db *db, const struct q_retry_new *r, int64_t *id)
{
    struct q__pg_params p = {0};
    int64_t got[2]; /* the retry's id (0: none), whether the job exists */
    int rc;

    if (r == NULL || r->by == NULL || r->from < 0)
        return -EINVAL;
    q__pg_p_int(&p, r->job_id);
    q__pg_p_int(&p, r->expect);
    q__pg_p_int(&p, r->from);
    q__pg_p_text(&p, r->by);
    q__pg_p_int(&p, r->now);
    q__pg_p_int(&p, r->deadline_at);
    q__pg_p_int(&p, r->run_at);
    rc = q__pg_select_one(q__pg(db), &retry_sql, &p, sizeof(got),
                          q__pg_read_ints, got, "retrying a job");
    if (rc == 0 && got[0] == 0)
        return got[1] != 0 ? -EALREADY : -ENOENT;
    if (rc == 0)
        *id = got[0];
    return rc;
}

static void
read_retry(const PGresult *res, int row, void *elem)
{
    struct q_retry *r = elem;

    r->id = q__pg_int(res, row, 0);
    r->job_id = q__pg_int(res, row, 1);
    r->from = (int)q__pg_int(res, row, 2);
    r->by = q__pg_text(res, row, 3);
    r->at = q__pg_int(res, row, 4);
    r->prior_state = (enum q_job_state)q__pg_int(res, row, 5);
    r->prior_error = q__pg_text(res, row, 6);
}

int
q__pg_retries_list(q_db *db, int64_t job_id, struct q_retry **out, size_t *n)
{
    struct q__pg_params p = {0};
    void *v = NULL;
    int rc;

    q__pg_p_int(&p, job_id);
    rc = q__pg_select(q__pg(db), &retries_list_sql, &p, sizeof(struct q_retry),
                      read_retry, &v, n, "listing a job's retries");
    if (rc == 0)
        *out = v;
    return rc;
}

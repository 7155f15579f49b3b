/* retry.c: PostgreSQL storage of a job's retries (`jobs retry`), one
 * statement each; the meaning is the SQLite backend's
 * (queue/sqlite/retry.c). */
#include "queue/pg/internal.h"

#include <errno.h>

#include "queue/park.h"

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
    rc = q__pg_select_one(q__pg(db), ST_RETRY, &p, sizeof(got), q__pg_read_ints,
                          got, "retrying a job");
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
    rc = q__pg_select(q__pg(db), ST_RETRIES_LIST, &p, sizeof(struct q_retry),
                      read_retry, &v, n, "listing a job's retries");
    if (rc == 0)
        *out = v;
    return rc;
}

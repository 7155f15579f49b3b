/* retry.c: SQLite storage of a job's retries (`jobs retry`): queueing a
 * failed, cancelled or done job again from a step, and the retries a job
 * had. The rules (which job, from which step, side effects) are park/'s. */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <stdlib.h>

#include "queue/park.h"

/* The row, then the job and its steps; -EALREADY when the job is not in
 * r->expect any more, -ENOENT when there is no such job. */
static int
retry_locked(struct q__sqlite *db, const struct q_retry_new *r, int64_t *id)
{
    sqlite3_stmt *s = q__stmt(db, ST_RETRY_ADD);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, r->job_id);
    sqlite3_bind_int(s, 2, r->from);
    q__bind_text(s, 3, r->by);
    sqlite3_bind_int64(s, 4, r->now);
    sqlite3_bind_int(s, 5, (int)r->expect);
    if ((rc = q__run_done(db, s, "recording a job's retry")) != 0)
        return rc;
    if (sqlite3_changes(db->h) == 0) {
        /* Nothing inserted: tell "no such job" from "not in that state"
         * (a retry that won a race moved it already). */
        if ((s = q__stmt(db, ST_JOB_STATE)) == NULL)
            return -EIO;
        sqlite3_bind_int64(s, 1, r->job_id);
        rc = q__step_row(db, s, "retrying a job");
        sqlite3_reset(s);
        return rc == 0 ? -EALREADY : rc;
    }
    *id = sqlite3_last_insert_rowid(db->h);
    if ((s = q__stmt(db, ST_RETRY_JOB)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, r->job_id);
    sqlite3_bind_int64(s, 2, r->run_at);
    sqlite3_bind_int64(s, 3, r->deadline_at);
    sqlite3_bind_int64(s, 4, r->now);
    if ((rc = q__run_done(db, s, "queueing a retried job")) != 0)
        return rc;
    if ((s = q__stmt(db, ST_RETRY_ATTEMPTS)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, r->job_id);
    sqlite3_bind_int(s, 2, r->from);
    sqlite3_bind_int64(s, 3, r->now);
    if ((rc = q__run_done(db, s, "closing a retried job's attempts")) != 0)
        return rc;
    if ((s = q__stmt(db, ST_RETRY_STEPS)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, r->job_id);
    sqlite3_bind_int(s, 2, r->from);
    return q__run_done(db, s, "resetting a retried job's steps");
}

int
q__sqlite_job_retry(q_db *base, const struct q_retry_new *r, int64_t *id)
{
    struct q__sqlite *db = q__sqlite(base);
    int64_t got = 0;
    int rc;

    if (r == NULL || r->by == NULL || r->from < 0)
        return -EINVAL;
    if ((rc = q__tx_enter(db)) != 0)
        return rc;
    rc = q__tx_leave(db, retry_locked(db, r, &got));
    if (rc == 0)
        *id = got;
    return rc;
}

static void
read_retry(sqlite3_stmt *s, void *elem)
{
    struct q_retry *r = elem;

    r->id = sqlite3_column_int64(s, 0);
    r->job_id = sqlite3_column_int64(s, 1);
    r->from = sqlite3_column_int(s, 2);
    r->by = q__col_text(s, 3);
    r->at = sqlite3_column_int64(s, 4);
    r->prior_state = (enum q_job_state)sqlite3_column_int(s, 5);
    r->prior_error = q__col_text(s, 6);
}

int
q__sqlite_retries_list(q_db *base, int64_t job_id, struct q_retry **out,
                       size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_RETRIES_LIST);
    void *v = NULL;
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, job_id);
    rc = q__rows(db, s, sizeof(struct q_retry), read_retry, q__retry_clean, &v,
                 n, "listing a job's retries");
    if (rc == 0)
        *out = v;
    return rc;
}

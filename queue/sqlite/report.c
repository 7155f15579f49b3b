/* report.c: SQLite storage side of the morning report (`stepq report`):
 * what happened since a time, read from the jobs and attempts tables as
 * they are (no table or index of its own), and a job read by its dedupe
 * key. Each call is one cached statement (store.c has the SQL), read-only,
 * in a transaction or not. */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "queue/report.h"

/* SQLite's LIMIT -1 is no limit: the contract's 0. */
static sqlite3_int64
limit_arg(size_t limit)
{
    return limit > 0 ? (sqlite3_int64)limit : -1;
}

/* Runs the cached statement id with since as ?1 and, when it has one,
 * limit as ?2, into a new array (*out set only when it succeeds). */
static int
since_rows(q_db *base, enum q__stmt_id id, int64_t since, size_t limit,
           size_t elem, q__read_fn read, q__clean_fn clean, void **out,
           size_t *n, const char *what)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, id);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, since);
    if (sqlite3_bind_parameter_count(s) >= 2)
        sqlite3_bind_int64(s, 2, limit_arg(limit));
    rc = q__rows(db, s, elem, read, clean, out, n, what);
    sqlite3_reset(s);
    return rc;
}

int
q__sqlite_report_jobs(q_db *base, int64_t since, int64_t counts[Q_JOB_NSTATES])
{
    struct q__sqlite *db = q__sqlite(base);
    int64_t c[Q_JOB_NSTATES] = {0};
    sqlite3_stmt *s = q__stmt(db, ST_REPORT_JOBS);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, since);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int st = sqlite3_column_int(s, 0);
        if (st >= 0 && st < Q_JOB_NSTATES)
            c[st] = sqlite3_column_int64(s, 1);
    }
    rc = rc == SQLITE_DONE ? 0 : q__db_err(db, "counting the jobs of a report");
    sqlite3_reset(s);
    if (rc != 0)
        return rc;
    memcpy(counts, c, sizeof(c));
    return 0;
}

/* Reads a row of ST_REPORT_TIERS: the columns of struct q_report_tier in
 * its order. */
static void
read_tier(sqlite3_stmt *s, void *elem)
{
    struct q_report_tier *t = elem;
    int64_t *v[] = {&t->requests,       &t->tokens,     &t->ok,
                    &t->soft_throttle,  &t->hard_quota, &t->truncated,
                    &t->schema_invalid, &t->refused,    &t->server_error,
                    &t->timeout,        &t->unknown,    &t->in_flight,
                    &t->breaker_opened, &t->priced,     &t->cost_nusd};

    t->tier = q__col_text(s, 0);
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        *v[i] = sqlite3_column_int64(s, 1 + (int)i);
}

int
q__sqlite_report_tiers(q_db *base, int64_t since, struct q_report_tier **out,
                       size_t *n)
{
    return since_rows(base, ST_REPORT_TIERS, since, 0,
                      sizeof(struct q_report_tier), read_tier,
                      q__report_tier_clean, (void **)out, n,
                      "reporting the tiers");
}

static void
read_failure(sqlite3_stmt *s, void *elem)
{
    struct q_report_failure *f = elem;

    f->outcome = q__col_text(s, 0);
    f->reason = q__col_text(s, 1);
    f->count = sqlite3_column_int64(s, 2);
    f->job_id = sqlite3_column_int64(s, 3);
    f->step = sqlite3_column_int(s, 4);
    f->attempt = sqlite3_column_int(s, 5);
    f->status = sqlite3_column_int(s, 6);
    f->tier = q__col_text(s, 7);
    f->body = q__col_text(s, 8);
}

int
q__sqlite_report_failures(q_db *base, int64_t since, size_t limit,
                          struct q_report_failure **out, size_t *n)
{
    return since_rows(base, ST_REPORT_FAILURES, since, limit,
                      sizeof(struct q_report_failure), read_failure,
                      q__report_failure_clean, (void **)out, n,
                      "reporting the failures");
}

int
q__sqlite_report_failed(q_db *base, int64_t since, size_t limit,
                        struct q_job **out, size_t *n)
{
    return since_rows(base, ST_REPORT_FAILED, since, limit,
                      sizeof(struct q_job), q__sqlite_read_job, q__job_clean,
                      (void **)out, n, "reporting the failed jobs");
}

int
q__sqlite_report_keyed(q_db *base, const char *prefix, int64_t since,
                       size_t limit, struct q_job **out, size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_REPORT_KEYED);
    size_t len = strlen(prefix);
    char *hi;
    int rc;

    if (s == NULL)
        return -EIO;
    /* Every key with the prefix sorts from the prefix up to the prefix
     * with its last byte raised (keys are text, compared bytewise). */
    hi = xstrdup(prefix);
    hi[len - 1] = (char)((unsigned char)hi[len - 1] + 1);
    q__bind_text(s, 1, prefix);
    q__bind_text(s, 2, hi);
    sqlite3_bind_int64(s, 3, since);
    sqlite3_bind_int64(s, 4, limit_arg(limit));
    rc = q__rows(db, s, sizeof(struct q_job), q__sqlite_read_job, q__job_clean,
                 (void **)out, n, "reporting jobs by key");
    sqlite3_reset(s);
    free(hi);
    return rc;
}

int
q__sqlite_report_slowest(q_db *base, int64_t since, size_t limit,
                         struct q_job **out, size_t *n)
{
    return since_rows(base, ST_REPORT_SLOWEST, since, limit,
                      sizeof(struct q_job), q__sqlite_read_job, q__job_clean,
                      (void **)out, n, "reporting the slowest jobs");
}

static void
read_job_cost(sqlite3_stmt *s, void *elem)
{
    struct q_report_job *j = elem;

    j->id = sqlite3_column_int64(s, 0);
    j->name = q__col_text(s, 1);
    j->key = q__col_text(s, 2);
    j->tokens = sqlite3_column_int64(s, 3);
    j->cost_nusd = sqlite3_column_int64(s, 4);
}

int
q__sqlite_report_costliest(q_db *base, int64_t since, size_t limit,
                           struct q_report_job **out, size_t *n)
{
    return since_rows(base, ST_REPORT_COSTLIEST, since, limit,
                      sizeof(struct q_report_job), read_job_cost,
                      q__report_job_clean, (void **)out, n,
                      "reporting the costliest jobs");
}

int
q__sqlite_job_by_key(q_db *base, const char *key, struct q_job *out)
{
    struct q__sqlite *db = q__sqlite(base);
    struct q_job got = {0};
    sqlite3_stmt *s;
    int rc;

    if (key == NULL || out == NULL)
        return -EINVAL;
    if ((s = q__stmt(db, ST_JOB_GET_BY_KEY)) == NULL)
        return -EIO;
    q__bind_text(s, 1, key);
    if ((rc = q__step_row(db, s, "reading a job by its key")) != 0)
        return rc;
    q__sqlite_read_job(s, &got);
    sqlite3_reset(s);
    *out = got;
    return 0;
}

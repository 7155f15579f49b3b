/* report.c: PostgreSQL storage side of the morning report (`stepq
 * report`) and a job read by its dedupe key: each call is one read-only
 * statement, in a transaction or not. The meaning and order are the
 * SQLite backend's (queue/sqlite/report.c): text compared bytewise
 * (COLLATE "C", SQLite's BINARY), a NULL tier last, a NULL reason first. */
#include "queue/pg/internal.h"

#include <errno.h>
#include <string.h>

#include "queue/report.h"

/* The contract's limit 0 is all: LIMIT NULL. */
static void
p_limit(struct q__pg_params *p, size_t limit)
{
    if (limit > 0)
        q__pg_p_int(p, (int64_t)limit);
    else
        q__pg_p_text(p, NULL);
}

/* Runs st with since as $1 and, when limited, limit as $2 (0: all),
 * into a new array (*out set only when it succeeds). */
static int
since_select(q_db *db, enum q__pg_stmt_id st, int64_t since, bool limited,
             size_t limit, size_t elem, q__pg_read_fn read, void **out,
             size_t *n, const char *what)
{
    struct q__pg_params p = {0};

    q__pg_p_int(&p, since);
    if (limited)
        p_limit(&p, limit);
    return q__pg_select(q__pg(db), st, &p, elem, read, out, n, what);
}

int
q__pg_report_jobs(q_db *db, int64_t since, int64_t counts[Q_JOB_NSTATES])
{
    int64_t c[Q_JOB_NSTATES] = {0};
    struct q__pg_params p = {0};
    PGresult *r = NULL;
    int rc;

    q__pg_p_int(&p, since);
    rc = q__pg_run(q__pg(db), ST_REPORT_JOBS, &p, &r,
                   "counting the jobs of a report");
    if (rc != 0)
        return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        int64_t st = q__pg_int(r, i, 0);
        if (st >= 0 && st < Q_JOB_NSTATES)
            c[st] = q__pg_int(r, i, 1);
    }
    PQclear(r);
    memcpy(counts, c, sizeof(c));
    return 0;
}

/* Reads a row of ST_REPORT_TIERS: the columns of struct q_report_tier in its
 * order. */
static void
read_tier(const PGresult *res, int r, void *elem)
{
    struct q_report_tier *t = elem;
    int64_t *v[] = {&t->requests,       &t->tokens,     &t->ok,
                    &t->soft_throttle,  &t->hard_quota, &t->truncated,
                    &t->schema_invalid, &t->refused,    &t->server_error,
                    &t->timeout,        &t->unknown,    &t->in_flight,
                    &t->breaker_opened, &t->priced,     &t->cost_nusd};

    t->tier = q__pg_text(res, r, 0);
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        *v[i] = q__pg_int(res, r, 1 + (int)i);
}

int
q__pg_report_tiers(q_db *db, int64_t since, struct q_report_tier **out,
                   size_t *n)
{
    return since_select(db, ST_REPORT_TIERS, since, false, 0,
                        sizeof(struct q_report_tier), read_tier, (void **)out,
                        n, "reporting the tiers");
}

static void
read_failure(const PGresult *res, int r, void *elem)
{
    struct q_report_failure *f = elem;

    f->outcome = q__pg_text(res, r, 0);
    f->reason = q__pg_text(res, r, 1);
    f->count = q__pg_int(res, r, 2);
    f->job_id = q__pg_int(res, r, 3);
    f->step = (int)q__pg_int(res, r, 4);
    f->attempt = (int)q__pg_int(res, r, 5);
    f->status = (int)q__pg_int(res, r, 6);
    f->tier = q__pg_text(res, r, 7);
    f->body = q__pg_text(res, r, 8);
}

int
q__pg_report_failures(q_db *db, int64_t since, size_t limit,
                      struct q_report_failure **out, size_t *n)
{
    return since_select(db, ST_REPORT_FAILURES, since, true, limit,
                        sizeof(struct q_report_failure), read_failure,
                        (void **)out, n, "reporting the failures");
}

int
q__pg_report_failed(q_db *db, int64_t since, size_t limit, struct q_job **out,
                    size_t *n)
{
    return since_select(db, ST_REPORT_FAILED, since, true, limit,
                        sizeof(struct q_job), q__pg_read_job, (void **)out, n,
                        "reporting the failed jobs");
}

int
q__pg_report_keyed(q_db *db, const char *prefix, int64_t since, size_t limit,
                   struct q_job **out, size_t *n)
{
    struct q__pg_params p = {0};

    q__pg_p_text(&p, prefix);
    q__pg_p_int(&p, since);
    p_limit(&p, limit);
    return q__pg_select(q__pg(db), ST_REPORT_KEYED, &p, sizeof(struct q_job),
                        q__pg_read_job, (void **)out, n,
                        "reporting jobs by key");
}

int
q__pg_report_slowest(q_db *db, int64_t since, size_t limit, struct q_job **out,
                     size_t *n)
{
    return since_select(db, ST_REPORT_SLOWEST, since, true, limit,
                        sizeof(struct q_job), q__pg_read_job, (void **)out, n,
                        "reporting the slowest jobs");
}

static void
read_job_cost(const PGresult *res, int r, void *elem)
{
    struct q_report_job *j = elem;

    j->id = q__pg_int(res, r, 0);
    j->name = q__pg_text(res, r, 1);
    j->key = q__pg_text(res, r, 2);
    j->tokens = q__pg_int(res, r, 3);
    j->cost_nusd = q__pg_int(res, r, 4);
}

int
q__pg_report_costliest(q_db *db, int64_t since, size_t limit,
                       struct q_report_job **out, size_t *n)
{
    return since_select(db, ST_REPORT_COSTLIEST, since, true, limit,
                        sizeof(struct q_report_job), read_job_cost,
                        (void **)out, n, "reporting the costliest jobs");
}

int
q__pg_job_by_key(q_db *db, const char *key, struct q_job *out)
{
    struct q__pg_params p = {0};

    if (key == NULL || out == NULL)
        return -EINVAL;
    q__pg_p_text(&p, key);
    return q__pg_select_one(q__pg(db), ST_JOB_GET_BY_KEY, &p, sizeof(*out),
                            q__pg_read_job, out, "reading a job by its key");
}

/* prune.c: the PostgreSQL side of q_prune (queue/prune.c): the
 * statements of Q__PRUNE_* (the same text as SQLite's), each run at once
 * inside the caller's transaction, each with only the parameters it uses
 * (a prepared statement cannot leave one untyped). There is no backup
 * entry: q_backup copies the store into a SQLite file with q_copy, and a
 * backup of the server is pg_dump's (docs/operating.md). */
#include "queue/pg/internal.h"

#include <errno.h>

#include "queue/admin.h"

#define B(n) "$" #n "::bigint"

static const struct q__pg_sql count_sql = {
    "q_prune_count", Q__PRUNE_COUNT(B(1), B(2), B(3), B(4), B(5))};
static const struct q__pg_sql jobs_sql = {"q_prune_jobs",
                                          Q__PRUNE_DELETE_JOBS(B(1), B(2))};
static const struct q__pg_sql bodies_sql = {
    "q_prune_bodies", Q__PRUNE_DROP_BODIES(B(1), B(2), B(3), B(4))};
static const struct q__pg_sql events_sql = {"q_prune_events",
                                            Q__PRUNE_DELETE_EVENTS(B(1))};
static const struct q__pg_sql budgets_sql = {"q_prune_budgets",
                                             Q__PRUNE_DELETE_BUDGETS(B(1))};

/* Runs a write of sql with the n values of v. */
static int
write_n(struct q__pg *db, const struct q__pg_sql *sql, const int64_t *v, int n)
{
    struct q__pg_params p = {0};

    for (int i = 0; i < n; i++)
        q__pg_p_int(&p, v[i]);
    return q__pg_run(db, sql, &p, NULL, "pruning");
}

int
q__pg_prune(q_db *base, const struct q_prune *p, int64_t limit, bool run,
            struct q_prune_counts *c)
{
    struct q__pg *db = q__pg(base);
    const int64_t all[] = {p->jobs_before, p->bodies_before, p->budgets_before,
                           limit, p->bodies_from_job};
    const int64_t jobs[] = {p->jobs_before, limit};
    const int64_t bodies[] = {p->jobs_before, p->bodies_before, limit,
                              p->bodies_from_job};
    struct q__pg_params cp = {0};
    int64_t *v[] = {&c->jobs,   &c->steps,      &c->attempts,    &c->park,
                    &c->bodies, &c->bodies_job, &c->tier_events, &c->budgets};
    PGresult *r = NULL;
    int rc;

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(all); i++)
        q__pg_p_int(&cp, all[i]);
    rc = q__pg_run(db, &count_sql, &cp, &r, "counting what to prune");
    if (rc == 0 && PQntuples(r) != 1)
        rc = -EIO;
    for (size_t i = 0; rc == 0 && i < STEPQ_ARRAY_LEN(v); i++)
        *v[i] = q__pg_int(r, 0, (int)i);
    PQclear(r);
    if (rc != 0 || !run)
        return rc;
    if ((rc = write_n(db, &jobs_sql, jobs, 2)) == 0 &&
        (rc = write_n(db, &bodies_sql, bodies, 4)) == 0 &&
        (rc = write_n(db, &events_sql, &p->jobs_before, 1)) == 0)
        rc = write_n(db, &budgets_sql, &p->budgets_before, 1);
    return rc;
}

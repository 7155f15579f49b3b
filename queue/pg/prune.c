/* prune.c: the PostgreSQL side of q_prune (queue/prune.c): the
 * statements of Q__PRUNE_* (the same text as SQLite's), each run at once
 * inside the caller's transaction, each with only the parameters it uses
 * (a prepared statement cannot leave one untyped). There is no backup
 * entry: q_backup copies the store into a SQLite file with q_copy, and a
 * backup of the server is pg_dump's (docs/operating.md). */
#include "queue/pg/internal.h"

#include <errno.h>

#include "queue/admin.h"

/* Runs a write of st with the n values of v. */
static int
write_n(struct q__pg *db, enum q__pg_stmt_id st, const int64_t *v, int n)
{
    struct q__pg_params p = {0};

    for (int i = 0; i < n; i++)
        q__pg_p_int(&p, v[i]);
    return q__pg_run(db, st, &p, NULL, "pruning");
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
    rc = q__pg_run(db, ST_PRUNE_COUNT, &cp, &r, "counting what to prune");
    if (rc == 0 && PQntuples(r) != 1)
        rc = -EIO;
    for (size_t i = 0; rc == 0 && i < STEPQ_ARRAY_LEN(v); i++)
        *v[i] = q__pg_int(r, 0, (int)i);
    PQclear(r);
    if (rc != 0 || !run)
        return rc;
    if ((rc = write_n(db, ST_PRUNE_JOBS, jobs, 2)) == 0 &&
        (rc = write_n(db, ST_PRUNE_BODIES, bodies, 4)) == 0 &&
        (rc = write_n(db, ST_PRUNE_EVENTS, &p->jobs_before, 1)) == 0)
        rc = write_n(db, ST_PRUNE_BUDGETS, &p->budgets_before, 1);
    return rc;
}

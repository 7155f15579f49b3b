/* budgets.c: PostgreSQL storage of the budgets in money (table budgets).
 * Each call is one statement, run at once, in a transaction or not: a
 * reservation's answer decides whether a send goes, so it cannot wait
 * for a later round trip. The meaning is the SQLite backend's
 * (queue/sqlite/budgets.c): the UPSERT's WHERE reads the row's latest
 * committed version under its lock, so of workers reserving at once none
 * passes the limit. */
#include "queue/pg/internal.h"

#include <errno.h>
#include <stdlib.h>

#include "queue/tiers.h"

int
q__pg_budget_reserve(q_db *db, const char *name, const char *window,
                     int64_t limit, int64_t amount, int64_t now)
{
    struct q__pg_params p = {0};
    PGresult *r = NULL;
    int rc;

    q__pg_p_text(&p, name);
    q__pg_p_text(&p, window);
    q__pg_p_int(&p, limit);
    q__pg_p_int(&p, amount);
    q__pg_p_int(&p, now);
    rc = q__pg_run(q__pg(db), ST_BUDGET_RESERVE, &p, &r, "reserving a budget");
    if (rc == 0 && PQntuples(r) == 0)
        rc = -EDQUOT;
    PQclear(r);
    return rc;
}

int
q__pg_budget_settle(q_db *db, const char *name, const char *window,
                    int64_t reserved, int64_t spent, int64_t now)
{
    struct q__pg_params p = {0};

    q__pg_p_text(&p, name);
    q__pg_p_text(&p, window);
    q__pg_p_int(&p, reserved);
    q__pg_p_int(&p, spent);
    q__pg_p_int(&p, now);
    return q__pg_run(q__pg(db), ST_BUDGET_SETTLE, &p, NULL,
                     "settling a budget");
}

static void
read_budget(const PGresult *res, int r, void *elem)
{
    struct q_budget *b = elem;

    b->name = q__pg_text(res, r, 0);
    b->window = q__pg_text(res, r, 1);
    b->spent_nusd = q__pg_int(res, r, 2);
    b->reserved_nusd = q__pg_int(res, r, 3);
    b->updated_at = q__pg_int(res, r, 4);
}

int
q__pg_budgets_list(q_db *db, int64_t since, struct q_budget **out, size_t *n)
{
    struct q__pg_params p = {0};
    void *v = NULL;
    int rc;

    q__pg_p_int(&p, since);
    rc = q__pg_select(q__pg(db), ST_BUDGETS_LIST, &p, sizeof(struct q_budget),
                      read_budget, &v, n, "listing budgets");
    if (rc == 0)
        *out = v;
    return rc;
}

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

/* $1 name, $2 window, $3 limit, $4 amount, $5 now. */
static const struct q__pg_sql reserve_sql = {
    "q_budget_reserve",
    "INSERT INTO budgets AS b (name, win, reserved_nusd, updated_at)"
    " SELECT $1::text, $2::text, $4::bigint, $5::bigint"
    " WHERE $4::bigint <= $3::bigint"
    " ON CONFLICT (name, win) DO UPDATE"
    " SET reserved_nusd = b.reserved_nusd + EXCLUDED.reserved_nusd,"
    " updated_at = greatest(b.updated_at, EXCLUDED.updated_at)"
    " WHERE b.spent_nusd + b.reserved_nusd + EXCLUDED.reserved_nusd"
    " <= $3::bigint RETURNING 1"};

/* $1 name, $2 window, $3 reserved, $4 spent, $5 now. */
static const struct q__pg_sql settle_sql = {
    "q_budget_settle",
    "INSERT INTO budgets AS b (name, win, spent_nusd, updated_at)"
    " VALUES ($1::text, $2::text, $4::bigint, $5::bigint)"
    " ON CONFLICT (name, win) DO UPDATE"
    " SET reserved_nusd = greatest(0, b.reserved_nusd - $3::bigint),"
    " spent_nusd = b.spent_nusd + EXCLUDED.spent_nusd,"
    " updated_at = greatest(b.updated_at, EXCLUDED.updated_at)"};

/* Bytewise, as SQLite's BINARY orders them. */
static const struct q__pg_sql list_sql = {
    "q_budgets_list",
    "SELECT name, win, spent_nusd, reserved_nusd, updated_at FROM budgets"
    " WHERE updated_at >= $1::bigint"
    " ORDER BY name COLLATE \"C\", win COLLATE \"C\""};

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
    rc = q__pg_run(q__pg(db), &reserve_sql, &p, &r, "reserving a budget");
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
    return q__pg_run(q__pg(db), &settle_sql, &p, NULL, "settling a budget");
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
    rc = q__pg_select(q__pg(db), &list_sql, &p, sizeof(struct q_budget),
                      read_budget, &v, n, "listing budgets");
    if (rc == 0)
        *out = v;
    return rc;
}

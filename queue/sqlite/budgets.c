/* budgets.c: SQLite storage of the budgets in money (table budgets): a
 * reservation is one UPSERT whose WHERE keeps spent + reserved within the
 * limit (store.c has the SQL), so workers reserving at once never pass
 * it; a settlement moves a reservation to what the send cost. Each needs
 * no transaction of its own: outside one it commits by itself, inside one
 * it joins it. */
#include "queue/sqlite/internal.h"

#include <errno.h>

#include "queue/tiers.h"

int
q__sqlite_budget_reserve(q_db *base, const char *name, const char *window,
                         int64_t limit, int64_t amount, int64_t now)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s;
    int rc;

    if ((s = q__stmt(db, ST_BUDGET_RESERVE)) == NULL)
        return -EIO;
    q__bind_text(s, 1, name);
    q__bind_text(s, 2, window);
    sqlite3_bind_int64(s, 3, limit);
    sqlite3_bind_int64(s, 4, amount);
    sqlite3_bind_int64(s, 5, now);
    if ((rc = q__run_done(db, s, "reserving a budget")) != 0)
        return rc;
    return sqlite3_changes(db->h) > 0 ? 0 : -EDQUOT;
}

int
q__sqlite_budget_settle(q_db *base, const char *name, const char *window,
                        int64_t reserved, int64_t spent, int64_t now)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s;

    if ((s = q__stmt(db, ST_BUDGET_SETTLE)) == NULL)
        return -EIO;
    q__bind_text(s, 1, name);
    q__bind_text(s, 2, window);
    sqlite3_bind_int64(s, 3, reserved);
    sqlite3_bind_int64(s, 4, spent);
    sqlite3_bind_int64(s, 5, now);
    return q__run_done(db, s, "settling a budget");
}

static void
read_budget(sqlite3_stmt *s, void *elem)
{
    struct q_budget *b = elem;

    b->name = q__col_text(s, 0);
    b->window = q__col_text(s, 1);
    b->spent_nusd = sqlite3_column_int64(s, 2);
    b->reserved_nusd = sqlite3_column_int64(s, 3);
    b->updated_at = sqlite3_column_int64(s, 4);
}

int
q__sqlite_budgets_list(q_db *base, int64_t since, struct q_budget **out,
                       size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_BUDGETS_LIST);
    void *v = NULL;
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, since);
    rc = q__rows(db, s, sizeof(struct q_budget), read_budget, q__budget_clean,
                 &v, n, "reading budgets");
    if (rc == 0)
        *out = v;
    return rc;
}

/* stats.c: read-only summaries of the ledger and the park table (SQLite). */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char attempts_sql[] =
    "SELECT tier, outcome, reason, decision, count(*) FROM attempts"
    " GROUP BY tier, outcome, reason, decision"
    " ORDER BY tier IS NULL, tier, count(*) DESC, outcome, decision";

static const char park_sql[] =
    "SELECT p.id, p.job_id, j.name, p.step_name, p.reason, p.error, p.tier,"
    "       p.attempts, p.parked_at"
    " FROM park p JOIN jobs j ON j.id = p.job_id"
    " WHERE p.state = 'open' ORDER BY p.id LIMIT ?1";

/* The statements are prepared per call (not in the connection's cache of
 * internal.h) so that this file stays an add-on to the store: a report
 * runs a few times a second at most. */
static int
prepare(struct q__sqlite *db, const char *sql, sqlite3_stmt **out)
{
    if (sqlite3_prepare_v2(db->h, sql, -1, out, NULL) != SQLITE_OK) {
        *out = NULL;
        return q__db_err(db, "preparing a report");
    }
    return 0;
}

static void
read_group(sqlite3_stmt *s, void *elem)
{
    struct q_attempt_group *g = elem;

    g->tier = q__col_text(s, 0);
    g->outcome = q__col_text(s, 1);
    g->reason = q__col_text(s, 2);
    g->decision = q__col_text(s, 3);
    g->count = sqlite3_column_int64(s, 4);
}

int
q__sqlite_stats_attempts(q_db *base, struct q_attempt_group **out, size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = NULL;
    void *v = NULL;
    int rc;

    if ((rc = prepare(db, attempts_sql, &s)) != 0)
        return rc;
    rc = q__rows(db, s, sizeof(struct q_attempt_group), read_group,
                 q__group_clean, &v, n, "reading the attempts ledger");
    sqlite3_finalize(s);
    if (rc == 0)
        *out = v;
    return rc;
}

static void
read_brief(sqlite3_stmt *s, void *elem)
{
    struct q_park_brief *p = elem;

    p->id = sqlite3_column_int64(s, 0);
    p->job_id = sqlite3_column_int64(s, 1);
    p->job_name = q__col_text(s, 2);
    p->step = q__col_text(s, 3);
    p->reason = q__col_text(s, 4);
    p->error = q__col_text(s, 5);
    p->tier = q__col_text(s, 6);
    p->attempts = sqlite3_column_int(s, 7);
    p->parked_at = sqlite3_column_int64(s, 8);
}

int
q__sqlite_stats_park_open(q_db *base, size_t limit, struct q_park_brief **out,
                          size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = NULL;
    void *v = NULL;
    int rc;

    if ((rc = prepare(db, park_sql, &s)) != 0)
        return rc;
    sqlite3_bind_int64(s, 1, limit > 0 ? (sqlite3_int64)limit : -1);
    rc = q__rows(db, s, sizeof(struct q_park_brief), read_brief, q__brief_clean,
                 &v, n, "reading the park table");
    sqlite3_finalize(s);
    if (rc == 0)
        *out = v;
    return rc;
}

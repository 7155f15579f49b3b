/* stats.c: read-only summaries of the ledger and the park table. */
#include "queue/queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "queue/sqlite/internal.h"

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
prepare(q_db *db, const char *sql, sqlite3_stmt **out)
{
    if (sqlite3_prepare_v2(db->h, sql, -1, out, NULL) != SQLITE_OK) {
        *out = NULL;
        return q__db_err(db, "preparing a report");
    }
    return 0;
}

int
q_stats_attempts(q_db *db, struct q_attempt_group **out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    struct q_attempt_group *g = NULL;
    size_t len = 0, cap = 0;
    int rc, step;

    if ((rc = prepare(db, attempts_sql, &s)) != 0)
        return rc;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        g = q__grow(g, len, &cap, sizeof(*g));
        g[len].tier = q__col_text(s, 0);
        g[len].outcome = q__col_text(s, 1);
        g[len].reason = q__col_text(s, 2);
        g[len].decision = q__col_text(s, 3);
        g[len].count = sqlite3_column_int64(s, 4);
        len++;
    }
    if (step != SQLITE_DONE) {
        rc = q__db_err(db, "reading the attempts ledger");
        q_attempt_groups_free(g, len);
    } else {
        *out = g;
        *n = len;
    }
    sqlite3_finalize(s);
    return rc;
}

int
q_stats_park_open(q_db *db, size_t limit, struct q_park_brief **out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    struct q_park_brief *p = NULL;
    size_t len = 0, cap = 0;
    int rc, step;

    if ((rc = prepare(db, park_sql, &s)) != 0)
        return rc;
    sqlite3_bind_int64(s, 1, limit > 0 ? (sqlite3_int64)limit : -1);
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        p = q__grow(p, len, &cap, sizeof(*p));
        p[len].id = sqlite3_column_int64(s, 0);
        p[len].job_id = sqlite3_column_int64(s, 1);
        p[len].job_name = q__col_text(s, 2);
        p[len].step = q__col_text(s, 3);
        p[len].reason = q__col_text(s, 4);
        p[len].error = q__col_text(s, 5);
        p[len].tier = q__col_text(s, 6);
        p[len].attempts = sqlite3_column_int(s, 7);
        p[len].parked_at = sqlite3_column_int64(s, 8);
        len++;
    }
    if (step != SQLITE_DONE) {
        rc = q__db_err(db, "reading the park table");
        q_park_briefs_free(p, len);
    } else {
        *out = p;
        *n = len;
    }
    sqlite3_finalize(s);
    return rc;
}

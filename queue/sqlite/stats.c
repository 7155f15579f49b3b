/* stats.c: read-only summaries of the ledger and the park table (SQLite). */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "queue/report.h"

/* '' is NULL in the totals' keys: it sorts where NULL sorted (first), and
 * tier = '' puts http steps last. */
static const char attempts_sql[] =
    Q__TOTALS_GROUPS_SELECT " ORDER BY tier = '', tier, sum(attempts) DESC,"
                            " outcome, decision";

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

/* Runs a report's sql (no parameters) into a new array. */
static int
report(q_db *base, const char *sql, size_t elem, q__read_fn read,
       q__clean_fn clean, void **out, size_t *n, const char *what)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = NULL;
    void *v = NULL;
    int rc;

    if ((rc = prepare(db, sql, &s)) != 0)
        return rc;
    rc = q__rows(db, s, elem, read, clean, &v, n, what);
    sqlite3_finalize(s);
    if (rc == 0)
        *out = v;
    return rc;
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
    g->tokens = sqlite3_column_int64(s, 5);
    g->priced = sqlite3_column_int64(s, 6);
    g->cost_nusd = sqlite3_column_int64(s, 7);
}

int
q__sqlite_stats_attempts(q_db *db, struct q_attempt_group **out, size_t *n)
{
    return report(db, attempts_sql, sizeof(**out), read_group, q__group_clean,
                  (void **)out, n, "reading the ledger's totals");
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

static const char latency_sql[] = Q__TOTALS_LATENCY_SELECT " ORDER BY tier";
static const char workers_sql[] = Q__WORKERS_SELECT " ORDER BY lease_owner";
static const char oldest_sql[] = "SELECT coalesce(min(run_at), 0) FROM jobs "
                                 "WHERE state = 0 AND run_at <= ?1";

static void
read_latency(sqlite3_stmt *s, void *elem)
{
    struct q_latency_group *g = elem;

    g->tier = q__col_text(s, 0);
    g->count = sqlite3_column_int64(s, 1);
    g->sum_ms = sqlite3_column_int64(s, 2);
    for (int i = 0; i < Q_LATENCY_NBUCKETS; i++)
        g->le[i] = sqlite3_column_int64(s, 3 + i);
}

static void
read_worker(sqlite3_stmt *s, void *elem)
{
    struct q_worker_brief *w = elem;

    w->worker = q__col_text(s, 0);
    w->held = sqlite3_column_int64(s, 1);
    w->lease_until = sqlite3_column_int64(s, 2);
}

int
q__sqlite_stats_latency(q_db *db, struct q_latency_group **out, size_t *n)
{
    return report(db, latency_sql, sizeof(**out), read_latency,
                  q__latency_clean, (void **)out, n,
                  "reading the ledger's totals");
}

int
q__sqlite_stats_workers(q_db *db, struct q_worker_brief **out, size_t *n)
{
    return report(db, workers_sql, sizeof(**out), read_worker, q__worker_clean,
                  (void **)out, n, "reading the leases");
}

int
q__sqlite_stats_oldest_due(q_db *base, int64_t now, int64_t *run_at)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = NULL;
    int rc;

    if ((rc = prepare(db, oldest_sql, &s)) != 0)
        return rc;
    sqlite3_bind_int64(s, 1, now);
    if (sqlite3_step(s) == SQLITE_ROW)
        *run_at = sqlite3_column_int64(s, 0);
    else
        rc = q__db_err(db, "reading the queue");
    sqlite3_finalize(s);
    return rc;
}

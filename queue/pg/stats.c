/* stats.c: read-only summaries of the ledger and the park table
 * (PostgreSQL), ordered as the SQLite backend orders them: text compared
 * bytewise (COLLATE "C", SQLite's BINARY) and NULL before any text where
 * SQLite puts it there. */
#include "queue/pg/internal.h"

#include "queue/report.h"

static const struct q__pg_sql attempts_sql = {
    "q_stats_attempts",
    "SELECT tier, outcome, reason, decision, count(*) FROM attempts"
    " GROUP BY tier, outcome, reason, decision"
    " ORDER BY tier IS NULL, tier COLLATE \"C\", count(*) DESC,"
    " outcome COLLATE \"C\" NULLS FIRST, decision COLLATE \"C\" NULLS FIRST"};

static const struct q__pg_sql park_open_sql = {
    "q_stats_park_open",
    "SELECT p.id, p.job_id, j.name, p.step_name, p.reason, p.error, p.tier,"
    " p.attempts, p.parked_at FROM park p JOIN jobs j ON j.id = p.job_id"
    " WHERE p.state = 'open' ORDER BY p.id LIMIT $1::bigint"};

/* Runs a report's sql (no parameters) into a new array: *out is set only
 * when it succeeds. */
static int
report(q_db *db, const struct q__pg_sql *sql, size_t elem, q__pg_read_fn read,
       void **out, size_t *n, const char *what)
{
    void *v = NULL;
    int rc = q__pg_select(q__pg(db), sql, NULL, elem, read, &v, n, what);

    if (rc == 0)
        *out = v;
    return rc;
}

static void
read_group(const PGresult *res, int r, void *elem)
{
    struct q_attempt_group *g = elem;

    g->tier = q__pg_text(res, r, 0);
    g->outcome = q__pg_text(res, r, 1);
    g->reason = q__pg_text(res, r, 2);
    g->decision = q__pg_text(res, r, 3);
    g->count = q__pg_int(res, r, 4);
}

int
q__pg_stats_attempts(q_db *db, struct q_attempt_group **out, size_t *n)
{
    return report(db, &attempts_sql, sizeof(**out), read_group, (void **)out, n,
                  "reading the attempts ledger");
}

static void
read_brief(const PGresult *res, int r, void *elem)
{
    struct q_park_brief *p = elem;

    p->id = q__pg_int(res, r, 0);
    p->job_id = q__pg_int(res, r, 1);
    p->job_name = q__pg_text(res, r, 2);
    p->step = q__pg_text(res, r, 3);
    p->reason = q__pg_text(res, r, 4);
    p->error = q__pg_text(res, r, 5);
    p->tier = q__pg_text(res, r, 6);
    p->attempts = (int)q__pg_int(res, r, 7);
    p->parked_at = q__pg_int(res, r, 8);
}

int
q__pg_stats_park_open(q_db *db, size_t limit, struct q_park_brief **out,
                      size_t *n)
{
    struct q__pg_params p = {0};
    void *v = NULL;
    int rc;

    if (limit > 0)
        q__pg_p_int(&p, (int64_t)limit);
    else
        q__pg_p_text(&p, NULL); /* LIMIT NULL: all */
    rc =
        q__pg_select(q__pg(db), &park_open_sql, &p, sizeof(struct q_park_brief),
                     read_brief, &v, n, "reading the park table");
    if (rc == 0)
        *out = v;
    return rc;
}

static const struct q__pg_sql latency_sql = {
    "q_stats_latency", Q__LATENCY_SELECT " ORDER BY tier COLLATE \"C\""};
static const struct q__pg_sql workers_sql = {
    "q_stats_workers", Q__WORKERS_SELECT " ORDER BY lease_owner COLLATE \"C\""};
static const struct q__pg_sql oldest_sql = {
    "q_stats_oldest_due", "SELECT coalesce(min(run_at), 0) FROM jobs"
                          " WHERE state = 0 AND run_at <= $1::bigint"};

static void
read_latency(const PGresult *res, int r, void *elem)
{
    struct q_latency_group *g = elem;

    g->tier = q__pg_text(res, r, 0);
    g->count = q__pg_int(res, r, 1);
    g->sum_ms = q__pg_int(res, r, 2);
    for (int i = 0; i < Q_LATENCY_NBUCKETS; i++)
        g->le[i] = q__pg_int(res, r, 3 + i);
}

static void
read_worker(const PGresult *res, int r, void *elem)
{
    struct q_worker_brief *w = elem;

    w->worker = q__pg_text(res, r, 0);
    w->held = q__pg_int(res, r, 1);
    w->lease_until = q__pg_int(res, r, 2);
}

int
q__pg_stats_latency(q_db *db, struct q_latency_group **out, size_t *n)
{
    return report(db, &latency_sql, sizeof(**out), read_latency, (void **)out,
                  n, "reading the attempts ledger");
}

int
q__pg_stats_workers(q_db *db, struct q_worker_brief **out, size_t *n)
{
    return report(db, &workers_sql, sizeof(**out), read_worker, (void **)out, n,
                  "reading the leases");
}

int
q__pg_stats_oldest_due(q_db *db, int64_t now, int64_t *run_at)
{
    struct q__pg_params p = {0};
    int64_t v = 0;
    int rc;

    q__pg_p_int(&p, now);
    rc = q__pg_select_one(q__pg(db), &oldest_sql, &p, sizeof(v),
                          q__pg_read_ints, &v, "reading the queue");
    if (rc == 0)
        *run_at = v;
    return rc;
}

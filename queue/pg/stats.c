/* stats.c: read-only summaries of the ledger and the park table
 * (PostgreSQL), ordered as the SQLite backend orders them: text compared
 * bytewise (COLLATE "C", SQLite's BINARY) and NULL before any text where
 * SQLite puts it there. */
#include "queue/pg/internal.h"

#include "queue/report.h"

/* Runs a report's statement st (no parameters) into a new array: *out is
 * set only when it succeeds. */
static int
report(q_db *db, enum q__pg_stmt_id st, size_t elem, q__pg_read_fn read,
       void **out, size_t *n, const char *what)
{
    void *v = NULL;
    int rc = q__pg_select(q__pg(db), st, NULL, elem, read, &v, n, what);

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
    g->tokens = q__pg_int(res, r, 5);
    g->priced = q__pg_int(res, r, 6);
    g->cost_nusd = q__pg_int(res, r, 7);
}

int
q__pg_stats_attempts(q_db *db, struct q_attempt_group **out, size_t *n)
{
    return report(db, ST_STATS_ATTEMPTS, sizeof(**out), read_group,
                  (void **)out, n, "reading the ledger's totals");
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
    rc = q__pg_select(q__pg(db), ST_STATS_PARK_OPEN, &p,
                      sizeof(struct q_park_brief), read_brief, &v, n,
                      "reading the park table");
    if (rc == 0)
        *out = v;
    return rc;
}

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
    return report(db, ST_STATS_LATENCY, sizeof(**out), read_latency,
                  (void **)out, n, "reading the ledger's totals");
}

int
q__pg_stats_workers(q_db *db, struct q_worker_brief **out, size_t *n)
{
    return report(db, ST_STATS_WORKERS, sizeof(**out), read_worker,
                  (void **)out, n, "reading the leases");
}

int
q__pg_stats_oldest_due(q_db *db, int64_t now, int64_t *run_at)
{
    struct q__pg_params p = {0};
    int64_t v = 0;
    int rc;

    q__pg_p_int(&p, now);
    rc = q__pg_select_one(q__pg(db), ST_STATS_OLDEST_DUE, &p, sizeof(v),
                          q__pg_read_ints, &v, "reading the queue");
    if (rc == 0)
        *run_at = v;
    return rc;
}

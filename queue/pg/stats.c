/* stats.c: read-only summaries of the ledger and the park table
 * (PostgreSQL), ordered as the SQLite backend orders them: text compared
 * bytewise (COLLATE "C", SQLite's BINARY) and NULL before any text where
 * SQLite puts it there. */
#include "queue/pg/internal.h"

#include <errno.h>
#include <stdlib.h>

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
    PGresult *res = NULL;
    void *v = NULL;
    int rc = q__pg_run(q__pg(db), &attempts_sql, NULL, &res,
                       "reading the attempts ledger");

    if (rc != 0)
        return rc;
    q__pg_rows(res, sizeof(struct q_attempt_group), read_group, &v, n);
    PQclear(res);
    *out = v;
    return 0;
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
    PGresult *res = NULL;
    void *v = NULL;
    int rc;

    if (limit > 0)
        q__pg_p_int(&p, (int64_t)limit);
    else
        q__pg_p_text(&p, NULL); /* LIMIT NULL: all */
    rc = q__pg_run(q__pg(db), &park_open_sql, &p, &res,
                   "reading the park table");
    if (rc != 0)
        return rc;
    q__pg_rows(res, sizeof(struct q_park_brief), read_brief, &v, n);
    PQclear(res);
    *out = v;
    return 0;
}

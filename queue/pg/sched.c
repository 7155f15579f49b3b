/* sched.c: PostgreSQL storage of the state every worker shares of each
 * schedule (table schedules). Each call is one statement, run at once,
 * in a transaction or not: its failure is the caller's to see, and a
 * worker notes a schedule once per slot, not once per step, so the round
 * trip a deferred write would save is rare. The meaning is the SQLite
 * backend's (queue/sqlite/sched.c). */
#include "queue/pg/internal.h"

#include <errno.h>

#include "queue/sched.h"

#define SCHED_COLS                                                             \
    "name, paused, since, done_until, last_slot, last_job_id, updated_at"

static const struct q__pg_sql sched_get_sql = {
    "q_sched_get",
    "SELECT " SCHED_COLS " FROM schedules WHERE name = $1::text"};

/* Bytewise, as SQLite's BINARY orders them. */
static const struct q__pg_sql sched_list_sql = {
    "q_sched_list",
    "SELECT " SCHED_COLS " FROM schedules ORDER BY name COLLATE \"C\""};

/* $1 name, $2 done, $3 slot, $4 job id, $5 now. ON CONFLICT DO UPDATE
 * locks the row and computes the new values from its latest committed
 * version, so workers noting the same schedule at once each move it
 * forward from what the other left (greatest, CASE on the stored row). */
static const struct q__pg_sql sched_note_sql = {
    "q_sched_note",
    "INSERT INTO schedules AS s (name, since, done_until, last_slot,"
    " last_job_id, updated_at) VALUES ($1::text, $5::bigint,"
    " greatest($5::bigint, $2::bigint),"
    " CASE WHEN $4::bigint > 0 AND $3::bigint > 0 THEN $3::bigint ELSE 0 END,"
    " CASE WHEN $4::bigint > 0 AND $3::bigint > 0 THEN $4::bigint ELSE 0 END,"
    " $5::bigint) ON CONFLICT (name) DO UPDATE SET"
    " done_until = greatest(s.done_until, $2::bigint),"
    " last_job_id = CASE WHEN $4::bigint > 0 AND $3::bigint > s.last_slot"
    " THEN $4::bigint ELSE s.last_job_id END,"
    " last_slot = CASE WHEN $4::bigint > 0 AND $3::bigint > s.last_slot"
    " THEN $3::bigint ELSE s.last_slot END,"
    " updated_at = greatest(s.updated_at, $5::bigint)"};

/* $1 name, $2 slot, $3 now. The conflicting row is locked and its
 * latest committed done_until read by the WHERE, so of workers claiming
 * one slot at once exactly one gets its row back; a row that was not
 * written returns none. */
static const struct q__pg_sql sched_claim_sql = {
    "q_sched_claim",
    "INSERT INTO schedules AS s (name, since, done_until, updated_at)"
    " VALUES ($1::text, $3::bigint, $2::bigint, $3::bigint)"
    " ON CONFLICT (name) DO UPDATE SET done_until = EXCLUDED.done_until,"
    " updated_at = greatest(s.updated_at, EXCLUDED.updated_at)"
    " WHERE s.done_until < EXCLUDED.done_until RETURNING 1"};

/* $1 name, $2 paused (0 or 1), $3 now. A resume moves done_until only
 * when the row was paused. */
static const struct q__pg_sql sched_pause_sql = {
    "q_sched_pause",
    "INSERT INTO schedules AS s (name, paused, since, done_until,"
    " updated_at) VALUES ($1::text, $2::bigint, $3::bigint, $3::bigint,"
    " $3::bigint) ON CONFLICT (name) DO UPDATE SET"
    " done_until = CASE WHEN s.paused <> 0 AND $2::bigint = 0"
    " THEN greatest(s.done_until, $3::bigint) ELSE s.done_until END,"
    " paused = $2::bigint, updated_at = greatest(s.updated_at, $3::bigint)"};

static void
read_sched(const PGresult *res, int r, void *elem)
{
    struct q_sched *sc = elem;

    sc->name = q__pg_text(res, r, 0);
    sc->paused = q__pg_int(res, r, 1) != 0;
    sc->since = q__pg_int(res, r, 2);
    sc->done_until = q__pg_int(res, r, 3);
    sc->last_slot = q__pg_int(res, r, 4);
    sc->last_job_id = q__pg_int(res, r, 5);
    sc->updated_at = q__pg_int(res, r, 6);
}

/* A schedule's name is its key: NULL or "" names none. */
static bool
bad_name(const char *name)
{
    return name == NULL || name[0] == '\0';
}

int
q__pg_sched_get(q_db *db, const char *name, struct q_sched *out)
{
    struct q__pg_params p = {0};

    if (bad_name(name) || out == NULL)
        return -EINVAL;
    q__pg_p_text(&p, name);
    return q__pg_select_one(q__pg(db), &sched_get_sql, &p, sizeof(*out),
                            read_sched, out, "reading a schedule");
}

int
q__pg_sched_list(q_db *db, struct q_sched **out, size_t *n)
{
    void *v = NULL;
    int rc;

    rc = q__pg_select(q__pg(db), &sched_list_sql, NULL, sizeof(struct q_sched),
                      read_sched, &v, n, "listing schedules");
    if (rc == 0)
        *out = v;
    return rc;
}

int
q__pg_sched_note(q_db *db, const char *name, int64_t done, int64_t slot,
                 int64_t job_id, int64_t now)
{
    struct q__pg_params p = {0};

    if (bad_name(name))
        return -EINVAL;
    q__pg_p_text(&p, name);
    q__pg_p_int(&p, done);
    q__pg_p_int(&p, slot);
    q__pg_p_int(&p, job_id);
    q__pg_p_int(&p, now);
    return q__pg_run(q__pg(db), &sched_note_sql, &p, NULL,
                     "noting a schedule's progress");
}

int
q__pg_sched_claim(q_db *db, const char *name, int64_t slot, int64_t now)
{
    struct q__pg_params p = {0};
    PGresult *r = NULL;
    int rc;

    if (bad_name(name))
        return -EINVAL;
    q__pg_p_text(&p, name);
    q__pg_p_int(&p, slot);
    q__pg_p_int(&p, now);
    rc = q__pg_run(q__pg(db), &sched_claim_sql, &p, &r,
                   "claiming a schedule's slot");
    if (rc == 0 && PQntuples(r) == 0)
        rc = -EALREADY;
    PQclear(r);
    return rc;
}

int
q__pg_sched_pause(q_db *db, const char *name, bool paused, int64_t now)
{
    struct q__pg_params p = {0};

    if (bad_name(name))
        return -EINVAL;
    q__pg_p_text(&p, name);
    q__pg_p_int(&p, paused ? 1 : 0);
    q__pg_p_int(&p, now);
    return q__pg_run(q__pg(db), &sched_pause_sql, &p, NULL,
                     paused ? "pausing a schedule" : "resuming a schedule");
}

/* sched.c: PostgreSQL storage of the state every worker shares of each
 * schedule (table schedules). Each call is one statement, run at once,
 * in a transaction or not: its failure is the caller's to see, and a
 * worker notes a schedule once per slot, not once per step, so the round
 * trip a deferred write would save is rare. The meaning is the SQLite
 * backend's (queue/sqlite/sched.c). */
#include "queue/pg/internal.h"

#include <errno.h>

#include "queue/sched.h"

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
    return q__pg_select_one(q__pg(db), ST_SCHED_GET, &p, sizeof(*out),
                            read_sched, out, "reading a schedule");
}

int
q__pg_sched_list(q_db *db, struct q_sched **out, size_t *n)
{
    void *v = NULL;
    int rc;

    rc = q__pg_select(q__pg(db), ST_SCHED_LIST, NULL, sizeof(struct q_sched),
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
    return q__pg_run(q__pg(db), ST_SCHED_NOTE, &p, NULL,
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
    rc = q__pg_run(q__pg(db), ST_SCHED_CLAIM, &p, &r,
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
    return q__pg_run(q__pg(db), ST_SCHED_PAUSE, &p, NULL,
                     paused ? "pausing a schedule" : "resuming a schedule");
}

/* sched.c: SQLite storage of the state every worker shares of each
 * schedule (table schedules): read one, list them, note progress, claim
 * a slot, pause and resume. Each write is one UPSERT that moves the row
 * only forward
 * (store.c has the SQL), so it needs no transaction of its own: outside
 * one it commits by itself, inside one it joins it. */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <stddef.h>

#include "queue/sched.h"

/* Reads the current row of ST_SCHED_GET or ST_SCHED_LIST into the
 * q_sched at elem. */
static void
read_sched(sqlite3_stmt *s, void *elem)
{
    struct q_sched *sc = elem;

    sc->name = q__col_text(s, 0);
    sc->paused = sqlite3_column_int64(s, 1) != 0;
    sc->since = sqlite3_column_int64(s, 2);
    sc->done_until = sqlite3_column_int64(s, 3);
    sc->last_slot = sqlite3_column_int64(s, 4);
    sc->last_job_id = sqlite3_column_int64(s, 5);
    sc->updated_at = sqlite3_column_int64(s, 6);
}

/* A schedule's name is its key: NULL or "" names none. */
static bool
bad_name(const char *name)
{
    return name == NULL || name[0] == '\0';
}

int
q__sqlite_sched_get(q_db *base, const char *name, struct q_sched *out)
{
    struct q__sqlite *db = q__sqlite(base);
    struct q_sched got = {0};
    sqlite3_stmt *s;
    int rc;

    if (bad_name(name) || out == NULL)
        return -EINVAL;
    if ((s = q__stmt(db, ST_SCHED_GET)) == NULL)
        return -EIO;
    q__bind_text(s, 1, name);
    if ((rc = q__step_row(db, s, "reading a schedule")) != 0)
        return rc;
    read_sched(s, &got);
    sqlite3_reset(s);
    *out = got;
    return 0;
}

int
q__sqlite_sched_list(q_db *base, struct q_sched **out, size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_SCHED_LIST);
    void *v = NULL;
    int rc;

    if (s == NULL)
        return -EIO;
    rc = q__rows(db, s, sizeof(struct q_sched), read_sched, q__sched_clean, &v,
                 n, "listing schedules");
    sqlite3_reset(s);
    if (rc == 0)
        *out = v;
    return rc;
}

int
q__sqlite_sched_note(q_db *base, const char *name, int64_t done, int64_t slot,
                     int64_t job_id, int64_t now)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s;

    if (bad_name(name))
        return -EINVAL;
    if ((s = q__stmt(db, ST_SCHED_NOTE)) == NULL)
        return -EIO;
    q__bind_text(s, 1, name);
    sqlite3_bind_int64(s, 2, done);
    sqlite3_bind_int64(s, 3, slot);
    sqlite3_bind_int64(s, 4, job_id);
    sqlite3_bind_int64(s, 5, now);
    return q__run_done(db, s, "noting a schedule's progress");
}

int
q__sqlite_sched_claim(q_db *base, const char *name, int64_t slot, int64_t now)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s;
    int rc;

    if (bad_name(name))
        return -EINVAL;
    if ((s = q__stmt(db, ST_SCHED_CLAIM)) == NULL)
        return -EIO;
    q__bind_text(s, 1, name);
    sqlite3_bind_int64(s, 2, slot);
    sqlite3_bind_int64(s, 3, now);
    if ((rc = q__run_done(db, s, "claiming a schedule's slot")) != 0)
        return rc;
    return sqlite3_changes(db->h) > 0 ? 0 : -EALREADY;
}

int
q__sqlite_sched_pause(q_db *base, const char *name, bool paused, int64_t now)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s;

    if (bad_name(name))
        return -EINVAL;
    if ((s = q__stmt(db, ST_SCHED_PAUSE)) == NULL)
        return -EIO;
    q__bind_text(s, 1, name);
    sqlite3_bind_int(s, 2, paused ? 1 : 0);
    sqlite3_bind_int64(s, 3, now);
    return q__run_done(db, s,
                       paused ? "pausing a schedule" : "resuming a schedule");
}

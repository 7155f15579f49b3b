/* park.c: SQLite storage of park items and the primitives a resolution
 * is made of (park/ composes them): close an item, re-queue or fail a
 * parked job, reset a parked step. */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "queue/park.h"

/* ---- park items ------------------------------------------------------ */

static int
park_add_locked(struct q__sqlite *db, const struct q_park_new *p, int64_t *id)
{
    sqlite3_stmt *s = q__stmt(db, ST_PARK_ADD);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, p->job_id);
    sqlite3_bind_int(s, 2, p->step);
    q__bind_text(s, 3, p->step_name);
    q__bind_text(s, 4, p->reason);
    sqlite3_bind_int(s, 5, p->attempts);
    q__bind_text(s, 6, p->request_sha256);
    q__bind_text(s, 7, p->request);
    q__bind_text(s, 8, p->error);
    q__bind_text(s, 9, p->tier);
    sqlite3_bind_int64(s, 10, p->parked_at);
    if ((rc = q__run_done(db, s, "parking a step")) != 0)
        return rc;
    *id = sqlite3_last_insert_rowid(db->h);
    return q__sqlite_step_set(&db->base, p->job_id, NULL, p->step,
                              Q_STEP_PARKED, p->tier, NULL, 0);
}

int
q__sqlite_park_add(q_db *base, const struct q_park_new *p, int64_t *id)
{
    struct q__sqlite *db = q__sqlite(base);
    int64_t got = 0;
    int rc = q__tx_enter(db);

    if (rc != 0)
        return rc;
    rc = q__tx_leave(db, park_add_locked(db, p, &got));
    if (rc == 0)
        *id = got;
    return rc;
}

static void
read_park(sqlite3_stmt *s, void *elem)
{
    struct q_park_item *p = elem;
    const unsigned char *state;

    p->id = sqlite3_column_int64(s, 0);
    p->job_id = sqlite3_column_int64(s, 1);
    p->step = sqlite3_column_int(s, 2);
    p->step_name = q__col_text(s, 3);
    p->reason = q__col_text(s, 4);
    p->attempts = sqlite3_column_int(s, 5);
    p->request_sha256 = q__col_text(s, 6);
    p->request = q__col_text(s, 7);
    p->error = q__col_text(s, 8);
    p->tier = q__col_text(s, 9);
    p->parked_at = sqlite3_column_int64(s, 10);
    state = sqlite3_column_text(s, 11);
    p->open = state != NULL && strcmp((const char *)state, "open") == 0;
    p->resolution = q__col_text(s, 12);
    p->resolved_by = q__col_text(s, 13);
    p->resolved_at = sqlite3_column_int64(s, 14);
    p->note = q__col_text(s, 15);
    p->answer = q__col_text(s, 16);
}

int
q__sqlite_park_get(q_db *base, int64_t id, struct q_park_item *out)
{
    struct q__sqlite *db = q__sqlite(base);

    return q__row_by_id(db, ST_PARK_GET, id, read_park, out, sizeof(*out),
                        "reading a park item");
}

int
q__sqlite_park_list(q_db *base, const struct q_park_filter *f,
                    struct q_park_item **out, size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_PARK_LIST);
    void *v = NULL;
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int(s, 1, f->all);
    q__bind_text(s, 2, f->reason);
    q__bind_text(s, 3, f->tier);
    sqlite3_bind_int64(s, 4, f->job_id);
    sqlite3_bind_int64(s, 5, f->resolved_since > 0 ? f->resolved_since : 0);
    rc = q__rows(db, s, sizeof(struct q_park_item), read_park, q__park_clean,
                 &v, n, "listing park items");
    if (rc == 0)
        *out = v;
    return rc;
}

/* Runs one update of a parked job or item inside its own level; -EALREADY
 * when no row was in the state the update needs. */
static int
update_one(struct q__sqlite *db, sqlite3_stmt *s, const char *what)
{
    int rc;

    if ((rc = q__run_done(db, s, what)) != 0)
        return rc;
    return sqlite3_changes(db->h) > 0 ? 0 : -EALREADY;
}

int
q__sqlite_park_close(q_db *base, int64_t id, const struct q_park_close *c)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_PARK_CLOSE);
    struct q_park_item it;
    int rc;

    if (c == NULL || c->resolution == NULL)
        return -EINVAL;
    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    q__bind_text(s, 2, c->resolution);
    q__bind_text(s, 3, c->by);
    sqlite3_bind_int64(s, 4, c->now);
    q__bind_text(s, 5, c->note);
    q__bind_text(s, 6, c->answer);
    rc = update_one(db, s, "resolving a park item");
    if (rc != -EALREADY)
        return rc;
    /* Nothing closed: an unknown item, or one already resolved. */
    if ((rc = q__sqlite_park_get(&db->base, id, &it)) != 0)
        return rc;
    q_park_item_cleanup(&it);
    return -EALREADY;
}

int
q__sqlite_job_requeue_parked(q_db *base, int64_t job_id, int64_t now,
                             int64_t run_at, int64_t deadline_at)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_JOB_REQUEUE);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, job_id);
    sqlite3_bind_int64(s, 2, now);
    sqlite3_bind_int64(s, 3, deadline_at);
    sqlite3_bind_int64(s, 4, run_at);
    return update_one(db, s, "re-queueing a parked job");
}

int
q__sqlite_job_wake(q_db *base, int64_t job_id, int64_t now)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_JOB_WAKE);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, job_id);
    sqlite3_bind_int64(s, 2, now);
    return update_one(db, s, "waking a queued job");
}

int
q__sqlite_job_end_parked(q_db *base, int64_t job_id, enum q_job_state state,
                         const char *error, int64_t now)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_JOB_END_PARKED);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, job_id);
    q__bind_text(s, 2, error);
    sqlite3_bind_int64(s, 3, now);
    sqlite3_bind_int(s, 4, (int)state);
    return update_one(db, s, "ending a parked job");
}

int
q__sqlite_step_reset(q_db *base, int64_t job_id, int index,
                     const struct q_step_reset *r)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_STEP_RESET);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, job_id);
    sqlite3_bind_int(s, 2, index);
    sqlite3_bind_int(s, 3, r->state);
    q__bind_text(s, 4, r->output);
    sqlite3_bind_int(s, 5, r->reset_after);
    q__bind_text(s, 6, r->pin_tier);
    return q__run_done(db, s, "resetting a parked step");
}

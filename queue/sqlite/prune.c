/* prune.c: the SQLite side of q_backup and q_prune (queue/prune.c).
 *
 * A backup is VACUUM INTO: one statement that reads the whole database
 * in one read transaction and writes it, compacted, into a new file. In
 * WAL mode a reader holds up no writer, so workers go on committing
 * while it runs; the copy is the database as of the read's start. The
 * online backup API (sqlite3_backup_step) was measured against it
 * (docs/benchmarks.md, "Backup"): stepped in pages with sleeps between
 * the steps, it starts over whenever another connection writes between
 * two steps, so under workers that commit every few milliseconds it
 * never ends; in one step it is the same single read as VACUUM INTO,
 * without the compaction.
 *
 * Pruning runs the statements of Q__PRUNE_* (the same text as
 * PostgreSQL's), prepared for the call and finalized before it returns:
 * it runs once an hour, not once a turn. */
#include "queue/sqlite/internal.h"

#include <errno.h>

#include "queue/admin.h"

#define P1 "?1"
#define P2 "?2"
#define P3 "?3"
#define P4 "?4"
#define P5 "?5"

static const char *const prune_writes[] = {
    Q__PRUNE_DELETE_JOBS(P1, P4),
    Q__PRUNE_DROP_BODIES(P1, P2, P4, P5),
    Q__PRUNE_DELETE_EVENTS(P1),
    Q__PRUNE_DELETE_BUDGETS(P3),
};

int
q__sqlite_backup(q_db *base, const char *path)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = NULL;
    int rc;

    if (db->tx_depth > 0)
        return -EINVAL; /* VACUUM cannot run inside a transaction */
    if (sqlite3_prepare_v2(db->h, "VACUUM INTO ?1", -1, &s, NULL) != SQLITE_OK)
        return q__db_err(db, "preparing the backup");
    q__bind_text(s, 1, path);
    rc = q__run_done(db, s, "writing the backup");
    sqlite3_finalize(s);
    return rc;
}

/* Prepares sql with p's values bound to ?1..?4 (unused ones ignored). */
static sqlite3_stmt *
prepare(struct q__sqlite *db, const char *sql, const struct q_prune *p,
        int64_t limit)
{
    sqlite3_stmt *s = NULL;

    if (q__tx_sync(db) != 0)
        return NULL;
    if (sqlite3_prepare_v2(db->h, sql, -1, &s, NULL) != SQLITE_OK) {
        q__db_err(db, "preparing a prune statement");
        return NULL;
    }
    /* ?N is parameter N; one a statement does not use is out of range
     * (a harmless SQLITE_RANGE) or unused. */
    sqlite3_bind_int64(s, 1, p->jobs_before);
    sqlite3_bind_int64(s, 2, p->bodies_before);
    sqlite3_bind_int64(s, 3, p->budgets_before);
    sqlite3_bind_int64(s, 4, limit);
    sqlite3_bind_int64(s, 5, p->bodies_from_job);
    return s;
}

int
q__sqlite_prune(q_db *base, const struct q_prune *p, int64_t limit, bool run,
                struct q_prune_counts *c)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = prepare(db, Q__PRUNE_COUNT(P1, P2, P3, P4, P5), p, limit);
    int64_t *v[] = {&c->jobs,   &c->steps,      &c->attempts,    &c->park,
                    &c->bodies, &c->bodies_job, &c->tier_events, &c->budgets};
    int rc;

    if (s == NULL)
        return -EIO;
    if ((rc = q__step_row(db, s, "counting what to prune")) == 0)
        for (size_t i = 0; i < STEPQ_ARRAY_LEN(v); i++)
            *v[i] = sqlite3_column_int64(s, (int)i);
    sqlite3_finalize(s);
    for (size_t i = 0; rc == 0 && run && i < STEPQ_ARRAY_LEN(prune_writes);
         i++) {
        if ((s = prepare(db, prune_writes[i], p, limit)) == NULL)
            return -EIO;
        rc = q__run_done(db, s, "pruning");
        sqlite3_finalize(s);
    }
    return rc;
}

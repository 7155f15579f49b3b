/* store.c: the SQLite connection: open and pragmas, the statement cache,
 * and transactions (group commit). The SQL of every statement is in
 * sql.c. */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/defs.h"
#include "common/log.h"
#include "common/xalloc.h"

int
q__db_err(struct q__sqlite *db, const char *what)
{
    int code = sqlite3_errcode(db->h), sys = sqlite3_system_errno(db->h);

    /* SQLite says "disk I/O error" for a disk that is full when a file
     * cannot grow (the -shm or -wal at open): the system's reason says
     * which. */
    if ((code == SQLITE_IOERR || code == SQLITE_FULL ||
         code == SQLITE_CANTOPEN) &&
        sys != 0)
        log_error("%s: %s: %s (%s)", db->path, what, sqlite3_errmsg(db->h),
                  strerror(sys));
    else
        log_error("%s: %s: %s", db->path, what, sqlite3_errmsg(db->h));
    if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
        return -EAGAIN; /* the busy timeout ran out: worth a retry */
    return -EIO;
}

int
q__exec_simple(struct q__sqlite *db, const char *sql)
{
    char *msg = NULL;
    int rc;

    if ((rc = q__tx_sync(db)) != 0)
        return rc;
    if (sqlite3_exec(db->h, sql, NULL, NULL, &msg) != SQLITE_OK) {
        log_error("%s: %s", db->path, msg ? msg : sqlite3_errmsg(db->h));
        sqlite3_free(msg);
        return sqlite3_errcode(db->h) == SQLITE_BUSY ? -EAGAIN : -EIO;
    }
    return 0;
}

/* The cached statement id, reset, with no level opened first: for the
 * statements that open and close levels themselves. */
static sqlite3_stmt *
cached(struct q__sqlite *db, enum q__stmt_id id)
{
    sqlite3_stmt *s = db->stmts[id];

    if (s == NULL) {
        if (sqlite3_prepare_v3(db->h, q__store_sql(id), -1,
                               SQLITE_PREPARE_PERSISTENT, &s,
                               NULL) != SQLITE_OK) {
            q__db_err(db, "preparing a statement");
            return NULL;
        }
        db->stmts[id] = s;
        return s;
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

/* Runs a level statement (BEGIN, SAVEPOINT, ...); -EIO/-EAGAIN on error. */
static int
step_done(struct q__sqlite *db, enum q__stmt_id id, const char *what)
{
    return q__run_done(db, cached(db, id), what);
}

int
q__tx_sync(struct q__sqlite *db)
{
    int rc;

    while (db->tx_sent < db->tx_depth) {
        if ((rc = step_done(db, ST_SAVEPOINT, "opening a savepoint")) != 0)
            return rc;
        db->tx_sent++;
    }
    return 0;
}

sqlite3_stmt *
q__stmt(struct q__sqlite *db, enum q__stmt_id id)
{
    return q__tx_sync(db) == 0 ? cached(db, id) : NULL;
}

/* Resets every cached statement still in the middle of its rows (a read
 * that took the one row it wanted). Such a statement keeps its read
 * transaction open past the COMMIT: the next BEGIN IMMEDIATE then fails at
 * once with a stale snapshot (SQLITE_BUSY_SNAPSHOT) once another
 * connection has written, and no checkpoint can pass it. A long-lived
 * handle (libstepq, serve, a worker) would stay stuck on it; statements
 * are otherwise reset only at their next use. */
static void
reset_busy(struct q__sqlite *db)
{
    for (int i = 0; i < ST_COUNT; i++) {
        if (db->stmts[i] != NULL && sqlite3_stmt_busy(db->stmts[i]))
            sqlite3_reset(db->stmts[i]);
    }
}

/* Counts the wait under way up to now into the handle's figures
 * (q_lock_waits). It is counted as it goes, at each try: the try after
 * the last sleep is the one that takes the lock, a few microseconds
 * later, so no end of the wait has to be caught in every caller. */
static void
wait_count(struct q__sqlite *db, int64_t now)
{
    struct q_lock_waits *w = &db->base.lock_waits;

    w->total_us += now - db->busy_counted;
    db->busy_counted = now;
    if (now - db->busy_since > w->longest_us)
        w->longest_us = now - db->busy_since;
}

/* SQLite's own busy handler sleeps longer and longer (up to 100 ms a
 * try) while it waits: under many processes, one that has waited a while
 * keeps missing the moments the lock is free to those that just began,
 * and can wait out its whole bound (`bench_queue` printed `database is
 * locked` with four processes claiming). This one sleeps 0.5 to 2.5 ms
 * at random on every try, so every waiter has the same chance at each
 * release, until lock_wait_ms has passed since the wait began. Measured
 * (docs/benchmarks.md): a waiter beside three processes taking the lock
 * in turns got it 1,460 times in 12 s, against 51 to 68 with SQLite's
 * wait; a wait growing to 8 ms got it 358 times. */
static int
on_busy(void *arg, int count)
{
    struct q__sqlite *db = arg;
    int64_t now = clock_mono_us();
    long us;

    if (count == 0 || db->busy_since == 0) {
        db->busy_since = db->busy_counted = now;
        db->base.lock_waits.count++;
    }
    wait_count(db, now);
    if (now - db->busy_since >= db->lock_wait_ms * 1000) {
        db->base.lock_waits.ran_out++;
        return 0; /* the caller gets SQLITE_BUSY: -EAGAIN */
    }
    db->busy_rng ^= db->busy_rng << 13;
    db->busy_rng ^= db->busy_rng >> 7;
    db->busy_rng ^= db->busy_rng << 17;
    us = 500 + (long)(db->busy_rng % 2000);
    nanosleep(&(struct timespec){0, us * 1000}, NULL);
    wait_count(db, clock_mono_us());
    return 1;
}

/* Ends a wait for the lock that succeeded: one longer than a second is
 * said, so an operator sees the file is contended before a call times
 * out. */
static void
busy_ended(struct q__sqlite *db)
{
    int64_t waited = (clock_mono_us() - db->busy_since) / 1000;

    if (db->busy_since == 0)
        return;
    db->busy_since = 0;
    if (waited >= 1000)
        log_warn("%s: waited %lld ms for the write lock (other processes "
                 "held it)",
                 db->path, (long long)waited);
}

/* Levels: the outermost is a BEGIN IMMEDIATE transaction, every inner one
 * a SAVEPOINT, so an inner level that fails undoes only its own work and
 * the caller's group commit goes on. The BEGIN runs at once (it takes the
 * write lock up front); a SAVEPOINT waits for a statement (q__tx_sync). */
int
q__tx_enter(struct q__sqlite *db)
{
    int rc;

    if (db->tx_depth > 0) {
        db->tx_depth++;
        return 0;
    }
    if (db->read_open) {
        log_error("%s: a write transaction inside a read snapshot", db->path);
        return -EINVAL;
    }
    reset_busy(db); /* a read outside a transaction may have been left */
    /* A path lookup costs a worker about 5% of a step one at a time
     * (measured): the file is checked before every 64th transaction, and
     * in every count (q__sqlite_counts), and once found moved, always. */
    if ((db->moved || (++db->tx_count & 63) == 1) && q__file_moved(db))
        return -EIO;
    if (db->wal_full)
        q__wal_fold(db);
    db->busy_since = 0;
    rc = step_done(db, ST_BEGIN, "starting a transaction");
    if (rc != 0) {
        db->busy_since = 0;
        return rc;
    }
    busy_ended(db);
    db->tx_depth = db->tx_sent = 1;
    return 0;
}

int
q__tx_leave(struct q__sqlite *db, int rc)
{
    int err;

    if (db->tx_depth <= 0)
        return rc ? rc : -EINVAL;
    if (--db->tx_depth > 0) {
        q__tier_rows_level_end(db, db->tx_depth + 1, rc != 0);
        if (db->tx_sent <= db->tx_depth)
            return rc; /* no statement ran in it: nothing to undo or keep */
        db->tx_sent = db->tx_depth;
        if (rc != 0)
            step_done(db, ST_ROLLBACK_TO, "rolling back a savepoint");
        err = step_done(db, ST_RELEASE, "releasing a savepoint");
        return rc ? rc : err;
    }
    db->tx_sent = 0;
    if (rc == 0)
        rc = q__tier_rows_flush(db); /* an error was logged */
    q__tier_rows_forget(db);
    if (rc != 0) {
        db->tx_durable = false;
        step_done(db, ST_ROLLBACK, "rolling back");
        reset_busy(db);
        return rc;
    }
    if ((err = step_done(db, ST_COMMIT, "committing")) != 0) {
        db->wal_full = db->wal_full || q__disk_full(db);
        if (!sqlite3_get_autocommit(db->h))
            step_done(db, ST_ROLLBACK, "rolling back");
    }
    reset_busy(db);
    if (err == 0 && db->tx_durable)
        err = q__wal_sync(db);
    db->tx_durable = false;
    return err;
}

int
q__sqlite_tx_begin(q_db *base)
{
    struct q__sqlite *db = q__sqlite(base);

    return q__tx_enter(db);
}

int
q__sqlite_tx_commit(q_db *base)
{
    struct q__sqlite *db = q__sqlite(base);

    if (db->tx_depth <= 0)
        return -EINVAL;
    return q__tx_leave(db, 0);
}

void
q__sqlite_tx_rollback(q_db *base)
{
    struct q__sqlite *db = q__sqlite(base);

    if (db->tx_depth > 0)
        q__tx_leave(db, -ECANCELED);
}

/* A read snapshot is a deferred transaction: SQLite takes its snapshot at
 * its first read and keeps it to the COMMIT, and in WAL mode writers go on
 * meanwhile. Inside a write transaction, which holds the lock, there is
 * nothing to add. */
int
q__sqlite_read_begin(q_db *base)
{
    struct q__sqlite *db = q__sqlite(base);
    int rc;

    if (db->read_depth > 0 || db->tx_depth > 0) {
        db->read_depth++;
        return 0;
    }
    reset_busy(db);
    if ((rc = step_done(db, ST_BEGIN_READ, "starting a read snapshot")) != 0)
        return rc;
    db->read_depth = 1;
    db->read_open = true;
    return 0;
}

void
q__sqlite_read_end(q_db *base)
{
    struct q__sqlite *db = q__sqlite(base);

    if (db->read_depth == 0 || --db->read_depth > 0 || !db->read_open)
        return;
    db->read_open = false;
    reset_busy(db); /* a read left in its rows would hold the snapshot */
    if (step_done(db, ST_COMMIT, "ending a read snapshot") != 0 &&
        !sqlite3_get_autocommit(db->h))
        step_done(db, ST_ROLLBACK, "ending a read snapshot");
}

/* check_existing is the open path of every command but `stepq init`: the
 * file must already hold a stepq database at this build's version. It
 * runs before any pragma because "PRAGMA journal_mode = WAL" writes to an
 * empty file and creates -wal and -shm next to it. */
static int
check_existing(struct q__sqlite *db)
{
    int have = 0, rc;

    if ((rc = q__sqlite_db_version(&db->base, &have)) != 0)
        return rc;
    return q__version_check(db->path, have);
}

/* What every connection sets, besides synchronous (the open's options).
 * temp_store = MEMORY also keeps the statement journals of the savepoints
 * every storage call opens inside a turn in memory. On disk, each turn made
 * a temporary file and wrote about 19 pages to it per step (measured with
 * strace on bench/worker.py): a tenth of the worker's time. A turn's
 * journal holds only the pages the turn changed, so it stays small.
 * journal_size_limit cuts the -wal back to the size it is folded at
 * (wal_autocheckpoint's 8,192 pages of 4 KiB, 32 MiB) when a writer starts
 * it over: a checkpoint cannot finish while readers hold snapshots of the
 * log, which then grows past that mark, and SQLite would otherwise keep
 * the file at the largest size it ever had. */
static const char *const pragmas[] = {
    "PRAGMA journal_mode = WAL",
    "PRAGMA foreign_keys = ON",
    "PRAGMA cache_size = -16384",
    "PRAGMA wal_autocheckpoint = 8192",
    "PRAGMA journal_size_limit = 33554432",
    "PRAGMA temp_store = MEMORY",
};

int
q__sqlite_open(const char *path, const struct q_open_opts *opts, bool create,
               int target, q_db **out)
{
    static const struct q_open_opts defaults = {
        .durable = false, .lock_wait_ms = 5000, .keep_body_bytes = 65536};
    bool memory = strcmp(path, ":memory:") == 0;
    struct q__sqlite *db = NULL;
    int rc, flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;

    if (opts == NULL)
        opts = &defaults;
    if (create) {
        if (!memory && (rc = q__file_create(path)) != 0)
            return rc;
        flags |= SQLITE_OPEN_CREATE;
    } else if (!memory && (rc = q__file_open_existing(path)) != 0) {
        return rc;
    }
    db = xcalloc(1, sizeof(*db));
    db->base.ops = &q__sqlite_ops;
    db->base.clock_offset_ms = 0;
    db->path = xstrdup(path);
    db->keep_body_bytes = opts->keep_body_bytes;
    db->full_sync = opts->durable;
    if (sqlite3_open_v2(path, &db->h, flags, NULL) != SQLITE_OK) {
        rc = db->h ? q__db_err(db, "opening") : -EIO;
        goto fail;
    }
    sqlite3_extended_result_codes(db->h, 0);
    db->lock_wait_ms = opts->lock_wait_ms > 0 ? opts->lock_wait_ms : 5000;
    db->busy_rng = ((uint64_t)getpid() << 32) ^ (uint64_t)clock_mono_ms() ^
                   (uint64_t)(uintptr_t)db;
    sqlite3_busy_handler(db->h, on_busy, db);
    q__file_note(db);
    if (!create && (rc = check_existing(db)) != 0)
        goto fail;
    rc = q__exec_simple(db, opts->durable ? "PRAGMA synchronous = FULL"
                                          : "PRAGMA synchronous = NORMAL");
    for (size_t i = 0; rc == 0 && i < STEPQ_ARRAY_LEN(pragmas); i++)
        rc = q__exec_simple(db, pragmas[i]);
    if (rc != 0 || (create && (rc = q__schema_migrate(db, target)) != 0))
        goto fail;
    *out = &db->base;
    return 0;
fail:
    q__sqlite_close(&db->base);
    return rc;
}

int
q__open_version(const char *path, int target, q_db **out)
{
    return q__sqlite_open(path, NULL, true, target, out);
}

/* What the handle waited for other processes' locks, said once at its
 * close (a worker's, serve's or a command's exit): a warning when a wait
 * ran out or took a second or more, as each such wait was, else at info
 * (`-v`). A handle that never waited says nothing. */
static void
waits_said(const struct q__sqlite *db)
{
    const struct q_lock_waits *w = &db->base.lock_waits;
    bool long_ones = w->ran_out > 0 || w->longest_us >= 1000000;

    if (w->count == 0)
        return;
    log_write(long_ones ? LOG_LEVEL_WARN : LOG_LEVEL_INFO, __FILE__, __LINE__,
              "%s: lock waits: %lld, %.1f ms in all, longest %.1f ms, %lld ran "
              "out (other processes held the lock)",
              db->path, (long long)w->count, (double)w->total_us / 1000.0,
              (double)w->longest_us / 1000.0, (long long)w->ran_out);
}

int
q__sqlite_close(q_db *base)
{
    struct q__sqlite *db = q__sqlite(base);
    int rc = 0;

    if (db == NULL)
        return 0;
    waits_said(db);
    while (db->tx_depth > 0)
        q__sqlite_tx_rollback(&db->base);
    while (db->read_depth > 0)
        q__sqlite_read_end(&db->base);
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(db->stmts[i]);
    if (db->h != NULL && sqlite3_close(db->h) != SQLITE_OK) {
        log_error("%s: close: %s", db->path, sqlite3_errmsg(db->h));
        rc = -EIO;
    }
    free(db->tier_undo);
    free(db->path);
    free(db);
    return rc;
}

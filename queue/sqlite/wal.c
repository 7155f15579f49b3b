/* wal.c: the SQLite store's write-ahead log beyond what SQLite does on
 * its own: flushed to disk for a commit that must survive a power loss
 * (q_tx_durable), and folded into the database after a commit failed on
 * a full disk. */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <string.h>

#include "common/log.h"

/* q__disk_full tells whether the last error was a full disk. */
bool
q__disk_full(struct q__sqlite *db)
{
    int code = sqlite3_errcode(db->h);

    return code == SQLITE_FULL ||
           (code == SQLITE_IOERR && sqlite3_system_errno(db->h) == ENOSPC);
}

/* After a full disk the log is folded in at this many pages (1 MiB)
 * rather than at the usual 32 MiB (store.c's wal_autocheckpoint). */
#define WAL_PAGES_AFTER_FULL 256

/* q__wal_fold copies what the write-ahead log holds into the database and
 * empties the log's file, once a commit failed on a full disk, before the
 * next transaction. The log grows until its next checkpoint (32 MiB): on
 * a disk with less room than that, each retry of the failed commit
 * appended to it and took any space freed, and the database, which must
 * grow to take the log's pages, could never fold it in. Right after the
 * failure the disk is still full, so the fold is tried before each
 * transaction until it is done; from then on the log is folded in at
 * WAL_PAGES_AFTER_FULL pages, so that it leaves the database room.
 * TRUNCATE waits for readers (the busy timeout) as a writer would. */
void
q__wal_fold(struct q__sqlite *db)
{
    int logged = 0, folded = 0;
    int rc = sqlite3_wal_checkpoint_v2(
        db->h, "main", SQLITE_CHECKPOINT_TRUNCATE, &logged, &folded);

    if (rc != SQLITE_OK || folded != logged)
        return; /* tried again before the next transaction */
    sqlite3_wal_autocheckpoint(db->h, WAL_PAGES_AFTER_FULL);
    log_warn("%s: after a full disk the write-ahead log is in the database; "
             "it is folded in every %d pages from now on",
             db->path, WAL_PAGES_AFTER_FULL);
    db->wal_full = false;
}

/* q__wal_sync flushes the write-ahead log to disk (fdatasync, through
 * SQLite's own file object for it), so that every transaction committed in
 * it so far survives a power loss. With synchronous=NORMAL a COMMIT only
 * writes the log; SQLite flushes it at checkpoints. (synchronous=FULL
 * also pads a commit to a sector on a file system that does not promise
 * power-safe overwrites; Debian's SQLite assumes they are.) A file without
 * a log (":memory:") has nothing to flush. A flush that failed is not
 * tried again: Linux may drop the pages it could not write and report the
 * next flush a success (PostgreSQL stops for this reason), so every later
 * one fails until the store is opened again. */
int
q__wal_sync(struct q__sqlite *db)
{
    sqlite3_file *f = NULL;
    int rc;

    if (db->sync_failed)
        return -EIO;
    rc = sqlite3_file_control(db->h, "main", SQLITE_FCNTL_JOURNAL_POINTER, &f);
    if (rc != SQLITE_OK || f == NULL || f->pMethods == NULL)
        return 0;
    if ((rc = f->pMethods->xSync(f, SQLITE_SYNC_NORMAL)) != SQLITE_OK) {
        log_error("%s: cannot flush the write-ahead log to disk: %s; no "
                  "later flush is trusted until the database is opened again",
                  db->path ? db->path : "database", sqlite3_errstr(rc));
        db->sync_failed = true;
        return -EIO;
    }
    return 0;
}

int
q__sqlite_tx_durable(q_db *base)
{
    struct q__sqlite *db = q__sqlite(base);

    if (db->full_sync)
        return 0;
    /* Known already: the caller need not commit to find out. */
    if (db->sync_failed)
        return -EIO;
    if (db->tx_depth > 0) {
        db->tx_durable = true;
        return 0;
    }
    return q__wal_sync(db);
}

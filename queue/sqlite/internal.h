/* internal.h: the SQLite backend's private declarations, shared by the
 * files of queue/sqlite/ (and its white-box tests). Nothing outside
 * queue/sqlite/ includes sqlite3.h. */
#ifndef STEPQ_QUEUE_SQLITE_INTERNAL_H
#define STEPQ_QUEUE_SQLITE_INTERNAL_H

#include <sqlite3.h>

#include "queue/internal.h"
#include "queue/queue.h"
#include "queue/sql.h"
#include "queue/tiers.h"

/* Every statement the module runs, prepared once per connection. */
enum q__stmt_id {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_SAVEPOINT,
    ST_RELEASE,
    ST_ROLLBACK_TO,
    ST_BEGIN_READ, /* a read snapshot (q_read_begin) */
    ST_JOB_INSERT,
    ST_JOB_INSERT_4, /* the multi-row inserts of jobs.c: 4, 16, 64 rows */
    ST_JOB_INSERT_16,
    ST_JOB_INSERT_64,
    ST_JOB_MAX_ID,
    ST_JOB_BY_KEY,
    ST_JOB_GET,
    ST_JOBS_LIST,
    ST_JOBS_LIST_STATE,
    ST_COUNTS,
    ST_PARK_OPEN,
    ST_EXPIRED,
    ST_RECLAIM,
    ST_CLAIM_PICK,
    ST_CLAIM_SET,
    ST_EXTEND,
    ST_SET_STATE_HELD,
    ST_FAIL_HELD,
    ST_CANCEL,
    ST_CANCEL_STEPS,
    ST_CANCEL_ATTEMPTS,
    ST_JOB_STATE,
    ST_STEPS_GET,
    ST_STEP_SET,
    ST_ATTEMPT_NEXT,
    ST_ATTEMPT_INSERT,
    ST_STEP_CHARGE,
    ST_ATTEMPT_FINISH,
    ST_ATTEMPT_GET,
    ST_STEP_CORRECT,
    ST_ATTEMPTS_JOB,
    ST_JOB_COST,
    ST_ATTEMPTS_STEP,
    ST_TIER_GET,
    ST_TIER_PUT,
    ST_TIER_EVENT_ADD,
    ST_PARK_ADD,
    ST_NEXT_DUE,
    ST_PARK_GET,
    ST_PARK_LIST,
    ST_PARK_CLOSE,
    ST_STEP_RESET,
    ST_JOB_REQUEUE,
    ST_JOB_END_PARKED,
    ST_JOB_WAKE,
    ST_SCHED_GET,
    ST_SCHED_LIST,
    ST_SCHED_NOTE,
    ST_SCHED_CLAIM,
    ST_SCHED_PAUSE,
    ST_REPORT_JOBS,
    ST_REPORT_TIERS,
    ST_REPORT_FAILURES,
    ST_REPORT_FAILED,
    ST_REPORT_KEYED,
    ST_REPORT_SLOWEST,
    ST_REPORT_COSTLIEST,
    ST_JOB_GET_BY_KEY,
    ST_BUDGET_RESERVE,
    ST_BUDGET_SETTLE,
    ST_BUDGETS_LIST,
    ST_RETRY_ADD, /* a job's retry (retry.c) */
    ST_RETRY_JOB,
    ST_RETRY_STEPS,
    ST_RETRY_ATTEMPTS,
    ST_RETRIES_LIST,
    ST_BATCH_CREATE,
    ST_BATCH_ITEM_ADD,
    ST_BATCH_COUNT_ITEM,
    ST_BATCH_SET,
    ST_BATCHES_OPEN,
    ST_BATCH_ITEMS,
    ST_BATCH_OF_ATTEMPT,
    ST_BATCH_ITEM_SETTLE,
    ST_REPORT_BATCHES,
    ST_OPERATOR_ADD,
    ST_OPERATOR_ROTATE,
    ST_OPERATOR_REMOVE,
    ST_OPERATORS_LIST,
    ST_AUDIT_ADD,
    ST_AUDIT_LIST,
    ST_COUNT
};

/* A tiers row as the open transaction last read or wrote it (tiers.c). */
#define Q__TIER_ROWS 8
struct q__tier_row {
    char name[104];         /* tier names are at most 100 bytes (config) */
    struct q_tier_state st; /* the row's fields; the derived ones are 0 */
    bool dirty;             /* st is not written yet: it is at the commit */
    int undo_level; /* the deepest level holding its undo entry; 0: none */
};

/* What a row was before the first store of a transaction level, put back
 * if that level rolls back (tiers.c). */
struct q__tier_undo {
    int level;      /* the transaction level of the store */
    size_t row;     /* index in tier_rows */
    int undo_level; /* the row's undo_level before */
    bool dirty;
    struct q_tier_state st;
};

struct q__sqlite {
    struct q_db base; /* first: dispatch.c reaches the table through it */
    sqlite3 *h;
    sqlite3_stmt *stmts[ST_COUNT]; /* prepared lazily, finalized in close */
    int tx_depth; /* 0: none, 1: BEGIN IMMEDIATE, more: savepoints */
    /* The levels SQLite has: the BEGIN, and the savepoints opened so far.
     * A savepoint is opened only before the first statement run at or
     * inside its level (q__tx_sync): a level that ran none (a worker's
     * admission or settle, whose tier rows are kept here) costs no
     * SAVEPOINT and no RELEASE. */
    int tx_sent;
    /* The open transaction holds the write lock, so the tiers rows it read
     * or wrote change only through it: they are kept here and read again
     * only after its end, and a row stored is written once, before the
     * COMMIT (q__tier_rows_flush), not at every store. A level rolled back
     * puts back what its stores changed (tier_undo); the rows are emptied
     * at the commit and at the rollback of the transaction. */
    struct q__tier_row tier_rows[Q__TIER_ROWS];
    size_t ntier_rows;
    struct q__tier_undo *tier_undo; /* owned; one entry per row and level */
    size_t ntier_undo, tier_undo_cap;
    /* synchronous=FULL: every COMMIT flushes the write-ahead log. */
    bool full_sync;
    /* q_tx_durable asked for the open transaction: its COMMIT is followed
     * by a flush of the write-ahead log (synchronous=NORMAL does not). */
    bool tx_durable;
    bool sync_failed; /* a flush failed: none is trusted again (wal_sync) */
    bool wal_full;    /* a commit failed on a full disk: fold the log */
    /* The file db->path named when it was opened (q__file_note); 0: in
     * memory. moved: it was found removed or replaced (logged once). */
    unsigned long long file_dev, file_ino;
    bool moved;
    unsigned tx_count; /* transactions begun: every 64th checks the file */
    /* Waiting for another process's lock (on_busy, store.c): how long a
     * call may wait, when this wait began and what of it is counted in
     * base.lock_waits so far (monotonic microseconds; busy_since 0:
     * none), the jitter's state. */
    int64_t lock_wait_ms, busy_since, busy_counted;
    uint64_t busy_rng;
    /* Read snapshots open (q_read_begin); read_open: the outermost began
     * a read transaction of its own (not inside a write one). */
    int read_depth;
    bool read_open;
    int64_t keep_body_bytes;
    char *path;
};

/* q__sqlite cast: the backend's view of a store q__sqlite_open opened. */
static inline struct q__sqlite *
q__sqlite(q_db *db)
{
    return (struct q__sqlite *)db;
}

/* The contract's calls (the entries of q__sqlite_ops, ops.c), each with
 * the signature, meaning and errors of its q_* namesake in queue.h:
 * q__sqlite_NAME for each call of Q__OPS (queue/internal.h), and the
 * optional ones SQLite has. */
extern const struct q__ops q__sqlite_ops;

#define Q__SQLITE_DECL(ret, name, params) ret q__sqlite_##name params;
Q__OPS(Q__SQLITE_DECL, Q__OP_NONE)
#undef Q__SQLITE_DECL
int q__sqlite_tx_durable(q_db *db);

/* The write-ahead log (wal.c). q__wal_sync flushes it to disk: 0, or -EIO
 * (logged; and every later call, until the store is opened again).
 * q__disk_full tells whether db's last error was a full disk;
 * q__wal_fold tries to copy the log into the database after such an
 * error, and clears db->wal_full once it did (logged), so that the next
 * transaction writes the log from its start. */
int q__wal_sync(struct q__sqlite *db);
bool q__disk_full(struct q__sqlite *db);
void q__wal_fold(struct q__sqlite *db);
/* backup.c: the optional call backup (VACUUM INTO). */
int q__sqlite_backup(q_db *db, const char *path);

/* schema_migrate brings the database to target (0: the latest) in one
 * transaction. -ENOTSUP if the file is newer than this build knows. */
int q__schema_migrate(struct q__sqlite *db, int target);

/* q_open_version opens path and migrates only up to version target (for
 * migration tests). */
int q__open_version(const char *path, int target, q_db **out);

/* q__store_sql is the SQL text of statement id (sql.c): what store.c
 * prepares, and what the query-plan tests read. */
const char *q__store_sql(enum q__stmt_id id);

/* stmt returns the cached statement id, reset and with bindings cleared,
 * the levels of the transaction opened first (q__tx_sync), or NULL after
 * logging when a level cannot be opened or the statement prepared. */
sqlite3_stmt *q__stmt(struct q__sqlite *db, enum q__stmt_id id);
/* q__tx_sync opens the savepoints of the levels entered since the last
 * statement: every statement runs inside its level's savepoint, so that
 * rolling the level back undoes it. Call it before running a statement
 * not got from q__stmt. -EIO/-EAGAIN when one cannot be opened. */
STEPQ_MUST_CHECK int q__tx_sync(struct q__sqlite *db);
/* db_err logs the SQLite error of the connection with what was being done
 * and returns -EIO (or -EAGAIN when the database stayed locked). */
int q__db_err(struct q__sqlite *db, const char *what);
/* The tiers rows kept for the open transaction (tiers.c), driven by
 * q__tx_leave: q__tier_rows_flush writes the stored ones before the
 * COMMIT (an error: the transaction must roll back); q__tier_rows_level_end
 * ends level (rolled back or not) for them; q__tier_rows_forget empties
 * them, at the end of the transaction. */
STEPQ_MUST_CHECK int q__tier_rows_flush(struct q__sqlite *db);
void q__tier_rows_level_end(struct q__sqlite *db, int level, bool rollback);
void q__tier_rows_forget(struct q__sqlite *db);
/* tx_enter starts a write transaction unless one is open; tx_leave ends
 * the level tx_enter opened, committing on rc == 0, rolling back else.
 * tx_leave returns rc, or the commit's error. */
int q__tx_enter(struct q__sqlite *db);
int q__tx_leave(struct q__sqlite *db, int rc);
/* q__col_text copies column i of the current row, or NULL. Caller frees. */
char *q__col_text(sqlite3_stmt *s, int i);
/* q__exec_simple runs SQL with no parameters or results (schema, pragmas). */
int q__exec_simple(struct q__sqlite *db, const char *sql);
/* q__bind_text binds v (borrowed until the statement is reset), or NULL. */
void q__bind_text(sqlite3_stmt *s, int i, const char *v);
/* q__run_done steps a statement that yields no rows; -EIO/-EAGAIN. */
int q__run_done(struct q__sqlite *db, sqlite3_stmt *s, const char *what);
/* q__step_row steps s for one row: 0 with the row current, -ENOENT when
 * there is none, else the logged error (what was being done). */
int q__step_row(struct q__sqlite *db, sqlite3_stmt *s, const char *what);
/* A row reader: fills the element at elem from the current row of s. */
typedef void (*q__read_fn)(sqlite3_stmt *s, void *elem);
/* q__rows reads every row of s into a new array of elem-byte elements
 * (zeroed, then filled by read). On failure what was read is released
 * with clean and *out, *n stay untouched. Caller owns *out. */
int q__rows(struct q__sqlite *db, sqlite3_stmt *s, size_t elem, q__read_fn read,
            q__clean_fn clean, void **out, size_t *n, const char *what);
/* q__sqlite_read_job reads a job row in the column order of ST_JOB_GET
 * into the q_job at job (jobs.c): every statement that returns jobs
 * selects these columns. */
void q__sqlite_read_job(sqlite3_stmt *s, void *job);
/* q__row_by_id runs statement st with ?1 = id and reads its one row into
 * out (size bytes, zeroed first): 0, -ENOENT when there is none, or the
 * logged error. out is untouched on failure. */
int q__row_by_id(struct q__sqlite *db, enum q__stmt_id st, int64_t id,
                 q__read_fn read, void *out, size_t size, const char *what);

/* q__file_create creates path mode 0600 if it is not there and checks
 * that it and its folder may be written; q__file_open_existing checks the
 * same of a file that must exist (-ENOENT when there is none). -EIO,
 * logged with the reason, otherwise (files.c). */
int q__file_create(const char *path);
int q__file_open_existing(const char *path);
/* q__file_note records which file db->path names now (after the open);
 * q__file_moved tells whether the path names another file since, or none
 * (removed or replaced under this process: logged once). A store in
 * memory is never moved. */
void q__file_note(struct q__sqlite *db);
bool q__file_moved(struct q__sqlite *db);

#endif

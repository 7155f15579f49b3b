/* internal.h: the SQLite backend's private declarations, shared by the
 * files of queue/sqlite/ (and its white-box tests). Nothing outside
 * queue/sqlite/ includes sqlite3.h. */
#ifndef STEPQ_QUEUE_SQLITE_INTERNAL_H
#define STEPQ_QUEUE_SQLITE_INTERNAL_H

#include <sqlite3.h>

#include "queue/internal.h"
#include "queue/queue.h"

/* Every statement the module runs, prepared once per connection. */
enum q__stmt_id {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_SAVEPOINT,
    ST_RELEASE,
    ST_ROLLBACK_TO,
    ST_JOB_INSERT,
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
    ST_ATTEMPTS_STEP,
    ST_HELD,
    ST_TIER_GET,
    ST_TIER_WINDOW,
    ST_TIER_TOKENS,
    ST_TIER_INFLIGHT,
    ST_TIER_PUT,
    ST_TIER_SEND_ADD,
    ST_TIER_SEND_GET,
    ST_TIER_SEND_DONE,
    ST_TIER_SEND_DROP,
    ST_TIER_PRUNE,
    ST_PARK_ADD,
    ST_NEXT_DUE,
    ST_PARK_GET,
    ST_PARK_LIST,
    ST_PARK_CLOSE,
    ST_STEP_RESET,
    ST_JOB_REQUEUE,
    ST_JOB_FAIL_PARKED,
    ST_COUNT
};

struct q_db {
    sqlite3 *h;
    sqlite3_stmt *stmts[ST_COUNT]; /* prepared lazily, finalized in close */
    int tx_depth; /* 0: none, 1: BEGIN IMMEDIATE, more: savepoints */
    int64_t keep_body_bytes;
    char *path;
};

/* schema_migrate brings the database to target (0: the latest) in one
 * transaction. -ENOTSUP if the file is newer than this build knows. */
int q__schema_migrate(q_db *db, int target);

/* q_open_version opens path and migrates only up to version target (for
 * migration tests). */
int q__open_version(const char *path, int target, q_db **out);

/* store_sql is the SQL text of statement id (for query-plan tests). */
const char *q__store_sql(enum q__stmt_id id);

/* stmt returns the cached statement id, reset and with bindings cleared,
 * or NULL after logging when it cannot be prepared. */
sqlite3_stmt *q__stmt(q_db *db, enum q__stmt_id id);
/* db_err logs the SQLite error of the connection with what was being done
 * and returns -EIO (or -EAGAIN when the database stayed locked). */
int q__db_err(q_db *db, const char *what);
/* tx_enter starts a write transaction unless one is open; tx_leave ends
 * the level tx_enter opened, committing on rc == 0, rolling back else.
 * tx_leave returns rc, or the commit's error. */
int q__tx_enter(q_db *db);
int q__tx_leave(q_db *db, int rc);
/* q__col_text copies column i of the current row, or NULL. Caller frees. */
char *q__col_text(sqlite3_stmt *s, int i);
/* q__exec_simple runs SQL with no parameters or results (schema, pragmas). */
int q__exec_simple(q_db *db, const char *sql);
/* q__bind_text binds v (borrowed until the statement is reset), or NULL. */
void q__bind_text(sqlite3_stmt *s, int i, const char *v);
/* q__run_done steps a statement that yields no rows; -EIO/-EAGAIN. */
int q__run_done(q_db *db, sqlite3_stmt *s, const char *what);
/* q__step_row steps s for one row: 0 with the row current, -ENOENT when
 * there is none, else the logged error (what was being done). */
int q__step_row(q_db *db, sqlite3_stmt *s, const char *what);
/* A row reader: fills the element at elem from the current row of s. */
typedef void (*q__read_fn)(sqlite3_stmt *s, void *elem);
/* q__rows reads every row of s into a new array of elem-byte elements
 * (zeroed, then filled by read). On failure what was read is released
 * with clean and *out, *n stay untouched. Caller owns *out. */
int q__rows(q_db *db, sqlite3_stmt *s, size_t elem, q__read_fn read,
            q__clean_fn clean, void **out, size_t *n, const char *what);
/* q__row_by_id runs statement st with ?1 = id and reads its one row into
 * out (size bytes, zeroed first): 0, -ENOENT when there is none, or the
 * logged error. out is untouched on failure. */
int q__row_by_id(q_db *db, enum q__stmt_id st, int64_t id, q__read_fn read,
                 void *out, size_t size, const char *what);

#endif

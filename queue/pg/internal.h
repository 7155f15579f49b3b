/* internal.h: the PostgreSQL backend's private declarations, shared by the
 * files of queue/pg/ (and its white-box tests). Nothing outside queue/pg/
 * includes libpq-fe.h.
 *
 * How a call reaches the server: every contract call is one statement
 * where it can be (a CTE instead of read-then-write), run with
 * q__pg_run in one round trip. The connection is in libpq's pipeline
 * mode, so a pending BEGIN (q_tx_begin sends nothing by itself) and the
 * PREPARE of a statement's first use on this connection go out in the
 * same round trip as the statement. Writes whose results nobody reads
 * (a step's state, a finished attempt, a completion) are deferred: they
 * ride in the transaction's next round trip (pipe.c). Tier rows read or
 * stored in a transaction are kept, not read again, and written once per
 * round trip whatever the number of stores (tiers.c). A group-committed
 * loop turn is then one round trip per read the worker waits for, plus
 * the COMMIT.
 */
#ifndef STEPQ_QUEUE_PG_INTERNAL_H
#define STEPQ_QUEUE_PG_INTERNAL_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "queue/internal.h"
#include "queue/queue.h"
#include "queue/sql.h"
#include "queue/tiers.h"

/* A statement: its prepared name (unique on the connection) and SQL text
 * with $1..$n parameters. The prepared cache knows a statement by its
 * address, so it must live as long as the program (never on the stack):
 * the static ones are sql.c's table (q__pg_stmt), those made at run time
 * copy.c's slots. */
struct q__pg_sql {
    const char *name;
    const char *text;
};

/* Every statement whose SQL is fixed at build time, its text in sql.c's
 * table. The names are the SQLite backend's (enum q__stmt_id,
 * queue/sqlite/internal.h) where the operation is the same; where one
 * statement here does what several do there, the comment names them.
 * The first ones are sent as plain text, never prepared: transaction
 * control, the store lock's release and the wake connection's LISTEN. */
enum q__pg_stmt_id {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_SAVEPOINT,
    ST_RELEASE,
    ST_ROLLBACK_TO,
    ST_BEGIN_READ, /* a read snapshot (q_read_begin) */
    ST_STORE_UNLOCK,
    ST_LISTEN,
    /* Prepared at their first use on a connection (pipe.c). */
    ST_STORE_LOCK,
    ST_JOB_INSERT, /* any number of jobs (SQLite: 1, 4, 16 or 64 rows) */
    ST_JOB_BY_KEY,
    ST_JOB_GET,
    ST_JOBS_LIST,
    ST_JOBS_LIST_STATE,
    ST_COUNTS, /* with SQLite's ST_PARK_OPEN */
    ST_RECLAIM,
    ST_CLAIM, /* SQLite's ST_EXPIRED, ST_CLAIM_PICK and ST_CLAIM_SET */
    ST_EXTEND,
    ST_SET_STATE_HELD,
    ST_FAIL_HELD,
    ST_CANCEL, /* with SQLite's ST_CANCEL_STEPS and ST_CANCEL_ATTEMPTS */
    ST_STEPS_GET,
    ST_STEP_SET,
    ST_ATTEMPT_BEGIN,  /* SQLite's ST_ATTEMPT_NEXT, ST_ATTEMPT_INSERT and
                          ST_STEP_CHARGE */
    ST_ATTEMPT_FINISH, /* with SQLite's ST_STEP_CORRECT */
    ST_ATTEMPT_FINISH_ONLY,
    ST_ATTEMPTS_LIST, /* SQLite's ST_ATTEMPTS_JOB and ST_ATTEMPTS_STEP */
    ST_JOB_COST,
    ST_TIER_GET,
    ST_TIER_LOCK, /* ST_TIER_GET FOR UPDATE, inside a transaction */
    ST_TIER_ROW,
    ST_TIER_PUT,
    ST_TIER_EVENT_ADD,
    ST_PARK_ADD,
    ST_NEXT_DUE,
    ST_PARK_GET,
    ST_PARK_LIST,
    ST_PARK_CLOSE,
    ST_STEP_RESET,
    ST_JOB_LEAVE_PARKED, /* SQLite's ST_JOB_REQUEUE and ST_JOB_END_PARKED */
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
    ST_RETRY, /* SQLite's ST_RETRY_ADD, ST_RETRY_JOB, ST_RETRY_ATTEMPTS and
                 ST_RETRY_STEPS */
    ST_RETRIES_LIST,
    ST_BATCH_CREATE,
    ST_BATCH_ITEM_ADD, /* with SQLite's ST_BATCH_COUNT_ITEM */
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
    /* Those SQLite runs without its cache (its stats.c, prune.c, schema.c
     * prepare them where they run), and PostgreSQL's own. */
    ST_STATS_ATTEMPTS,
    ST_STATS_PARK_OPEN,
    ST_STATS_LATENCY,
    ST_STATS_WORKERS,
    ST_STATS_OLDEST_DUE,
    ST_PRUNE_COUNT,
    ST_PRUNE_JOBS,
    ST_PRUNE_BODIES,
    ST_PRUNE_EVENTS,
    ST_PRUNE_BUDGETS,
    ST_HAS_SCHEMA,
    ST_SCHEMA_VERSION,
    ST_SCHEMA_NONE,
    ST_SCHEMA_LOCK,
    ST_SCHEMA_SET_VERSION,
    ST_CLOCK,
    ST_IDS_TAKE,
    ST_COUNT
};

/* q__pg_stmt returns statement st of sql.c's table, named after its enum
 * constant. Borrowed: it lives as long as the program. */
const struct q__pg_sql *q__pg_stmt(enum q__pg_stmt_id st);
/* q__pg_sql_missing returns the first id of the enum without a text in
 * sql.c's table, or -1 when every one has its text (asserted at open). */
int q__pg_sql_missing(void);

#define Q__PG_MAX_PARAMS   24
#define Q__PG_MAX_PREPARED 96

/* Parameters of one statement, all sent as text (NULL: SQL NULL). */
struct q__pg_params {
    int n;
    const char *v[Q__PG_MAX_PARAMS];
    char num[Q__PG_MAX_PARAMS][32]; /* the text of numeric parameters */
};

/* What a command queued on the connection is (pipe.c), so that reading
 * its results knows what they mean. */
enum q__pg_cmd {
    Q__PG_CMD_PLAIN,    /* BEGIN, SAVEPOINT, RELEASE, the lock, COMMIT... */
    Q__PG_CMD_PREPARE,  /* a first-use PREPARE of sql */
    Q__PG_CMD_DEFERRED, /* a deferred write: only its failure matters */
    Q__PG_CMD_LAST      /* the round trip's own statement */
};

/* An answer reader: what a write's result means for the contract. It
 * puts what the caller asked for in out0/out1 (the caller's) and returns
 * 0, or the "changed nothing" error the result stands for (-EBUSY: the
 * job is not held; -EALREADY: done before; -ENOENT: no such row). */
typedef int (*q__pg_answer_fn)(const PGresult *res, void *out0, void *out1);

struct q__pg_sent {
    enum q__pg_cmd kind;
    const struct q__pg_sql *sql;
    const char *what;       /* a literal: what it was doing, for the log */
    q__pg_answer_fn answer; /* deferred writes: NULL, or read on success */
    int64_t id;             /* the row it is about, for the log */
    void *out[2];           /* the answer's (caller's memory) */
    uint64_t seq;           /* its place in the transaction's commands */
};

/* Savepoint levels whose SAVEPOINT command is remembered (deeper ones
 * count as failed when they roll back over an earlier failure). */
#define Q__PG_MAX_LEVELS 16

/* Tier rows read or written in the open transaction (tiers.c): under the
 * store's write lock no other process changes them until it ends. */
#define Q__PG_TIER_CACHE 8
#define Q__PG_IDS        64

/* Ids of a table's identity column taken ahead from its sequence. */
struct q__pg_ids {
    int64_t v[Q__PG_IDS];
    int n;
};

struct q__pg_tier_row {
    char name[64];
    struct q_tier_state st; /* the row's fields; the derived ones unused */
    bool dirty;             /* stored, not written yet (q__pg_tiers_write) */
};

/* The tier rows of the open transaction, as the server will have them
 * once what is kept here is written. */
struct q__pg_tier_cache {
    struct q__pg_tier_row rows[Q__PG_TIER_CACHE];
    int n;
};

struct q__pg_pending;

struct q__pg {
    struct q_db base; /* first: queue.c reaches ops through it */
    PGconn *conn;
    char *conninfo;    /* owned; may hold a password: never logged */
    char *where;       /* the location with any password masked, for logs */
    int tx_depth;      /* 0: none, 1: a transaction, more: savepoints */
    int tx_sent;       /* levels queued on the connection: BEGIN and the
                          SAVEPOINTs of the levels above tx_sent go out with
                          the next statement (an empty transaction sends
                          nothing) */
    int tx_release;    /* inner levels that ended well: their RELEASEs go
                          out first with the next command (COMMIT needs none) */
    int tx_rc;         /* the error that left the sent transaction aborted */
    uint64_t seq;      /* commands queued on this connection (pipe.c) */
    uint64_t fail_seq; /* the command whose failure set tx_rc */
    uint64_t level_seq[Q__PG_MAX_LEVELS]; /* each savepoint's SAVEPOINT */
    bool broken;      /* the connection was lost: reconnect first */
    int64_t retry_at; /* no reconnect before (monotonic ms) */
    int64_t retry_ms; /* the backoff, doubled per failure */
    int64_t keep_body_bytes;
    int lock_wait_ms;
    int answer_wait_ms; /* 0: wait for answers without a bound */
    /* Read snapshots open (q_read_begin); read_open: the outermost sent a
     * REPEATABLE READ transaction of its own (not inside a write one). */
    int read_depth;
    bool read_open;
    /* Statements prepared on this connection (cleared on reconnect). */
    const struct q__pg_sql *prepared[Q__PG_MAX_PREPARED];
    int nprepared;
    /* Commands queued and not read yet (pipe.c). */
    struct q__pg_sent *sent; /* owned */
    size_t nsent, sent_cap;
    /* Deferred writes waiting for the next round trip (pipe.c). */
    struct q__pg_pending *pending; /* owned */
    size_t npending, pending_cap;
    struct q__pg_tier_cache tiers;     /* valid in the open transaction only */
    char recent[Q__PG_TIER_CACHE][64]; /* tiers the last commit kept */
    int nrecent;
    struct q__pg_tier_cache *saved; /* owned, Q__PG_MAX_LEVELS of them (or
                                       NULL): each savepoint level's tiers
                                       as they were when it began */
    /* Ids taken from the sequence of attempts, not used yet
     * (q__pg_take_id). */
    struct q__pg_ids attempt_ids;
    PGconn *listen;   /* the LISTEN connection of q_wake_fd, or NULL */
    bool listen_lost; /* lost while polled: closed by the next wake_fd */
    char *schema;     /* owned: the schema whose notifications count */
};

/* q__pg cast: the backend's view of a store opened by q__pg_open. */
static inline struct q__pg *
q__pg(q_db *db)
{
    return (struct q__pg *)db;
}

/* q__pg_connect opens a connection to db->conninfo (the location as
 * given: a URL, the keyword form, or "" for libpq's PG* variables), or
 * returns NULL after logging what failed while doing what. Caller
 * PQfinish()es it. */
PGconn *q__pg_connect(const struct q__pg *db, const char *what);
/* q__pg_log logs msg (libpq's or the server's, maybe several lines) on
 * one line with db->where and what was being done. */
void q__pg_log(const struct q__pg *db, const char *what, const char *msg);

/* Adding parameters in order ($1, $2, ...). */
void q__pg_p_int(struct q__pg_params *p, int64_t v);
void q__pg_p_real(struct q__pg_params *p, double v);
void q__pg_p_text(struct q__pg_params *p, const char *v); /* NULL ok */
void q__pg_p_bool(struct q__pg_params *p, bool v);

/* q__pg_scrub_params: when a text parameter of p is not well-formed UTF-8
 * (PostgreSQL text cannot hold it), fills clean with p's values and
 * scrubbed copies of those (bad bytes as '?'), put in owned[i] (caller
 * frees every entry), and returns true; false leaves clean untouched. */
bool q__pg_scrub_params(const struct q__pg_params *p,
                        struct q__pg_params *clean, char **owned);

/* q__pg_error maps a failed result (r NULL: libpq's own failure) to the
 * contract's error (-EAGAIN, -EEXIST, -EIO: see q__pg_run), logging it
 * once with what was being done; a lost connection marks the store
 * broken. */
int q__pg_error(struct q__pg *db, const PGresult *r, const char *what);
/* q__pg_usable: 0 when the connection can take commands; a lost one is
 * reset after its backoff when no transaction is on it, else -EIO. */
int q__pg_usable(struct q__pg *db);

/* q__pg_round_trip queues the pending levels, the plain texts and sql
 * (may be NULL) after whatever was deferred, syncs, and reads every
 * result. Errors and *res as q__pg_run. */
int q__pg_round_trip(struct q__pg *db, const char *const *texts, int ntexts,
                     const struct q__pg_sql *sql, const struct q__pg_params *p,
                     PGresult **res, const char *what);

/* q__pg_run runs statement st with params p (may be NULL) in one round
 * trip (with a pending BEGIN and a first-use PREPARE). *res (res may be
 * NULL) gets the result of a statement that returns rows; caller
 * PQclear()s it. Returns 0, or the logged error with what was being done:
 * -EAGAIN (a lock wait ran out, a serialization failure or deadlock:
 * nothing was changed), -EEXIST (a unique violation), -EIO (anything
 * else; a lost connection marks the store broken, and a later call
 * outside a transaction reconnects, with backoff). */
int q__pg_run(struct q__pg *db, enum q__pg_stmt_id st,
              const struct q__pg_params *p, PGresult **res, const char *what);
/* q__pg_run_sql is q__pg_run for a statement made at run time (copy.c);
 * sql must live as long as the program. */
int q__pg_run_sql(struct q__pg *db, const struct q__pg_sql *sql,
                  const struct q__pg_params *p, PGresult **res,
                  const char *what);
/* q__pg_defer holds a write whose result nobody reads (no rows, no
 * count) for the next round trip of the open transaction, at the latest
 * its COMMIT; outside a transaction it runs now (q__pg_run). Returns 0
 * once kept (a lost connection: -EIO). Its own failure is the
 * transaction's: the round trip that reads it returns the error and the
 * commit fails (nothing of the transaction is kept). */
int q__pg_defer(struct q__pg *db, enum q__pg_stmt_id st,
                const struct q__pg_params *p, const char *what);
/* q__pg_write runs statement st, a write whose result answer reads (NULL:
 * none to read) into out0/out1, and returns what answer says. With defer and
 * a transaction open it waits for the next round trip instead
 * (q__pg_defer) and returns 0 once kept: answer runs when its result is
 * read, at the latest by the commit (what out0/out1 point to must live
 * until then; a rolled-back level's writes are never sent and their
 * answers never run), and a "changed nothing" answer is logged with what
 * and id, and the transaction goes on. */
int q__pg_write(struct q__pg *db, enum q__pg_stmt_id st,
                const struct q__pg_params *p, bool defer,
                q__pg_answer_fn answer, void *out0, void *out1, int64_t id,
                const char *what);
/* q__pg_queue queues statement st with p (already clean) in the round
 * trip being made, its answer read into out0/out1 when its result is (a
 * "changed nothing" answer is logged); false when the send failed. For
 * what rides along with a round trip's first commands (tiers.c). */
bool q__pg_queue(struct q__pg *db, enum q__pg_stmt_id st,
                 const struct q__pg_params *p, q__pg_answer_fn answer,
                 void *out0, void *out1, const char *what);
/* Deferred writes waiting as a level ends (store.c):
 * q__pg_pending_drop drops those of level and deeper (rolled back: never
 * sent, their answers never given; 0: all); q__pg_pending_merge makes
 * those of level and deeper the parent's (the level ended well);
 * q__pg_pending_any: whether any is waiting. */
void q__pg_pending_drop(struct q__pg *db, int level);
void q__pg_pending_merge(struct q__pg *db, int level);
bool q__pg_pending_any(const struct q__pg *db);
/* q__pg_push sends the waiting writes of the outermost level ahead of
 * the next round trip once enough are kept, without waiting for them:
 * the server runs them while the caller goes on, and their results are
 * read at the next sync. Only in a transaction that has reached the
 * server (its BEGIN, lock and tier reads read back): a savepoint's writes
 * wait for it to end well (rolled back, they are dropped unsent). 0, or a
 * failed send's error (the transaction then cannot commit). */
int q__pg_push(struct q__pg *db, const char *what);
/* q__pg_flush reads what was deferred (one round trip; 0 when nothing
 * was): its error, as q__pg_defer says. */
int q__pg_flush(struct q__pg *db, const char *what);
/* q__pg_exec runs SQL text with no parameters or results (schema, SET). */
int q__pg_exec(struct q__pg *db, const char *sql, const char *what);

/* tx_enter starts a transaction level (lazily: BEGIN goes out with the
 * next statement) or a savepoint; tx_leave ends the level tx_enter
 * opened, committing on rc == 0, rolling back else. tx_leave returns rc,
 * or the commit's error. */
int q__pg_tx_enter(struct q__pg *db);
int q__pg_tx_leave(struct q__pg *db, int rc);

/* Tier rows of the open transaction (tiers.c). A store inside a
 * transaction only changes the kept row; the rows stored since the last
 * write are queued as deferred writes by q__pg_tiers_write, which every round
 * trip of the transaction runs first (so a statement that reads them sees them)
 * and its commit at the latest: a turn admitting and settling many sends on one
 * tier writes its row once per round trip, not twice per send.
 *  - q__pg_tiers_write queues them (0, or q__pg_defer's error);
 *  - q__pg_tiers_dirty: whether anything is waiting to be written;
 *  - q__pg_tiers_mark keeps the rows as they are for savepoint level
 *    level (the one about to begin), so that rolling it back can restore
 *    them (q__pg_tiers_undo); a level too deep to keep writes them
 *    instead (before its SAVEPOINT) and its rollback forgets the rows;
 *  - q__pg_tiers_forget: none kept (a transaction begins or ends, or
 *    writes tier rows behind the cache: copy);
 *  - q__pg_tiers_ended: the transaction ended (committed or not): the
 *    tiers its commit kept are read ahead by the next one;
 *  - q__pg_tiers_prefetch queues, right after a transaction's BEGIN and
 *    lock, the read of each tier the last commit kept (a worker's next
 *    turn uses the same ones), kept as it is read: a turn's first
 *    admission or settle then needs no round trip of its own. A tier that
 *    the round trip's own statement (sql with parameters next) loads is
 *    left to it. Returns false when a send failed. */
int q__pg_tiers_write(struct q__pg *db);
bool q__pg_tiers_dirty(const struct q__pg *db);
int q__pg_tiers_mark(struct q__pg *db, int level);
void q__pg_tiers_undo(struct q__pg *db, int level);
void q__pg_tiers_forget(struct q__pg *db);
void q__pg_tiers_ended(struct q__pg *db, bool committed);
bool q__pg_tiers_prefetch(struct q__pg *db, const struct q__pg_sql *sql,
                          const struct q__pg_params *next);

/* q__pg_take_id puts the next id of table's identity column in *id,
 * from pool, refilled Q__PG_IDS at a time from the table's sequence in
 * one round trip. A sequence never gives a value twice, whatever commits
 * or rolls back, so a row can be written with its id known before the
 * write is sent. table: our own name (a literal). */
int q__pg_take_id(struct q__pg *db, const char *table, struct q__pg_ids *pool,
                  int64_t *id);

/* Reading results: column c of row r. NULL reads as 0 / NULL. */
bool q__pg_null(const PGresult *res, int r, int c);
int64_t q__pg_int(const PGresult *res, int r, int c);
double q__pg_real(const PGresult *res, int r, int c);
char *q__pg_text(const PGresult *res, int r, int c); /* caller frees */
/* q__pg_affected is the number of rows the statement changed. */
int64_t q__pg_affected(const PGresult *res);
/* q__pg_held answers a write that only the job's lease holder may make
 * (a q__pg_answer_fn): -EBUSY when it changed no row, else 0. */
int q__pg_held(const PGresult *res, void *unused0, void *unused1);

/* A row reader: fills the element at elem from row r of res. */
typedef void (*q__pg_read_fn)(const PGresult *res, int r, void *elem);
/* q__pg_rows reads every row of res into a new array of elem-byte
 * elements (zeroed, then filled by read). Caller owns *out; *out is NULL
 * when there are no rows. */
void q__pg_rows(const PGresult *res, size_t elem, q__pg_read_fn read,
                void **out, size_t *n);

/* q__pg_select runs statement st with p (q__pg_run) and reads every row
 * into a new array (q__pg_rows). Caller owns *out (NULL with no rows). */
int q__pg_select(struct q__pg *db, enum q__pg_stmt_id st,
                 const struct q__pg_params *p, size_t elem, q__pg_read_fn read,
                 void **out, size_t *n, const char *what);
/* q__pg_select_one runs statement st with p and reads its first row into
 * out (elem bytes, zeroed first; read NULL: reads nothing); -ENOENT when
 * it returned no row. out is untouched on failure. */
int q__pg_select_one(struct q__pg *db, enum q__pg_stmt_id st,
                     const struct q__pg_params *p, size_t elem,
                     q__pg_read_fn read, void *out, const char *what);
/* q__pg_read_ints is a row reader for a row of numbers: every column of
 * row r into the int64_t array elem (as many as the row has columns). */
void q__pg_read_ints(const PGresult *res, int r, void *elem);

/* q__pg_read_job reads a job row: the statements that return jobs
 * select sql.c's JOB_COLS, then spec (or NULL), error and input (or
 * NULL). */
void q__pg_read_job(const PGresult *res, int r, void *job);

/* q__pg_migrate brings the schema to this build's version under an
 * advisory lock (two `stepq init`s cannot race). -ENOTSUP if the schema is
 * newer than this build knows. */
int q__pg_migrate(struct q__pg *db);

/* The contract's calls (the entries of q__pg_ops, store.c), each with
 * the meaning of its q_* namesake in queue.h. Files: store.c (close,
 * versions, transactions, clock), wake.c, enqueue.c, jobs.c, ledger.c
 * (steps and attempts), tiers.c, park.c, stats.c, sched.c, report.c,
 * copy.c: q__pg_NAME for each call of Q__OPS (queue/internal.h), and the
 * optional ones PostgreSQL has. */
#define Q__PG_DECL(ret, name, params) ret q__pg_##name params;
Q__OPS(Q__PG_DECL, Q__OP_NONE)
#undef Q__PG_DECL
/* q__pg_hung marks the connection lost because the server sent no answer
 * within answer_wait_ms while doing what (logged once). */
void q__pg_hung(struct q__pg *db, const char *what);
int q__pg_clock_sync(q_db *db);
int q__pg_wake_fd(q_db *db);
int q__pg_wake_take(q_db *db, unsigned *events);

/* The table queue.c calls through. */
extern const struct q__ops q__pg_ops;

#endif

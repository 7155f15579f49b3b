/* internal.h: what the backend-neutral part of queue/ (queue.c) and the
 * backends (queue/sqlite/) share. Not a public interface. */
#ifndef STEPQ_QUEUE_INTERNAL_H
#define STEPQ_QUEUE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "queue/admin.h"
#include "queue/audit.h"
#include "queue/batch.h"
#include "queue/park.h"
#include "queue/queue.h"
#include "queue/report.h"
#include "queue/sched.h"
#include "queue/tiers.h"

/* ---- the table of functions a backend implements ---------------------- */

/* Copying rows between backends (q_copy, queue/copy.c): the tables and
 * columns are described once, here in queue/, with the same names in
 * every backend's schema; a backend moves one row at a time as values. */
enum q__col_type { Q__COL_INT, Q__COL_REAL, Q__COL_TEXT };

struct q__column {
    const char *name;
    enum q__col_type type;
};

struct q__table {
    const char *name;     /* the table, as every backend names it */
    const char *order_by; /* the column list rows are read in */
    const struct q__column *cols;
    size_t ncols;
    bool id_serial; /* its "id" column is generated: continue after max */
    /* its rows are made by triggers as the rows before it are copied:
     * the target's are replaced by the source's */
    bool derived;
};

/* One column's value in a row. Text is borrowed for the call. */
struct q__value {
    bool null;
    int64_t i;
    double r;
    const char *s;
};

/* Called with each row (t->ncols values); nonzero stops and is returned. */
typedef int (*q__row_fn)(void *arg, const struct q__value *vals);

/* The statements a backend runs for a copy, and q__copy_sql (copy.c),
 * which writes one's SQL for table t into buf (size bytes): t's own
 * identifiers only, values as numbered parameters mark1, mark2... ('?'
 * for SQLite, '$' for PostgreSQL). -EINVAL when it does not fit.
 * SELECT reads every row in order; FIRST and NEXT read it in pages (for a
 * backend that streams that way): FIRST the first mark1 rows, NEXT the
 * mark(k+1) rows after the one whose order_by columns (k of them) are
 * mark1..markk. */
enum q__copy_stmt {
    Q__COPY_COUNT,
    Q__COPY_CLEAR,
    Q__COPY_SELECT,
    Q__COPY_FIRST,
    Q__COPY_NEXT,
    Q__COPY_INSERT
};
int q__copy_sql(const struct q__table *t, enum q__copy_stmt k, char mark,
                char *buf, size_t size);
/* q__copy_nkeys is how many columns t->order_by names (its key: the
 * table's first columns, in order). */
size_t q__copy_nkeys(const struct q__table *t);

/* Q__OPS(X, OPT) lists every storage call of queue.h once, with the
 * same meaning, arguments and errors (see there): X(ret, name, params)
 * for a call every backend has, OPT(...) for one a backend may leave NULL
 * (it then declares and lists its own, by hand). struct q__ops, each
 * backend's prototypes (q__sqlite_NAME, q__pg_NAME) and each backend's
 * table are made from it, so a new call is one line here, its queue.c
 * wrapper and its two implementations. */
/* clang-format off */
#define Q__OPS(X, OPT)                                                         \
    X(int, close, (q_db *db))                                                  \
    X(int, db_version, (q_db *db, int *out))                                   \
    X(int, tx_begin, (q_db *db))                                               \
    X(int, tx_commit, (q_db *db))                                              \
    X(void, tx_rollback, (q_db *db))                                           \
    OPT(int, tx_durable, (q_db *db)) /* NULL: every commit is durable */       \
    X(int, read_begin, (q_db *db))                                             \
    X(void, read_end, (q_db *db))                                              \
    X(int, enqueue,                                                            \
      (q_db *db, const struct q_job_new *jobs, size_t n,                       \
       const struct q_enqueue_opts *opts, int64_t now,                         \
       struct q_enqueue_result *res))                                          \
    X(int, job_get, (q_db *db, int64_t id, struct q_job *out))                 \
    X(int, jobs_list,                                                          \
      (q_db *db, int state, int64_t after, size_t limit, struct q_job **out,   \
       size_t *n))                                                             \
    X(int, counts,                                                             \
      (q_db *db, int64_t counts[Q_JOB_NSTATES], int64_t *park_open))           \
    X(int, claim,                                                              \
      (q_db *db, const char *worker, int64_t now, int64_t lease_ms,            \
       size_t max, struct q_job **out, size_t *n))                             \
    X(int, extend,                                                             \
      (q_db *db, int64_t id, const char *worker, int64_t until, int64_t now))  \
    X(int, release,                                                            \
      (q_db *db, int64_t id, const char *worker, int64_t run_at,               \
       int64_t now))                                                           \
    X(int, complete, (q_db *db, int64_t id, const char *worker, int64_t now))  \
    X(int, fail,                                                               \
      (q_db *db, int64_t id, const char *worker, const char *error,            \
       int64_t now))                                                           \
    X(int, park_job, (q_db *db, int64_t id, const char *worker, int64_t now))  \
    X(int, cancel, (q_db *db, int64_t id, int64_t now))                        \
    X(int, next_due, (q_db *db, int64_t now, int64_t *at))                     \
    X(int, reclaim, (q_db *db, int64_t now, int64_t *n))                       \
    X(int, steps_get,                                                          \
      (q_db *db, int64_t job_id, struct q_step * *out, size_t *n))             \
    X(int, step_set,                                                           \
      (q_db *db, int64_t job_id, const char *worker, int index,                \
       enum q_step_state state, const char *tier, const char *output,          \
       int64_t add_tokens))                                                    \
    X(int, attempt_begin,                                                      \
      (q_db *db, const struct q_attempt_start *a, int64_t *id, int *attempt))  \
    X(int, attempt_finish,                                                     \
      (q_db *db, int64_t id, const struct q_attempt_result *r))                \
    X(int, job_cost, (q_db *db, int64_t job_id, int64_t *nusd))                \
    X(int, attempts_list,                                                      \
      (q_db *db, int64_t job_id, int step, struct q_attempt **out,             \
       size_t *n))                                                             \
    X(int, tier_load, (q_db *db, const char *tier, struct q_tier_state *out))  \
    X(int, tier_store,                                                         \
      (q_db *db, const char *tier, const struct q_tier_state *st))             \
    X(int, tier_event_add,                                                     \
      (q_db *db, const char *tier, int64_t at, const char *event))             \
    X(int, park_add, (q_db *db, const struct q_park_new *p, int64_t *id))      \
    X(int, park_get, (q_db *db, int64_t id, struct q_park_item *out))          \
    X(int, park_list,                                                          \
      (q_db *db, const struct q_park_filter *f, struct q_park_item **out,      \
       size_t *n))                                                             \
    X(int, park_close, (q_db *db, int64_t id, const struct q_park_close *c))   \
    X(int, job_requeue_parked,                                                 \
      (q_db *db, int64_t job_id, int64_t now, int64_t run_at,                  \
       int64_t deadline_at))                                                   \
    X(int, job_wake, (q_db *db, int64_t job_id, int64_t now))                  \
    X(int, job_end_parked,                                                     \
      (q_db *db, int64_t job_id, enum q_job_state state, const char *error,    \
       int64_t now))                                                           \
    X(int, step_reset,                                                         \
      (q_db *db, int64_t job_id, int index, const struct q_step_reset *r))     \
    X(int, job_retry, (q_db *db, const struct q_retry_new *r, int64_t *id))    \
    X(int, retries_list,                                                       \
      (q_db *db, int64_t job_id, struct q_retry * *out, size_t *n))            \
    X(int, stats_attempts,                                                     \
      (q_db *db, struct q_attempt_group * *out, size_t *n))                    \
    X(int, stats_latency,                                                      \
      (q_db *db, struct q_latency_group * *out, size_t *n))                    \
    X(int, stats_workers,                                                      \
      (q_db *db, struct q_worker_brief * *out, size_t *n))                     \
    X(int, stats_oldest_due, (q_db *db, int64_t now, int64_t *run_at))         \
    X(int, stats_park_open,                                                    \
      (q_db *db, size_t limit, struct q_park_brief * *out, size_t *n))         \
    X(int, sched_get, (q_db *db, const char *name, struct q_sched *out))       \
    X(int, sched_list, (q_db *db, struct q_sched * *out, size_t *n))           \
    X(int, sched_note,                                                         \
      (q_db *db, const char *name, int64_t done, int64_t slot,                 \
       int64_t job_id, int64_t now))                                           \
    X(int, sched_claim,                                                        \
      (q_db *db, const char *name, int64_t slot, int64_t now))                 \
    X(int, sched_pause,                                                        \
      (q_db *db, const char *name, bool paused, int64_t now))                  \
    X(int, budget_reserve,                                                     \
      (q_db *db, const char *name, const char *window, int64_t limit,          \
       int64_t amount, int64_t now))                                           \
    X(int, budget_settle,                                                      \
      (q_db *db, const char *name, const char *window, int64_t reserved,       \
       int64_t spent, int64_t now))                                            \
    X(int, budgets_list,                                                       \
      (q_db *db, int64_t since, struct q_budget * *out, size_t *n))            \
    X(int, batch_create,                                                       \
      (q_db *db, const char *tier, const char *api, const char *key,           \
       const char *worker, int64_t lease_until, int64_t now, int64_t *id))     \
    X(int, batch_item_add,                                                     \
      (q_db *db, int64_t batch_id, int64_t attempt_id, int64_t job_id,         \
       int step))                                                              \
    X(int, batch_set, (q_db *db, int64_t id, const struct q_batch_set *s))     \
    X(int, batches_open,                                                       \
      (q_db *db, const char *tier, struct q_batch **out, size_t *n))           \
    X(int, batch_items,                                                        \
      (q_db *db, int64_t batch_id, struct q_batch_item * *out, size_t *n))     \
    X(int, batch_of_attempt,                                                   \
      (q_db *db, int64_t attempt_id, int64_t *batch_id))                       \
    X(int, batch_item_settle,                                                  \
      (q_db *db, int64_t attempt_id, int64_t realtime_nusd))                   \
    X(int, report_batches,                                                     \
      (q_db *db, int64_t since, struct q_report_batch * *out, size_t *n))      \
    X(int, operator_add,                                                       \
      (q_db *db, const char *name, const char *role, const char *hash,         \
       int64_t now))                                                           \
    X(int, operator_rotate,                                                    \
      (q_db *db, const char *name, const char *hash, int64_t now))             \
    X(int, operator_remove, (q_db *db, const char *name))                      \
    X(int, operators_list, (q_db *db, struct q_operator * *out, size_t *n))    \
    X(int, audit_add, (q_db *db, const struct q_audit_new *a))                 \
    X(int, audit_list,                                                         \
      (q_db *db, const struct q_audit_filter *f, struct q_audit **out,         \
       size_t *n))                                                             \
    X(int, report_jobs,                                                        \
      (q_db *db, int64_t since, int64_t counts[Q_JOB_NSTATES]))                \
    X(int, report_tiers,                                                       \
      (q_db *db, int64_t since, struct q_report_tier * *out, size_t *n))       \
    X(int, report_failures,                                                    \
      (q_db *db, int64_t since, size_t limit, struct q_report_failure * *out,  \
       size_t *n))                                                             \
    X(int, report_failed,                                                      \
      (q_db *db, int64_t since, size_t limit, struct q_job * *out,             \
       size_t *n))                                                             \
    X(int, report_keyed,                                                       \
      (q_db *db, const char *prefix, int64_t since, size_t limit,              \
       struct q_job **out, size_t *n))                                         \
    X(int, report_slowest,                                                     \
      (q_db *db, int64_t since, size_t limit, struct q_job * *out,             \
       size_t *n))                                                             \
    X(int, report_costliest,                                                   \
      (q_db *db, int64_t since, size_t limit, struct q_report_job * *out,      \
       size_t *n))                                                             \
    X(int, job_by_key, (q_db *db, const char *key, struct q_job *out))         \
    /* Many hosts; NULL entries mean "not needed here": clock_sync then        \
     * leaves the offset 0, wake_fd/wake_take return -ENOTSUP. */              \
    OPT(int, clock_sync, (q_db *db))                                           \
    OPT(int, wake_fd, (q_db *db))                                              \
    OPT(int, wake_take, (q_db *db, unsigned *events))                          \
    /* Copying (q_copy), one table at a time, inside the caller's q_tx_*       \
     * transaction on the target: copy_count counts t's rows, copy_clear       \
     * deletes them all, copy_out calls fn with each row in t->order_by        \
     * order (streaming: not all in memory), copy_in inserts one row as        \
     * given (ids included; a backend may batch them), and copy_end, called    \
     * after every table's rows, writes what is batched and, when              \
     * t->id_serial, moves t's generated ids past the largest copied one. */   \
    X(int, copy_count, (q_db *db, const struct q__table *t, int64_t *n))       \
    X(int, copy_clear, (q_db *db, const struct q__table *t))                   \
    X(int, copy_out,                                                           \
      (q_db *db, const struct q__table *t, q__row_fn fn, void *arg))           \
    X(int, copy_in,                                                            \
      (q_db *db, const struct q__table *t, const struct q__value *vals))       \
    X(int, copy_end, (q_db *db, const struct q__table *t))                     \
    /* Backup and retention (queue/prune.c). backup writes the whole store     \
     * as one consistent SQLite database into path, an empty file made         \
     * 0600 (NULL: the store is copied with q_copy instead). prune counts      \
     * what p names into *c, at most limit jobs and bodies, and when run,      \
     * removes exactly that, inside the caller's transaction. */               \
    OPT(int, backup, (q_db *db, const char *path))                             \
    X(int, prune,                                                              \
      (q_db *db, const struct q_prune *p, int64_t limit, bool run,             \
       struct q_prune_counts *c))
/* clang-format on */

/* One entry per call of Q__OPS; q_open/q_open_existing pick the table
 * by the location, and queue/queue.c calls through db->ops. */
#define Q__OP_MEMBER(ret, name, params) ret(*name) params;
struct q__ops {
    Q__OPS(Q__OP_MEMBER, Q__OP_MEMBER)
};
/* For OPT of a backend that lists its own (or leaves them NULL). */
#define Q__OP_NONE(ret, name, params)

/* Every backend's struct q__<name> starts with this, so queue.c can reach
 * the table and the clock offset of any open store. */
struct q_db {
    const struct q__ops *ops;
    int64_t clock_offset_ms;        /* see q_clock_offset */
    bool lock_in_line;              /* see q_lock_in_line */
    struct q_lock_waits lock_waits; /* see q_lock_waits; kept by a backend */
};

/* q__pg_open opens the PostgreSQL database conninfo names (a URL or
 * libpq's keyword form, "" for libpq's PG* environment variables): create
 * true makes and migrates the schema, false opens only a database at this
 * build's version. The errors of q_open and q_open_existing. Caller owns
 * *out. */
int q__pg_open(const char *conninfo, const struct q_open_opts *opts,
               bool create, q_db **out);

/* q__sqlite_open opens the SQLite database at path: create true makes the
 * file (mode 0600) and migrates it to version target (0: the latest);
 * create false opens only an existing database at this build's version.
 * The errors of q_open and q_open_existing. Caller owns *out. */
int q__sqlite_open(const char *path, const struct q_open_opts *opts,
                   bool create, int target, q_db **out);

/* q__version_check says what a store at schema version have is to this
 * build when it opens an existing one: 0 (this version), -ENOENT (none:
 * version 0), -ESTALE (older; logged at info) or -ENOTSUP (newer;
 * logged), where naming the store in the logs. Every backend's open. */
int q__version_check(const char *where, int have);

/* q__claim_check checks q_claim's arguments (-EINVAL) and caps *max to
 * the most one claim takes (256). */
int q__claim_check(const char *worker, int64_t lease_ms, size_t *max);

/* What a job's row is stored with: its key, priority and run_at with the
 * overrides of o (may be NULL) applied, run_at 0 meaning now. Borrowed
 * from j and o. */
struct q__enqueue_row {
    const char *key;
    int64_t prio, run_at;
};
/* q__enqueue_row gives the row of job j enqueued at now with o. */
struct q__enqueue_row q__enqueue_row(const struct q_job_new *j,
                                     const struct q_enqueue_opts *o,
                                     int64_t now);

/* q__tier_underive zeroes what q_tier_load does not read from the store
 * (window_*, in_flight, probe_in_flight): a backend keeping a stored state
 * for its transaction keeps it so, whatever the caller stored. */
void q__tier_underive(struct q_tier_state *st);

/* q__append appends printf-style text at *len of buf (size bytes); false
 * when it does not fit (buf and *len then as they were up to *len). */
bool q__append(char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* q__body_keep is how many bytes of body (len bytes) the ledger keeps when
 * it keeps at most max: cut back to a UTF-8 character boundary. */
size_t q__body_keep(const char *body, size_t len, int64_t max);

/* A tier's usage as stored (one text column of its row): "LAST" (epoch
 * seconds) then, for each second behind LAST with sends counted,
 * " BACK:REQUESTS:TOKENS" (BACK 0-59); "" for none. q__usage_format writes
 * it into buf (size bytes; Q__USAGE_TEXT holds any usage). q__usage_parse
 * reads text (NULL: none) into *u; text it cannot read gives an empty
 * usage (the counts only estimate and display; the buckets pace). */
#define Q__USAGE_TEXT 1600
void q__usage_format(const struct q_tier_usage *u, char *buf, size_t size);
void q__usage_parse(const char *text, struct q_tier_usage *u);

/* A tier's sends in flight as stored (another text column): "PROBE" (ms)
 * then " STEP:COUNT" per second, STEP the seconds after the previous one
 * (the first: after 0); "" for none. q__flight_format and q__flight_parse
 * as above (Q__FLIGHT_TEXT holds any flight); text that is not a flight
 * reads as none in flight (sends then count again as they are made). */
#define Q__FLIGHT_TEXT (32 + 32 * Q_TIER_FLIGHT_MAX)
void q__flight_format(const struct q_tier_flight *f, char *buf, size_t size);
void q__flight_parse(const char *text, struct q_tier_flight *f);

/* Releasing the elements of result arrays: q__array_free calls clean on
 * each of the n elements (elem bytes each) of v, then frees v; NULL is a
 * no-op. The cleaners free one element's owned strings (the public
 * q_*_free functions are these over their arrays). */
typedef void (*q__clean_fn)(void *elem);
void q__array_free(void *v, size_t n, size_t elem, q__clean_fn clean);
void q__job_clean(void *e);
void q__step_clean(void *e);
void q__attempt_clean(void *e);
void q__park_clean(void *e);
void q__retry_clean(void *e);
void q__group_clean(void *e);
void q__latency_clean(void *e);
void q__worker_clean(void *e);
void q__sched_clean(void *e);
/* q__budget_clean frees what a struct q_budget owns (budget.c). */
void q__budget_clean(void *e);
/* q__batch_clean frees what a struct q_batch owns (batch.c). */
void q__batch_clean(void *e);
void q__report_batch_clean(void *e);
/* q__operator_clean and q__audit_clean free what a struct q_operator and
 * a struct q_audit own (operators.c). */
void q__operator_clean(void *e);
void q__audit_clean(void *e);
void q__report_tier_clean(void *e);
void q__report_failure_clean(void *e);
void q__report_job_clean(void *e);

void q__brief_clean(void *e);

#endif

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

/* The ledger's latency as it stands (what the running totals keep; the
 * tests compare them) and the report of q_stats_workers, the same text on
 * every backend (each adds its ORDER BY): latency buckets as in
 * Q_LATENCY_BOUNDS_MS. */
#define Q__LATENCY_SELECT                                                      \
    "SELECT tier, count(*), coalesce(sum(latency_ms), 0)" Q__LE(100)           \
        Q__LE(250) Q__LE(500) Q__LE(1000) Q__LE(2500) Q__LE(5000) Q__LE(10000) \
            Q__LE(30000) Q__LE(60000)                                          \
                Q__LE(120000) " FROM attempts WHERE tier IS NOT NULL AND "     \
                              "finished_at IS NOT NULL"                        \
                              " AND finished_at > 0 AND latency_ms IS NOT "    \
                              "NULL GROUP BY tier"
#define Q__LE(ms) ", sum(CASE WHEN latency_ms <= " #ms " THEN 1 ELSE 0 END)"
#define Q__WORKERS_SELECT                                                      \
    "SELECT lease_owner, count(*), max(lease_until) FROM jobs"                 \
    " WHERE state = 1 AND lease_owner IS NOT NULL GROUP BY lease_owner"
void q__brief_clean(void *e);

/* The ledger's running totals (schema 18, table attempt_totals) of the
 * ENDED attempts (outcome IS NOT NULL): one row per shard, group (tier,
 * outcome, reason, decision; '' stands for NULL, as UNIQUE tells NULLs
 * apart) and latency bucket, kept by triggers on attempts: an insert of
 * an ended row adds its share, an update of the columns below takes the
 * old row's share away if it had ended and adds the new one's if it has,
 * and a delete does nothing, so a prune leaves them as they were. An
 * attempt in flight has no share: the worker's attempt, recorded in
 * flight and finished once, costs one upsert, at its end. A row's share: 1
 * attempt, its tokens as Q__REPORT_TIERS_SELECT counts them, whether it
 * has a cost and the cost, and its latency where Q__LATENCY_SELECT counts
 * it: bucket k (0-9) for the first bound of Q_LATENCY_BOUNDS_MS it is
 * within, 10 past the last, -1 not counted. r is the row ("NEW", "OLD",
 * or the table's name), s "" or "-" (taken away). The same text on every
 * backend; SQLite's shard is always 0, PostgreSQL's the attempt's id
 * modulo 16 (queue/pg/schema.c), and readers sum the shards. */
/* clang-format off */
#define Q__TOT_LAT(r)                                                          \
    r ".tier IS NOT NULL AND " r ".finished_at > 0 AND " r ".latency_ms"       \
    " IS NOT NULL"
#define Q__TOT_LE(r, k, ms) " WHEN " r ".latency_ms <= " #ms " THEN " #k
#define Q__TOT_BUCKET(r)                                                       \
    "CASE WHEN " Q__TOT_LAT(r) " THEN CASE" Q__TOT_LE(r, 0, 100)               \
    Q__TOT_LE(r, 1, 250) Q__TOT_LE(r, 2, 500) Q__TOT_LE(r, 3, 1000)            \
    Q__TOT_LE(r, 4, 2500) Q__TOT_LE(r, 5, 5000) Q__TOT_LE(r, 6, 10000)         \
    Q__TOT_LE(r, 7, 30000) Q__TOT_LE(r, 8, 60000) Q__TOT_LE(r, 9, 120000)      \
    " ELSE 10 END ELSE -1 END"
/* X(column, share) for every sum but attempts (whose share is s "1"). */
#define Q__TOT_SUMS(X, r, s)                                                   \
    X(tokens, s "coalesce(" r ".tokens, " r ".est_tokens)")                    \
    X(priced, "CASE WHEN " r ".cost_nusd IS NOT NULL THEN " s "1 ELSE 0 END")  \
    X(cost_nusd, s "coalesce(" r ".cost_nusd, 0)")                             \
    X(lat_sum_ms, "CASE WHEN " Q__TOT_LAT(r) " THEN " s r ".latency_ms"        \
                  " ELSE 0 END")
#define Q__TOT_COL(c, e) ", " #c
#define Q__TOT_VAL(c, e) ", " e
#define Q__TOT_SUM(c, e) ", sum(" e ")"
#define Q__TOT_ADD(c, e) ", " #c " = attempt_totals." #c " + excluded." #c
#define Q__TOT_BIGINT(c, e) ", " #c " bigint NOT NULL DEFAULT 0"
#define Q__TOT_KEYS(r)                                                         \
    "coalesce(" r ".tier, ''), coalesce(" r ".outcome, ''),"                   \
    " coalesce(" r ".reason, ''), coalesce(" r ".decision, ''), "              \
    Q__TOT_BUCKET(r)
#define Q__TOT_COLS                                                            \
    "shard, tier, outcome, reason, decision, bucket, attempts"                 \
    Q__TOT_SUMS(Q__TOT_COL, "", "")
/* The table, without its ending (SQLite's INTEGER and PostgreSQL's
 * bigint both read "bigint"). */
#define Q__TOTALS_TABLE                                                        \
    "CREATE TABLE attempt_totals (shard bigint NOT NULL DEFAULT 0,"            \
    " tier text NOT NULL, outcome text NOT NULL, reason text NOT NULL,"        \
    " decision text NOT NULL, bucket bigint NOT NULL,"                         \
    " attempts bigint NOT NULL DEFAULT 0"                                      \
    Q__TOT_SUMS(Q__TOT_BIGINT, "", "") ", PRIMARY KEY (shard, tier, outcome,"  \
    " reason, decision, bucket))"
/* Whether row r has ended: only then has it a share. */
#define Q__TOTALS_ENDED(r) r ".outcome IS NOT NULL"
/* Row r's share added to shard sh (an SQL expression), s as above; none
 * if r has not ended (the WHERE also tells SQLite's parser that ON
 * CONFLICT is the upsert's). */
#define Q__TOTALS_UPSERT(sh, r, s)                                             \
    "INSERT INTO attempt_totals (" Q__TOT_COLS ") SELECT " sh ", "             \
    Q__TOT_KEYS(r) ", " s "1" Q__TOT_SUMS(Q__TOT_VAL, r, s) " WHERE "          \
    Q__TOTALS_ENDED(r) " ON CONFLICT"                                          \
    " (shard, tier, outcome, reason, decision, bucket) DO UPDATE SET"          \
    " attempts = attempt_totals.attempts + excluded.attempts"                  \
    Q__TOT_SUMS(Q__TOT_ADD, r, s)
/* The columns whose change moves an attempt's share, and the condition
 * that one did. */
#define Q__TOTALS_WATCHED                                                      \
    "tier, outcome, reason, decision, tokens, est_tokens, cost_nusd,"          \
    " finished_at, latency_ms"
#define Q__TOT_CHANGED(c) "OLD." #c " IS DISTINCT FROM NEW." #c
#define Q__TOTALS_CHANGED                                                      \
    Q__TOT_CHANGED(tier) " OR " Q__TOT_CHANGED(outcome) " OR "                 \
    Q__TOT_CHANGED(reason) " OR " Q__TOT_CHANGED(decision) " OR "              \
    Q__TOT_CHANGED(tokens) " OR " Q__TOT_CHANGED(est_tokens) " OR "            \
    Q__TOT_CHANGED(cost_nusd) " OR " Q__TOT_CHANGED(finished_at) " OR "        \
    Q__TOT_CHANGED(latency_ms)
/* When the insert trigger fires: the row is inserted ended (a copy's). */
#define Q__TOTALS_INSERT_WHEN Q__TOTALS_ENDED("NEW")
/* When the update trigger fires: the old or the new row has ended and a
 * watched column changed (an attempt in flight updated in flight has no
 * share to move). */
#define Q__TOTALS_UPDATE_WHEN                                                  \
    "(" Q__TOTALS_ENDED("OLD") " OR " Q__TOTALS_ENDED("NEW") ") AND ("         \
    Q__TOTALS_CHANGED ")"
/* The migration's backfill: the ended attempts already there, by group. */
#define Q__TOTALS_BACKFILL                                                     \
    "INSERT INTO attempt_totals (" Q__TOT_COLS ") SELECT 0, "                  \
    Q__TOT_KEYS("attempts") ", count(*)"                                       \
    Q__TOT_SUMS(Q__TOT_SUM, "attempts", "") " FROM attempts WHERE "            \
    Q__TOTALS_ENDED("attempts") " GROUP BY " Q__TOT_KEYS("attempts") ";"
/* What q_stats_attempts and q_stats_latency read (each backend adds its
 * ORDER BY): shards and buckets summed, '' read back as NULL, groups
 * that hold no attempt now (one whose attempts an update moved to
 * another) left out, as the ledger's GROUP BY leaves them out; latency
 * from the buckets, cumulative. */
#define Q__TOTALS_GROUPS_SELECT                                                \
    "SELECT nullif(tier, ''), nullif(outcome, ''), nullif(reason, ''),"        \
    " nullif(decision, ''), sum(attempts), sum(tokens), sum(priced),"          \
    " sum(cost_nusd) FROM attempt_totals GROUP BY tier, outcome, reason,"      \
    " decision HAVING sum(attempts) <> 0"
#define Q__TOT_UPTO(k)                                                         \
    ", sum(CASE WHEN bucket BETWEEN 0 AND " #k " THEN attempts ELSE 0 END)"
#define Q__TOT_TIMED "sum(CASE WHEN bucket >= 0 THEN attempts ELSE 0 END)"
#define Q__TOTALS_LATENCY_SELECT                                               \
    "SELECT tier, " Q__TOT_TIMED ", sum(lat_sum_ms)" Q__TOT_UPTO(0)            \
    Q__TOT_UPTO(1) Q__TOT_UPTO(2) Q__TOT_UPTO(3) Q__TOT_UPTO(4) Q__TOT_UPTO(5) \
    Q__TOT_UPTO(6) Q__TOT_UPTO(7) Q__TOT_UPTO(8) Q__TOT_UPTO(9)                \
    " FROM attempt_totals WHERE tier <> '' GROUP BY tier"                      \
    " HAVING " Q__TOT_TIMED " > 0"
/* clang-format on */

/* The reports of q_report_tiers and q_report_failures, the same text on
 * every backend (each adds its ORDER BY, and LIMIT), with p1 the
 * backend's mark for the since parameter. Tiers: per tier, the attempts
 * started at or after since, their tokens (as reported, else estimated)
 * and a count per outcome in the order of struct q_report_tier, in_flight
 * (no outcome), then the breaker openings at or after since (tier_events):
 * the two groupings, one row per tier each, are summed by tier, so a tier
 * with openings and no attempt is listed too (requests 0). Failures: per
 * outcome other than ok and reason (a NULL reason is one group), the
 * finished attempts started at or after since (f.n) and the one of them
 * with the largest id (f.last) as the example, joined back for its
 * columns. */
#define Q__REPORT_TIERS_SELECT(p1)                                             \
    "SELECT tier, sum(n), sum(tok), sum(ok), sum(st), sum(hq), sum(tr),"       \
    " sum(si), sum(rf), sum(se), sum(tm), sum(un), sum(fl), sum(bo),"          \
    " sum(pc), sum(co) FROM ("                                                 \
    "SELECT tier, count(*) AS n,"                                              \
    " coalesce(sum(coalesce(tokens, est_tokens)), 0) AS tok,"                  \
    " count(CASE WHEN outcome = 'ok' THEN 1 END) AS ok,"                       \
    " count(CASE WHEN outcome = 'soft_throttle' THEN 1 END) AS st,"            \
    " count(CASE WHEN outcome = 'hard_quota' THEN 1 END) AS hq,"               \
    " count(CASE WHEN outcome = 'truncated' THEN 1 END) AS tr,"                \
    " count(CASE WHEN outcome = 'schema_invalid' THEN 1 END) AS si,"           \
    " count(CASE WHEN outcome = 'refused' THEN 1 END) AS rf,"                  \
    " count(CASE WHEN outcome = 'server_error' THEN 1 END) AS se,"             \
    " count(CASE WHEN outcome = 'timeout' THEN 1 END) AS tm,"                  \
    " count(CASE WHEN outcome = 'unknown' THEN 1 END) AS un,"                  \
    " count(CASE WHEN outcome IS NULL THEN 1 END) AS fl, 0 AS bo,"             \
    " count(cost_nusd) AS pc, coalesce(sum(cost_nusd), 0) AS co"               \
    " FROM attempts WHERE started_at >= " p1 " GROUP BY tier"                  \
    " UNION ALL SELECT tier, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, count(*), 0," \
    " 0"                                                                       \
    " FROM tier_events WHERE event = 'breaker_open' AND at >= " p1             \
    " GROUP BY tier) AS r GROUP BY tier"
#define Q__REPORT_FAILURES_SELECT(p1)                                          \
    "SELECT f.outcome, f.reason, f.n, a.job_id, a.step, a.attempt,"            \
    " coalesce(a.status, 0), a.tier, a.body FROM (SELECT outcome, reason,"     \
    " count(*) AS n, max(id) AS last FROM attempts WHERE started_at >= " p1    \
    " AND outcome IS NOT NULL AND outcome <> 'ok' GROUP BY outcome, reason)"   \
    " AS f JOIN attempts AS a ON a.id = f.last"
/* The jobs with a cost since p1, for q_report_costliest (ordered and
 * limited by the backend). */
#define Q__REPORT_COSTLIEST_SELECT(p1)                                         \
    "SELECT j.id, j.name, j.key, c.tok, c.co FROM (SELECT job_id,"             \
    " coalesce(sum(coalesce(tokens, est_tokens)), 0) AS tok,"                  \
    " sum(cost_nusd) AS co FROM attempts WHERE started_at >= " p1              \
    " GROUP BY job_id HAVING count(cost_nusd) > 0) AS c"                       \
    " JOIN jobs AS j ON j.id = c.job_id"

/* A tier's row written whole (ST_TIER_PUT): its columns in the order
 * both backends bind them, and the update of a row that is there. */
#define Q__TIER_PUT_INTO                                                       \
    "INSERT INTO tiers (name, breaker, failures, open_until,"                  \
    " exhausted_until, exhausted_reason, limited_until, allowance_used,"       \
    " allowance_since, config_hash, req_tat, tok_tat, pace, pace_down_at,"     \
    " pace_up_at, learned_rpm, learned_tpm, doubt, usage, flight)"
#define Q__TIER_PUT_SET                                                        \
    " ON CONFLICT (name) DO UPDATE SET"                                        \
    " breaker = excluded.breaker, failures = excluded.failures,"               \
    " open_until = excluded.open_until,"                                       \
    " exhausted_until = excluded.exhausted_until,"                             \
    " exhausted_reason = excluded.exhausted_reason,"                           \
    " limited_until = excluded.limited_until,"                                 \
    " allowance_used = excluded.allowance_used,"                               \
    " allowance_since = excluded.allowance_since,"                             \
    " config_hash = excluded.config_hash, req_tat = excluded.req_tat,"         \
    " tok_tat = excluded.tok_tat, pace = excluded.pace,"                       \
    " pace_down_at = excluded.pace_down_at,"                                   \
    " pace_up_at = excluded.pace_up_at, learned_rpm = excluded.learned_rpm,"   \
    " learned_tpm = excluded.learned_tpm, doubt = excluded.doubt,"             \
    " usage = excluded.usage, flight = excluded.flight"

/* q_prune's statements, the same text on every backend, with p1..p5 the
 * backend's marks for jobs_before, bodies_before, budgets_before, the
 * limit and bodies_from_job. Q__PRUNE_COUNT returns the eight counts of
 * struct q_prune_counts, in its order, of what the four writes after it
 * remove in the same transaction. A finished job: succeeded (2), failed
 * (3) or cancelled (5), with no open park item. A kind whose time is 0
 * is skipped by a constant term, before any row is read. */
/* clang-format off */
#define Q__PRUNE_KEEPS(j)                                                      \
    " NOT EXISTS (SELECT 1 FROM park AS k WHERE k.job_id = " j                 \
    " AND k.state = 'open')"
/* The oldest finished jobs first, through index jobs_finished (its WHERE
 * is this one's state term, word for word, so SQLite can use it): the
 * scan stops at the limit or at the first job changed after p1, and
 * never reads a job that is not finished (one with an open park item is
 * read, and kept by Q__PRUNE_KEEPS). */
#define Q__PRUNE_JOBS(p1, p4)                                                  \
    "SELECT id FROM jobs WHERE " p1 " > 0 AND state IN (2, 3, 5)"              \
    " AND updated_at < " p1 " AND" Q__PRUNE_KEEPS("jobs.id")                   \
    " ORDER BY updated_at, id LIMIT " p4
/* The attempts that still keep a body, in job order from bodies_from_job,
 * through index attempts_body (its WHERE is this one's body term): a step
 * reads only bodies kept, never the jobs whose bodies went before nor
 * the rows' bodies themselves (CROSS JOIN keeps SQLite's order;
 * PostgreSQL plans it as a join). */
#define Q__PRUNE_BODIES(p1, p2, p4, p5)                                        \
    "SELECT a.id AS id, j.id AS job FROM attempts AS a CROSS JOIN jobs AS j"   \
    " WHERE " p2 " > 0 AND a.job_id >= " p5 " AND a.body IS NOT NULL"          \
    " AND j.id = a.job_id AND j.state IN (2, 3, 5)"                            \
    " AND j.updated_at < " p2 " AND j.updated_at >= " p1                       \
    " AND" Q__PRUNE_KEEPS("j.id") " ORDER BY a.job_id LIMIT " p4
#define Q__PRUNE_BUDGETS(p3)                                                   \
    " FROM budgets WHERE updated_at < " p3 " AND NOT EXISTS (SELECT 1 FROM"    \
    " jobs AS s WHERE s.key = 'schedule:' || budgets.win"                      \
    " AND s.state NOT IN (2, 3, 5))"
#define Q__PRUNE_COUNT(p1, p2, p3, p4, p5)                                     \
    "SELECT (SELECT count(*) FROM (" Q__PRUNE_JOBS(p1, p4) ") AS x),"          \
    " (SELECT count(*) FROM steps WHERE job_id IN ("                           \
    Q__PRUNE_JOBS(p1, p4) ")),"                                                \
    " (SELECT count(*) FROM attempts WHERE job_id IN ("                        \
    Q__PRUNE_JOBS(p1, p4) ")),"                                                \
    " (SELECT count(*) FROM park WHERE job_id IN ("                            \
    Q__PRUNE_JOBS(p1, p4) ")),"                                                \
    " (SELECT count(*) FROM (" Q__PRUNE_BODIES(p1, p2, p4, p5) ") AS y),"      \
    " (SELECT coalesce(max(job), 0) FROM ("                                    \
    Q__PRUNE_BODIES(p1, p2, p4, p5) ") AS z),"                                 \
    " (SELECT count(*) FROM tier_events WHERE " p1 " > 0 AND at < " p1 "),"    \
    " (SELECT count(*)" Q__PRUNE_BUDGETS(p3) ")"
#define Q__PRUNE_DELETE_JOBS(p1, p4)                                           \
    "DELETE FROM jobs WHERE id IN (" Q__PRUNE_JOBS(p1, p4) ")"
#define Q__PRUNE_DROP_BODIES(p1, p2, p4, p5)                                   \
    "UPDATE attempts SET body = NULL WHERE id IN (SELECT id FROM ("            \
    Q__PRUNE_BODIES(p1, p2, p4, p5) ") AS w)"
#define Q__PRUNE_DELETE_EVENTS(p1) "DELETE FROM tier_events WHERE at < " p1
#define Q__PRUNE_DELETE_BUDGETS(p3) "DELETE" Q__PRUNE_BUDGETS(p3)
/* clang-format on */

#endif

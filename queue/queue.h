/* queue.h: the storage contract of stepq, neutral to the backend: opening
 * a store, transactions, jobs and leases, step progress, the attempts
 * ledger, and the store's clock. The rest of the contract is in topic
 * headers beside it, each including this one: tiers.h (tier state and
 * budgets), park.h (park items and job retries), report.h, sched.h,
 * audit.h (operators and the audit trail), batch.h and admin.h (copy,
 * backup, retention). queue/ owns storing these; the rules that combine them
 * (running a job, parking and resolving, admission) live above it, in worker/,
 * park/ and worker/tier, written once for every backend.
 *
 * A backend (queue/sqlite/ today; each in its own folder, the only code
 * that includes its client library's header) implements every function
 * here and passes the contract suites (tests/test_queue_contract*.c).
 * Nothing here names an engine: a store is opened by a location string,
 * and errors say what happened, not which engine said it. Every function
 * returns 0 or a negative errno (CONVENTIONS §4):
 *   -EINVAL    bad input (a bad location, a bad argument)
 *   -ENOENT    not found, or nothing to claim
 *   -EBUSY     the job is leased by another worker (or the lease was lost)
 *   -EALREADY  the row is not in the state the call needs (wrong state)
 *   -EAGAIN    busy: other writers held the store for the whole lock
 *              wait; nothing was changed, try again later
 *   -EIO       the store failed (logged where it happened)
 * Out-params are untouched on failure. Times are milliseconds since the
 * Unix epoch and always come in as arguments: no call reads the clock.
 *
 * Group commit: q_tx_begin()/q_tx_commit() wrap any number of calls in one
 * write transaction; each call outside one commits on its own.
 *
 * Writes inside a transaction may be sent later (PostgreSQL sends them
 * with the transaction's next statement, at the latest its commit, so
 * that a loop turn is not one round trip per write): calls marked
 * "deferred" below then return 0 once queued. What the transaction reads
 * next sees them; a deferred write that fails makes q_tx_commit fail,
 * and nothing of the transaction is kept. A deferred call's "found
 * nothing" answer (-EBUSY, -EALREADY, -ENOENT: the statement changed
 * nothing) is logged by the backend instead of returned, and the
 * transaction goes on; callers that must know make the call outside a
 * transaction.
 */
#ifndef STEPQ_QUEUE_QUEUE_H
#define STEPQ_QUEUE_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/defs.h"

typedef struct q_db q_db;

/* ---- opening --------------------------------------------------------- */

struct q_open_opts {
    bool durable;     /* SQLite: each commit survives power loss, not only a
                         crash of the process (slower) */
    int lock_wait_ms; /* how long a call waits for other writers
                         before -EAGAIN; 0: 5000 */
    int64_t keep_body_bytes; /* raw bodies kept in the ledger; 65536 */
    int answer_wait_ms;      /* PostgreSQL: how long to wait for the server's
                                answer before the connection counts as lost (a
                                server that hangs); 0: no bound */
};

/* A location names the store: "sqlite:PATH" or a plain PATH is a SQLite
 * file; any other "scheme://..." is a backend this build may not have
 * (-EPROTONOSUPPORT, logged), PostgreSQL's included in a build without it
 * (STEPQ_WITH_PG=OFF). */

/* q_location_kinds names the locations this build opens, for messages:
 * "a file path, sqlite:PATH or a postgresql:// URL", or "a file path or
 * sqlite:PATH" without PostgreSQL. Static storage. */
const char *q_location_kinds(void);

/* q_open opens the store at location, creating it (a SQLite file mode
 * 0600) and migrating its schema if needed: what `stepq init` does (and
 * the demo and tests, on their own fresh stores). opts may be NULL.
 * Returns 0, -EINVAL (an empty location), -EPROTONOSUPPORT, -EIO (cannot
 * open or migrate; logged), -EAGAIN or -ENOTSUP (made by a newer stepq).
 * Caller owns *out; q_close() it. */
STEPQ_MUST_CHECK int q_open(const char *location,
                            const struct q_open_opts *opts, q_db **out);
/* q_open_existing opens the store at location only if it already holds a
 * stepq database at this build's schema version; it creates and migrates
 * nothing (for SQLite: no file, no -wal or -shm). Every command but
 * `stepq init` opens this way. Returns 0, -ENOENT (no stepq database
 * there: nothing, an empty file, or schema version 0), -ESTALE (an older
 * schema: `stepq init` migrates it), -ENOTSUP (made by a newer stepq), or
 * the errors of q_open. Caller owns *out; q_close() it. */
STEPQ_MUST_CHECK int q_open_existing(const char *location,
                                     const struct q_open_opts *opts,
                                     q_db **out);
/* q_close rolls back an open transaction and closes. Returns 0, or -EIO
 * when the backend could not close cleanly (for SQLite: a leaked
 * statement). NULL is a no-op. */
int q_close(q_db *db);
/* q_schema_version is the version this build migrates to. */
int q_schema_version(void);
/* q_db_version reads the open database's schema version into *out. */
STEPQ_MUST_CHECK int q_db_version(q_db *db, int *out);

/* ---- transactions (group commit) ------------------------------------- */

/* q_tx_begin starts a write transaction that takes the write lock up
 * front; calls until q_tx_commit join it. Inside one, it opens an inner
 * level (a savepoint): an inner level rolled back undoes only its own
 * work. */
STEPQ_MUST_CHECK int q_tx_begin(q_db *db);
/* q_tx_commit ends the innermost level; the outermost commits. On failure
 * (-EIO, -EAGAIN) the transaction is rolled back. -EINVAL with none open. */
STEPQ_MUST_CHECK int q_tx_commit(q_db *db);
/* q_tx_rollback abandons the innermost level (the whole transaction at
 * the outermost). */
void q_tx_rollback(q_db *db);
/* q_tx_durable asks that the open transaction be on disk, where a power
 * loss or a crash of the machine cannot undo it, by the time its
 * q_tx_commit returns 0; outside a transaction, what is committed so far,
 * before this returns. For a transaction that records a request which
 * must not be sent twice. A store whose every commit already is does
 * nothing (PostgreSQL, which stepq's sessions commit synchronously;
 * SQLite opened durable); otherwise SQLite flushes its write-ahead log
 * after the COMMIT. -EIO: the disk refused the flush (logged); the commit
 * may have happened, but it is not known to be on disk, so nothing it
 * recorded may be sent. After one such failure every later durable
 * commit fails too, until the store is opened again, and q_tx_durable
 * itself returns -EIO at once (the transaction goes on). */
STEPQ_MUST_CHECK int q_tx_durable(q_db *db);

/* ---- read snapshots ------------------------------------------------------ */

/* q_read_begin starts a read snapshot: every read on db until
 * q_read_end sees the store as it was at one moment (at its first read),
 * whatever other processes commit meanwhile, so a job shown, a status or
 * a report made of many reads is one consistent picture. Writers are not
 * held up by it. Snapshots nest (only the outermost counts), and inside a
 * write transaction, which already sees one state, it changes nothing. No
 * q_tx_begin while one is open (-EINVAL). Returns 0, -EIO or -EAGAIN. */
STEPQ_MUST_CHECK int q_read_begin(q_db *db);
/* q_read_end ends the innermost read snapshot (a no-op with none open);
 * an error ending it is logged: what was read stays valid. */
void q_read_end(q_db *db);

/* ---- jobs ------------------------------------------------------------ */

enum q_job_state {
    Q_JOB_QUEUED = 0,
    Q_JOB_RUNNING,
    Q_JOB_SUCCEEDED,
    Q_JOB_FAILED,
    Q_JOB_PARKED,
    Q_JOB_CANCELLED,
    Q_JOB_NSTATES
};

/* q_job_state_name gives the reference's name ("queued"...). */
const char *q_job_state_name(enum q_job_state s);
/* q_job_state_from_name maps a name to a state; -EINVAL if unknown. */
int q_job_state_from_name(const char *name, enum q_job_state *out);

/* Overrides given at enqueue time (CLI flags). */
struct q_enqueue_opts {
    const char *key; /* NULL: the job's own */
    bool has_run_at;
    int64_t run_at; /* ms */
    bool has_priority;
    int64_t priority;
};

struct q_enqueue_result {
    int64_t id;
    bool duplicate; /* the key existed: id is the existing job's */
};

/* A job as the queue stores it: validated above the queue (spec/).
 * Strings are borrowed. */
struct q_job_new {
    const char *name;
    const char *key;    /* NULL: no dedupe key */
    int64_t priority;   /* higher runs first */
    int64_t run_at;     /* ms; 0 = at enqueue time */
    int64_t deadline_s; /* counted from run_at */
    const char *text;   /* the job as JSON text, stored as given */
    const char *input;  /* its input as JSON text, NULL: none */
};

/* A job file's deadline_s when it gives none. */
#define Q_DEADLINE_S_DEFAULT 3600

/* q_enqueue writes n jobs in one transaction (all or none) at time now.
 * A job whose key exists gets the existing id and duplicate set. opts may
 * be NULL; res has n entries. */
STEPQ_MUST_CHECK int q_enqueue(q_db *db, const struct q_job_new *jobs, size_t n,
                               const struct q_enqueue_opts *opts, int64_t now,
                               struct q_enqueue_result *res);

/* A job row. Strings are owned; release with q_job_cleanup(). */
struct q_job {
    int64_t id;
    char *name;
    char *key; /* NULL if none */
    enum q_job_state state;
    int64_t priority;
    int64_t run_at;
    int64_t deadline_at;
    int64_t created_at;
    int64_t updated_at;
    char *lease_owner; /* NULL unless running */
    int64_t lease_until;
    int claims;  /* how often it was leased, this lease included */
    char *spec;  /* the job's JSON text */
    char *error; /* NULL unless failed */
    char *input; /* the job's input as JSON text, NULL: none */
    /* q_claim only (has_steps true): the job's step rows as q_steps_get
     * gives them in the claim's transaction, so that starting a claimed
     * job needs no read of its own. A backend may leave them out (false)
     * for a job whose lease expired: the caller reads them with
     * q_steps_get. */
    bool has_steps;
    struct q_step *steps; /* owned; NULL when there are none */
    size_t nsteps;
};

/* q_job_cleanup frees the strings and steps of job (not job itself). */
void q_job_cleanup(struct q_job *job);
/* q_jobs_free frees n jobs and the array; NULL is a no-op. */
void q_jobs_free(struct q_job *jobs, size_t n);

/* q_job_get loads job id. -ENOENT if there is none. */
STEPQ_MUST_CHECK int q_job_get(q_db *db, int64_t id, struct q_job *out);
/* q_jobs_list lists jobs (state < 0: all) with ids above after (0: from
 * the first), by id, at most limit (0: all): a page, and the next one
 * starts after its last id. Caller owns *out (q_jobs_free). */
STEPQ_MUST_CHECK int q_jobs_list(q_db *db, int state, int64_t after,
                                 size_t limit, struct q_job **out, size_t *n);
/* q_counts fills counts[Q_JOB_NSTATES] and the number of open park items. */
STEPQ_MUST_CHECK int q_counts(q_db *db, int64_t counts[Q_JOB_NSTATES],
                              int64_t *park_open);

/* q_claim leases up to max due jobs to worker until now + lease_ms, in one
 * transaction: highest priority first, then run_at, then id. Jobs whose
 * lease expired are due again. Each job comes with its step rows
 * (has_steps), except perhaps one whose lease expired. Returns 0 with *n >= 1,
 * or -ENOENT when nothing is due. Caller owns *out (q_jobs_free). */
STEPQ_MUST_CHECK int q_claim(q_db *db, const char *worker, int64_t now,
                             int64_t lease_ms, size_t max, struct q_job **out,
                             size_t *n);
/* q_extend moves the lease of a job held by worker to until (heartbeat).
 * -EBUSY when the worker no longer holds it. */
STEPQ_MUST_CHECK int q_extend(q_db *db, int64_t id, const char *worker,
                              int64_t until, int64_t now);
/* q_release gives a held job back to the queue, due at run_at. -EBUSY when
 * the worker no longer holds it. */
STEPQ_MUST_CHECK int q_release(q_db *db, int64_t id, const char *worker,
                               int64_t run_at, int64_t now);
/* q_complete marks a held job succeeded. -EBUSY if not held by worker.
 * Deferred in a transaction (the top of this file). */
STEPQ_MUST_CHECK int q_complete(q_db *db, int64_t id, const char *worker,
                                int64_t now);
/* q_fail marks a held job failed with error (copied). -EBUSY if not held. */
STEPQ_MUST_CHECK int q_fail(q_db *db, int64_t id, const char *worker,
                            const char *error, int64_t now);
/* q_park_job marks a held job parked (waiting for a human). */
STEPQ_MUST_CHECK int q_park_job(q_db *db, int64_t id, const char *worker,
                                int64_t now);
/* q_cancel cancels a queued, running or parked job. -ENOENT unknown id,
 * -EALREADY when it already ended. A running job's worker finds its lease
 * gone at the next heartbeat. */
STEPQ_MUST_CHECK int q_cancel(q_db *db, int64_t id, int64_t now);
/* q_next_due sets *at to the earliest time a job may need a worker: a
 * queued job's run_at, or a running job's lease end (when another worker
 * takes it over if its holder died). -ENOENT when no job is queued or
 * running. now: the caller's time, for backends that need one. */
STEPQ_MUST_CHECK int q_next_due(q_db *db, int64_t now, int64_t *at);
/* q_reclaim returns jobs whose lease expired before now to the queue and
 * sets *n to how many (n may be NULL). */
STEPQ_MUST_CHECK int q_reclaim(q_db *db, int64_t now, int64_t *n);

/* ---- steps ----------------------------------------------------------- */

enum q_step_state {
    Q_STEP_PENDING = 0,
    Q_STEP_RUNNING,
    Q_STEP_SUCCEEDED,
    Q_STEP_FAILED,
    Q_STEP_PARKED,
    Q_STEP_SKIPPED,
    Q_STEP_NSTATES
};

/* q_step_state_name gives the reference's name ("pending"...). */
const char *q_step_state_name(enum q_step_state s);

/* A step's progress. Steps with no row yet are pending. Owned strings. */
struct q_step {
    int index;
    enum q_step_state state;
    char *tier;   /* last tier used, or NULL */
    int attempts; /* sends recorded in the ledger */
    int64_t tokens;
    char *output;    /* committed output, or NULL */
    int reset_after; /* attempts up to this number predate a park retry */
    char *pin_tier;  /* a park retry pinned to this tier, or NULL */
};

/* q_steps_get loads the progress rows of a job, by index. Caller owns
 * *out; free with q_steps_free(). */
STEPQ_MUST_CHECK int q_steps_get(q_db *db, int64_t job_id, struct q_step **out,
                                 size_t *n);
/* q_steps_free frees n steps and the array. */
void q_steps_free(struct q_step *steps, size_t n);
/* q_step_set records a step's state, tier (NULL: keep), output (NULL:
 * keep) and adds add_tokens (which may be negative: the count stays at 0
 * or above), for worker, who must hold the job's lease: a worker that
 * lost it (it expired and another worker claimed the job) changes
 * nothing, -EBUSY. worker NULL: no lease is checked (a parked job's
 * resolution). Deferred in a transaction (the top of this file). */
STEPQ_MUST_CHECK int q_step_set(q_db *db, int64_t job_id, const char *worker,
                                int index, enum q_step_state state,
                                const char *tier, const char *output,
                                int64_t add_tokens);

/* ---- attempts ledger ------------------------------------------------- */

/* What is known before a send. Strings are borrowed. */
struct q_attempt_start {
    int64_t job_id;
    int step;                   /* step index */
    const char *worker;         /* must hold the job's lease */
    const char *tier;           /* NULL for http steps */
    const char *request_sha256; /* hex */
    int64_t est_tokens;         /* charged to the step before sending */
    int64_t started_at;
    /* why this tier and not an earlier one of the step's list (a wall,
     * a wait that would pass the deadline, ...); NULL: the first choice */
    const char *route;
    /* An agent step's (worker/agent*.c): "turn" (a model turn) or "tool"
     * (a tool call); NULL: a plain attempt. A tool call's id, tool name
     * and arguments (JSON text); NULL otherwise. */
    const char *kind;
    const char *call_id;
    const char *tool;
    const char *args;
};

/* What came back. Strings are borrowed; body is capped when stored. */
struct q_attempt_result {
    int status; /* HTTP status, 0 for a transport error */
    const char *outcome;
    const char *reason;
    const char *decision;
    int64_t delay_ms;
    int64_t latency_ms;
    int64_t tokens;   /* reported usage (replaces the estimate) */
    const char *body; /* raw body, or NULL */
    size_t body_len;
    int64_t finished_at;
    /* the answer held a secret of the request, kept as "***" (the output
     * committed from it too) */
    bool masked;
    /* true: the step's token count is left as q_attempt_begin charged it,
     * because the caller adds tokens - est_tokens itself with the
     * q_step_set it makes in the same transaction (one write of the step's
     * row instead of two). */
    bool caller_corrects;
    /* the tier has a price (docs/reference.md "Prices"): cost_nusd is what
     * the attempt cost in nano-dollars (>= 0), estimated (not from a
     * usage the answer reported) when cost_estimated. Not priced: the
     * ledger's cost is NULL. */
    bool priced;
    bool cost_estimated;
    int64_t cost_nusd;
};

/* q_attempt_begin records an attempt before it is sent, numbering it after
 * the step's earlier attempts, and charges est_tokens to the step. Fails
 * -EBUSY when the worker does not hold the job. *attempt gets the number
 * (1 for the first), *id the ledger id for q_attempt_finish(). Deferred
 * in a transaction (not in a nested one): *id and *attempt are then 0
 * when it returns and are
 * written when the store reads the result, at the latest by the time
 * q_tx_commit returns (they must stay valid until then, and mean
 * something only if it returns 0); a lease found lost leaves *id 0:
 * nothing was recorded, and the request must not be sent. */
STEPQ_MUST_CHECK int q_attempt_begin(q_db *db, const struct q_attempt_start *a,
                                     int64_t *id, int *attempt);
/* q_attempt_finish stores the result of attempt id; the step's token count
 * is corrected from the estimate to r->tokens (unless r->caller_corrects).
 * -ENOENT unknown id, -EALREADY if it already has a result. Deferred in a
 * transaction. */
STEPQ_MUST_CHECK int q_attempt_finish(q_db *db, int64_t id,
                                      const struct q_attempt_result *r);

/* One ledger row. Owned strings; NULL where unknown. finished_at 0: the
 * attempt has no result (in flight, or in doubt after a crash). */
struct q_attempt {
    int64_t id;
    int step;
    int attempt;
    char *tier;
    char *request_sha256;
    int64_t started_at;
    int64_t finished_at;
    int status;
    char *outcome;
    char *reason;
    char *decision;
    int64_t delay_ms;
    int64_t latency_ms;
    int64_t tokens;
    char *body;
    bool masked; /* a secret in the answer was kept as "***" */
    char *route; /* q_attempt_start's; NULL: the first choice */
    bool priced; /* the ledger holds a cost (NULL: not priced, 0 cost) */
    bool cost_estimated; /* not from a usage the answer reported */
    int64_t cost_nusd;   /* nano-dollars; 0 when not priced */
    char *kind;          /* q_attempt_start's; NULL: a plain attempt */
    char *call_id;       /* a tool call's, else NULL */
    char *tool;
    char *args;
    int64_t batch_id;        /* the batch it is an item of, 0: none */
    char *batch_provider_id; /* that batch's id at its provider, or NULL */
};

/* q_attempts_list loads every attempt of a job (step < 0) or of one step,
 * in order. Caller owns *out; free with q_attempts_free(). */
STEPQ_MUST_CHECK int q_attempts_list(q_db *db, int64_t job_id, int step,
                                     struct q_attempt **out, size_t *n);
/* q_job_cost sums the cost of every priced attempt of job job_id into
 * *nusd (0 when none has a cost): what the job's max_cost_usd holds,
 * without loading its ledger. */
STEPQ_MUST_CHECK int q_job_cost(q_db *db, int64_t job_id, int64_t *nusd);
/* q_attempts_free frees n attempts and the array. */
void q_attempts_free(struct q_attempt *a, size_t n);

/* ---- many hosts: the store's clock, and waking idle workers ---------- */

/* q_clock_offset is what to add to this host's clock (ms) to get the
 * store's: leases, run_at, windows and walls are measured with one clock
 * when workers on several hosts share a store (hosts' clocks drift).
 * Measured when the store is opened and again by q_clock_sync; 0 for a
 * store on this machine (SQLite). */
int64_t q_clock_offset(const q_db *db);
/* q_lock_in_line tells how a transaction waits for the store's write
 * lock while another holds it: true when the store queues waiters and
 * grants the lock in turn (PostgreSQL's lock manager), false when they
 * poll for it (SQLite's busy handler), so that a process committing
 * transaction after transaction with no pause between them keeps the
 * others out. */
bool q_lock_in_line(const q_db *db);
/* How long this handle waited for locks other processes held on the
 * store, since it was opened: SQLite's file locks (the write lock above
 * all), waited for by the busy wait of q_open_opts.lock_wait_ms. A
 * backend that queues waiters in its server (PostgreSQL) counts none. */
struct q_lock_waits {
    int64_t count;      /* waits begun (each ended: lock taken or ran out) */
    int64_t total_us;   /* time spent in them, microseconds */
    int64_t longest_us; /* the longest one */
    int64_t ran_out;    /* waits that ran out (the call got -EAGAIN) */
};
/* q_lock_waits copies db's figures into *out. */
void q_lock_waits(const q_db *db, struct q_lock_waits *out);
/* q_clock_sync measures the offset again (one round trip; the only call
 * that reads this host's clock). Returns 0 or -EIO (the offset is kept). */
STEPQ_MUST_CHECK int q_clock_sync(q_db *db);

/* What q_wake_take reports: work may be due now. */
enum {
    Q_WAKE_JOBS = 1u << 0,  /* a job became queued (enqueue, release, retry) */
    Q_WAKE_TIERS = 1u << 1, /* a tier opened before its stored wait ended */
};

/* q_wake_fd returns a descriptor that becomes readable when another
 * process tells the store's workers something changed (PostgreSQL's
 * LISTEN/NOTIFY), opening the channel on first use, or -ENOTSUP when the
 * store has none (SQLite: workers find work by its due time), or -EIO
 * (logged). The descriptor is the store's: poll it, never close it; it
 * stays open until q_close, or until the q_wake_fd call after a failed
 * q_wake_take: after a failure, stop polling it, then call q_wake_fd
 * again later (it closes the old one and reconnects). */
int q_wake_fd(q_db *db);
/* q_wake_take reads what arrived on the channel without blocking and ORs
 * Q_WAKE_* bits into *events (0 when nothing did). Returns 0, -ENOTSUP,
 * or -EIO when the channel was lost (see q_wake_fd). */
STEPQ_MUST_CHECK int q_wake_take(q_db *db, unsigned *events);

/* q_location_redact copies location into buf (size bytes, always
 * terminated) with any password in it replaced by "***": what messages
 * print instead of a location. Returns buf. */
char *q_location_redact(const char *location, char *buf, size_t size);

#endif

/* queue.h: the storage contract of stepq, neutral to the backend: jobs
 * and leases, step progress, the attempts ledger, tier state, and park
 * items. queue/ owns storing these; the rules that combine them (running
 * a job, parking and resolving, admission) live above it, in worker/,
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

/* ---- tier state (shared by every worker on the database) ------------ */

enum q_breaker { Q_BREAKER_CLOSED = 0, Q_BREAKER_OPEN, Q_BREAKER_HALF_OPEN };

/* q_breaker_name gives "closed", "open" or "half_open". */
const char *q_breaker_name(enum q_breaker b);

/* A tier's sends of the last minute, per second: slot s % Q_TIER_USAGE_SLOTS
 * holds second s (epoch seconds) while s is within the slots behind
 * last_s. Kept in the tier's row (the worker counts a send into it when
 * it admits it, and corrects it when the answer comes), so counting a
 * window reads no send log. */
#define Q_TIER_USAGE_SLOTS 60
struct q_tier_usage {
    int64_t last_s; /* the newest second counted, 0: none */
    uint32_t requests[Q_TIER_USAGE_SLOTS];
    uint32_t tokens[Q_TIER_USAGE_SLOTS];
};

/* A tier's sends not answered yet, by the second they stop counting:
 * count[i] sends expire in second at[i] (epoch seconds, ascending, each
 * count > 0), and a half-open probe is out until probe_until (ms, 0:
 * none). A send whose worker died stops counting when it expires. Kept in
 * the tier's row, so that admitting and answering a send write the row
 * (once per transaction) and no log of sends. A full list counts a send
 * in a later second: longer, never shorter. */
#define Q_TIER_FLIGHT_MAX 96
struct q_tier_flight {
    int n;
    int64_t probe_until;
    int64_t at[Q_TIER_FLIGHT_MAX];
    uint32_t count[Q_TIER_FLIGHT_MAX];
};

/* A tier's stored state, and what is derived from it at a moment. A tier
 * with no row yet reads as all zero (breaker closed, nothing used), except
 * pace 1 and doubt true: nothing is known of it yet. */
struct q_tier_state {
    enum q_breaker breaker;
    int failures;              /* consecutive breaker failures */
    int64_t open_until;        /* breaker cooldown end */
    int64_t exhausted_until;   /* a quota wall until then */
    char exhausted_reason[32]; /* "daily_cap", "auth", ... or "" */
    int64_t limited_until;     /* rate-limit headers said 0 remaining */
    int64_t allowance_used;    /* tokens in the current allowance window */
    int64_t allowance_since;   /* start of that window */
    char config_hash[65];      /* the tier config it was last used with */
    /* Pacing (see tier/tier.h): token buckets as GCRA theoretical
     * arrival times in ms (fractional), the pace factor in force, and
     * what the endpoint's headers taught. */
    double req_tat;       /* request bucket */
    double tok_tat;       /* token bucket */
    double pace;          /* (0, 1]: share of the ceiling in force */
    int64_t pace_down_at; /* last multiplicative decrease */
    int64_t pace_up_at;   /* last additive increase */
    int64_t learned_rpm;  /* limit headers: requests per minute, 0 unknown */
    int64_t learned_tpm;  /* limit headers: tokens per minute, 0 unknown */
    bool doubt;           /* one request at a time until one succeeds */
    struct q_tier_usage usage;   /* sends and tokens per second */
    struct q_tier_flight flight; /* sends in flight */
    /* Not stored: derived from usage and flight by the loader above the
     * store (tier/tier.c), 0 when not asked for. */
    int64_t window_requests; /* sends in the last minute */
    int64_t window_tokens;   /* their tokens */
    int64_t in_flight;       /* sends not answered and not expired */
    bool probe_in_flight;    /* a half-open probe is out */
};

/* q_tier_load reads tier's stored state (the derived fields 0). Inside a
 * transaction it is the row as the transaction last stored it. */
STEPQ_MUST_CHECK int q_tier_load(q_db *db, const char *tier,
                                 struct q_tier_state *out);
/* q_tier_store writes the stored fields of st (not the derived ones).
 * Deferred in a transaction. */
STEPQ_MUST_CHECK int q_tier_store(q_db *db, const char *tier,
                                  const struct q_tier_state *st);
/* q_tier_event_add records that event ("breaker_open") happened to tier
 * at at (ms), for the morning report. Deferred in a transaction, as
 * q_tier_store is. -EINVAL for a NULL or empty tier or event. */
STEPQ_MUST_CHECK int q_tier_event_add(q_db *db, const char *tier, int64_t at,
                                      const char *event);

/* ---- park items ------------------------------------------------------ */

/* A new park item. Strings are borrowed. */
struct q_park_new {
    int64_t job_id;
    int step;
    const char *step_name;
    const char *reason; /* the outcome that parked it, or "in_doubt" */
    int attempts;
    const char *request_sha256; /* may be NULL */
    const char *request;        /* the body as sent, may be NULL */
    const char *error;          /* "HTTP 429: daily quota exceeded" */
    const char *tier;           /* NULL for http steps */
    int64_t parked_at;
};

/* q_park_add records a park item and marks the step parked; *id gets its
 * id. (The job itself is parked with q_park_job.) */
STEPQ_MUST_CHECK int q_park_add(q_db *db, const struct q_park_new *p,
                                int64_t *id);

/* A park item as stored. Owned strings; NULL where absent. */
struct q_park_item {
    int64_t id;
    int64_t job_id;
    int step;
    char *step_name;
    char *reason;
    int attempts;
    char *request_sha256;
    char *request;
    char *error;
    char *tier;
    int64_t parked_at;
    bool open;
    char *resolution; /* "retry", "skip", "done", "fail", "cancel" */
    char *resolved_by;
    int64_t resolved_at;
    char *note;
    /* what the operator gave a tool call's item: the approved arguments
     * (JSON text), or the answer to a question; NULL: none */
    char *answer;
};

/* q_park_item_cleanup frees the strings of it. */
void q_park_item_cleanup(struct q_park_item *it);
/* q_park_items_free frees n items and the array. */
void q_park_items_free(struct q_park_item *items, size_t n);
/* q_park_get loads item id; -ENOENT if there is none. */
STEPQ_MUST_CHECK int q_park_get(q_db *db, int64_t id, struct q_park_item *out);

/* Which park items a listing or a bulk resolution takes. */
struct q_park_filter {
    bool all;           /* resolved ones too (listing only) */
    const char *reason; /* NULL: any */
    const char *tier;   /* NULL: any */
    int64_t job_id;     /* 0: any */
    /* > 0: only items resolved at or after this time (listing only; all
     * is then implied). */
    int64_t resolved_since;
};

/* q_park_list lists matching items, open ones first, then by id. Caller
 * owns *out (q_park_items_free). */
STEPQ_MUST_CHECK int q_park_list(q_db *db, const struct q_park_filter *f,
                                 struct q_park_item **out, size_t *n);

/* What closing an item records. Strings are borrowed. */
struct q_park_close {
    const char *resolution; /* "retry", "skip", "done", "fail", "cancel" */
    const char *by;
    const char *note; /* may be NULL */
    int64_t now;
    const char *answer; /* a tool call's approved args or answer, or NULL */
};

/* The primitives a resolution is made of (park/ composes them in one
 * transaction; see park_resolve). */

/* q_park_close marks open item id resolved as c says. -ENOENT for an
 * unknown id, -EALREADY when it is already resolved. */
STEPQ_MUST_CHECK int q_park_close(q_db *db, int64_t id,
                                  const struct q_park_close *c);
/* q_job_requeue_parked makes parked job job_id queued at now, due at
 * run_at (now, or later: an operator's "not before"), with its deadline at
 * deadline_at (an operator's go-ahead gives it its whole deadline_s
 * again). -EALREADY when the job is not parked (cancelled, or already
 * going on). */
STEPQ_MUST_CHECK int q_job_requeue_parked(q_db *db, int64_t job_id, int64_t now,
                                          int64_t run_at, int64_t deadline_at);
/* q_job_wake makes queued job job_id due at now if due later (a foreach
 * job whose element ended). -EALREADY: not queued, or due already. */
STEPQ_MUST_CHECK int q_job_wake(q_db *db, int64_t job_id, int64_t now);
/* q_job_end_parked ends parked job job_id: Q_JOB_FAILED with error
 * (copied), or Q_JOB_SUCCEEDED (error NULL) when an operator finished its
 * last step. -EALREADY when the job is not parked, -EINVAL for another
 * state. */
STEPQ_MUST_CHECK int q_job_end_parked(q_db *db, int64_t job_id,
                                      enum q_job_state state, const char *error,
                                      int64_t now);

/* How a parked step goes on. Strings are borrowed. */
struct q_step_reset {
    enum q_step_state state; /* pending (retry), skipped or succeeded */
    const char *output;      /* succeeded: the step's output (NULL: keep) */
    int reset_after;         /* attempts up to this number no longer count
                                (a retry's fresh start); 0: keep counting */
    const char *pin_tier;    /* the step runs only on this tier, or NULL */
};

/* q_step_reset sets the state, output, reset_after and pin_tier of step
 * index of job job_id (making its row if it has none). */
STEPQ_MUST_CHECK int q_step_reset(q_db *db, int64_t job_id, int index,
                                  const struct q_step_reset *r);

/* ---- job retries: a failed, cancelled or done job run again --------- */

/* A retry as asked for. Strings are borrowed. */
struct q_retry_new {
    int64_t job_id;
    enum q_job_state expect; /* the state the job must still be in */
    int from;                /* steps from this index on run again */
    const char *by;          /* who asked */
    int64_t now;             /* when it is retried */
    int64_t run_at;          /* when it is due again (now or later) */
    int64_t deadline_at;     /* its new deadline */
};

/* q_job_retry queues job r->job_id again, in one level of its own: only
 * while it is in state r->expect (else -EALREADY, and -ENOENT for an
 * unknown id), it becomes queued, due at r->run_at, with its deadline at
 * r->deadline_at, no error and no lease; each step from index r->from on
 * is pending again without output or pinned tier, its attempts so far
 * no longer counted (reset_after: the step's last attempt number; the
 * ledger keeps them, and the step its tokens), and an attempt of theirs
 * left without result ends at r->now with outcome "unknown", reason
 * "retried"; and a retry row records
 * who, when, from which step, and the state and error the job had. *id
 * gets the row's id. Steps before r->from are left as they are. */
STEPQ_MUST_CHECK int q_job_retry(q_db *db, const struct q_retry_new *r,
                                 int64_t *id);

/* A retry as recorded. Owned strings; NULL where absent. */
struct q_retry {
    int64_t id;
    int64_t job_id;
    int from; /* step index */
    char *by;
    int64_t at;
    enum q_job_state prior_state;
    char *prior_error;
};

/* q_retries_list loads the retries of job job_id, oldest first. Caller
 * owns *out; free with q_retries_free(). */
STEPQ_MUST_CHECK int q_retries_list(q_db *db, int64_t job_id,
                                    struct q_retry **out, size_t *n);
/* q_retries_free frees n retries and the array; NULL is a no-op. */
void q_retries_free(struct q_retry *r, size_t n);

/* ---- reports: read-only summaries ------------------------------------ */

/* These run a few times a second at most (the demo, status views). Each
 * returns 0 or -EIO; out-params are untouched on failure. */

/* One group of attempts with the same tier, outcome, reason and decision.
 * Strings are owned; NULL where the ledger has none (tier NULL: an http
 * step; outcome NULL: in flight, or in doubt after a crash). */
struct q_attempt_group {
    char *tier;
    char *outcome;
    char *reason;
    char *decision;
    int64_t count;
};

/* q_stats_attempts counts every attempt in the ledger by tier, outcome,
 * reason and decision, ordered by tier (NULL last), then count, largest
 * first. Caller owns *out; free with q_attempt_groups_free(). *n may be 0
 * (then *out is NULL). */
STEPQ_MUST_CHECK int q_stats_attempts(q_db *db, struct q_attempt_group **out,
                                      size_t *n);
/* q_attempt_groups_free frees n groups and the array; NULL is a no-op. */
void q_attempt_groups_free(struct q_attempt_group *g, size_t n);

/* An open park item, with its job's name. Strings are owned. */
struct q_park_brief {
    int64_t id;
    int64_t job_id;
    char *job_name;
    char *step;   /* the step's name */
    char *reason; /* the outcome that parked it, or "in_doubt" */
    char *error;  /* may be NULL */
    char *tier;   /* NULL for http steps */
    int attempts;
    int64_t parked_at;
};

/* q_stats_park_open lists open park items by id, at most limit (0: all).
 * Caller owns *out; free with q_park_briefs_free(). */
STEPQ_MUST_CHECK int q_stats_park_open(q_db *db, size_t limit,
                                       struct q_park_brief **out, size_t *n);
/* q_park_briefs_free frees n items and the array; NULL is a no-op. */
void q_park_briefs_free(struct q_park_brief *p, size_t n);

/* The upper bounds (ms) of the buckets of q_stats_latency. */
#define Q_LATENCY_NBUCKETS 10
#define Q_LATENCY_BOUNDS_MS                                                    \
    {                                                                          \
        100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000           \
    }

/* The finished attempts of one tier: how many, their latencies summed,
 * and le[i], how many took at most bound i (cumulative). tier owned. */
struct q_latency_group {
    char *tier;
    int64_t count;
    int64_t sum_ms;
    int64_t le[Q_LATENCY_NBUCKETS];
};

/* q_stats_latency groups the ledger's finished attempts of chat steps
 * (those with a tier) by tier, ordered by tier. Caller owns *out; free
 * with q_latency_groups_free(). */
STEPQ_MUST_CHECK int q_stats_latency(q_db *db, struct q_latency_group **out,
                                     size_t *n);
void q_latency_groups_free(struct q_latency_group *g, size_t n);

/* A worker holding running jobs: how many, and the latest end of their
 * leases (each heartbeat moves it on). worker owned. */
struct q_worker_brief {
    char *worker;
    int64_t held;
    int64_t lease_until;
};

/* q_stats_workers lists the workers that hold running jobs, by id.
 * Caller owns *out; free with q_worker_briefs_free(). */
STEPQ_MUST_CHECK int q_stats_workers(q_db *db, struct q_worker_brief **out,
                                     size_t *n);
void q_worker_briefs_free(struct q_worker_brief *w, size_t n);

/* q_stats_oldest_due sets *run_at to the earliest run_at of a queued job
 * due at now (0: none is due). */
STEPQ_MUST_CHECK int q_stats_oldest_due(q_db *db, int64_t now, int64_t *run_at);

/* ---- the morning report: what happened since a time ------------------ */

/* These read what happened at or after since (ms), for `stepq report`;
 * each returns 0 or the storage error, out-params untouched on failure,
 * and *n may be 0 (then *out is NULL). */

/* q_report_jobs counts the jobs created at or after since by their state
 * now (counts[Q_JOB_QUEUED] ...). */
STEPQ_MUST_CHECK int q_report_jobs(q_db *db, int64_t since,
                                   int64_t counts[Q_JOB_NSTATES]);

/* What the attempts of one tier (tier NULL: http steps) started at or
 * after since came to: how many, the tokens they used (as reported, else
 * estimated), and how many ended in each outcome (in_flight: no outcome
 * yet, or none ever after a crash); and how many times its breaker opened
 * at or after since (q_tier_event_add "breaker_open"): a tier with
 * openings and no attempt is listed with requests 0. tier owned. */
struct q_report_tier {
    char *tier;
    int64_t requests, tokens;
    int64_t ok, soft_throttle, hard_quota, truncated, schema_invalid, refused,
        server_error, timeout, unknown, in_flight;
    int64_t breaker_opened;
    /* priced: how many of them have a cost (their tier has a price);
     * cost_nusd: what those cost, in nano-dollars */
    int64_t priced, cost_nusd;
};

/* q_report_tiers lists them by tier (NULL last). Caller owns *out; free
 * with q_report_tiers_free(). */
STEPQ_MUST_CHECK int q_report_tiers(q_db *db, int64_t since,
                                    struct q_report_tier **out, size_t *n);
void q_report_tiers_free(struct q_report_tier *t, size_t n);

/* One reason attempts failed for (every outcome but ok; none while in
 * flight) since a time: how many, and the latest such attempt as the
 * example. Strings owned; tier and body may be NULL. */
struct q_report_failure {
    char *outcome, *reason;
    int64_t count;
    int64_t job_id;
    int step, attempt, status; /* status 0: none (a transport error) */
    char *tier, *body;
};

/* q_report_failures lists at most limit (0: all) by count, largest first
 * (then outcome and reason). Caller owns *out; free with
 * q_report_failures_free(). */
STEPQ_MUST_CHECK int q_report_failures(q_db *db, int64_t since, size_t limit,
                                       struct q_report_failure **out,
                                       size_t *n);
void q_report_failures_free(struct q_report_failure *f, size_t n);

/* One job whose attempts started at or after since have a cost: the
 * tokens and the cost (nano-dollars) of those attempts. Strings owned;
 * key NULL when the job has none. */
struct q_report_job {
    int64_t id;
    char *name;
    char *key;
    int64_t tokens, cost_nusd;
};

/* q_report_costliest lists such jobs, the most costly first (then by id),
 * at most limit (0: all). Caller owns *out; free with
 * q_report_jobs_free(). */
STEPQ_MUST_CHECK int q_report_costliest(q_db *db, int64_t since, size_t limit,
                                        struct q_report_job **out, size_t *n);
void q_report_jobs_free(struct q_report_job *j, size_t n);

/* q_report_slowest lists the jobs that ended (succeeded, failed or
 * cancelled) at or after since, the longest from created_at to
 * updated_at first (then by id), at most limit. Caller owns *out; free
 * with q_jobs_free(). */
/* q_report_failed lists the jobs that failed at or after since (by when
 * they ended), with or without attempts (a job whose step could not be
 * built fails before any), the latest first, at most limit (0: all). spec
 * is NULL. Caller owns *out (q_jobs_free). */
STEPQ_MUST_CHECK int q_report_failed(q_db *db, int64_t since, size_t limit,
                                     struct q_job **out, size_t *n);
/* q_report_keyed lists the jobs created at or after since whose key
 * begins with prefix (not empty), the oldest first (then by id), at most
 * limit (0: all); spec is NULL. Caller owns *out (q_jobs_free). -EINVAL
 * for an empty prefix. */
STEPQ_MUST_CHECK int q_report_keyed(q_db *db, const char *prefix, int64_t since,
                                    size_t limit, struct q_job **out,
                                    size_t *n);
STEPQ_MUST_CHECK int q_report_slowest(q_db *db, int64_t since, size_t limit,
                                      struct q_job **out, size_t *n);

/* q_job_by_key reads the job whose dedupe key is key: 0 with *out set
 * (release with q_job_cleanup), -ENOENT when none has it. */
STEPQ_MUST_CHECK int q_job_by_key(q_db *db, const char *key, struct q_job *out);

/* ---- schedules: what every worker shares of each one ----------------- */

/* The stored state of one schedule of the config (named there; the cron
 * expression, zone and job stay in the config). Times are ms. name is
 * owned; release with q_sched_cleanup(). */
struct q_sched {
    char *name;
    bool paused;
    int64_t since;       /* first seen: its slots before this are not its */
    int64_t done_until;  /* every slot at or before this was fired or passed */
    int64_t last_slot;   /* the latest slot fired (0: none yet) */
    int64_t last_job_id; /* the job of that slot (0: none yet) */
    int64_t updated_at;  /* the latest now it was noted or paused at */
};

/* q_sched_get reads the state of schedule name. Returns 0 with *out set
 * (caller cleans it up), -ENOENT when it has none yet, -EINVAL for a
 * NULL or empty name, or the storage error. */
STEPQ_MUST_CHECK int q_sched_get(q_db *db, const char *name,
                                 struct q_sched *out);
/* q_sched_list reads every schedule's state, by name (bytewise). *n may
 * be 0 (then *out is NULL). Caller owns *out; free with q_scheds_free(). */
STEPQ_MUST_CHECK int q_sched_list(q_db *db, struct q_sched **out, size_t *n);
/* q_sched_note records progress of schedule name at now: creates its row
 * when missing (since and done_until now, not paused); then moves
 * done_until to done unless it is past it already; and when job_id > 0
 * and slot is later than last_slot, sets last_slot and last_job_id. One
 * statement, in a transaction or not; safe to call from many workers at
 * once: state only moves forward. Returns 0, -EINVAL for a NULL or empty
 * name, or the storage error. */
STEPQ_MUST_CHECK int q_sched_note(q_db *db, const char *name, int64_t done,
                                  int64_t slot, int64_t job_id, int64_t now);
/* q_sched_claim takes slot (ms) of schedule name for this caller at now:
 * moves done_until to slot if it was before it (creating the row as
 * q_sched_note does, with done_until slot), in one statement, so that of
 * many workers claiming one slot exactly one gets 0; the others get
 * -EALREADY (done_until was at or past slot already). For work that has
 * no job to dedupe it, such as the daily report hook. Returns 0,
 * -EALREADY, or the storage error. */
STEPQ_MUST_CHECK int q_sched_claim(q_db *db, const char *name, int64_t slot,
                                   int64_t now);
/* q_sched_pause pauses or resumes schedule name at now (creating its row
 * as q_sched_note does). Resuming a paused one moves done_until to now
 * (unless it is past it already), so the slots that passed while it was
 * paused are not caught up; resuming one that is not paused moves
 * nothing (its slots to catch up stay). Returns 0, -EINVAL for a NULL or
 * empty name, or the storage error. */
STEPQ_MUST_CHECK int q_sched_pause(q_db *db, const char *name, bool paused,
                                   int64_t now);
/* q_sched_cleanup frees what s owns; q_scheds_free frees n and the array
 * (NULL is a no-op). */
void q_sched_cleanup(struct q_sched *s);
void q_scheds_free(struct q_sched *s, size_t n);

/* ---- budgets: money shared by every worker ---------------------------- */

/* One window of one budget (a day, a schedule's run: the caller names it),
 * in nano-dollars: spent is what settled sends cost, reserved the worst
 * cases of sends still out. */
struct q_budget {
    char *name;   /* owned */
    char *window; /* owned */
    int64_t spent_nusd;
    int64_t reserved_nusd;
    int64_t updated_at;
};

/* q_budget_reserve adds amount_nusd to the reserved money of budget name's
 * window when spent + reserved + amount stays within limit_nusd, in one
 * statement: of workers reserving at once, none passes the limit. Returns
 * 0; -EDQUOT when it would pass it (nothing changed); -EINVAL for an
 * empty name or window, a negative amount or limit; or the storage
 * error. */
STEPQ_MUST_CHECK int q_budget_reserve(q_db *db, const char *name,
                                      const char *window, int64_t limit_nusd,
                                      int64_t amount_nusd, int64_t now);
/* q_budget_settle takes reserved_nusd off the window's reserved money
 * (never below 0) and adds spent_nusd to its spent money: a send that was
 * answered (spent: what it cost) or never went out (spent 0). Returns 0,
 * -EINVAL as q_budget_reserve, or the storage error. */
STEPQ_MUST_CHECK int q_budget_settle(q_db *db, const char *name,
                                     const char *window, int64_t reserved_nusd,
                                     int64_t spent_nusd, int64_t now);
/* q_budgets_list reads every window written since (updated_at >= since),
 * by name then window. Caller owns *out (NULL when *n is 0); free with
 * q_budgets_free (NULL is a no-op). */
STEPQ_MUST_CHECK int q_budgets_list(q_db *db, int64_t since,
                                    struct q_budget **out, size_t *n);
void q_budgets_free(struct q_budget *b, size_t n);

/* ---- operators and the audit trail ------------------------------------ */

/* A named operator of `stepq serve`: a role and the SHA-256 of its token
 * (64 lowercase hex digits); the token itself is never stored. */
struct q_operator {
    char *name;         /* owned */
    char *role;         /* owned: "viewer", "resolver" or "admin" */
    char *token_sha256; /* owned */
    int64_t created_at;
    int64_t rotated_at; /* the token's last change (created_at at first) */
};

/* q_operator_add stores operator op (strings borrowed) with created_at and
 * rotated_at now. Returns 0, -EEXIST when the name is taken (nothing
 * changed), -EINVAL for an empty name, role or hash, or the storage
 * error. */
STEPQ_MUST_CHECK int q_operator_add(q_db *db, const char *name,
                                    const char *role, const char *token_sha256,
                                    int64_t now);
/* q_operator_rotate replaces operator name's token hash (rotated_at now):
 * the old token matches nothing from this commit on. Returns 0, -ENOENT
 * for an unknown name, -EINVAL as q_operator_add, or the storage error. */
STEPQ_MUST_CHECK int q_operator_rotate(q_db *db, const char *name,
                                       const char *token_sha256, int64_t now);
/* q_operator_remove deletes operator name. Returns 0, -ENOENT, or the
 * storage error. */
STEPQ_MUST_CHECK int q_operator_remove(q_db *db, const char *name);
/* q_operators_list reads every operator, by name. Caller owns *out (NULL
 * when *n is 0); free with q_operators_free (NULL is a no-op). */
STEPQ_MUST_CHECK int q_operators_list(q_db *db, struct q_operator **out,
                                      size_t *n);
void q_operators_free(struct q_operator *o, size_t n);

/* One row of the audit trail as written: a write made through `stepq
 * serve` or the CLI. Strings are borrowed. */
struct q_audit_new {
    int64_t at;         /* ms */
    const char *who;    /* operator name, or the OS user on the CLI */
    const char *action; /* "enqueue", "park.resolve", "job.cancel", ... */
    int64_t job_id;     /* 0: none */
    int64_t park_id;    /* 0: none */
    const char *source; /* the client's address, or "cli" */
    const char *detail; /* a JSON object as text */
};

/* One row of the audit trail as listed; strings owned (q_audits_free). */
struct q_audit {
    int64_t id;     /* set when listed */
    int64_t at;     /* ms */
    char *who;      /* operator name, or the OS user on the CLI */
    char *action;   /* "enqueue", "park.resolve", "job.cancel", ... */
    int64_t job_id; /* 0: none */
    int64_t park_id;
    char *source; /* the client's address, or "cli" */
    char *detail; /* a JSON object as text */
};

/* Which audit rows q_audit_list reads: at or after since; job_id or
 * park_id (0: any) narrow it to one job's or one item's. */
struct q_audit_filter {
    int64_t since;
    int64_t job_id;
    int64_t park_id;
};

/* q_audit_add appends a. Returns 0,
 * -EINVAL for an empty who, action or source, or a NULL detail, or the
 * storage error. Inside a q_tx_* transaction it joins it, so the row
 * goes with the write it records. */
STEPQ_MUST_CHECK int q_audit_add(q_db *db, const struct q_audit_new *a);
/* q_audit_list reads the rows f matches, oldest first (by id). Caller owns
 * *out (q_audits_free; NULL when *n is 0). */
STEPQ_MUST_CHECK int q_audit_list(q_db *db, const struct q_audit_filter *f,
                                  struct q_audit **out, size_t *n);
void q_audits_free(struct q_audit *a, size_t n);

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

/* ---- copying a whole store (`stepq copy`) ----------------------------- */

/* What q_copy copied, by table. */
struct q_copy_counts {
    int64_t jobs, steps, attempts, park, tiers, schedules, tier_events, budgets;
    int64_t retries, operators, audit, batches, batch_items;
};

/* q_copy copies every job, step, attempt, park item, tier state (with
 * its events), schedule state, budget window, job retry, operator, audit
 * row and batch (with its items) of from into to, ids kept, in one transaction
 * of to. Unless force, to must hold no row of any of them (-EEXIST: nothing
 * copied); with force, what to holds is replaced. counts may be NULL. Returns
 * 0, -EEXIST, or the errors of either store (to unchanged). */
STEPQ_MUST_CHECK int q_copy(q_db *from, q_db *to, bool force,
                            struct q_copy_counts *counts);

/* ---- batches (a tier in batch mode: docs/reference.md "Batches") ------ */

/* A batch's life: recorded before it is sent (SUBMITTING, no provider id
 * yet), known to the provider (SUBMITTED), ended at the provider with its
 * results to apply (ENDED), every item's attempt finished (DONE). */
enum q_batch_state {
    Q_BATCH_SUBMITTING = 0,
    Q_BATCH_SUBMITTED = 1,
    Q_BATCH_ENDED = 2,
    Q_BATCH_DONE = 3,
};

struct q_batch {
    int64_t id;
    char *tier;        /* owned */
    char *api;         /* owned: "openai" or "anthropic" */
    char *key;         /* owned: unique; the metadata that names it */
    char *provider_id; /* owned; NULL until the provider's answer is kept */
    int state;         /* enum q_batch_state */
    int64_t items;     /* its items (ledger attempts) */
    char *worker;      /* owned: who holds it (submits and polls) */
    int64_t lease_until;
    int64_t created_at;
    int64_t updated_at;
};

/* One item of a batch: a ledger attempt, finished once its result (or
 * its failure) is applied. */
struct q_batch_item {
    int64_t attempt_id;
    int64_t job_id;
    int step;
    bool finished;
};

/* q_batch_create records a batch of tier (api, key: both borrowed, key
 * unique) in state SUBMITTING, held by worker until lease_until, before
 * anything is sent. *id gets its id. Returns 0; -EINVAL for a missing
 * name; -EEXIST for a key used before; storage errors. */
STEPQ_MUST_CHECK int q_batch_create(q_db *db, const char *tier, const char *api,
                                    const char *key, const char *worker,
                                    int64_t lease_until, int64_t now,
                                    int64_t *id);
/* q_batch_item_add records that attempt attempt_id (of job_id's step)
 * is an item of batch batch_id, and counts it in the batch's items.
 * Returns 0; -ENOENT when there is no such batch; -EEXIST when the
 * attempt is an item already; storage errors. */
STEPQ_MUST_CHECK int q_batch_item_add(q_db *db, int64_t batch_id,
                                      int64_t attempt_id, int64_t job_id,
                                      int step);
/* What q_batch_set changes: the batch's state moves forward only. */
struct q_batch_set {
    const char *worker;      /* the holder: must hold it or its lease ended */
    int64_t lease_until;     /* the holder's new lease */
    int state;               /* enum q_batch_state; never backwards */
    const char *provider_id; /* NULL: unchanged */
    int64_t now;
};
/* q_batch_set takes batch id for s->worker (when it holds it, or its
 * holder's lease has ended) and sets its state, lease and provider id.
 * Returns 0; -EBUSY when another worker holds it, or it is unknown, or
 * its state would go back; -EINVAL for a bad state; storage errors. */
STEPQ_MUST_CHECK int q_batch_set(q_db *db, int64_t id,
                                 const struct q_batch_set *s);
/* q_batches_open lists the batches of tier not DONE, oldest first.
 * Caller owns *out (q_batches_free). Returns 0 or a storage error. */
STEPQ_MUST_CHECK int q_batches_open(q_db *db, const char *tier,
                                    struct q_batch **out, size_t *n);
/* q_batch_items lists batch_id's items by attempt id, each finished when
 * its attempt has a result. Caller frees *out with free(). Returns 0 or a
 * storage error (no items: *n 0). */
STEPQ_MUST_CHECK int q_batch_items(q_db *db, int64_t batch_id,
                                   struct q_batch_item **out, size_t *n);
/* q_batch_of_attempt sets *batch_id to the batch attempt_id is an item
 * of. Returns 0, -ENOENT when it is none's, or a storage error. */
STEPQ_MUST_CHECK int q_batch_of_attempt(q_db *db, int64_t attempt_id,
                                        int64_t *batch_id);
/* q_batch_item_settle keeps what item attempt_id's usage would have cost
 * at its tier's realtime price (the report's savings). Returns 0, -ENOENT
 * when the attempt is no batch's item, or a storage error. */
STEPQ_MUST_CHECK int q_batch_item_settle(q_db *db, int64_t attempt_id,
                                         int64_t realtime_nusd);
/* What a tier's batch items that finished since a time cost, against what
 * the same usage would have cost realtime (items settled with a realtime
 * cost only). */
struct q_report_batch {
    char *tier; /* owned */
    int64_t items;
    int64_t cost_nusd;
    int64_t realtime_nusd;
};
/* q_report_batches lists it per tier, by name. Caller owns *out
 * (q_report_batches_free). Returns 0 or a storage error. */
STEPQ_MUST_CHECK int q_report_batches(q_db *db, int64_t since,
                                      struct q_report_batch **out, size_t *n);
void q_report_batches_free(struct q_report_batch *r, size_t n);
/* q_batches_free frees what q_batches_open returned. NULL is a no-op. */
void q_batches_free(struct q_batch *b, size_t n);

/* ---- backup and retention --------------------------------------------- */

/* What q_backup wrote. */
struct q_backup_info {
    int64_t bytes; /* the size of the file written */
    bool copied;   /* made by q_copy (a store that is not SQLite) */
};

/* q_backup writes a consistent copy of the whole store, as it was at one
 * moment, to the SQLite file dest while other processes go on using the
 * store: into dest.tmp (created 0600; one left by a backup that was
 * killed is replaced), flushed to disk, then renamed to dest; a -wal and
 * -shm beside dest are removed first. A backend with a snapshot copy of
 * its own (SQLite) makes it in one read transaction, which holds up no
 * writer; any other store is copied with q_copy into a new SQLite file,
 * its source read inside q_copy's transaction (which on PostgreSQL holds
 * the store's write lock, so workers wait for it). Unless force, dest
 * must not exist (-EEXIST: nothing written). Not inside a transaction.
 * info may be NULL. Returns 0, -EINVAL (an empty dest, or a transaction
 * open), -EEXIST, or -EIO (logged; no dest.tmp is left, dest is
 * untouched). */
STEPQ_MUST_CHECK int q_backup(q_db *db, const char *dest, bool force,
                              struct q_backup_info *info);

/* What q_prune removes: each time 0 removes nothing of its kind. Jobs
 * "finished" are succeeded, failed or cancelled; a job with an open park
 * item is never touched, nor its rows. */
struct q_prune {
    int64_t jobs_before;     /* finished jobs last changed before this go,
                                with their steps, attempts and park items;
                                so do tier events (breaker openings) */
    int64_t bodies_before;   /* the kept bodies of attempts of finished jobs
                                last changed before this are dropped */
    int64_t budgets_before;  /* budget windows last written before this go,
                                but never one of a schedule run (window
                                NAME:SLOT) whose job schedule:NAME:SLOT is
                                not finished */
    int64_t bodies_from_job; /* bodies only of jobs with this id or a
                                larger one: a caller going in steps passes
                                the last step's bodies_job */
    int64_t limit;           /* most jobs, and most bodies, per call; 0: all */
    bool dry_run;            /* count only: change nothing (limit unused) */
};

/* What q_prune removed, or would remove (dry_run). */
struct q_prune_counts {
    int64_t jobs, steps, attempts, park, bodies;
    int64_t bodies_job; /* the largest id of a job whose bodies went; 0 */
    int64_t tier_events, budgets;
};

/* q_prune removes what p names in one write transaction (or, dry_run,
 * only counts it, in none), and fills *out (may be NULL). A caller
 * pruning a big store in steps calls it with a limit, each time with
 * bodies_from_job the last call's bodies_job, until it returns fewer
 * than limit jobs and bodies, so that no transaction holds the store
 * long and no step reads again what the steps before it pruned. Returns 0,
 * -EINVAL (a negative time or limit), or the storage error (nothing removed).
 */
STEPQ_MUST_CHECK int q_prune(q_db *db, const struct q_prune *p,
                             struct q_prune_counts *out);
/* The longest window of a budget of time (a month: 30 days), plus a day:
 * a budget window written longer ago than this has ended. */
#define Q_BUDGET_WINDOW_MAX_MS (31LL * 24 * 3600 * 1000)
/* q_prune_plan fills *p for keeping finished jobs with their rows for
 * jobs_ms and the bodies of their attempts for bodies_ms at now, 0
 * meaning "keep": the budget windows go with the jobs, but not before
 * the longest window has ended. limit and dry_run are left 0. */
void q_prune_plan(int64_t jobs_ms, int64_t bodies_ms, int64_t now,
                  struct q_prune *p);

#endif

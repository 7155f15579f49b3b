/* park.h: park/ owns parking: parking a step (the park item and the
 * job's parked state written together, and the on_park hook told of it),
 * resolution (an operator's retry, skip, done or fail of an item: one set
 * of rules for the CLI, an HTTP API and programs), rendering (the
 * reference's JSON of an item), the audit trail every write of the CLI
 * and the API appends to, and the named operators of `stepq serve`.
 *
 * Storage lives in queue/ (q_park_*, q_job_*_parked, q_step_reset); the
 * rules over it live here, written once for every backend.
 */
#ifndef STEPQ_PARK_PARK_H
#define STEPQ_PARK_PARK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "common/config.h"
#include "common/defs.h"
#include "queue/park.h"
#include "queue/queue.h"

/* park_item_json renders it as in the reference's `park list --json`: id,
 * job_id, step, reason, attempts, request_sha256, error, tier, parked_at,
 * state, resolution, resolved_by, note (plus resolved_at), and call and
 * answer (a tool call's item; else null). Caller owns the
 * result (cJSON_Delete). */
cJSON *park_item_json(const struct q_park_item *it);

/* park_step parks a held step: records the item p (q_park_add) and marks
 * the job parked for worker (q_park_job), both under one savepoint inside
 * the caller's transaction, so either both are written or neither is.
 * *id gets the item's id. Returns 0, or the negative errno of the write
 * that failed (-EBUSY: the job is not held by worker; -EIO); on failure
 * the savepoint is rolled back (or was never opened) and the caller's
 * transaction is left as it was. p and worker are borrowed. */
STEPQ_MUST_CHECK int park_step(q_db *db, const struct q_park_new *p,
                               const char *worker, int64_t *id);

/* park_notify tells the on_park hook cmd of item id: loads the item from
 * db, renders it with park_item_json and starts cmd with that JSON on its
 * input, run beside the loop. Call it only after the transaction that parked
 * the item has committed: before, the hook could not find it. cmd NULL:
 * does nothing and returns 0. Returns 0, the error of q_park_get
 * (-ENOENT: no such item), or a negative errno when the hook cannot be
 * started (logged). The hook is killed (SIGKILL) when it runs longer than
 * timeout_ms; its exit status is logged. */
int park_notify(uv_loop_t *loop, q_db *db, const char *cmd, int64_t timeout_ms,
                int64_t id);

/* park_hook_run starts `/bin/sh -c cmd` on loop with json (borrowed,
 * copied) on its standard input, as the on_park hook runs (and the
 * on_report one: name, a static string, says which in the log), and
 * returns at once: the hook is killed (SIGKILL) when it runs longer than
 * timeout_ms, its exit status is logged, and its handles are freed when
 * it ends. Returns 0, or a negative errno when it cannot be started
 * (logged). */
int park_hook_run(uv_loop_t *loop, const char *name, const char *cmd,
                  int64_t timeout_ms, const char *json);

/* park_hooks_kill kills (SIGKILL, with what they started) the hooks still
 * running on loop, whose handles then close as after any exit: a worker
 * that stops calls it when its grace runs out. Every process handle on
 * loop must be a hook's (park_hook_run). */
void park_hooks_kill(uv_loop_t *loop);

/* ---- resolution: what an operator's decision does --------------------- */

/* The four resolutions of a park item. */
/* approve and reject: a tool call's item only (park_tool_check). */
enum park_how {
    PARK_RETRY,
    PARK_SKIP,
    PARK_DONE,
    PARK_FAIL,
    PARK_APPROVE,
    PARK_REJECT
};

/* park_how_name gives "retry", "skip", "done", "fail", "approve" or
 * "reject". */
const char *park_how_name(enum park_how how);
/* park_how_from_name maps one of those names to its value; -EINVAL. */
STEPQ_MUST_CHECK int park_how_from_name(const char *name, enum park_how *out);

/* An operator's decision, as the CLI, an HTTP API or a program gives it.
 * Strings are borrowed. */
struct park_decision {
    enum park_how how;
    const char *tier;   /* retry: the step runs only on this tier; NULL */
    const char *output; /* done: the step's output (NULL: empty) */
    size_t output_len;  /* bytes of output */
    const char *by;     /* who decided; required */
    const char *note;   /* may be NULL */
    int64_t now;
    /* retry: the job is not due before this time (ms; 0: at once), and
     * its deadline_s counts from then */
    int64_t not_before;
    /* retry of an http step: its host's wall (see "Walls of http
     * endpoints") is lifted first, by an operator who knows it ended */
    bool lift_wall;
    /* approve: the tool call's arguments as the operator edited them
     * (JSON object text; NULL: as the model gave them) */
    const char *args;
};

/* park_decision_check applies the rules of a valid decision, the same for
 * every caller: an output goes only with done, a tier only with retry;
 * done and a tier are per item (bulk: a decision for every item a filter
 * matches allows neither); the tier must be one of cfg's (cfg NULL: not
 * checked); the output must be UTF-8 text without NUL bytes; by must not
 * be empty or blank, and by and note must be UTF-8 without control
 * characters (a note may hold newlines and tabs). Returns 0, or -EINVAL with
 * the reason in err (len bytes, terminated; "output goes with done"). */
STEPQ_MUST_CHECK int park_decision_check(const struct park_decision *d,
                                         bool bulk, const struct config *cfg,
                                         char *err, size_t len);

/* park_tool_check checks d against item id when it is a tool call's (an
 * agent step's approval, question or in_doubt): approve and reject go
 * only with such an item, and d->args must be a JSON object that passes
 * the tool's parameters. Returns 0; -EINVAL with the reason in err
 * ("args.label: expected string, got number"); -ENOENT for an unknown
 * id; or a storage error. park_resolve applies the same rules. */
STEPQ_MUST_CHECK int park_tool_check(q_db *db, int64_t id,
                                     const struct park_decision *d, char *err,
                                     size_t len);

/* park_resolve resolves open item id as d says, in one transaction: the
 * item is closed with its resolution, and its parked job goes on: retry
 * queues the step again with a fresh count of attempts (on d->tier only,
 * if set), skip skips it, done records d->output as the step's output,
 * fail fails the job naming the item and who failed it. Returns 0,
 * -ENOENT for an unknown id, -EALREADY when the item is already resolved
 * or its job is no longer parked (exactly one of two racing resolutions
 * wins), -EINVAL for a retry on d->tier of an http step (which has no
 * tiers), or a storage error (-EAGAIN, -EIO). Nothing changes on failure.
 * d should have passed park_decision_check. */
STEPQ_MUST_CHECK int park_resolve(q_db *db, int64_t id,
                                  const struct park_decision *d);
/* park_cancel_job cancels job job_id (q_cancel) and closes its open park
 * items with resolution "cancel", by (may be NULL) and a note, in one
 * transaction; so too the elements of its foreach steps that have not
 * ended (their jobs, "foreach:JOB:..."), and the foreach job of an element
 * is made due. Returns 0, -EINVAL when by is blank or not UTF-8 text
 * without control characters, -ENOENT for an unknown job, -EALREADY when
 * the job has already ended, or a storage error; nothing changes on
 * failure. */
STEPQ_MUST_CHECK int park_cancel_job(q_db *db, int64_t job_id, const char *by,
                                     int64_t now);
/* park_resolve_matching resolves every open item f matches (f->all is
 * ignored) in one transaction, all or none, and sets *n to how many it
 * resolved. Items of a job that an earlier item of the same call already
 * sent on are closed with the same resolution and not counted. */
STEPQ_MUST_CHECK int park_resolve_matching(q_db *db,
                                           const struct q_park_filter *f,
                                           const struct park_decision *d,
                                           int64_t *n);

/* ---- retrying a job: a failed, cancelled or done job run again ------- */

/* A retry as the CLI, an HTTP API or a program asks for it. Strings are
 * borrowed. */
struct park_retry {
    const char *from;        /* the step to run again from; NULL: the first
                                step that did not succeed or get skipped */
    bool force_side_effects; /* send again a side-effecting step that was
                                sent (succeeded, or without an answer) */
    const char *by;          /* who asks; required */
    int64_t now;
    int64_t lease_ms; /* the workers' lease (worker.lease_s): a job
                         cancelled less than this long ago is due only
                         this long after its cancel; 0: at once */
};

/* What a retry did. */
struct park_retried {
    int64_t job_id;
    int from;            /* step index */
    char from_name[256]; /* its name, cut to fit */
    enum q_job_state prior;
    int64_t run_at; /* when it is due */
};

/* park_retry_job queues job job_id again, in one transaction: a failed or
 * cancelled job from r->from (NULL: its first step not done), a succeeded
 * one only from a step it names. Steps before that one keep their state
 * and output (each must have succeeded or been skipped); it and every
 * later step run again, with a fresh count of attempts (the ledger keeps
 * the earlier ones and their cost; max_total_tokens and max_cost_usd
 * still count them). The job is due at r->now, or, cancelled less than
 * r->lease_ms ago, that long after its cancel (a worker that held it
 * drops it within a lease; it must not find it queued again before),
 * and gets its whole deadline_s again from then. A side-effecting step from
 * r->from on that was sent (it succeeded, or, without an idempotency key, its
 * last attempt has no known answer) is not sent again unless
 * r->force_side_effects. The retry is recorded with r->by and the time
 * (q_job_retry). Returns 0 with *out set; -ENOENT: no such job; -EALREADY: the
 * job is queued, running or parked, succeeded without r->from, or a
 * side-effecting step was sent; -EINVAL: r->by blank or not plain text,
 * no step named r->from, or one after a step that has not succeeded; the
 * reason is in err (len bytes) for these three; or a storage error.
 * Nothing changes on failure; of two racing retries exactly one wins
 * (the other: -EALREADY). */
STEPQ_MUST_CHECK int park_retry_job(q_db *db, int64_t job_id,
                                    const struct park_retry *r,
                                    struct park_retried *out, char *err,
                                    size_t len);

/* park_retried_json renders what a retry did as `jobs retry --json`:
 * {"id", "state": "queued", "from", "by", "run_at"} (by borrowed).
 * Caller owns the result. */
cJSON *park_retried_json(const struct park_retried *r, const char *by);

/* ---- the audit trail ------------------------------------------------- */

/* One write to record. Strings and detail are borrowed. */
struct park_audit {
    const char *who;     /* the operator's name; on the CLI, the OS user */
    const char *action;  /* "enqueue", "park.resolve", "job.cancel",
                            "job.retry", "operator.add", ... */
    int64_t job_id;      /* the job written (0: none) */
    int64_t park_id;     /* the park item written (0: none) */
    const char *source;  /* "cli", or the API client's address */
    const cJSON *detail; /* a JSON object (NULL: {}), kept short */
    int64_t now;         /* the store's clock, ms */
};

/* park_audit appends a to the store's audit trail (q_audit_add). Call it
 * inside the transaction of the write it records, after that write
 * succeeded, so the two are kept or lost together: park_audited does
 * that. Returns 0, -EINVAL (an empty who, action or source, a detail
 * that is not an object), or the storage error. */
STEPQ_MUST_CHECK int park_audit(q_db *db, const struct park_audit *a);

/* park_audited ends the transaction of a write, begun with q_tx_begin,
 * whose result is rc: with rc 0 it appends a (park_audit) and commits,
 * else it rolls back. Returns rc, or the audit's or the commit's error.
 * A write that opens its own transaction (park_resolve) nests inside:
 *
 *     if ((rc = q_tx_begin(db)) == 0)
 *         rc = park_audited(db, the_write(db, ...), &a);
 */
STEPQ_MUST_CHECK int park_audited(q_db *db, int rc, const struct park_audit *a);

/* The writes of the CLI and the API with their audit rows, each in one
 * transaction (by gives who, source and now; action, ids and detail are
 * set here). Results and errors are those of park_resolve,
 * park_resolve_matching and park_cancel_job, and nothing is written on
 * failure. park_resolve_audited records the item and its job,
 * "park.resolve", with the decision (resolution, by, note, tier) as
 * detail; park_resolve_matching_audited "park.resolve_all" with the
 * filter and how many were resolved; park_cancel_job_audited
 * "job.cancel". */
STEPQ_MUST_CHECK int park_resolve_audited(q_db *db, int64_t id,
                                          const struct park_decision *d,
                                          const struct park_audit *by);
STEPQ_MUST_CHECK int
park_resolve_matching_audited(q_db *db, const struct q_park_filter *f,
                              const struct park_decision *d, int64_t *n,
                              const struct park_audit *by);
STEPQ_MUST_CHECK int park_cancel_job_audited(q_db *db, int64_t job_id,
                                             const char *by_name,
                                             const struct park_audit *by);
/* park_retry_job_audited is park_retry_job with its audit row
 * ("job.retry": the job; by, from and force_side_effects in the detail)
 * in one transaction; its results and errors. */
STEPQ_MUST_CHECK int park_retry_job_audited(q_db *db, int64_t job_id,
                                            const struct park_retry *r,
                                            struct park_retried *out, char *err,
                                            size_t len,
                                            const struct park_audit *by);
/* park_audit_enqueued appends the audit row of an enqueue whose n results
 * are res ("enqueue": the job's id for one job, how many and how many new
 * in the detail), inside the enqueue's open transaction (before
 * spec_store_end commits it). Returns park_audit's result. */
STEPQ_MUST_CHECK int park_audit_enqueued(q_db *db,
                                         const struct q_enqueue_result *res,
                                         size_t n, const struct park_audit *by);

/* ---- named operators of `stepq serve` --------------------------------- */

/* Roles, each allowing what the one before it does: viewer reads
 * (GET), resolver also resolves park items and cancels or retries jobs,
 * admin also enqueues and changes budgets and operators. */
enum park_role { PARK_ROLE_VIEWER, PARK_ROLE_RESOLVER, PARK_ROLE_ADMIN };

/* park_role_name gives "viewer", "resolver" or "admin". */
const char *park_role_name(enum park_role role);
/* park_role_from_name maps one of those names to its value; -EINVAL. */
STEPQ_MUST_CHECK int park_role_from_name(const char *name, enum park_role *out);

/* A token: "stepq_" and 64 hex digits of 32 random bytes. */
#define PARK_TOKEN_PREFIX "stepq_"
#define PARK_TOKEN_SIZE   (sizeof(PARK_TOKEN_PREFIX) - 1 + 64 + 1)

/* park_token_new writes a new token into out (libcrypto's RAND_bytes).
 * Returns 0 or -EIO (no randomness: out untouched). */
STEPQ_MUST_CHECK int park_token_new(char out[PARK_TOKEN_SIZE]);
/* park_token_hash writes the SHA-256 of token (len bytes) as 64 lowercase
 * hex digits and a NUL into out: what the store keeps. */
void park_token_hash(const char *token, size_t len, char out[65]);

/* park_operator_name_check: 1 to 64 letters, digits, '.', '_', '@', '-'.
 * Returns 0, or -EINVAL with the reason in err (len bytes). */
STEPQ_MUST_CHECK int park_operator_name_check(const char *name, char *err,
                                              size_t len);

/* Who made a request: a named operator and its role. */
struct park_caller {
    char name[72];
    enum park_role role;
};

/* park_operator_find tells whose token (len bytes) is: hashes it and
 * compares the hash with every stored one in constant time. *nops gets
 * how many operators there are (set on -ENOENT too: 0 means the store
 * has none). Returns 0 with *who set, -ENOENT when it is no operator's,
 * or the storage error. */
STEPQ_MUST_CHECK int park_operator_find(q_db *db, const char *token, size_t len,
                                        struct park_caller *who, size_t *nops);

/* park_operator_add makes operator name with role and a new token,
 * written into token, and its audit row (by: who, source and now; its
 * action and detail are set here), in one transaction. Print the token
 * once: only its hash is kept. Returns 0, -EEXIST (name taken), -EIO,
 * or the storage error; nothing is written on failure. */
STEPQ_MUST_CHECK int park_operator_add(q_db *db, const char *name,
                                       enum park_role role,
                                       const struct park_audit *by,
                                       char token[PARK_TOKEN_SIZE]);
/* park_operator_rotate gives operator name a new token (into token): the
 * old one is refused from the commit on. Audited as park_operator_add.
 * Returns 0, -ENOENT, -EIO, or the storage error. */
STEPQ_MUST_CHECK int park_operator_rotate(q_db *db, const char *name,
                                          const struct park_audit *by,
                                          char token[PARK_TOKEN_SIZE]);
/* park_operator_remove deletes operator name (its token is refused from
 * the commit on), audited as park_operator_add. Returns 0, -ENOENT, or
 * the storage error. */
STEPQ_MUST_CHECK int park_operator_remove(q_db *db, const char *name,
                                          const struct park_audit *by);

#endif

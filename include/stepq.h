/* stepq.h: the public C API of libstepq, for programs that enqueue jobs,
 * follow them, read their output and cancel them.
 *
 *     stepq *q;
 *     char err[256], state[16], *out;
 *     if (stepq_open("stepq.db", &q, err, sizeof(err)) != 0) ...
 *     int64_t id; bool dup;
 *     rc = stepq_enqueue(q, job_json, NULL, &id, &dup, err, sizeof(err));
 *     rc = stepq_wait(q, id, 60000, state, sizeof(state), err, sizeof(err));
 *     rc = stepq_job_output(q, id, NULL, &out, err, sizeof(err));
 *     stepq_free(out);
 *     stepq_close(q);
 *
 * Link with `pkg-config --libs stepq` (shared). For libstepq.a (static),
 * `pkg-config --static --libs stepq` also asks for libpq's own static
 * dependencies, which Debian does not package: link `libstepq.a -lpq
 * -lsqlite3 -lcjson -lm` instead (examples/enqueue.c). Either way the
 * library needs libpq, PostgreSQL being one of the stores it opens, and
 * defines no global symbol but the stepq_* functions below: a program may
 * have its own xmalloc, log_write or anything else without clashing with
 * ours.
 *
 * Errors. Every function that can fail returns 0 or a negative errno and
 * leaves its out-parameters untouched on failure. The codes, and what the
 * caller can do about them:
 *   -EINVAL   bad arguments, or a job that is not valid; err holds the
 *             JSON path of the first problem, as `stepq enqueue` prints it.
 *             A step's tiers are not checked against any config here (the
 *             library reads none): a worker whose config lacks them fails
 *             the step, naming them. stepq_open: a location it cannot open
 *             (a file path, sqlite:PATH, or a PostgreSQL URL or keyword
 *             string "host=... dbname=...", as `stepq --db` takes).
 *   -ENOENT   stepq_open: no stepq database at the path (no file, an empty
 *             file, or a database without stepq's tables); create it with
 *             `stepq init`. Nothing was created. A file that is not a
 *             database at all is -EIO. Elsewhere: no such job (or step).
 *   -EALREADY stepq_cancel: the job has already ended.
 *   -ENODATA  stepq_job_output: the step has no output (yet).
 *   -ETIMEDOUT stepq_wait: the job is still queued or running.
 *   -ESTALE   stepq_open: the database is from an older stepq; run `stepq
 *             init` (with this version) to migrate it. Nothing is migrated
 *             behind the back of workers still running the older version.
 *   -ENOTSUP  stepq_open: the database was made by a newer stepq.
 *   -EAGAIN   the database stayed locked by other processes for longer than
 *             the busy timeout (5 s); nothing was written, try again.
 *   -EIO      the database cannot be read or written.
 * err says why, in words, with the detail the store gave where it failed
 * (SQLite's or PostgreSQL's message) in parentheses: the library never
 * writes to standard error. stepq_strerror gives a code's text alone.
 * Nothing is written when a call fails. Only `stepq init` creates or
 * migrates a database; no function here does.
 *
 * Out of memory aborts the process (as the stepq CLI does): the calls
 * never return a half-done result for lack of memory. A handle is for one
 * thread at a time; open one per thread or process, and open it again in
 * a child after fork() (a database connection must not cross a fork).
 * err may be NULL only when errlen is 0.
 */
#ifndef STEPQ_STEPQ_H
#define STEPQ_STEPQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define STEPQ_API __attribute__((visibility("default")))
#else
#define STEPQ_API
#endif

typedef struct stepq stepq;

/* stepq_open opens the stepq database at path, which `stepq init` made.
 * Returns 0, -EINVAL (path or out NULL), -ENOENT (no stepq database
 * there: "no stepq database at PATH (create it with `stepq init`)"),
 * -ESTALE (older schema: run `stepq init`), -ENOTSUP (newer stepq),
 * -EAGAIN or -EIO. On failure *out is untouched and err says why. Caller
 * owns *out; release it with stepq_close(). */
STEPQ_API int stepq_open(const char *path, stepq **out, char *err,
                         size_t errlen);

/* stepq_enqueue validates one job (the JSON text of a job file, as the
 * reference's "Job file") and adds it. key, if not NULL, overrides the job's
 * dedupe key. When a job with that key exists, *id is the existing job's and
 * *duplicate is true (id and duplicate may be NULL). Returns 0, -EINVAL
 * (q or job_json NULL, a key that is empty, longer than 1,024 bytes, a
 * schedule's ("schedule:..."), not UTF-8 or holding control characters, or
 * a job that is not valid),
 * -EAGAIN or -EIO; err says why. */
STEPQ_API int stepq_enqueue(stepq *q, const char *job_json, const char *key,
                            int64_t *id, bool *duplicate, char *err,
                            size_t errlen);

/* stepq_enqueue_input is stepq_enqueue with the job's input: input_json
 * (JSON text of any value, at most 256 KiB as compact JSON; NULL: the
 * job's own "input" field, if any) replaces the job's "input" and is what
 * its {{input.PATH}} templates read (docs/reference.md "Templates"). A
 * template naming a path the input lacks is refused: -EINVAL, err naming
 * the template and its JSON path. Returns as stepq_enqueue. */
STEPQ_API int stepq_enqueue_input(stepq *q, const char *job_json,
                                  const char *input_json, const char *key,
                                  int64_t *id, bool *duplicate, char *err,
                                  size_t errlen);

/* stepq_enqueue_many validates every job of a JSON array (or JSON lines)
 * and adds them in one transaction, all or none. ids and duplicates (may
 * be NULL) receive up to cap results; *n gets the number of jobs. Returns
 * 0, -EINVAL (q or jobs_json NULL, or a job that is not valid: err names
 * its index), -EAGAIN or -EIO; err says why. */
STEPQ_API int stepq_enqueue_many(stepq *q, const char *jobs_json, int64_t *ids,
                                 bool *duplicates, size_t cap, size_t *n,
                                 char *err, size_t errlen);

/* stepq_job_state writes the state of job id ("queued", "running",
 * "succeeded", "failed", "parked", "cancelled") into buf, cut to len - 1
 * bytes. Returns 0, -EINVAL (q or buf NULL, len 0), -ENOENT (no such
 * job), -EAGAIN or -EIO. */
STEPQ_API int stepq_job_state(stepq *q, int64_t id, char *buf, size_t len);

/* stepq_job_output copies the output of the job's step named step (NULL:
 * the output of its last step that has one: the job's result) into *out,
 * which the caller releases with stepq_free(). Returns 0, -EINVAL (q or
 * out NULL), -ENOENT (no such job, or no step of that name), -ENODATA (no
 * output: err names the job's state, a failed job's error with it),
 * -EAGAIN or -EIO. */
STEPQ_API int stepq_job_output(stepq *q, int64_t id, const char *step,
                               char **out, char *err, size_t errlen);

/* stepq_wait waits, for at most timeout_ms (0: looks once), until job id
 * no longer waits for a worker: it succeeded, failed or was cancelled, or
 * it is parked (it waits for a human: `stepq park`). The state it is in
 * then goes into state (may be NULL when len is 0), as stepq_job_state
 * writes it. The call blocks its thread; it reads the job again every 10
 * ms at first, every 500 ms at most. Returns 0, -EINVAL, -ENOENT (no such
 * job), -ETIMEDOUT (still queued or running), -EAGAIN or -EIO. */
STEPQ_API int stepq_wait(stepq *q, int64_t id, int64_t timeout_ms, char *state,
                         size_t len, char *err, size_t errlen);

/* stepq_cancel cancels job id as `stepq jobs cancel` does: a queued,
 * running or parked job becomes cancelled (a running job's worker lets it
 * go at its next heartbeat), its open park items close with resolution
 * "cancel" and resolved_by by, and the audit trail gets a "job.cancel"
 * row from source "lib" by by. by (NULL: none; the audit row says "lib")
 * names who cancels. Returns 0, -EINVAL (q NULL, or by not UTF-8 text
 * without control characters), -ENOENT (no such job), -EALREADY (it has
 * already ended), -EAGAIN or -EIO; nothing is written on failure. */
STEPQ_API int stepq_cancel(stepq *q, int64_t id, const char *by, char *err,
                           size_t errlen);

/* stepq_strerror gives the text of a code the functions here return (0 or
 * a negative errno), as a static string; never NULL. */
STEPQ_API const char *stepq_strerror(int rc);

/* stepq_free releases what a function here allocated (stepq_job_output's
 * *out); NULL is a no-op. */
STEPQ_API void stepq_free(void *p);

/* stepq_close closes the database; NULL is a no-op. */
STEPQ_API void stepq_close(stepq *q);

#ifdef __cplusplus
}
#endif

#endif

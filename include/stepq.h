/* stepq.h: the public C API of libstepq, for programs that enqueue jobs.
 *
 *     stepq *q;
 *     char err[256];
 *     if (stepq_open("stepq.db", &q, err, sizeof(err)) != 0) ...
 *     int64_t id; bool dup;
 *     rc = stepq_enqueue(q, job_json, NULL, &id, &dup, err, sizeof(err));
 *     stepq_close(q);
 *
 * Link with `pkg-config --libs stepq`. Every function returns 0 or a
 * negative errno: -EINVAL for a job that is not valid (err holds the JSON
 * path of the first problem, as `stepq enqueue` prints it), -EIO when the
 * database cannot be read or written, -ENOTSUP when the database was made
 * by a newer stepq. Nothing is written when a call fails. A handle is for
 * one thread at a time; open one per thread or process.
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

/* stepq_open opens (creating, mode 0600) and migrates the database at path.
 * On failure *out is untouched and err says why. Caller owns *out; release
 * it with stepq_close(). */
STEPQ_API int stepq_open(const char *path, stepq **out, char *err,
                         size_t errlen);

/* stepq_enqueue validates one job (the JSON text of a job file, as SPEC's
 * "Job file") and adds it. key, if not NULL, overrides the job's dedupe
 * key. When a job with that key exists, *id is the existing job's and
 * *duplicate is true. */
STEPQ_API int stepq_enqueue(stepq *q, const char *job_json, const char *key,
                            int64_t *id, bool *duplicate, char *err,
                            size_t errlen);

/* stepq_enqueue_many validates every job of a JSON array (or JSON lines)
 * and adds them in one transaction, all or none. ids and duplicates (may
 * be NULL) receive up to cap results; *n gets the number of jobs. */
STEPQ_API int stepq_enqueue_many(stepq *q, const char *jobs_json, int64_t *ids,
                                 bool *duplicates, size_t cap, size_t *n,
                                 char *err, size_t errlen);

/* stepq_job_state writes the state of job id ("queued", "running",
 * "succeeded", "failed", "parked", "cancelled") into buf. -ENOENT if there
 * is no such job. */
STEPQ_API int stepq_job_state(stepq *q, int64_t id, char *buf, size_t len);

/* stepq_close closes the database; NULL is a no-op. */
STEPQ_API void stepq_close(stepq *q);

#ifdef __cplusplus
}
#endif

#endif

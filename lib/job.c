/* job.c: reading a job through libstepq (include/stepq.h): its state, the
 * output of a step, and waiting for it to end. */
#include "include/stepq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/xalloc.h"
#include "lib/internal.h"
#include "queue/queue.h"

int
stepq_job_state(stepq *q, int64_t id, char *buf, size_t len)
{
    struct q_job job = {0};
    int rc;

    lib__begin(NULL, 0);
    if (q == NULL || buf == NULL || len == 0)
        return -EINVAL;
    if ((rc = q_job_get(q->db, id, &job)) != 0)
        return rc;
    snprintf(buf, len, "%s", q_job_state_name(job.state));
    q_job_cleanup(&job);
    return 0;
}

/* step_index finds the index of the step named name in the job's text;
 * -1 when it has none of that name. */
static int
step_index(const struct q_job *job, const char *name)
{
    cJSON *root = cJSON_Parse(job->spec);
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(root, "steps");
    const cJSON *st;
    int i = 0, found = -1;

    cJSON_ArrayForEach(st, steps)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(st, "name");
        if (found < 0 && cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
            found = i;
        i++;
    }
    cJSON_Delete(root);
    return found;
}

/* output_of copies the output of step index (-1: the last step that has
 * one) into *out. -ENODATA when there is none. */
static int
output_of(q_db *db, const struct q_job *job, int index, char **out)
{
    struct q_step *steps = NULL;
    const struct q_step *hit = NULL;
    size_t n = 0;
    int rc = q_steps_get(db, job->id, &steps, &n);

    for (size_t i = 0; rc == 0 && i < n; i++) {
        bool has = steps[i].state == Q_STEP_SUCCEEDED && steps[i].output;
        if (has && (index < 0 || steps[i].index == index))
            hit = &steps[i];
    }
    if (rc == 0 && hit == NULL)
        rc = -ENODATA;
    if (rc == 0)
        *out = xstrdup(hit->output);
    q_steps_free(steps, n);
    return rc;
}

int
stepq_job_output(stepq *q, int64_t id, const char *step, char **out, char *err,
                 size_t errlen)
{
    struct q_job job = {0};
    int index = -1, rc;

    lib__begin(err, errlen);
    if (q == NULL || out == NULL) {
        snprintf(err, errlen, "stepq_job_output: handle and out required");
        return -EINVAL;
    }
    if ((rc = q_job_get(q->db, id, &job)) != 0) {
        if (rc == -ENOENT)
            snprintf(err, errlen, "no job %lld", (long long)id);
        return lib__fail(rc, err, errlen);
    }
    if (step != NULL && (index = step_index(&job, step)) < 0) {
        snprintf(err, errlen, "job %lld has no step %s", (long long)id, step);
        rc = -ENOENT;
    } else if ((rc = output_of(q->db, &job, index, out)) == -ENODATA) {
        /* Why there is none: the job's state, and a failed job's error. */
        snprintf(err, errlen, "job %lld is %s%s%s%s: %s%s", (long long)id,
                 q_job_state_name(job.state), job.error ? " (" : "",
                 job.error ? job.error : "", job.error ? ")" : "",
                 step ? step : "no step has an output",
                 step ? " has no output" : "");
    }
    q_job_cleanup(&job);
    return lib__fail(rc, err, errlen);
}

/* A job is done waiting for when no worker will move it without a human:
 * it ended, or it is parked. */
static bool
settled(enum q_job_state s)
{
    return s != Q_JOB_QUEUED && s != Q_JOB_RUNNING;
}

static void
nap(int64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                          .tv_nsec = (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int
stepq_wait(stepq *q, int64_t id, int64_t timeout_ms, char *state, size_t len,
           char *err, size_t errlen)
{
    int64_t start = clock_mono_ms(), pause = 10;
    struct q_job job = {0};
    int rc;

    lib__begin(err, errlen);
    if (q == NULL || timeout_ms < 0 || (state == NULL && len > 0)) {
        snprintf(err, errlen,
                 "stepq_wait: a handle and a timeout of 0 or "
                 "more are required");
        return -EINVAL;
    }
    for (;;) {
        if ((rc = q_job_get(q->db, id, &job)) != 0) {
            if (rc == -ENOENT)
                snprintf(err, errlen, "no job %lld", (long long)id);
            return lib__fail(rc, err, errlen);
        }
        if (settled(job.state))
            break;
        q_job_cleanup(&job);
        int64_t left = timeout_ms - (clock_mono_ms() - start);
        if (left <= 0) {
            snprintf(err, errlen, "job %lld is still %s after %lld ms",
                     (long long)id, q_job_state_name(job.state),
                     (long long)timeout_ms);
            return -ETIMEDOUT;
        }
        /* The store tells no other process of a change: read again, less
         * often the longer the job takes (10 ms up to 500 ms). */
        nap(pause < left ? pause : left);
        pause = pause * 2 > 500 ? 500 : pause * 2;
    }
    if (len > 0)
        snprintf(state, len, "%s", q_job_state_name(job.state));
    q_job_cleanup(&job);
    return 0;
}

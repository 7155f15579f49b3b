/* retry.c: the rules of `jobs retry` (and POST /v1/jobs/ID/retry): which
 * job may run again, from which step, and which committed side effects
 * stand in the way; the storage is the queue's q_job_retry, called once
 * these rules pass, in the same transaction. */
#include "park/park.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "park/internal.h"
#include "queue/park.h"

static int refuse(int rc, char *err, size_t len, const char *fmt, ...)
    STEPQ_PRINTF(4, 5);

/* Writes the reason into err; returns rc. */
static int
refuse(int rc, char *err, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return rc;
}

/* What the rules read of a job: its stored steps (the spec) and their
 * progress rows and attempts. */
struct job_view {
    const struct q_job *job;
    const cJSON *steps; /* the spec's array, borrowed from the parsed spec */
    int nsteps;
    const struct q_step *rows;
    size_t nrows;
    const struct q_attempt *att;
    size_t natt;
};

static const char *
step_name(const struct job_view *v, int i)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(v->steps, i), "name");

    return cJSON_IsString(n) ? n->valuestring : "?";
}

static const struct q_step *
row_of(const struct job_view *v, int i)
{
    for (size_t k = 0; k < v->nrows; k++) {
        if (v->rows[k].index == i)
            return &v->rows[k];
    }
    return NULL;
}

/* Whether step i is done: succeeded or skipped (its output kept). */
static bool
is_done(const struct job_view *v, int i)
{
    const struct q_step *row = row_of(v, i);

    return row != NULL &&
           (row->state == Q_STEP_SUCCEEDED || row->state == Q_STEP_SKIPPED);
}

/* Why step i's side effect may have happened: it succeeded, or (a step
 * without an idempotency key, whose replay the endpoint cannot dedupe)
 * its last attempt since the step's last fresh start has no known
 * answer: in flight when the job was cancelled, or lost in a crash.
 * NULL: it has no side effects, or none was sent. */
static const char *
sent_effect(const struct job_view *v, int i)
{
    const cJSON *s = cJSON_GetArrayItem(v->steps, i);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(s, "kind");
    const cJSON *fx = cJSON_GetObjectItemCaseSensitive(s, "side_effects");
    const struct q_step *row = row_of(v, i);
    const struct q_attempt *last = NULL;
    bool http = cJSON_IsString(kind) && strcmp(kind->valuestring, "http") == 0;

    if (!(cJSON_IsBool(fx) ? cJSON_IsTrue(fx) : http))
        return NULL;
    if (row != NULL && row->state == Q_STEP_SUCCEEDED)
        return "it succeeded";
    if (cJSON_GetObjectItemCaseSensitive(s, "idempotency_key") != NULL)
        return NULL;
    for (size_t k = 0; k < v->natt; k++) {
        if (v->att[k].step == i)
            last = &v->att[k];
    }
    if (last == NULL || (row != NULL && last->attempt <= row->reset_after))
        return NULL;
    if (last->finished_at == 0 ||
        (last->outcome != NULL && strcmp(last->outcome, "unknown") == 0))
        return "its last attempt was sent and has no known answer";
    return NULL;
}

/* The job's state allows a retry (a succeeded one only from a step). */
static int
check_state(const struct job_view *v, const struct park_retry *r, char *err,
            size_t len)
{
    long long id = (long long)v->job->id;

    switch (v->job->state) {
    case Q_JOB_FAILED:
    case Q_JOB_CANCELLED:
        return 0;
    case Q_JOB_SUCCEEDED:
        if (r->from != NULL)
            return 0;
        return refuse(-EALREADY, err, len,
                      "job %lld succeeded: nothing failed to retry (give "
                      "--from STEP to run it again from a step)",
                      id);
    case Q_JOB_PARKED:
        return refuse(-EALREADY, err, len,
                      "job %lld is parked: resolve its park item instead "
                      "(stepq park resolve)",
                      id);
    default:
        return refuse(-EALREADY, err, len,
                      "job %lld is %s: only a failed, cancelled or succeeded "
                      "job can be retried",
                      id, q_job_state_name(v->job->state));
    }
}

/* Picks the step to run again from into *from. */
static int
pick_from(const struct job_view *v, const char *name, int *from, char *err,
          size_t len)
{
    int first = 0, want = -1;

    while (first < v->nsteps && is_done(v, first))
        first++;
    if (name == NULL) {
        *from = first;
        return 0;
    }
    for (int i = 0; i < v->nsteps && want < 0; i++) {
        if (strcmp(step_name(v, i), name) == 0)
            want = i;
    }
    if (want < 0)
        return refuse(-EINVAL, err, len, "job %lld has no step named %s",
                      (long long)v->job->id, name);
    if (want > first)
        return refuse(-EINVAL, err, len,
                      "step %s comes after step %s, which has not succeeded: "
                      "retry from %s or an earlier step",
                      name, step_name(v, first), step_name(v, first));
    *from = want;
    return 0;
}

/* A side-effecting step from `from` on that was sent stops the retry. */
static int
check_effects(const struct job_view *v, int from, char *err, size_t len)
{
    for (int i = from; i < v->nsteps; i++) {
        const char *why = sent_effect(v, i);
        if (why != NULL)
            return refuse(-EALREADY, err, len,
                          "step %s has side effects and %s: a retry from %s "
                          "would send it again (--force-side-effects sends "
                          "it anyway)",
                          step_name(v, i), why, step_name(v, from));
    }
    return 0;
}

/* The rules, then the write, inside the caller's transaction. */
static int
retry_in(q_db *db, const struct job_view *v, const struct park_retry *r,
         const cJSON *spec, struct park_retried *out, char *err, size_t len)
{
    struct q_retry_new rn = {.job_id = v->job->id,
                             .expect = v->job->state,
                             .by = r->by,
                             .now = r->now,
                             .run_at = r->now};
    int64_t id = 0;
    int rc;

    /* A job cancelled while a worker held it stays in that worker's
     * memory until its next heartbeat finds the lease gone: queued again
     * before that, the same worker could claim it beside its old run. */
    if (v->job->state == Q_JOB_CANCELLED &&
        v->job->updated_at + r->lease_ms > rn.run_at)
        rn.run_at = v->job->updated_at + r->lease_ms;
    rn.deadline_at = park__fresh_deadline(spec, rn.run_at);

    if ((rc = check_state(v, r, err, len)) != 0 ||
        (rc = pick_from(v, r->from, &rn.from, err, len)) != 0)
        return rc;
    if (!r->force_side_effects &&
        (rc = check_effects(v, rn.from, err, len)) != 0)
        return rc;
    if ((rc = q_job_retry(db, &rn, &id)) != 0)
        return rc == -EALREADY
                   ? refuse(rc, err, len, "job %lld was retried meanwhile",
                            (long long)v->job->id)
                   : rc;
    out->job_id = v->job->id;
    out->from = rn.from;
    snprintf(out->from_name, sizeof(out->from_name), "%s",
             rn.from < v->nsteps ? step_name(v, rn.from) : "");
    out->prior = v->job->state;
    out->run_at = rn.run_at;
    return 0;
}

/* Reads the job, its steps and attempts, and retries it. */
static int
load_and_retry(q_db *db, int64_t job_id, const struct park_retry *r,
               struct park_retried *out, char *err, size_t len)
{
    struct q_job job = {0};
    struct job_view v = {.job = &job};
    struct q_step *rows = NULL;
    struct q_attempt *att = NULL;
    cJSON *spec = NULL;
    int rc;

    if ((rc = q_job_get(db, job_id, &job)) != 0)
        return rc == -ENOENT
                   ? refuse(rc, err, len, "no job %lld", (long long)job_id)
                   : rc;
    if ((rc = q_steps_get(db, job_id, &rows, &v.nrows)) != 0 ||
        (rc = q_attempts_list(db, job_id, -1, &att, &v.natt)) != 0)
        goto out;
    spec = job.spec != NULL ? cJSON_Parse(job.spec) : NULL;
    v.steps = cJSON_GetObjectItemCaseSensitive(spec, "steps");
    v.nsteps = cJSON_GetArraySize(v.steps);
    v.rows = rows;
    v.att = att;
    rc = retry_in(db, &v, r, spec, out, err, len);
out:
    cJSON_Delete(spec);
    q_attempts_free(att, v.natt);
    q_steps_free(rows, v.nrows);
    q_job_cleanup(&job);
    return rc;
}

int
park_retry_job(q_db *db, int64_t job_id, const struct park_retry *r,
               struct park_retried *out, char *err, size_t len)
{
    struct park_retried got = {0};
    int rc;

    if (r->by == NULL || r->by[strspn(r->by, " \t")] == '\0' ||
        !json_plain_text(r->by, false))
        return refuse(-EINVAL, err, len,
                      "say who retries it (by): UTF-8 text without control "
                      "characters");
    if ((rc = q_tx_begin(db)) != 0)
        return rc;
    rc = park__tx_end(db, load_and_retry(db, job_id, r, &got, err, len));
    if (rc == 0)
        *out = got;
    return rc;
}

cJSON *
park_retried_json(const struct park_retried *r, const char *by)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddNumberToObject(o, "id", (double)r->job_id);
    cJSON_AddStringToObject(o, "state", q_job_state_name(Q_JOB_QUEUED));
    cJSON_AddStringToObject(o, "from", r->from_name);
    cJSON_AddStringToObject(o, "by", by);
    json_add_time(o, "run_at", r->run_at);
    return o;
}

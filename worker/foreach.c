/* foreach.c: a step run once per element of an array (docs/reference.md
 * "Foreach"). Each element runs as a job of its own, made by spec/ with
 * the step's templates filled from the element and key
 * "foreach:JOB:STEP:K", so that it has its own attempts, park items, tier
 * switches and tool loop, and a worker that died mid-foreach makes none
 * twice (the key dedupes). Entering the step reads its elements back in
 * one query by their keys' prefix, enqueues the next ones up to the
 * step's parallelism in the turn's transaction, and gives the job back to look
 * again; once all have ended, the step's output is their outputs in order, or
 * the job fails naming the first element that failed.
 */
#include "worker/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "queue/park.h"
#include "queue/report.h"
#include "worker/foreach.h"

/* How soon the step looks at its elements again while some run (an
 * element that ends makes it due at once: worker__foreach_ended, and
 * park/resolve.c for an operator's end), and when only parked ones are
 * left: past a drain's horizon, so that `stepq work --drain` ends while
 * they wait for a human. */
#define FOREACH_POLL_MS   5000
#define FOREACH_PARKED_MS 61000

/* What entering the step found of its elements. */
struct tally {
    int live;   /* queued or running */
    int parked; /* waiting for a human */
    int failed;
    char first[1024]; /* why the first one that failed failed */
    bool when_each;   /* the step's "when" reads the element */
};

static void
note_failure(struct tally *t, int k, int64_t id, const char *why)
{
    /* a why cut at first's size still names the element */
    if (t->failed++ == 0 &&
        snprintf(t->first, sizeof(t->first), "element %d (job %lld): %s", k,
                 (long long)id, why) < 0)
        t->first[0] = '\0';
}

/* Makes element k (v->item) a job and enqueues it in the turn. Returns 0,
 * -EINVAL with why in err (it cannot be made), or a storage error. */
static int
spawn(struct run *r, const struct spec_vars *v, int k, char *err, size_t len)
{
    struct worker *w = r->w;
    struct spec_element e = {.job_id = r->job.id,
                             .k = k,
                             .now = worker__now(w),
                             .deadline_at = r->job.deadline_at};
    struct spec_opts o = {.stored = true};
    struct spec_job *child = NULL;
    struct q_enqueue_result res;
    struct q_job_new row;
    char *text = NULL, *key = NULL;
    int rc;

    if ((rc = spec_foreach_element(r->spec, (size_t)r->step, v, &e, &text, &key,
                                   err, len)) != 0 ||
        (rc = spec_parse(text, strlen(text), &o, &child, err, len)) != 0) {
        free(text);
        free(key);
        return -EINVAL;
    }
    spec_job_row(child, &row);
    rc = q_enqueue(w->db, &row, 1, NULL, e.now, &res);
    spec_job_free(child);
    free(text);
    free(key);
    return rc;
}

/* The elements made so far, read in one query by their keys' prefix
 * (without their job texts): els (n entries, by index) point into *jobs
 * (caller frees with q_jobs_free(*jobs, *m)). */
struct element {
    const struct q_job *job; /* NULL: not made */
};

static int
read_elements(struct run *r, int n, struct element *els, struct q_job **jobs,
              size_t *m)
{
    char prefix[96];
    size_t plen;
    int rc;

    plen = (size_t)snprintf(
        prefix, sizeof(prefix),
        SPEC_FOREACH_KEY_PREFIX "%lld:%d:", (long long)r->job.id, r->step);
    if ((rc = q_report_keyed(r->w->db, prefix, r->job.created_at, 0, jobs,
                             m)) != 0)
        return rc;
    for (size_t i = 0; i < *m; i++) {
        long k = strtol((*jobs)[i].key + plen, NULL, 10);
        if (k >= 0 && k < n)
            els[k].job = &(*jobs)[i];
    }
    return 0;
}

/* Element k (v->item, e: its job if made): skipped by the step's "when",
 * made now, or counted in t. *skipped: the "when" was false. Returns 0
 * or a storage error. */
static int
visit(struct run *r, struct spec_vars *v, int k, const struct element *e,
      struct tally *t, bool *skipped)
{
    const struct q_job *j = e->job;
    char why[1024];
    bool holds = true;
    int rc;

    if (t->when_each)
        spec_when_holds(r->spec, (size_t)r->step, v, &holds, why, sizeof(why));
    *skipped = !holds;
    if (!holds)
        return 0;
    if (j == NULL && t->live < cur_spec(r)->foreach_parallelism) {
        if ((rc = spawn(r, v, k, why, sizeof(why))) == -EINVAL)
            note_failure(t, k, 0, why);
        else if (rc != 0)
            return rc;
        else
            t->live++;
    } else if (j == NULL || j->state == Q_JOB_QUEUED ||
               j->state == Q_JOB_RUNNING) {
        t->live++; /* running, or its turn comes */
    } else if (j->state == Q_JOB_PARKED) {
        t->parked++;
    } else if (j->state != Q_JOB_SUCCEEDED) {
        note_failure(t, k, j->id,
                     j->error ? j->error : q_job_state_name(j->state));
    }
    return 0;
}

/* The step's output once every element succeeded or was skipped: their
 * outputs in order (skip[k]: null). Returns 0 with *out (caller frees)
 * or a storage error. */
static int
collect(struct run *r, const struct element *els, const bool *skip, int n,
        char **out)
{
    cJSON *arr = cJSON_CreateArray();
    int rc = 0;

    for (int k = 0; k < n && rc == 0; k++) {
        struct q_step *steps = NULL;
        size_t ns = 0;
        if (skip[k]) {
            cJSON_AddItemToArray(arr, cJSON_CreateNull());
            continue;
        }
        if ((rc = q_steps_get(r->w->db, els[k].job->id, &steps, &ns)) != 0)
            break;
        cJSON_AddItemToArray(arr, spec_foreach_value(ns > 0 && steps[0].output
                                                         ? steps[0].output
                                                         : ""));
        q_steps_free(steps, ns);
    }
    if (rc == 0)
        *out = json_print(arr);
    cJSON_Delete(arr);
    return rc;
}

/* Leaves the step running and gives the job back, due at run_at. */
static void
wait_for_elements(struct run *r, int64_t run_at)
{
    struct worker *w = r->w;

    if (q_step_set(w->db, r->job.id, w->id, r->step, Q_STEP_RUNNING, NULL, NULL,
                   0) != 0 ||
        q_release(w->db, r->job.id, w->id, run_at, worker__now(w)) != 0)
        log_warn("job %lld: lease already gone at release",
                 (long long)r->job.id);
    worker__finish(r, NULL);
}

void
worker__foreach_ended(const struct run *r)
{
    const char *key = r->job.key;
    size_t n = strlen(SPEC_FOREACH_KEY_PREFIX);
    long long job;
    int rc;

    if (key == NULL || strncmp(key, SPEC_FOREACH_KEY_PREFIX, n) != 0 ||
        sscanf(key + n, "%lld:", &job) != 1)
        return;
    /* A hint only: the job looks at its elements on its own too. */
    rc = q_job_wake(r->w->db, job, worker__now(r->w));
    if (rc != 0 && rc != -EALREADY)
        log_warn("job %lld: cannot wake job %lld", (long long)r->job.id, job);
}

/* Fails the job: the array cannot be read, or an element failed. */
static void
fail_step(struct run *r, const char *why, const char *tail)
{
    char msg[1400];

    snprintf(msg, sizeof(msg), "step %s: %s%s", cur_spec(r)->name, why, tail);
    worker__fail_job(r, msg);
}

void
worker__foreach_enter(struct run *r)
{
    struct worker *w = r->w;
    struct spec_vars v;
    struct tally t = {0};
    struct element *els = NULL;
    struct q_job *jobs = NULL;
    size_t m = 0;
    cJSON *items = NULL, *el;
    char err[1024], *output = NULL;
    bool *skip = NULL;
    int n, k = 0, rc;

    spec_vars_init(&v); /* each output parsed once for all the elements */
    v.input = r->spec->input;
    v.outputs = (const char *const *)r->outputs;
    v.skipped = r->skipped;
    if (spec_foreach_items(r->spec, (size_t)r->step, &v, &items, err,
                           sizeof(err)) != 0) {
        spec_vars_cleanup(&v);
        fail_step(r, err, "; nothing sent");
        return;
    }
    n = cJSON_GetArraySize(items);
    els = xcalloc((size_t)n + 1, sizeof(*els));
    skip = xcalloc((size_t)n + 1, sizeof(*skip));
    rc = read_elements(r, n, els, &jobs, &m);
    t.when_each = spec_foreach_when_per_element(r->spec, (size_t)r->step);
    cJSON_ArrayForEach(el, items)
    {
        v.item = el;
        if (rc == 0)
            rc = visit(r, &v, k, &els[k], &t, &skip[k]);
        k++;
    }
    if (rc == 0 && t.live == 0 && t.parked == 0 && t.failed == 0)
        rc = collect(r, els, skip, n, &output);
    cJSON_Delete(items);
    spec_vars_cleanup(&v);
    q_jobs_free(jobs, m);
    free(els);
    free(skip);
    if (rc != 0)
        worker__give_back(r, worker__now(w) + 1000);
    else if (t.live > 0 || t.parked > 0)
        wait_for_elements(r, worker__now(w) + (t.live > 0 ? FOREACH_POLL_MS
                                                          : FOREACH_PARKED_MS));
    else if (t.failed > 0)
        fail_step(r, t.first,
                  t.failed > 1 ? " (and more elements failed)" : "");
    else
        worker__commit_step(r, output, 0);
    free(output);
}

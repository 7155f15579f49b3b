/* foreach.c: a step run once per element of an array (docs/reference.md
 * "Foreach"). Each element runs as a job of its own, made by spec/ with
 * the step's templates filled from the element and key
 * "foreach:JOB:STEP:K", so that it has its own attempts, park items, tier
 * switches and tool loop, and a worker that died mid-foreach makes none
 * twice (the key dedupes). Entering the step reads every element back by
 * its key, enqueues the next ones up to the step's parallelism in the
 * turn's transaction, and gives the job back to look again; once all have
 * ended, the step's output is their outputs in order, or the job fails
 * naming the first element that failed.
 */
#include "worker/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"

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
};

static void
note_failure(struct tally *t, int k, int64_t id, const char *why)
{
    if (t->failed++ == 0)
        snprintf(t->first, sizeof(t->first), "element %d (job %lld): %s", k,
                 (long long)id, why);
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

/* Reads element k's job by its key: its output into *out when it
 * succeeded (caller frees), its state into *state. -ENOENT: not made. */
static int
read_element(struct run *r, int k, enum q_job_state *state, int64_t *id,
             char **out, char **error)
{
    struct q_job job = {0};
    struct q_step *steps = NULL;
    size_t n = 0;
    char key[128];
    int rc;

    snprintf(key, sizeof(key), SPEC_FOREACH_KEY_PREFIX "%lld:%d:%d",
             (long long)r->job.id, r->step, k);
    if ((rc = q_job_by_key(r->w->db, key, &job)) != 0)
        return rc;
    *state = job.state;
    *id = job.id;
    *error = job.error ? xstrdup(job.error) : NULL;
    if (job.state == Q_JOB_SUCCEEDED &&
        (rc = q_steps_get(r->w->db, job.id, &steps, &n)) == 0) {
        *out =
            n > 0 && steps[0].output ? xstrdup(steps[0].output) : xstrdup("");
        q_steps_free(steps, n);
    }
    q_job_cleanup(&job);
    return rc;
}

/* Element k (v->item): skipped by the step's "when", made, or read back
 * into outs and t. Returns 0 or a storage error. */
static int
visit(struct run *r, struct spec_vars *v, int k, cJSON *outs, struct tally *t)
{
    enum q_job_state st = Q_JOB_QUEUED;
    char *out = NULL, *error = NULL, why[1024];
    int64_t id = 0;
    bool holds = true;
    int rc;

    if (spec_foreach_when_per_element(r->spec, (size_t)r->step))
        spec_when_holds(r->spec, (size_t)r->step, v, &holds, why, sizeof(why));
    if (!holds) {
        cJSON_AddItemToArray(outs, cJSON_CreateNull());
        return 0;
    }
    rc = read_element(r, k, &st, &id, &out, &error);
    if (rc == -ENOENT && t->live < cur_spec(r)->foreach_parallelism) {
        if ((rc = spawn(r, v, k, why, sizeof(why))) == -EINVAL)
            note_failure(t, k, 0, why);
        else if (rc == 0)
            t->live++;
    } else if (rc == -ENOENT) {
        t->live++; /* its turn comes */
    } else if (rc == 0 && (st == Q_JOB_QUEUED || st == Q_JOB_RUNNING)) {
        t->live++;
    } else if (rc == 0 && st == Q_JOB_PARKED) {
        t->parked++;
    } else if (rc == 0 && st != Q_JOB_SUCCEEDED) {
        note_failure(t, k, id, error ? error : q_job_state_name(st));
    }
    cJSON_AddItemToArray(outs, spec_foreach_value(out));
    free(out);
    free(error);
    return rc == -ENOENT ? 0 : rc;
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

void
worker__foreach_enter(struct run *r)
{
    struct worker *w = r->w;
    struct spec_vars v = {.input = r->spec->input,
                          .outputs = (const char *const *)r->outputs,
                          .skipped = r->skipped};
    struct tally t = {0};
    cJSON *items = NULL, *outs, *el;
    char err[1024], msg[1400], *output;
    int k = 0, rc = 0;

    if (spec_foreach_items(r->spec, (size_t)r->step, &v, &items, err,
                           sizeof(err)) != 0) {
        snprintf(msg, sizeof(msg), "step %s: %s; nothing sent",
                 cur_spec(r)->name, err);
        worker__fail_job(r, msg);
        return;
    }
    outs = cJSON_CreateArray();
    cJSON_ArrayForEach(el, items)
    {
        v.item = el;
        if (rc == 0)
            rc = visit(r, &v, k++, outs, &t);
    }
    cJSON_Delete(items);
    if (rc != 0) {
        cJSON_Delete(outs);
        worker__give_back(r, worker__now(w) + 1000);
        return;
    }
    if (t.live > 0 || t.parked > 0) {
        cJSON_Delete(outs);
        wait_for_elements(r, worker__now(w) + (t.live > 0 ? FOREACH_POLL_MS
                                                          : FOREACH_PARKED_MS));
        return;
    }
    if (t.failed > 0) {
        cJSON_Delete(outs);
        snprintf(msg, sizeof(msg), "step %s: %s%s", cur_spec(r)->name, t.first,
                 t.failed > 1 ? " (and more elements failed)" : "");
        worker__fail_job(r, msg);
        return;
    }
    output = json_print(outs);
    cJSON_Delete(outs);
    if (q_step_set(w->db, r->job.id, w->id, r->step, Q_STEP_SUCCEEDED, NULL,
                   output, 0) != 0) {
        free(output);
        worker__give_back(r, worker__now(w) + 1000);
        return;
    }
    free(r->outputs[r->step]);
    r->outputs[r->step] = output;
    r->step++;
    worker__step_enter(r);
}

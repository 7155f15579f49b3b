/* leave.c: the ways a job leaves this worker: finished, given back,
 * failed (told to on_fail, as an ended one is to on_done) or parked; a
 * wait that keeps the slot or gives the job back; the progress line. */
#include "worker/internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "park/park.h"
#include "queue/park.h"
#include "worker/batch.h"
#include "worker/foreach.h"

/* A wait up to this long keeps the job's slot; a longer one gives the job
 * back to the queue with a later run_at. */
#define HOLD_MAX_MS 2000

void
worker__progress(const struct run *r, const char *what)
{
    if (r->w->progress)
        fprintf(stderr, "job %lld %s: %s\n", (long long)r->job.id, r->job.name,
                what);
}

/* ---- how a job leaves: finished, given back, failed, parked -------- */

/* The job leaves this worker in end state end (DONE or LOST); one that
 * has left already keeps its end, unless this one is LOST. */
static void
leave_as(struct run *r, const char *state, enum worker_run_state end)
{
    if (!run_has_left(r) && state != NULL) {
        worker__progress(r, state);
        worker__foreach_ended(r);
    }
    worker__batch_leave(r); /* its batch may go: no pointer is kept */
    if (r->state != end && (!run_has_left(r) || end == WORKER_RUN_LOST))
        worker__run_to(r, end);
    worker__kick(r->w);
}

void
worker__finish(struct run *r, const char *state)
{
    leave_as(r, state, WORKER_RUN_DONE);
}

void
worker__lose(struct run *r)
{
    leave_as(r, "lease lost", WORKER_RUN_LOST);
}

/* Gives the job back to the queue, due at run_at; the step is pending
 * again (its context lives in the ledger). */
void
worker__give_back(struct run *r, int64_t run_at)
{
    struct worker *w = r->w;
    int64_t now = worker__now(w);

    if (r->state != WORKER_RUN_LOST && r->step < (int)r->spec->nsteps) {
        if (q_step_set(w->db, r->job.id, w->id, r->step, Q_STEP_PENDING, NULL,
                       NULL, 0) != 0)
            log_warn("job %lld: cannot reset step state", (long long)r->job.id);
    }
    if (r->state != WORKER_RUN_LOST &&
        q_release(w->db, r->job.id, w->id, run_at, now) != 0)
        log_warn("job %lld: lease already gone at release",
                 (long long)r->job.id);
    worker__finish(r, NULL);
}

void
worker__ended(struct run *r, bool failed)
{
    struct worker *w = r->w;
    const char *name = r->spec == NULL ? NULL
                       : failed        ? r->spec->on_fail
                                       : r->spec->on_done;
    const struct config_hook *own =
        name != NULL ? config_find_hook(&w->cfg->hooks, name) : NULL;

    /* The name was checked at enqueue; a config changed since may have
     * lost it. */
    if (name != NULL && own == NULL)
        log_warn("job %lld: its %s hook %s is not in the config's hooks: "
                 "not run",
                 (long long)r->job.id, failed ? "on_fail" : "on_done", name);
    if (w->job == NULL ||
        ((failed ? w->cfg->on_fail : w->cfg->on_done) == NULL && own == NULL))
        return;
    if (w->nended == w->capended) {
        w->capended = w->capended ? 2 * w->capended : 8;
        w->ended = xrealloc(w->ended, w->capended * sizeof(*w->ended));
    }
    w->ended[w->nended++] = (struct worker_ended){
        .id = r->job.id, .failed = failed, .own = own ? own->cmd : NULL};
}

void
worker__fail_job(struct run *r, const char *error)
{
    struct worker *w = r->w;
    int64_t now = worker__now(w);
    int rc;

    if (r->step < (int)r->spec->nsteps &&
        q_step_set(w->db, r->job.id, w->id, r->step, Q_STEP_FAILED, NULL, NULL,
                   0))
        log_warn("job %lld: cannot mark step failed", (long long)r->job.id);
    rc = q_fail(w->db, r->job.id, w->id, error, now);
    if (rc != 0)
        log_warn("job %lld: cannot fail job: lease lost", (long long)r->job.id);
    else
        worker__ended(r, true);
    worker__finish(r, "failed");
}

void
worker__wait_then_attempt(struct run *r, int64_t wait_ms)
{
    int64_t now = worker__now(r->w);

    if (wait_ms > HOLD_MAX_MS) {
        worker__give_back(r, now + wait_ms);
        return;
    }
    r->wake_at = now + (wait_ms > 0 ? wait_ms : 0);
    if (r->wake_at == 0)
        r->wake_at = 1;
    worker__kick(r->w);
}

void
worker__park(struct run *r, const char *reason, const char *error)
{
    struct worker *w = r->w;
    const struct config_tier *t = cur_tier(r);
    struct q_park_new p = {
        .job_id = r->job.id,
        .step = r->step,
        .step_name = cur_spec(r)->name,
        .reason = reason,
        .attempts = r->attempt_no,
        .request_sha256 = r->sha[0] ? r->sha : NULL,
        .request = r->body,
        .error = error,
        .tier = t ? t->name : NULL,
        .parked_at = worker__now(w),
    };
    int64_t id = 0;

    if (park_step(w->db, &p, w->id, &id) != 0) {
        log_error("job %lld: cannot park step %s; giving the job back",
                  (long long)r->job.id, p.step_name);
        worker__give_back(r, worker__now(w) + 1000);
        return;
    }
    /* The hook is told once the turn has committed (run_hooks, turn.c):
     * before, the item it is told of may not exist for anyone else yet. */
    if (w->nhooks == w->caphooks) {
        w->caphooks = w->caphooks ? 2 * w->caphooks : 8;
        w->hooks = xrealloc(w->hooks, w->caphooks * sizeof(*w->hooks));
    }
    w->hooks[w->nhooks++] = id;
    worker__finish(r, "parked");
}

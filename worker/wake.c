/* wake.c: runs that wait. A run waiting for a paced tier it prefers
 * holds no slot, so a claim may take other jobs beside a line of them
 * (up to WORKER_RUNS_IN_HAND times the concurrency in hand); the runs
 * whose wait is over are attempted in the order tiers should take them
 * (FIFO), one pass asking each tier once; and one that waited for a tier
 * waits for a slot before it sends, so requests in flight stay within the
 * concurrency. */
#include "worker/internal.h"

#include <assert.h>
#include <stdlib.h>

#include "common/xalloc.h"
#include "worker/batch.h"

/* A run postponed for a slot looks again after this long at the latest
 * (an answer that frees a slot wakes it sooner: worker__slot_freed). */
#define SLOT_WAIT_MS 1000

/* Whether r waits for a paced tier it prefers, holding no slot. */
static bool
tier_waiter(const struct run *r)
{
    return !run_has_left(r) && r->admit_since > 0 && r->call == NULL &&
           r->wake_at != 0;
}

/* Whether r gathers for a batch or waits in one (batch.c): it holds no
 * slot, and is not counted in the runs in hand either; those are bounded
 * by what the worker's batches may hold (worker__batch_room). */
static bool
batch_waiter(const struct run *r)
{
    return !run_has_left(r) &&
           (r->state == WORKER_RUN_GATHERING || r->batch != NULL);
}

/* The runs that hold a slot: not finished, and not waiting for a tier. */
static int
busy_runs(const struct worker *w)
{
    int busy = 0;

    for (const struct run *r = w->runs; r != NULL; r = r->next)
        busy += !run_has_left(r) && !tier_waiter(r) && !batch_waiter(r);
    return busy;
}

int
worker__free_slots(const struct worker *w)
{
    int busy = busy_runs(w), held = 0, batched = 0, a, b;
    int64_t room = worker__batch_room(w);

    for (const struct run *r = w->runs; r != NULL; r = r->next) {
        held += !run_has_left(r) && !batch_waiter(r);
        batched += batch_waiter(r);
    }
    /* Every batch this worker may keep is full of runs: it claims no
     * more until some leave. */
    if (room > 0 && batched >= room)
        return 0;
    a = w->concurrency - busy;
    b = w->concurrency * WORKER_RUNS_IN_HAND - held;
    return a < b ? a : b;
}

/* Runs waiting for a tier look again: an answer ended a doubt or a probe,
 * or freed a place under an in-flight cap. One pass asks each tier once. */
void
worker__wake_waiting(struct worker *w, int64_t now)
{
    bool any = false;

    w->pass++;
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (r->admit_since > 0 && r->wake_at > now && r->call == NULL &&
            !run_has_left(r)) {
            r->wake_at = now;
            any = true;
        }
    }
    if (any)
        worker__kick(w);
}

/* Runs waiting for a tier go first, longest waiting first; then the
 * rest (backoffs) by job id. */
static int
by_wait(const void *a, const void *b)
{
    const struct run *x = *(struct run *const *)a;
    const struct run *y = *(struct run *const *)b;
    int64_t wx = x->admit_since > 0 ? x->admit_since : INT64_MAX;
    int64_t wy = y->admit_since > 0 ? y->admit_since : INT64_MAX;

    if (wx != wy)
        return wx < wy ? -1 : 1;
    return x->job.id < y->job.id ? -1 : x->job.id > y->job.id;
}

bool
worker__run_waits(const struct run *r)
{
    return !run_has_left(r) && r->call == NULL && r->wake_at != 0;
}

bool
worker__run_due(const struct worker *w, const struct run *r, int64_t now)
{
    return worker__run_waits(r) &&
           (r->wake_at <= now || w->phase != WORKER_RUNNING);
}

int64_t
worker__wake_due(struct worker *w, int64_t now, int64_t next)
{
    struct run **due = xcalloc((size_t)w->nruns + 1, sizeof(*due));
    size_t n = 0;
    int busy;

    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (worker__run_due(w, r, now))
            due[n++] = r;
        else if (worker__run_waits(r) && r->wake_at < next)
            next = r->wake_at;
    }
    qsort(due, n, sizeof(*due), by_wait);
    w->pass++;
    busy = busy_runs(w);
    for (size_t i = 0; i < n; i++) {
        struct run *r = due[i];
        bool waiter = tier_waiter(r);
        if (r->state == WORKER_RUN_SLOT_WAIT)
            worker__run_to(r, WORKER_RUN_ACTIVE); /* it looks again */
        /* A run that waited for a tier holds no slot until it sends: with
         * every slot taken it waits for one (runs in hand can number more
         * than the concurrency; requests in flight cannot). */
        if (waiter && busy >= w->concurrency && w->phase == WORKER_RUNNING) {
            r->wake_at = now + SLOT_WAIT_MS;
            worker__run_to(r, WORKER_RUN_SLOT_WAIT);
        } else {
            worker__attempt(r);
            busy += waiter && !run_has_left(r) && !tier_waiter(r);
        }
        if (r->wake_at > now && r->wake_at < next)
            next = r->wake_at;
    }
    free(due);
    return next;
}

void
worker__slot_freed(struct worker *w, int64_t now)
{
    bool any = false;

    if (w->slot_waiters == 0)
        return;
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (r->state == WORKER_RUN_SLOT_WAIT) {
            /* Nothing moves a run in SLOT_WAIT but this, its wake time,
             * a lost lease or a lost turn: it still waits for its tier. */
            assert(tier_waiter(r));
            worker__run_to(r, WORKER_RUN_ACTIVE);
            r->wake_at = now;
            any = true;
        }
    }
    assert(w->slot_waiters == 0);
    if (any)
        worker__kick(w);
}

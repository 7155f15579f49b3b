/* retention.c: the config's retention applied by the workers. Once an
 * hour one worker of all claims the hour (q_sched_claim on "@retention",
 * as the report hook claims its slot) and prunes what the retention
 * names (q_prune_plan), a step of at most PRUNE_STEP jobs and bodies per
 * second of the schedules' timer, so that neither its loop nor the other
 * writers wait on a long transaction. A worker stopped halfway leaves
 * the rest to the next hour's. */
#include "worker/internal.h"

#include "common/log.h"
#include "queue/admin.h"
#include "queue/queue.h"
#include "queue/sched.h"

/* The stored progress: no schedule may have this name. */
#define RETENTION_STATE "@retention"
#define HOUR_MS         (3600 * 1000LL)
#define DAY_MS          (24 * HOUR_MS)
#define PRUNE_STEP      500

void
worker__retention(struct worker *w, int64_t now)
{
    const struct config_retention *r = &w->cfg->retention;
    struct q_prune p;
    struct q_prune_counts c = {0};

    if (r->finished_jobs_days == 0 && r->attempt_bodies_days == 0)
        return;
    if (w->prune_from < 0) {
        if (q_sched_claim(w->db, RETENTION_STATE, now / HOUR_MS * HOUR_MS,
                          now) != 0)
            return; /* this hour's is another's (or the store failed) */
        w->prune_from = 0;
    }
    q_prune_plan(r->finished_jobs_days * DAY_MS,
                 r->attempt_bodies_days * DAY_MS, now, &p);
    p.limit = PRUNE_STEP;
    p.bodies_from_job = w->prune_from;
    if (q_prune(w->db, &p, &c) != 0) {
        log_warn("retention: the store failed: tried again next hour");
        w->prune_from = -1;
        return;
    }
    if (c.jobs > 0 || c.bodies > 0)
        log_info("retention: pruned %lld jobs (%lld attempts), %lld bodies",
                 (long long)c.jobs, (long long)c.attempts, (long long)c.bodies);
    if (c.jobs < PRUNE_STEP && c.bodies < PRUNE_STEP)
        w->prune_from = -1; /* done until the next hour */
    else if (c.bodies_job > 0)
        w->prune_from = c.bodies_job;
}

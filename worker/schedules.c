/* schedules.c: the config's schedules, fired by every worker: a timer
 * asks sched/ each second which slots are due and enqueues them (once
 * across every worker: sched/ dedupes by key), then wakes the loop to
 * claim them. */
#include "worker/internal.h"

#include "common/log.h"
#include "sched/sched.h"

#define SCHED_EVERY_MS 1000
#define SCHED_AGAIN_MS 20

static void
on_sched(uv_timer_t *t)
{
    struct worker *w = t->data;
    size_t n = 0;
    int rc;

    /* Not while the store is away or the worker stops; and not inside a
     * turn another callback opened (its transaction is the turn's): then
     * again in a moment, after that turn's commit. */
    if (w->closing || w->down || w->stopping)
        return;
    if (w->tx_open) { /* soon, after this loop turn's commit */
        uv_timer_start(&w->sched, on_sched, SCHED_AGAIN_MS, SCHED_EVERY_MS);
        return;
    }
    rc = sched_fire(w->db, w->cfg, worker__now(w), &n);
    if (rc != 0)
        log_warn("schedules: the store failed (%d): tried again in a second",
                 rc);
    if (n > 0)
        worker__kick(w);
}

void
worker__sched_start(struct worker *w)
{
    if (w->cfg->nschedules == 0)
        return;
    uv_timer_start(&w->sched, on_sched, 0, SCHED_EVERY_MS);
    log_info("schedules: %zu, fired by this worker too", w->cfg->nschedules);
}

static void
on_closed(uv_handle_t *h)
{
    (void)h;
}

void
worker__sched_close(struct worker *w)
{
    uv_close((uv_handle_t *)&w->sched, on_closed);
}

/* schedules.c: the config's schedules, fired by every worker: a timer
 * asks sched/ each second which slots are due and enqueues them (once
 * across every worker: sched/ dedupes by key), then wakes the loop to
 * claim them. */
#include "worker/internal.h"

#include <errno.h>
#include <stdlib.h>

#include "common/json.h"
#include "common/log.h"
#include "park/park.h"
#include "queue/sched.h"
#include "sched/sched.h"

#define SCHED_EVERY_MS 1000
#define SCHED_AGAIN_MS 20
/* How far back worker__sched_next looks for a slot not fired yet. */
#define SCHED_LAG_S 3
/* The stored progress of on_report: no schedule may have this name. */
#define REPORT_STATE "@report"
/* What the first report covers: the day before its slot. */
#define REPORT_SPAN_MS (24 * 3600 * 1000LL)

/* The on_report hook at its due slot: claimed by one worker of all
 * (q_sched_claim), which pipes the report to it as the on_park hook runs.
 * A report covers the time from the slot of the one before it to its own
 * slot, so that every moment is in exactly one report: a day of 23 or 25
 * hours across a daylight saving change, the whole outage after slots
 * missed while no worker ran (sent once, late: catch_up latest). The
 * first covers the day before its slot; a slot before the hook was first
 * seen is never sent. */
static void
fire_report(struct worker *w, int64_t now)
{
    const struct config_report_hook *h = w->cfg->on_report;
    struct q_sched st = {0};
    struct sched_cron cron;
    int64_t slot = 0, done = 0, from, prev;
    size_t n = 0;
    char err[256], *json;
    cJSON *r = NULL;
    int rc = q_sched_get(w->db, REPORT_STATE, &st);

    if (rc == -ENOENT) { /* done 0: a row another worker made first keeps
                          * its done_until, which would read as sent */
        if (q_sched_note(w->db, REPORT_STATE, 0, 0, 0, now) != 0)
            log_warn("on_report: the store failed: tried again in a second");
        return;
    }
    if (rc != 0)
        return;
    from = st.done_until > st.since ? st.done_until : st.since;
    prev = st.done_until > st.since ? st.done_until : 0; /* the last sent */
    q_sched_cleanup(&st);
    if (sched_cron_parse(h->cron, &cron, err, sizeof(err)) != 0 ||
        sched_due(&cron, h->tz, CONFIG_CATCH_UP_LATEST, from / 1000, now / 1000,
                  &slot, 1, &n, &done) != 0 ||
        n == 0)
        return;
    if (q_sched_claim(w->db, REPORT_STATE, slot * 1000, now) != 0)
        return; /* another worker sends this one (or the store failed) */
    if ((rc = w->report(w->db, w->cfg,
                        prev > 0 ? prev : slot * 1000 - REPORT_SPAN_MS,
                        slot * 1000, &r)) != 0) {
        log_warn("on_report: the report could not be read (%d)", rc);
        return;
    }
    json = json_print(r);
    cJSON_Delete(r);
    if (park_hook_run(&w->loop, "on_report", h->command,
                      (int64_t)(w->cfg->on_park_timeout_s * 1000), json) == 0)
        log_info("on_report: the report went to the hook");
    free(json);
}

static void
on_sched(uv_timer_t *t)
{
    struct worker *w = t->data;
    size_t n = 0;
    int rc;

    /* Not while the store is away or the worker stops; and not inside a
     * turn another callback opened (its transaction is the turn's): then
     * again in a moment, after that turn's commit. */
    if (w->phase != WORKER_RUNNING || w->store != WORKER_STORE_UP)
        return;
    if (w->tx_open) { /* soon, after this loop turn's commit */
        uv_timer_start(&w->sched, on_sched, SCHED_AGAIN_MS, SCHED_EVERY_MS);
        return;
    }
    rc = sched_fire(w->db, w->cfg, worker__now(w), &n);
    if (rc != 0)
        log_warn("schedules: the store failed (%d): tried again in a second",
                 rc);
    if (w->cfg->on_report != NULL && w->report != NULL)
        fire_report(w, worker__now(w));
    worker__retention(w, worker__now(w));
    if (n > 0)
        worker__kick(w);
}

int64_t
worker__sched_next(struct worker *w, int64_t now)
{
    int64_t first = 0;

    for (size_t i = 0; i < w->cfg->nschedules; i++) {
        const struct config_schedule *s = &w->cfg->schedules[i];
        struct sched_cron cron;
        struct q_sched st = {0};
        int64_t slot = 0;
        char err[256];
        bool paused;
        if (q_sched_get(w->db, s->name, &st) == 0) {
            paused = st.paused;
            q_sched_cleanup(&st);
            if (paused)
                continue;
        }
        /* From a little before now: a slot that came in the last seconds
         * may not be fired yet (the timer runs each second). */
        if (sched_cron_parse(s->cron, &cron, err, sizeof(err)) != 0 ||
            sched_next(&cron, s->tz, now / 1000 - SCHED_LAG_S, &slot) != 0)
            continue;
        if (first == 0 || slot * 1000 < first)
            first = slot * 1000;
    }
    return first;
}

void
worker__sched_start(struct worker *w)
{
    w->prune_from = -1; /* not pruning (retention.c) */
    if (w->cfg->nschedules == 0 && w->cfg->on_report == NULL &&
        w->cfg->retention.finished_jobs_days == 0 &&
        w->cfg->retention.attempt_bodies_days == 0)
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

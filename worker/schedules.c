/* schedules.c: the config's schedules, fired by every worker: a timer
 * asks sched/ each second which slots are due and enqueues them (once
 * across every worker: sched/ dedupes by key), then wakes the loop to
 * claim them. */
#include "worker/internal.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"
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

/* A schedule as the drain sees it (worker__sched_next): its cron, parsed
 * once (it is config), and its next slot, found again only once the time
 * it was found after has passed it. */
struct wsched {
    struct sched_cron cron;
    bool ok;      /* the cron parsed (setup checked it) */
    bool found;   /* from and slot are set */
    int64_t from; /* s: the slot is the first strictly after this */
    int64_t slot; /* s; 0: none */
};

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

/* The first slot of schedule ws (s in the config) strictly after after
 * (s), 0 when none. sched_next gives the first after ws->from; it holds
 * for every later instant before it, so it is asked again only once
 * after reaches it (or the clock went back). */
static int64_t
slot_after(struct wsched *ws, const struct config_schedule *s, int64_t after)
{
    if (!ws->ok)
        return 0;
    if (ws->found && after >= ws->from && (ws->slot == 0 || after < ws->slot))
        return ws->slot;
    if (sched_next(&ws->cron, s->tz, after, &ws->slot) != 0)
        ws->slot = 0;
    ws->from = after;
    ws->found = true;
    return ws->slot;
}

/* Whether schedule name is paused; a row that cannot be read (or none
 * yet) counts as not paused. */
static bool
is_paused(struct worker *w, const char *name)
{
    struct q_sched st = {0};
    bool paused = false;

    if (q_sched_get(w->db, name, &st) == 0) {
        paused = st.paused;
        q_sched_cleanup(&st);
    }
    return paused;
}

int64_t
worker__sched_next(struct worker *w, int64_t now)
{
    /* From a little before now: a slot that came in the last seconds may
     * not be fired yet (the timer runs each second). */
    int64_t after = now / 1000 - SCHED_LAG_S, last = 0, first;

    assert(w->scheds != NULL || w->cfg->nschedules == 0);
    /* The earliest slot of an unpaused schedule: the slots are visited
     * from the earliest on, and a schedule's row (whether it is paused,
     * which another process may change at any time) is read only for a
     * slot that would be the answer, so usually once. */
    for (;;) {
        first = 0;
        for (size_t i = 0; i < w->cfg->nschedules; i++) {
            int64_t slot =
                slot_after(&w->scheds[i], &w->cfg->schedules[i], after);
            if (slot > last && (first == 0 || slot < first))
                first = slot;
        }
        if (first == 0)
            return 0;
        for (size_t i = 0; i < w->cfg->nschedules; i++) {
            if (w->scheds[i].slot == first &&
                !is_paused(w, w->cfg->schedules[i].name))
                return first * 1000;
        }
        last = first; /* each schedule of that slot is paused */
    }
}

void
worker__sched_start(struct worker *w)
{
    char err[256];

    w->prune_from = -1; /* not pruning (retention.c) */
    if (w->cfg->nschedules > 0)
        w->scheds = xcalloc(w->cfg->nschedules, sizeof(*w->scheds));
    for (size_t i = 0; i < w->cfg->nschedules; i++)
        w->scheds[i].ok =
            sched_cron_parse(w->cfg->schedules[i].cron, &w->scheds[i].cron, err,
                             sizeof(err)) == 0;
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
    free(w->scheds);
    w->scheds = NULL;
}

/* fire.c: the due slots of every schedule, enqueued once each across
 * every worker on the store. The dedupe key makes a slot one job however
 * many workers fire it at once; the stored progress (done_until) only
 * moves forward, so a slot passed is never fired later. */
#include "sched/sched.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "queue/sched.h"

/* How often the progress of a schedule with no slot due is written. */
#define SCHED_IDLE_NOTE_MS 60000

int
sched_enqueue(q_db *db, const struct config *cfg,
              const struct config_schedule *s, int64_t slot_ms, int64_t now,
              int64_t *id, bool *duplicate, char *err, size_t len)
{
    char key[256], *text = NULL;
    struct q_enqueue_opts over = {.key = key};
    struct spec_enqueue_opts o = {
        .db = db, .now = now, .cfg = cfg, .schedule = s->name, .over = &over};
    const struct q_enqueue_result *res;
    spec_enqueue *e;
    size_t n = 0;
    int rc;

    if ((rc = sched_job_text(s, slot_ms, &text, err, len)) != 0)
        return rc;
    sched_key(s, slot_ms, key, sizeof(key));
    e = spec_enqueue_new(&o);
    rc = spec_enqueue_text(e, text, strlen(text), err, len);
    res = spec_enqueue_results(e, &n, NULL);
    if (rc == 0 && n == 1) {
        *id = res[0].id;
        *duplicate = res[0].duplicate;
    }
    spec_enqueue_free(e);
    free(text);
    return rc;
}

/* Fires the due slots of s at now (ms). */
static int
fire_one(q_db *db, const struct config *cfg, const struct config_schedule *s,
         int64_t now, size_t *enqueued)
{
    struct q_sched st = {0};
    struct sched_cron cron;
    int64_t slots[SCHED_CATCH_UP_MAX], done, id = 0;
    size_t n = 0;
    char err[512], at[32];
    bool dup = false;
    int rc = q_sched_get(db, s->name, &st);

    if (rc == -ENOENT) /* first seen: its slots start now */
        return q_sched_note(db, s->name, now, 0, 0, now);
    if (rc != 0)
        return rc;
    int64_t from = st.done_until > st.since ? st.done_until : st.since;
    bool paused = st.paused;
    q_sched_cleanup(&st);
    if (paused)
        return 0;
    if (sched_cron_parse(s->cron, &cron, err, sizeof(err)) != 0 ||
        sched_due(&cron, s->tz, s->catch_up, from / 1000, now / 1000, slots,
                  SCHED_CATCH_UP_MAX, &n, &done) != 0)
        return 0; /* sched_check refused it at start: not reached */
    /* No slot came: the progress moves to now once a minute all the same,
     * so that an expression changed in the config does not take the time
     * since its last slot for time missed. */
    if (done * 1000 <= from) {
        if (now - from < SCHED_IDLE_NOTE_MS)
            return 0;
        done = now / 1000;
    }
    for (size_t i = 0; i < n; i++) {
        clock_format_utc(slots[i] * 1000, at, sizeof(at));
        rc = sched_enqueue(db, cfg, s, slots[i] * 1000, now, &id, &dup, err,
                           sizeof(err));
        if (rc == -EINVAL && now - slots[i] * 1000 < SCHED_LATE_S * 1000) {
            /* A job file being rewritten, say: tried again each second
             * for as long as the slot is not late. */
            if (now - slots[i] * 1000 < 1000)
                log_warn("schedule %s: slot %s: its job: %s (trying again)",
                         s->name, at, err);
            return 0; /* the slots before it are noted already */
        }
        if (rc == -EINVAL) {
            log_error("schedule %s: slot %s passed: its job: %s", s->name, at,
                      err);
            continue;
        }
        if (rc != 0)
            return rc; /* the progress stays: tried again next time */
        if (dup) {
            log_info("schedule %s: slot %s already enqueued (job %lld)",
                     s->name, at, (long long)id);
        } else {
            log_info("schedule %s: slot %s enqueued as job %lld", s->name, at,
                     (long long)id);
            if (enqueued != NULL)
                (*enqueued)++;
        }
        if ((rc = q_sched_note(db, s->name, slots[i] * 1000, slots[i] * 1000,
                               id, now)) != 0)
            return rc;
    }
    return q_sched_note(db, s->name, done * 1000, 0, 0, now);
}

int
sched_fire(q_db *db, const struct config *cfg, int64_t now, size_t *enqueued)
{
    int first = 0;

    for (size_t i = 0; i < cfg->nschedules; i++) {
        int rc = fire_one(db, cfg, &cfg->schedules[i], now, enqueued);
        if (rc != 0 && first == 0)
            first = rc;
    }
    return first;
}

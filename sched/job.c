/* job.c: the job a schedule enqueues at a slot: its file (or inline job)
 * with the slot filled in, validated as any job file is, and the checks
 * of every schedule of a config. */
#include "sched/sched.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "sched/internal.h"

/* text with every "{{schedule.WHAT}}" replaced. Caller frees. */
static char *
fill(const char *text, const char *const subs[][2], size_t nsubs)
{
    size_t cap = strlen(text) + 1, n = 0;
    char *out = xmalloc(cap);

    for (const char *p = text; *p != '\0';) {
        size_t i;
        for (i = 0; i < nsubs; i++)
            if (strncmp(p, subs[i][0], strlen(subs[i][0])) == 0)
                break;
        const char *put = i < nsubs ? subs[i][1] : p;
        size_t plen = i < nsubs ? strlen(put) : 1;
        if (n + plen + 1 > cap) {
            cap = (n + plen + 1) * 2;
            out = xrealloc(out, cap);
        }
        memcpy(out + n, put, plen);
        n += plen;
        p += i < nsubs ? strlen(subs[i][0]) : 1;
    }
    out[n] = '\0';
    return out;
}

int
sched_job_text(const struct config_schedule *s, int64_t slot_ms, char **out,
               char *err, size_t len)
{
    char *raw = NULL, slot[32], date[16];
    size_t n = 0;
    struct sched_civil t;
    int rc;

    if (s->job_path != NULL) {
        rc = file_read_all(s->job_path, SPEC_JOB_MAX_BYTES, &raw, &n);
        if (rc != 0) {
            snprintf(err, len, "%s: %s", s->job_path,
                     rc == -ENOENT  ? "no such file"
                     : rc == -E2BIG ? "larger than a job may be"
                                    : "cannot be read");
            return -EINVAL;
        }
    } else {
        raw = xstrdup(s->job_text);
    }
    if (sched_civil_of(s->tz, slot_ms / 1000, &t) != 0) {
        free(raw);
        snprintf(err, len, "unknown time zone %s", s->tz);
        return -EINVAL;
    }
    clock_format_utc(slot_ms, slot, sizeof(slot));
    snprintf(date, sizeof(date), "%04d-%02d-%02d", t.year % 10000, t.month,
             t.day);
    const char *const subs[][2] = {{"{{schedule.slot}}", slot},
                                   {"{{schedule.date}}", date},
                                   {"{{schedule.name}}", s->name}};
    *out = fill(raw, subs, sizeof(subs) / sizeof(subs[0]));
    free(raw);
    return 0;
}

void
sched_key(const struct config_schedule *s, int64_t slot_ms, char *buf,
          size_t len)
{
    char slot[32];

    snprintf(buf, len, "schedule:%s:%s", s->name,
             clock_format_utc(slot_ms, slot, sizeof(slot)));
}

int
sched_job(const struct config *cfg, const struct config_schedule *s,
          int64_t slot_ms, struct spec_job **out, char *err, size_t len)
{
    const char **names = spec_tier_names(cfg);
    struct spec_opts opts = {.tiers = names,
                             .ntiers = names ? cfg->ntiers : 0,
                             .schedule = s->name,
                             .tools = &cfg->tools,
                             .hooks = &cfg->hooks};
    char *text = NULL, inner[512];
    struct spec_job *job = NULL;
    int rc;

    rc = sched_job_text(s, slot_ms, &text, err, len);
    if (rc == 0) {
        rc = spec_parse(text, strlen(text), &opts, &job, inner, sizeof(inner));
        if (rc != 0)
            snprintf(err, len, "%s", inner);
    }
    free(text);
    free(names);
    if (rc != 0)
        return -EINVAL;
    *out = job;
    return 0;
}

int
sched_check(const struct config *cfg, bool jobs, char *err, size_t len)
{
    if (cfg->on_report != NULL) {
        struct sched_cron cron;
        char why[512];
        if (sched_cron_parse(cfg->on_report->cron, &cron, why, sizeof(why))) {
            snprintf(err, len, "on_report.cron: %s", why);
            return -EINVAL;
        }
        if (sched_zone_check(cfg->on_report->tz, why, sizeof(why)) != 0) {
            snprintf(err, len, "on_report.tz: %s", why);
            return -EINVAL;
        }
    }
    for (size_t i = 0; i < cfg->nschedules; i++) {
        const struct config_schedule *s = &cfg->schedules[i];
        struct sched_cron cron;
        struct spec_job *job = NULL;
        char why[512];

        if (sched_cron_parse(s->cron, &cron, why, sizeof(why)) != 0) {
            snprintf(err, len, "schedules[%zu].cron: %s", i, why);
            return -EINVAL;
        }
        if (sched_zone_check(s->tz, why, sizeof(why)) != 0) {
            snprintf(err, len, "schedules[%zu].tz: %s", i, why);
            return -EINVAL;
        }
        /* The job as it will be enqueued, at an example slot. */
        if (jobs && sched_job(cfg, s, 0, &job, why, sizeof(why)) != 0) {
            snprintf(err, len, "schedules[%zu].job: %s", i, why);
            return -EINVAL;
        }
        spec_job_free(job);
    }
    return 0;
}

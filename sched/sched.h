/* sched.h: sched/ owns schedules: five-field cron expressions (parse,
 * match), time zones from the system's tz database, the slots an
 * expression names in a zone (with daylight saving time handled as cron
 * (cronie, Vixie cron) handles it: a job at fixed times whose slot falls
 * in an hour that is skipped runs once, at the jump, and one whose slot
 * falls in an hour that repeats runs once, the first time round; a job
 * with '*' in its minute or hour field follows the clock: nothing in a
 * skipped hour, both rounds of a repeated one), and firing them: each
 * slot's job enqueued once across every worker, the progress kept in the
 * store (queue/'s q_sched_*).
 *
 * Times of the arithmetic are unix seconds (UTC); those that meet the
 * store are ms, as everywhere in queue/. The zone functions read the tz
 * database (through the C library), and set and restore TZ while they
 * run, so they are not for threads.
 */
#ifndef STEPQ_SCHED_SCHED_H
#define STEPQ_SCHED_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "common/defs.h"
#include "queue/queue.h"
#include "spec/spec.h"

/* How late a slot may fire under catch_up "none" (seconds), and how far
 * back a walk over missed slots starts at most. */
#define SCHED_LATE_S     300
#define SCHED_LOOKBACK_S (366 * 86400)
/* How many missed slots catch_up "all" fires at most (the latest ones). */
#define SCHED_CATCH_UP_MAX 100

/* A parsed expression: a bit per value each field allows. */
struct sched_cron {
    uint64_t minutes;          /* bit m: minute m (0-59) */
    uint32_t hours;            /* bit h: hour h (0-23) */
    uint32_t days;             /* bit d: day of month d (1-31) */
    uint16_t months;           /* bit m: month m (1-12) */
    uint8_t weekdays;          /* bit w: weekday w (0-6, Sunday 0) */
    bool any_day, any_weekday; /* the field began with '*' */
    /* The minute or hour field began with '*' ("*\/15", "0 * * * *",
     * @hourly): the schedule follows the clock through daylight saving
     * changes rather than keeping its slots (see sched_next). */
    bool any_minute, any_hour;
};

/* A wall-clock time in some zone: what a cron expression is matched to. */
struct sched_civil {
    int year, month, day, hour, minute; /* month 1-12, day 1-31 */
};

/* sched_cron_parse reads expr: five fields (minute, hour, day of month,
 * month, weekday) of '*', numbers, ranges (a-b), steps (x/n), lists
 * (a,b), names (JAN-DEC, SUN-SAT; weekday 7 is Sunday too), or one of
 * @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly. When
 * both day fields are restricted, a day matching either runs; when one
 * begins with '*' ("*\/2"), a day must match both (cron's rule). Returns 0 with
 * *out set, or -EINVAL with the reason in err (len bytes), e.g. an expression
 * that can never match (30 February) or one of six fields (a seconds field,
 * as in Quartz, is not supported). */
STEPQ_MUST_CHECK int sched_cron_parse(const char *expr, struct sched_cron *out,
                                      char *err, size_t len);

/* sched_cron_matches tells whether c allows the wall-clock minute t. */
bool sched_cron_matches(const struct sched_cron *c,
                        const struct sched_civil *t);

/* sched_zone_check tells whether tz names a zone of the tz database
 * ("Europe/Berlin", "UTC"). Returns 0, or -EINVAL with the reason in err. */
STEPQ_MUST_CHECK int sched_zone_check(const char *tz, char *err, size_t len);

/* sched_zone_pin sets TZ to the system's zone (":/etc/localtime") when
 * it is not set, so that the zone calls after it only overwrite TZ: glibc
 * then never grows the environment, which another thread (libcurl's
 * resolver) may be reading. Call it before threads start. */
void sched_zone_pin(void);

/* sched_next finds the first slot of c in zone tz strictly after the
 * instant after: 0 with *slot set, -ENOENT when there is none in the
 * next forty years, -EINVAL when tz is not a zone. A wall-clock time that
 * the zone shows twice is a slot once (the first time) for a job at fixed
 * times, twice for one with c->any_minute or c->any_hour; one it never
 * shows is a slot at the jump, or none for such a job. */
STEPQ_MUST_CHECK int sched_next(const struct sched_cron *c, const char *tz,
                                int64_t after, int64_t *slot);

/* sched_next_n is sched_next max times over, in one use of the zone
 * (which is read afresh at each call): the slots after `after`, in order,
 * into slots, stopping early at the first after until. *n is how many.
 * Returns 0 (also when fewer than max came), or -EINVAL when tz is not a
 * zone. */
STEPQ_MUST_CHECK int sched_next_n(const struct sched_cron *c, const char *tz,
                                  int64_t after, int64_t until, int64_t *slots,
                                  size_t max, size_t *n);

/* sched_civil_of gives the wall-clock time of instant t in zone tz
 * (seconds dropped). Returns 0, or -EINVAL when tz is not a zone. */
STEPQ_MUST_CHECK int sched_civil_of(const char *tz, int64_t t,
                                    struct sched_civil *out);

/* sched_due lists the slots of c in zone tz that fire at now (seconds),
 * given that every slot up to from was dealt with: by catch_up, the
 * latest one (latest), the latest max, oldest first (all), or the latest
 * one if it is at most SCHED_LATE_S old (none: never more than latest
 * fires). *n is how
 * many are in slots (room for max); *done is the latest slot at or before
 * now, fired or passed (from when none came): what the stored progress
 * may move to. Returns 0, or -EINVAL when tz is not a zone. */
STEPQ_MUST_CHECK int sched_due(const struct sched_cron *c, const char *tz,
                               enum config_catch_up catch_up, int64_t from,
                               int64_t now, int64_t *slots, size_t max,
                               size_t *n, int64_t *done);

/* ---- the jobs of schedules (job.c, fire.c) ---------------------------- */

/* sched_job_text is schedule s's job (its file, or the inline job) with
 * {{schedule.slot}} (the slot in UTC, "2026-11-30T02:40:00Z"),
 * {{schedule.date}} (the slot's date in the schedule's zone) and
 * {{schedule.name}} filled in, for the slot at slot_ms. Returns 0 with
 * *out set (caller frees), or -EINVAL with the reason in err. */
STEPQ_MUST_CHECK int sched_job_text(const struct config_schedule *s,
                                    int64_t slot_ms, char **out, char *err,
                                    size_t len);

/* sched_job is that text validated as a job file (against cfg's tiers);
 * a job with a key of its own is refused (the schedule gives the key).
 * Returns 0 with *out set (free with spec_job_free), or -EINVAL. */
STEPQ_MUST_CHECK int sched_job(const struct config *cfg,
                               const struct config_schedule *s, int64_t slot_ms,
                               struct spec_job **out, char *err, size_t len);

/* sched_key writes the dedupe key of schedule s's job at slot_ms,
 * "schedule:NAME:2026-11-30T02:40:00Z", into buf (len bytes). */
void sched_key(const struct config_schedule *s, int64_t slot_ms, char *buf,
               size_t len);

/* sched_check checks every schedule of cfg: its expression and zone, and
 * with jobs also its job (readable, valid, no key of its own). Returns 0,
 * or -EINVAL with "schedules[i].FIELD: reason" in err. */
STEPQ_MUST_CHECK int sched_check(const struct config *cfg, bool jobs, char *err,
                                 size_t len);

/* sched_enqueue enqueues schedule s's job for slot_ms (key sched_key) at
 * now (ms); a slot already enqueued (by any worker) is a duplicate, not
 * an error. Sets *id and *duplicate. Returns 0, -EINVAL (the job: the
 * reason in err), or the storage error. */
STEPQ_MUST_CHECK int sched_enqueue(q_db *db, const struct config *cfg,
                                   const struct config_schedule *s,
                                   int64_t slot_ms, int64_t now, int64_t *id,
                                   bool *duplicate, char *err, size_t len);

/* sched_fire enqueues the due slots of every schedule of cfg that is not
 * paused, at now (ms, the store's clock), as sched_due says, and records
 * the progress (q_sched_note). A schedule seen for the first time fires
 * nothing from before now. Each slot becomes one job across every
 * worker (the key dedupes). *enqueued (may be NULL) counts the new jobs.
 * Logs what it enqueued, and a job that cannot be made (its slot is
 * passed). Returns 0 or the first storage error. */
STEPQ_MUST_CHECK int sched_fire(q_db *db, const struct config *cfg, int64_t now,
                                size_t *enqueued);

#endif

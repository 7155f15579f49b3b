/* sched.h: sched/ owns the time arithmetic of schedules: five-field cron
 * expressions (parse, match), time zones from the system's tz database,
 * and the slots an expression names in a zone, with daylight saving time
 * handled as cron users expect: a slot in an hour that is skipped runs
 * once, at the jump; a slot in an hour that repeats runs once, the first
 * time round.
 *
 * Times are unix seconds (UTC). Nothing here touches the store; the zone
 * functions read the tz database (through the C library), and set and
 * restore TZ while they run, so they are not for threads.
 */
#ifndef STEPQ_SCHED_SCHED_H
#define STEPQ_SCHED_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/defs.h"

/* A parsed expression: a bit per value each field allows. */
struct sched_cron {
    uint64_t minutes;          /* bit m: minute m (0-59) */
    uint32_t hours;            /* bit h: hour h (0-23) */
    uint32_t days;             /* bit d: day of month d (1-31) */
    uint16_t months;           /* bit m: month m (1-12) */
    uint8_t weekdays;          /* bit w: weekday w (0-6, Sunday 0) */
    bool any_day, any_weekday; /* the field began with '*' */
};

/* A wall-clock time in some zone: what a cron expression is matched to. */
struct sched_civil {
    int year, month, day, hour, minute; /* month 1-12, day 1-31 */
};

/* sched_cron_parse reads expr: five fields (minute, hour, day of month,
 * month, weekday) of '*', numbers, ranges (a-b), steps (x/n), lists
 * (a,b), names (JAN-DEC, SUN-SAT; weekday 7 is Sunday too), or one of
 * @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly. When
 * both day fields are restricted, a day matching either runs (cron's
 * rule). Returns 0 with *out set, or -EINVAL with the reason in err
 * (len bytes), e.g. an expression that can never match (30 February). */
STEPQ_MUST_CHECK int sched_cron_parse(const char *expr, struct sched_cron *out,
                                      char *err, size_t len);

/* sched_cron_matches tells whether c allows the wall-clock minute t. */
bool sched_cron_matches(const struct sched_cron *c,
                        const struct sched_civil *t);

/* sched_zone_check tells whether tz names a zone of the tz database
 * ("Europe/Berlin", "UTC"). Returns 0, or -EINVAL with the reason in err. */
STEPQ_MUST_CHECK int sched_zone_check(const char *tz, char *err, size_t len);

/* sched_next finds the first slot of c in zone tz strictly after the
 * instant after: 0 with *slot set, -ENOENT when there is none in the
 * next ten years, -EINVAL when tz is not a zone. */
STEPQ_MUST_CHECK int sched_next(const struct sched_cron *c, const char *tz,
                                int64_t after, int64_t *slot);

/* sched_civil_of gives the wall-clock time of instant t in zone tz
 * (seconds dropped). Returns 0, or -EINVAL when tz is not a zone. */
STEPQ_MUST_CHECK int sched_civil_of(const char *tz, int64_t t,
                                    struct sched_civil *out);

#endif

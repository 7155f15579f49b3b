/* internal.h: what sched/'s files share (private to sched/). */
#ifndef STEPQ_SCHED_INTERNAL_H
#define STEPQ_SCHED_INTERNAL_H

#include <stdint.h>

#include "sched/sched.h"

/* How far the search for a matching minute goes. */
#define SCHED_SEARCH_YEARS 40

/* sched__civil_next moves t (a wall-clock minute) on to the first minute
 * at or after it that c allows: 0, or -ENOENT when none comes within
 * SCHED_SEARCH_YEARS (t is then somewhere in between). */
int sched__civil_next(const struct sched_cron *c, struct sched_civil *t);

/* sched__civil_step moves t on by one minute. */
void sched__civil_step(struct sched_civil *t);

/* sched__days_from_civil is the day y-m-d, counted from 1970-01-01. */
int64_t sched__days_from_civil(int y, int m, int d);

/* sched__days_in_month is how many days month m of year y has. */
int sched__days_in_month(int year, int month);

#endif

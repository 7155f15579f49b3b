/* zone.c: wall-clock times in a zone of the tz database, and the next
 * slot of an expression there. The C library knows the zones: TZ is set
 * to the zone for the length of a call and put back after. */
#define _DEFAULT_SOURCE /* tm_gmtoff */
#include "sched/sched.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "sched/internal.h"

int
sched_zone_check(const char *tz, char *err, size_t len)
{
    const char *dir = getenv("TZDIR");
    char path[1024], magic[4];
    int fd;
    ssize_t n = 0;

    if (strcmp(tz, "UTC") == 0)
        return 0;
    if (tz[0] == '\0' || tz[0] == '/' || tz[0] == '.' || strstr(tz, "..") ||
        strspn(tz, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                   "0123456789/_+-") != strlen(tz)) {
        snprintf(err, len,
                 "%s is not a time zone name (such as "
                 "Europe/Berlin or UTC)",
                 tz);
        return -EINVAL;
    }
    snprintf(path, sizeof(path), "%s/%s",
             dir != NULL && dir[0] != '\0' ? dir : "/usr/share/zoneinfo", tz);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, magic, sizeof(magic));
        close(fd);
    }
    if (n != 4 || memcmp(magic, "TZif", 4) != 0) {
        snprintf(err, len,
                 "unknown time zone %s (not in the tz database, "
                 "%s)",
                 tz, path);
        return -EINVAL;
    }
    return 0;
}

/* TZ as it was before a call, put back by zone_end. */
struct saved_tz {
    char *was; /* owned; NULL: TZ was not set */
};

static int
zone_begin(const char *tz, struct saved_tz *s)
{
    char err[256];
    const char *was = getenv("TZ");

    if (sched_zone_check(tz, err, sizeof(err)) != 0)
        return -EINVAL;
    s->was = was != NULL ? xstrdup(was) : NULL;
    if (setenv("TZ", tz, 1) != 0) {
        free(s->was);
        return -EINVAL;
    }
    tzset();
    return 0;
}

void
sched_zone_pin(void)
{
    if (getenv("TZ") == NULL)
        (void)setenv("TZ", ":/etc/localtime", 1);
}

static void
zone_end(struct saved_tz *s)
{
    if (s->was != NULL)
        (void)setenv("TZ", s->was, 1);
    else
        (void)unsetenv("TZ");
    tzset();
    free(s->was);
}

/* The zone's offset from UTC at instant t, in seconds (east positive). */
static int64_t
offset_at(int64_t t)
{
    time_t tt = (time_t)t;
    struct tm tm;

    if (localtime_r(&tt, &tm) == NULL)
        return 0;
    return tm.tm_gmtoff;
}

/* The instants of wall-clock time local (as seconds counted like UTC's):
 * *first and *second, the same one unless the clock shows it twice (an
 * hour that repeats). When the clock never shows it (an hour that is
 * skipped), both are the jump and it returns false. One change of offset
 * within a day either side is assumed, as every zone of the tz database
 * has. */
static bool
instants_of(int64_t local, int64_t *first, int64_t *second)
{
    int64_t o1 = offset_at(local - 86400), o2 = offset_at(local + 86400);
    int64_t t1 = local - o1, t2 = local - o2, lo, hi;
    bool v1 = offset_at(t1) == o1, v2 = offset_at(t2) == o2;

    if (v1 && v2) {
        *first = t1 < t2 ? t1 : t2;
        *second = t1 < t2 ? t2 : t1;
        return true;
    }
    if (v1 || v2) {
        *first = *second = v1 ? t1 : t2;
        return true;
    }
    /* Skipped: the change of offset lies between the two; find it. */
    lo = t1 < t2 ? t1 : t2;
    hi = t1 < t2 ? t2 : t1;
    int64_t before = offset_at(lo);
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (offset_at(mid) == before)
            lo = mid;
        else
            hi = mid;
    }
    *first = *second = hi;
    return false;
}

static int64_t
local_seconds(const struct sched_civil *t)
{
    return sched__days_from_civil(t->year, t->month, t->day) * 86400 +
           t->hour * 3600 + t->minute * 60;
}

static void
civil_at(int64_t t, struct sched_civil *out)
{
    time_t tt = (time_t)t;
    struct tm tm;

    if (localtime_r(&tt, &tm) == NULL)
        memset(&tm, 0, sizeof(tm));
    out->year = tm.tm_year + 1900;
    out->month = tm.tm_mon + 1;
    out->day = tm.tm_mday;
    out->hour = tm.tm_hour;
    out->minute = tm.tm_min;
}

int
sched_civil_of(const char *tz, int64_t t, struct sched_civil *out)
{
    struct saved_tz s;

    if (zone_begin(tz, &s) != 0)
        return -EINVAL;
    civil_at(t, out);
    zone_end(&s);
    return 0;
}

/* The longest a zone's clock goes back (Antarctica/Troll: 2 hours). */
#define FALL_BACK_MAX_S (3 * 3600)

/* The first slot of c strictly after `after`, with TZ already the zone. */
static int
next_here(const struct sched_cron *c, int64_t after, int64_t *slot)
{
    bool follows = c->any_minute || c->any_hour, shown;
    int64_t best = INT64_MAX, first, second;
    struct sched_civil t;
    int rc;

    /* Wall-clock minutes in order give first instants that never go back
     * (the first of a repeated hour, the jump for a skipped one), so the
     * first match whose instant is after `after` is the next slot of a
     * job at fixed times. A job that follows the clock also has the
     * second instants of a repeated hour, which come after the first
     * instants of later minutes: the walk goes on while those are not
     * past the best found, and starts a repeated hour's length early
     * when the clock goes back soon after `after` (a second round whose
     * minutes are earlier on the clock than `after`'s). */
    civil_at(follows && offset_at(after + FALL_BACK_MAX_S) < offset_at(after)
                 ? after - FALL_BACK_MAX_S
                 : after,
             &t);
    for (;;) {
        if ((rc = sched__civil_next(c, &t)) != 0)
            break;
        shown = instants_of(local_seconds(&t), &first, &second);
        if (first >= best)
            break;
        if (shown || !follows) {
            if (first > after)
                best = first;
            if (follows && second > after && second < best)
                best = second;
        }
        if (best != INT64_MAX && !follows)
            break;
        sched__civil_step(&t);
    }
    if (best == INT64_MAX)
        return rc != 0 ? rc : -ENOENT;
    *slot = best;
    return 0;
}

int
sched_next(const struct sched_cron *c, const char *tz, int64_t after,
           int64_t *slot)
{
    struct saved_tz s;
    int rc;

    if (zone_begin(tz, &s) != 0)
        return -EINVAL;
    rc = next_here(c, after, slot);
    zone_end(&s);
    return rc;
}

int
sched_next_n(const struct sched_cron *c, const char *tz, int64_t after,
             int64_t until, int64_t *slots, size_t max, size_t *n)
{
    struct saved_tz s;
    size_t got = 0;

    if (zone_begin(tz, &s) != 0)
        return -EINVAL;
    while (got < max && next_here(c, after, &slots[got]) == 0 &&
           slots[got] <= until)
        after = slots[got++];
    zone_end(&s);
    *n = got;
    return 0;
}

int
sched_due(const struct sched_cron *c, const char *tz,
          enum config_catch_up catch_up, int64_t from, int64_t now,
          int64_t *slots, size_t max, size_t *n, int64_t *done)
{
    struct saved_tz s;
    size_t got = 0, keep = catch_up == CONFIG_CATCH_UP_ALL ? max : 1;
    int64_t at = from, slot;

    if (keep > max)
        keep = max;
    if (zone_begin(tz, &s) != 0)
        return -EINVAL;
    /* A store left for years: the walk starts a year back at most. */
    if (now - at > SCHED_LOOKBACK_S)
        at = now - SCHED_LOOKBACK_S;
    /* Keep the last `keep` slots in (from, now], oldest first. */
    while (keep > 0 && next_here(c, at, &slot) == 0 && slot <= now) {
        if (catch_up != CONFIG_CATCH_UP_NONE || now - slot <= SCHED_LATE_S) {
            if (got == keep) {
                memmove(slots, slots + 1, (keep - 1) * sizeof(*slots));
                got--;
            }
            slots[got++] = slot;
        }
        at = slot;
    }
    zone_end(&s);
    *n = got;
    *done = at > from ? at : from;
    return 0;
}

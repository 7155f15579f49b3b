/* cron.c: five-field cron expressions, read and matched against wall-clock
 * minutes, and the calendar arithmetic of the search for the next one. */
#include "sched/sched.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sched/internal.h"

/* One field: its range and, for months and weekdays, its names. */
struct field {
    const char *what;
    int lo, hi;
    const char *const *names; /* names[i] is lo + i; NULL: numbers only */
};

static const char *const month_names[] = {"JAN", "FEB", "MAR", "APR",
                                          "MAY", "JUN", "JUL", "AUG",
                                          "SEP", "OCT", "NOV", "DEC"};
static const char *const day_names[] = {"SUN", "MON", "TUE", "WED",
                                        "THU", "FRI", "SAT", "SUN"};

static const struct field fields[5] = {{"minute", 0, 59, NULL},
                                       {"hour", 0, 23, NULL},
                                       {"day of month", 1, 31, NULL},
                                       {"month", 1, 12, month_names},
                                       {"day of week", 0, 7, day_names}};

static const struct {
    const char *name, *expr;
} macros[] = {{"@yearly", "0 0 1 1 *"},  {"@annually", "0 0 1 1 *"},
              {"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
              {"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"},
              {"@hourly", "0 * * * *"}};

/* A value of f at *p: a number or (for months and weekdays) a name. */
static int
value(const struct field *f, const char **p, int *out)
{
    const char *s = *p;

    if (isdigit((unsigned char)*s)) {
        long v = 0;
        while (isdigit((unsigned char)*s) && v <= 1000)
            v = v * 10 + (*s++ - '0');
        if (v < f->lo || v > f->hi)
            return -ERANGE;
        *out = (int)v;
        *p = s;
        return 0;
    }
    for (int i = 0; f->names != NULL && i <= f->hi - f->lo; i++) {
        if (strncasecmp(s, f->names[i], 3) == 0 &&
            !isalpha((unsigned char)s[3])) {
            *out = f->lo + i;
            *p = s + 3;
            return 0;
        }
    }
    return -EINVAL;
}

/* One element of a list: *, a, a-b, each with an optional /step. */
static int
element(const struct field *f, const char **p, uint64_t *bits, char *err,
        size_t len)
{
    int a = f->lo, b = f->hi, step = 1, rc = 0;
    bool single = false;
    const char *s = *p;

    if (*s == '*') {
        s++;
    } else if ((rc = value(f, &s, &a)) == 0) {
        b = a;
        single = *s != '-';
        if (!single) {
            s++;
            rc = value(f, &s, &b);
            if (rc == 0 && f->hi == 7 && b == 0 && a > 0)
                b = 7; /* "FRI-SUN": Sunday ending a range is 7 */
        }
    }
    if (rc == 0 && *s == '/') {
        s++;
        if (!isdigit((unsigned char)*s))
            rc = -EINVAL;
        for (step = 0; rc == 0 && isdigit((unsigned char)*s) && step <= 100;)
            step = step * 10 + (*s++ - '0');
        if (rc == 0 && (step < 1 || step > f->hi - f->lo + 1)) {
            snprintf(err, len, "%s: a step of %d is not 1 to %d", f->what, step,
                     f->hi - f->lo + 1);
            return -EINVAL;
        }
        if (rc == 0 && single)
            b = f->hi; /* "5/15": from 5 to the end, as cron reads it */
    }
    if (rc == 0 && a > b)
        rc = -ERANGE;
    if (rc != 0) {
        /* Quoted, so that an empty element ("1,,2") shows as ''. */
        snprintf(err, len, "%s: '%.*s' is not %s", f->what,
                 (int)strcspn(*p, ", \t"), *p,
                 rc == -ERANGE ? "in range" : "a value, range or step");
        return -EINVAL;
    }
    for (int v = a; v <= b; v += step)
        *bits |= (uint64_t)1 << v;
    *p = s;
    return 0;
}

static int
field(const struct field *f, const char **p, uint64_t *bits, char *err,
      size_t len)
{
    *bits = 0;
    for (;;) {
        if (element(f, p, bits, err, len) != 0)
            return -EINVAL;
        if (**p != ',')
            break;
        (*p)++;
    }
    if (**p != '\0' && **p != ' ' && **p != '\t') {
        snprintf(err, len, "%s: unexpected '%c'", f->what, **p);
        return -EINVAL;
    }
    return 0;
}

int
sched__days_in_month(int year, int month)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;

    return month == 2 && leap ? 29 : days[month - 1];
}

/* Whether some month of c has some day of c (29 February counts). With
 * both day fields restricted either will do, and every weekday comes;
 * otherwise both must hold, and a date that exists falls on each weekday
 * within 40 years (the search's bound). */
static bool
can_match(const struct sched_cron *c)
{
    if (!c->any_day && !c->any_weekday)
        return true;
    for (int m = 1; m <= 12; m++)
        for (int d = 1; d <= (m == 2 ? 29 : sched__days_in_month(2001, m)); d++)
            if ((c->months >> m & 1) && (c->days >> d & 1))
                return true;
    return false;
}

/* The number of fields of expr: runs of characters other than spaces
 * and tabs. */
static int
count_fields(const char *p)
{
    int n = 0;

    for (;;) {
        p += strspn(p, " \t");
        if (*p == '\0')
            return n;
        n++;
        p += strcspn(p, " \t");
    }
}

int
sched_cron_parse(const char *expr, struct sched_cron *out, char *err,
                 size_t len)
{
    struct sched_cron c = {0};
    const char *p = expr;
    uint64_t bits[5];
    int nfields;

    while (*p == ' ' || *p == '\t')
        p++;
    for (size_t i = 0; *p == '@' && i < sizeof(macros) / sizeof(macros[0]);
         i++) {
        size_t n = strlen(macros[i].name);
        if (strncasecmp(p, macros[i].name, n) == 0 &&
            p[n + strspn(p + n, " \t")] == '\0') {
            p = macros[i].expr;
            break;
        }
    }
    /* The count comes first: read field by field, the six fields of
     * Quartz or Spring (seconds first) would be refused for a value out
     * of range in the wrong field, or for a sixth field only after five
     * were read with the wrong meaning. */
    if ((nfields = count_fields(p)) != 5) {
        snprintf(err, len,
                 "expected 5 fields (minute hour day-of-month month "
                 "day-of-week) or @daily..., got %d%s",
                 nfields,
                 nfields == 6 ? " (a seconds field is not supported)" : "");
        return -EINVAL;
    }
    for (int i = 0; i < 5; i++) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (i == 0)
            c.any_minute = *p == '*';
        if (i == 1)
            c.any_hour = *p == '*';
        if (i == 2)
            c.any_day = *p == '*';
        if (i == 4)
            c.any_weekday = *p == '*';
        if (field(&fields[i], &p, &bits[i], err, len) != 0)
            return -EINVAL;
    }
    c.minutes = bits[0];
    c.hours = (uint32_t)bits[1];
    c.days = (uint32_t)bits[2];
    c.months = (uint16_t)bits[3];
    c.weekdays = (uint8_t)((bits[4] | bits[4] >> 7) & 0x7f); /* 7 is 0 */
    if (!can_match(&c)) {
        snprintf(err, len, "no month of it has any of its days");
        return -EINVAL;
    }
    *out = c;
    return 0;
}

int64_t
sched__days_from_civil(int y, int m, int d)
{
    /* Howard Hinnant's days_from_civil: days since 1970-01-01. */
    int64_t yy = m <= 2 ? y - 1 : y;
    int64_t era = (yy >= 0 ? yy : yy - 399) / 400;
    int64_t yoe = yy - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

    return era * 146097 + doe - 719468;
}

static bool
day_matches(const struct sched_cron *c, const struct sched_civil *t)
{
    int64_t days = sched__days_from_civil(t->year, t->month, t->day);
    int wd = (int)(((days % 7) + 11) % 7); /* 1970-01-01 was a Thursday */
    bool dom = c->days >> t->day & 1, dow = c->weekdays >> wd & 1;

    /* Cron's rule: a day field that begins with '*' ("*", "*\/2") is not
     * a restriction of its own kind, so both must hold; two restricted
     * day fields mean either. A plain '*' allows every value. */
    if (c->any_day || c->any_weekday)
        return dom && dow;
    return dom || dow;
}

bool
sched_cron_matches(const struct sched_cron *c, const struct sched_civil *t)
{
    return (c->months >> t->month & 1) && day_matches(c, t) &&
           (c->hours >> t->hour & 1) && (c->minutes >> t->minute & 1);
}

/* The start of the next day, hour or minute after t. */
static void
next_day(struct sched_civil *t)
{
    t->hour = t->minute = 0;
    if (++t->day > sched__days_in_month(t->year, t->month)) {
        t->day = 1;
        if (++t->month > 12) {
            t->month = 1;
            t->year++;
        }
    }
}

void
sched__civil_step(struct sched_civil *t)
{
    if (++t->minute > 59) {
        t->minute = 0;
        if (++t->hour > 23)
            next_day(t);
    }
}

int
sched__civil_next(const struct sched_cron *c, struct sched_civil *t)
{
    /* Each step moves to the start of the next month, day, hour or
     * minute, so forty years take at most some 15,000 steps. */
    int start = t->year;

    while (t->year < start + SCHED_SEARCH_YEARS) {
        if (!(c->months >> t->month & 1)) {
            t->day = sched__days_in_month(t->year, t->month);
            next_day(t);
        } else if (!day_matches(c, t)) {
            next_day(t);
        } else if (!(c->hours >> t->hour & 1)) {
            t->minute = 0;
            if (++t->hour > 23)
                next_day(t);
        } else if (!(c->minutes >> t->minute & 1)) {
            sched__civil_step(t);
        } else {
            return 0;
        }
    }
    return -ENOENT;
}

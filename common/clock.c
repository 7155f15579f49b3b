/* clock.c: wall and monotonic time in ms, and RFC 3339 UTC times. */
#include "common/clock.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t
clock_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
clock_mono_ms(void)
{
    return clock_mono_us() / 1000;
}

int64_t
clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (Howard
 * Hinnant's days_from_civil); avoids timegm(), which is not POSIX. */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

char *
clock_format_utc(int64_t ms, char *buf, size_t len)
{
    time_t secs = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    struct tm tm;

    gmtime_r(&secs, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

static int
digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*p)[i]))
            return -EINVAL;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return 0;
}

static int
days_in_month(int y, int mo)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30,
                                 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

    return mo == 2 && leap ? 29 : days[mo - 1];
}

int
clock_parse_utc(const char *s, int64_t *out)
{
    int y, mo, d, h, mi, sec, oh = 0, om = 0;
    int64_t frac_ms = 0, offset_s = 0;
    const char *p = s;

    if (s == NULL || digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) ||
        *p++ != '-' || digits(&p, 2, &d))
        return -EINVAL;
    if (*p != 'T' && *p != 't' && *p != ' ')
        return -EINVAL;
    p++;
    if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi) || *p++ != ':' ||
        digits(&p, 2, &sec))
        return -EINVAL;
    if (*p == '.') {
        int scale = 100, n = 0;
        p++;
        while (isdigit((unsigned char)*p)) {
            frac_ms += (*p - '0') * scale;
            scale /= 10;
            p++;
            n++;
        }
        if (n == 0 || n > 9) /* at most nanoseconds */
            return -EINVAL;
    }
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1;
        p++;
        if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om))
            return -EINVAL;
        offset_s = sign * (oh * 3600 + om * 60);
    } else {
        return -EINVAL;
    }
    /* A day the month has (not 2026-02-30, which mktime-style arithmetic
     * would move to March), a leap second only at 23:59:60, and no time
     * before the epoch. */
    if (*p != '\0' || y < 1970 || mo < 1 || mo > 12 || d < 1 ||
        d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60 ||
        (sec == 60 && (h != 23 || mi != 59)) || oh > 23 || om > 59)
        return -EINVAL;
    *out = (days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec -
            offset_s) *
               1000 +
           frac_ms;
    return 0;
}

/* The units of a span, and the longest span (ten years). */
static const struct {
    char unit;
    int64_t ms;
} span_units[] = {{'s', 1000}, {'m', 60000}, {'h', 3600000}, {'d', 86400000}};
#define SPAN_MAX_MS (3660 * 86400000LL)

int
clock_parse_span(const char *s, int64_t *ms)
{
    int64_t v = 0;
    size_t n = 0;

    while (s[n] >= '0' && s[n] <= '9' && n < 7)
        v = v * 10 + (s[n++] - '0');
    if (n == 0 || s[n] == '\0' || s[n + 1] != '\0')
        return -EINVAL;
    for (size_t i = 0; i < sizeof(span_units) / sizeof(span_units[0]); i++) {
        if (s[n] == span_units[i].unit && v * span_units[i].ms <= SPAN_MAX_MS) {
            *ms = v * span_units[i].ms;
            return 0;
        }
    }
    return -EINVAL;
}

int
clock_parse_since(const char *s, int64_t now, int64_t *out)
{
    int64_t span;

    if (clock_parse_utc(s, out) == 0)
        return 0;
    if (clock_parse_span(s, &span) != 0)
        return -EINVAL;
    *out = now - span;
    return 0;
}

int
clock_parse_after(const char *s, int64_t *at, int64_t *after)
{
    int64_t span;

    if (clock_parse_utc(s, at) == 0) {
        *after = -1;
        return 0;
    }
    if (clock_parse_span(s + (s[0] == '+'), &span) != 0)
        return -EINVAL;
    *after = span;
    return 0;
}

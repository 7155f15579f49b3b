/* parse.c: the header and text parsers of the policy module.
 *
 * Endpoints put waits in many shapes: Retry-After as seconds or an HTTP date,
 * retry-after-ms, Go durations in x-ratelimit-reset-* ("6m0s", "1.5s",
 * "20ms"), RFC 3339 times in anthropic-ratelimit-*-reset, and prose in error
 * messages ("Please try again in 9m38.016s", "retry after 86400 seconds").
 * Every value here comes from the network, so each parser accepts only what
 * it understands, saturates instead of overflowing, and never reads past
 * the terminating NUL. The two small readers classify and rules share (is
 * a body HTML, is a header the one named) live here too.
 */
#include "policy/policy.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "policy/internal.h"

/* Numbers are accumulated as doubles and clamped, so "99999999999999999h"
 * saturates rather than overflowing an integer. */
static int64_t
clamp_ms(double ms)
{
    if (!(ms >= 0))
        return 0;
    if (ms >= (double)POLICY_MAX_WAIT_MS)
        return POLICY_MAX_WAIT_MS;
    return (int64_t)(ms + 0.5);
}

static const char *
skip_blanks(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* number reads "12", "1.5" or ".5" (no sign, no exponent) at *p. Very long
 * digit runs only lose precision. Returns false when there is no digit. */
static bool
number(const char **p, double *out)
{
    const char *s = *p;
    double v = 0, scale = 0.1;
    bool any = false;

    while (isdigit((unsigned char)*s)) {
        v = v * 10 + (*s - '0');
        s++;
        any = true;
    }
    if (*s == '.' && isdigit((unsigned char)s[1])) {
        s++;
        while (isdigit((unsigned char)*s)) {
            v += (*s - '0') * scale;
            scale /= 10;
            s++;
            any = true;
        }
    }
    if (!any)
        return false;
    *p = s;
    *out = v;
    return true;
}

struct unit {
    const char *name;
    double ms;
    bool word; /* only in prose ("2 seconds"), not in Go durations */
};

/* Longest names first, so "ms" is not read as "m" followed by "s". */
static const struct unit units[] = {
    {"milliseconds", 1, true}, {"millisecond", 1, true},
    {"minutes", 60000, true},  {"seconds", 1000, true},
    {"minute", 60000, true},   {"second", 1000, true},
    {"hours", 3600000, true},  {"msec", 1, true},
    {"mins", 60000, true},     {"secs", 1000, true},
    {"hour", 3600000, true},   {"min", 60000, true},
    {"sec", 1000, true},       {"hrs", 3600000, true},
    {"ms", 1, false},          {"us", 0.001, false},
    {"ns", 0.000001, false},   {"hr", 3600000, true},
    {"h", 3600000, false},     {"m", 60000, false},
    {"s", 1000, false},
};

/* unit_at matches a unit name at p that is not followed by a letter. */
static const struct unit *
unit_at(const char *p, bool words)
{
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(units); i++) {
        size_t n = strlen(units[i].name);
        if (units[i].word && !words)
            continue;
        if (strncmp(p, units[i].name, n) == 0 && !isalpha((unsigned char)p[n]))
            return &units[i];
    }
    return NULL;
}

/* duration_prefix reads one or more "<number><unit>" components at s. In
 * prose mode (words) a blank may separate number and unit and long unit
 * names are allowed. Returns the end, or NULL when nothing was read. */
static const char *
duration_prefix(const char *s, bool words, double *ms)
{
    double total = 0, v;
    const char *p = s;
    bool any = false;

    for (;;) {
        const char *q = p;
        const struct unit *u;
        if (!number(&q, &v))
            break;
        if (words)
            q = skip_blanks(q);
        if ((u = unit_at(q, words)) == NULL)
            break;
        total += v * u->ms;
        p = q + strlen(u->name);
        any = true;
    }
    if (!any)
        return NULL;
    *ms = total;
    return p;
}

int
policy_parse_duration(const char *s, int64_t *ms)
{
    const char *p, *end;
    double v;

    if (s == NULL)
        return -EINVAL;
    p = skip_blanks(s);
    if (p[0] == '0' && *skip_blanks(p + 1) == '\0') {
        *ms = 0;
        return 0;
    }
    end = duration_prefix(p, false, &v);
    if (end == NULL || *skip_blanks(end) != '\0')
        return -EINVAL;
    *ms = clamp_ms(v);
    return 0;
}

static int64_t
days_from_civil(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int
month_index(const char *m)
{
    static const char *const names[] = {"jan", "feb", "mar", "apr",
                                        "may", "jun", "jul", "aug",
                                        "sep", "oct", "nov", "dec"};
    char low[4];

    if (strlen(m) != 3)
        return -1;
    for (int i = 0; i < 3; i++)
        low[i] = (char)tolower((unsigned char)m[i]);
    low[3] = '\0';
    for (int i = 0; i < 12; i++) {
        if (strcmp(low, names[i]) == 0)
            return i + 1;
    }
    return -1;
}

int
policy_parse_http_date(const char *s, int64_t *at_ms)
{
    char wd[16], mon[8];
    int d = 0, y = 0, h = 0, mi = 0, sec = 0, n = -1, m;

    if (s == NULL)
        return -EINVAL;
    s = skip_blanks(s);
    /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
    if (sscanf(s, "%3[A-Za-z], %2d %3[A-Za-z] %4d %2d:%2d:%2d GMT%n", wd, &d,
               mon, &y, &h, &mi, &sec, &n) != 7 ||
        n < 0) {
        /* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"; two-digit years are
         * read in the window 1970..2069. */
        n = -1;
        if (sscanf(s, "%9[A-Za-z], %2d-%3[A-Za-z]-%2d %2d:%2d:%2d GMT%n", wd,
                   &d, mon, &y, &h, &mi, &sec, &n) == 7 &&
            n >= 0)
            y += y < 70 ? 2000 : 1900;
    }
    if (n < 0) {
        /* asctime: "Sun Nov  6 08:49:37 1994" */
        if (sscanf(s, "%3[A-Za-z] %3[A-Za-z] %2d %2d:%2d:%2d %4d%n", wd, mon,
                   &d, &h, &mi, &sec, &y, &n) != 7 ||
            n < 0)
            return -EINVAL;
    }
    if (*skip_blanks(s + n) != '\0')
        return -EINVAL;
    m = month_index(mon);
    if (m < 0 || d < 1 || d > 31 || y < 1970 || y > 9999 || h < 0 || h > 23 ||
        mi < 0 || mi > 59 || sec < 0 || sec > 60)
        return -EINVAL;
    *at_ms =
        (days_from_civil(y, m, d) * 86400 + h * 3600 + mi * 60 + sec) * 1000;
    return 0;
}

/* decimal reads a whole non-negative decimal number, blanks around it
 * allowed, scaled by unit (ms per unit). */
static int
decimal(const char *s, double unit, int64_t *out)
{
    const char *p;
    double v;

    if (s == NULL)
        return -EINVAL;
    p = skip_blanks(s);
    if (!number(&p, &v) || *skip_blanks(p) != '\0')
        return -EINVAL;
    *out = clamp_ms(v * unit);
    return 0;
}

int
policy_parse_retry_after(const char *s, int64_t now_ms, int64_t *wait_ms)
{
    int64_t at;

    if (s == NULL)
        return -EINVAL;
    if (decimal(s, 1000, wait_ms) == 0)
        return 0;
    if (policy_parse_http_date(s, &at) != 0)
        return -EINVAL;
    *wait_ms = at > now_ms
                   ? (at - now_ms > POLICY_MAX_WAIT_MS ? POLICY_MAX_WAIT_MS
                                                       : at - now_ms)
                   : 0;
    return 0;
}

int
policy__parse_ms(const char *s, int64_t *out)
{
    return decimal(s, 1, out);
}

int
policy_parse_count(const char *s, int64_t *out)
{
    const char *p;
    int64_t v = 0;

    if (s == NULL)
        return -EINVAL;
    p = skip_blanks(s);
    if (!isdigit((unsigned char)*p))
        return -EINVAL;
    while (isdigit((unsigned char)*p)) {
        int dgt = *p++ - '0';
        v = v > (INT64_MAX - dgt) / 10 ? INT64_MAX : v * 10 + dgt;
    }
    if (*skip_blanks(p) != '\0')
        return -EINVAL;
    *out = v;
    return 0;
}

int
policy__parse_rfc3339(const char *s, int64_t *at_ms)
{
    char buf[64];
    size_t n;

    if (s == NULL)
        return -EINVAL;
    s = skip_blanks(s);
    n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n == 0 || n >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return clock_parse_utc(buf, at_ms);
}

int
policy__text_wait(const char *text, int64_t *ms)
{
    /* Gemini's RetryInfo.retryDelay is a protobuf Duration ("34s"); it is
     * found as text so that a JSON body, a truncated one and a Python repr
     * of one all work. */
    static const char *const phrases[] = {
        "try again in", "retry in", "retry after", "retry-after:", "wait for"};
    const char *p;
    double v;

    for (p = strstr(text, "retrydelay"); p != NULL;
         p = strstr(p + 1, "retrydelay")) {
        const char *q = p + strlen("retrydelay");
        for (int i = 0; i < 6 && strchr("\"': =", *q) != NULL && *q; i++)
            q++;
        if (duration_prefix(q, false, &v) != NULL) {
            *ms = clamp_ms(v);
            return 0;
        }
    }
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(phrases); i++) {
        for (p = strstr(text, phrases[i]); p != NULL;
             p = strstr(p + 1, phrases[i])) {
            const char *q = skip_blanks(p + strlen(phrases[i]));
            if (duration_prefix(q, true, &v) != NULL) {
                *ms = clamp_ms(v);
                return 0;
            }
        }
    }
    return -ENOENT;
}

/* ---- text and header names ---- */

bool
policy__is_html(const struct policy__text *t)
{
    const char *p = t->s;

    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    return strncmp(p, "<!doctype html", 14) == 0 || strncmp(p, "<html", 5) == 0;
}

bool
policy__header_is(const struct policy_header *h, const char *name)
{
    const char *a = h->name;

    if (a == NULL)
        return false;
    while (*a != '\0' && *name != '\0' &&
           tolower((unsigned char)*a) == (unsigned char)*name) {
        a++;
        name++;
    }
    return *a == '\0' && *name == '\0';
}

/* log.c: log lines on stderr (or a sink), and the JSON line of one
 * attempt. */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

static enum log_level max_level = LOG_LEVEL_WARN;

static const char *const names[] = {"error", "warn", "info", "debug"};

static log_sink_fn *sink;
static void *sink_arg;

void
log_set_sink(log_sink_fn *fn, void *arg)
{
    sink = fn;
    sink_arg = arg;
}

void
log_set_level(enum log_level level)
{
    max_level = level;
}

int
log_level_from_name(const char *name, enum log_level *out)
{
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(names); i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -EINVAL;
}

void
log_write(enum log_level level, const char *file, int line, const char *fmt,
          ...)
{
    char msg[1024];
    const char *base;
    va_list ap;

    if (level > max_level)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (sink != NULL) {
        sink(level, msg, sink_arg);
        return;
    }
    base = strrchr(file, '/');
    base = base ? base + 1 : file;
    /* One fprintf call so concurrent writers do not interleave a line. */
    fprintf(stderr, "stepq %s %s:%d: %s\n", names[level], base, line, msg);
}

/* The attempt line is written by hand rather than built as a cJSON tree:
 * it is printed once per attempt, and cJSON prints each number with
 * sprintf and reads it back with sscanf. The text is the same as
 * cJSON_PrintUnformatted's: keys in this order, integers in decimal,
 * strings escaped as cJSON escapes them. */
static void
line_int(struct xbuf *l, const char *key, long long v)
{
    char num[64];
    int n = snprintf(num, sizeof(num), ",\"%s\":%lld", key, v);
    xbuf_put(l, num, (size_t)n);
}

/* key (NULL: none) and the JSON string of s[0..n), or null for NULL. */
static void
line_str(struct xbuf *l, const char *key, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";

    if (key != NULL) {
        xbuf_lit(l, ",\"");
        xbuf_put(l, key, strlen(key));
        xbuf_lit(l, "\":");
    }
    if (s == NULL) {
        xbuf_lit(l, "null");
        return;
    }
    xbuf_lit(l, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[6] = {'\\', 0, '0', '0', 0, 0};
        size_t k = 2;

        if (c >= 32 && c != '"' && c != '\\') {
            size_t run = i;
            while (run < n && (unsigned char)s[run] >= 32 && s[run] != '"' &&
                   s[run] != '\\')
                run++;
            xbuf_put(l, s + i, run - i);
            i = run - 1;
            continue;
        }
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            esc[1] = 'u';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            k = 6;
        }
        xbuf_put(l, esc, k);
    }
    xbuf_lit(l, "\"");
}

static void
line_cstr(struct xbuf *l, const char *key, const char *s)
{
    line_str(l, key, s, s ? strlen(s) : 0);
}

void
log_attempt(const struct attempt_log *a)
{
    struct xbuf l = {0};
    char num[32];

    xbuf_lit(&l, "{\"job\":");
    xbuf_put(&l, num, (size_t)snprintf(num, sizeof(num), "%lld", a->job));
    line_cstr(&l, "step", a->step);
    line_int(&l, "attempt", a->attempt);
    line_cstr(&l, "tier", a->tier);
    if (a->status > 0)
        line_int(&l, "status", a->status);
    else
        xbuf_lit(&l, ",\"status\":null");
    line_cstr(&l, "outcome", a->outcome);
    line_cstr(&l, "reason", a->reason);
    line_cstr(&l, "decision", a->decision);
    line_int(&l, "delay_ms", a->delay_ms);
    line_int(&l, "latency_ms", a->latency_ms);
    if (a->error != NULL)
        line_cstr(&l, "transport_error", a->error);
    if (a->body != NULL) {
        /* The body may be binary or cut mid-character: keep it valid
         * JSON by replacing what is not UTF-8 (up to a NUL, as a C
         * string). */
        char *copy = xstrndup(a->body, a->body_len);
        json_utf8_scrub(copy, strlen(copy));
        line_cstr(&l, "body", copy);
        free(copy);
    } else {
        xbuf_lit(&l, ",\"body\":null");
    }
    xbuf_lit(&l, "}\n");
    /* One write, so concurrent writers do not interleave a line. */
    fwrite(l.p, 1, l.len, stderr);
    free(l.p);
}

/* log.c: log lines on stderr, and the JSON line of one attempt. */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/json.h"
#include "common/xalloc.h"

static enum log_level max_level = LOG_LEVEL_WARN;

static const char *const names[] = {"error", "warn", "info", "debug"};

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
    base = strrchr(file, '/');
    base = base ? base + 1 : file;
    /* One fprintf call so concurrent writers do not interleave a line. */
    fprintf(stderr, "stepq %s %s:%d: %s\n", names[level], base, line, msg);
}

void
log_attempt(const struct attempt_log *a)
{
    cJSON *o = cJSON_CreateObject();
    char *line;

    cJSON_AddNumberToObject(o, "job", (double)a->job);
    json_add_string(o, "step", a->step);
    cJSON_AddNumberToObject(o, "attempt", a->attempt);
    json_add_string(o, "tier", a->tier);
    if (a->status > 0)
        cJSON_AddNumberToObject(o, "status", a->status);
    else
        cJSON_AddNullToObject(o, "status");
    json_add_string(o, "outcome", a->outcome);
    json_add_string(o, "reason", a->reason);
    json_add_string(o, "decision", a->decision);
    cJSON_AddNumberToObject(o, "delay_ms", (double)a->delay_ms);
    cJSON_AddNumberToObject(o, "latency_ms", (double)a->latency_ms);
    if (a->error != NULL)
        cJSON_AddStringToObject(o, "transport_error", a->error);
    if (a->body != NULL) {
        /* The body may be binary or cut mid-character: keep it valid
         * JSON by replacing what is not UTF-8. */
        char *copy = xstrndup(a->body, a->body_len);
        json_utf8_scrub(copy, strlen(copy));
        cJSON_AddStringToObject(o, "body", copy);
        free(copy);
    } else {
        cJSON_AddNullToObject(o, "body");
    }
    line = cJSON_PrintUnformatted(o);
    if (line != NULL) {
        fprintf(stderr, "%s\n", line);
        free(line);
    }
    cJSON_Delete(o);
}

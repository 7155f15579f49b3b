#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static enum log_level max_level = LOG_ERROR;

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

/* log.h: one line per message on stderr, prefixed with level and file:line.
 *
 * The level comes from log_set_level() (cli maps -v and $STEPQ_LOG to it).
 * Errors and warnings are shown by default.  Logging never fails the caller.
 */
#ifndef STEPQ_COMMON_LOG_H
#define STEPQ_COMMON_LOG_H

#include <stddef.h>

#include "common/defs.h"

/* Prefixed LOG_LEVEL_ so that a file may also include <syslog.h>, whose
 * LOG_ERR, LOG_INFO and LOG_DEBUG are macros. */
enum log_level {
    LOG_LEVEL_ERROR = 0,
    LOG_LEVEL_WARN,
    LOG_LEVEL_INFO,
    LOG_LEVEL_DEBUG
};

/* log_set_level sets the most verbose level printed. */
void log_set_level(enum log_level level);
/* log_level_from_name maps "error|warn|info|debug" to a level; -EINVAL else. */
int log_level_from_name(const char *name, enum log_level *out);
/* A receiver of log lines in place of standard error: level and the
 * message alone (no prefix), borrowed for the call. */
typedef void log_sink_fn(enum log_level level, const char *msg, void *arg);

/* log_set_sink sends every line log_write would print to fn, with arg,
 * instead of standard error; NULL: standard error again. libstepq uses it
 * so that a library never writes to its host's standard error. */
void log_set_sink(log_sink_fn *fn, void *arg);

/* log_write writes one formatted line; use the log_* macros instead. */
void log_write(enum log_level level, const char *file, int line,
               const char *fmt, ...) STEPQ_PRINTF(4, 5);

/* One attempt, as the per-attempt JSON line of docs/reference.md ("CLI: work").
 * Strings are borrowed; NULL prints null. body is printed only when not NULL.
 */
struct attempt_log {
    long long job;
    const char *step;
    int attempt;
    const char *tier;
    int status; /* 0: none (transport error) */
    const char *outcome;
    const char *reason;
    const char *decision;
    long long delay_ms;
    long long latency_ms;
    const char *error; /* transport error name, or NULL */
    const char *body;  /* raw body on failure (len bytes), or NULL */
    size_t body_len;
};

/* log_attempt writes one JSON line for an attempt on stderr, whatever the
 * log level (it is the worker's output, not a diagnostic). */
void log_attempt(const struct attempt_log *a);

#define log_error(...)                                                         \
    log_write(LOG_LEVEL_ERROR, __FILE__, __LINE__, __VA_ARGS__)
#define log_warn(...) log_write(LOG_LEVEL_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define log_info(...) log_write(LOG_LEVEL_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define log_debug(...)                                                         \
    log_write(LOG_LEVEL_DEBUG, __FILE__, __LINE__, __VA_ARGS__)

#endif

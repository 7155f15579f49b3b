/* clock.h: wall-clock and monotonic time, and RFC 3339 UTC timestamps.
 *
 * Modules that must be testable without a clock (policy) take time as an
 * argument; this header is for the code at the edges.
 */
#ifndef STEPQ_COMMON_CLOCK_H
#define STEPQ_COMMON_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* clock_now_ms returns milliseconds since the Unix epoch (CLOCK_REALTIME). */
int64_t clock_now_ms(void);
/* clock_mono_ms returns a monotonic millisecond count (CLOCK_MONOTONIC). */
int64_t clock_mono_ms(void);
/* clock_mono_us returns the same clock in microseconds. */
int64_t clock_mono_us(void);
/* clock_format_utc writes ms since the epoch as "2026-11-30T03:40:00Z" (whole
 * seconds) into buf of len bytes (at least 21). Returns buf. */
char *clock_format_utc(int64_t ms, char *buf, size_t len);
/* clock_parse_utc parses RFC 3339 ("2026-11-30T03:40:00Z",
 * "2026-11-30T03:40:00.5+01:00") into ms since the epoch. Returns 0, or
 * -EINVAL for anything else (a day the month lacks, a year before 1970, a
 * second 60 other than at 23:59, more than 9 digits of fraction); *out
 * is untouched on failure. */
int clock_parse_utc(const char *s, int64_t *out);

/* clock_parse_since reads "since" as a report takes it: a span back from
 * now (ms) such as "90m", "24h", "7d" or "3600s" (at most ten years), or
 * an RFC 3339 time. Returns 0 with *out set, or -EINVAL. */
int clock_parse_since(const char *s, int64_t now, int64_t *out);

/* clock_parse_span reads a span such as "90s", "10m", "2h" or "1d" (a
 * whole number and one unit, at most ten years) into ms. Returns 0, or
 * -EINVAL with *ms untouched. */
int clock_parse_span(const char *s, int64_t *ms);

/* clock_parse_after reads a time to wait for (a run_at): an RFC 3339
 * time (*at set, *after -1), or a span from now, "+10m" or "10m" (*after
 * set to its ms, *at untouched: the caller adds its own now). Returns 0,
 * or -EINVAL with both untouched (a span back, "-10m", is not one). */
int clock_parse_after(const char *s, int64_t *at, int64_t *after);

#endif

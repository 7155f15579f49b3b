/* internal.h: declarations private to worker/ (not a public interface). */
#ifndef STEPQ_WORKER_INTERNAL_H
#define STEPQ_WORKER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* policy__parse_count parses a non-negative whole number ("4999"), with
 * surrounding blanks allowed; saturates at INT64_MAX. 0 or -EINVAL. */
int policy__parse_count(const char *s, int64_t *out);

/* policy__parse_ms parses a non-negative decimal number of milliseconds
 * ("1500", "12.5"), clamped to POLICY_MAX_WAIT_MS. 0 or -EINVAL. */
int policy__parse_ms(const char *s, int64_t *out);

/* policy__parse_rfc3339 trims s and parses an RFC 3339 time into ms since
 * the epoch. 0 or -EINVAL. */
int policy__parse_rfc3339(const char *s, int64_t *at_ms);

/* policy__text_wait finds the wait an error text asks for, in lower-case
 * NUL-terminated text: Gemini "retrydelay": "34s", or a phrase such as
 * "try again in 9m38.016s", "retry after 86400 seconds", "try again in 644ms".
 * Returns 0 with *ms set, or -ENOENT when there is none. */
int policy__text_wait(const char *text, int64_t *ms);

#endif

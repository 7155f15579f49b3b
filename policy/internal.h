/* internal.h: declarations shared inside policy/ only (and its fuzz and
 * unit tests). Nothing of worker/ is included here or in policy/. */
#ifndef STEPQ_POLICY_INTERNAL_H
#define STEPQ_POLICY_INTERNAL_H

#include <stdint.h>

#include "policy/policy.h"

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

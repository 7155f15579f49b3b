/* internal.h: declarations shared inside policy/ only (and its fuzz and
 * unit tests). Nothing of worker/ is included here or in policy/.
 *
 * Who defines what: parse.c the parsers and text readers, rules.c
 * policy__rules_match, bodies.c policy__body_2xx, gateway.c policy__gateway,
 * classify.c policy__set.
 */
#ifndef STEPQ_POLICY_INTERNAL_H
#define STEPQ_POLICY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

/* User rules see up to 4 MiB of the body (the default max_response_bytes);
 * 2xx bodies larger than that are not parsed as JSON. */
#define POLICY__RULE_BYTES ((size_t)4 * 1024 * 1024)

/* A lower-cased, NUL-terminated copy of the start of a body, made by
 * classify; NUL bytes in the body are blanks in s. */
struct policy__text {
    char *s; /* owned */
    size_t len;
};

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

/* policy__is_html tells whether the text starts (after blanks) as an HTML
 * page: a proxy's error page, not an endpoint's answer. */
bool policy__is_html(const struct policy__text *t);

/* policy__header_is compares h's name case-insensitively with name, which
 * must be lower-case. A NULL name matches nothing. */
bool policy__header_is(const struct policy_header *h, const char *name);

/* policy__set sets the outcome and reason of out: why, and its name as
 * the reason text (NULL for POLICY_REASON_NONE). */
void policy__set(struct policy_class *out, enum policy_outcome o,
                 enum policy_reason why);

/* policy__rules_match tries the user rules in order against in (NULL or
 * empty rules: none match). On a match it sets out's outcome, reason and
 * rule (the reason borrowed from rules) and returns the rule's index;
 * otherwise it returns -1 and leaves out untouched. */
int policy__rules_match(const policy_rules *rules,
                        const struct policy_input *in,
                        struct policy_class *out);

/* policy__body_2xx reads the body of a 2xx answer, t being its text. When
 * it is an error object it returns the status the object carries (0 when it
 * names none) and leaves out untouched; otherwise it classifies the success
 * into out and returns -1. */
int policy__body_2xx(const struct policy_input *in,
                     const struct policy__text *t, struct policy_class *out);

/* policy__gateway reads an error answer (not a 2xx) for the shapes a
 * gateway gives of its own failures (gateway.c): a 400 {"status":
 * "failure"} is gateway_config, the gateway's exception wrapped in
 * {"html-message"} on a 5xx is gateway_error, an HTML page wrapped so is
 * html_error. Sets out and returns true on a match; otherwise returns
 * false and leaves out untouched. status is the answer's (or that of the
 * error object a 2xx carried); t is the body's text (classify's). */
bool policy__gateway(const struct policy_input *in, int status,
                     const struct policy__text *t, struct policy_class *out);

#endif

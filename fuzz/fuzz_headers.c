/* fuzz_headers.c: libFuzzer target for the header-value parsers:
 * policy_parse_duration, policy_parse_http_date, policy_parse_retry_after,
 * and the internal count, milliseconds, RFC 3339 and text-wait parsers.
 * Each gets the input as one NUL-terminated string in an exact-size buffer
 * and must leave its output untouched on failure and in range on success. */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/internal.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define UNTOUCHED INT64_C(-7777)

static void
check(int rc, int64_t v, int64_t lo, int64_t hi)
{
    if (rc != 0 && v != UNTOUCHED)
        abort(); /* out-param written on failure */
    if (rc == 0 && (v < lo || v > hi))
        abort(); /* out of the documented range */
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int64_t now = 1764473000123;
    char *s = malloc(size + 1);
    int64_t v;
    int rc;

    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    v = UNTOUCHED;
    rc = policy_parse_duration(s, &v);
    check(rc, v, 0, POLICY_MAX_WAIT_MS);
    v = UNTOUCHED;
    rc = policy_parse_http_date(s, &v);
    check(rc, v, INT64_MIN, INT64_MAX);
    v = UNTOUCHED;
    rc = policy_parse_retry_after(s, now, &v);
    check(rc, v, 0, POLICY_MAX_WAIT_MS);
    v = UNTOUCHED;
    rc = policy_parse_count(s, &v);
    check(rc, v, 0, INT64_MAX);
    v = UNTOUCHED;
    rc = policy__parse_ms(s, &v);
    check(rc, v, 0, POLICY_MAX_WAIT_MS);
    v = UNTOUCHED;
    rc = policy__parse_rfc3339(s, &v);
    check(rc, v, INT64_MIN, INT64_MAX);
    /* text_wait expects lower-case text. */
    for (size_t i = 0; i < size; i++)
        s[i] = (char)tolower((unsigned char)s[i]);
    v = UNTOUCHED;
    rc = policy__text_wait(s, &v);
    if (rc == 0 && v < 0)
        abort();
    free(s);
    return 0;
}

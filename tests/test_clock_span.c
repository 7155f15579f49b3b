/* test_clock_span.c: spans and times to wait for, as `enqueue --run-at`,
 * a job's run_at and `jobs wait --timeout` read them (common/clock.c). */
#include "tests/support/support.h"

#include <errno.h>
#include <stdint.h>

#include "common/clock.h"

static const struct {
    const char *s;
    int rc;
    int64_t after; /* clock_parse_after's *after: ms, or -1 for a time */
} cases[] = {
    {"+90s", 0, 90000},
    {"+10m", 0, 600000},
    {"+2h", 0, 7200000},
    {"+1d", 0, 86400000},
    {"10m", 0, 600000},
    {"+0s", 0, 0},
    {"+3660d", 0, 3660LL * 86400000},
    {"2026-11-30T03:40:00Z", 0, -1},
    {"-10m", -EINVAL, 0},
    {"+10x", -EINVAL, 0},
    {"+", -EINVAL, 0},
    {"+1h30m", -EINVAL, 0},
    {"+3661d", -EINVAL, 0},
    {"++1d", -EINVAL, 0},
    {"", -EINVAL, 0},
};

START_TEST(test_after_reads_spans_and_times)
{
    int64_t at = 7, after = 7;
    int rc = clock_parse_after(cases[_i].s, &at, &after);

    ck_assert_msg(rc == cases[_i].rc, "%s: %d", cases[_i].s, rc);
    if (rc != 0) {
        ck_assert_int_eq(at, 7); /* untouched */
        ck_assert_int_eq(after, 7);
        return;
    }
    ck_assert_int_eq(after, cases[_i].after);
    if (after < 0)
        ck_assert_int_eq(at, 1796010000000LL);
    else
        ck_assert_int_eq(at, 7);
}
END_TEST

START_TEST(test_since_is_a_span_back)
{
    int64_t out = 0;

    ck_assert_int_eq(clock_parse_since("90m", 10000000, &out), 0);
    ck_assert_int_eq(out, 10000000 - 5400000);
    ck_assert_int_eq(clock_parse_since("+90m", 10000000, &out), -EINVAL);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("clock_span");
    TCase *tc = tcase_create("span");

    tcase_add_loop_test(tc, test_after_reads_spans_and_times, 0,
                        (int)(sizeof(cases) / sizeof(cases[0])));
    tcase_add_test(tc, test_since_is_a_span_back);
    suite_add_tcase(s, tc);
    return s;
}

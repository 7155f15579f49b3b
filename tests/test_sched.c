/* test_sched.c: cron expressions and their slots, as a table: names,
 * ranges, steps and lists, cron's either-day rule, leap days, and the
 * daylight saving changes of Europe/Berlin and America/New_York (as
 * cron: a job at fixed times whose slot is in a skipped hour runs once at
 * the jump, one in a repeated hour once, the first time round; a job
 * with '*' in its minute or hour follows the clock: nothing in a skipped
 * hour, both rounds of a repeated one). Expected instants were worked
 * out with Python's zoneinfo, not with this code. */
#include "tests/support/support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "sched/sched.h"

static const struct next_case {
    const char *expr, *tz, *after, *want; /* want NULL: none in ten years */
} next_cases[] = {
    /* the nightly job of the issue: 03:40 in Berlin is 02:40Z in winter */
    {"40 3 * * *", "Europe/Berlin", "2026-11-30T00:00:00Z",
     "2026-11-30T02:40:00Z"},
    {"40 3 * * *", "Europe/Berlin", "2026-11-30T02:40:00Z",
     "2026-12-01T02:40:00Z"}, /* strictly after */
    {"40 3 * * *", "Europe/Berlin", "2026-07-01T00:00:00Z",
     "2026-07-01T01:40:00Z"}, /* summer: +2 */
    /* Berlin, 2027-03-28: 02:00 CET jumps to 03:00 CEST (01:00Z) */
    {"30 2 * * *", "Europe/Berlin", "2027-03-27T12:00:00Z",
     "2027-03-28T01:00:00Z"}, /* the skipped 02:30 runs at the jump */
    {"30 2 * * *", "Europe/Berlin", "2027-03-28T01:00:00Z",
     "2027-03-29T00:30:00Z"}, /* once: next the day after */
    {"*/15 2 * * *", "Europe/Berlin", "2027-03-28T01:00:00Z",
     "2027-03-29T00:00:00Z"},
    {"*/15 2 * * *", "Europe/Berlin", "2027-03-27T12:00:00Z",
     "2027-03-29T00:00:00Z"}, /* '*' follows the clock: no 02:xx that day */
    {"30 * * * *", "Europe/Berlin", "2027-03-28T00:30:00Z",
     "2027-03-28T01:30:00Z"}, /* 03:30 CEST: the skipped 02:30 is none */
    {"0 3 * * *", "Europe/Berlin", "2027-03-27T12:00:00Z",
     "2027-03-28T01:00:00Z"},
    /* Berlin, 2026-10-25: 03:00 CEST goes back to 02:00 CET (01:00Z) */
    {"30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z",
     "2026-10-25T00:30:00Z"}, /* the first 02:30 */
    {"30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z",
     "2026-10-26T01:30:00Z"}, /* not the second (01:30Z) */
    {"30 2 * * *", "Europe/Berlin", "2026-10-25T01:10:00Z",
     "2026-10-26T01:30:00Z"}, /* from inside the second round */
    {"0 * * * *", "Europe/Berlin", "2026-10-25T00:00:00Z",
     "2026-10-25T01:00:00Z"}, /* hourly: 02:00 CEST, then 02:00 CET */
    {"0 * * * *", "Europe/Berlin", "2026-10-25T01:00:00Z",
     "2026-10-25T02:00:00Z"}, /* then 03:00 CET */
    {"*/15 * * * *", "Europe/Berlin", "2026-10-25T00:45:00Z",
     "2026-10-25T01:00:00Z"}, /* no gap: the second round runs too */
    {"* * * * *", "Europe/Berlin", "2026-10-25T00:59:00Z",
     "2026-10-25T01:00:00Z"},
    {"* 2 * * *", "Europe/Berlin", "2026-10-25T00:59:30Z",
     "2026-10-25T01:00:00Z"}, /* a fixed hour, '*' minutes: both rounds */
    /* New York, 2027-03-14: 02:00 EST jumps to 03:00 EDT (07:00Z) */
    {"30 2 * * *", "America/New_York", "2027-03-13T12:00:00Z",
     "2027-03-14T07:00:00Z"},
    {"30 2 * * *", "America/New_York", "2027-03-14T07:00:00Z",
     "2027-03-15T06:30:00Z"},
    /* New York, 2026-11-01: 02:00 EDT goes back to 01:00 EST (06:00Z) */
    {"30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
     "2026-11-01T05:30:00Z"},
    {"30 1 * * *", "America/New_York", "2026-11-01T05:30:00Z",
     "2026-11-02T06:30:00Z"},
    {"0 * * * *", "America/New_York", "2026-11-01T05:00:00Z",
     "2026-11-01T06:00:00Z"}, /* 01:00 EST, the repeat, runs too */
    /* leap days, either-day rule, names, ranges, steps, macros */
    {"0 12 29 2 *", "UTC", "2026-03-01T00:00:00Z", "2028-02-29T12:00:00Z"},
    {"0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z"},
    {"0 0 13 * FRI", "UTC", "2026-11-01T00:00:00Z", "2026-11-06T00:00:00Z"},
    {"0 0 13 * FRI", "UTC", "2026-11-06T00:00:00Z", "2026-11-13T00:00:00Z"},
    {"0 9 * * MON-FRI", "UTC", "2026-12-05T10:00:00Z", "2026-12-07T09:00:00Z"},
    {"0 9 * * 7", "UTC", "2026-12-05T10:00:00Z", "2026-12-06T09:00:00Z"},
    {"5/20 * * * *", "UTC", "2026-12-02T10:26:00Z", "2026-12-02T10:45:00Z"},
    {"0 0 1 jan,Jul *", "UTC", "2026-02-01T00:00:00Z", "2026-07-01T00:00:00Z"},
    {"10-20/5 4 * * *", "UTC", "2026-12-02T04:16:00Z", "2026-12-02T04:20:00Z"},
    {"@hourly", "UTC", "2026-12-02T10:00:00Z", "2026-12-02T11:00:00Z"},
    {"@daily", "Asia/Kolkata", "2026-12-02T10:00:00Z",
     "2026-12-02T18:30:00Z"}, /* +05:30 */
    {"@weekly", "UTC", "2026-12-02T10:00:00Z", "2026-12-06T00:00:00Z"},
    {"@yearly", "UTC", "2026-12-02T10:00:00Z", "2027-01-01T00:00:00Z"},
    {" @DAILY ", "UTC", "2026-12-02T10:00:00Z", "2026-12-03T00:00:00Z"},
    /* a day field that begins with '*' is no restriction of its own kind:
     * both must hold (odd days, and Mondays among them) */
    {"0 0 */2 * *", "UTC", "2027-01-01T00:00:00Z", "2027-01-03T00:00:00Z"},
    {"0 0 * * */2", "UTC", "2027-01-03T00:00:00Z", "2027-01-05T00:00:00Z"},
    {"0 0 */2 * MON", "UTC", "2027-01-01T00:00:00Z", "2027-01-11T00:00:00Z"},
    {"0 0 29 2 */7", "UTC", "2026-12-02T00:00:00Z", "2032-02-29T00:00:00Z"},
    {"0 9 * * FRI-SUN", "UTC", "2026-12-02T10:00:00Z", "2026-12-04T09:00:00Z"},
    /* Sunday only, not the week */
    {"0 9 * * 0-0", "UTC", "2026-12-02T10:00:00Z", "2026-12-06T09:00:00Z"},
    {"0 9 * * SUN-SUN", "UTC", "2026-12-02T10:00:00Z", "2026-12-06T09:00:00Z"},
};

START_TEST(test_next_slot)
{
    const struct next_case *c = &next_cases[_i];
    struct sched_cron cron;
    int64_t after, slot = 0;
    char err[256], got[32];

    ck_assert_msg(sched_cron_parse(c->expr, &cron, err, sizeof(err)) == 0,
                  "%s: %s", c->expr, err);
    ck_assert_int_eq(clock_parse_utc(c->after, &after), 0);
    ck_assert_int_eq(sched_next(&cron, c->tz, after / 1000, &slot), 0);
    clock_format_utc(slot * 1000, got, sizeof(got));
    ck_assert_msg(strcmp(got, c->want) == 0,
                  "%s in %s after %s: got %s, "
                  "want %s",
                  c->expr, c->tz, c->after, got, c->want);
}
END_TEST

static const struct bad_case {
    const char *expr, *says;
} bad_cases[] = {
    {"60 * * * *", "minute"},
    {"* 24 * * *", "hour"},
    {"* * 0 * *", "day of month"},
    {"* * * 13 *", "month"},
    {"* * * * 8", "day of week"},
    {"* * * *", "got 4"},
    {"* * * * * *", "got 6"},
    {"*/0 * * * *", "minute"},
    {"5-1 * * * *", "minute"},
    {"JAN * * * *", "minute"},
    {"* * * FOO *", "month"},
    {"1,,2 * * * *", "minute"},
    {"@often", "got 1"},
    {"0 0 30 2 *", "no month"},
    {"0 0 31 4,6,9,11 *", "no month"},
    {"", "got 0"},
    {"1-2-3 * * * *", "minute"},
    {"*/61 * * * *", "a step of 61"},
    {"99999999999 * * * *", "minute"},
};

START_TEST(test_bad_expression_refused)
{
    const struct bad_case *c = &bad_cases[_i];
    struct sched_cron cron;
    char err[256] = "";

    ck_assert_int_eq(sched_cron_parse(c->expr, &cron, err, sizeof(err)),
                     -EINVAL);
    ck_assert_msg(strstr(err, c->says) != NULL, "%s: %s", c->expr, err);
}
END_TEST

/* The whole message, where its wording is the point: a count of fields
 * that is not five says so (and a sixth, Quartz's or Spring's seconds,
 * is named), and the element refused is quoted, so an empty one shows. */
#define FIVE                                                                   \
    "expected 5 fields (minute hour day-of-month month day-of-week) or "       \
    "@daily..., got "
static const struct bad_case said_cases[] = {
    {"0 0 3 * * *", FIVE "6 (a seconds field is not supported)"},
    {"0 15 10 ? * MON-FRI", FIVE "6 (a seconds field is not supported)"},
    {"0 0 0 1 JAN *", FIVE "6 (a seconds field is not supported)"},
    {"0 0 *", FIVE "3"},
    {"* * * *", FIVE "4"},
    {"0 0 3 * * * 2027", FIVE "7"},
    {"", FIVE "0"},
    {" \t ", FIVE "0"},
    {"1,,2 * * * *", "minute: '' is not a value, range or step"},
    {"1, * * * *", "minute: '' is not a value, range or step"},
    {"* * ,5 * *", "day of month: '' is not a value, range or step"},
    {"* * * * MON,", "day of week: '' is not a value, range or step"},
    {"5/\t* * * *", "minute: '5/' is not a value, range or step"},
    {"60 * * * *", "minute: '60' is not in range"},
};

START_TEST(test_bad_expression_says)
{
    const struct bad_case *c = &said_cases[_i];
    struct sched_cron cron;
    char err[256] = "";

    ck_assert_int_eq(sched_cron_parse(c->expr, &cron, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, c->says);
}
END_TEST

START_TEST(test_zones)
{
    char err[256];
    struct sched_cron cron;
    int64_t slot;

    ck_assert_int_eq(sched_zone_check("Europe/Berlin", err, sizeof(err)), 0);
    ck_assert_int_eq(sched_zone_check("UTC", err, sizeof(err)), 0);
    ck_assert_int_eq(sched_zone_check("Mars/Olympus", err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "unknown time zone Mars/Olympus"));
    ck_assert_int_eq(sched_zone_check("../../etc/passwd", err, sizeof(err)),
                     -EINVAL);
    ck_assert_int_eq(sched_zone_check("", err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(sched_zone_check("Europe", err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(sched_cron_parse("@daily", &cron, err, sizeof(err)), 0);
    ck_assert_int_eq(sched_next(&cron, "Nowhere/Town", 0, &slot), -EINVAL);
}
END_TEST

/* The zone functions put TZ back as they found it. */
START_TEST(test_tz_restored)
{
    struct sched_civil t;
    struct sched_cron cron;
    int64_t slot;
    char err[64];

    ck_assert_int_eq(sched_cron_parse("@daily", &cron, err, sizeof(err)), 0);
    unsetenv("TZ");
    ck_assert_int_eq(sched_next(&cron, "Asia/Tokyo", 0, &slot), 0);
    ck_assert_ptr_null(getenv("TZ"));
    setenv("TZ", "America/Denver", 1);
    ck_assert_int_eq(sched_civil_of("Asia/Tokyo", 0, &t), 0);
    ck_assert_int_eq(t.hour, 9); /* 1970-01-01 09:00 in Tokyo */
    ck_assert_str_eq(getenv("TZ"), "America/Denver");
}
END_TEST

/* Seven minutes without a worker, an every-minute schedule: all fires
 * the seven missed slots, latest the last one, and none the last one too
 * (it is under 5 minutes late): never more than latest. */
START_TEST(test_catch_up_after_a_short_outage)
{
    static const struct {
        enum config_catch_up how;
        size_t want;
    } rows[] = {{CONFIG_CATCH_UP_ALL, 7},
                {CONFIG_CATCH_UP_LATEST, 1},
                {CONFIG_CATCH_UP_NONE, 1}};
    struct sched_cron cron;
    int64_t slots[16], done, from = 1796083200; /* 2026-12-01T00:00:00Z */
    int64_t now = from + 7 * 60 + 10;
    char err[64];

    ck_assert_int_eq(sched_cron_parse("* * * * *", &cron, err, sizeof(err)), 0);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        size_t n = 99;
        ck_assert_int_eq(sched_due(&cron, "UTC", rows[i].how, from, now, slots,
                                   16, &n, &done),
                         0);
        ck_assert_msg(n == rows[i].want, "row %zu: %zu slots", i, n);
        ck_assert_int_eq(slots[n - 1], now - 10);
    }
}
END_TEST

/* The slots of whole daylight saving days in Berlin (23 and 25 hours
 * long), walked one after the other: hourly 23 and 25 (cron: '*' in the
 * hour follows the clock), every 15 minutes 92 and 100, a daily 02:30
 * once on each. */
START_TEST(test_slots_in_a_dst_day)
{
    static const struct {
        const char *expr, *day_start; /* 00:00 local of the day, in UTC */
        int hours, want;
    } rows[] = {{"0 * * * *", "2027-03-27T23:00:00Z", 23, 23},
                {"0 * * * *", "2026-10-24T22:00:00Z", 25, 25},
                {"*/15 * * * *", "2027-03-27T23:00:00Z", 23, 92},
                {"*/15 * * * *", "2026-10-24T22:00:00Z", 25, 100},
                {"30 2 * * *", "2027-03-27T23:00:00Z", 23, 1},
                {"30 2 * * *", "2026-10-24T22:00:00Z", 25, 1}};
    struct sched_cron cron;
    int64_t start, at, slot;
    char err[64];

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int n = 0;
        ck_assert_int_eq(
            sched_cron_parse(rows[i].expr, &cron, err, sizeof(err)), 0);
        ck_assert_int_eq(clock_parse_utc(rows[i].day_start, &start), 0);
        start /= 1000;
        for (at = start - 1;
             sched_next(&cron, "Europe/Berlin", at, &slot) == 0 &&
             slot < start + rows[i].hours * 3600;
             at = slot)
            n++;
        ck_assert_msg(n == rows[i].want, "%s from %s: %d slots", rows[i].expr,
                      rows[i].day_start, n);
    }
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = tcase_create("cron");

    tcase_add_loop_test(tc, test_next_slot, 0,
                        sizeof(next_cases) / sizeof(next_cases[0]));
    tcase_add_loop_test(tc, test_bad_expression_refused, 0,
                        sizeof(bad_cases) / sizeof(bad_cases[0]));
    tcase_add_loop_test(tc, test_bad_expression_says, 0,
                        sizeof(said_cases) / sizeof(said_cases[0]));
    tcase_add_test(tc, test_zones);
    tcase_add_test(tc, test_tz_restored);
    tcase_add_test(tc, test_catch_up_after_a_short_outage);
    tcase_add_test(tc, test_slots_in_a_dst_day);
    suite_add_tcase(s, tc);
    return s;
}

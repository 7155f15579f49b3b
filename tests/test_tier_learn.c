/* test_tier_learn.c: a tier with no limit declared and none in its
 * endpoint's headers (many free tiers): the ramp that meets it before any
 * rate is known, the ceiling its 429s measure, and the pace that climbs
 * past that ceiling while the tier is busy. */
#include "tests/support/support.h"

#include <stdlib.h>

#include "queue/tiers.h"
#include "tests/test_tier_support.h"
#include "tier/tier.h"

static char *dir;
static q_db *db;

static void
setup(void)
{
    char *path;
    dir = tmpdir_new();
    path = tmpdir_join(dir, "q.db");
    ck_assert_int_eq(q_open(path, NULL, &db), 0);
    free(path);
}

static void
teardown(void)
{
    ck_assert_int_eq(q_close(db), 0);
    tmpdir_remove(dir);
}

/* Admits at now and returns the send id, or -1 when refused (v set). */
static int64_t
admit(const struct config_tier *t, int64_t now, struct tier_verdict *v)
{
    struct tier_verdict tmp;
    int64_t id = -1;

    if (v == NULL)
        v = &tmp;
    ck_assert_int_eq(tier_admit(db, t, now, 1, false, v, &id), 0);
    return v->admitted ? id : -1;
}

/* Settles send id at now: a success, or a 429 (throttled) whose answer
 * names the limit limit_rpm (0: none, as a silent endpoint). */
static void
answer(const struct config_tier *t, int64_t id, int64_t now, bool throttled,
       int64_t limit_rpm)
{
    struct tier_outcome o;

    ck_assert_int_gt(id, 0);
    tier_outcome_init(&o);
    o.sent_at = now;
    o.limit_rpm = limit_rpm;
    if (throttled) {
        o.uncounted = true;
        o.throttle_ms = 1;
        o.paced_down = true;
    } else {
        o.result = TIER_RESULT_OK;
    }
    ck_assert_int_eq(tier_settle(db, t, id, now, &o, NULL), 0);
}

/* n sends, each answered at once, from `from` one every step ms. */
static void
successes(const struct config_tier *t, int64_t from, int n, int64_t step)
{
    for (int i = 0; i < n; i++)
        answer(t, admit(t, from + step * i, NULL), from + step * i, false, 0);
}

static double
rate(const struct config_tier *t, int64_t now)
{
    struct q_tier_state st;
    ck_assert_int_eq(tier_snapshot(db, t, now, false, &st), 0);
    return tier_rate_rpm(t, &st);
}

/* Admits at now until refused; returns how many went. */
static int
admit_all(const struct config_tier *t, int64_t now, int64_t *ids,
          struct tier_verdict *v)
{
    int n = 0;
    while (n < 64 && (ids[n] = admit(t, now, v)) > 0)
        n++;
    return n;
}

/* With no rate known, the sends in flight (at least 4) grow by half of
 * what the endpoint took with each round of answers, not all at once;
 * after three seconds of sending without a 429, or with max_inflight
 * declared, there is no ramp. */
START_TEST(test_ramp_without_a_rate)
{
    static const int rounds[] = {1, 4, 4, 5, 8, 12};
    struct config_tier t = free_tier();
    struct tier_verdict v;
    int64_t ids[64];

    for (size_t r = 0; r < sizeof(rounds) / sizeof(rounds[0]); r++) {
        int n = admit_all(&t, T0 + 10 * (int64_t)r, ids, &v);
        ck_assert_int_eq(n, rounds[r]);
        ck_assert_str_eq(v.reason, r == 0 ? "in_doubt" : "ramp");
        for (int i = 0; i < n; i++)
            answer(&t, ids[i], T0 + 10 * (int64_t)r + 1, false, 0);
    }
    successes(&t, T0 + 1000, 9, 1000);
    ck_assert_int_eq(admit_all(&t, T0 + 10000, ids, &v), 64);
    t.name = "capped";
    t.max_inflight = 40;
    successes(&t, T0, 1, 1);
    ck_assert_int_eq(admit_all(&t, T0 + 1, ids, &v), 40);
}
END_TEST

/* A 429 measures the ceiling, as the rate the endpoint took, and the
 * pace starts at 0.9 of it; a 429 while the tier sends less than its rate
 * lowers the pace by 0.7; a 429 that names its limit is believed. */
START_TEST(test_429s_measure_the_ceiling)
{
    struct config_tier t = free_tier();

    successes(&t, T0, 50, 100); /* 10 a second for 5 s */
    answer(&t, admit(&t, T0 + 5000, NULL), T0 + 5000, true, 0);
    /* 50 taken in 5 s: 600 rpm, paced to 540 */
    ck_assert_int_eq((int)(rate(&t, T0 + 5000) + 0.5), 540);
    /* 50 sent in 9 s: 333 rpm, less than 0.8 of 540 */
    answer(&t, admit(&t, T0 + 9000, NULL), T0 + 9000, true, 0);
    ck_assert_int_eq((int)(rate(&t, T0 + 9000) + 0.5), 378);
    answer(&t, admit(&t, T0 + 10500, NULL), T0 + 10500, true, 1200);
    ck_assert_int_eq((int)(rate(&t, T0 + 10500) + 0.5), 529);
}
END_TEST

/* Over a ceiling learned from 429s, the pace climbs past 1 (1% of the
 * ceiling a second) while the tier sends at 0.8 of its rate or more; a
 * 429 then measures the rate again, below the ceiling, which stays. A
 * tier that is not busy climbs to the ceiling and holds (over a declared rpm
 * the pace stops at 1 too: test_tier_db.c, test_pace_falls_and_climbs_back). */
START_TEST(test_pace_climbs_past_a_measured_ceiling)
{
    struct config_tier t = free_tier();

    successes(&t, T0, 100, 100); /* 10 a second for 10 s */
    answer(&t, admit(&t, T0 + 10000, NULL), T0 + 10000, true, 0);
    ck_assert_int_eq((int)(rate(&t, T0 + 10000) + 0.5), 540);
    successes(&t, T0 + 10100, 177, 113); /* 20 s at 531 rpm */
    ck_assert_int_eq((int)(rate(&t, T0 + 30000) + 0.5), 660);
    /* 80 taken in the last 9 s: 533 rpm, paced to 480 */
    answer(&t, admit(&t, T0 + 30000, NULL), T0 + 30000, true, 0);
    ck_assert_int_eq((int)(rate(&t, T0 + 30000) + 0.5), 480);
    successes(&t, T0 + 31000, 30, 1000); /* at 60 rpm: up to 600, held */
    ck_assert_int_eq((int)(rate(&t, T0 + 60000) + 0.5), 600);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("tier_learn");
    TCase *tc = tcase_create("learn");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_ramp_without_a_rate);
    tcase_add_test(tc, test_429s_measure_the_ceiling);
    tcase_add_test(tc, test_pace_climbs_past_a_measured_ceiling);
    suite_add_tcase(s, tc);
    return s;
}

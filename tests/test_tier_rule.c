/* test_tier_rule.c: the pure admission rule (tier_evaluate) as a table,
 * one row per case, and when a wall with no known reset ends. */
#include "tests/support/support.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "queue/tiers.h"
#include "tests/test_tier_support.h"
#include "tier/internal.h"
#include "tier/tier.h"

/* ---- the pure rule -------------------------------------------------- */

struct eval_case {
    const char *name;
    int64_t rpm, tpm, allowance, max_inflight, burst;
    struct q_tier_state st;
    int64_t est;
    bool continuing;
    bool admitted, probe;
    const char *reason;
    int64_t retry_at;
};

#define DAY_END (T0 - T0 % 86400000 + 86400000)

/* One row per case: ROW(name, limits, state, est, continuing, verdict).
 * limits: LIM(.rpm = ..., .burst = ...) or NOLIM; state: ST(fields of
 * q_tier_state); verdict: YES, PROBE (admitted as the half-open probe) or
 * NO(reason, retry_at). clang-format would spread each body over four lines.
 */
/* clang-format off */
#define LIM(...)   __VA_ARGS__
#define NOLIM      .rpm = 0
#define ST(...)    {__VA_ARGS__}
#define YES        .admitted = true, .retry_at = T0
#define PROBE      .admitted = true, .probe = true, .retry_at = T0
#define NO(rs, at) .reason = rs, .retry_at = at
#define ROW(nm, lim, state, est_, cont, verdict) \
    {.name = nm, lim, .st = state, .est = est_, .continuing = cont, verdict}
/* clang-format on */

/* Pacing arithmetic: 600 rpm is one request per 100 ms; the bucket holds
 * one second's worth (10) less a guard of half a request. A request
 * bucket whose theoretical arrival time is T0 + 900 is full to T0 + 950,
 * so one more fits at T0 + 50. */
static const struct eval_case eval_cases[] = {
    ROW("empty tier admits", NOLIM, ST(0), 100, false, YES),
    ROW("wall refuses until reset", NOLIM,
        ST(.exhausted_until = T0 + 5000, .exhausted_reason = "daily_cap"), 1,
        false, NO("exhausted", T0 + 5000)),
    ROW("wall over admits one", NOLIM, ST(.exhausted_until = T0), 1, false,
        YES),
    ROW("wall over: in doubt, one at a time", NOLIM,
        ST(.exhausted_until = T0 - 1, .in_flight = 1), 1, false,
        NO("in_doubt", T0 + 250)),
    ROW("breaker open refuses", NOLIM,
        ST(.breaker = Q_BREAKER_OPEN, .open_until = T0 + 9000), 1, false,
        NO("breaker_open", T0 + 9000)),
    ROW("cooldown over: one probe", NOLIM,
        ST(.breaker = Q_BREAKER_OPEN, .open_until = T0), 1, false, PROBE),
    ROW("half open with probe out refuses", NOLIM,
        ST(.breaker = Q_BREAKER_HALF_OPEN, .probe_in_flight = true), 1, false,
        NO("half_open_probe", T0 + 250)),
    ROW("tier cooling down", NOLIM, ST(.limited_until = T0 + 700), 1, false,
        NO("cooldown", T0 + 700)),
    ROW("max inflight reached", LIM(.max_inflight = 2), ST(.in_flight = 2), 1,
        false, NO("max_inflight", T0 + 250)),
    ROW("max inflight below", LIM(.max_inflight = 2), ST(.in_flight = 1), 1,
        false, YES),
    ROW("in doubt: one in flight is enough", NOLIM,
        ST(.doubt = true, .in_flight = 1), 1, false, NO("in_doubt", T0 + 250)),
    ROW("in doubt: none in flight admits", NOLIM, ST(.doubt = true), 1, false,
        YES),
    ROW("rpm bucket empty: next slot", LIM(.rpm = 600), ST(.req_tat = T0 + 900),
        1, false, NO("rpm", T0 + 50)),
    ROW("rpm bucket has room", LIM(.rpm = 600), ST(.req_tat = T0 + 800), 1,
        false, YES),
    ROW("rpm bucket of one: one per interval", LIM(.rpm = 60, .burst = 1),
        ST(.req_tat = T0 + 1), 1, false, NO("rpm", T0 + 1)),
    ROW("learned limit below the declared one paces", LIM(.rpm = 1200),
        ST(.req_tat = T0 + 900, .learned_rpm = 600), 1, false,
        NO("rpm", T0 + 50)),
    ROW("declared limit, a higher learned one: declared wins", LIM(.rpm = 600),
        ST(.req_tat = T0 + 900, .learned_rpm = 6000), 1, false,
        NO("rpm", T0 + 50)),
    ROW("pace 0.5 halves the rate", LIM(.rpm = 600),
        ST(.req_tat = T0 + 800, .pace = 0.5), 1, false, NO("rpm", T0 + 50)),
    ROW("no limit declared or learned: not paced", NOLIM,
        ST(.req_tat = T0 + 99999), 1, false, YES),
    ROW("tpm bucket empty", LIM(.tpm = 60000), ST(.tok_tat = T0 + 950), 100,
        false, NO("tpm", T0 + 50)),
    ROW("tpm bucket has room", LIM(.tpm = 60000), ST(.tok_tat = T0 + 800), 100,
        false, YES),
    ROW("tpm: oversized request goes when the bucket is full", LIM(.tpm = 6000),
        ST(0), 5000, false, YES),
    ROW("tpm: oversized request waits for a full bucket", LIM(.tpm = 6000),
        ST(.tok_tat = T0 + 10), 5000, false, NO("tpm", T0 + 10)),
    ROW("allowance: new step stops at degrade_at", LIM(.allowance = 1000),
        ST(.allowance_used = 750, .allowance_since = T0 - 1), 100, false,
        NO("allowance", DAY_END)),
    ROW("allowance: running step uses headroom", LIM(.allowance = 1000),
        ST(.allowance_used = 750, .allowance_since = T0 - 1), 100, true, YES),
    ROW("allowance: headroom has an end", LIM(.allowance = 1000),
        ST(.allowance_used = 950, .allowance_since = T0 - 1), 100, true,
        NO("allowance", DAY_END)),
    ROW("allowance: yesterday's use is gone", LIM(.allowance = 1000),
        ST(.allowance_used = 1000, .allowance_since = T0 - 86400000), 100,
        false, YES),
};

START_TEST(test_evaluate_table)
{
    const struct eval_case *c = &eval_cases[_i];
    struct config_tier t = free_tier();
    struct tier_verdict v;

    t.rpm = c->rpm;
    t.tpm = c->tpm;
    t.allowance_tokens = c->allowance;
    t.max_inflight = (int)c->max_inflight;
    t.burst = c->burst;
    tier_evaluate(&t, &c->st, T0, c->est, c->continuing, &v);
    ck_assert_msg(v.admitted == c->admitted, "%s: admitted %d", c->name,
                  v.admitted);
    ck_assert_msg(v.probe == c->probe, "%s: probe %d", c->name, v.probe);
    if (c->reason == NULL) {
        ck_assert_msg(v.reason == NULL, "%s: reason %s", c->name, v.reason);
    } else {
        ck_assert_msg(v.reason && strcmp(v.reason, c->reason) == 0,
                      "%s: reason %s", c->name, v.reason);
        ck_assert_msg(v.retry_at == c->retry_at, "%s: retry_at %lld", c->name,
                      (long long)(v.retry_at - T0));
    }
}
END_TEST

START_TEST(test_wall_without_reset)
{
    struct config_tier t = free_tier();

    ck_assert_int_eq(tier_wall_until(&t, T0), T0 + 3600000);
    t.allowance_tokens = 1000;
    ck_assert_int_eq(tier_wall_until(&t, T0), T0 - T0 % 86400000 + 86400000);
}
END_TEST

/* A bucket of one spaces sends 5% wider, at most 50 ms: room for a send
 * that reaches the endpoint later after its admission than the one
 * before it did (the attempt's commit comes between the two). */
START_TEST(test_bucket_of_one_spaced_wider)
{
    struct config_tier t = free_tier();
    struct q_tier_state st = {0};
    struct tier__bucket b;
    double tat;

    t.rpm = 60;
    t.burst = 1;
    ck_assert(tier__request_bucket(&t, &st, &b));
    tat = tier__bucket_take(0, &b, T0);
    ck_assert_int_eq(tier__bucket_ready_at(tat, &b, T0 + 10), T0 + 1050);
    t.rpm = 6000; /* 10 ms apart: 5% of it */
    ck_assert(tier__request_bucket(&t, &st, &b));
    ck_assert_double_eq_tol(b.cost_ms, 10.5, 1e-9);
    t.rpm = 6; /* 10 s apart: the 50 ms bound */
    ck_assert(tier__request_bucket(&t, &st, &b));
    ck_assert_double_eq_tol(b.cost_ms, 10050, 1e-9);
}
END_TEST

/* ---- what a tier has in flight, and used ------------------------------ */

/* Sends count until they end or expire (to the second, never shorter),
 * the probe apart from the count of sends. */
START_TEST(test_flight_counts_until_end_or_expiry)
{
    struct q_tier_flight f = {0};

    tier__flight_add(&f, T0 + 10000, false, T0);
    tier__flight_add(&f, T0 + 10000, false, T0);
    tier__flight_add(&f, T0 + 20500, true, T0);
    ck_assert_int_eq(tier__flight_count(&f, T0), 3);
    ck_assert_int_eq(f.n, 2);
    ck_assert_int_eq(f.probe_until, T0 + 20500);
    ck_assert_int_eq(tier__flight_count(&f, T0 + 9999), 3);
    ck_assert_int_eq(tier__flight_count(&f, T0 + 10000), 1);
    tier__flight_end(&f, T0 + 10000, false, T0 + 1);
    ck_assert_int_eq(tier__flight_count(&f, T0 + 1), 2);
    tier__flight_end(&f, T0 + 20500, true, T0 + 2);
    ck_assert_int_eq(tier__flight_count(&f, T0 + 2), 1);
    ck_assert_int_eq(f.probe_until, 0);
    ck_assert_int_eq(tier__flight_count(&f, T0 + 10999), 0); /* expired */
    /* Answered after it expired: another send in flight stays counted. */
    tier__flight_add(&f, T0 + 30000, false, T0 + 11000);
    tier__flight_end(&f, T0 + 10000, false, T0 + 11000);
    ck_assert_int_eq(tier__flight_count(&f, T0 + 11000), 1);
    ck_assert_int_eq(f.n, 1);
}
END_TEST

/* A full flight counts a send in a later second: every send counts at
 * least as long as its own expiry, and ending them all, in any order,
 * empties it. */
START_TEST(test_full_flight_counts_longer_never_shorter)
{
    enum { SENDS = Q_TIER_FLIGHT_MAX + 40 };
    struct q_tier_flight f = {0};

    for (int i = 0; i < SENDS; i++)
        tier__flight_add(&f, T0 + 1000 * (i + 1), false, T0);
    ck_assert_int_eq(f.n, Q_TIER_FLIGHT_MAX);
    for (int i = 0; i < SENDS; i++)
        ck_assert_int_ge(tier__flight_count(&f, T0 + 1000 * i), SENDS - i);
    for (int i = 0; i < SENDS; i += 2)
        tier__flight_end(&f, T0 + 1000 * (i + 1), false, T0);
    for (int i = 1; i < SENDS; i += 2)
        tier__flight_end(&f, T0 + 1000 * (i + 1), false, T0);
    ck_assert_int_eq(tier__flight_count(&f, T0), 0);
    ck_assert_int_eq(f.n, 0);
}
END_TEST

/* Usage counts each second of the last minute; a correction lands in the
 * second of its send while that is still counted. */
START_TEST(test_usage_counts_a_minute_by_second)
{
    struct q_tier_usage u = {0};
    int64_t req, tok;

    tier__usage_add(&u, T0, 1, 100);
    tier__usage_add(&u, T0 + 999, 1, 10);
    tier__usage_add(&u, T0 + 59000, 1, 1);
    tier__usage_add(&u, T0, 0, -60); /* the first send's answer */
    tier__usage_sum(&u, T0 + 59000, 60000, &req, &tok);
    ck_assert_int_eq(req, 3);
    ck_assert_int_eq(tok, 51);
    tier__usage_sum(&u, T0 + 59000, 10000, &req, &tok);
    ck_assert_int_eq(req, 1);
    tier__usage_sum(&u, T0 + 60000, 60000, &req, &tok);
    ck_assert_int_eq(req, 1);               /* T0's second is out */
    tier__usage_add(&u, T0, 0, 5);          /* too late to count */
    tier__usage_add(&u, T0 + 200000, 1, 7); /* the minute moved on */
    tier__usage_sum(&u, T0 + 200000, 60000, &req, &tok);
    ck_assert_int_eq(req, 1);
    ck_assert_int_eq(tok, 7);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("tier_rule");
    TCase *rule = tcase_create("rule");
    TCase *use = tcase_create("use");

    tcase_add_loop_test(rule, test_evaluate_table, 0,
                        (int)(sizeof(eval_cases) / sizeof(eval_cases[0])));
    tcase_add_test(rule, test_wall_without_reset);
    tcase_add_test(rule, test_bucket_of_one_spaced_wider);
    suite_add_tcase(s, rule);
    tcase_add_test(use, test_flight_counts_until_end_or_expiry);
    tcase_add_test(use, test_full_flight_counts_longer_never_shorter);
    tcase_add_test(use, test_usage_counts_a_minute_by_second);
    suite_add_tcase(s, use);
    return s;
}

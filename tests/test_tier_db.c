/* test_tier_db.c: tier state in a real database: breaker, doubt, walls,
 * cooldown, learned limits, adaptive pace, allowance, in-flight cap, and
 * one request bucket shared by two processes. */
#include "tests/support/support.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "queue/tiers.h"
#include "tests/test_tier_support.h"
#include "tier/tier.h"

/* ---- with a database ----------------------------------------------- */

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
admit(const struct config_tier *t, int64_t now, int64_t est,
      struct tier_verdict *v)
{
    struct tier_verdict tmp;
    int64_t id = -1;

    if (v == NULL)
        v = &tmp;
    ck_assert_int_eq(tier_admit(db, t, now, est, false, v, &id), 0);
    return v->admitted ? id : -1;
}

static void
settle_with(const struct config_tier *t, int64_t id, int64_t now,
            struct tier_outcome *o)
{
    ck_assert_int_eq(tier_settle(db, t, id, now, o, NULL), 0);
}

static void
settle(const struct config_tier *t, int64_t id, int64_t now, enum tier_result r)
{
    struct tier_outcome o;
    tier_outcome_init(&o);
    o.result = r;
    settle_with(t, id, now, &o);
}

/* A tier never used is in doubt; one success ends that. */
static void
trust(const struct config_tier *t, int64_t now)
{
    settle(t, admit(t, now, 1, NULL), now, TIER_RESULT_OK);
}

static struct q_tier_state
state(const struct config_tier *t, int64_t now)
{
    struct q_tier_state st;
    ck_assert_int_eq(tier_snapshot(db, t, now, true, &st), 0);
    return st;
}

START_TEST(test_breaker_opens_probes_and_closes)
{
    struct config_tier t = free_tier();
    struct tier_verdict v;
    int64_t probe;

    for (int i = 0; i < 3; i++)
        settle(&t, admit(&t, T0 + i, 1, NULL), T0 + i, TIER_RESULT_FAILURE);
    ck_assert_int_eq(admit(&t, T0 + 10, 1, &v), -1);
    ck_assert_str_eq(v.reason, "breaker_open");
    ck_assert_int_eq(v.retry_at, T0 + 2 + 30000);
    ck_assert_int_eq(admit(&t, T0 + 30001, 1, &v), -1); /* still cooling */
    probe = admit(&t, T0 + 30002, 1, &v);
    ck_assert_int_gt(probe, 0);
    ck_assert(v.probe);
    ck_assert_int_eq(admit(&t, T0 + 30003, 1, &v), -1);
    ck_assert_str_eq(v.reason, "half_open_probe");
    settle(&t, probe, T0 + 30004, TIER_RESULT_OK);
    ck_assert_int_eq(state(&t, T0 + 30005).breaker, Q_BREAKER_CLOSED);
    ck_assert_int_eq(state(&t, T0 + 30005).failures, 0);
    ck_assert_int_gt(admit(&t, T0 + 30005, 1, &v), 0);
    ck_assert(!v.probe);
    ck_assert_int_gt(admit(&t, T0 + 30005, 1, &v), 0); /* open to its pace */
}
END_TEST

START_TEST(test_failed_probe_reopens)
{
    struct config_tier t = free_tier();
    struct tier_verdict v;
    int64_t probe;

    for (int i = 0; i < 3; i++)
        settle(&t, admit(&t, T0, 1, NULL), T0, TIER_RESULT_FAILURE);
    probe = admit(&t, T0 + 30000, 1, &v);
    ck_assert(v.probe);
    settle(&t, probe, T0 + 30001, TIER_RESULT_FAILURE);
    ck_assert_int_eq(admit(&t, T0 + 30002, 1, &v), -1);
    ck_assert_str_eq(v.reason, "breaker_open");
    ck_assert_int_eq(v.retry_at, T0 + 30001 + 30000);
}
END_TEST

START_TEST(test_neutral_answers_do_not_trip_breaker)
{
    struct config_tier t = free_tier();
    struct tier_verdict v;

    for (int i = 0; i < 10; i++)
        settle(&t, admit(&t, T0 + i, 1, NULL), T0 + i, TIER_RESULT_NEUTRAL);
    /* A success between failures resets the count. */
    settle(&t, admit(&t, T0 + 20, 1, NULL), T0 + 20, TIER_RESULT_FAILURE);
    settle(&t, admit(&t, T0 + 21, 1, NULL), T0 + 21, TIER_RESULT_FAILURE);
    settle(&t, admit(&t, T0 + 22, 1, NULL), T0 + 22, TIER_RESULT_OK);
    settle(&t, admit(&t, T0 + 23, 1, NULL), T0 + 23, TIER_RESULT_FAILURE);
    ck_assert_int_gt(admit(&t, T0 + 24, 1, &v), 0);
}
END_TEST

/* A tier never used, or after a server error, takes one request at a
 * time until one succeeds; then it opens to its pace. */
START_TEST(test_doubt_admits_one_at_a_time)
{
    struct config_tier t = free_tier();
    struct tier_verdict v;
    int64_t a, c;

    t.rpm = 600; /* a bucket of 10: not a ramp (test_ramp_without_a_rate) */

    a = admit(&t, T0, 1, NULL);
    ck_assert_int_gt(a, 0);
    ck_assert_int_eq(admit(&t, T0, 1, &v), -1);
    ck_assert_str_eq(v.reason, "in_doubt");
    settle(&t, a, T0 + 1, TIER_RESULT_FAILURE); /* a 503: still in doubt */
    c = admit(&t, T0 + 2, 1, NULL);
    ck_assert_int_gt(c, 0);
    ck_assert_int_eq(admit(&t, T0 + 2, 1, &v), -1);
    settle(&t, c, T0 + 3, TIER_RESULT_OK);
    ck_assert(!state(&t, T0 + 3).doubt);
    for (int i = 0; i < 5; i++)
        ck_assert_int_gt(admit(&t, T0 + 4, 1, NULL), 0);
    /* a timeout later: one at a time again */
    settle(&t, admit(&t, T0 + 5, 1, NULL), T0 + 6, TIER_RESULT_FAILURE);
    ck_assert_int_eq(admit(&t, T0 + 7, 1, &v), -1);
    ck_assert_str_eq(v.reason, "failing"); /* passed over */
}
END_TEST

START_TEST(test_worker_start_puts_tier_in_doubt)
{
    struct config_tier t = free_tier();
    struct tier_verdict v;

    trust(&t, T0);
    ck_assert(!state(&t, T0).doubt);
    ck_assert_int_eq(tier_sync_config(db, &t, T0), 0);
    ck_assert(state(&t, T0).doubt);
    ck_assert_int_gt(admit(&t, T0 + 1, 1, NULL), 0);
    ck_assert_int_eq(admit(&t, T0 + 1, 1, &v), -1);
    ck_assert_str_eq(v.reason, "in_doubt");
}
END_TEST

START_TEST(test_quota_wall_blocks_until_reset)
{
    struct config_tier t = free_tier();
    struct tier_outcome o;
    struct tier_verdict v;

    tier_outcome_init(&o);
    o.tokens = 50;
    o.exhausted_until = T0 + 60000;
    o.exhausted_reason = "daily_cap";
    trust(&t, T0);
    settle_with(&t, admit(&t, T0, 10, NULL), T0, &o);
    ck_assert_int_eq(admit(&t, T0 + 59999, 1, &v), -1);
    ck_assert_str_eq(v.reason, "exhausted");
    ck_assert_str_eq(state(&t, T0 + 1).exhausted_reason, "daily_cap");
    /* Over: one request finds out whether it lifted, the rest wait. */
    ck_assert_int_gt(admit(&t, T0 + 60000, 1, &v), 0);
    ck_assert_int_eq(admit(&t, T0 + 60001, 1, &v), -1);
    ck_assert_str_eq(v.reason, "in_doubt");
}
END_TEST

/* Walls t with an auth failure (an open-ended wall) after one send. */
static void
auth_wall(const struct config_tier *t)
{
    struct tier_outcome o;

    tier_outcome_init(&o);
    o.exhausted_until = INT64_MAX / 2;
    o.exhausted_reason = "auth";
    ck_assert_int_eq(tier_sync_config(db, t, T0), 0);
    settle_with(t, admit(t, T0, 1, NULL), T0, &o);
}

START_TEST(test_auth_wall_lifted_by_config_change)
{
    struct config_tier t = free_tier();
    struct tier_verdict v;

    auth_wall(&t);
    ck_assert_int_eq(tier_sync_config(db, &t, T0), 0); /* same config */
    ck_assert_int_eq(admit(&t, T0 + 1, 1, &v), -1);
    t.api_key_env = "NEW_KEY";
    ck_assert_int_eq(tier_sync_config(db, &t, T0), 0);
    ck_assert_int_gt(admit(&t, T0 + 2, 1, &v), 0);
}
END_TEST

/* stepq tiers shows the tier as the next worker will find it: a config
 * changed since an auth wall shows no wall, before any worker ran; the
 * same config still shows it. */
START_TEST(test_auth_wall_shown_lifted_before_a_worker_runs)
{
    struct config_tier t = free_tier();

    auth_wall(&t);
    ck_assert_str_eq(state(&t, T0 + 1).exhausted_reason, "auth");
    t.api_key_env = "NEW_KEY";
    ck_assert_str_eq(state(&t, T0 + 2).exhausted_reason, "");
    ck_assert_int_eq(state(&t, T0 + 2).exhausted_until, 0);
}
END_TEST

/* Where the key goes and what else is sent are part of the config too: a
 * fixed auth, header or query lifts the wall as a new key does. */
START_TEST(test_auth_wall_lifted_by_auth_headers_or_query)
{
    static const char *const changes[] = {"auth", "headers", "query"};
    struct config_tier t = free_tier();
    struct config_pair pair = {(char *)"api-version", (char *)"2024-10-21"};
    struct tier_verdict v;

    auth_wall(&t);
    ck_assert_int_eq(admit(&t, T0 + 1, 1, &v), -1);
    if (strcmp(changes[_i], "auth") == 0) {
        t.auth = CONFIG_AUTH_HEADER;
        t.auth_header = (char *)"api-key";
    } else if (strcmp(changes[_i], "headers") == 0) {
        t.headers = &pair;
        t.nheaders = 1;
    } else {
        t.query = &pair;
        t.nquery = 1;
    }
    ck_assert_int_eq(tier_sync_config(db, &t, T0), 0);
    ck_assert_msg(admit(&t, T0 + 2, 1, &v) > 0, "%s: still walled",
                  changes[_i]);
}
END_TEST

START_TEST(test_allowance_charged_and_corrected)
{
    struct config_tier t = free_tier();
    struct tier_outcome o;
    struct tier_verdict v;
    int64_t id;

    tier_outcome_init(&o);
    o.result = TIER_RESULT_OK;
    o.tokens = 300;
    o.charged = 100; /* what the admit below charges */
    t.allowance_tokens = 1000;
    t.rpm = 600; /* not a ramp (test_tier_learn.c) */
    id = admit(&t, T0, 100, NULL);
    ck_assert_int_eq(state(&t, T0).allowance_used, 100);
    settle_with(&t, id, T0 + 1, &o);
    ck_assert_int_eq(state(&t, T0 + 1).allowance_used, 300);
    id = admit(&t, T0 + 2, 450, NULL); /* 750 of 800 */
    ck_assert_int_gt(id, 0);
    ck_assert_int_eq(admit(&t, T0 + 3, 100, &v), -1);
    ck_assert_str_eq(v.reason, "allowance");
}
END_TEST

START_TEST(test_inflight_cap_and_crashed_sends_expire)
{
    struct config_tier t = free_tier();
    struct tier_verdict v;
    struct q_tier_state raw;
    int64_t a, crashed;

    t.max_inflight = 2;
    trust(&t, T0 - 1);
    a = admit(&t, T0, 1, NULL);
    crashed = admit(&t, T0, 1, NULL); /* never settled: "crash" */
    ck_assert_int_gt(crashed, 0);
    ck_assert_int_eq(admit(&t, T0 + 1, 1, &v), -1);
    ck_assert_str_eq(v.reason, "max_inflight");
    settle(&t, a, T0 + 2, TIER_RESULT_OK);
    ck_assert_int_gt(admit(&t, T0 + 3, 1, NULL), 0);
    ck_assert_int_eq(admit(&t, T0 + 4, 1, &v), -1);
    /* timeout 10 s + 30 s margin: the unsettled sends stop counting */
    ck_assert_int_gt(admit(&t, T0 + 40001, 1, NULL), 0);
    /* A worker starting clears the expired ones away; the live ones stay
     * (T0 + 3, T0 + 40001). */
    ck_assert_int_eq(tier_sync_config(db, &t, T0 + 40002), 0);
    ck_assert_int_eq(q_tier_load(db, "free", &raw), 0);
    ck_assert_int_eq(raw.flight.n, 2);
    ck_assert_int_eq(state(&t, T0 + 40002).in_flight, 2);
}
END_TEST

/* `stepq tiers` counts the last minute's sends and their tokens: an
 * answer's reported tokens replace the estimate, a send refused for its
 * rate is not counted, and a send falls out a minute after it left. */
START_TEST(test_usage_counts_the_last_minute)
{
    struct config_tier t = free_tier();
    struct tier_outcome o;
    int64_t a, b;

    t.rpm = 600;
    trust(&t, T0 - 60000); /* a minute before: out of the counts */
    tier_outcome_init(&o);
    o.result = TIER_RESULT_OK;
    a = admit(&t, T0, 100, NULL);
    b = admit(&t, T0 + 500, 50, NULL);
    ck_assert_int_eq(state(&t, T0 + 600).window_requests, 2);
    ck_assert_int_eq(state(&t, T0 + 600).window_tokens, 150);
    o.tokens = 30;
    o.charged = 100;
    o.sent_at = T0;
    settle_with(&t, a, T0 + 30000, &o);
    (void)admit(&t, T0 + 30000, 7, NULL);
    ck_assert_int_eq(state(&t, T0 + 30001).window_requests, 3);
    ck_assert_int_eq(state(&t, T0 + 30001).window_tokens, 87);
    tier_outcome_init(&o);
    o.uncounted = true;
    o.charged = 50;
    o.sent_at = T0 + 500;
    settle_with(&t, b, T0 + 30002, &o);
    ck_assert_int_eq(state(&t, T0 + 30003).window_requests, 2);
    ck_assert_int_eq(state(&t, T0 + 30003).window_tokens, 37);
    ck_assert_int_eq(state(&t, T0 + 60000).window_requests, 1);
    ck_assert_int_eq(state(&t, T0 + 60000).window_tokens, 7);
    ck_assert_int_eq(state(&t, T0 + 90000).window_requests, 0);
}
END_TEST

/* A soft throttle stops the whole tier for the wait it names. */
START_TEST(test_throttle_cools_down_whole_tier)
{
    struct config_tier t = free_tier();
    struct tier_outcome o;
    struct tier_verdict v;

    t.rpm = 600;
    trust(&t, T0);
    tier_outcome_init(&o);
    o.uncounted = true;
    o.throttle_ms = 800;
    settle_with(&t, admit(&t, T0 + 100, 1, NULL), T0 + 200, &o);
    ck_assert_int_eq(admit(&t, T0 + 999, 1, &v), -1);
    ck_assert_str_eq(v.reason, "cooldown");
    ck_assert_int_eq(v.retry_at, T0 + 1000);
    ck_assert_int_gt(admit(&t, T0 + 1000, 1, NULL), 0);
    /* The bucket (10 at 600 rpm) did not fill during the stop: the runs
     * that waited go out one share (100 ms) apart, not as a burst. */
    ck_assert_int_eq(admit(&t, T0 + 1000, 1, &v), -1);
    ck_assert_int_eq(v.retry_at, T0 + 1100);
    ck_assert_int_gt(admit(&t, T0 + 1100, 1, NULL), 0);
}
END_TEST

/* Remaining 0 waits for the reset; with the limit known, for one
 * request's share of it, counted from the send. */
START_TEST(test_remaining_zero_waits_for_reset)
{
    struct config_tier t = free_tier();
    struct tier_outcome o;
    struct tier_verdict v;

    trust(&t, T0);
    tier_outcome_init(&o);
    o.result = TIER_RESULT_OK;
    o.sent_at = T0 + 10;
    o.remaining_requests = 0;
    o.requests_reset_at = T0 + 1500;
    settle_with(&t, admit(&t, T0 + 10, 1, NULL), T0 + 20, &o);
    ck_assert_int_eq(admit(&t, T0 + 1499, 1, &v), -1);
    ck_assert_str_eq(v.reason, "cooldown");
    ck_assert_int_gt(admit(&t, T0 + 1500, 1, NULL), 0);

    o.sent_at = T0 + 2000;
    o.requests_reset_at = T0 + 9000;
    o.limit_rpm = 600; /* one request's share: 100 ms, and 5 ms guard */
    settle_with(&t, admit(&t, T0 + 2000, 1, NULL), T0 + 2050, &o);
    ck_assert_int_eq(admit(&t, T0 + 2104, 1, &v), -1);
    ck_assert_int_eq(v.retry_at, T0 + 2105);
    ck_assert_int_gt(admit(&t, T0 + 2105, 1, NULL), 0);
}
END_TEST

/* Azure sends -1 in its limit headers; a reset years away is no wait. */
START_TEST(test_bogus_headers_ignored)
{
    const struct policy_header h[] = {
        {"x-ratelimit-limit-requests", "-1"},
        {"x-ratelimit-limit-tokens", "1e9"},
        {"anthropic-ratelimit-requests-limit", "0"},
    };
    const struct policy_header good[] = {
        {"X-RateLimit-Limit-Requests", " 600 "},
        {"anthropic-ratelimit-tokens-limit", "40000"},
    };
    struct config_tier t = free_tier();
    struct tier_outcome o;
    int64_t rpm = 7, tpm = 7;

    tier_limits_from_headers(h, 3, &rpm, &tpm);
    ck_assert_int_eq(rpm, 0);
    ck_assert_int_eq(tpm, 0);
    tier_limits_from_headers(good, 2, &rpm, &tpm);
    ck_assert_int_eq(rpm, 600);
    ck_assert_int_eq(tpm, 40000);
    trust(&t, T0);
    tier_outcome_init(&o);
    o.remaining_requests = 0;
    o.requests_reset_at = T0 + INT64_C(3) * 365 * 86400000;
    settle_with(&t, admit(&t, T0, 1, NULL), T0 + 1, &o);
    ck_assert_int_gt(admit(&t, T0 + 2, 1, NULL), 0);
}
END_TEST

/* Limit headers teach the ceiling: below a declared rpm, or where none
 * was declared. */
START_TEST(test_limits_learned_from_headers)
{
    struct config_tier t = free_tier();
    struct tier_outcome o;

    trust(&t, T0);
    ck_assert(tier_rate_rpm(&t, &(struct q_tier_state){.pace = 1}) == 0);
    tier_outcome_init(&o);
    o.result = TIER_RESULT_OK;
    o.limit_rpm = 300;
    o.limit_tpm = 30000;
    settle_with(&t, admit(&t, T0, 1, NULL), T0 + 1, &o);
    ck_assert(tier_rate_rpm(&t, &(struct q_tier_state){0}) == 0);
    struct q_tier_state st = state(&t, T0 + 2);
    ck_assert_int_eq((int)tier_rate_rpm(&t, &st), 300);
    ck_assert_int_eq((int)tier_rate_tpm(&t, &st), 30000);
    t.rpm = 1200; /* declared 4x too high: the endpoint's word wins */
    ck_assert_int_eq((int)tier_rate_rpm(&t, &st), 300);
    t.rpm = 100;
    ck_assert_int_eq((int)tier_rate_rpm(&t, &st), 100);
}
END_TEST

/* 429s despite pacing lower the pace (once per burst of them); it climbs
 * back by a hundredth of the ceiling per second, never above it. */
START_TEST(test_pace_falls_and_climbs_back)
{
    struct config_tier t = free_tier();
    struct tier_outcome thr, ok;
    int64_t now = T0;

    t.rpm = 600;
    trust(&t, now);
    tier_outcome_init(&thr);
    thr.uncounted = true;
    thr.throttle_ms = 1;
    thr.paced_down = true;
    tier_outcome_init(&ok);
    ok.result = TIER_RESULT_OK;
    settle_with(&t, admit(&t, now, 1, NULL), now + 1, &thr);
    struct q_tier_state st = state(&t, now + 2);
    ck_assert_int_eq((int)(tier_rate_rpm(&t, &st) + 0.5), 420);
    settle_with(&t, admit(&t, now + 500, 1, NULL), now + 500, &thr);
    st = state(&t, now + 501); /* the same burst: counted once */
    ck_assert_int_eq((int)(tier_rate_rpm(&t, &st) + 0.5), 420);
    settle_with(&t, admit(&t, now + 1500, 1, NULL), now + 1500, &thr);
    st = state(&t, now + 1501);
    ck_assert_int_eq((int)(tier_rate_rpm(&t, &st) + 0.5), 294);
    for (now = T0 + 2000; now <= T0 + 12000; now += 1000)
        settle_with(&t, admit(&t, now, 1, NULL), now, &ok);
    st = state(&t, now);
    /* 10.5 s since the last 429: +10.5% of the ceiling */
    ck_assert_int_eq((int)(tier_rate_rpm(&t, &st) + 0.5), 357);
    for (; now <= T0 + 200000; now += 5000)
        settle_with(&t, admit(&t, now, 1, NULL), now, &ok);
    st = state(&t, now);
    ck_assert_int_eq((int)(tier_rate_rpm(&t, &st) + 0.5), 600);
}
END_TEST

/* With no limit declared or learned, the first 429 makes the rate the
 * endpoint took (of the last ten seconds, since the tier began sending)
 * the ceiling, and the pace starts at 0.9 of it. */
START_TEST(test_pace_without_any_limit)
{
    struct config_tier t = free_tier();
    struct tier_outcome thr;
    struct q_tier_state st;

    trust(&t, T0 - 1000);
    tier_outcome_init(&thr);
    thr.uncounted = true;
    thr.throttle_ms = 1;
    thr.paced_down = true;
    /* Two sends tell nothing of a rate: only the cooldown acts. */
    settle_with(&t, admit(&t, T0 - 999, 1, NULL), T0 - 999, &thr);
    st = state(&t, T0 - 990);
    ck_assert(tier_rate_rpm(&t, &st) == 0);
    for (int i = 0; i < 50; i++)
        settle(&t, admit(&t, T0 + 100 * i, 1, NULL), T0 + 100 * i,
               TIER_RESULT_OK);
    settle_with(&t, admit(&t, T0 + 5000, 1, NULL), T0 + 5000, &thr);
    st = state(&t, T0 + 5001);
    /* 51 sends taken (not the refused one) since T0 - 1000: 510 rpm,
     * paced to 0.9 of it */
    ck_assert_int_eq((int)st.learned_rpm, 510);
    ck_assert_int_eq((int)(tier_rate_rpm(&t, &st) + 0.5), 459);
}
END_TEST

/* Two processes share one request bucket. Each admits as fast as
 * admission lets it (waiting until retry_at when refused) and reports the
 * time of each admitted send; together they conform to the bucket: in any
 * stretch of d ms, at most BURST + d * RATE sends. */
#define RATE  50 /* per second: rpm 50 per window_s 1 */
#define BURST 5
#define TOTAL 120

static void
admit_loop(const char *path, int out, int count)
{
    struct config_tier t = free_tier();
    q_db *d = NULL;

    t.rpm = RATE;
    t.window_s = 1; /* a "minute" of one second keeps the test short */
    t.burst = BURST;
    if (q_open(path, NULL, &d) != 0)
        _exit(1);
    while (count > 0) {
        struct tier_verdict v;
        struct tier_outcome o;
        int64_t now = clock_now_ms(), id = 0;
        if (tier_admit(d, &t, now, 1, false, &v, &id) != 0)
            _exit(2);
        if (!v.admitted) {
            int64_t wait = v.retry_at - clock_now_ms();
            poll(NULL, 0, wait > 0 ? (int)wait : 0);
            continue;
        }
        tier_outcome_init(&o);
        o.result = TIER_RESULT_OK;
        if (tier_settle(d, &t, id, now, &o, NULL) != 0 ||
            write(out, &now, sizeof(now)) != (ssize_t)sizeof(now))
            _exit(3);
        count--;
    }
    _exit(q_close(d) == 0 ? 0 : 4);
}

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

START_TEST(test_two_processes_share_one_bucket)
{
    char *path = tmpdir_join(dir, "q.db");
    int64_t at[TOTAL];
    int fds[2], n = 0, st;
    pid_t pids[2];

    ck_assert_int_eq(pipe(fds), 0);
    for (int p = 0; p < 2; p++) {
        pids[p] = fork();
        ck_assert_int_ge(pids[p], 0);
        if (pids[p] == 0) {
            close(fds[0]);
            admit_loop(path, fds[1], TOTAL / 2);
        }
    }
    close(fds[1]);
    while (n < TOTAL &&
           read(fds[0], &at[n], sizeof(at[n])) == (ssize_t)sizeof(at[n]))
        n++;
    close(fds[0]);
    for (int p = 0; p < 2; p++) {
        ck_assert_int_eq(waitpid(pids[p], &st, 0), pids[p]);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    ck_assert_int_eq(n, TOTAL);
    qsort(at, TOTAL, sizeof(at[0]), cmp_i64);
    for (int i = 0; i < TOTAL; i++) {
        for (int k = i; k < TOTAL; k++) {
            double allowed = BURST + (double)(at[k] - at[i]) * RATE / 1000.0;
            ck_assert_msg(k - i + 1 <= allowed + 1e-9,
                          "%d sends in %lld ms (bucket allows %.1f)", k - i + 1,
                          (long long)(at[k] - at[i]), allowed);
        }
    }
    /* and they are paced, not starved: 120 at 50/s take about 2.3 s */
    ck_assert_int_lt(at[TOTAL - 1] - at[0], 4000);
    free(path);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("tier_db");
    TCase *state = tcase_create("state");
    TCase *procs = tcase_create("processes");

    tcase_add_checked_fixture(state, setup, teardown);
    tcase_add_test(state, test_breaker_opens_probes_and_closes);
    tcase_add_test(state, test_failed_probe_reopens);
    tcase_add_test(state, test_neutral_answers_do_not_trip_breaker);
    tcase_add_test(state, test_quota_wall_blocks_until_reset);
    tcase_add_test(state, test_auth_wall_lifted_by_config_change);
    tcase_add_test(state, test_auth_wall_shown_lifted_before_a_worker_runs);
    tcase_add_loop_test(state, test_auth_wall_lifted_by_auth_headers_or_query,
                        0, 3);
    tcase_add_test(state, test_allowance_charged_and_corrected);
    tcase_add_test(state, test_inflight_cap_and_crashed_sends_expire);
    tcase_add_test(state, test_usage_counts_the_last_minute);
    tcase_add_test(state, test_doubt_admits_one_at_a_time);
    tcase_add_test(state, test_worker_start_puts_tier_in_doubt);
    tcase_add_test(state, test_throttle_cools_down_whole_tier);
    tcase_add_test(state, test_remaining_zero_waits_for_reset);
    tcase_add_test(state, test_bogus_headers_ignored);
    tcase_add_test(state, test_limits_learned_from_headers);
    tcase_add_test(state, test_pace_falls_and_climbs_back);
    tcase_add_test(state, test_pace_without_any_limit);
    suite_add_tcase(s, state);

    tcase_add_checked_fixture(procs, setup, teardown);
    tcase_set_timeout(procs, 30);
    tcase_add_test(procs, test_two_processes_share_one_bucket);
    suite_add_tcase(s, procs);
    return s;
}

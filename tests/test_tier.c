/* test_tier.c: admission rules as a table, then tier state in a real
 * database: breaker, walls, allowance, in-flight cap, and one rpm window
 * shared by two processes. */
#include "tests/support/support.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "worker/tier.h"

#define T0 INT64_C(1800000000000) /* 2027-01-15T08:00:00Z */

static struct config_tier
tier(void)
{
    struct config_tier t;
    memset(&t, 0, sizeof(t));
    t.name = "free";
    t.base_url = "http://127.0.0.1:1/v1";
    t.model = "m";
    t.window_s = 60;
    t.allowance_window_s = 86400;
    t.degrade_at = 0.8;
    t.timeout_s = 10;
    t.breaker.failures = 3;
    t.breaker.cooldown_s = 30;
    return t;
}

/* ---- the pure rule -------------------------------------------------- */

struct eval_case {
    const char *name;
    int64_t rpm, tpm, allowance, max_inflight;
    struct q_tier_state st;
    int64_t est;
    bool continuing;
    bool admitted, probe;
    const char *reason;
    int64_t retry_at;
};

static const struct eval_case eval_cases[] = {
    {"empty tier admits", 0, 0, 0, 0, {0}, 100, false, true, false, NULL, T0},
    {"wall refuses until reset",
     0,
     0,
     0,
     0,
     {.exhausted_until = T0 + 5000, .exhausted_reason = "daily_cap"},
     1,
     false,
     false,
     false,
     "exhausted",
     T0 + 5000},
    {"wall over admits",
     0,
     0,
     0,
     0,
     {.exhausted_until = T0},
     1,
     false,
     true,
     false,
     NULL,
     T0},
    {"breaker open refuses",
     0,
     0,
     0,
     0,
     {.breaker = Q_BREAKER_OPEN, .open_until = T0 + 9000},
     1,
     false,
     false,
     false,
     "breaker_open",
     T0 + 9000},
    {"cooldown over: one probe",
     0,
     0,
     0,
     0,
     {.breaker = Q_BREAKER_OPEN, .open_until = T0},
     1,
     false,
     true,
     true,
     NULL,
     T0},
    {"half open with probe out refuses",
     0,
     0,
     0,
     0,
     {.breaker = Q_BREAKER_HALF_OPEN, .probe_in_flight = true},
     1,
     false,
     false,
     false,
     "half_open_probe",
     T0 + 250},
    {"headers said 0 remaining",
     0,
     0,
     0,
     0,
     {.limited_until = T0 + 700},
     1,
     false,
     false,
     false,
     "rate_limit_headers",
     T0 + 700},
    {"max inflight reached",
     0,
     0,
     0,
     2,
     {.in_flight = 2},
     1,
     false,
     false,
     false,
     "max_inflight",
     T0 + 250},
    {"max inflight below",
     0,
     0,
     0,
     2,
     {.in_flight = 1},
     1,
     false,
     true,
     false,
     NULL,
     T0},
    {"rpm full: wait for oldest",
     3,
     0,
     0,
     0,
     {.window_requests = 3, .window_oldest = T0 - 20000},
     1,
     false,
     false,
     false,
     "rpm",
     T0 + 40250},
    {"rpm one left",
     3,
     0,
     0,
     0,
     {.window_requests = 2},
     1,
     false,
     true,
     false,
     NULL,
     T0},
    {"tpm would overflow",
     0,
     1000,
     0,
     0,
     {.window_requests = 1, .window_tokens = 900, .window_oldest = T0 - 1},
     200,
     false,
     false,
     false,
     "tpm",
     T0 + 60249},
    {"tpm: oversized request alone",
     0,
     1000,
     0,
     0,
     {0},
     5000,
     false,
     true,
     false,
     NULL,
     T0},
    {"allowance: new step stops at degrade_at",
     0,
     0,
     1000,
     0,
     {.allowance_used = 750, .allowance_since = T0 - 1},
     100,
     false,
     false,
     false,
     "allowance",
     T0 - T0 % 86400000 + 86400000},
    {"allowance: running step uses headroom",
     0,
     0,
     1000,
     0,
     {.allowance_used = 750, .allowance_since = T0 - 1},
     100,
     true,
     true,
     false,
     NULL,
     T0},
    {"allowance: headroom has an end",
     0,
     0,
     1000,
     0,
     {.allowance_used = 950, .allowance_since = T0 - 1},
     100,
     true,
     false,
     false,
     "allowance",
     T0 - T0 % 86400000 + 86400000},
    {"allowance: yesterday's use is gone",
     0,
     0,
     1000,
     0,
     {.allowance_used = 1000, .allowance_since = T0 - 86400000},
     100,
     false,
     true,
     false,
     NULL,
     T0},
};

START_TEST(test_evaluate_table)
{
    const struct eval_case *c = &eval_cases[_i];
    struct config_tier t = tier();
    struct tier_verdict v;

    t.rpm = c->rpm;
    t.tpm = c->tpm;
    t.allowance_tokens = c->allowance;
    t.max_inflight = (int)c->max_inflight;
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
    struct config_tier t = tier();

    ck_assert_int_eq(tier_wall_until(&t, T0), T0 + 3600000);
    t.allowance_tokens = 1000;
    ck_assert_int_eq(tier_wall_until(&t, T0), T0 - T0 % 86400000 + 86400000);
}
END_TEST

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
settle(const struct config_tier *t, int64_t id, int64_t now, enum tier_result r)
{
    struct tier_outcome o = {r, -1, 0, NULL, 0, false};
    ck_assert_int_eq(tier_settle(db, t, id, now, &o), 0);
}

START_TEST(test_breaker_opens_probes_and_closes)
{
    struct config_tier t = tier();
    struct tier_verdict v;
    struct q_tier_state st;
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
    ck_assert_int_eq(tier_snapshot(db, &t, T0 + 30005, true, &st), 0);
    ck_assert_int_eq(st.breaker, Q_BREAKER_CLOSED);
    ck_assert_int_eq(st.failures, 0);
    ck_assert_int_gt(admit(&t, T0 + 30005, 1, &v), 0);
    ck_assert(!v.probe);
}
END_TEST

START_TEST(test_failed_probe_reopens)
{
    struct config_tier t = tier();
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
    struct config_tier t = tier();
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

START_TEST(test_quota_wall_blocks_until_reset)
{
    struct config_tier t = tier();
    struct tier_outcome o = {TIER_RESULT_NEUTRAL, 50, T0 + 60000,
                             "daily_cap",         0,  false};
    struct tier_verdict v;
    struct q_tier_state st;

    ck_assert_int_eq(tier_settle(db, &t, admit(&t, T0, 10, NULL), T0, &o), 0);
    ck_assert_int_eq(admit(&t, T0 + 59999, 1, &v), -1);
    ck_assert_str_eq(v.reason, "exhausted");
    ck_assert_int_eq(tier_snapshot(db, &t, T0 + 1, true, &st), 0);
    ck_assert_str_eq(st.exhausted_reason, "daily_cap");
    ck_assert_int_gt(admit(&t, T0 + 60000, 1, &v), 0);
}
END_TEST

START_TEST(test_auth_wall_lifted_by_config_change)
{
    struct config_tier t = tier();
    struct tier_outcome o = {
        TIER_RESULT_NEUTRAL, 0, INT64_MAX / 2, "auth", 0, false};
    struct tier_verdict v;

    ck_assert_int_eq(tier_sync_config(db, &t), 0);
    ck_assert_int_eq(tier_settle(db, &t, admit(&t, T0, 1, NULL), T0, &o), 0);
    ck_assert_int_eq(tier_sync_config(db, &t), 0); /* same config */
    ck_assert_int_eq(admit(&t, T0 + 1, 1, &v), -1);
    t.api_key_env = "NEW_KEY";
    ck_assert_int_eq(tier_sync_config(db, &t), 0);
    ck_assert_int_gt(admit(&t, T0 + 2, 1, &v), 0);
}
END_TEST

START_TEST(test_allowance_charged_and_corrected)
{
    struct config_tier t = tier();
    struct tier_outcome o = {TIER_RESULT_OK, 300, 0, NULL, 0, false};
    struct tier_verdict v;
    struct q_tier_state st;
    int64_t id;

    t.allowance_tokens = 1000;
    id = admit(&t, T0, 100, NULL);
    ck_assert_int_eq(tier_snapshot(db, &t, T0, true, &st), 0);
    ck_assert_int_eq(st.allowance_used, 100);
    ck_assert_int_eq(tier_settle(db, &t, id, T0 + 1, &o), 0);
    ck_assert_int_eq(tier_snapshot(db, &t, T0 + 1, true, &st), 0);
    ck_assert_int_eq(st.allowance_used, 300);
    ck_assert_int_eq(tier_settle(db, &t, id, T0 + 1, &o), -EALREADY);
    id = admit(&t, T0 + 2, 450, NULL); /* 750 of 800 */
    ck_assert_int_gt(id, 0);
    ck_assert_int_eq(admit(&t, T0 + 3, 100, &v), -1);
    ck_assert_str_eq(v.reason, "allowance");
}
END_TEST

START_TEST(test_inflight_cap_and_crashed_sends_expire)
{
    struct config_tier t = tier();
    struct tier_verdict v;
    int64_t a;

    t.max_inflight = 2;
    a = admit(&t, T0, 1, NULL);
    ck_assert_int_gt(admit(&t, T0, 1, NULL), 0); /* never settled: "crash" */
    ck_assert_int_eq(admit(&t, T0 + 1, 1, &v), -1);
    ck_assert_str_eq(v.reason, "max_inflight");
    settle(&t, a, T0 + 2, TIER_RESULT_OK);
    ck_assert_int_gt(admit(&t, T0 + 3, 1, NULL), 0);
    ck_assert_int_eq(admit(&t, T0 + 4, 1, &v), -1);
    /* timeout 10 s + 30 s margin: the unsettled sends stop counting */
    ck_assert_int_gt(admit(&t, T0 + 40001, 1, NULL), 0);
}
END_TEST

/* Two processes share one rpm window. Each admits as fast as admission
 * lets it (waiting until retry_at when refused) and reports the time of
 * each admitted send; no window may hold more than rpm of them. */
#define RPM   60
#define TOTAL 120

static void
admit_loop(const char *path, int out, int count)
{
    struct config_tier t = tier();
    q_db *d = NULL;

    t.rpm = RPM;
    t.window_s = 1; /* a "minute" of one second keeps the test short */
    if (q_open(path, NULL, &d) != 0)
        _exit(1);
    while (count > 0) {
        struct tier_verdict v;
        int64_t now = clock_now_ms(), id = 0;
        if (tier_admit(d, &t, now, 1, false, &v, &id) != 0)
            _exit(2);
        if (!v.admitted) {
            int64_t wait = v.retry_at - clock_now_ms();
            poll(NULL, 0, wait > 0 ? (int)wait : 0);
            continue;
        }
        struct tier_outcome o = {TIER_RESULT_OK, -1, 0, NULL, 0, false};
        if (tier_settle(d, &t, id, now, &o) != 0 ||
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

START_TEST(test_two_processes_share_rpm_window)
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
        int in_window = 0;
        for (int k = 0; k <= i; k++)
            in_window += at[k] > at[i] - 1000;
        ck_assert_msg(in_window <= RPM, "%d sends in the second before %d",
                      in_window, i);
    }
    free(path);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("tier");
    TCase *rule = tcase_create("rule");
    TCase *state = tcase_create("state");
    TCase *procs = tcase_create("processes");

    tcase_add_loop_test(rule, test_evaluate_table, 0,
                        (int)(sizeof(eval_cases) / sizeof(eval_cases[0])));
    tcase_add_test(rule, test_wall_without_reset);
    suite_add_tcase(s, rule);

    tcase_add_checked_fixture(state, setup, teardown);
    tcase_add_test(state, test_breaker_opens_probes_and_closes);
    tcase_add_test(state, test_failed_probe_reopens);
    tcase_add_test(state, test_neutral_answers_do_not_trip_breaker);
    tcase_add_test(state, test_quota_wall_blocks_until_reset);
    tcase_add_test(state, test_auth_wall_lifted_by_config_change);
    tcase_add_test(state, test_allowance_charged_and_corrected);
    tcase_add_test(state, test_inflight_cap_and_crashed_sends_expire);
    suite_add_tcase(s, state);

    tcase_add_checked_fixture(procs, setup, teardown);
    tcase_set_timeout(procs, 30);
    tcase_add_test(procs, test_two_processes_share_rpm_window);
    suite_add_tcase(s, procs);
    return s;
}

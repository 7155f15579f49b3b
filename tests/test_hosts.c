/* test_hosts.c: stepq across many hosts, on PostgreSQL only (the run's
 * cluster, a schema per test: tests/support/pgfix.h). Real `stepq work`
 * processes stand in for hosts: each has its own worker id and its own
 * connection over TCP (the cluster's URL names 127.0.0.1), against the
 * real `stepq mock`.
 *
 * - 4 hosts drain 20,000 one-step jobs: every job succeeded once, the
 *   mock saw each request once, and the ledger holds one successful
 *   attempt per job, spread over the 4 workers.
 * - Clock skew: a worker whose clock runs 60 s ahead (Debian's faketime)
 *   next to a normal one measures leases, run_at and the tier's window
 *   with the database's clock: it steals no lease, runs no job before its
 *   run_at and keeps the shared pace. */
#include "tests/support/support.h"

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "tests/support/e2e.h"
#include "tests/support/pgfix.h"

#define HOSTS_JOBS 20000

/* Waits (deadline timeout_ms) until sql answers want on the store. */
static void
wait_for_answer(const char *sql, const char *want, int64_t timeout_ms)
{
    int64_t end = clock_mono_ms() + timeout_ms;

    for (;;) {
        char *got = pgfix_line(e2e_db, sql);
        bool same = strcmp(got, want) == 0;

        if (!same && clock_mono_ms() >= end)
            ck_abort_msg("%s: %s, not %s", sql, got, want);
        free(got);
        if (same)
            return;
        poll(NULL, 0, 20);
    }
}

/* `stepq work --worker-id id --concurrency 16 DRAIN` whose wall clock runs
 * 60 s ahead (its monotonic clock stays the host's, as on a host whose
 * time is off). */
static pid_t
spawn_skewed(const char *id, const char *drain)
{
    return e2e_spawn_faked("+60s", true,
                           (const char *[]){"--worker-id", id, "--concurrency",
                                            "16", drain, NULL});
}

static pid_t
spawn_normal(const char *id, const char *concurrency)
{
    return e2e_spawn_workerv((const char *[]){
        "--worker-id", id, "--concurrency", concurrency, "--drain", NULL});
}

/* Four hosts, 20,000 jobs, each sent and succeeded exactly once. */
START_TEST(test_four_hosts_drain_20000_exactly_once)
{
    const char *ids[4] = {"host-1", "host-2", "host-3", "host-4"};
    pid_t w[4];

    e2e_start("{}", "");
    e2e_config(30, "");
    e2e_enqueue_many(HOSTS_JOBS, "");
    for (int i = 0; i < 4; i++)
        w[i] = spawn_normal(ids[i], "64");
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(e2e_wait_exit(w[i]), 0);
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), HOSTS_JOBS);
    pgfix_expect(e2e_db,
                 "SELECT count(*), count(DISTINCT job_id), count(DISTINCT "
                 "worker), count(*) FILTER (WHERE outcome = 'ok' AND "
                 "decision = 'commit') FROM attempts",
                 "20000|20000|4|20000");
    e2e_expect_each_sent_once(HOSTS_JOBS);
}
END_TEST

/* Job 1 takes 4 s at the mock, held by worker "a" (one at a time) on a
 * 30 s lease; the skewed worker "b" starts meanwhile and runs job 2. To
 * b's own clock a's lease ran out 30 s ago; by the database's it has not,
 * so job 1 is sent once, by a. */
START_TEST(test_skewed_worker_steals_no_lease)
{
    pid_t a, b;

    e2e_start("{\"routes\":[{\"path\":\"/free\",\"latency_ms\":4000}]}", "");
    e2e_config(30, "");
    e2e_enqueue("{\"name\":\"slow\",\"priority\":10,\"steps\":[{\"name\":"
                "\"a\",\"tiers\":[\"free\"],\"request\":{\"messages\":[{"
                "\"role\":\"user\",\"content\":\"x\"}]}}]}");
    a = spawn_normal("a", "1");
    wait_for_answer("SELECT lease_owner FROM jobs WHERE id = 1", "a", 10000);
    e2e_enqueue(E2E_CHAT_JOB("\"tiers\":[\"local\"],", ""));
    b = spawn_skewed("b", "--drain");
    wait_for_answer("SELECT count(*) FROM attempts WHERE job_id = 2 AND "
                    "worker = 'b' AND outcome = 'ok'",
                    "1", 30000);
    pgfix_expect(e2e_db, "SELECT state, lease_owner FROM jobs WHERE id = 1",
                 "1|a");
    ck_assert_int_eq(e2e_wait_exit(a), 0);
    ck_assert_int_eq(e2e_wait_exit(b), 0);
    pgfix_expect(e2e_db,
                 "SELECT count(*), min(worker), max(worker) FROM attempts "
                 "WHERE job_id = 1",
                 "1|a|a");
    ck_assert_int_eq(e2e_sent_to(NULL, "/free"), 1);
}
END_TEST

/* Job 1 is due in 30 s and comes first; job 2 is due now. The skewed
 * worker runs job 2 and leaves job 1 unclaimed: to its own clock job 1
 * was due 30 s ago, to the database's it is not due yet. */
START_TEST(test_skewed_worker_waits_for_run_at)
{
    char job[512], at[32];
    pid_t b;

    e2e_start("{}", "");
    e2e_config(30, "");
    clock_format_utc(clock_now_ms() + 30000, at, sizeof(at));
    snprintf(job, sizeof(job),
             "{\"name\":\"later\",\"priority\":10,\"run_at\":\"%s\","
             "\"steps\":[{\"name\":\"a\",\"request\":{\"messages\":[{"
             "\"role\":\"user\",\"content\":\"x\"}]}}]}",
             at);
    e2e_enqueue(job);
    e2e_enqueue(E2E_CHAT_JOB("", ""));
    b = spawn_skewed("b", NULL);
    wait_for_answer("SELECT state FROM jobs WHERE id = 2", "2", 30000);
    pgfix_expect(e2e_db, "SELECT state, claims FROM jobs WHERE id = 1", "0|0");
    kill(b, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(b), 0);
    ck_assert_int_eq(e2e_sent_to(NULL, ""), 1);
}
END_TEST

/* 60 jobs on a tier paced to 60 a second with a burst of 5, drained by a
 * normal and a skewed worker at once: the window they share is the
 * database's, so the 60 sends take at least the 55 / 60 s the pace
 * allows (with 50 ms of loopback slack), and the pace is used (< 3 s). */
START_TEST(test_skewed_worker_keeps_the_shared_pace)
{
    double ts[60], lo = 1e18, hi = 0;
    pid_t a, b;

    e2e_start("{}", "");
    e2e_config(30,
               "\"timeout_s\": 5, \"rpm\": 60, \"window_s\": 1, \"burst\": 5");
    e2e_enqueue_many(60, "\"tiers\":[\"free\"],");
    a = spawn_normal("a", "16");
    b = spawn_skewed("b", "--drain");
    ck_assert_int_eq(e2e_wait_exit(a), 0);
    ck_assert_int_eq(e2e_wait_exit(b), 0);
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 60);
    ck_assert_int_eq(e2e_arrivals(NULL, "", ts, 60, NULL), 60);
    for (int i = 0; i < 60; i++) {
        lo = ts[i] < lo ? ts[i] : lo;
        hi = ts[i] > hi ? ts[i] : hi;
    }
    ck_assert_msg(hi - lo >= 55 * 1000 / 60 - 50, "60 sends in %.0f ms",
                  hi - lo);
    ck_assert_double_lt(hi - lo, 3000);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("hosts");
    TCase *many = tcase_create("many hosts");
    TCase *skew = tcase_create("clock skew");

    tcase_add_checked_fixture(many, e2e_setup, e2e_teardown);
    tcase_set_timeout(many, 120);
    tcase_add_test(many, test_four_hosts_drain_20000_exactly_once);
    suite_add_tcase(s, many);

    tcase_add_checked_fixture(skew, e2e_setup, e2e_teardown);
    tcase_set_timeout(skew, 60);
    tcase_add_test(skew, test_skewed_worker_steals_no_lease);
    tcase_add_test(skew, test_skewed_worker_waits_for_run_at);
    tcase_add_test(skew, test_skewed_worker_keeps_the_shared_pace);
    suite_add_tcase(s, skew);
    return s;
}

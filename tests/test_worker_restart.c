/* test_worker_restart.c: the worker on a shared PostgreSQL server, PG only
 * (the run's cluster, a schema per test: tests/support/pgfix.h), with the
 * real `stepq work` and the real `stepq mock`.
 *
 * - The server restarted (scripts/pg-cluster.sh restart) under a running
 *   worker with side-effecting requests in flight: afterwards every job
 *   succeeded once, the mock saw each request once (no step in doubt, none
 *   sent twice), and the worker said once that the database was
 *   unreachable and once that it was back.
 * - An idle worker whose next look for work is a minute away claims a
 *   job at once when it is enqueued (LISTEN/NOTIFY). */
#include "tests/support/support.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/file.h"
#include "tests/support/e2e.h"
#include "tests/support/pgfix.h"

#define NJOBS 40
#define SLOW_COMMENTS                                                          \
    "{\"routes\": [{\"path\": \"/comments\", \"latency_ms\": 250}]}"

/* Writes stepq.json: long leases (the restart must not cost them), and
 * an idle worker that looks for work every idle_poll_ms. */
static void
write_config(int idle_poll_ms)
{
    char cfg[256];

    snprintf(cfg, sizeof(cfg),
             "{\"worker\": {\"lease_s\": 60, \"idle_poll_ms\": %d}}",
             idle_poll_ms);
    free(tmpdir_write(e2e_dir, "stepq.json", cfg, strlen(cfg)));
}

static void
restart_server(void)
{
    char cmd[1024];
    char *script = source_path("scripts/pg-cluster.sh");

    snprintf(cmd, sizeof(cmd), "bash '%s' restart '%s'", script,
             getenv("STEPQ_TEST_PG_DIR"));
    free(script);
    ck_assert_int_eq(system(cmd), 0);
}

/* Waits (deadline timeout_ms) until pid exits; its exit code. */
static int
wait_exit_by(pid_t pid, int64_t timeout_ms)
{
    int64_t end = clock_mono_ms() + timeout_ms;
    int status = 0;

    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (clock_mono_ms() >= end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            ck_abort_msg("the worker did not finish");
        }
        poll(NULL, 0, 20);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Each of the jobs' requests reached the mock exactly once. */
static void
expect_each_request_once(void)
{
    cJSON *log = e2e_mock_log();

    ck_assert_int_eq(e2e_sent_to(log, "/comments"), 2 * NJOBS);
    for (int i = 0; i < NJOBS; i++) {
        char a[48], b[48];
        snprintf(a, sizeof(a), "/comments/%d/a", i);
        snprintf(b, sizeof(b), "/comments/%d/b", i);
        ck_assert_msg(e2e_sent_to(log, a) == 1, "%s sent %d times", a,
                      e2e_sent_to(log, a));
        ck_assert_msg(e2e_sent_to(log, b) == 1, "%s sent %d times", b,
                      e2e_sent_to(log, b));
    }
    cJSON_Delete(log);
}

START_TEST(test_server_restart_loses_nothing_sends_nothing_twice)
{
    cJSON *st;
    pid_t w;

    e2e_start(SLOW_COMMENTS, "");
    write_config(200);
    e2e_enqueue_two_posts(NJOBS);
    w = e2e_spawn_workerv(
        (const char *[]){"--drain", "--concurrency", "8", NULL});
    e2e_wait_for_requests(12, 30000); /* requests in flight, jobs half done */
    restart_server();
    ck_assert_int_eq(wait_exit_by(w, 120000), 0);
    st = e2e_status();
    ck_assert_int_eq(e2e_count(st, "succeeded"), NJOBS);
    cJSON_Delete(st);
    expect_each_request_once();
    ck_assert_int_eq(
        e2e_log_count("cannot commit to the database: retrying in"), 1);
    ck_assert_int_eq(e2e_log_count("database commits again"), 1);
}
END_TEST

/* The job's state, by `jobs show`. Caller frees. */
static char *
job_state(int id)
{
    cJSON *job = e2e_show(id);
    char *s = strdup(e2e_str(job, "state"));

    cJSON_Delete(job);
    return s;
}

/* Waits (deadline timeout_ms) until job id succeeded; how long it took. */
static int64_t
wait_succeeded(int id, int64_t timeout_ms)
{
    int64_t t0 = clock_mono_ms();

    for (;;) {
        char *s = job_state(id);
        bool done = strcmp(s, "succeeded") == 0;
        free(s);
        if (done)
            return clock_mono_ms() - t0;
        ck_assert_msg(clock_mono_ms() - t0 < timeout_ms,
                      "job %d not done after %lld ms", id,
                      (long long)timeout_ms);
        poll(NULL, 0, 5);
    }
}

/* An idle worker whose next look for work is a minute away: the NOTIFY of
 * an enqueue makes it claim at once. */
START_TEST(test_idle_worker_woken_by_enqueue)
{
    char job[512];
    int64_t took;
    pid_t w;

    e2e_start(SLOW_COMMENTS, "");
    write_config(60000);
    w = e2e_spawn_workerv((const char *[]){"--concurrency", "4", NULL});
    snprintf(job, sizeof(job),
             "{\"name\":\"first\",\"steps\":[{\"name\":\"a\",\"kind\":"
             "\"http\",\"http\":{\"url\":\"http://127.0.0.1:%d/x\"}}]}",
             e2e_mock.port);
    e2e_enqueue(job); /* woken by this one, or found by the first claim */
    wait_succeeded(1, 30000);
    e2e_enqueue(job); /* the worker is idle: its next claim is 60 s away */
    took = wait_succeeded(2, 30000);
    fprintf(stderr, "enqueue to done on an idle worker: %lld ms\n",
            (long long)took);
    kill(w, SIGTERM);
    ck_assert_int_eq(wait_exit_by(w, 30000), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("worker_restart");
    TCase *tc = tcase_create("restart");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_server_restart_loses_nothing_sends_nothing_twice);
    suite_add_tcase(s, tc);
    tc = tcase_create("wake");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, test_idle_worker_woken_by_enqueue);
    suite_add_tcase(s, tc);
    return s;
}

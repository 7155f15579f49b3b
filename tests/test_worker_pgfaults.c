/* test_worker_pgfaults.c: PostgreSQL faults under 4 workers and load
 * (issue 45), each on a cluster of the test's own (scripts/pg-cluster.sh;
 * the run's cluster stays up for the other suites), with the real `stepq
 * work` and the real `stepq mock`:
 * - the server stopped with -m immediate (a crash) and started again;
 * - the workers' backends killed with pg_terminate_backend;
 * - the server frozen (SIGSTOP) past the leases and past the workers'
 *   wait for an answer, then thawed;
 * - the primary crashed and its synchronous streaming replica promoted,
 *   the workers reaching it through a multi-host location with
 *   target_session_attrs=read-write.
 * After each: every job ended (succeeded, or parked in doubt for a post
 * that was in flight when its lease was lost), no post without a key
 * reached the mock twice, and the workers said what happened. */
#include "tests/support/support.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "tests/support/e2e.h"

#define NJOBS    40
#define NWORKERS 4
#define SLOW_COMMENTS                                                          \
    "{\"routes\": [{\"path\": \"/comments\", \"latency_ms\": 250}]}"

static char *cdir, *rdir; /* the cluster's folder, the replica's */

/* Runs scripts/pg-cluster.sh cmd dir [arg]; asserts it exits 0. */
static void
cluster(const char *cmd, const char *dir, const char *arg)
{
    char *script = source_path("scripts/pg-cluster.sh"), *out = NULL;
    char sh[2048];

    snprintf(sh, sizeof(sh), "bash '%s' %s '%s' %s%s%s", script, cmd, dir,
             arg ? "'" : "", arg ? arg : "", arg ? "'" : "");
    ck_assert_msg(run_sh(sh, &out) == 0, "%s: %s", sh, out);
    free(out);
    free(script);
}

/* The URL a cluster's folder holds (DIR/url). Caller frees. */
static char *
url_of(const char *dir)
{
    char *path = tmpdir_join(dir, "url"), *url = NULL;
    size_t len = 0;

    ck_assert_int_eq(file_read_all(path, 4096, &url, &len), 0);
    url[strcspn(url, "\n")] = '\0';
    free(path);
    return url;
}

/* e2e_setup, then a cluster of the test's own as e2e_db. */
static void
setup(void)
{
    e2e_setup();
    /* As root the cluster runs as postgres, which must reach its folder. */
    ck_assert_int_eq(chmod(e2e_dir, 0711), 0);
    cdir = tmpdir_join(e2e_dir, "c");
    rdir = tmpdir_join(e2e_dir, "r");
    cluster("start", cdir, NULL);
    free(e2e_db);
    e2e_db = url_of(cdir);
    run_db = e2e_db;
}

static void
teardown(void)
{
    char *script = source_path("scripts/pg-cluster.sh"), *out = NULL;
    char sh[2048];

    /* A frozen server would not stop. */
    snprintf(sh, sizeof(sh),
             "bash '%s' thaw '%s'; bash '%s' stop '%s'; bash '%s' stop '%s'",
             script, cdir, script, cdir, script, rdir);
    (void)run_sh(sh, &out);
    free(out);
    free(script);
    free(cdir);
    free(rdir);
    e2e_teardown();
}

/* The mock, stepq.json (leases of 8 s: a worker waits 10 s for an answer,
 * its floor), the store, and NJOBS jobs of two posts each. */
static void
start_load(void)
{
    const char cfg[] = "{\"worker\": {\"lease_s\": 8, \"idle_poll_ms\": 100}}";

    e2e_start(SLOW_COMMENTS, "");
    free(tmpdir_write(e2e_dir, "stepq.json", cfg, strlen(cfg)));
    e2e_enqueue_two_posts(NJOBS);
}

/* Starts the workers and waits until each has opened its store (a
 * worker that cannot connect when it starts exits 1: the fault must come
 * after) and the mock has seen requests. */
static void
spawn_workers(pid_t *w)
{
    int64_t end = clock_mono_ms() + 30000;

    setenv("STEPQ_LOG", "info", 1); /* "worker ID: concurrency 4" */
    for (int i = 0; i < NWORKERS; i++)
        w[i] = e2e_spawn_workerv(
            (const char *[]){"--drain", "--concurrency", "4", NULL});
    unsetenv("STEPQ_LOG");
    while (e2e_log_count(": concurrency 4") < NWORKERS) {
        ck_assert_msg(clock_mono_ms() < end, "the workers did not start");
        poll(NULL, 0, 20);
    }
    e2e_wait_for_requests(12, 30000);
}

/* Waits (deadline timeout_ms) until each worker exits 0. */
static void
wait_workers(const pid_t *w, int64_t timeout_ms)
{
    int64_t end = clock_mono_ms() + timeout_ms;

    for (int i = 0; i < NWORKERS; i++) {
        int status = 0;
        while (waitpid(w[i], &status, WNOHANG) == 0) {
            if (clock_mono_ms() >= end) {
                for (int k = 0; k < NWORKERS; k++)
                    kill(w[k], SIGKILL);
                ck_abort_msg("worker %d did not finish", i);
            }
            poll(NULL, 0, 50);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            char *out = NULL;
            (void)run_sh("grep -v '^{' work.log | grep -v 'leave.c\\|answer.c'",
                         &out);
            fprintf(stderr, "work.log:\n%s", out);
            ck_abort_msg("worker %d: status %d (work.log above)", i, status);
        }
    }
}

/* Every job ended: succeeded with each post sent once, or parked in doubt
 * with its step's post sent at most once and nothing after it. Returns
 * how many were parked. */
static int
expect_invariants(void)
{
    cJSON *log = e2e_mock_log(), *st = e2e_status();
    int parked = e2e_count(st, "parked");

    ck_assert_int_eq(e2e_count(st, "succeeded") + parked, NJOBS);
    for (int i = 0; i < NJOBS; i++) {
        char a[48], b[48];
        cJSON *job = e2e_show(i + 1);
        const char *state = e2e_str(job, "state");
        snprintf(a, sizeof(a), "/comments/%d/a", i);
        snprintf(b, sizeof(b), "/comments/%d/b", i);
        ck_assert_msg(e2e_sent_to(log, a) <= 1, "%s sent twice", a);
        ck_assert_msg(e2e_sent_to(log, b) <= 1, "%s sent twice", b);
        if (strcmp(state, "succeeded") == 0) {
            ck_assert_int_eq(e2e_sent_to(log, a), 1);
            ck_assert_int_eq(e2e_sent_to(log, b), 1);
        } else {
            const cJSON *park = cJSON_GetObjectItem(job, "park");
            ck_assert_str_eq(state, "parked");
            ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(park, 0), "reason"),
                             "in_doubt");
        }
        cJSON_Delete(job);
    }
    cJSON_Delete(st);
    cJSON_Delete(log);
    fprintf(stderr, "%d of %d jobs parked in doubt\n", parked, NJOBS);
    return parked;
}

START_TEST(test_immediate_stop_and_start)
{
    pid_t w[NWORKERS];

    start_load();
    spawn_workers(w);
    cluster("crash", cdir, NULL);
    wait_workers(w, 120000);
    expect_invariants();
    ck_assert_int_ge(e2e_log_count("connection lost"), 1);
    ck_assert_int_ge(e2e_log_count("reconnected to the database"), 1);
}
END_TEST

START_TEST(test_backends_terminated)
{
    const char sql[] = "SELECT count(pg_terminate_backend(pid)) FROM "
                       "pg_stat_activity WHERE application_name = 'stepq'";
    char *out = NULL, sh[2048];
    pid_t w[NWORKERS];

    start_load();
    spawn_workers(w);
    snprintf(sh, sizeof(sh), "psql -X -q -A -t '%s' -c \"%s\"", e2e_db, sql);
    ck_assert_msg(run_sh(sh, &out) == 0, "%s", out);
    ck_assert_msg(atoi(out) >= NWORKERS, "terminated %s", out);
    free(out);
    wait_workers(w, 120000);
    expect_invariants();
    ck_assert_int_ge(
        e2e_log_count("terminating connection due to administrator"), 1);
    ck_assert_int_ge(e2e_log_count("reconnected to the database"), 1);
}
END_TEST

START_TEST(test_server_frozen_past_the_lease)
{
    pid_t w[NWORKERS];

    start_load();
    spawn_workers(w);
    cluster("freeze", cdir, NULL);
    /* Past the 8 s leases and the workers' 10 s wait for an answer. */
    poll(NULL, 0, 14000);
    ck_assert_int_ge(e2e_log_count("no answer from the server in 10000 ms"), 1);
    cluster("thaw", cdir, NULL);
    wait_workers(w, 120000);
    expect_invariants();
    ck_assert_int_ge(e2e_log_count("reconnected to the database"), 1);
}
END_TEST

START_TEST(test_failover_to_a_promoted_replica)
{
    char *primary = url_of(cdir), *replica, loc[1024];
    char host[64], pw[128];
    int pport = 0, rport = 0;
    pid_t w[NWORKERS];

    cluster("replica", cdir, rdir);
    replica = url_of(rdir);
    ck_assert_int_eq(sscanf(primary, "postgresql://stepq:%127[^@]@%63[^:]:%d",
                            pw, host, &pport),
                     3);
    ck_assert_int_eq(sscanf(strrchr(replica, ':'), ":%d", &rport), 1);
    snprintf(loc, sizeof(loc),
             "host=127.0.0.1,127.0.0.1 port=%d,%d user=stepq password=%s "
             "dbname=postgres target_session_attrs=read-write",
             pport, rport, pw);
    free(e2e_db);
    e2e_db = xstrdup(loc);
    run_db = e2e_db;
    start_load();
    spawn_workers(w);
    cluster("halt", cdir, NULL);
    cluster("promote", rdir, NULL);
    wait_workers(w, 120000);
    expect_invariants();
    ck_assert_int_ge(e2e_log_count("reconnected to the database"), 1);
    free(primary);
    free(replica);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("worker_pgfaults");
    TCase *tc = tcase_create("faults");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 200);
    tcase_add_test(tc, test_immediate_stop_and_start);
    tcase_add_test(tc, test_backends_terminated);
    tcase_add_test(tc, test_server_frozen_past_the_lease);
    suite_add_tcase(s, tc);
    tc = tcase_create("failover");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 200);
    tcase_add_test(tc, test_failover_to_a_promoted_replica);
    suite_add_tcase(s, tc);
    return s;
}

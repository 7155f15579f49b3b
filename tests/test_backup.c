/* test_backup.c: `stepq backup`, `stepq prune` and the config's
 * retention, through the real binary on real stores (a SQLite file, or a
 * PostgreSQL schema in the _pg variant) with the real mock and real
 * worker processes: a backup taken under load while a side-effecting post
 * is in flight, the worker then killed, restores into a new folder where
 * a new worker loses no job and parks the post in doubt instead of
 * sending it again; DEST's rules; prune's counts; the retention applied
 * by a worker whose clock is two days ahead; bad retention values. */
#include "tests/support/support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/e2e.h"
#include "tests/support/pgfix.h"

/* A post with side effects and no idempotency key: never sent twice. */
#define POST_JOB                                                               \
    "{\"name\":\"p\",\"steps\":[{\"name\":\"post\",\"kind\":\"http\","         \
    "\"http\":{\"method\":\"POST\",\"url\":\"http://127.0.0.1:%d/comments\","  \
    "\"body\":{\"text\":\"hi\"}}}]}"
#define LOAD 40

/* Waits until job 1's first attempt is in the ledger: committed before
 * its request goes out (ledger before send), so the post is in flight. */
static void
wait_recorded(void)
{
    for (int64_t end = clock_mono_ms() + 15000;;) {
        cJSON *job = e2e_show(1);
        bool in = e2e_hist(job, 0, 0) != NULL;

        cJSON_Delete(job);
        if (in)
            return;
        ck_assert_msg(clock_mono_ms() < end, "the post was never recorded");
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
}

static int
run_sh_ok(const char *cmd)
{
    char *out = NULL;
    int rc = run_sh(cmd, &out);

    ck_assert_msg(rc == 0, "%s: %s", cmd, out);
    free(out);
    return rc;
}

START_TEST(test_backup_under_load_restores_with_in_doubt)
{
    char job[512];
    struct run_result r;
    cJSON *st, *post;
    pid_t w;

    e2e_start("{\"routes\":[{\"path\":\"/comments\",\"latency_ms\":5000},"
              "{\"path\":\"/free\",\"latency_ms\":100}]}",
              "");
    snprintf(job, sizeof(job), POST_JOB, e2e_mock.port);
    e2e_enqueue(job);
    e2e_enqueue_many(LOAD, "\"tiers\":[\"free\"],");
    w = e2e_spawn_workerv((const char *[]){"--concurrency", "200", NULL});
    wait_recorded();
    ck_assert_msg(RUN(&r, NULL, "backup", "b.db") == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "backup b.db written"));
    run_result_free(&r);
    kill(w, SIGKILL);
    ck_assert_int_eq(e2e_wait_exit(w), 128 + SIGKILL);
    /* Restore into a new folder: copy the backup over, stepq init. */
    run_sh_ok("mkdir restored && cp b.db restored/stepq.db");
    run_db = "restored/stepq.db";
    e2e_init();
    free(e2e_drain());
    st = e2e_status();
    ck_assert_int_eq(e2e_count(st, "succeeded"), LOAD);
    ck_assert_int_eq(e2e_count(st, "parked"), 1);
    cJSON_Delete(st);
    post = e2e_show(1);
    e2e_expect_attempt(post, 0, NULL, "in_doubt", "park_for_human");
    cJSON_Delete(post);
    ck_assert_int_eq(e2e_sent_to(NULL, "/comments"), 1); /* not resent */
}
END_TEST

START_TEST(test_backup_dest_rules)
{
    struct run_result r;
    struct stat st;

    e2e_start("{}", "");
    e2e_enqueue_many(3, "");
    ck_assert_int_eq(RUN(&r, NULL, "backup", "b.db", "--json"), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "\"backup\":\"b.db\""));
    run_result_free(&r);
    ck_assert_int_eq(stat("b.db", &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(access("b.db.tmp", F_OK), -1);
    ck_assert_int_eq(RUN(&r, NULL, "backup", "b.db"), 4);
    ck_assert_ptr_nonnull(strstr(r.err, "b.db exists; nothing was written"));
    run_result_free(&r);
    e2e_enqueue_many(2, "");
    ck_assert_int_eq(RUN(&r, NULL, "backup", "b.db", "--force"), 0);
    run_result_free(&r);
    ck_assert_int_eq(run_job_count("b.db"), 5);
    ck_assert_int_eq(RUN(&r, NULL, "backup"), 2);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "backup", "no/such/dir/b.db"), 1);
    ck_assert_ptr_nonnull(strstr(r.err, "nothing was written"));
    run_result_free(&r);
}
END_TEST

/* The database itself as DEST would be renamed over under its workers. */
START_TEST(test_backup_refuses_the_database_itself)
{
    struct run_result r;

    fixture_init("q.db");
    ck_assert_int_eq(RUN(&r, NULL, "--db", "q.db", "backup", "./q.db"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "is the database itself"));
    run_result_free(&r);
    ck_assert_int_eq(run_job_count("q.db"), 0);
}
END_TEST

/* A prune's counts, as JSON: member k of "pruned". */
static int
pruned(const char *out, const char *k)
{
    cJSON *o = cJSON_Parse(out);
    int n;

    ck_assert_ptr_nonnull(o);
    n = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "pruned"), k)->valueint;
    cJSON_Delete(o);
    return n;
}

START_TEST(test_prune_counts_then_removes_finished_jobs)
{
    struct run_result r;

    e2e_start("{}", "");
    e2e_enqueue_many(5, "\"tiers\":[\"free\"],");
    free(e2e_drain());
    e2e_enqueue_many(2, "\"tiers\":[\"free\"],"); /* queued: stay */
    ck_assert_int_eq(
        RUN(&r, NULL, "prune", "--older-than", "0s", "--dry-run", "--json"), 0);
    ck_assert_int_eq(pruned(r.out, "jobs"), 5);
    ck_assert_int_eq(pruned(r.out, "attempts"), 5);
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(e2e_db), 7);
    ck_assert_int_eq(RUN(&r, NULL, "prune", "--older-than", "0s", "--json"), 0);
    ck_assert_int_eq(pruned(r.out, "jobs"), 5);
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(e2e_db), 2);
    ck_assert_int_eq(RUN(&r, NULL, "jobs", "show", "1"), 3);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "prune", "--older-than", "soon"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--older-than soon is not a span"));
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "prune"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "set \"retention\" in the config"));
    run_result_free(&r);
}
END_TEST

/* A worker whose clock is two days ahead sees the jobs finished now as
 * two days old: with finished_jobs_days 1 it prunes them by itself. Not
 * in the _pg run: there every time is the server's (q_clock_offset takes
 * the faked two days back out), and the pruning itself is the contract
 * suite's, test_queue_contract_prune_pg. */
START_TEST(test_worker_applies_the_retention)
{
    pid_t w;

    e2e_start("{}", "\"retention\": {\"finished_jobs_days\": 1}");
    e2e_enqueue_many(3, "\"tiers\":[\"free\"],");
    free(e2e_drain());
    ck_assert_int_eq(run_job_count(e2e_db), 3);
    w = e2e_spawn_faked("+2d", true,
                        (const char *[]){"--worker-id", "w", NULL});
    for (int64_t end = clock_mono_ms() + 15000; run_job_count(e2e_db) > 0;) {
        ck_assert_msg(clock_mono_ms() < end, "the worker pruned nothing");
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    kill(w, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
}
END_TEST

static const char *const bad_retention[][2] = {
    {"{\"finished_jobs_days\": 0}",
     "retention.finished_jobs_days: must be between 1 and 36500"},
    {"{\"attempt_bodies_days\": 1.5}",
     "retention.attempt_bodies_days: must be a whole number"},
    {"{\"finished_jobs_days\": 7, \"attempt_bodies_days\": 30}",
     "retention.attempt_bodies_days: 30 is more than finished_jobs_days (7)"},
    {"{\"jobs_days\": 7}", "retention"},
    {"7", "retention"},
};

START_TEST(test_bad_retention_is_exit_2_naming_it)
{
    char cfg[256];
    struct run_result r;

    snprintf(cfg, sizeof(cfg), "{\"retention\": %s}", bad_retention[_i][0]);
    free(tmpdir_write(fixture_dir, "stepq.json", cfg, strlen(cfg)));
    ck_assert_int_eq(RUN(&r, NULL, "prune", "--dry-run"), 2);
    ck_assert_msg(strstr(r.err, bad_retention[_i][1]) != NULL, "%s", r.err);
    run_result_free(&r);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("backup");
    TCase *tc = tcase_create("backup");
    TCase *tf = tcase_create("files");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_backup_under_load_restores_with_in_doubt);
    tcase_add_test(tc, test_backup_dest_rules);
    tcase_add_test(tc, test_prune_counts_then_removes_finished_jobs);
    if (!pgfix_backend_is_pg())
        tcase_add_test(tc, test_worker_applies_the_retention);
    suite_add_tcase(s, tc);
    tcase_add_checked_fixture(tf, fixture_setup, fixture_teardown);
    tcase_set_timeout(tf, 20);
    tcase_add_test(tf, test_backup_refuses_the_database_itself);
    tcase_add_loop_test(
        tf, test_bad_retention_is_exit_2_naming_it, 0,
        (int)(sizeof(bad_retention) / sizeof(bad_retention[0])));
    suite_add_tcase(s, tf);
    return s;
}

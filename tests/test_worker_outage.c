/* test_worker_outage.c: the worker run inside the test's own process
 * (worker_run, as `stepq work --drain` runs it) against the real `stepq
 * mock`, with its loop turns' commits failing for a while through the
 * worker's seam (worker__turn_commit), as a store that went away fails
 * them. Checked through the real binary and the mock's request log: every
 * job ends once, no side-effecting request is sent twice, and the worker
 * says once that the database is unreachable and once that it is back.
 * The same on PostgreSQL, with the server really restarted, is
 * test_worker_pg. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/config.h"
#include "common/file.h"
#include "queue/queue.h"
#include "queue/report.h"
#include "tests/support/e2e.h"
#include "worker/internal.h"
#include "worker/worker.h"

#define NJOBS 4
/* A side-effecting http step (no key, not replayable): sent twice is a
 * duplicate comment. */
#define POST_JOB                                                               \
    "{\"name\":\"p%d\",\"steps\":[{\"name\":\"post\",\"kind\":\"http\","       \
    "\"http\":{\"method\":\"POST\",\"url\":\"http://127.0.0.1:%d/comments/"    \
    "%d\",\"body\":{\"text\":\"hi\"}}}]}\n"
#define SLOW_COMMENTS                                                          \
    "{\"routes\": [{\"path\": \"/comments\", \"latency_ms\": 150}]}"

static int faults;   /* commits failed on purpose */
static int to_fail;  /* how many to fail */
static int64_t seen; /* attempts and results in the last commit that held */

/* Attempts begun plus attempts answered, as the open transaction sees
 * them in the ledger (q_report_tiers: q_stats_attempts counts the ended
 * ones only); *answered (may be NULL) gets the answered ones. */
static int64_t
ledger_size(q_db *db, int64_t *answered)
{
    struct q_report_tier *t = NULL;
    size_t n = 0;
    int64_t total = 0, done = 0;

    ck_assert_int_eq(q_report_tiers(db, 0, &t, &n), 0);
    for (size_t i = 0; i < n; i++) {
        total += t[i].requests;
        done += t[i].requests - t[i].in_flight;
    }
    q_report_tiers_free(t, n);
    if (answered != NULL)
        *answered = done;
    return total + done;
}

/* Fails the first to_fail commits that would record an attempt or its
 * answer, as a store that went away would: nothing of the turn is kept. */
static int
commit_fails_while_down(q_db *db)
{
    int64_t now = ledger_size(db, NULL);

    if (now != seen && faults < to_fail) {
        faults++;
        q_tx_rollback(db);
        return faults % 2 ? -EIO : -EAGAIN;
    }
    seen = now;
    return q_tx_commit(db);
}

/* Fails the first to_fail commits that would record an answer: the
 * answers were acted on (and logged) in a turn that is lost, so they are
 * kept and acted on again once a commit holds. */
static int
commit_fails_on_answers(q_db *db)
{
    int64_t answered = 0;

    (void)ledger_size(db, &answered);
    if (answered != seen && faults < to_fail) {
        faults++;
        q_tx_rollback(db);
        return -EIO;
    }
    seen = answered;
    return q_tx_commit(db);
}

static pid_t other; /* a second worker, running while the store is away */
static bool other_done;

/* Fails every commit that would record an attempt or its answer while a
 * second worker (the real `stepq work --drain`, started at the first
 * commit that would record an answer) runs: the first worker's leases run out
 * meanwhile, and the second takes its job over. */
static int
commit_fails_while_other_runs(q_db *db)
{
    int64_t answered, now = ledger_size(db, &answered);
    int status;

    if (other == 0 && answered > 0)
        other = e2e_spawn_workerv((const char *[]){"--drain", NULL});
    if (other > 0 && !other_done && waitpid(other, &status, WNOHANG) == other)
        other_done = true;
    if (other > 0 && now != seen && !other_done) {
        faults++;
        q_tx_rollback(db);
        return -EIO;
    }
    seen = now;
    return q_tx_commit(db);
}

/* Runs the worker in this process until the queue drains, its stderr in
 * work.err. */
static void
run_worker(int (*commit)(q_db *db))
{
    struct config *cfg = NULL;
    struct worker_opts o = {
        .db_path = e2e_db, .drain = true, .worker_id = "outage"};
    char err[512];
    int saved = dup(2);

    ck_assert(freopen("work.err", "w", stderr) != NULL);
    ck_assert_msg(config_load("stepq.json", &cfg, err, sizeof(err)) == 0, "%s",
                  err);
    o.cfg = cfg;
    worker__turn_commit = commit;
    ck_assert_int_eq(worker_run(&o), 0);
    config_free(cfg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
}

/* Enqueues jobs 0 .. n-1 of POST_JOB. */
static void
enqueue_posts_n(int n)
{
    char text[NJOBS * 256];
    size_t len = 0;

    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, POST_JOB, i,
                                e2e_mock.port, i);
    e2e_enqueue(text);
}

/* How many lines of work.err hold what. */
static int
log_lines(const char *what)
{
    char *text = NULL;
    size_t len = 0;
    int n = 0;

    ck_assert_int_eq(file_read_all("work.err", 1 << 24, &text, &len), 0);
    for (char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    free(text);
    return n;
}

/* Every job succeeded with one attempt, and the mock saw each POST once. */
static void
expect_each_sent_once(void)
{
    cJSON *log = e2e_mock_log();

    ck_assert_int_eq(e2e_sent_to(log, "/comments"), NJOBS);
    for (int i = 0; i < NJOBS; i++) {
        char path[32];
        cJSON *job = e2e_show(i + 1);
        snprintf(path, sizeof(path), "/comments/%d", i);
        ck_assert_int_eq(e2e_sent_to(log, path), 1);
        ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
        e2e_expect_attempt(job, 0, "ok", NULL, "commit");
        ck_assert_int_eq(
            cJSON_GetObjectItem(e2e_step_of(job, 0), "attempts")->valueint, 1);
        cJSON_Delete(job);
    }
    cJSON_Delete(log);
}

/* The store fails a few commits in a row, while requests are recorded and
 * answered: the recorded ones are not sent until a commit holds them, the
 * answers are kept and written once it is back, and no job is left to its
 * lease (which would make each side-effecting step in doubt: parked). */
START_TEST(test_answers_kept_until_the_store_is_back)
{
    e2e_start(SLOW_COMMENTS, "");
    enqueue_posts_n(NJOBS);
    to_fail = 3;
    run_worker(commit_fails_while_down);
    ck_assert_int_eq(faults, 3);
    expect_each_sent_once();
    ck_assert_int_eq(
        log_lines("cannot commit to the database: retrying in 100 ms"), 1);
    ck_assert_int_eq(log_lines("cannot commit to the database"), 1);
    ck_assert_int_eq(log_lines("database commits again"), 1);
}
END_TEST

/* Answers acted on in turns that do not commit are acted on again when
 * one does: each attempt still has one line in the log. */
START_TEST(test_answer_lost_with_its_turn_is_logged_once)
{
    e2e_start(SLOW_COMMENTS, "");
    enqueue_posts_n(NJOBS);
    to_fail = 2;
    run_worker(commit_fails_on_answers);
    ck_assert_int_eq(faults, 2);
    expect_each_sent_once();
    ck_assert_int_eq(log_lines("\"decision\":\"commit\""), NJOBS);
}
END_TEST

/* A job taken over while the store was away (its lease ran out, and a
 * second worker settled the answered attempt as in doubt: parked) is left
 * to its new holder: the answer kept is not written over its decision,
 * and the request is not sent again. */
START_TEST(test_job_taken_over_meanwhile_is_left_alone)
{
    cJSON *job, *log;

    e2e_start(SLOW_COMMENTS, "");
    enqueue_posts_n(1);
    run_worker(commit_fails_while_other_runs);
    ck_assert(other_done);
    ck_assert_int_gt(faults, 0);
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "parked");
    e2e_expect_attempt(job, 0, "unknown", "in_doubt", "park_for_human");
    cJSON_Delete(job);
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/comments"), 1);
    cJSON_Delete(log);
    ck_assert_int_eq(log_lines("lease lost while the database was "
                               "unreachable"),
                     1);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("worker_outage");
    TCase *tc = tcase_create("outage");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_answers_kept_until_the_store_is_back);
    tcase_add_test(tc, test_answer_lost_with_its_turn_is_logged_once);
    tcase_add_test(tc, test_job_taken_over_meanwhile_is_left_alone);
    suite_add_tcase(s, tc);
    return s;
}

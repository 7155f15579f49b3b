/* test_worker_faults.c: the worker run inside the test's own process
 * (worker_run, as `stepq work --drain` runs it) against the real `stepq
 * mock`, with its transaction seams (worker/internal.h) failing on
 * purpose: a loop turn whose commit fails, a park whose savepoint cannot
 * be opened. What is checked is what a user sees afterwards through the
 * real binary: the job, its history, the park table, the hook's view. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/file.h"
#include "queue/queue.h"
#include "tests/support/e2e.h"
#include "worker/internal.h"
#include "worker/worker.h"

/* A side-effecting http step without key that meets a daily wall: parked. */
#define POST_JOB                                                               \
    "{\"name\":\"p\",\"steps\":[{\"name\":\"post\",\"kind\":\"http\","         \
    "\"http\":{\"method\":\"POST\",\"url\":\"http://127.0.0.1:%d/comments\","  \
    "\"body\":{\"text\":\"hi\"}}}]}"
#define WALL                                                                   \
    "{\"routes\":[{\"path\":\"/comments\",\"answers\":[{\"status\":429,"       \
    "\"body\":\"daily quota exceeded\"}],\"loop\":true}]}"
/* on_park hook: looks its item up with `stepq park show ID` and appends
 * "ID EXIT" to hooks.txt. */
#define HOOK_SHOWS_ITEM                                                        \
    "\"on_park\": \"id=$(sed -n 's/.*\\\"id\\\":\\\\([0-9]*\\\\).*/"           \
    "\\\\1/p'); \\\"$STEPQ_BIN\\\" park show \\\"$id\\\" >/dev/null"           \
    " 2>&1; echo \\\"$id $?\\\" >> hooks.txt\""

static int faults; /* how many times a seam failed on purpose */

/* Runs the worker in this process until the queue drains. */
static void
run_worker(void)
{
    struct config *cfg = NULL;
    struct worker_opts o = {
        .db_path = "stepq.db", .drain = true, .worker_id = "faults"};
    char err[512];

    ck_assert_msg(config_load("stepq.json", &cfg, err, sizeof(err)) == 0, "%s",
                  err);
    o.cfg = cfg;
    ck_assert_int_eq(worker_run(&o), 0);
    config_free(cfg);
}

static void
enqueue_post(void)
{
    char job[512];

    snprintf(job, sizeof(job), POST_JOB, e2e_mock.port);
    e2e_enqueue(job);
}

/* Fails the first turn commit that would make a park item durable, as a
 * full disk would: the transaction is rolled back. */
static int
commit_fails_once_parked(q_db *db)
{
    struct q_park_filter f = {0};
    struct q_park_item *items = NULL;
    size_t n = 0;

    if (faults == 0 && q_park_list(db, &f, &items, &n) == 0 && n > 0) {
        q_park_items_free(items, n);
        faults++;
        q_tx_rollback(db);
        return -EIO;
    }
    if (n > 0)
        q_park_items_free(items, n);
    return q_tx_commit(db);
}

/* A hook is told of a park item only once the turn that parked it has
 * committed: a commit that fails runs no hook, and every hook that runs
 * finds its item with `stepq park show`. */
START_TEST(test_failed_commit_runs_no_hook)
{
    char *text = NULL;
    size_t len = 0;
    int n = 0;

    e2e_start(WALL, HOOK_SHOWS_ITEM);
    enqueue_post();
    worker__turn_commit = commit_fails_once_parked;
    run_worker();
    ck_assert_int_eq(faults, 1);
    ck_assert_int_eq(file_read_all("hooks.txt", 1 << 20, &text, &len), 0);
    for (char *l = strtok(text, "\n"); l != NULL; l = strtok(NULL, "\n")) {
        ck_assert_msg(l[0] != ' ' && strstr(l, " 0") != NULL,
                      "hook ran `park show ID`: %s", l);
        n++;
    }
    /* the item of the failed turn never existed; the job, recovered from
     * its lease, was parked again (in doubt) and that hook ran */
    ck_assert_int_eq(n, 1);
    free(text);
}
END_TEST

static int
park_begin_fails_once(q_db *db)
{
    if (faults++ == 0)
        return -EIO; /* the savepoint was not opened */
    return q_tx_begin(db);
}

/* A park whose savepoint cannot be opened leaves the caller's turn alone:
 * the attempt's result, written earlier in the turn, is kept, and the park
 * decided from it is carried out when the job comes back, without sending
 * the side-effecting request again. */
START_TEST(test_park_savepoint_failure_keeps_the_turn)
{
    cJSON *job, *log;

    e2e_start(WALL, "");
    enqueue_post();
    worker__park_tx_begin = park_begin_fails_once;
    run_worker();
    ck_assert_int_ge(faults, 2);
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "parked");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "outcome"), "hard_quota");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "decision"),
                     "park_for_human");
    ck_assert_int_eq(
        cJSON_GetObjectItem(e2e_step_of(job, 0), "attempts")->valueint, 1);
    cJSON_Delete(job);
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/comments"), 1);
    cJSON_Delete(log);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("worker_faults");
    TCase *tc = tcase_create("faults");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_failed_commit_runs_no_hook);
    tcase_add_test(tc, test_park_savepoint_failure_keeps_the_turn);
    suite_add_tcase(s, tc);
    return s;
}

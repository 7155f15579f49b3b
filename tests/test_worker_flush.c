/* test_worker_flush.c: a disk that refuses to flush SQLite's write-ahead
 * log under a worker that sends posts without a key (decide's in-doubt
 * row: never sent twice without a human). The worker runs inside the
 * test's process (worker_run, as `stepq work --drain` runs it) against the
 * real `stepq mock`, over a SQLite file whose log's flush fails once: a
 * VFS of the test's own wraps the default one and fails one xSync of the
 * log, as an fdatasync that returned EIO would. It is armed by the first
 * turn's commit (the worker's seam), so that it is the worker's flush
 * after that commit that fails, not one SQLite makes of a fresh log while
 * the worker opens the store. No post may leave; each is parked, with an
 * error that says what happened to it. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queue/park.h"
#include "queue/queue.h"
#include "tests/support/e2e.h"
#include "tests/support/inproc.h"
#include "worker/internal.h"

#define POST_JOB                                                               \
    "{\"name\":\"p%d\",\"steps\":[{\"name\":\"post\",\"kind\":\"http\","       \
    "\"http\":{\"method\":\"POST\",\"url\":\"http://127.0.0.1:%d/comments\","  \
    "\"body\":{\"text\":\"hi\"}}}]}"

static sqlite3_vfs *real_vfs;
static sqlite3_vfs failing_vfs;
static const sqlite3_io_methods *real_wal_methods;
static sqlite3_io_methods failing_wal_methods;
static int syncs_to_fail; /* the next this many flushes of a log fail */
static int syncs_failed;

static int
wal_sync(sqlite3_file *f, int flags)
{
    if (syncs_to_fail > 0) {
        syncs_to_fail--;
        syncs_failed++;
        return SQLITE_IOERR_FSYNC;
    }
    return real_wal_methods->xSync(f, flags);
}

/* The first turn's commit arms the failure (see the top). */
static int
arm_then_commit(q_db *db)
{
    static bool armed;

    if (!armed) {
        armed = true;
        syncs_to_fail = 1;
    }
    return q_tx_commit(db);
}

/* Opens as the default VFS does; a write-ahead log gets its methods with
 * wal_sync for xSync (the file object is the real one's). */
static int
failing_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags,
             int *out)
{
    int rc = real_vfs->xOpen(real_vfs, name, f, flags, out);

    (void)vfs;
    if (rc == SQLITE_OK && (flags & SQLITE_OPEN_WAL) && f->pMethods != NULL) {
        real_wal_methods = f->pMethods;
        failing_wal_methods = *f->pMethods;
        failing_wal_methods.xSync = wal_sync;
        f->pMethods = &failing_wal_methods;
    }
    return rc;
}

/* Makes the wrapper this process's default VFS (every store it opens). */
static void
use_failing_vfs(void)
{
    real_vfs = sqlite3_vfs_find(NULL);
    ck_assert_ptr_nonnull(real_vfs);
    failing_vfs = *real_vfs;
    failing_vfs.zName = "stepq-test-failing-sync";
    failing_vfs.pNext = NULL;
    failing_vfs.xOpen = failing_open;
    ck_assert_int_eq(sqlite3_vfs_register(&failing_vfs, 1), SQLITE_OK);
}

/* Enqueues two posts to a mock that takes them, and runs the worker with
 * one flush of the log failing after its first turn's commit. */
static void
two_posts_one_failed_flush(void)
{
    char job[512];

    e2e_start("{\"routes\":[{\"path\":\"/comments\",\"loop\":true,\"answers\":"
              "[{\"status\":201,\"body\":\"ok\"}]}]}",
              "");
    for (int i = 0; i < 2; i++) {
        snprintf(job, sizeof(job), POST_JOB, i, e2e_mock.port);
        e2e_enqueue(job);
    }
    use_failing_vfs();
    worker__turn_commit = arm_then_commit;
    inproc_drain("flush", 1);
    ck_assert_int_eq(syncs_failed, 1);
}

/* The first post's record is committed but its flush fails: the worker
 * counts the turn lost and does not send it; the job comes back in doubt
 * and is parked saying so. No flush is trusted after that one, so the
 * second post is not sent either: it is parked at once, and its error
 * says why (the disk, not a stopped worker). */
START_TEST(test_posts_wait_for_a_flush_that_fails)
{
    struct q_park_filter f = {0};
    struct q_park_item *items = NULL;
    size_t n = 0;
    int not_sent = 0, in_doubt = 0;
    q_db *db = NULL;

    two_posts_one_failed_flush();
    ck_assert_int_eq(e2e_sent_to(NULL, "/comments"), 0);
    ck_assert_int_eq(q_open_existing("stepq.db", NULL, &db), 0);
    ck_assert_int_eq(q_park_list(db, &f, &items, &n), 0);
    ck_assert_int_eq((int)n, 2);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(items[i].reason, "in_doubt");
        not_sent += strstr(items[i].error, "not sent: the database cannot "
                                           "flush its records") != NULL;
        in_doubt += strstr(items[i].error, "in doubt: this request was "
                                           "recorded") != NULL;
    }
    ck_assert_int_eq(not_sent, 1);
    ck_assert_int_eq(in_doubt, 1);
    q_park_items_free(items, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* What the not-sent item's error tells the operator works: once the disk
 * flushes again and a worker opens the store anew, a retry of each item
 * sends each post once. */
START_TEST(test_posts_retried_after_the_disk_is_back)
{
    struct run_result r;

    two_posts_one_failed_flush();
    worker__turn_commit = q_tx_commit;
    ck_assert_int_eq(RUN_ARGS(&r, "park", "resolve", "--all-matching",
                              "--reason", "in_doubt", "--retry"),
                     0);
    run_result_free(&r);
    inproc_drain("flush", 1);
    ck_assert_int_eq(syncs_failed, 1);
    ck_assert_int_eq(e2e_sent_to(NULL, "/comments"), 2);
    for (int id = 1; id <= 2; id++) {
        cJSON *shown = e2e_show(id);
        ck_assert_str_eq(e2e_str(shown, "state"), "succeeded");
        cJSON_Delete(shown);
    }
}
END_TEST

/* An agent whose model calls post_comment, a tool with side effects and
 * no key, on a store whose log's flush fails once (armed by the first
 * turn's commit): the first flush asked for is the one of the commit
 * that records the call, which must be on disk before the call is sent;
 * it fails, and the call is not sent. */
static void
agent_call_on_a_failing_disk(void)
{
    char job[1024];

    e2e_start("{\"routes\": [{\"path\": \"/comments\", \"loop\": true,"
              " \"answers\": [{\"status\": 201, \"body\": \"ok\"}]},"
              " {\"path\": \"/free\", \"tool_turns\": [[{\"name\":"
              " \"post_comment\", \"arguments\": {\"body\":"
              " \"Reproduced.\"}}]]}]}",
              "");
    snprintf(job, sizeof(job),
             "{\"name\": \"agent\", \"steps\": [{\"name\": \"a\","
             " \"tools\": [{\"name\": \"post_comment\", \"parameters\":"
             " {\"type\": \"object\", \"properties\": {\"body\": {\"type\":"
             " \"string\"}}}, \"side_effects\": true,"
             " \"action\": {\"http\": {\"method\": \"POST\", \"url\":"
             " \"http://127.0.0.1:%d/comments\", \"body\": {\"body\":"
             " \"{{args.body}}\"}}}}], \"request\": {\"messages\":"
             " [{\"role\": \"user\", \"content\": \"triage\"}]}}]}",
             e2e_mock.port);
    e2e_enqueue(job);
    use_failing_vfs();
    worker__turn_commit = arm_then_commit;
    inproc_drain("flush", 1);
    ck_assert_int_eq(syncs_failed, 1);
}

/* The tool server never received the call (queued to go after the
 * commit, it is dropped with the lost turn); the job is parked with one
 * item, in_doubt, showing the tool and the arguments it would have gone
 * out with, and saying it was not sent. */
START_TEST(test_unkeyed_tool_call_held_when_no_flush_is_trusted)
{
    struct run_result r;
    cJSON *items, *it, *shown;

    agent_call_on_a_failing_disk();
    ck_assert_int_eq(e2e_sent_to(NULL, "/comments"), 0);
    ck_assert_int_ge(e2e_sent_to(NULL, "/free"), 1);
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "parked");
    cJSON_Delete(shown);
    ck_assert_int_eq(RUN_ARGS(&r, "park", "list", "--json"), 0);
    items = cJSON_Parse(r.out);
    run_result_free(&r);
    ck_assert_int_eq(cJSON_GetArraySize(items), 1);
    it = cJSON_GetArrayItem(items, 0);
    ck_assert_str_eq(e2e_str(it, "reason"), "in_doubt");
    ck_assert_str_eq(e2e_str(cJSON_GetObjectItem(it, "call"), "tool"),
                     "post_comment");
    ck_assert_str_eq(
        e2e_str(cJSON_GetObjectItem(cJSON_GetObjectItem(it, "call"), "args"),
                "body"),
        "Reproduced.");
    ck_assert_msg(strstr(e2e_str(it, "error"), "not sent"), "%s",
                  e2e_str(it, "error"));
    cJSON_Delete(items);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("worker_flush");
    TCase *tc = tcase_create("flush");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_posts_wait_for_a_flush_that_fails);
    tcase_add_test(tc, test_posts_retried_after_the_disk_is_back);
    tcase_add_test(tc, test_unkeyed_tool_call_held_when_no_flush_is_trusted);
    suite_add_tcase(s, tc);
    return s;
}

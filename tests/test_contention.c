/* test_contention.c: many processes on one SQLite file (issue 45).
 *
 * - A handle counts its waits for other processes' locks (q_lock_waits):
 *   none alone; one that runs out as run out, with its length; the close
 *   says them, a warning when one ran out.
 * - A store that waits for the write lock while three other processes
 *   take it in turns gets it within its bound every time, and often:
 *   SQLite's own busy wait (sleeps growing to 100 ms) lost it to them
 *   for about 200 ms a time, and (with the others re-taking it at once)
 *   ran out its bound with "database is locked".
 * - tests/soak/contention.sh with the real binary: 8 `stepq work`, a
 *   `stepq serve` under API load, 4 enqueuers in a loop and `stepq report`
 *   every second on one file for 20 s. No busy error reaches a user or a
 *   log, no job is lost, each side-effecting post is sent once, every job
 *   ends. Its figures (throughput, enqueue latency) are printed, not
 *   asserted; bench/contention.sh runs it for 10 minutes. */
#include "tests/support/support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/clock.h"
#include "common/log.h"
#include "queue/queue.h"

#define HOLDERS 3

/* A process that takes the write lock back to back for ms_total: each
 * time for about 4 ms, and again 1 ms after it let it go (with SQLite's
 * own busy wait, as another program on the file would have). */
static void
hold_lock_in_turns(const char *path, int64_t ms_total)
{
    sqlite3 *h = NULL;
    int64_t end = clock_mono_ms() + ms_total;

    if (sqlite3_open(path, &h) != SQLITE_OK)
        _exit(2);
    sqlite3_busy_timeout(h, 60000);
    while (clock_mono_ms() < end) {
        if (sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
            _exit(3);
        nanosleep(&(struct timespec){0, 4000 * 1000}, NULL);
        if (sqlite3_exec(h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
            _exit(4);
        /* As a worker's loop turn does work between its transactions. */
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    }
    sqlite3_close(h);
    _exit(0);
}

/* A process that holds the write lock from when it writes a byte to
 * ready until ready's other end (go) is closed. */
static void
hold_lock_until_told(const char *path, int ready, int go)
{
    sqlite3 *h = NULL;
    char c = 1;

    if (sqlite3_open(path, &h) != SQLITE_OK ||
        sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        _exit(2);
    if (write(ready, &c, 1) != 1 || read(go, &c, 1) < 0)
        _exit(3);
    sqlite3_exec(h, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(h);
    _exit(0);
}

/* The lines logged at close, at their level. */
struct said {
    char text[1024];
    enum log_level level;
};

static void
on_log(enum log_level level, const char *msg, void *arg)
{
    struct said *s = arg;

    if (strstr(msg, "lock waits") != NULL) {
        snprintf(s->text, sizeof(s->text), "%s", msg);
        s->level = level;
    }
}

/* Holds the write lock in another process while db tries to take it
 * (its wait runs out), then lets it go. */
static void
wait_out_a_holder(q_db *db)
{
    int ready[2], go[2], st = 0;
    pid_t pid;
    char c;

    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_ge(pid = fork(), 0);
    if (pid == 0) {
        close(go[1]); /* so that the parent's close is the end of go */
        hold_lock_until_told(FIXTURE_DB, ready[1], go[0]);
    }
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    ck_assert_int_eq(q_tx_begin(db), -EAGAIN);
    close(go[1]);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "holder %d", st);
}

START_TEST(test_no_lock_wait_alone)
{
    struct q_lock_waits w;
    q_db *db = NULL;

    fixture_init(FIXTURE_DB);
    ck_assert_int_eq(q_open(FIXTURE_DB, NULL, &db), 0);
    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_tx_commit(db), 0);
    q_lock_waits(db, &w);
    ck_assert_int_eq(w.count + w.total_us + w.longest_us + w.ran_out, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_a_wait_that_ran_out_is_counted)
{
    const struct q_open_opts o = {.lock_wait_ms = 300};
    struct q_lock_waits w;
    q_db *db = NULL;

    fixture_init(FIXTURE_DB);
    ck_assert_int_eq(q_open(FIXTURE_DB, &o, &db), 0);
    wait_out_a_holder(db);
    ck_assert_int_eq(q_tx_begin(db), 0); /* free again: no wait */
    ck_assert_int_eq(q_tx_commit(db), 0);
    q_lock_waits(db, &w);
    ck_assert_int_eq(w.count, 1);
    ck_assert_int_eq(w.ran_out, 1);
    ck_assert_int_ge(w.longest_us, 300000);
    ck_assert_int_lt(w.longest_us, 1000000);
    ck_assert_int_eq(w.total_us, w.longest_us);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_lock_waits_said_at_close)
{
    const struct q_open_opts o = {.lock_wait_ms = 300};
    struct said said = {"", LOG_LEVEL_DEBUG};
    q_db *db = NULL;

    fixture_init(FIXTURE_DB);
    ck_assert_int_eq(q_open(FIXTURE_DB, &o, &db), 0);
    wait_out_a_holder(db);
    log_set_sink(on_log, &said);
    ck_assert_int_eq(q_close(db), 0);
    log_set_sink(NULL, NULL);
    ck_assert_msg(strstr(said.text, "lock waits: 1, ") &&
                      strstr(said.text, "1 ran out"),
                  "%s", said.text);
    ck_assert_int_eq(said.level, LOG_LEVEL_WARN); /* one ran out */
}
END_TEST

START_TEST(test_busy_waiter_is_not_starved)
{
    const struct q_open_opts o = {.lock_wait_ms = 2000};
    struct q_lock_waits w;
    q_db *db = NULL;
    pid_t pids[HOLDERS];
    int64_t end, longest = 0;
    int ok = 0, busy = 0, rc;

    fixture_init(FIXTURE_DB);
    for (int i = 0; i < HOLDERS; i++) {
        ck_assert_int_ge(pids[i] = fork(), 0);
        if (pids[i] == 0)
            hold_lock_in_turns(FIXTURE_DB, 14000);
    }
    ck_assert_int_eq(q_open(FIXTURE_DB, &o, &db), 0);
    for (end = clock_mono_ms() + 12000; clock_mono_ms() < end;) {
        int64_t t = clock_mono_ms();
        if ((rc = q_tx_begin(db)) == 0)
            rc = q_tx_commit(db);
        ck_assert_msg(rc == 0 || rc == -EAGAIN, "rc %d", rc);
        rc == 0 ? ok++ : busy++;
        longest = clock_mono_ms() - t > longest ? clock_mono_ms() - t : longest;
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    }
    fprintf(stderr,
            "write lock taken %d times, %d waits ran out, longest %lld ms\n",
            ok, busy, (long long)longest);
    /* Measured: 1,460 times, none over 2 s; SQLite's own wait got it 51
     * to 68 times (about 200 ms a wait). */
    ck_assert_int_eq(busy, 0);
    ck_assert_int_gt(ok, 400);
    /* The handle's own count of its waits: one a take at most, none run
     * out, the longest no longer than the longest take measured here. */
    q_lock_waits(db, &w);
    fprintf(stderr, "lock waits %lld, %lld us in all, longest %lld us\n",
            (long long)w.count, (long long)w.total_us, (long long)w.longest_us);
    ck_assert_int_gt(w.count, 0);
    ck_assert_int_le(w.count, ok);
    ck_assert_int_eq(w.ran_out, 0);
    ck_assert_int_le(w.longest_us, longest * 1000 + 1000);
    ck_assert_int_le(w.longest_us, w.total_us);
    for (int i = 0; i < HOLDERS; i++) {
        int st = 0;
        ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "holder %d", st);
    }
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_many_processes_on_one_file)
{
    char *script = source_path("tests/soak/contention.sh");
    char cmd[4096], *out = NULL;
    int rc;

    snprintf(cmd, sizeof(cmd),
             "bash '%s' --bin '%s' --dir '%s/run' --seconds 20 --workers 8 "
             "--enqueuers 4",
             script, stepq_bin(), fixture_dir);
    rc = run_sh(cmd, &out);
    fprintf(stderr, "%s", out);
    ck_assert_msg(rc == 0, "contention.sh exited %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "contention: all invariants held"));
    ck_assert_ptr_nonnull(strstr(out, "no_busy_error            held"));
    ck_assert_ptr_nonnull(strstr(out, "lock_wait_bounded        held"));
    ck_assert_ptr_nonnull(strstr(out, "serve_metric             held"));
    free(out);
    free(script);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("contention");
    TCase *tc = tcase_create("one_file");

    tcase_add_checked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_no_lock_wait_alone);
    tcase_add_test(tc, test_a_wait_that_ran_out_is_counted);
    tcase_add_test(tc, test_lock_waits_said_at_close);
    tcase_add_test(tc, test_busy_waiter_is_not_starved);
    tcase_add_test(tc, test_many_processes_on_one_file);
    suite_add_tcase(s, tc);
    return s;
}

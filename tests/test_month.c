/* test_month.c: nights without a human, fast (issue 45). One `stepq work`
 * whose wall clock starts at 2026-11-01 00:00 UTC and runs 8,640 times
 * as fast (libfaketime: a night is 10 s; its timers stay on the host's
 * monotonic clock), on a SQLite file, with four nightly schedules (each
 * job a chat step and a post without a key to the mock, named by its
 * schedule and date), the morning report to a hook at 07:00, and
 * retention (finished jobs kept 3 days, bodies 1 day), while the test
 * takes `stepq backup` every 2 s. $STEPQ_MONTH_NIGHTS nights (6 by
 * default; bench/month.sh runs 30). Checked: every night's four jobs
 * were enqueued, each post reached the mock once, every job ended, the
 * retention kept the database to the last nights' jobs and its pages
 * flat (its -wal is folded in at 32 MiB),
 * one report a morning, and every backup succeeded. The worker's RSS and
 * open descriptors are printed each night; its descriptors must stay
 * flat. */
#include "tests/support/support.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/file.h"
#include "tests/support/e2e.h"

#define NIGHT_MS 10000 /* a day at 8,640 times as fast */

/* A schedule at HH:15 whose job chats, then posts to /comments/NAME/DATE. */
#define NIGHTLY(name, hour)                                                    \
    "{\"name\": \"" name "\", \"cron\": \"15 " hour " * * *\", \"job\": "      \
    "{\"name\": \"" name "\", \"steps\": [{\"name\": \"ask\", \"request\": "   \
    "{\"messages\": [{\"role\": \"user\", \"content\": \"night of "            \
    "{{schedule.date}}\"}]}}, {\"name\": \"post\", \"kind\": \"http\", "       \
    "\"http\": {\"method\": \"POST\", \"url\": \"http://127.0.0.1:%d/"         \
    "comments/{{schedule.name}}/{{schedule.date}}\", \"body\": "               \
    "{\"text\": \"{{steps.ask.output}}\"}}}]}}"

static int
nights(void)
{
    const char *v = getenv("STEPQ_MONTH_NIGHTS");

    return v != NULL && atoi(v) > 0 ? atoi(v) : 6;
}

/* The database's size as SQLite sees it through the log: its pages, in
 * bytes (the file on disk grows only when the log is folded in). */
static long long
pages_bytes(void)
{
    char *out = NULL;
    long long n;

    ck_assert_int_eq(run_sh("sqlite3 stepq.db 'SELECT page_count * page_size "
                            "FROM pragma_page_count, pragma_page_size'",
                            &out),
                     0);
    n = atoll(out);
    free(out);
    return n;
}

/* The worker's resident memory in KiB (VmRSS) and its open descriptors. */
static void
sample_process(pid_t pid, long *rss_kib, int *fds)
{
    char path[64], *text = NULL, *at;
    size_t len = 0;
    DIR *d;
    struct dirent *e;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    ck_assert_int_eq(file_read_all(path, 1 << 16, &text, &len), 0);
    at = strstr(text, "VmRSS:");
    *rss_kib = at != NULL ? atol(at + 6) : 0;
    free(text);
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    ck_assert_ptr_nonnull(d = opendir(path));
    for (*fds = 0; (e = readdir(d)) != NULL;)
        *fds += e->d_name[0] != '.';
    closedir(d);
}

/* The size of path in bytes (0: none). */
static long long
bytes(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

/* The mock, and stepq.json: one tier on the mock, leases of a day (a
 * job's few real milliseconds are minutes of the faked clock), the
 * retention, the morning report and the four schedules. */
static void
start_month(void)
{
    char cfg[4096];
    int len;

    e2e_start("{}", "");
    len = snprintf(
        cfg, sizeof(cfg),
        "{\"worker\": {\"lease_s\": 86400, \"idle_poll_ms\": 100}, "
        "\"tiers\": [{\"name\": \"free\", \"base_url\": "
        "\"http://127.0.0.1:%d/free/v1\", \"model\": \"small\"}], "
        "\"retention\": {\"finished_jobs_days\": 3, "
        "\"attempt_bodies_days\": 1}, "
        "\"on_report\": {\"cron\": \"0 7 * * *\", \"command\": "
        "\"cat >> reports.jsonl; echo >> reports.jsonl\"}, "
        "\"schedules\": [" NIGHTLY("a", "1") ", " NIGHTLY(
            "b", "2") ", " NIGHTLY("c", "3") ", " NIGHTLY("d", "4") "]}",
        e2e_mock.port, e2e_mock.port, e2e_mock.port, e2e_mock.port,
        e2e_mock.port);
    ck_assert_int_lt(len, (int)sizeof(cfg));
    free(tmpdir_write(e2e_dir, "stepq.json", cfg, (size_t)len));
}

/* Each schedule's post of each night from 2026-11-01 on reached the mock
 * once (n nights). */
static void
expect_each_night_once(int n)
{
    cJSON *log = e2e_mock_log();

    for (int d = 0; d < n; d++) {
        for (const char *s = "abcd"; *s != '\0'; s++) {
            char path[64];
            /* Nights from 2026-11-01: November has 30 days. */
            snprintf(path, sizeof(path), "/comments/%c/2026-%s-%02d", *s,
                     d < 30 ? "11" : "12", d < 30 ? d + 1 : d - 29);
            ck_assert_msg(e2e_sent_to(log, path) == 1, "%s sent %d times", path,
                          e2e_sent_to(log, path));
        }
    }
    cJSON_Delete(log);
}

/* How many reports the hook wrote to reports.jsonl. */
static int
reports(void)
{
    char *text = NULL;
    size_t len = 0;
    int n = 0;

    if (file_read_all("reports.jsonl", 1 << 26, &text, &len) != 0)
        return 0;
    for (char *p = text; (p = strstr(p, "\"since\"")) != NULL; p++)
        n++;
    free(text);
    return n;
}

START_TEST(test_nights_end_and_the_file_stays_flat)
{
    int n = nights(), backups = 0;
    long long size[64] = {0}, wal = 0, top_early = 0, top_late = 0;
    long rss[64] = {0};
    int fds[64] = {0};
    int64_t t0, night_end;
    cJSON *st;
    pid_t w;

    ck_assert_int_le(n, 60); /* nights of November and December */
    start_month();
    w = e2e_spawn_faked("@2026-11-01 00:00:00 x8640", true,
                        (const char *[]){"--worker-id", "w", NULL});
    t0 = clock_mono_ms();
    /* Until 10:00 of the last night (7.2 s into it): its jobs and its
     * morning's report are done by then. */
    for (int d = 0; d < n; d++) {
        night_end = t0 + (int64_t)d * NIGHT_MS +
                    (d == n - 1 ? NIGHT_MS * 10 / 24 : NIGHT_MS);
        while (clock_mono_ms() < night_end) {
            struct run_result r;
            ck_assert_msg(RUN(&r, NULL, "backup", "b.db", "--force") == 0,
                          "backup: %s", r.err);
            run_result_free(&r);
            backups++;
            nanosleep(&(struct timespec){2, 0}, NULL);
        }
        size[d] = pages_bytes();
        sample_process(w, &rss[d], &fds[d]);
        wal = bytes("stepq.db-wal") > wal ? bytes("stepq.db-wal") : wal;
    }
    kill(w, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    for (int d = 0; d < n; d++) {
        fprintf(stderr, "night %d: %lld bytes of pages, RSS %ld KiB, %d fds\n",
                d + 1, size[d], rss[d], fds[d]);
        /* Descriptors come and go with requests and hooks, a few at most. */
        ck_assert_int_le(fds[d], fds[0] + 8);
        if (d >= 1 && d < 4)
            top_early = size[d] > top_early ? size[d] : top_early;
        if (d >= 4)
            top_late = size[d] > top_late ? size[d] : top_late;
    }
    expect_each_night_once(n);
    st = e2e_status();
    /* Retention keeps 3 days of finished jobs: 4 a night, 16 at most. */
    ck_assert_int_le(run_job_count(e2e_db), 16);
    ck_assert_int_eq(e2e_count(st, "succeeded"), run_job_count(e2e_db));
    cJSON_Delete(st);
    ck_assert_int_eq(reports(), n);
    /* The log is folded into the file every 8,192 pages (32 MiB). */
    ck_assert_int_le(wal, 33 << 20);
    ck_assert_msg(top_late <= top_early * 105 / 100,
                  "the file grew: %lld bytes after night 4, %lld before",
                  top_late, top_early);
    fprintf(stderr,
            "%d nights, %d backups, pages at most %lld bytes, -wal %lld\n", n,
            backups, top_late > top_early ? top_late : top_early, wal);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("month");
    TCase *tc = tcase_create("nights");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 120 + nights() * NIGHT_MS / 1000);
    tcase_add_test(tc, test_nights_end_and_the_file_stays_flat);
    suite_add_tcase(s, tc);
    return s;
}

/* test_month.c: nights without a human, fast (issue 45). One `stepq work`
 * whose wall clock starts at 2026-11-01 00:00 UTC and runs 11,520 times
 * as fast (libfaketime: a night is 7.5 s; its timers stay on the host's
 * monotonic clock), on a SQLite file, with four nightly schedules (each
 * job a chat step and a post without a key to the mock, named by its
 * schedule and date), the morning report to a hook at 07:00, and
 * retention (finished jobs kept 3 days, bodies 1 day), while the test
 * takes `stepq backup` every 2 s. At the start of each night the test
 * enqueues JOBS_A_NIGHT more jobs (a chat step, then a post to
 * /posts/NIGHT/I) with `stepq enqueue` on the same faked clock, so that
 * the file holds what three nights of them leave. $STEPQ_MONTH_NIGHTS
 * nights (8 by default; bench/month.sh runs 30). Checked: every night's
 * jobs were enqueued and ended, each post reached the mock once, the
 * retention kept the database to the last nights' jobs and its pages
 * flat (its -wal is folded in at 32 MiB), one report a morning, and
 * every backup succeeded. The worker's RSS (VmRSS) and open descriptors
 * are printed each night; its descriptors must stay flat and, after the
 * warm-up, its RSS within 5%. The bench at a million jobs is
 * bench/month.py. */
#include "tests/support/support.h"

#include <dirent.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "tests/support/e2e.h"

/* ASan's quarantine keeps freed memory: RSS says nothing under it. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#define NIGHT_MS     7500 /* a day at 11,520 times as fast */
#define SPEED        (86400000 / NIGHT_MS)
#define JOBS_A_NIGHT 300 /* enqueued by the test, besides the schedules' */
#define FAKE_START   1793491200LL /* 2026-11-01 00:00:00 UTC */

/* Job I of a night: a chat step, then a post to /posts/NIGHT/I (without
 * a key); a day's deadline (an hour of the faked clock is 0.4 s). */
#define NIGHT_JOB                                                              \
    "{\"name\": \"n%d-%d\", \"deadline_s\": 86400, \"steps\": [{\"name\": "    \
    "\"ask\", \"request\": {\"messages\": [{\"role\": \"user\", "              \
    "\"content\": \"item %d of night %d\"}]}}, {\"name\": \"post\", "          \
    "\"kind\": \"http\", \"http\": {\"method\": \"POST\", \"url\": "           \
    "\"http://127.0.0.1:%d/posts/%d/%d\", \"body\": {\"text\": "               \
    "\"{{steps.ask.output}}\"}}}]}\n"

/* A schedule at HH:15 whose job chats, then posts to /comments/NAME/DATE. */
#define NIGHTLY(name, hour)                                                    \
    "{\"name\": \"" name "\", \"cron\": \"15 " hour " * * *\", \"job\": "      \
    "{\"name\": \"" name "\", \"deadline_s\": 86400, \"steps\": [{\"name\": "  \
    "\"ask\", \"request\": "                                                   \
    "{\"messages\": [{\"role\": \"user\", \"content\": \"night of "            \
    "{{schedule.date}}\"}]}}, {\"name\": \"post\", \"kind\": \"http\", "       \
    "\"http\": {\"method\": \"POST\", \"url\": \"http://127.0.0.1:%d/"         \
    "comments/{{schedule.name}}/{{schedule.date}}\", \"body\": "               \
    "{\"text\": \"{{steps.ask.output}}\"}}}]}}"

static int
nights(void)
{
    const char *v = getenv("STEPQ_MONTH_NIGHTS");

    return v != NULL && atoi(v) > 0 ? atoi(v) : 8;
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
sample_process(pid_t pid, long long *rss_kib, int *fds)
{
    char path[64], *text = NULL, *at;
    size_t len = 0;
    DIR *d;
    struct dirent *e;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    ck_assert_int_eq(file_read_all(path, 1 << 16, &text, &len), 0);
    at = strstr(text, "VmRSS:");
    *rss_kib = at != NULL ? atoll(at + 6) : 0;
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

/* Enqueues night d's JOBS_A_NIGHT jobs with `stepq enqueue` on the
 * worker's clock (started at t0 at 2026-11-01 00:00, SPEED times as
 * fast), so that their times are the night's: a program's nightly
 * enqueue. The enqueuer starts within milliseconds of the time it is
 * given, a minute or two of the faked clock at most. */
static void
enqueue_night(int d, int64_t t0)
{
    char *jobs = NULL, *out = NULL, cmd[2048], when[32];
    const char *asan = getenv("ASAN_OPTIONS");
    size_t len = 0, cap = JOBS_A_NIGHT * 512;
    time_t fake = (time_t)(FAKE_START + (clock_mono_ms() - t0) * SPEED / 1000);
    glob_t g;

    jobs = xmalloc(cap);
    for (int i = 0; i < JOBS_A_NIGHT; i++)
        len += (size_t)snprintf(jobs + len, cap - len, NIGHT_JOB, d, i, i, d,
                                e2e_mock.port, d, i);
    ck_assert_uint_lt(len, cap);
    free(tmpdir_write(e2e_dir, "night.jsonl", jobs, len));
    free(jobs);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", gmtime(&fake));
    ck_assert_int_eq(glob("/usr/lib/*/faketime/libfaketime.so.1", 0, NULL, &g),
                     0);
    ck_assert_int_lt(snprintf(cmd, sizeof(cmd),
                              "env LD_PRELOAD=%s FAKETIME='@%s x%d' "
                              "FAKETIME_DONT_FAKE_MONOTONIC=1 TZ=UTC "
                              "ASAN_OPTIONS='%s%sverify_asan_link_order=0' "
                              "'%s' --db '%s' enqueue night.jsonl",
                              g.gl_pathv[0], when, SPEED, asan ? asan : "",
                              asan && asan[0] ? ":" : "", stepq_bin(), e2e_db),
                     (int)sizeof(cmd));
    globfree(&g);
    ck_assert_msg(run_sh(cmd, &out) == 0, "enqueue night %d: %s", d + 1, out);
    free(out);
}

/* Each post of the test's jobs of n nights reached the mock once. */
static void
expect_night_posts_once(int n)
{
    cJSON *log = e2e_mock_log(), *req;
    int *sent = xcalloc((size_t)n * JOBS_A_NIGHT, sizeof(*sent));

    cJSON_ArrayForEach(req, log)
    {
        const char *path = e2e_str(req, "path");
        int d, i;
        if (path != NULL && sscanf(path, "/posts/%d/%d", &d, &i) == 2) {
            ck_assert_msg(d >= 0 && d < n && i >= 0 && i < JOBS_A_NIGHT,
                          "a post of no job: %s", path);
            sent[d * JOBS_A_NIGHT + i]++;
        }
    }
    for (int k = 0; k < n * JOBS_A_NIGHT; k++)
        ck_assert_msg(sent[k] == 1, "/posts/%d/%d sent %d times",
                      k / JOBS_A_NIGHT, k % JOBS_A_NIGHT, sent[k]);
    free(sent);
    cJSON_Delete(log);
}

/* The largest of v[from..to) (to clamped to n), or with mean its mean. */
static long long
over(const long long *v, int from, int to, int n, bool mean)
{
    long long m = 0, sum = 0;
    int k = 0;

    for (int d = from; d < to && d < n; d++, k++) {
        m = v[d] > m ? v[d] : m;
        sum += v[d];
    }
    return mean ? (k > 0 ? sum / k : 0) : m;
}

START_TEST(test_nights_end_and_the_file_stays_flat)
{
    int n = nights(), backups = 0;
    long long size[64] = {0}, rss[64] = {0}, wal = 0, top_early, top_late;
    long long last_kib = 0;
    int fds[64] = {0};
    int64_t t0, night_end, left;
    cJSON *st;
    pid_t w;

    ck_assert_int_le(n, 60); /* nights of November and December */
    start_month();
    w = e2e_spawn_faked("@2026-11-01 00:00:00 x11520", true,
                        (const char *[]){"--worker-id", "w", NULL});
    t0 = clock_mono_ms();
    /* Until 20:00 of the last night (6.25 s into it): its jobs, the
     * last schedule's (04:15, fired by a timer of 1 s, 3.2 h of this
     * clock, so as late as 07:30) and its morning's report are done by
     * then on a loaded machine, and the next morning's report is not. */
    for (int d = 0; d < n; d++) {
        night_end = t0 + (int64_t)d * NIGHT_MS +
                    (d == n - 1 ? NIGHT_MS * 20 / 24 : NIGHT_MS);
        enqueue_night(d, t0);
        while (clock_mono_ms() < night_end) {
            struct run_result r;
            long long now_kib = 0;
            int now_fds = 0;
            /* the night's largest RSS: at one moment it swings between
             * levels (the allocator's pages given back or not) */
            sample_process(w, &now_kib, &now_fds);
            rss[d] = now_kib > rss[d] ? now_kib : rss[d];
            ck_assert_msg(RUN(&r, NULL, "backup", "b.db", "--force") == 0,
                          "backup: %s", r.err);
            run_result_free(&r);
            backups++;
            /* Every 2 s, and not past the night's end. */
            left = night_end - clock_mono_ms();
            poll(NULL, 0, (int)(left > 2000 ? 2000 : left > 0 ? left : 0));
        }
        size[d] = pages_bytes();
        sample_process(w, &last_kib, &fds[d]);
        rss[d] = last_kib > rss[d] ? last_kib : rss[d];
        wal = bytes("stepq.db-wal") > wal ? bytes("stepq.db-wal") : wal;
    }
    kill(w, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    for (int d = 0; d < n; d++) {
        fprintf(stderr, "night %d: %lld bytes of pages, RSS %lld KiB, %d fds\n",
                d + 1, size[d], rss[d], fds[d]);
        /* Descriptors come and go with requests and hooks, a few at most. */
        ck_assert_int_le(fds[d], fds[0] + 8);
    }
    expect_each_night_once(n);
    expect_night_posts_once(n);
    st = e2e_status();
    /* Retention keeps 3 days of finished jobs: 3 nights' at most. */
    ck_assert_int_le(run_job_count(e2e_db), 3 * (JOBS_A_NIGHT + 4));
    ck_assert_int_eq(e2e_count(st, "succeeded"), run_job_count(e2e_db));
    cJSON_Delete(st);
    ck_assert_int_eq(reports(), n);
    /* The log is folded into the file every 8,192 pages (32 MiB). */
    ck_assert_int_le(wal, 33 << 20);
    /* Nights 1 to 3 fill the file and the worker's caches, and the
     * retention's first prunes (night 4 on) leave it with holes that the
     * next nights fill: from night 4 to 6 on, neither grows. The pages
     * only grow (their most); the worker's RSS, each night's largest of a
     * sample every 2 s, wanders by a megabyte with the night's work: its
     * mean. */
    top_early = over(size, 3, 6, n, false);
    top_late = over(size, 6, n, n, false);
    ck_assert_msg(top_late <= top_early * 105 / 100,
                  "the file grew: %lld bytes after night 6, %lld before",
                  top_late, top_early);
#ifndef UNDER_ASAN
    ck_assert_msg(over(rss, 6, n, n, true) <=
                      over(rss, 3, 6, n, true) * 105 / 100,
                  "the worker grew: %lld KiB after night 6, %lld before",
                  over(rss, 6, n, n, true), over(rss, 3, 6, n, true));
#endif
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

/* test_hostile.c: hostile endpoints end to end (issue 8). The real worker
 * runs against the real `stepq mock` answering 100 MiB, never answering,
 * or closing mid-body. Each must end as a classified failure within the
 * tier's timeout (5 s in the e2e config), the job must reach the decision
 * the policy gives, and the worker's memory must stay bounded. */
/* prlimit() on a running process is a Linux call. */
#define _GNU_SOURCE
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/file.h"
#include "tests/support/e2e.h"

/* A chat step that may go to free then local, one send per tier. */
#define CHAT_STEP                                                              \
    "{\"name\":\"a\",\"tiers\":[\"free\",\"local\"],\"max_attempts\":1,"       \
    "\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}}"
/* A side-effecting http step without an idempotency key (printf format:
 * the mock's port, the path). */
#define HTTP_STEP                                                              \
    "{\"name\":\"p\",\"kind\":\"http\",\"http\":{\"url\":"                     \
    "\"http://127.0.0.1:%d%s\",\"body\":{\"t\":1}}}"

#define MIB (1024L * 1024L)

/* Runs `stepq work --drain` to its end and returns its exit code, with
 * the worker's peak resident memory in *maxrss_kib: the largest of the
 * waited-for children, and the mock is not waited for before teardown,
 * so this is the worker's (getrusage(RUSAGE_CHILDREN) is POSIX; wait4
 * is not). */
static int
drain_measured(long *maxrss_kib)
{
    struct rusage ru;
    int st;
    pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl(stepq_bin(), "stepq", "work", "--drain", (char *)NULL);
        _exit(127);
    }
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_int_eq(getrusage(RUSAGE_CHILDREN, &ru), 0);
    *maxrss_kib = ru.ru_maxrss;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The first attempt of step 0 of job 1: outcome, reason and latency.
 * The outcome says how the attempt ended (a cut answer is not a
 * timeout); the latency bound only catches a hang, with room for a
 * loaded machine (a 100 MiB answer took 5.1 s under load 10). */
static void
first_attempt(const cJSON *job, const char *outcome, const char *reason,
              const char *decision, int max_latency_ms)
{
    const cJSON *h = e2e_hist(job, 0, 0);
    const cJSON *lat = cJSON_GetObjectItem(h, "latency_ms");

    e2e_expect_attempt(job, 0, outcome, reason, decision);
    ck_assert_msg(cJSON_IsNumber(lat) && lat->valuedouble <= max_latency_ms,
                  "latency %g ms", cJSON_GetNumberValue(lat));
}

/* 100 MiB from the free tier: refused at max_response_bytes (4 MiB) as
 * truncated/response_too_large. That reason is not one of decide's switch
 * rows (too_large, context_overflow: the request), so the policy fails the
 * job loudly; the worker stays small. */
START_TEST(test_answer_of_100_mib)
{
    cJSON *job;
    long rss = 0;

    e2e_start_file("free-oversize-100mib.json", "");
    e2e_enqueue("{\"name\":\"j\",\"steps\":[" CHAT_STEP "]}");
    ck_assert_int_eq(drain_measured(&rss), 0);
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "failed");
    first_attempt(job, "truncated", "response_too_large", "fail_loud", 10000);
    ck_assert_int_eq(
        cJSON_GetArraySize(cJSON_GetObjectItem(e2e_step_of(job, 0), "history")),
        1);
    /* Far below the 100 MiB answer, even with ASan's shadow memory. */
    ck_assert_msg(rss < 64 * 1024, "worker max RSS %ld KiB", rss);
    fprintf(stderr, "hostile: 100 MiB answer, worker max RSS %ld KiB\n", rss);
    cJSON_Delete(job);
}
END_TEST

/* A side-effecting step without a key meets a fault after the request
 * went out: the write may have happened, so the step is parked and sent
 * exactly once, and the worker stays small. */
struct side_effect_case {
    const char *script, *path;    /* a script of tests/data/e2e/; the URL */
    const char *outcome, *reason; /* of the first attempt; reason may be NULL */
};

static const struct side_effect_case side_effect_cases[] = {
    /* half a body, then the connection closes: in doubt */
    {"post-close-mid-body.json", "/post/1", "server_error", NULL},
    /* 100 MiB: too large after a 2xx head */
    {"post-oversize-100mib.json", "/post/2", "truncated", "response_too_large"},
};

START_TEST(test_side_effect_fault_parks_sent_once)
{
    const struct side_effect_case *c = &side_effect_cases[_i];
    cJSON *job, *log;
    char text[512];
    long rss = 0;

    e2e_start_file(c->script, "");
    snprintf(text, sizeof(text), "{\"name\":\"j\",\"steps\":[" HTTP_STEP "]}",
             e2e_mock.port, c->path);
    e2e_enqueue(text);
    ck_assert_int_eq(drain_measured(&rss), 0);
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "parked");
    first_attempt(job, c->outcome, c->reason, "park_for_human", 10000);
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, c->path), 1);
    ck_assert_msg(rss < 64 * 1024, "worker max RSS %ld KiB", rss);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

/* Another process holds the database's write lock for 2 s (the sqlite3
 * CLI inside BEGIN IMMEDIATE): the worker waits within its 5 s busy
 * timeout, then runs the job; nothing is lost and the file stays sound. */
START_TEST(test_write_lock_held_elsewhere)
{
    cJSON *job;
    char line[64] = "";
    long rss = 0;
    int64_t t0;
    FILE *holder, *ic;

    e2e_start("{}", "");
    e2e_enqueue("{\"name\":\"j\",\"steps\":[" CHAT_STEP "]}");
    holder = popen("(printf 'BEGIN IMMEDIATE;\\n.print locked\\n';"
                   " sleep 2; printf 'COMMIT;\\n') | sqlite3 stepq.db",
                   "r");
    ck_assert_ptr_nonnull(holder);
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), holder));
    ck_assert_str_eq(line, "locked\n");
    t0 = clock_now_ms();
    ck_assert_int_eq(drain_measured(&rss), 0);
    ck_assert_int_ge(clock_now_ms() - t0, 1000); /* it had to wait */
    ck_assert_int_eq(pclose(holder), 0);
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "tier"), "free");
    ic = popen("sqlite3 stepq.db 'PRAGMA integrity_check'", "r");
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), ic));
    ck_assert_str_eq(line, "ok\n");
    ck_assert_int_eq(pclose(ic), 0);
    cJSON_Delete(job);
}
END_TEST

/* The disk fills up under a running worker (a file size limit on its
 * process): it reports the failed commits, drops its jobs to their leases
 * and keeps trying. Once the limit is lifted, the same worker finishes
 * every job, and the file is sound. */
START_TEST(test_disk_full_then_recovers)
{
    struct rlimit lim = {RLIM_INFINITY, RLIM_INFINITY};
    char big[2100], line[64] = "", *log = NULL;
    size_t len = 0;
    int64_t end;
    FILE *ic;
    pid_t pid;

    e2e_start("{}", "");
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (int i = 0; i < 100; i++) {
        char job[2400];
        snprintf(job, sizeof(job),
                 "{\"name\":\"j%d\",\"steps\":[{\"name\":\"a\",\"request\":"
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}}]}",
                 i, big);
        e2e_enqueue(job);
    }
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* Room for the WAL to start, not for the whole run. Only the soft
         * limit: the parent may lift it without privileges. */
        struct rlimit small = {256 * 1024, RLIM_INFINITY};
        int fd = open("work.log", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &small);
        execl(stepq_bin(), stepq_bin(), "work", "--drain", (char *)NULL);
        _exit(127);
    }
    end = clock_mono_ms() + 20000;
    while (log == NULL ||
           strstr(log, "cannot commit to the database") == NULL) {
        free(log);
        log = NULL;
        ck_assert_msg(clock_mono_ms() < end, "no commit failure reported");
        poll(NULL, 0, 20);
        if (file_read_all("work.log", 1 << 24, &log, &len) != 0)
            log = NULL;
    }
    free(log);
    ck_assert_msg(prlimit(pid, RLIMIT_FSIZE, &lim, NULL) == 0, "prlimit: %s",
                  strerror(errno));
    ck_assert_int_eq(e2e_wait_exit(pid), 0);
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 100);
    ic = popen("sqlite3 stepq.db 'PRAGMA integrity_check'", "r");
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), ic));
    ck_assert_str_eq(line, "ok\n");
    ck_assert_int_eq(pclose(ic), 0);
}
END_TEST

/* A wire fault on the free tier: the attempt fails as outcome after
 * min_ms to max_ms, the step switches to local and succeeds, memory stays
 * bounded. */
struct wire_case {
    const char *fault, *outcome;
    int min_ms, max_ms;
};

static const struct wire_case wire_cases[] = {
    /* an answer that never comes: a timeout after the tier's 5 s */
    {"hang", "timeout", 4900, 7000},
    /* half a body, then the connection closes: a reset */
    {"close_mid_body", "server_error", 0, 10000},
    /* a body that arrives one byte a second never ends within the timeout */
    {"drip", "timeout", 0, 8000},
    /* a chunked body whose chunk size is not hex: a transport error */
    {"bad_chunked", "server_error", 0, 10000},
    /* a 1 MiB header is refused by the client, not buffered */
    {"huge_headers", "server_error", 0, 10000},
};

START_TEST(test_wire_fault_switches_to_local)
{
    const struct wire_case *c = &wire_cases[_i];
    char script[256];
    cJSON *job;
    long rss = 0;

    snprintf(script, sizeof(script),
             "{\"routes\":[{\"path\":\"/free\",\"loop\":true,"
             "\"answers\":[{\"fault\":\"%s\"}]}]}",
             c->fault);
    e2e_start(script, "");
    e2e_enqueue("{\"name\":\"j\",\"steps\":[" CHAT_STEP "]}");
    ck_assert_int_eq(drain_measured(&rss), 0);
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    first_attempt(job, c->outcome, NULL, "switch_tier_replay", c->max_ms);
    ck_assert_int_ge(
        cJSON_GetObjectItem(e2e_hist(job, 0, 0), "latency_ms")->valuedouble,
        c->min_ms);
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "tier"), "local");
    ck_assert_int_lt(rss, 64 * 1024);
    cJSON_Delete(job);
}
END_TEST

/* The database file is read-only for the worker (it runs as "nobody"; as
 * root a mode bit would not stop it): it says so and exits 1, and the file
 * is unchanged. Writable again, the jobs run. */
START_TEST(test_read_only_database)
{
    char *log = NULL, *path;
    size_t len = 0;
    pid_t pid;
    int bin;

    e2e_start("{}", "");
    for (int i = 0; i < 3; i++)
        e2e_enqueue("{\"name\":\"j\",\"steps\":[" CHAT_STEP "]}");
    path = tmpdir_join(e2e_dir, "stepq.db");
    ck_assert_int_eq(chmod(e2e_dir, 0755), 0);
    ck_assert_int_eq(chmod(path, 0644), 0);
    /* Opened as root: "nobody" may not search the build tree's parents
     * (a clone in /root, mode 0700); fexecve needs only the file's x bit. */
    bin = open(stepq_bin(), O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(bin, 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char *argv[] = {(char *)stepq_bin(), "work", "--drain", NULL};
        int fd = open("work.log", O_WRONLY | O_CREAT | O_TRUNC, 0666);
        dup2(fd, 2);
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(126);
        fexecve(bin, argv, environ);
        _exit(127);
    }
    close(bin);
    ck_assert_int_eq(e2e_wait_exit(pid), 1);
    ck_assert_int_eq(file_read_all("work.log", 1 << 20, &log, &len), 0);
    ck_assert_msg(strstr(log, "Permission denied") != NULL &&
                      strstr(log, "stepq.db") != NULL,
                  "unclear error: %s", log);
    free(log);
    ck_assert_int_eq(e2e_count(NULL, "queued"), 3);
    ck_assert_int_eq(chmod(path, 0600), 0);
    free(e2e_drain());
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 3);
    free(path);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("hostile");
    TCase *tc = tcase_create("endpoints");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_answer_of_100_mib);
    tcase_add_loop_test(
        tc, test_side_effect_fault_parks_sent_once, 0,
        (int)(sizeof(side_effect_cases) / sizeof(side_effect_cases[0])));
    tcase_add_loop_test(tc, test_wire_fault_switches_to_local, 0,
                        (int)(sizeof(wire_cases) / sizeof(wire_cases[0])));
    suite_add_tcase(s, tc);
    tc = tcase_create("database");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_write_lock_held_elsewhere);
    tcase_add_test(tc, test_disk_full_then_recovers);
    tcase_add_test(tc, test_read_only_database);
    suite_add_tcase(s, tc);
    return s;
}

/* test_programs.c: what programs that enqueue work rely on (issue 42),
 * through the real binary, a real store, the mock and real workers:
 * enqueue of several files and of pretty-printed jobs one after another
 * (all or nothing), a run_at as a span from now, the long-poll
 * GET /v1/jobs/ID?wait= (200 waiters at once, a park, a stop) and
 * `stepq jobs wait`, and a job's own on_done and on_fail hooks named
 * from the config's "hooks". */
#define _GNU_SOURCE /* asprintf */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/e2e.h"
#include "tests/support/httpcl.h"
#include "tests/support/servefix.h"

/* A chat job called name on tier local (the mock answers it). */
#define CHAT_JOB(name, extra)                                                  \
    "{\"name\":\"" name "\"" extra ",\"steps\":[{\"name\":\"s\",\"tiers\":"    \
    "[\"local\"],\"request\":{\"messages\":[{\"role\":\"user\","               \
    "\"content\":\"hi\"}]}}]}"
/* The same, pretty-printed over several lines, as an editor writes it. */
#define PRETTY_JOB(name)                                                       \
    "{\n  \"name\": \"" name "\",\n  \"steps\": [\n    {\n      \"name\": "    \
    "\"s\",\n      \"tiers\": [\"local\"],\n      \"request\": {\n        "    \
    "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]\n      }\n"     \
    "    }\n  ]\n}\n"

static void
write_file(const char *name, const char *text)
{
    free(tmpdir_write(e2e_dir, name, text, strlen(text)));
}

static int
lines_of(const char *s)
{
    int n = 0;

    for (; *s != '\0'; s++)
        n += *s == '\n';
    return n;
}

/* The time member k of a shown job, in ms. */
static int64_t
time_of(const cJSON *job, const char *k)
{
    int64_t t = 0;

    ck_assert_int_eq(clock_parse_utc(e2e_str(job, k), &t), 0);
    return t;
}

/* ---- enqueue: several files, pretty-printed jobs, all or nothing ---- */

START_TEST(test_enqueue_several_files_all_or_nothing)
{
    struct run_result r;

    serve_setup();
    write_file("a.json", PRETTY_JOB("a1") PRETTY_JOB("a2"));
    write_file("b.json", "[" CHAT_JOB("b1", "") "]");
    write_file("bad.json", PRETTY_JOB("c1") "\n{\n  \"name\": \"c2\"\n}\n");
    ck_assert_int_eq(RUN(&r, NULL, "enqueue", "a.json", "b.json", "--json"), 0);
    ck_assert_str_eq(r.out, "[{\"id\":1,\"duplicate\":false},{\"id\":2,"
                            "\"duplicate\":false},{\"id\":3,\"duplicate\":"
                            "false}]\n");
    run_result_free(&r);
    /* One bad job in the second file: nothing of the first is written,
     * and the message names the file and the line the job starts on. */
    ck_assert_int_eq(RUN(&r, NULL, "enqueue", "b.json", "bad.json"), 2);
    ck_assert_msg(strstr(r.err, "bad.json: line 14: steps: missing") != NULL,
                  "%s", r.err);
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(e2e_db), 3);
    /* Standard input among files, once. */
    ck_assert_int_eq(RUN(&r, PRETTY_JOB("d"), "enqueue", "b.json", "-"), 0);
    /* Two ids (PostgreSQL's sequence does not give back the one the
     * refused enqueue took: not 4 and 5 there). */
    ck_assert_int_eq(lines_of(r.out), 2);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "enqueue", "-", "-"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "given twice"));
    run_result_free(&r);
    /* --key names one job: two files of one job each are two. */
    ck_assert_int_eq(RUN(&r, NULL, "enqueue", "b.json", "b.json", "--key", "k"),
                     2);
    ck_assert_ptr_nonnull(strstr(r.err, "--key applies to a single job"));
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(e2e_db), 5);
    free(e2e_drain());
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 5);
}
END_TEST

/* ---- run_at as a span from the enqueue ------------------------------ */

START_TEST(test_run_at_span_from_now)
{
    struct run_result r;
    struct server s;
    int status = 0;
    cJSON *o;

    serve_setup();
    write_file("j.json", CHAT_JOB("j", ""));
    write_file("late.json", CHAT_JOB("late", ",\"run_at\":\"+90s\""));
    ck_assert_int_eq(RUN(&r, NULL, "enqueue", "j.json", "--run-at", "+2h"), 0);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "enqueue", "late.json"), 0);
    run_result_free(&r);
    o = e2e_show(1);
    ck_assert_int_eq(time_of(o, "run_at") - time_of(o, "created_at"), 7200000);
    cJSON_Delete(o);
    o = e2e_show(2);
    ck_assert_int_eq(time_of(o, "run_at") - time_of(o, "created_at"), 90000);
    cJSON_Delete(o);
    /* Through the API: a job's run_at is the job file's field. */
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    cJSON_Delete(serve_call(&s, "POST", "/v1/jobs",
                            CHAT_JOB("api", ",\"run_at\":\"+1d\""), &status));
    ck_assert_int_eq(status, 201);
    o = serve_call(&s, "POST", "/v1/jobs", CHAT_JOB("x", ",\"run_at\":\"-5m\""),
                   &status);
    ck_assert_int_eq(status, 400);
    ck_assert_ptr_nonnull(strstr(
        e2e_str(cJSON_GetObjectItem(o, "error"), "message"), "run_at: must"));
    cJSON_Delete(o);
    serve_stop(&s);
    o = e2e_show(3);
    ck_assert_int_eq(time_of(o, "run_at") - time_of(o, "created_at"), 86400000);
    cJSON_Delete(o);
    /* Not due: a drain runs none of them. */
    free(e2e_drain());
    ck_assert_int_eq(e2e_count(NULL, "queued"), 3);
    ck_assert_int_eq(RUN(&r, NULL, "enqueue", "j.json", "--run-at", "+10x"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--run-at +10x is neither"));
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "enqueue", "j.json", "--run-at", "-5m"), 2);
    run_result_free(&r);
}
END_TEST

/* ---- the long-poll -------------------------------------------------- */

/* Sends GET path on a new connection and returns the socket. */
static int
ask(const struct server *s, const char *path)
{
    int fd = cl_connect(s->port);

    cl_send(fd, "GET", path, AUTH, "");
    return fd;
}

/* Reads the answer on fd and returns its job's state (the reply is
 * freed); *ms gets how long it took from since (clock_mono_ms). */
static char *
state_of_answer(int fd, int64_t since, int64_t *ms)
{
    struct reply r = {0};
    cJSON *o;
    char *st;

    cl_recv(fd, 60000, &r);
    close(fd);
    if (ms != NULL)
        *ms = clock_mono_ms() - since;
    ck_assert_msg(r.status == 200, "status %d: %s", r.status,
                  r.body ? r.body : "");
    o = body_json(&r);
    st = strdup(e2e_str(o, "state"));
    cJSON_Delete(o);
    reply_free(&r);
    return st;
}

/* Reads the answer on fd (asked at since) and checks that its job is in
 * state want and that it came within [min_ms, max_ms). */
static void
expect_answer(int fd, int64_t since, const char *want, int64_t min_ms,
              int64_t max_ms)
{
    int64_t ms = 0;
    char *st = state_of_answer(fd, since, &ms);

    ck_assert_str_eq(st, want);
    free(st);
    ck_assert_msg(ms >= min_ms && ms < max_ms, "%s after %lld ms", want,
                  (long long)ms);
}

/* A waiter answers when its job ends, not at its timeout; one on a job
 * that does not end answers at its timeout with the job as it is. */
START_TEST(test_wait_answers_when_the_job_ends)
{
    struct server s;
    int fd, status = 0;
    int64_t t0;
    cJSON *o;

    serve_setup();
    e2e_enqueue(CHAT_JOB("j", ""));
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    t0 = clock_mono_ms();
    expect_answer(ask(&s, "/v1/jobs/1?wait=1"), t0, "queued", 1000, 5000);
    fd = ask(&s, "/v1/jobs/1?wait=40");
    t0 = clock_mono_ms();
    free(e2e_drain());
    expect_answer(fd, t0, "succeeded", 0, 20000);
    /* An ended job is answered at once. */
    t0 = clock_mono_ms();
    expect_answer(ask(&s, "/v1/jobs/1?wait=40"), t0, "succeeded", 0, 1000);
    /* Bad waits and unknown jobs. */
    o = serve_call(&s, "GET", "/v1/jobs/1?wait=51", NULL, &status);
    ck_assert_int_eq(status, 400);
    ck_assert_ptr_nonnull(
        strstr(e2e_str(cJSON_GetObjectItem(o, "error"), "message"),
               "wait must be a whole number of seconds from 0 to 50"));
    cJSON_Delete(o);
    cJSON_Delete(serve_call(&s, "GET", "/v1/jobs/1?wait=1.5", NULL, &status));
    ck_assert_int_eq(status, 400);
    cJSON_Delete(serve_call(&s, "GET", "/v1/jobs/9?wait=5", NULL, &status));
    ck_assert_int_eq(status, 404);
    serve_stop(&s);
}
END_TEST

/* 200 waiters at once on 20 jobs, on the server's one thread: the
 * server answers other requests while they wait, and each waiter gets
 * its job succeeded once a worker ran them. */
START_TEST(test_two_hundred_waiters)
{
    enum { WAITERS = 200, JOBS = 20 };
    int fds[WAITERS], status = 0;
    struct server s;
    int64_t t0;

    serve_setup();
    for (int i = 0; i < JOBS; i++)
        e2e_enqueue(CHAT_JOB("j", ""));
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    for (int i = 0; i < WAITERS; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/v1/jobs/%d?wait=50", i % JOBS + 1);
        fds[i] = ask(&s, path);
    }
    t0 = clock_mono_ms();
    cJSON_Delete(serve_call(&s, "GET", "/v1/status", NULL, &status));
    ck_assert_int_eq(status, 200);
    ck_assert_msg(clock_mono_ms() - t0 < 2000, "status took %lld ms",
                  (long long)(clock_mono_ms() - t0));
    free(e2e_drain());
    for (int i = 0; i < WAITERS; i++) {
        char *st = state_of_answer(fds[i], t0, NULL);
        ck_assert_msg(strcmp(st, "succeeded") == 0, "waiter %d: %s", i, st);
        free(st);
    }
    serve_stop(&s);
}
END_TEST

/* A job that parks answers its waiter (only a person moves it on); a
 * wait begun on a job parked already is not answered at once, so a
 * program asking again does not spin. */
START_TEST(test_wait_answers_a_park_once)
{
    struct server s;
    int64_t t0;
    int fd;

    serve_setup();
    serve_enqueue_post(); /* meets a daily wall: parks */
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    fd = ask(&s, "/v1/jobs/1?wait=40");
    t0 = clock_mono_ms();
    free(e2e_drain());
    expect_answer(fd, t0, "parked", 0, 20000);
    t0 = clock_mono_ms();
    expect_answer(ask(&s, "/v1/jobs/1?wait=2"), t0, "parked", 2000, 10000);
    serve_stop(&s);
}
END_TEST

/* A stopping server answers its waiters at once with their jobs as they
 * are, and exits 0 without waiting for their timeouts. */
START_TEST(test_stop_answers_the_waiters)
{
    struct server s;
    int fds[3];
    int64_t t0;

    serve_setup();
    e2e_enqueue(CHAT_JOB("j", ""));
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    for (int i = 0; i < 3; i++)
        fds[i] = ask(&s, "/v1/jobs/1?wait=50");
    poll(NULL, 0, 300); /* the requests are read and suspended */
    t0 = clock_mono_ms();
    kill(s.pid, SIGTERM);
    for (int i = 0; i < 3; i++) {
        char *st = state_of_answer(fds[i], t0, NULL);
        ck_assert_str_eq(st, "queued");
        free(st);
    }
    ck_assert_int_eq(e2e_wait_exit(s.pid), 0);
    ck_assert_msg(clock_mono_ms() - t0 < 5000, "stopped after %lld ms",
                  (long long)(clock_mono_ms() - t0));
}
END_TEST

/* `stepq jobs wait`: the outcome as the exit code. */
START_TEST(test_cli_jobs_wait_exit_codes)
{
    struct run_result r;
    pid_t w;

    serve_setup();
    e2e_enqueue(CHAT_JOB("ok", ""));
    e2e_enqueue(CHAT_JOB("gone", ""));
    serve_enqueue_post(); /* job 3: parks */
    ck_assert_int_eq(RUN(&r, NULL, "jobs", "wait", "1", "--timeout", "1"), 7);
    ck_assert_str_eq(r.out, "job 1 is still queued after 1s\n");
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "jobs", "cancel", "2"), 0);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "jobs", "wait", "2"), 5);
    ck_assert_str_eq(r.out, "job 2 cancelled\n");
    run_result_free(&r);
    w = e2e_spawn_workerv((const char *[]){"--concurrency", "4", NULL});
    ck_assert_int_eq(
        RUN(&r, NULL, "jobs", "wait", "1", "--timeout", "30s", "--json"), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "\"state\":\"succeeded\""));
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "jobs", "wait", "3", "--timeout", "30"), 6);
    ck_assert_ptr_nonnull(strstr(r.out, "job 3 parked"));
    run_result_free(&r);
    kill(w, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    ck_assert_int_eq(RUN(&r, NULL, "jobs", "wait", "9"), 3);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "jobs", "wait", "1", "--timeout", "x"), 2);
    run_result_free(&r);
}
END_TEST

/* The Python example client's wait (examples/serve_client.py): the
 * long-poll asked again until the job ends, with the CLI's exit codes. */
START_TEST(test_python_client_waits)
{
    char *client = source_path("examples/serve_client.py"), *out = NULL;
    char cmd[2048];
    struct server s;
    pid_t w;

    serve_setup();
    e2e_enqueue(CHAT_JOB("ok", ""));
    e2e_enqueue(CHAT_JOB("late", ",\"run_at\":\"+1h\""));
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
#define PY(args)                                                               \
    (snprintf(cmd, sizeof(cmd),                                                \
              "env -u http_proxy -u HTTP_PROXY STEPQ_TOKEN=" TOKEN             \
              " python3 %s http://127.0.0.1:%d " args,                         \
              client, s.port),                                                 \
     free(out), out = NULL, run_sh(cmd, &out))
    ck_assert_msg(PY("wait 2 --timeout 2") == 7, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "\"state\": \"queued\""));
    w = e2e_spawn_workerv((const char *[]){"--concurrency", "4", NULL});
    ck_assert_msg(PY("wait 1 --timeout 60") == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "\"state\": \"succeeded\""));
#undef PY
    kill(w, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    serve_stop(&s);
    free(out);
    free(client);
}
END_TEST

/* ---- a job's own hooks ------------------------------------------------ */

#define HOOKS                                                                  \
    "\"on_done\": \"cat > all-done-$$.json\", \"hooks\": {\"note\": \"cat > "  \
    "note-$$.json\", \"page-oncall\": \"cat > page-$$.json\"}"

/* A job names a hook of the config in on_done or on_fail; it runs after
 * the commit with the job's JSON, beside the config's own on_done. */
START_TEST(test_job_names_its_hooks)
{
    char job[1024];
    cJSON *o;

    e2e_setup();
    e2e_start_file("comments-daily-wall-once.json", HOOKS);
    e2e_enqueue(CHAT_JOB("told", ",\"on_done\":\"note\""));
    e2e_enqueue(CHAT_JOB("quiet", ""));
    snprintf(job, sizeof(job),
             "{\"name\":\"no-env\",\"on_fail\":\"page-oncall\",\"on_done\":"
             "\"note\",\"steps\":[{\"name\":\"post\",\"kind\":\"http\","
             "\"http\":{\"url\":\"http://127.0.0.1:%d/other\",\"headers\":"
             "{\"Authorization\":\"env:STEPQ_TEST_NOT_SET\"}}}]}",
             e2e_mock.port);
    e2e_enqueue(job);
    free(e2e_drain());
    o = e2e_one_file("note-*.json");
    ck_assert_str_eq(e2e_str(o, "name"), "told");
    ck_assert_str_eq(e2e_str(o, "state"), "succeeded");
    cJSON_Delete(o);
    o = e2e_one_file("page-*.json");
    ck_assert_str_eq(e2e_str(o, "name"), "no-env");
    ck_assert_str_eq(e2e_str(o, "state"), "failed");
    cJSON_Delete(o);
    /* The config's on_done told both jobs that succeeded. */
    {
        glob_t g;
        ck_assert_int_eq(glob("all-done-*.json", 0, NULL, &g), 0);
        ck_assert_uint_eq(g.gl_pathc, 2);
        globfree(&g);
    }
}
END_TEST

/* A name the config lacks is refused at enqueue, through the CLI and the
 * API, naming the field and the name; a job cannot carry a command; a
 * bad "hooks" in the config is refused with its path. */
START_TEST(test_unknown_hook_refused_at_enqueue)
{
    struct run_result r;
    struct server s;
    int status = 0;
    cJSON *o;

    e2e_setup();
    e2e_start_file("comments-daily-wall-once.json", HOOKS);
    ck_assert_int_eq(RUN(&r, CHAT_JOB("x", ",\"on_done\":\"nope\""), "enqueue"),
                     2);
    ck_assert_msg(strstr(r.err, "on_done: the config has no hook named "
                                "nope") != NULL,
                  "%s", r.err);
    run_result_free(&r);
    ck_assert_int_eq(
        RUN(&r, CHAT_JOB("x", ",\"on_fail\":\"rm -rf /tmp/x\""), "enqueue"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "on_fail: the config has no hook"));
    run_result_free(&r);
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    o = serve_call(&s, "POST", "/v1/jobs", CHAT_JOB("x", ",\"on_fail\":\"x\""),
                   &status);
    ck_assert_int_eq(status, 400);
    ck_assert_ptr_nonnull(
        strstr(e2e_str(cJSON_GetObjectItem(o, "error"), "message"),
               "on_fail: the config has no hook named x"));
    cJSON_Delete(o);
    serve_stop(&s);
    ck_assert_int_eq(run_job_count(e2e_db), 0);
    write_file("stepq.json", "{\"hooks\": {\"a b\": \"true\"}}");
    ck_assert_int_eq(RUN(&r, NULL, "tiers"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "hooks.a b: a hook's name must be"));
    run_result_free(&r);
    write_file("stepq.json", "{\"hooks\": {\"a\": 1}}");
    ck_assert_int_eq(RUN(&r, NULL, "tiers"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "hooks.a: must be a command"));
    run_result_free(&r);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("programs");
    TCase *tc = tcase_create("enqueue");
    TCase *wait = tcase_create("wait");
    TCase *hooks = tcase_create("hooks");

    tcase_add_checked_fixture(tc, NULL, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_enqueue_several_files_all_or_nothing);
    tcase_add_test(tc, test_run_at_span_from_now);
    suite_add_tcase(s, tc);
    tcase_add_checked_fixture(wait, NULL, e2e_teardown);
    tcase_set_timeout(wait, 90);
    tcase_add_test(wait, test_wait_answers_when_the_job_ends);
    tcase_add_test(wait, test_two_hundred_waiters);
    tcase_add_test(wait, test_wait_answers_a_park_once);
    tcase_add_test(wait, test_stop_answers_the_waiters);
    tcase_add_test(wait, test_cli_jobs_wait_exit_codes);
    tcase_add_test(wait, test_python_client_waits);
    suite_add_tcase(s, wait);
    tcase_add_checked_fixture(hooks, NULL, e2e_teardown);
    tcase_set_timeout(hooks, 60);
    tcase_add_test(hooks, test_job_names_its_hooks);
    tcase_add_test(hooks, test_unknown_hook_refused_at_enqueue);
    suite_add_tcase(s, hooks);
    return s;
}

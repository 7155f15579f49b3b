/* test_worker.c: `stepq work` end to end, with real processes: the real
 * `stepq mock` on loopback, the real binary enqueueing and working, and
 * the mock's request log as the witness of what was sent. One test per
 * decision leaf, then crashes, a graceful stop and two workers at once. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "tests/support/mockproc.h"

static char *dir;
static struct mockproc mock;

static void
setup(void)
{
    dir = tmpdir_new();
    ck_assert_int_eq(chdir(dir), 0);
    unsetenv("STEPQ_DB");
    unsetenv("STEPQ_CONFIG");
    setenv("FREE_KEY", "sk-test-secret-123", 1);
    memset(&mock, 0, sizeof(mock));
}

static void
teardown(void)
{
    if (mock.pid > 0)
        mockproc_stop(&mock);
    tmpdir_remove(dir);
}

/* Starts the mock with script (JSON text) and logging to mock.log, and
 * writes stepq.json with tiers "free" and "local" on its /free and /local
 * routes. extra is spliced into the config object (may be ""). */
static void
start(const char *script, const char *extra)
{
    const char *args[] = {"--script", "script.json", "--log", "mock.log", NULL};
    char cfg[2048];

    free(tmpdir_write(dir, "script.json", script, strlen(script)));
    mockproc_start(&mock, args);
    snprintf(cfg, sizeof(cfg),
             "{\"worker\": {\"lease_s\": 1},"
             " \"policy\": {\"backoff_base_s\": 0.05, \"backoff_cap_s\": 0.2},"
             " \"tiers\": ["
             "{\"name\": \"free\", \"base_url\": "
             "\"http://127.0.0.1:%d/free/v1\", \"model\": \"small\","
             " \"api_key_env\": \"FREE_KEY\", \"timeout_s\": 5},"
             "{\"name\": \"local\", \"base_url\": "
             "\"http://127.0.0.1:%d/local/v1\", \"model\": \"llama\","
             " \"timeout_s\": 5}]%s%s}",
             mock.port, mock.port, extra[0] ? ", " : "", extra);
    free(tmpdir_write(dir, "stepq.json", cfg, strlen(cfg)));
}

static void
enqueue(const char *job)
{
    struct run_result r;
    run_stepq((const char *[]){"enqueue", "-", NULL}, job, &r);
    ck_assert_msg(r.status == 0, "enqueue: %s", r.err);
    run_result_free(&r);
}

/* Runs `stepq work --drain` to the end; returns its stderr (caller frees). */
static char *
drain(void)
{
    struct run_result r;
    run_stepq((const char *[]){"work", "--drain", NULL}, NULL, &r);
    ck_assert_msg(r.status == 0, "work exited %d: %s", r.status, r.err);
    free(r.out);
    return r.err;
}

static cJSON *
show(int id)
{
    struct run_result r;
    char ids[16];
    cJSON *o;

    snprintf(ids, sizeof(ids), "%d", id);
    run_stepq((const char *[]){"jobs", "show", ids, "--json", NULL}, NULL, &r);
    ck_assert_int_eq(r.status, 0);
    o = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(o);
    run_result_free(&r);
    return o;
}

static const char *
str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *
step_of(const cJSON *job, int i)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItem(job, "steps"), i);
}

static const cJSON *
hist(const cJSON *job, int step, int attempt)
{
    return cJSON_GetArrayItem(
        cJSON_GetObjectItem(step_of(job, step), "history"), attempt);
}

/* The mock's request log, one parsed object per request, as an array. */
static cJSON *
mock_log(void)
{
    cJSON *arr = cJSON_CreateArray();
    char *text = NULL, *line, *save = NULL;
    size_t len = 0;

    if (file_read_all("mock.log", 64 << 20, &text, &len) != 0)
        return arr;
    for (line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(line);
        ck_assert_msg(o != NULL, "bad log line %s", line);
        cJSON_AddItemToArray(arr, o);
    }
    free(text);
    return arr;
}

/* Requests the mock saw whose path starts with prefix. */
static int
sent_to(const cJSON *log, const char *prefix)
{
    const cJSON *it;
    int n = 0;

    cJSON_ArrayForEach(it, log)
    {
        const char *p = str(it, "path");
        n += p != NULL && strncmp(p, prefix, strlen(prefix)) == 0;
    }
    return n;
}

/* The request body the mock logged for one request, parsed. */
static cJSON *
body_of(const cJSON *req)
{
    const cJSON *b = cJSON_GetObjectItem(req, "body");
    if (cJSON_IsString(b))
        return cJSON_Parse(b->valuestring);
    return cJSON_Duplicate(b, true);
}

static cJSON *
sent_body(const cJSON *log, int i)
{
    return body_of(cJSON_GetArrayItem(log, i));
}

#define CHAT_JOB(tiers, extra)                                                 \
    "{\"name\":\"j\",\"steps\":[{\"name\":\"a\"," tiers "\"request\":{"        \
    "\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}" extra "}]}"

/* ---- one test per decision ------------------------------------------ */

START_TEST(test_commit)
{
    cJSON *job, *log, *body;
    const cJSON *req;
    char *err;

    start("{}", "");
    enqueue(CHAT_JOB("", ",\"expect_json\":[\"summary\"]"));
    err = drain();
    job = show(1);
    ck_assert_str_eq(str(job, "state"), "succeeded");
    ck_assert_str_eq(str(step_of(job, 0), "tier"), "free");
    ck_assert_str_eq(str(hist(job, 0, 0), "decision"), "commit");
    ck_assert_ptr_nonnull(strstr(str(step_of(job, 0), "output"), "summary"));
    log = mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 1);
    req = cJSON_GetArrayItem(log, 0);
    ck_assert_str_eq(str(req, "auth_scheme"), "Bearer");
    body = sent_body(log, 0);
    ck_assert_str_eq(str(body, "model"), "small");
    /* The key went to the endpoint only: not to logs or the database. */
    ck_assert_ptr_null(strstr(err, "sk-test-secret"));
    ck_assert_ptr_nonnull(strstr(err, "\"decision\":\"commit\""));
    cJSON_Delete(body);
    cJSON_Delete(log);
    cJSON_Delete(job);
    free(err);
}
END_TEST

START_TEST(test_backoff_honours_retry_after)
{
    cJSON *job, *log;
    const cJSON *first, *second;

    start("{\"routes\":[{\"path\":\"/free\",\"answers\":[{\"status\":429,"
          "\"headers\":{\"Retry-After\":\"1\"},\"body\":\"rate limit: 20 "
          "rpm\"}]}]}",
          "");
    enqueue(CHAT_JOB("", ""));
    free(drain());
    job = show(1);
    ck_assert_str_eq(str(job, "state"), "succeeded");
    ck_assert_str_eq(str(hist(job, 0, 0), "outcome"), "soft_throttle");
    ck_assert_str_eq(str(hist(job, 0, 0), "decision"), "backoff_retry");
    ck_assert_int_ge(cJSON_GetObjectItem(hist(job, 0, 0), "delay_ms")->valueint,
                     1000);
    ck_assert_str_eq(str(hist(job, 0, 1), "decision"), "commit");
    log = mock_log();
    ck_assert_int_eq(sent_to(log, "/free"), 2);
    first = cJSON_GetArrayItem(log, 0);
    second = cJSON_GetArrayItem(log, 1);
    ck_assert_int_ge(cJSON_GetObjectItem(second, "ts_ms")->valuedouble -
                         cJSON_GetObjectItem(first, "ts_ms")->valuedouble,
                     1000);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_degrade_sends_lower_max_tokens_once)
{
    char big[6000], jobtext[8000];
    cJSON *job, *log, *b0, *b1;

    memset(big, 'x', 5200);
    big[5200] = '\0';
    start("{\"routes\":[{\"path\":\"/free\",\"answers\":[{\"finish_reason\":"
          "\"length\"}]}]}",
          "");
    snprintf(jobtext, sizeof(jobtext),
             "{\"name\":\"j\",\"steps\":[{\"name\":\"a\",\"token_budget\":"
             "2000,\"degrade\":{\"max_tokens\":300,\"keep_last_messages\":1},"
             "\"request\":{\"max_tokens\":800,\"messages\":[{\"role\":"
             "\"user\",\"content\":\"%s\"},{\"role\":\"user\",\"content\":"
             "\"now summarize\"}]}}]}",
             big);
    enqueue(jobtext);
    free(drain());
    job = show(1);
    ck_assert_str_eq(str(job, "state"), "succeeded");
    ck_assert_str_eq(str(hist(job, 0, 0), "outcome"), "truncated");
    ck_assert_str_eq(str(hist(job, 0, 0), "decision"), "degrade_then_retry");
    log = mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 2);
    b0 = sent_body(log, 0);
    b1 = sent_body(log, 1);
    ck_assert_int_eq(cJSON_GetObjectItem(b0, "max_tokens")->valueint, 800);
    ck_assert_int_eq(cJSON_GetObjectItem(b1, "max_tokens")->valueint, 300);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(b1, "messages")),
                     1);
    cJSON_Delete(b0);
    cJSON_Delete(b1);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_switch_tier_on_wall_and_avoid_it)
{
    struct run_result r;
    cJSON *job, *log, *tiers;

    start("{\"routes\":[{\"path\":\"/free\",\"answers\":[{\"status\":429,"
          "\"body\":\"daily quota exceeded\"}],\"loop\":true}]}",
          "");
    enqueue(CHAT_JOB("", ""));
    free(drain());
    job = show(1);
    ck_assert_str_eq(str(job, "state"), "succeeded");
    ck_assert_str_eq(str(hist(job, 0, 0), "tier"), "free");
    ck_assert_str_eq(str(hist(job, 0, 0), "outcome"), "hard_quota");
    ck_assert_str_eq(str(hist(job, 0, 0), "decision"), "switch_tier_replay");
    ck_assert_str_eq(str(hist(job, 0, 1), "tier"), "local");
    ck_assert_str_eq(str(step_of(job, 0), "tier"), "local");
    cJSON_Delete(job);
    /* The wall is remembered: the next job goes straight to local. */
    enqueue(CHAT_JOB("", ""));
    free(drain());
    log = mock_log();
    ck_assert_int_eq(sent_to(log, "/free"), 1);
    ck_assert_int_eq(sent_to(log, "/local"), 2);
    cJSON_Delete(log);
    run_stepq((const char *[]){"tiers", "--json", NULL}, NULL, &r);
    tiers = cJSON_Parse(r.out);
    ck_assert_str_eq(str(cJSON_GetArrayItem(tiers, 0), "exhausted_reason"),
                     "daily_cap");
    cJSON_Delete(tiers);
    run_result_free(&r);
}
END_TEST

#define POST_JOB(idem)                                                         \
    "{\"name\":\"p\",\"steps\":[{\"name\":\"post\",\"kind\":\"http\"," idem    \
    "\"http\":{\"method\":\"POST\",\"url\":\"http://127.0.0.1:%d/comments\","  \
    "\"body\":{\"text\":\"hi\"}}}]}"

START_TEST(test_park_side_effect_on_wall)
{
    char jobtext[512];
    struct run_result r;
    cJSON *job, *log, *st;

    start("{\"routes\":[{\"path\":\"/comments\",\"answers\":[{\"status\":"
          "429,\"body\":\"daily quota exceeded\"}]}]}",
          "");
    snprintf(jobtext, sizeof(jobtext), POST_JOB(""), mock.port);
    enqueue(jobtext);
    free(drain());
    job = show(1);
    ck_assert_str_eq(str(job, "state"), "parked");
    ck_assert_str_eq(str(step_of(job, 0), "state"), "parked");
    ck_assert_str_eq(str(hist(job, 0, 0), "decision"), "park_for_human");
    log = mock_log();
    ck_assert_int_eq(sent_to(log, "/comments"), 1);
    run_stepq((const char *[]){"status", "--json", NULL}, NULL, &r);
    st = cJSON_Parse(r.out);
    ck_assert_int_eq(cJSON_GetObjectItem(st, "park_open")->valueint, 1);
    cJSON_Delete(st);
    run_result_free(&r);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_fail_loud_keeps_body)
{
    cJSON *job;

    start("{\"routes\":[{\"path\":\"/free\",\"answers\":[{\"status\":400,"
          "\"body\":{\"error\":{\"message\":\"unknown parameter frob\"}}}],"
          "\"loop\":true}]}",
          "");
    enqueue(CHAT_JOB("\"tiers\":[\"free\"],", ""));
    free(drain());
    job = show(1);
    ck_assert_str_eq(str(job, "state"), "failed");
    ck_assert_ptr_nonnull(strstr(str(job, "error"), "HTTP 400"));
    ck_assert_ptr_nonnull(strstr(str(job, "error"), "unknown parameter frob"));
    ck_assert_str_eq(str(hist(job, 0, 0), "decision"), "fail_loud");
    ck_assert_ptr_nonnull(strstr(str(hist(job, 0, 0), "body"), "frob"));
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_templating_and_idempotency_key)
{
    char jobtext[1024];
    cJSON *job, *log, *b1, *b2;
    const char *out0;

    start("{}", "");
    snprintf(jobtext, sizeof(jobtext),
             "{\"name\":\"n\",\"steps\":["
             "{\"name\":\"a\",\"request\":{\"messages\":[{\"role\":\"user\","
             "\"content\":\"first\"}]}},"
             "{\"name\":\"b\",\"request\":{\"messages\":[{\"role\":\"user\","
             "\"content\":\"from {{steps.a.output}}\"}]}},"
             "{\"name\":\"post\",\"kind\":\"http\",\"idempotency_key\":"
             "\"k-1\",\"http\":{\"url\":\"http://127.0.0.1:%d/comments\","
             "\"body\":{\"text\":\"{{steps.b.output}}\"}}}]}",
             mock.port);
    enqueue(jobtext);
    free(drain());
    job = show(1);
    ck_assert_str_eq(str(job, "state"), "succeeded");
    out0 = str(step_of(job, 0), "output");
    log = mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 3);
    b1 = sent_body(log, 1);
    ck_assert_ptr_nonnull(
        strstr(str(cJSON_GetArrayItem(cJSON_GetObjectItem(b1, "messages"), 0),
                   "content"),
               out0));
    b2 = sent_body(log, 2);
    ck_assert_str_eq(str(b2, "text"), str(step_of(job, 1), "output"));
    ck_assert_str_eq(str(cJSON_GetArrayItem(log, 2), "idempotency_key"), "k-1");
    cJSON_Delete(b1);
    cJSON_Delete(b2);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

/* ---- crashes, stop, concurrency ------------------------------------- */

/* Starts `stepq work` in the background with stderr to work.log. */
static pid_t
spawn_worker(const char *extra)
{
    pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open("work.log", O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(fd, 2);
        execl(stepq_bin(), stepq_bin(), "work", "--concurrency", "200", extra,
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Waits (with a deadline) until the mock has logged n requests. */
static void
wait_for_requests(int n, int64_t timeout_ms)
{
    int64_t end = clock_mono_ms() + timeout_ms;

    for (;;) {
        cJSON *log = mock_log();
        int got = cJSON_GetArraySize(log);
        cJSON_Delete(log);
        if (got >= n)
            return;
        ck_assert_msg(clock_mono_ms() < end, "mock saw %d of %d requests", got,
                      n);
        poll(NULL, 0, 20);
    }
}

static int
wait_exit(pid_t pid)
{
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

START_TEST(test_kill_during_side_effect_parks_in_doubt)
{
    char jobtext[512];
    cJSON *job, *log;
    pid_t w;

    start("{\"routes\":[{\"path\":\"/comments\",\"latency_ms\":3000}]}", "");
    snprintf(jobtext, sizeof(jobtext), POST_JOB(""), mock.port);
    enqueue(jobtext);
    w = spawn_worker("--drain");
    wait_for_requests(1, 10000);
    kill(w, SIGKILL);
    ck_assert_int_eq(wait_exit(w), 128 + SIGKILL);
    free(drain()); /* waits for the dead lease, then takes over */
    job = show(1);
    ck_assert_str_eq(str(job, "state"), "parked");
    ck_assert_str_eq(str(hist(job, 0, 0), "reason"), "in_doubt");
    ck_assert_str_eq(str(hist(job, 0, 0), "decision"), "park_for_human");
    log = mock_log();
    ck_assert_int_eq(sent_to(log, "/comments"), 1);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_kill_during_replayable_step_retries)
{
    cJSON *job;
    pid_t w;

    start("{\"routes\":[{\"path\":\"/free\",\"answers\":[{\"delay_ms\":"
          "3000}]}]}",
          "");
    enqueue(CHAT_JOB("\"tiers\":[\"free\"],", ""));
    w = spawn_worker("--drain");
    wait_for_requests(1, 10000);
    kill(w, SIGKILL);
    ck_assert_int_eq(wait_exit(w), 128 + SIGKILL);
    free(drain());
    job = show(1);
    ck_assert_str_eq(str(job, "state"), "succeeded");
    ck_assert_str_eq(str(hist(job, 0, 0), "reason"), "in_doubt");
    ck_assert_str_eq(str(hist(job, 0, 0), "decision"), "backoff_retry");
    ck_assert_str_eq(str(hist(job, 0, 1), "decision"), "commit");
    ck_assert_int_eq(cJSON_GetObjectItem(step_of(job, 0), "attempts")->valueint,
                     2);
    cJSON_Delete(job);
}
END_TEST

static void
enqueue_many(int n, const char *tiers)
{
    size_t cap = (size_t)n * 200 + 16, len = 0;
    char *text = xmalloc(cap);

    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len,
                                "{\"name\":\"j%d\",\"steps\":[{\"name\":\"a\","
                                "%s\"request\":{\"messages\":[{\"role\":"
                                "\"user\",\"content\":\"n%d\"}]}}]}\n",
                                i, tiers, i);
    enqueue(text);
    free(text);
}

static cJSON *
status(void)
{
    struct run_result r;
    cJSON *o;

    run_stepq((const char *[]){"status", "--json", NULL}, NULL, &r);
    o = cJSON_Parse(r.out);
    run_result_free(&r);
    return cJSON_GetObjectItem(o, "jobs") ? o : NULL;
}

static int
count(const cJSON *st, const char *state)
{
    return cJSON_GetObjectItem(cJSON_GetObjectItem(st, "jobs"), state)
        ->valueint;
}

START_TEST(test_sigterm_with_100_in_flight)
{
    cJSON *st;
    pid_t w;

    start("{\"routes\":[{\"path\":\"/free\",\"latency_ms\":1500}]}", "");
    enqueue_many(100, "\"tiers\":[\"free\"],");
    w = spawn_worker("--grace=30");
    wait_for_requests(100, 20000);
    kill(w, SIGTERM);
    ck_assert_int_eq(wait_exit(w), 0);
    st = status();
    ck_assert_int_eq(count(st, "running"), 0);
    ck_assert_int_eq(count(st, "succeeded"), 100); /* all finished in grace */
    cJSON_Delete(st);
}
END_TEST

START_TEST(test_two_workers_send_each_step_once)
{
    cJSON *st, *log;
    const cJSON *it;
    pid_t w1, w2;
    static unsigned char seen[1000];

    start("{}", "");
    enqueue_many(1000, "");
    w1 = spawn_worker("--drain");
    w2 = spawn_worker("--drain");
    ck_assert_int_eq(wait_exit(w1), 0);
    ck_assert_int_eq(wait_exit(w2), 0);
    st = status();
    ck_assert_int_eq(count(st, "succeeded"), 1000);
    cJSON_Delete(st);
    log = mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 1000);
    cJSON_ArrayForEach(it, log)
    {
        cJSON *b = body_of(it);
        const char *c =
            str(cJSON_GetArrayItem(cJSON_GetObjectItem(b, "messages"), 0),
                "content");
        int i = atoi(c + 1);
        ck_assert_msg(seen[i] == 0, "job j%d sent twice", i);
        seen[i] = 1;
        cJSON_Delete(b);
    }
    cJSON_Delete(log);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("worker");
    TCase *dec = tcase_create("decisions");
    TCase *crash = tcase_create("crash");

    tcase_add_checked_fixture(dec, setup, teardown);
    tcase_set_timeout(dec, 60);
    tcase_add_test(dec, test_commit);
    tcase_add_test(dec, test_backoff_honours_retry_after);
    tcase_add_test(dec, test_degrade_sends_lower_max_tokens_once);
    tcase_add_test(dec, test_switch_tier_on_wall_and_avoid_it);
    tcase_add_test(dec, test_park_side_effect_on_wall);
    tcase_add_test(dec, test_fail_loud_keeps_body);
    tcase_add_test(dec, test_templating_and_idempotency_key);
    suite_add_tcase(s, dec);

    tcase_add_checked_fixture(crash, setup, teardown);
    tcase_set_timeout(crash, 120);
    tcase_add_test(crash, test_kill_during_side_effect_parks_in_doubt);
    tcase_add_test(crash, test_kill_during_replayable_step_retries);
    tcase_add_test(crash, test_sigterm_with_100_in_flight);
    tcase_add_test(crash, test_two_workers_send_each_step_once);
    suite_add_tcase(s, crash);
    return s;
}

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
#include "queue/queue.h"
#include "tests/support/e2e.h"

/* Checks member k of tier free (the first) in `tiers --json`. */
static void
expect_free_tier(const char *k, const char *want)
{
    cJSON *tiers = e2e_tiers();

    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(tiers, 0), k), want);
    cJSON_Delete(tiers);
}

/* Checks in_flight of tier free in `tiers --json`. */
static void
expect_free_in_flight(int want)
{
    cJSON *tiers = e2e_tiers();
    const cJSON *n =
        cJSON_GetObjectItem(cJSON_GetArrayItem(tiers, 0), "in_flight");

    ck_assert_int_eq(cJSON_GetNumberValue(n), want);
    cJSON_Delete(tiers);
}

/* free_breaker_openings reads tier free's breaker_openings from
 * `stepq report --json` (the last day); -1 when free is not listed. */
static int
free_breaker_openings(void)
{
    struct run_result r;
    const cJSON *t;
    cJSON *rep;
    int n = -1;

    ck_assert_msg(RUN(&r, NULL, "report", "--json") == 0, "%s", r.err);
    ck_assert_ptr_nonnull(rep = cJSON_Parse(r.out));
    run_result_free(&r);
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(rep, "tiers"))
    {
        const char *name = e2e_str(t, "tier");
        const cJSON *v = cJSON_GetObjectItem(t, "breaker_openings");
        if (name != NULL && strcmp(name, "free") == 0 && cJSON_IsNumber(v))
            n = v->valueint;
    }
    cJSON_Delete(rep);
    return n;
}

/* The tokens the answer to the only attempt of job reported. */
static int64_t
reported_tokens(int64_t job)
{
    q_db *db = NULL;
    struct q_attempt *a = NULL;
    size_t n = 0;
    int64_t t;

    ck_assert_int_eq(q_open_existing(e2e_db, NULL, &db), 0);
    ck_assert_int_eq(q_attempts_list(db, job, -1, &a, &n), 0);
    ck_assert_uint_eq(n, 1);
    t = a[0].tokens;
    q_attempts_free(a, n);
    ck_assert_int_eq(q_close(db), 0);
    return t;
}

/* ---- one test per decision ------------------------------------------ */

START_TEST(test_commit)
{
    cJSON *job, *log, *body;
    const cJSON *req;
    char *err;

    e2e_start("{}", "");
    e2e_enqueue(E2E_CHAT_JOB("", ",\"expect_json\":[\"summary\"]"));
    err = e2e_drain();
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "tier"), "free");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "decision"), "commit");
    ck_assert_ptr_nonnull(
        strstr(e2e_str(e2e_step_of(job, 0), "output"), "summary"));
    /* Counted as reported, not as estimated before the send. */
    ck_assert_int_gt(reported_tokens(1), 0);
    ck_assert_int_eq(
        cJSON_GetObjectItem(e2e_step_of(job, 0), "tokens")->valueint,
        reported_tokens(1));
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 1);
    req = cJSON_GetArrayItem(log, 0);
    ck_assert_str_eq(e2e_str(req, "auth_scheme"), "Bearer");
    body = e2e_sent_body(log, 0);
    ck_assert_str_eq(e2e_str(body, "model"), "small");
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
    double at[2];

    job = e2e_run_job("free-429-retry-after-1s.json", E2E_CHAT_JOB("", ""));
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    e2e_expect_attempt(job, 0, "soft_throttle", NULL, "backoff_retry");
    ck_assert_int_ge(
        cJSON_GetObjectItem(e2e_hist(job, 0, 0), "delay_ms")->valueint, 1000);
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 1), "decision"), "commit");
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/free"), 2);
    ck_assert_int_ge(e2e_arrivals(log, "", at, 2, NULL), 2);
    ck_assert_int_ge(at[1] - at[0], 1000);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

/* A job cancelled while its step waits to retry sends nothing more: the
 * worker learns it when it records the next attempt (at once, or at the
 * commit of a store that defers the record), long before a heartbeat
 * (leases of 30 s), and drops the job. */
START_TEST(test_cancel_while_waiting_sends_no_more)
{
    struct run_result r;
    cJSON *job, *log;
    pid_t w;

    e2e_start_file("free-429-retry-after-1s.json", "");
    e2e_config(30, "\"api_key_env\": \"FREE_KEY\"");
    e2e_enqueue(E2E_CHAT_JOB("\"tiers\":[\"free\"],", ""));
    w = e2e_spawn_workerv((const char *[]){"--drain", NULL});
    e2e_wait_for_requests(1, 10000); /* the 429: it waits 1 s to retry */
    ck_assert_msg(RUN(&r, NULL, "jobs", "cancel", "1") == 0, "cancel: %s",
                  r.err);
    run_result_free(&r);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 1);
    cJSON_Delete(log);
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "cancelled");
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_degrade_sends_lower_max_tokens_once)
{
    char big[6000], jobtext[8000];
    cJSON *job, *log, *b0, *b1;

    memset(big, 'x', 5200);
    big[5200] = '\0';
    e2e_start_file("free-truncated-once.json", "");
    snprintf(jobtext, sizeof(jobtext),
             "{\"name\":\"j\",\"steps\":[{\"name\":\"a\",\"token_budget\":"
             "2000,\"degrade\":{\"max_tokens\":300,\"keep_last_messages\":1},"
             "\"request\":{\"max_tokens\":800,\"messages\":[{\"role\":"
             "\"user\",\"content\":\"%s\"},{\"role\":\"user\",\"content\":"
             "\"now summarize\"}]}}]}",
             big);
    e2e_enqueue(jobtext);
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    e2e_expect_attempt(job, 0, "truncated", NULL, "degrade_then_retry");
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 2);
    b0 = e2e_sent_body(log, 0);
    b1 = e2e_sent_body(log, 1);
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
    cJSON *job;

    job = e2e_run_job("free-daily-wall.json", E2E_CHAT_JOB("", ""));
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "tier"), "free");
    e2e_expect_attempt(job, 0, "hard_quota", NULL, "switch_tier_replay");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 1), "tier"), "local");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "tier"), "local");
    cJSON_Delete(job);
    /* The wall is remembered: the next job goes straight to local. */
    e2e_enqueue(E2E_CHAT_JOB("", ""));
    free(e2e_drain());
    ck_assert_int_eq(e2e_sent_to(NULL, "/free"), 1);
    ck_assert_int_eq(e2e_sent_to(NULL, "/local"), 2);
    expect_free_tier("exhausted_reason", "daily_cap");
}
END_TEST

#define POST_JOB(idem)                                                         \
    "{\"name\":\"p\",\"steps\":[{\"name\":\"post\",\"kind\":\"http\"," idem    \
    "\"http\":{\"method\":\"POST\",\"url\":\"http://127.0.0.1:%d/comments\","  \
    "\"body\":{\"text\":\"hi\"}}}]}"

START_TEST(test_park_side_effect_on_wall)
{
    char jobtext[512];
    cJSON *job, *log, *st;

    e2e_start_file("comments-daily-wall-once.json", "");
    snprintf(jobtext, sizeof(jobtext), POST_JOB(""), e2e_mock.port);
    e2e_enqueue(jobtext);
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "parked");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "state"), "parked");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "decision"),
                     "park_for_human");
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/comments"), 1);
    st = e2e_status();
    ck_assert_int_eq(cJSON_GetObjectItem(st, "park_open")->valueint, 1);
    cJSON_Delete(st);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_fail_loud_keeps_body)
{
    cJSON *job;

    job = e2e_run_job("free-400-unknown-parameter.json",
                      E2E_CHAT_JOB("\"tiers\":[\"free\"],", ""));
    ck_assert_str_eq(e2e_str(job, "state"), "failed");
    ck_assert_ptr_nonnull(strstr(e2e_str(job, "error"), "HTTP 400"));
    ck_assert_ptr_nonnull(
        strstr(e2e_str(job, "error"), "unknown parameter frob"));
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "decision"), "fail_loud");
    ck_assert_ptr_nonnull(strstr(e2e_str(e2e_hist(job, 0, 0), "body"), "frob"));
    cJSON_Delete(job);
}
END_TEST

/* A chat step's idempotency_key goes out as Idempotency-Key on every
 * attempt: decide replays such a step with side effects instead of
 * parking it, so the endpoint must be able to dedupe the replay. */
START_TEST(test_chat_step_sends_its_idempotency_key)
{
    cJSON *job, *log;

    e2e_start("{\"answers\":[{\"status\":500}]}", "");
    e2e_enqueue("{\"name\":\"n\",\"steps\":[{\"name\":\"a\",\"side_effects\":"
                "true,\"idempotency_key\":\"ck-1\",\"request\":{\"messages\":"
                "[{\"role\":\"user\",\"content\":\"hi\"}]}}]}");
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "decision"), "backoff_retry");
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 2);
    for (int i = 0; i < 2; i++)
        ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(log, i), "idempotency_key"),
                         "ck-1");
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_templating_and_idempotency_key)
{
    char jobtext[1024];
    cJSON *job, *log, *b1, *b2;
    const char *out0;

    e2e_start("{}", "");
    snprintf(jobtext, sizeof(jobtext),
             "{\"name\":\"n\",\"steps\":["
             "{\"name\":\"a\",\"request\":{\"messages\":[{\"role\":\"user\","
             "\"content\":\"first\"}]}},"
             "{\"name\":\"b\",\"request\":{\"messages\":[{\"role\":\"user\","
             "\"content\":\"from {{steps.a.output}}\"}]}},"
             "{\"name\":\"post\",\"kind\":\"http\",\"idempotency_key\":"
             "\"k-1\",\"http\":{\"url\":\"http://127.0.0.1:%d/comments\","
             "\"body\":{\"text\":\"{{steps.b.output}}\"}}}]}",
             e2e_mock.port);
    e2e_enqueue(jobtext);
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    out0 = e2e_str(e2e_step_of(job, 0), "output");
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 3);
    b1 = e2e_sent_body(log, 1);
    ck_assert_ptr_nonnull(strstr(
        e2e_str(cJSON_GetArrayItem(cJSON_GetObjectItem(b1, "messages"), 0),
                "content"),
        out0));
    b2 = e2e_sent_body(log, 2);
    ck_assert_str_eq(e2e_str(b2, "text"),
                     e2e_str(e2e_step_of(job, 1), "output"));
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(log, 2), "idempotency_key"),
                     "k-1");
    cJSON_Delete(b1);
    cJSON_Delete(b2);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

/* ---- crashes, stop, concurrency ------------------------------------- */

START_TEST(test_kill_during_side_effect_parks_in_doubt)
{
    char jobtext[512];
    cJSON *job;

    e2e_start_file("comments-slow-3s.json", "");
    snprintf(jobtext, sizeof(jobtext), POST_JOB(""), e2e_mock.port);
    e2e_enqueue(jobtext);
    e2e_kill_mid_request_then_drain();
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "parked");
    e2e_expect_attempt(job, 0, NULL, "in_doubt", "park_for_human");
    ck_assert_int_eq(e2e_sent_to(NULL, "/comments"), 1);
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_kill_during_replayable_step_retries)
{
    cJSON *job;

    e2e_start_file("free-delay-3s-once.json", "");
    e2e_enqueue(E2E_CHAT_JOB("\"tiers\":[\"free\"],", ""));
    e2e_kill_mid_request_then_drain();
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "reason"), "in_doubt");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "decision"), "backoff_retry");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 1), "decision"), "commit");
    ck_assert_int_eq(
        cJSON_GetObjectItem(e2e_step_of(job, 0), "attempts")->valueint, 2);
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_sigterm_with_100_in_flight)
{
    cJSON *st;
    pid_t w;

    e2e_start_file("free-latency-1500ms.json", "");
    e2e_enqueue_many(100, "\"tiers\":[\"free\"],");
    w = e2e_spawn_worker("--grace=30");
    e2e_wait_for_requests(100, 20000);
    kill(w, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    st = e2e_status();
    ck_assert_int_eq(e2e_count(st, "running"), 0);
    ck_assert_int_eq(e2e_count(st, "succeeded"),
                     100); /* all finished in grace */
    cJSON_Delete(st);
}
END_TEST

/* A request cut short by a worker's stop (its --grace ran out) is
 * recorded as such and retried by the next worker without counting
 * against max_attempts: a step with one attempt still succeeds. A step
 * with side effects and no idempotency key is not sent again: its
 * attempt stays open and the next worker parks it in doubt. */
static const char *const stopped_steps[] = {"", "\"side_effects\":true,"};

START_TEST(test_stop_mid_request_costs_no_attempt)
{
    char text[512];
    cJSON *job;
    pid_t w;

    e2e_start("{\"answers\":[{\"fault\":\"hang\"}]}", "");
    snprintf(text, sizeof(text),
             "{\"name\":\"n\",\"steps\":[{\"name\":\"a\",%s\"max_attempts\":"
             "1,\"tiers\":[\"free\"],\"request\":{\"messages\":[{\"role\":"
             "\"user\",\"content\":\"x\"}]}}]}",
             stopped_steps[_i]);
    e2e_enqueue(text);
    w = e2e_spawn_worker("--grace=1");
    e2e_wait_for_requests(1, 20000);
    kill(w, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    /* An attempt left open leaves its send on the tier for the next
     * holder to take off when it settles the attempt, once. */
    expect_free_in_flight(_i == 0 ? 0 : 1);
    free(e2e_drain());
    expect_free_in_flight(0);
    job = e2e_show(1);
    if (_i == 0) {
        ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
        e2e_expect_attempt(job, 0, "unknown", "worker_stopped",
                           "backoff_retry");
        e2e_expect_attempt(job, 1, "ok", NULL, "commit");
    } else {
        ck_assert_str_eq(e2e_str(job, "state"), "parked");
        e2e_expect_attempt(job, 0, "unknown", "in_doubt", "park_for_human");
        ck_assert_int_eq(e2e_sent_to(NULL, "/free"), 1);
    }
    cJSON_Delete(job);
}
END_TEST

/* Two workers on one database send every step once. Their leases are
 * long enough for a slow build: with leases of 1 s, a worker kept waiting
 * for the other's write lock under ASan lost its leases, and the other
 * rightly sent those replayable steps again. */
START_TEST(test_two_workers_send_each_step_once)
{
    e2e_start("{}", "");
    e2e_config(30, "");
    e2e_enqueue_many(1000, "");
    e2e_drain_two();
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 1000);
    e2e_expect_each_sent_once(1000);
}
END_TEST

START_TEST(test_breaker_end_to_end)
{
    struct run_result r;
    char job3[512], at[32];
    cJSON *log;

    e2e_start_file("free-storm-503-two-requests.json", "");
    e2e_config(
        1,
        "\"timeout_s\": 5, \"breaker\": {\"failures\": 2, \"cooldown_s\": 1}");
    e2e_enqueue(E2E_CHAT_JOB("", ""));
    e2e_enqueue(E2E_CHAT_JOB("", ""));
    /* Job 3 is due well after the breaker's 1 s cooldown has run out:
     * at +2.5 s, a worker slow to start under load 10 opened the breaker
     * late enough that job 3 met it still open (test_worker_pg, once). */
    clock_format_utc(clock_now_ms() + 4000, at, sizeof(at));
    snprintf(job3, sizeof(job3),
             "{\"name\":\"later\",\"run_at\":\"%s\",\"steps\":[{\"name\":"
             "\"a\",\"request\":{\"messages\":[{\"role\":\"user\","
             "\"content\":\"x\"}]}}]}",
             at);
    e2e_enqueue(job3);
    ck_assert_msg(RUN(&r, NULL, "work", "--drain", "--concurrency", "1") == 0,
                  "%s", r.err);
    run_result_free(&r);
    log = e2e_mock_log();
    /* two storm answers open the breaker; job 2 went straight to local
     * while it was open; job 3, after the cooldown, was the probe */
    ck_assert_int_eq(e2e_sent_to(log, "/free"), 3);
    ck_assert_int_eq(e2e_sent_to(log, "/local"), 2);
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(log, 3), "path"),
                     "/local/v1/chat/completions");
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(log, 4), "path"),
                     "/free/v1/chat/completions");
    cJSON_Delete(log);
    expect_free_tier("breaker", "closed");
    ck_assert_int_ge(free_breaker_openings(), 1); /* the report counts it */
}
END_TEST

/* Past its cooldown an open breaker shows as half_open (its probe may go
 * out), not open with no time to wait for. */
START_TEST(test_breaker_past_cooldown_shows_half_open)
{
    int64_t end = clock_mono_ms() + 5000;
    const char *b = NULL;
    cJSON *tiers = NULL;

    e2e_start_file("free-storm-503-two-requests.json", "");
    e2e_config(
        1,
        "\"timeout_s\": 5, \"breaker\": {\"failures\": 2, \"cooldown_s\": 1}");
    e2e_enqueue(E2E_CHAT_JOB("", ""));
    free(e2e_drain());
    do {
        cJSON_Delete(tiers);
        poll(NULL, 0, 50);
        tiers = e2e_tiers();
        b = e2e_str(cJSON_GetArrayItem(tiers, 0), "breaker");
    } while (strcmp(b, "open") == 0 && clock_mono_ms() < end);
    ck_assert_str_eq(b, "half_open");
    ck_assert(cJSON_IsNull(
        cJSON_GetObjectItem(cJSON_GetArrayItem(tiers, 0), "open_until")));
    cJSON_Delete(tiers);
}
END_TEST

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One request bucket shared by two workers, seen from the endpoint: rpm
 * 60 per window_s 1 (60 a second, a minute scaled down) with a burst of
 * 5. In any stretch of the mock's log, at most 5 + 60/s of it arrived;
 * arrival differs from admission by the commit and the loopback, which a
 * loaded machine (the sanitizer build beside other builds) stretches past
 * 100 ms, so 150 ms of slack are allowed on each stretch: a bucket each
 * worker kept for itself would still let twice the rate through. */
START_TEST(test_bucket_shared_by_two_workers)
{
    double ts[120];
    cJSON *log;

    e2e_start("{}", "");
    e2e_config(1,
               "\"timeout_s\": 5, \"rpm\": 60, \"window_s\": 1, \"burst\": 5");
    e2e_enqueue_many(120, "\"tiers\":[\"free\"],");
    e2e_drain_two();
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 120);
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_arrivals(log, "", ts, 120, NULL), 120);
    qsort(ts, 120, sizeof(ts[0]), cmp_double);
    for (int i = 0; i < 120; i++) {
        for (int k = i; k < 120; k++) {
            double allowed = 5 + (ts[k] - ts[i] + 150) * 60 / 1000;
            ck_assert_msg(k - i + 1 <= allowed, "%d requests in %.0f ms",
                          k - i + 1, ts[k] - ts[i]);
        }
    }
    /* and the pace was used: 120 at 60/s take about two seconds (five
     * allowed for a loaded machine) */
    ck_assert_double_lt(ts[119] - ts[0], 5000);
    cJSON_Delete(log);
}
END_TEST

/* A daily cap that comes with a short retry delay (Gemini's PerDay quota
 * with "retryDelay": "48s") is a wall until the allowance window ends, not
 * for 48 s: the worker must not send into it again all night. */
START_TEST(test_daily_cap_short_delay_is_a_wall)
{
    cJSON *job, *tiers;
    char until[32];

    job = e2e_run_job("free-gemini-daily-cap.json",
                      "{\"name\":\"g\",\"deadline_s\":600,\"steps\":[{\"name\":"
                      "\"a\",\"tiers\":[\"free\"],\"request\":{\"messages\":[{"
                      "\"role\":\"user\",\"content\":\"x\"}]}}]}");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "reason"), "daily_cap");
    ck_assert_str_eq(e2e_str(job, "state"), "failed");
    cJSON_Delete(job);
    ck_assert_int_eq(e2e_sent_to(NULL, "/free"), 1);
    tiers = e2e_tiers();
    clock_format_utc(clock_now_ms() + 50 * 60 * 1000, until, sizeof(until));
    /* RFC 3339 UTC strings of one format compare as times */
    ck_assert_str_gt(e2e_str(cJSON_GetArrayItem(tiers, 0), "exhausted_until"),
                     until);
    cJSON_Delete(tiers);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("worker");
    TCase *dec = tcase_create("decisions");
    TCase *crash = tcase_create("crash");

    tcase_add_checked_fixture(dec, e2e_setup, e2e_teardown);
    tcase_set_timeout(dec, 60);
    tcase_add_test(dec, test_commit);
    tcase_add_test(dec, test_backoff_honours_retry_after);
    tcase_add_test(dec, test_cancel_while_waiting_sends_no_more);
    tcase_add_test(dec, test_degrade_sends_lower_max_tokens_once);
    tcase_add_test(dec, test_switch_tier_on_wall_and_avoid_it);
    tcase_add_test(dec, test_park_side_effect_on_wall);
    tcase_add_test(dec, test_fail_loud_keeps_body);
    tcase_add_test(dec, test_templating_and_idempotency_key);
    tcase_add_test(dec, test_chat_step_sends_its_idempotency_key);
    tcase_add_test(dec, test_breaker_past_cooldown_shows_half_open);
    tcase_add_test(dec, test_daily_cap_short_delay_is_a_wall);
    suite_add_tcase(s, dec);

    tcase_add_checked_fixture(crash, e2e_setup, e2e_teardown);
    tcase_set_timeout(crash, 120);
    tcase_add_test(crash, test_kill_during_side_effect_parks_in_doubt);
    tcase_add_test(crash, test_kill_during_replayable_step_retries);
    tcase_add_test(crash, test_sigterm_with_100_in_flight);
    tcase_add_loop_test(crash, test_stop_mid_request_costs_no_attempt, 0,
                        STEPQ_ARRAY_LEN(stopped_steps));
    tcase_add_test(crash, test_two_workers_send_each_step_once);
    tcase_add_test(crash, test_breaker_end_to_end);
    tcase_add_test(crash, test_bucket_shared_by_two_workers);
    suite_add_tcase(s, crash);
    return s;
}

/* test_stream.c: a tier's "stream" end to end, through the real worker
 * and the real `stepq mock` over loopback, for each protocol: the answer
 * asked for as events and assembled into the one it stands for (output,
 * usage and cost as unstreamed), the providers' documented streams
 * (the .sse files of tests/data/native/) played as scripted bodies, an error
 * event mid-stream classified as the error, a stall caught by idle_timeout_s or
 * first_byte_timeout_s in about a second (not timeout_s), and a stream cut
 * mid-way read as a reset with its partial text in the ledger, decided as
 * a plain answer cut alike.
 */
#define _GNU_SOURCE /* asprintf */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "common/price.h"
#include "tests/support/e2e.h"

#define TEXT "The quick brown fox jumps over the lazy dog"
#define JOB_ON(tier)                                                           \
    "{\"name\":\"j\",\"steps\":[{\"name\":\"a\",\"tiers\":[\"" tier            \
    "\"],\"request\":{\"messages\":[{\"role\":\"user\",\"content\":"           \
    "\"hello\"}]}}]}"
/* $1, $2, $0.50 and $1.25 per million tokens. */
#define PRICE                                                                  \
    ", \"price\": {\"input_per_mtok\": 1, \"output_per_mtok\": 2,"             \
    " \"cached_input_per_mtok\": 0.5, \"cache_write_per_mtok\": 1.25}"

static const char *const apis[] = {"openai", "anthropic", "gemini"};

/* Starts the mock with route /free of api (answers: a JSON array, or "")
 * and /local (OpenAI, local_answers likewise), tier free with fields,
 * streamed when stream. */
static void
start_tier(const char *api, const char *answers, const char *local_answers,
           const char *fields, bool stream)
{
    char *script = NULL, *cfg = NULL;

    ck_assert_int_gt(
        asprintf(&script,
                 "{\"routes\": [{\"path\": \"/free\", \"api\": \"%s\","
                 " \"content\": \"" TEXT "\"%s%s},"
                 " {\"path\": \"/local\", \"content\": \"" TEXT "\"%s%s}]}",
                 api, answers[0] ? ", \"answers\": " : "", answers,
                 local_answers[0] ? ", \"answers\": " : "", local_answers),
        0);
    ck_assert_int_gt(asprintf(&cfg,
                              "\"api\": \"%s\", \"stream\": %s, "
                              "\"timeout_s\": 20%s",
                              api, stream ? "true" : "false", fields),
                     0);
    e2e_start(script, "");
    e2e_config(1, cfg);
    free(cfg);
    free(script);
}

/* start_tier with tier free streamed. */
static void
start(const char *api, const char *answers, const char *local_answers,
      const char *fields)
{
    start_tier(api, answers, local_answers, fields, true);
}

static cJSON *
run_one(void)
{
    e2e_enqueue(JOB_ON("free"));
    free(e2e_drain());
    return e2e_show(1);
}

static int64_t
int_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);

    ck_assert_msg(cJSON_IsNumber(v), "%s is not a number", k);
    return (int64_t)v->valuedouble;
}

/* The mock's events, asked for in each protocol's way, assembled: the
 * output is the text, the usage the final events'. */
START_TEST(test_stream_assembled)
{
    cJSON *job, *log, *b;
    const char *path;

    start(apis[_i], "", "", "");
    job = run_one();
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "output"), TEXT);
    /* Request bytes / 4 in, the text's (43 + 3) / 4 = 11 out. */
    ck_assert_int_gt(int_of(e2e_hist(job, 0, 0), "tokens"), 11);
    log = e2e_mock_log();
    path = e2e_str(cJSON_GetArrayItem(log, 0), "path");
    b = e2e_sent_body(log, 0);
    if (_i == 2) {
        ck_assert_str_eq(path, "/free/v1/models/small:streamGenerateContent");
    } else {
        ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(b, "stream")));
        ck_assert(_i != 0 || cJSON_IsTrue(cJSON_GetObjectItem(
                                 cJSON_GetObjectItem(b, "stream_options"),
                                 "include_usage")));
    }
    cJSON_Delete(b);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

/* A step's "stream" on a tier that does not stream: that step's request
 * asks for events and its answer is assembled; another step on the same
 * tier is sent plain. */
START_TEST(test_step_stream_on_plain_tier)
{
    cJSON *job, *log, *b;

    start_tier(apis[_i], "", "", "", false);
    e2e_enqueue("{\"name\":\"j\",\"steps\":[{\"name\":\"a\",\"stream\":"
                "true,\"tiers\":[\"free\"],\"request\":{\"messages\":[{"
                "\"role\":\"user\",\"content\":\"hello\"}]}},{\"name\":"
                "\"b\",\"tiers\":[\"free\"],\"request\":{\"messages\":[{"
                "\"role\":\"user\",\"content\":\"again\"}]}}]}");
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "output"), TEXT);
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 1), "output"), TEXT);
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 2);
    for (int k = 0; k < 2; k++) {
        const char *path = e2e_str(cJSON_GetArrayItem(log, k), "path");
        b = e2e_sent_body(log, k);
        if (_i == 2)
            ck_assert_msg((strstr(path, ":streamGenerateContent") != NULL) ==
                              (k == 0),
                          "request %d went to %s", k, path);
        else
            ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(b, "stream")) ==
                      (k == 0));
        cJSON_Delete(b);
    }
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

/* A step's stream that stalls is caught by the tier's idle_timeout_s,
 * though the tier itself does not stream. */
START_TEST(test_step_stream_stall_caught)
{
    cJSON *job;
    int64_t lat;

    start_tier(apis[_i], "[{\"fault\": \"stall\"}]", "",
               ", \"idle_timeout_s\": 1", false);
    e2e_enqueue("{\"name\":\"j\",\"steps\":[{\"name\":\"a\",\"stream\":"
                "true,\"tiers\":[\"free\"],\"request\":{\"messages\":[{"
                "\"role\":\"user\",\"content\":\"hello\"}]}}]}");
    free(e2e_drain());
    job = e2e_show(1);
    e2e_expect_attempt(job, 0, "timeout", NULL, "backoff_retry");
    lat = int_of(e2e_hist(job, 0, 0), "latency_ms");
    ck_assert_msg(lat >= 900 && lat < 2500, "stalled for %lld ms",
                  (long long)lat);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    cJSON_Delete(job);
}
END_TEST

/* ---- the providers' documented streams --------------------------------- */

static const struct {
    const char *api, *file;
    int64_t nusd; /* at PRICE */
} documented[] = {
    {"openai", "openai-stream.sse", 200 * 1000 + 400 * 500 + 200 * 2000},
    {"anthropic", "anthropic-stream.sse",
     100 * 1000 + 1000 * 500 + 200 * 1250 + 50 * 2000},
    {"gemini", "gemini-stream.sse", 200 * 1000 + 100 * 500 + 30 * 2000},
};

/* The file tests/data/native/NAME as a JSON string (quoted). Caller
 * frees. */
static char *
quoted(const char *name)
{
    char *rel = NULL, *path, *text = NULL, *q;
    size_t len = 0;
    cJSON *s;

    ck_assert_int_gt(asprintf(&rel, "tests/data/native/%s", name), 0);
    path = source_path(rel);
    ck_assert_int_eq(file_read_all(path, 1 << 20, &text, &len), 0);
    s = cJSON_CreateString(text);
    q = cJSON_PrintUnformatted(s);
    cJSON_Delete(s);
    free(text);
    free(path);
    free(rel);
    return q;
}

START_TEST(test_documented_stream_costed)
{
    char *body = quoted(documented[_i].file), *answers = NULL;
    cJSON *job;
    const cJSON *h;

    ck_assert_int_gt(asprintf(&answers,
                              "[{\"headers\": {\"Content-Type\": "
                              "\"text/event-stream\"}, \"body\": %s}]",
                              body),
                     0);
    start(documented[_i].api, answers, "", PRICE);
    job = run_one();
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "output"),
                     "Hello there, how can I help?");
    h = e2e_hist(job, 0, 0);
    ck_assert_int_eq(
        price_from_usd(cJSON_GetObjectItem(h, "cost_usd")->valuedouble),
        documented[_i].nusd);
    ck_assert(!cJSON_IsTrue(cJSON_GetObjectItem(h, "cost_estimated")));
    cJSON_Delete(job);
    free(answers);
    free(body);
}
END_TEST

/* An error event mid-stream is the error: Anthropic's overloaded_error
 * is a server_error, retried; the partial text is kept. */
START_TEST(test_error_event_mid_stream)
{
    char *body = quoted("anthropic-stream-overloaded.sse"), *answers = NULL;
    cJSON *job;

    ck_assert_int_gt(asprintf(&answers,
                              "[{\"headers\": {\"Content-Type\": "
                              "\"text/event-stream\"}, \"body\": %s}]",
                              body),
                     0);
    start("anthropic", answers, "", "");
    job = run_one();
    e2e_expect_attempt(job, 0, "server_error", NULL, "backoff_retry");
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    cJSON_Delete(job);
    free(answers);
    free(body);
}
END_TEST

/* ---- stalls and cuts --------------------------------------------------- */

/* Half the events, then nothing with the connection open: idle_timeout_s
 * 1 ends the attempt as a timeout within about a second, not at
 * timeout_s (20); the text that came is the attempt's body. */
START_TEST(test_stall_caught_by_idle_timeout)
{
    cJSON *job;
    const cJSON *h;
    int64_t lat;

    start(apis[_i], "[{\"fault\": \"stall\"}]", "", ", \"idle_timeout_s\": 1");
    job = run_one();
    e2e_expect_attempt(job, 0, "timeout", NULL, "backoff_retry");
    h = e2e_hist(job, 0, 0);
    lat = int_of(h, "latency_ms");
    ck_assert_msg(lat >= 900 && lat < 2500, "stalled for %lld ms",
                  (long long)lat);
    ck_assert_ptr_nonnull(strstr(e2e_str(h, "body"), "The quick"));
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    cJSON_Delete(job);
}
END_TEST

/* No byte at all: first_byte_timeout_s 1 ends it in about a second. */
START_TEST(test_silence_caught_by_first_byte_timeout)
{
    cJSON *job;
    int64_t lat;

    start(apis[_i], "[{\"fault\": \"hang\"}]", "",
          ", \"first_byte_timeout_s\": 1");
    job = run_one();
    e2e_expect_attempt(job, 0, "timeout", NULL, "backoff_retry");
    lat = int_of(e2e_hist(job, 0, 0), "latency_ms");
    ck_assert_msg(lat >= 900 && lat < 2500, "silent for %lld ms",
                  (long long)lat);
    cJSON_Delete(job);
}
END_TEST

/* A stream cut mid-way is a reset with its partial text in the ledger,
 * decided as a plain answer cut alike (job 2, on the OpenAI tier local
 * without stream): both in doubt the same way. */
START_TEST(test_cut_stream_is_a_reset_as_a_plain_cut)
{
    cJSON *job, *plain;
    const cJSON *h, *p;

    start(apis[_i], "[{\"fault\": \"close_mid_body\"}]",
          "[{\"fault\": \"close_mid_body\"}]", "");
    e2e_enqueue(JOB_ON("free"));
    e2e_enqueue(JOB_ON("local"));
    free(e2e_drain());
    job = e2e_show(1);
    plain = e2e_show(2);
    e2e_expect_attempt(job, 0, "server_error", "reset", NULL);
    h = e2e_hist(job, 0, 0);
    p = e2e_hist(plain, 0, 0);
    ck_assert_ptr_nonnull(strstr(e2e_str(h, "body"), "The quick"));
    ck_assert_str_eq(e2e_str(h, "outcome"), e2e_str(p, "outcome"));
    ck_assert_str_eq(e2e_str(h, "reason"), e2e_str(p, "reason"));
    ck_assert_str_eq(e2e_str(h, "decision"), e2e_str(p, "decision"));
    ck_assert_str_eq(e2e_str(job, "state"), e2e_str(plain, "state"));
    cJSON_Delete(plain);
    cJSON_Delete(job);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("stream");
    TCase *tc = tcase_create("assembled");
    int n = (int)STEPQ_ARRAY_LEN(apis);

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_stream_assembled, 0, n);
    tcase_add_loop_test(tc, test_documented_stream_costed, 0,
                        (int)STEPQ_ARRAY_LEN(documented));
    tcase_add_test(tc, test_error_event_mid_stream);
    tcase_add_loop_test(tc, test_step_stream_on_plain_tier, 0, n);
    suite_add_tcase(s, tc);

    tc = tcase_create("stalls");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_stall_caught_by_idle_timeout, 0, n);
    tcase_add_loop_test(tc, test_step_stream_stall_caught, 0, n);
    tcase_add_loop_test(tc, test_silence_caught_by_first_byte_timeout, 0, n);
    tcase_add_loop_test(tc, test_cut_stream_is_a_reset_as_a_plain_cut, 0, n);
    suite_add_tcase(s, tc);
    return s;
}

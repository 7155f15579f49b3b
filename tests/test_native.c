/* test_native.c: a tier's "api" (anthropic, gemini) end to end, through
 * the real worker and the real `stepq mock` speaking that protocol over
 * loopback: the request mapped from the job's OpenAI-shaped one (path, key
 * header, version, system, max_tokens, cache_control, roles), the answer
 * committed as text, each finish and error shape (tests/data/native/, as
 * the providers document them) classified and decided as its OpenAI twin
 * is on an OpenAI tier in the same run, usage costed at the tier's price,
 * the mock's own errors in each protocol, `tiers --check` per api, and a
 * bad api or request refused with a clear error.
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

#define KEY "sk-test-secret-123" /* FREE_KEY, set by e2e_setup */
#define FREE(api)                                                              \
    "\"api\": \"" api "\", \"api_key_env\": \"FREE_KEY\", \"timeout_s\": 5"
#define JOB_ON(tier)                                                           \
    "{\"name\":\"j\",\"steps\":[{\"name\":\"a\",\"tiers\":[\"" tier            \
    "\"],\"request\":{\"messages\":[{\"role\":\"user\",\"content\":"           \
    "\"hello\"}]}}]}"

/* The file tests/data/native/NAME, as text. Caller frees. */
static char *
data(const char *name)
{
    char *rel = NULL, *path, *text = NULL;
    size_t len = 0;

    ck_assert_int_gt(asprintf(&rel, "tests/data/native/%s", name), 0);
    path = source_path(rel);
    ck_assert_int_eq(file_read_all(path, 1 << 20, &text, &len), 0);
    free(path);
    free(rel);
    return text;
}

/* The body of logged request i (the mock's log), parsed (delete it). */
static cJSON *
sent(int i)
{
    cJSON *log = e2e_mock_log(), *b;

    ck_assert_int_gt(cJSON_GetArraySize(log), i);
    b = e2e_sent_body(log, i);
    cJSON_Delete(log);
    ck_assert_ptr_nonnull(b);
    return b;
}

static const char *
sent_path(int i)
{
    static char path[256];
    cJSON *log = e2e_mock_log();

    snprintf(path, sizeof(path), "%s",
             e2e_str(cJSON_GetArrayItem(log, i), "path"));
    cJSON_Delete(log);
    return path;
}

/* ---- the request mapped, the answer committed ------------------------- */

#define MAPPED_JOB                                                             \
    "{\"name\":\"j\",\"steps\":[{\"name\":\"a\",\"request\":{"                 \
    "\"cache\":true,\"temperature\":0.5,\"stop\":\"END\",\"messages\":["       \
    "{\"role\":\"system\",\"content\":\"be brief\"},"                          \
    "{\"role\":\"user\",\"content\":\"hello\"},"                               \
    "{\"role\":\"assistant\",\"content\":\"hi\"},"                             \
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"again\"}]," \
    "\"cache\":true}]}}]}"

/* Anthropic: x-api-key and anthropic-version (the route refuses a request
 * without them), POST .../messages, the system prompt top-level with
 * cache_control, max_tokens the tier's default, stop as stop_sequences. */
START_TEST(test_anthropic_request_and_answer)
{
    cJSON *job, *b, *sys, *msgs;

    e2e_start("{\"routes\": [{\"path\": \"/free\", \"api\": \"anthropic\","
              " \"content\": \"native hello\", \"require_headers\":"
              " {\"x-api-key\": \"" KEY "\","
              " \"anthropic-version\": \"2023-06-01\"}}]}",
              "");
    e2e_config(1, FREE("anthropic"));
    e2e_enqueue(MAPPED_JOB);
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "output"), "native hello");
    ck_assert_str_eq(sent_path(0), "/free/v1/messages");
    b = sent(0);
    ck_assert_str_eq(e2e_str(b, "model"), "small");
    ck_assert_int_eq(cJSON_GetObjectItem(b, "max_tokens")->valueint, 4096);
    sys = cJSON_GetArrayItem(cJSON_GetObjectItem(b, "system"), 0);
    ck_assert_str_eq(e2e_str(sys, "text"), "be brief");
    ck_assert_str_eq(e2e_str(cJSON_GetObjectItem(sys, "cache_control"), "type"),
                     "ephemeral");
    msgs = cJSON_GetObjectItem(b, "messages");
    ck_assert_int_eq(cJSON_GetArraySize(msgs), 3);
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(msgs, 1), "role"), "assistant");
    ck_assert_ptr_nonnull(cJSON_GetObjectItem(
        cJSON_GetArrayItem(
            cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 2), "content"), 0),
        "cache_control"));
    ck_assert_str_eq(
        cJSON_GetArrayItem(cJSON_GetObjectItem(b, "stop_sequences"), 0)
            ->valuestring,
        "END");
    ck_assert_ptr_null(cJSON_GetObjectItem(b, "cache"));
    cJSON_Delete(b);
    cJSON_Delete(job);
}
END_TEST

/* Gemini: x-goog-api-key, POST .../models/MODEL:generateContent, the
 * system prompt as systemInstruction, roles user and model, the tier's
 * max_tokens as generationConfig.maxOutputTokens. */
START_TEST(test_gemini_request_and_answer)
{
    cJSON *job, *b, *contents, *gc;

    e2e_start("{\"routes\": [{\"path\": \"/free\", \"api\": \"gemini\","
              " \"content\": \"native hello\", \"require_headers\":"
              " {\"x-goog-api-key\": \"" KEY "\"}}]}",
              "");
    e2e_config(1, FREE("gemini") ", \"max_tokens\": 300");
    e2e_enqueue(MAPPED_JOB);
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "output"), "native hello");
    ck_assert_str_eq(sent_path(0), "/free/v1/models/small:generateContent");
    b = sent(0);
    ck_assert_ptr_null(cJSON_GetObjectItem(b, "model"));
    ck_assert_str_eq(
        e2e_str(cJSON_GetArrayItem(
                    cJSON_GetObjectItem(
                        cJSON_GetObjectItem(b, "systemInstruction"), "parts"),
                    0),
                "text"),
        "be brief");
    contents = cJSON_GetObjectItem(b, "contents");
    ck_assert_int_eq(cJSON_GetArraySize(contents), 3);
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(contents, 1), "role"), "model");
    gc = cJSON_GetObjectItem(b, "generationConfig");
    ck_assert_int_eq(cJSON_GetObjectItem(gc, "maxOutputTokens")->valueint, 300);
    ck_assert_double_eq(cJSON_GetObjectItem(gc, "temperature")->valuedouble,
                        0.5);
    cJSON_Delete(b);
    cJSON_Delete(job);
}
END_TEST

/* An OpenAI tier's max_tokens goes where the job set no cap, and a job's
 * own cap wins; the native "cache" flags are not sent to it. */
START_TEST(test_openai_tier_max_tokens)
{
    cJSON *b0, *b1;

    e2e_start("{\"routes\": [{\"path\": \"/free\"}]}", "");
    e2e_config(1, "\"max_tokens\": 77");
    e2e_enqueue(MAPPED_JOB);
    e2e_enqueue("{\"name\":\"j\",\"steps\":[{\"name\":\"a\",\"request\":"
                "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
                "\"content\":\"hello\"}]}}]}");
    free(e2e_drain());
    b0 = sent(0);
    b1 = sent(1);
    if (cJSON_GetArraySize(cJSON_GetObjectItem(b0, "messages")) == 1) {
        cJSON *t = b0; /* sent in the other order */
        b0 = b1;
        b1 = t;
    }
    ck_assert_int_eq(cJSON_GetObjectItem(b0, "max_tokens")->valueint, 77);
    ck_assert_ptr_null(cJSON_GetObjectItem(b0, "cache"));
    ck_assert_ptr_null(cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(b0, "messages"), 3), "cache"));
    ck_assert_int_eq(cJSON_GetObjectItem(b1, "max_tokens")->valueint, 5);
    cJSON_Delete(b1);
    cJSON_Delete(b0);
}
END_TEST

/* ---- each shape decided as its OpenAI twin ----------------------------- */

struct twin {
    const char *api;
    const char *file;    /* the native body, tests/data/native/ */
    int status;          /* of the native answer */
    const char *headers; /* of the native answer: a JSON object or "" */
    const char *openai;  /* the twin's scripted answer (mock script) */
    const char *outcome, *reason, *decision; /* the native's attempt 0 */
};

static const struct twin twins[] = {
    {"anthropic", "anthropic-end-turn.json", 200, "", "{\"content\": \"x\"}",
     "ok", NULL, "commit"},
    {"anthropic", "anthropic-tool-use.json", 200, "", "{\"content\": \"x\"}",
     "ok", NULL, "commit"},
    {"anthropic", "anthropic-max-tokens.json", 200, "",
     "{\"finish_reason\": \"length\"}", "truncated", "length", "fail_loud"},
    {"anthropic", "anthropic-refusal.json", 200, "",
     "{\"content\": \"\", \"finish_reason\": \"content_filter\"}", "refused",
     "content_filter", NULL},
    {"anthropic", "anthropic-overloaded.json", 529, "", "{\"status\": 503}",
     "server_error", NULL, "backoff_retry"},
    {"anthropic", "anthropic-rate-limit.json", 429,
     "{\"retry-after\": \"1\", \"anthropic-ratelimit-requests-limit\": "
     "\"50\", \"anthropic-ratelimit-requests-remaining\": \"0\"}",
     "{\"status\": 429, \"headers\": {\"retry-after\": \"1\"}}",
     "soft_throttle", NULL, "backoff_retry"},
    {"anthropic", "anthropic-request-too-large.json", 413, "",
     "{\"status\": 413}", "truncated", "too_large", NULL},
    {"anthropic", "anthropic-prompt-too-long.json", 400, "",
     "{\"status\": 400, \"body\": {\"error\": {\"message\": \"This model's "
     "maximum context length is 8192 tokens.\", \"type\": "
     "\"invalid_request_error\", \"code\": \"context_length_exceeded\"}}}",
     "truncated", "context_overflow", NULL},
    {"gemini", "gemini-stop.json", 200, "", "{\"content\": \"x\"}", "ok", NULL,
     "commit"},
    {"gemini", "gemini-max-tokens.json", 200, "",
     "{\"finish_reason\": \"length\"}", "truncated", "length", "fail_loud"},
    {"gemini", "gemini-safety.json", 200, "",
     "{\"content\": \"\", \"finish_reason\": \"content_filter\"}", "refused",
     "content_filter", NULL},
    {"gemini", "gemini-recitation.json", 200, "",
     "{\"content\": \"\", \"finish_reason\": \"content_filter\"}", "refused",
     "content_filter", NULL},
    {"gemini", "gemini-blocked-prompt.json", 200, "",
     "{\"content\": \"\", \"finish_reason\": \"content_filter\"}", "refused",
     "content_filter", NULL},
    {"gemini", "gemini-resource-exhausted.json", 429, "",
     "{\"status\": 429, \"headers\": {\"retry-after\": \"1\"}}",
     "soft_throttle", NULL, "backoff_retry"},
    {"gemini", "gemini-context.json", 400, "",
     "{\"status\": 400, \"body\": {\"error\": {\"message\": \"This model's "
     "maximum context length is 8192 tokens.\", \"type\": "
     "\"invalid_request_error\", \"code\": \"context_length_exceeded\"}}}",
     "truncated", "context_overflow", NULL},
    {"gemini", "gemini-unavailable.json", 503, "", "{\"status\": 503}",
     "server_error", NULL, "backoff_retry"},
};

/* Job 1 meets the native answer on tier free, job 2 its twin on the
 * OpenAI tier local, in one run: attempt 0 of each gets the same outcome
 * and decision. */
START_TEST(test_shape_decided_as_its_openai_twin)
{
    const struct twin *t = &twins[_i];
    char *body = data(t->file), *script = NULL, *fields = NULL;
    cJSON *native, *twin;
    const cJSON *n0, *o0;

    ck_assert_int_gt(
        asprintf(&script,
                 "{\"routes\": [{\"path\": \"/free\", \"api\": \"%s\","
                 " \"answers\": [{\"status\": %d, %s%s%s \"body\": %s}]},"
                 " {\"path\": \"/local\", \"answers\": [%s]}]}",
                 t->api, t->status, t->headers[0] ? "\"headers\": " : "",
                 t->headers, t->headers[0] ? "," : "", body, t->openai),
        0);
    ck_assert_int_gt(asprintf(&fields,
                              "\"api\": \"%s\", \"api_key_env\": "
                              "\"FREE_KEY\", \"timeout_s\": 5",
                              t->api),
                     0);
    e2e_start(script, "");
    e2e_config(1, fields);
    e2e_enqueue(JOB_ON("free"));
    e2e_enqueue(JOB_ON("local"));
    free(e2e_drain());
    native = e2e_show(1);
    twin = e2e_show(2);
    e2e_expect_attempt(native, 0, t->outcome, t->reason, t->decision);
    n0 = e2e_hist(native, 0, 0);
    o0 = e2e_hist(twin, 0, 0);
    ck_assert_msg(o0 != NULL, "%s: the twin made no attempt", t->file);
    ck_assert_str_eq(e2e_str(n0, "outcome"), e2e_str(o0, "outcome"));
    ck_assert_str_eq(e2e_str(n0, "decision"), e2e_str(o0, "decision"));
    ck_assert_str_eq(e2e_str(native, "state"), e2e_str(twin, "state"));
    cJSON_Delete(native);
    cJSON_Delete(twin);
    free(fields);
    free(script);
    free(body);
}
END_TEST

/* ---- usage and cost ---------------------------------------------------- */

/* $1, $2, $0.50 and $1.25 per million tokens. */
#define PRICE                                                                  \
    ", \"price\": {\"input_per_mtok\": 1, \"output_per_mtok\": 2,"             \
    " \"cached_input_per_mtok\": 0.5, \"cache_write_per_mtok\": 1.25}"

static const struct {
    const char *api, *file;
    int64_t nusd, tokens;
} costs[] = {
    /* 100 in, 1,000 read, 200 written, 50 out. */
    {"anthropic", "anthropic-cached.json",
     100 * 1000 + 1000 * 500 + 200 * 1250 + 50 * 2000, 1350},
    /* 300 prompt of which 100 cached, 20 + 10 thoughts out. */
    {"gemini", "gemini-cached.json", 200 * 1000 + 100 * 500 + 30 * 2000, 330},
};

START_TEST(test_usage_costed_at_the_tier_price)
{
    char *body = data(costs[_i].file), *script = NULL, *fields = NULL;
    cJSON *job;
    const cJSON *h;

    ck_assert_int_gt(asprintf(&script,
                              "{\"routes\": [{\"path\": \"/free\", \"api\": "
                              "\"%s\", \"answers\": [{\"body\": %s}]}]}",
                              costs[_i].api, body),
                     0);
    ck_assert_int_gt(asprintf(&fields, "\"api\": \"%s\"" PRICE, costs[_i].api),
                     0);
    e2e_start(script, "");
    e2e_config(1, fields);
    e2e_enqueue(JOB_ON("free"));
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    h = e2e_hist(job, 0, 0);
    ck_assert_int_eq(
        price_from_usd(cJSON_GetObjectItem(h, "cost_usd")->valuedouble),
        costs[_i].nusd);
    ck_assert(!cJSON_IsTrue(cJSON_GetObjectItem(h, "cost_estimated")));
    ck_assert_int_eq(cJSON_GetObjectItem(h, "tokens")->valueint,
                     costs[_i].tokens);
    cJSON_Delete(job);
    free(fields);
    free(script);
    free(body);
}
END_TEST

/* ---- the mock's own errors in each protocol ---------------------------- */

static const struct {
    const char *api, *route, *outcome, *reason;
} mock_errors[] = {
    {"anthropic", "\"context_tokens\": 1", "truncated", "context_overflow"},
    {"gemini", "\"context_tokens\": 1", "truncated", "context_overflow"},
    {"anthropic", "\"storm\": {\"status\": 529, \"requests\": 1}",
     "server_error", NULL},
    {"gemini", "\"storm\": {\"status\": 503, \"requests\": 1}", "server_error",
     NULL},
    {"anthropic", "\"allowance_tokens\": 1, \"answers\": [{}]", NULL, NULL},
    {"gemini", "\"allowance_tokens\": 1, \"answers\": [{}]", NULL, NULL},
};

/* A route's context, storm and allowance answer in its protocol's shape,
 * classified as the OpenAI route's are: the allowance's second request
 * (the first spends it) is a hard quota. */
START_TEST(test_mock_errors_in_each_protocol)
{
    char *script = NULL, *fields = NULL;
    cJSON *job;
    bool quota = mock_errors[_i].outcome == NULL;

    ck_assert_int_gt(asprintf(&script,
                              "{\"routes\": [{\"path\": \"/free\", \"api\": "
                              "\"%s\", %s}]}",
                              mock_errors[_i].api, mock_errors[_i].route),
                     0);
    ck_assert_int_gt(asprintf(&fields, "\"api\": \"%s\"", mock_errors[_i].api),
                     0);
    e2e_start(script, "");
    e2e_config(1, fields);
    e2e_enqueue(JOB_ON("free"));
    if (quota)
        e2e_enqueue(JOB_ON("free"));
    free(e2e_drain());
    job = e2e_show(quota ? 2 : 1);
    e2e_expect_attempt(job, 0, quota ? "hard_quota" : mock_errors[_i].outcome,
                       mock_errors[_i].reason, NULL);
    cJSON_Delete(job);
    free(fields);
    free(script);
}
END_TEST

/* ---- tiers --check, bad tiers and bad requests ------------------------- */

/* Writes a config of tiers a (anthropic, on /free) and g (gemini, on
 * /local), extra spliced into a. Returns its path (caller frees). */
static char *
two_apis(const char *extra)
{
    char *text = NULL, *path;

    ck_assert_int_gt(
        asprintf(&text,
                 "{\"tiers\": [{\"name\": \"a\", \"api\": \"anthropic\","
                 " \"base_url\": \"http://127.0.0.1:%d/free/v1\", \"model\":"
                 " \"claude\", \"api_key_env\": \"FREE_KEY\"%s},"
                 " {\"name\": \"g\", \"api\": \"gemini\", \"base_url\":"
                 " \"http://127.0.0.1:%d/local/v1beta\", \"model\":"
                 " \"gemini-2.0-flash\", \"api_key_env\": \"FREE_KEY\"}]}",
                 e2e_mock.port, extra, e2e_mock.port),
        0);
    path = tmpdir_write(e2e_dir, "check.json", text, strlen(text));
    free(text);
    return path;
}

#define TWO_ROUTES                                                             \
    "{\"routes\": [{\"path\": \"/free\", \"api\": \"anthropic\","              \
    " \"require_headers\": {\"x-api-key\": \"" KEY "\"}},"                     \
    " {\"path\": \"/local\", \"api\": \"gemini\", \"require_headers\":"        \
    " {\"x-goog-api-key\": \"" KEY "\"}}]}"

START_TEST(test_tiers_check_each_api)
{
    char *cfg;
    struct run_result res;
    cJSON *j;

    e2e_start(TWO_ROUTES, "");
    cfg = two_apis("");
    ck_assert_int_eq(
        RUN(&res, NULL, "--config", cfg, "tiers", "--check", "--json"), 0);
    j = cJSON_Parse(res.out);
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(j, 0), "result"), "reachable");
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(j, 1), "result"), "reachable");
    ck_assert_ptr_nonnull(
        strstr(e2e_str(cJSON_GetArrayItem(j, 1), "url"),
               "/local/v1beta/models/gemini-2.0-flash:generateContent"));
    cJSON_Delete(j);
    run_result_free(&res);
    /* A wrong key fails the check as auth_failed, in each protocol. */
    setenv("FREE_KEY", "sk-wrong-key-456", 1);
    ck_assert_int_eq(
        RUN(&res, NULL, "--config", cfg, "tiers", "--check", "--json"), 1);
    j = cJSON_Parse(res.out);
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(j, 0), "result"),
                     "auth_failed");
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(j, 1), "result"),
                     "auth_failed");
    cJSON_Delete(j);
    run_result_free(&res);
    free(cfg);
}
END_TEST

static const struct {
    const char *extra, *says;
} bad_tiers[] = {
    {", \"api\": \"claude\"", "tiers[0].api: must be openai, anthropic or "
                              "gemini"},
    {", \"api\": 3", "tiers[0].api"},
    {", \"max_tokens\": 0", "tiers[0].max_tokens"},
};

START_TEST(test_bad_api_is_refused)
{
    char *cfg, *text = NULL;
    struct run_result res;

    ck_assert_int_gt(
        asprintf(&text,
                 "{\"tiers\": [{\"name\": \"t\", \"base_url\":"
                 " \"http://127.0.0.1:1/v1\", \"model\": \"m\"%s}]}",
                 bad_tiers[_i].extra),
        0);
    cfg = tmpdir_write(e2e_dir, "bad.json", text, strlen(text));
    free(text);
    ck_assert_int_eq(RUN(&res, NULL, "--config", cfg, "tiers"), 2);
    ck_assert_msg(strstr(res.err, bad_tiers[_i].says) != NULL, "%s", res.err);
    run_result_free(&res);
    free(cfg);
}
END_TEST

START_TEST(test_gemini_model_must_fit_the_url)
{
    const char *text = "{\"tiers\": [{\"name\": \"g\", \"api\": \"gemini\","
                       " \"base_url\": \"http://127.0.0.1:1/v1\","
                       " \"model\": \"gemini 2?x\"}]}";
    char *cfg = tmpdir_write(e2e_dir, "g.json", text, strlen(text));
    struct run_result res;

    ck_assert_int_eq(RUN(&res, NULL, "--config", cfg, "tiers"), 2);
    ck_assert_ptr_nonnull(strstr(res.err, "tiers[0].model: the gemini api"));
    run_result_free(&res);
    free(cfg);
}
END_TEST

/* A request the protocol cannot carry (seed: no such member there)
 * fails the job loud, naming the member and the tier; nothing is
 * sent. */
START_TEST(test_unmapped_request_fails_loud)
{
    cJSON *job, *log;
    char *text;

    e2e_start("{\"routes\": [{\"path\": \"/free\", \"api\": \"anthropic\"}]}",
              "");
    e2e_config(1, FREE("anthropic"));
    e2e_enqueue("{\"name\":\"j\",\"steps\":[{\"name\":\"a\",\"tiers\":"
                "[\"free\"],\"request\":{\"seed\":2,\"messages\":[{\"role\":"
                "\"user\",\"content\":\"hello\"}]}}]}");
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "failed");
    text = cJSON_PrintUnformatted(job);
    ck_assert_msg(strstr(text, "tier free (api anthropic): request.seed: not "
                               "mapped to the anthropic api") != NULL,
                  "%s", text);
    free(text);
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 0);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("native");
    TCase *tc = tcase_create("request");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_anthropic_request_and_answer);
    tcase_add_test(tc, test_gemini_request_and_answer);
    tcase_add_test(tc, test_unmapped_request_fails_loud);
    tcase_add_test(tc, test_openai_tier_max_tokens);
    suite_add_tcase(s, tc);

    tc = tcase_create("twins");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_shape_decided_as_its_openai_twin, 0,
                        (int)STEPQ_ARRAY_LEN(twins));
    tcase_add_loop_test(tc, test_mock_errors_in_each_protocol, 0,
                        (int)STEPQ_ARRAY_LEN(mock_errors));
    suite_add_tcase(s, tc);

    tc = tcase_create("usage");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_usage_costed_at_the_tier_price, 0,
                        (int)STEPQ_ARRAY_LEN(costs));
    suite_add_tcase(s, tc);

    tc = tcase_create("tiers");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_tiers_check_each_api);
    tcase_add_loop_test(tc, test_bad_api_is_refused, 0,
                        (int)STEPQ_ARRAY_LEN(bad_tiers));
    tcase_add_test(tc, test_gemini_model_must_fit_the_url);
    suite_add_tcase(s, tc);
    return s;
}

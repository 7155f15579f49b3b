/* test_gateway.c: the real worker through the real open-source Portkey
 * gateway (@portkey-ai/gateway from npm, pinned by tests/gateway/, run by
 * tests/gateway/start.mjs on a loopback port the kernel picks), with
 * `stepq mock` as the provider behind it (x-portkey-custom-host), as
 * docs/endpoints.md's self-hosted Portkey recipe says. Registered only
 * when Node.js is found; scripts/deps.sh --browser runs its npm ci.
 *
 * What a user of the recipe relies on: the answer is stored as the model
 * gave it (provider names and `false` in it too); a 429 with Retry-After
 * and rate-limit headers, then a 503, are classified as on the direct
 * path; an idempotency key reaches the
 * provider when forwarded, and does not when not (what tiers --check
 * warns of); and the gateway's own failures are the gateway's: a saved
 * config id fails loud at once, and a 429 the gateway retried itself
 * comes back as a 500 that is gateway_error. */
#include "tests/support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "tests/support/e2e.h"

#define GW_MODULE "tests/gateway/node_modules/@portkey-ai/gateway/package.json"
#define PROMPT    "tell me about openai and whether false is true"
#define R429      "{\"status\": 429, \"headers\": {\"Retry-After\": \"1\"}}"
/* A throttle with its rate-limit headers, then an overload, then 200. */
#define SEQ                                                                    \
    "{\"status\": 429, \"headers\": {\"Retry-After\": \"1\", "                 \
    "\"x-ratelimit-remaining-requests\": \"0\", "                              \
    "\"x-ratelimit-reset-requests\": \"1s\"}}, {\"status\": 503}"
#define SCRIPT                                                                 \
    "{\"routes\": [{\"path\": \"/ok\"},"                                       \
    " {\"path\": \"/gw429\", \"answers\": [" SEQ "]},"                         \
    " {\"path\": \"/direct429\", \"answers\": [" SEQ "]},"                     \
    " {\"path\": \"/always429\", \"loop\": true, \"answers\": [" R429 "]}]}"
#define JOB                                                                    \
    "{\"name\":\"j\",\"steps\":[{\"name\":\"a\",\"tiers\":[\"%s\"],%s"         \
    "\"expect_json\":[\"summary\"],\"request\":{\"messages\":[{\"role\":"      \
    "\"user\",\"content\":\"" PROMPT "\"}]}}]}"

static struct mockproc gw;

/* tier writes one tier behind the gateway: provider host is the mock's
 * route, extra more headers ("" for none). */
static int
tier(char *buf, size_t len, const char *name, const char *route,
     const char *extra)
{
    return snprintf(buf, len,
                    "{\"name\": \"%s\", \"base_url\": "
                    "\"http://127.0.0.1:%d/v1\", \"model\": \"gpt-4o-mini\", "
                    "\"auth\": \"none\", \"timeout_s\": 20, \"headers\": "
                    "{\"x-portkey-provider\": \"openai\", "
                    "\"x-portkey-custom-host\": \"http://127.0.0.1:%d%s/v1\""
                    "%s%s}}",
                    name, gw.port, e2e_mock.port, route, extra[0] ? ", " : "",
                    extra);
}

/* The config: tiers behind the gateway, and one straight to the mock. */
static void
write_config(void)
{
    char t[5][768], cfg[8192];
    int n;

    tier(t[0], sizeof(t[0]), "gw", "/ok",
         "\"x-portkey-forward-headers\": \"idempotency-key\", "
         "\"x-portkey-strict-open-ai-compliance\": \"false\"");
    tier(t[1], sizeof(t[1]), "gw-nofwd", "/ok", "");
    tier(t[2], sizeof(t[2]), "gw429", "/gw429", "");
    /* A config that asks the gateway to retry, honouring Retry-After. */
    snprintf(t[3], sizeof(t[3]),
             "{\"name\": \"gw-retry\", \"base_url\": "
             "\"http://127.0.0.1:%d/v1\", \"model\": \"gpt-4o-mini\", "
             "\"auth\": \"none\", \"timeout_s\": 20, \"headers\": "
             "{\"x-portkey-config\": \"{\\\"provider\\\": \\\"openai\\\", "
             "\\\"custom_host\\\": \\\"http://127.0.0.1:%d/always429/v1\\\", "
             "\\\"api_key\\\": \\\"sk-mock\\\", \\\"retry\\\": "
             "{\\\"attempts\\\": 1, \\\"use_retry_after_header\\\": true}}\"}}",
             gw.port, e2e_mock.port);
    snprintf(t[4], sizeof(t[4]),
             "{\"name\": \"gw-saved\", \"base_url\": "
             "\"http://127.0.0.1:%d/v1\", \"model\": \"gpt-4o-mini\", "
             "\"auth\": \"none\", \"headers\": {\"x-portkey-config\": "
             "\"pc-nightly-0a1b2c\"}}, {\"name\": \"direct429\", "
             "\"base_url\": \"http://127.0.0.1:%d/direct429/v1\", "
             "\"model\": \"gpt-4o-mini\", \"auth\": \"none\"}",
             gw.port, e2e_mock.port);
    n = snprintf(cfg, sizeof(cfg),
                 "{\"worker\": {\"lease_s\": 2}, "
                 "\"policy\": {\"backoff_base_s\": 0.05, "
                 "\"backoff_cap_s\": 0.2}, \"tiers\": [%s, %s, %s, %s, %s]}",
                 t[0], t[1], t[2], t[3], t[4]);
    ck_assert_int_lt(n, (int)sizeof(cfg));
    free(tmpdir_write(e2e_dir, "stepq.json", cfg, strlen(cfg)));
}

static void
gw_setup(void)
{
    char *module = source_path(GW_MODULE);
    char *script = source_path("tests/gateway/start.mjs");
    const char *node = getenv("STEPQ_NODE");
    const char *argv[] = {node != NULL ? node : "node", script, NULL};

    ck_assert_msg(access(module, R_OK) == 0,
                  "%s is missing: scripts/deps.sh --browser runs npm ci in "
                  "tests/gateway",
                  module);
    e2e_setup();
    e2e_start(SCRIPT, "");
    memset(&gw, 0, sizeof(gw));
    mockproc_spawn(&gw, argv, 30000);
    write_config();
    free(module);
    free(script);
}

static void
gw_teardown(void)
{
    if (gw.pid > 0)
        mockproc_stop(&gw);
    e2e_teardown();
}

/* run enqueues a job on tier t (extra: step members with a trailing
 * comma, or ""), drains, and returns its job shown. */
static cJSON *
run(int id, const char *t, const char *extra)
{
    char job[1024];

    snprintf(job, sizeof(job), JOB, t, extra);
    e2e_enqueue(job);
    free(e2e_drain());
    return e2e_show(id);
}

/* The logged idempotency_key of the last request to route, or NULL. */
static char *
key_seen(const char *route)
{
    cJSON *log = e2e_mock_log(), *e;
    const char *k = NULL;
    char *out;

    cJSON_ArrayForEach(e, log)
    {
        if (strncmp(e2e_str(e, "path"), route, strlen(route)) == 0)
            k = e2e_str(e, "idempotency_key");
    }
    out = k != NULL ? strdup(k) : NULL;
    cJSON_Delete(log);
    return out;
}

START_TEST(test_answer_is_stored_as_given)
{
    cJSON *job = run(1, "gw", "");

    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    /* Needs the masking fix of issue 39: the headers "x-portkey-*" hold
     * "key", and their values ("openai", "false") must not be masked. */
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "output"),
                     "{\"summary\":\"mock reply to: " PROMPT "\"}");
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_throttle_as_on_the_direct_path)
{
    cJSON *gj = run(1, "gw429", ""), *dj = run(2, "direct429", "");
    const char *fields[] = {"status", "outcome", "reason", "decision"};

    for (int a = 0; a < 3; a++) {
        const cJSON *g = e2e_hist(gj, 0, a), *d = e2e_hist(dj, 0, a);
        ck_assert_msg(g != NULL && d != NULL, "attempt %d", a);
        for (size_t i = 0; i < 4; i++) {
            char *gs =
                cJSON_PrintUnformatted(cJSON_GetObjectItem(g, fields[i]));
            char *ds =
                cJSON_PrintUnformatted(cJSON_GetObjectItem(d, fields[i]));
            ck_assert_msg(strcmp(gs, ds) == 0, "attempt %d %s: %s vs %s", a,
                          fields[i], gs, ds);
            free(gs);
            free(ds);
        }
    }
    e2e_expect_attempt(gj, 0, "soft_throttle", "rate_limit", "backoff_retry");
    ck_assert_int_ge(
        cJSON_GetObjectItem(e2e_hist(gj, 0, 0), "delay_ms")->valueint, 1000);
    e2e_expect_attempt(gj, 1, "server_error", "overloaded", "backoff_retry");
    e2e_expect_attempt(gj, 2, "ok", NULL, "commit");
    cJSON_Delete(gj);
    cJSON_Delete(dj);
}
END_TEST

START_TEST(test_idempotency_key_needs_forwarding)
{
    cJSON *job = run(1, "gw", "\"idempotency_key\":\"k-gw-1\",");
    char *k = key_seen("/ok/");

    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_msg(k != NULL && strcmp(k, "k-gw-1") == 0, "key %s", k);
    free(k);
    cJSON_Delete(job);
    job = run(2, "gw-nofwd", "\"idempotency_key\":\"k-gw-2\",");
    k = key_seen("/ok/");
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_msg(k == NULL, "the gateway passed the key on: %s", k);
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_saved_config_fails_loud_once)
{
    cJSON *job = run(1, "gw-saved", "");

    ck_assert_str_eq(e2e_str(job, "state"), "failed");
    e2e_expect_attempt(job, 0, "unknown", "gateway_config", "fail_loud");
    ck_assert_ptr_null(e2e_hist(job, 0, 1));
    ck_assert_int_eq(e2e_sent_to(NULL, "/"), 0);
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_gateway_retry_is_a_server_error)
{
    cJSON *job = run(1, "gw-retry", "");
    int attempts =
        cJSON_GetArraySize(cJSON_GetObjectItem(e2e_step_of(job, 0), "history"));

    ck_assert_str_eq(e2e_str(job, "state"), "failed");
    e2e_expect_attempt(job, 0, "server_error", "gateway_error",
                       "backoff_retry");
    ck_assert_int_eq(attempts, 3);
    /* Each attempt cost the provider two calls (the gateway's retry). */
    ck_assert_int_eq(e2e_sent_to(NULL, "/always429/"), 2 * attempts);
    cJSON_Delete(job);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("gateway");
    TCase *tc = tcase_create("portkey");

    tcase_add_checked_fixture(tc, gw_setup, gw_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_answer_is_stored_as_given);
    tcase_add_test(tc, test_throttle_as_on_the_direct_path);
    tcase_add_test(tc, test_idempotency_key_needs_forwarding);
    tcase_add_test(tc, test_saved_config_fails_loud_once);
    tcase_add_test(tc, test_gateway_retry_is_a_server_error);
    suite_add_tcase(s, tc);
    return s;
}

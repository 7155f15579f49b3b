/* test_policy.c: classify and decide from tables (worker/policy.h), the
 * header parsers against malformed values, hostile bodies, and
 * `stepq policy check` run as a real process on the shipped case tables. */
#include "tests/support/support.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/config.h"
#include "common/xalloc.h"
#include "policy/policy.h"

/* 2026-11-30T03:40:00Z */
#define NOW     ((int64_t)1796010000000)
#define NOCHECK INT64_MIN

/* ---- helpers ---- */

/* classify_raw classifies a body copied into a buffer of exactly len
 * bytes, so that ASan catches any read past it. */
static void
classify_raw(const struct policy_input *tmpl, const char *body, size_t len,
             const struct policy_config *cfg, struct policy_streak *streak,
             struct policy_class *out)
{
    struct policy_input in = *tmpl;
    char *copy = xmalloc(len > 0 ? len : 1);

    memcpy(copy, body, len);
    in.body = copy;
    in.body_len = len;
    if (in.now_ms == 0)
        in.now_ms = NOW;
    policy_classify(&in, cfg, streak, out);
    free(copy);
}

static void
classify_one(int status, const struct policy_header *h, size_t nh,
             const char *body, const struct policy_config *cfg,
             struct policy_class *out)
{
    struct policy_input in = {.status = status, .headers = h, .nheaders = nh};

    classify_raw(&in, body, strlen(body), cfg, NULL, out);
}

/* ---- names ---- */

START_TEST(test_outcome_names_round_trip)
{
    enum policy_outcome o = POLICY_UNKNOWN;
    const char *name = policy_outcome_name((enum policy_outcome)_i);

    ck_assert_int_eq(policy_outcome_from_name(name, &o), 0);
    ck_assert_int_eq(o, _i);
}
END_TEST

START_TEST(test_action_names_round_trip)
{
    enum policy_action a = POLICY_FAIL_LOUD;
    const char *name = policy_action_name((enum policy_action)_i);

    ck_assert_int_eq(policy_action_from_name(name, &a), 0);
    ck_assert_int_eq(a, _i);
}
END_TEST

START_TEST(test_names_as_spec_prints)
{
    enum policy_outcome o = POLICY_OK;
    enum policy_action a = POLICY_COMMIT;
    enum policy_transport t = POLICY_TRANSPORT_NONE;
    enum policy_breaker b = POLICY_BREAKER_CLOSED;

    ck_assert_str_eq(policy_outcome_name(POLICY_SOFT_THROTTLE),
                     "soft_throttle");
    ck_assert_str_eq(policy_action_name(POLICY_SWITCH_TIER_REPLAY),
                     "switch_tier_replay");
    ck_assert_str_eq(policy_outcome_name(POLICY_OUTCOME_COUNT), "?");
    ck_assert_str_eq(policy_action_name(POLICY_ACTION_COUNT), "?");
    ck_assert_str_eq(policy_transport_name(POLICY_TRANSPORT_COUNT), "?");
    ck_assert_str_eq(policy_breaker_name(POLICY_BREAKER_COUNT), "?");
    ck_assert_int_eq(policy_outcome_from_name("Soft_Throttle", &o), -EINVAL);
    ck_assert_int_eq(policy_outcome_from_name(NULL, &o), -EINVAL);
    ck_assert_int_eq(o, POLICY_OK);
    ck_assert_int_eq(policy_action_from_name("retry", &a), -EINVAL);
    ck_assert_int_eq(policy_transport_from_name("reset", &t), 0);
    ck_assert_str_eq(policy_transport_name(t), "reset");
    ck_assert_int_eq(policy_breaker_from_name("half_open", &b), 0);
    ck_assert_str_eq(policy_breaker_name(b), "half_open");
    ck_assert_int_eq(policy_breaker_from_name("ajar", &b), -EINVAL);
}
END_TEST

/* ---- classify: reference default rules, one row each ---- */

struct crow {
    const char *name;
    int status;
    enum policy_transport tr;
    const char *h[4]; /* name, value, name, value */
    const char *body;
    const char *finish;
    enum policy_parsed parsed;
    bool http;
    enum policy_outcome outcome;
    const char *reason;         /* NULL: ok has no reason */
    int64_t wait_min, wait_max; /* NOCHECK, or the range of wait_ms */
};

#define W(lo, hi) lo, hi
#define ANYW      NOCHECK, NOCHECK

static const char completion_ok[] =
    "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":"
    "\"{\\\"summary\\\": \\\"ok\\\"}\"},\"finish_reason\":\"stop\"}]}";

static const struct crow crows[] = {
    /* Wall words win over status. */
    {"insufficient_quota on 429",
     429,
     0,
     {0},
     "{\"error\":{\"type\":\"insufficient_quota\",\"message\":\"You exceeded"
     " your current quota\"}}",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "insufficient_quota",
     ANYW},
    {"billing_error on 400",
     400,
     0,
     {0},
     "{\"type\":\"error\",\"error\":{\"type\":\"billing_error\"}}",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "insufficient_quota",
     ANYW},
    {"credit balance too low",
     400,
     0,
     {0},
     "Your credit balance is too low to access the API",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "insufficient_quota",
     ANYW},
    {"402 without words",
     402,
     0,
     {0},
     "pay up",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "insufficient_quota",
     ANYW},
    {"spend limit",
     429,
     0,
     {0},
     "{\"error\":{\"code\":\"project_spend_limit_exceeded\"}}",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "spend_limit",
     ANYW},
    {"PerDay quota id",
     429,
     0,
     {0},
     "{'quotaId': 'GenerateRequestsPerDayPerProjectPerModel-FreeTier'}",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "daily_cap",
     ANYW},
    {"tokens per day, wait from message",
     429,
     0,
     {0},
     "on tokens per day (TPD): Please try again in 9m38.016s.",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "daily_cap",
     W(578016, 578016)},
    {"free-models-per-day",
     429,
     0,
     {0},
     "Rate limit exceeded: free-models-per-day",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "daily_cap",
     ANYW},
    {"limit_rpd as a word",
     429,
     0,
     {0},
     "Rate limit exceeded: limit_rpd/model/x",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "daily_cap",
     ANYW},
    {"rpd inside an id is no word",
     429,
     0,
     {0},
     "rate limit for org-xrpdq7 exceeded",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     ANYW},
    {"monthly cap",
     429,
     0,
     {0},
     "monthly token quota reached",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "monthly_cap",
     ANYW},
    {"billing URL in a TPM throttle is no wall",
     429,
     0,
     {0},
     "Rate limit reached on tokens per minute (TPM). Please try again in "
     "1.5s. Upgrade at https://console.groq.com/settings/billing",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "tpm",
     W(1500, 1500)},
    {"per-minute quota with billing details is soft",
     429,
     0,
     {0},
     "{\"error\":{\"message\":\"You exceeded your current quota, please "
     "check your plan and billing details. requests per minute\","
     "\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"retryDelay\": "
     "\"20s\"}]}}",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rpm",
     W(20000, 20000)},
    {"RESOURCE_EXHAUSTED short",
     429,
     0,
     {0},
     "{\"error\":{\"status\":\"RESOURCE_EXHAUSTED\"}}",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     ANYW},
    /* The length of the wait. */
    {"retry-after over switch_wait is a wall",
     429,
     0,
     {"Retry-After", "120"},
     "rate limit",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "long_wait",
     W(120000, 120000)},
    {"retry-after equal to switch_wait stays soft",
     429,
     0,
     {"retry-after", "60"},
     "rate limit",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     W(60000, 60000)},
    {"retry-after-ms wins over retry-after",
     429,
     0,
     {"retry-after", "3", "retry-after-ms", "1500"},
     "",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     W(1500, 1500)},
    {"retry-after HTTP date",
     429,
     0,
     {"retry-after", "Mon, 30 Nov 2026 03:40:30 GMT"},
     "",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     W(30000, 30000)},
    {"exhausted window reset, not the other",
     429,
     0,
     {"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens",
      "9.816s"},
     "tokens",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     W(9816, 9816)},
    {"long reset of a window not exhausted is no wall",
     429,
     0,
     {"retry-after", "2", "x-ratelimit-reset-requests", "2m59.56s"},
     "tokens per min",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "tpm",
     W(2000, 2000)},
    {"exhausted daily request window is a wall",
     429,
     0,
     {"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests",
      "2h0m0s"},
     "",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "long_wait",
     W(7200000, 7200000)},
    {"anthropic reset time",
     429,
     0,
     {"anthropic-ratelimit-tokens-remaining", "0",
      "anthropic-ratelimit-tokens-reset", "2026-11-30T03:40:12Z"},
     "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     W(12000, 12000)},
    {"x-ratelimit-reset epoch ms",
     429,
     0,
     {"x-ratelimit-reset", "1796010005000"},
     "",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     W(5000, 5000)},
    {"x-ratelimit-reset epoch s",
     429,
     0,
     {"x-ratelimit-reset", "1796010007"},
     "",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     W(7000, 7000)},
    {"x-ratelimit-reset seconds",
     429,
     0,
     {"x-ratelimit-reset", "4"},
     "",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     W(4000, 4000)},
    {"reset by reason rpm",
     429,
     0,
     {"x-ratelimit-reset-requests", "3s", "x-ratelimit-reset-tokens", "40s"},
     "20 rpm",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rpm",
     W(3000, 3000)},
    {"reset by reason tpm",
     429,
     0,
     {"x-ratelimit-reset-requests", "30s", "x-ratelimit-reset-tokens", "5s"},
     "tokens per min",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "tpm",
     W(5000, 5000)},
    {"anthropic reset in the past",
     429,
     0,
     {"anthropic-ratelimit-requests-remaining", "0",
      "anthropic-ratelimit-requests-reset", "2026-11-30T03:00:00Z"},
     "",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     W(0, 0)},
    {"nearest reset without a hint",
     429,
     0,
     {"x-ratelimit-reset-requests", "30s", "x-ratelimit-reset-tokens", "4s"},
     "",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     W(4000, 4000)},
    {"malformed wait headers are ignored",
     429,
     0,
     {"retry-after", "-5", "x-ratelimit-reset-tokens", "soon"},
     "",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     W(-1, -1)},
    {"try again in N seconds",
     429,
     0,
     {0},
     "Rate limit is exceeded. Try again in 2 seconds.",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     W(2000, 2000)},
    {"retry after 86400 seconds is a wall",
     429,
     0,
     {0},
     "token rate limit. Please retry after 86400 seconds.",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "long_wait",
     W(86400000, 86400000)},
    /* Auth. */
    {"401", 401, 0, {0}, "{}", NULL, 0, false, POLICY_HARD_QUOTA, "auth", ANYW},
    {"403", 403, 0, {0}, "", NULL, 0, false, POLICY_HARD_QUOTA, "auth", ANYW},
    {"bad key on 400",
     400,
     0,
     {0},
     "API key not valid. Please pass a valid API key.",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "auth",
     ANYW},
    /* Sizes and context. */
    {"request too large on 429",
     429,
     0,
     {0},
     "Request too large for gpt-4o on tokens per min (TPM): Limit 30000",
     NULL,
     0,
     false,
     POLICY_TRUNCATED,
     "too_large",
     ANYW},
    {"413 without words",
     413,
     0,
     {0},
     "",
     NULL,
     0,
     false,
     POLICY_TRUNCATED,
     "too_large",
     ANYW},
    {"context on 500 (llama.cpp)",
     500,
     0,
     {0},
     "{\"error\":{\"code\":500,\"message\":\"Context size has been "
     "exceeded.\"}}",
     NULL,
     0,
     false,
     POLICY_TRUNCATED,
     "context_overflow",
     ANYW},
    {"context length on 400",
     400,
     0,
     {0},
     "This model's maximum context length is 8192 tokens",
     NULL,
     0,
     false,
     POLICY_TRUNCATED,
     "context_overflow",
     ANYW},
    {"context in a 2xx error object",
     200,
     0,
     {0},
     "{\"error\":{\"message\":\"prompt is too long: 210000 tokens\"}}",
     NULL,
     0,
     false,
     POLICY_TRUNCATED,
     "context_overflow",
     ANYW},
    /* Content policy. */
    {"content_filter on 400",
     400,
     0,
     {0},
     "{\"error\":{\"code\":\"content_filter\"}}",
     NULL,
     0,
     false,
     POLICY_REFUSED,
     "content_filter",
     ANYW},
    {"finish content_filter",
     200,
     0,
     {0},
     "{\"choices\":[{\"message\":{\"content\":\"\"},\"finish_reason\":"
     "\"content_filter\"}]}",
     NULL,
     0,
     false,
     POLICY_REFUSED,
     "content_filter",
     ANYW},
    {"message.refusal",
     200,
     0,
     {0},
     "{\"choices\":[{\"message\":{\"content\":null,\"refusal\":\"I can't\"}"
     ",\"finish_reason\":\"stop\"}]}",
     NULL,
     0,
     false,
     POLICY_REFUSED,
     "content_filter",
     ANYW},
    /* Server errors and timeouts. */
    {"500",
     500,
     0,
     {0},
     "internal",
     NULL,
     0,
     false,
     POLICY_SERVER_ERROR,
     "server",
     ANYW},
    {"503 retry-after is learned",
     503,
     0,
     {"retry-after", "7"},
     "",
     NULL,
     0,
     false,
     POLICY_SERVER_ERROR,
     "server",
     W(7000, 7000)},
    {"529",
     529,
     0,
     {0},
     "",
     NULL,
     0,
     false,
     POLICY_SERVER_ERROR,
     "overloaded",
     ANYW},
    {"overloaded on 429",
     429,
     0,
     {0},
     "model is currently overloaded with other requests",
     NULL,
     0,
     false,
     POLICY_SERVER_ERROR,
     "overloaded",
     ANYW},
    {"loading model",
     503,
     0,
     {0},
     "Loading model",
     NULL,
     0,
     false,
     POLICY_SERVER_ERROR,
     "loading",
     ANYW},
    {"HTML 502",
     502,
     0,
     {0},
     "  <!DOCTYPE html><title>502</title>",
     NULL,
     0,
     false,
     POLICY_SERVER_ERROR,
     "html_error",
     ANYW},
    {"HTML page on a 200 chat",
     200,
     0,
     {0},
     "<html><body>proxy</body>",
     NULL,
     0,
     false,
     POLICY_SERVER_ERROR,
     "html_error",
     ANYW},
    {"408", 408, 0, {0}, "", NULL, 0, false, POLICY_TIMEOUT, "timeout", ANYW},
    {"504", 504, 0, {0}, "", NULL, 0, false, POLICY_TIMEOUT, "timeout", ANYW},
    {"524 HTML",
     524,
     0,
     {0},
     "<!DOCTYPE html> 524: A timeout occurred",
     NULL,
     0,
     false,
     POLICY_TIMEOUT,
     "timeout",
     ANYW},
    {"transport timeout",
     0,
     POLICY_TRANSPORT_TIMEOUT,
     {0},
     "",
     NULL,
     0,
     false,
     POLICY_TIMEOUT,
     "timeout",
     W(-1, -1)},
    {"transport refused",
     0,
     POLICY_TRANSPORT_REFUSED,
     {0},
     "",
     NULL,
     0,
     false,
     POLICY_SERVER_ERROR,
     "refused",
     ANYW},
    {"transport reset",
     0,
     POLICY_TRANSPORT_RESET,
     {0},
     "",
     NULL,
     0,
     false,
     POLICY_SERVER_ERROR,
     "reset",
     ANYW},
    {"transport tls",
     0,
     POLICY_TRANSPORT_TLS,
     {0},
     "",
     NULL,
     0,
     false,
     POLICY_SERVER_ERROR,
     "tls",
     ANYW},
    {"transport too large",
     0,
     POLICY_TRANSPORT_TOO_LARGE,
     {0},
     "",
     NULL,
     0,
     false,
     POLICY_TRUNCATED,
     "response_too_large",
     ANYW},
    {"transport out of range",
     0,
     POLICY_TRANSPORT_COUNT,
     {0},
     "",
     NULL,
     0,
     false,
     POLICY_UNKNOWN,
     "transport",
     ANYW},
    /* 2xx. */
    {"2xx ok",
     200,
     0,
     {0},
     completion_ok,
     NULL,
     0,
     false,
     POLICY_OK,
     NULL,
     W(-1, -1)},
    {"2xx content asking to wait is no wait",
     200,
     0,
     {0},
     "{\"choices\":[{\"message\":{\"content\":\"daily: try again in 5 "
     "minutes\"},\"finish_reason\":\"stop\"}]}",
     NULL,
     0,
     false,
     POLICY_OK,
     NULL,
     W(-1, -1)},
    {"2xx error object inner 429",
     200,
     0,
     {0},
     "{\"error\":{\"code\":429,\"message\":\"slow down\"}}",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     ANYW},
    {"2xx error object inner \"502\"",
     200,
     0,
     {0},
     "[{\"error\":{\"code\":\"502\",\"message\":\"upstream\"}}]",
     NULL,
     0,
     false,
     POLICY_SERVER_ERROR,
     "server",
     ANYW},
    {"2xx error object without code",
     200,
     0,
     {0},
     "{\"object\":\"error\",\"message\":\"something\"}",
     NULL,
     0,
     false,
     POLICY_UNKNOWN,
     "error_body",
     ANYW},
    {"2xx truncated error object",
     201,
     0,
     {0},
     "{\"error\": {\"message\": \"daily limit",
     NULL,
     0,
     false,
     POLICY_HARD_QUOTA,
     "daily_cap",
     ANYW},
    {"2xx finish length",
     200,
     0,
     {0},
     completion_ok,
     "length",
     0,
     false,
     POLICY_TRUNCATED,
     "length",
     ANYW},
    {"2xx empty content",
     200,
     0,
     {0},
     "{\"choices\":[{\"message\":{\"content\":\"\"},\"finish_reason\":"
     "\"stop\"}]}",
     NULL,
     0,
     false,
     POLICY_SCHEMA_INVALID,
     "empty_output",
     ANYW},
    {"2xx tool calls without content",
     200,
     0,
     {0},
     "{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[{\"id\":"
     "\"c\"}]},\"finish_reason\":\"tool_calls\"}]}",
     NULL,
     0,
     false,
     POLICY_OK,
     NULL,
     ANYW},
    {"2xx content parts",
     200,
     0,
     {0},
     "{\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\",\"text\":"
     "\"hi\"}]}}]}",
     NULL,
     0,
     false,
     POLICY_OK,
     NULL,
     ANYW},
    {"2xx not parsed",
     200,
     0,
     {0},
     completion_ok,
     "stop",
     POLICY_PARSED_NO,
     false,
     POLICY_SCHEMA_INVALID,
     "invalid_output",
     ANYW},
    {"2xx not a completion",
     200,
     0,
     {0},
     "hello",
     NULL,
     0,
     false,
     POLICY_SCHEMA_INVALID,
     "not_a_completion",
     ANYW},
    {"2xx not a completion but parsed",
     200,
     0,
     {0},
     "hello",
     NULL,
     POLICY_PARSED_YES,
     false,
     POLICY_OK,
     NULL,
     ANYW},
    {"2xx http step", 204, 0, {0}, "", NULL, 0, true, POLICY_OK, NULL, ANYW},
    {"2xx http step error object",
     200,
     0,
     {0},
     "{\"error\":{\"code\":503}}",
     NULL,
     0,
     true,
     POLICY_SERVER_ERROR,
     "server",
     ANYW},
    {"anthropic max_tokens",
     200,
     0,
     {0},
     "{\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}]"
     ",\"stop_reason\":\"max_tokens\"}",
     NULL,
     0,
     false,
     POLICY_TRUNCATED,
     "length",
     ANYW},
    {"anthropic refusal",
     200,
     0,
     {0},
     "{\"type\":\"message\",\"content\":[],\"stop_reason\":\"refusal\"}",
     NULL,
     0,
     false,
     POLICY_REFUSED,
     "content_filter",
     ANYW},
    {"anthropic tool_use",
     200,
     0,
     {0},
     "{\"type\":\"message\",\"content\":[{\"type\":\"tool_use\"}],"
     "\"stop_reason\":\"tool_use\"}",
     NULL,
     0,
     false,
     POLICY_OK,
     NULL,
     ANYW},
    {"gemini MAX_TOKENS",
     200,
     0,
     {0},
     "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"x\"}]},"
     "\"finishReason\":\"MAX_TOKENS\"}]}",
     NULL,
     0,
     false,
     POLICY_TRUNCATED,
     "length",
     ANYW},
    {"gemini SAFETY",
     200,
     0,
     {0},
     "{\"candidates\":[{\"finishReason\":\"SAFETY\"}]}",
     NULL,
     0,
     false,
     POLICY_REFUSED,
     "content_filter",
     ANYW},
    {"gemini function call",
     200,
     0,
     {0},
     "{\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{}}]},"
     "\"finishReason\":\"STOP\"}]}",
     NULL,
     0,
     false,
     POLICY_OK,
     NULL,
     ANYW},
    {"gemini blocked prompt",
     200,
     0,
     {0},
     "{\"promptFeedback\":{\"blockReason\":\"SAFETY\"}}",
     NULL,
     0,
     false,
     POLICY_REFUSED,
     "content_filter",
     ANYW},
    /* Anything else. */
    {"404",
     404,
     0,
     {0},
     "model not found",
     NULL,
     0,
     false,
     POLICY_UNKNOWN,
     "not_found",
     ANYW},
    {"400 plain",
     400,
     0,
     {0},
     "bad",
     NULL,
     0,
     false,
     POLICY_UNKNOWN,
     "bad_request",
     ANYW},
    {"418", 418, 0, {0}, "", NULL, 0, false, POLICY_UNKNOWN, "status", ANYW},
    {"302", 302, 0, {0}, "", NULL, 0, false, POLICY_UNKNOWN, "status", ANYW},
    {"429 plain",
     429,
     0,
     {0},
     "",
     NULL,
     0,
     false,
     POLICY_SOFT_THROTTLE,
     "rate_limit",
     ANYW},
};

START_TEST(test_default_rule)
{
    const struct crow *r = &crows[_i];
    struct policy_header h[2];
    size_t nh = 0;
    struct policy_input in = {.status = r->status,
                              .transport = r->tr,
                              .finish_reason = r->finish,
                              .parsed = r->parsed,
                              .http_step = r->http};
    struct policy_class c;

    for (int k = 0; k < 4 && r->h[k] != NULL; k += 2)
        h[nh++] = (struct policy_header){r->h[k], r->h[k + 1]};
    in.headers = h;
    in.nheaders = nh;
    classify_raw(&in, r->body, strlen(r->body), NULL, NULL, &c);
    ck_assert_msg(c.outcome == r->outcome, "%s: outcome %s", r->name,
                  policy_outcome_name(c.outcome));
    if (r->reason == NULL)
        ck_assert_msg(c.reason == NULL, "%s: reason %s", r->name, c.reason);
    else
        ck_assert_msg(c.reason != NULL && strcmp(c.reason, r->reason) == 0,
                      "%s: reason %s", r->name, c.reason ? c.reason : "-");
    if (r->wait_min != NOCHECK)
        ck_assert_msg(c.wait_ms >= r->wait_min && c.wait_ms <= r->wait_max,
                      "%s: wait %lld", r->name, (long long)c.wait_ms);
    ck_assert_int_eq(c.rule, -1);
}
END_TEST

START_TEST(test_learned_windows)
{
    struct policy_header h[] = {
        {"x-ratelimit-remaining-requests", "4999"},
        {"X-RateLimit-Remaining-Tokens", " 159976 "},
        {"x-ratelimit-reset-requests", "12ms"},
        {"x-ratelimit-reset-tokens", "9ms"},
        {"x-ratelimit-remaining-tokens_usage_based", "1"},
    };
    struct policy_class c;

    classify_one(200, h, 5, completion_ok, NULL, &c);
    ck_assert_int_eq(c.outcome, POLICY_OK);
    ck_assert_int_eq(c.remaining_requests, 4999);
    ck_assert_int_eq(c.remaining_tokens, 159976);
    ck_assert_int_eq(c.requests_reset_at_ms, NOW + 12);
    ck_assert_int_eq(c.tokens_reset_at_ms, NOW + 9);
    ck_assert_int_eq(c.wait_ms, -1);
    ck_assert_int_eq(c.reset_at_ms, -1);
}
END_TEST

START_TEST(test_wall_reset_time)
{
    struct policy_header ra = {"retry-after", "600"};
    struct policy_header anth[] = {
        {"anthropic-ratelimit-requests-remaining", "0"},
        {"anthropic-ratelimit-requests-reset", "2026-11-30T05:40:00Z"},
        {"anthropic-ratelimit-output-tokens-reset", "garbage"},
    };
    struct policy_class c;

    classify_one(429, &ra, 1, "daily quota exceeded", NULL, &c);
    ck_assert_int_eq(c.outcome, POLICY_HARD_QUOTA);
    ck_assert_int_eq(c.reset_at_ms, NOW + 600000);
    classify_one(429, anth, 3, "", NULL, &c);
    ck_assert_str_eq(c.reason, "long_wait");
    ck_assert_int_eq(c.reset_at_ms, NOW + 7200000);
    ck_assert_int_eq(c.remaining_requests, 0);
    /* auth walls do not lift by themselves */
    classify_one(401, &ra, 1, "", NULL, &c);
    ck_assert_str_eq(c.reason, "auth");
    ck_assert_int_eq(c.reset_at_ms, -1);
}
END_TEST

START_TEST(test_switch_wait_from_config)
{
    struct config_policy numbers = {.switch_wait_s = 2,
                                    .escalate_after_s = 300,
                                    .max_throttle_waits = 20,
                                    .backoff_base_s = 1,
                                    .backoff_cap_s = 20};
    struct policy_header h = {"retry-after", "3"};
    struct policy_config cfg;
    struct policy_class c;

    policy_config_init(&cfg, &numbers, NULL);
    ck_assert_int_eq(cfg.switch_wait_ms, 2000);
    classify_one(429, &h, 1, "rate limit: 20 rpm", &cfg, &c);
    ck_assert_int_eq(c.outcome, POLICY_HARD_QUOTA);
    policy_config_init(&cfg, NULL, NULL);
    classify_one(429, &h, 1, "rate limit: 20 rpm", &cfg, &c);
    ck_assert_int_eq(c.outcome, POLICY_SOFT_THROTTLE);
    ck_assert_str_eq(c.reason, "rpm");
    /* out-of-range numbers fall back to defaults or saturate */
    numbers = (struct config_policy){-1, 1e300, -3, -1, 1e300};
    policy_config_init(&cfg, &numbers, NULL);
    ck_assert_int_eq(cfg.switch_wait_ms, 60000);
    ck_assert_int_eq(cfg.escalate_after_ms, POLICY_MAX_WAIT_MS);
    ck_assert_int_eq(cfg.max_throttle_waits, 20);
    ck_assert_int_eq(cfg.backoff_base_ms, 1000);
    ck_assert_int_eq(cfg.backoff_cap_ms, POLICY_MAX_WAIT_MS);
}
END_TEST

/* ---- escalation of repeated soft throttles ---- */

static enum policy_outcome
throttle_at(struct policy_streak *st, const struct policy_config *cfg,
            int status, int64_t t)
{
    struct policy_input in = {.status = status, .now_ms = t};
    const char *body = status == 200   ? completion_ok
                       : status == 429 ? "rate limit"
                                       : "internal";
    struct policy_class c;

    classify_raw(&in, body, strlen(body), cfg, st, &c);
    return c.outcome;
}

START_TEST(test_escalates_after_window)
{
    struct policy_streak st = {0, 0};

    ck_assert_int_eq(throttle_at(&st, NULL, 429, NOW), POLICY_SOFT_THROTTLE);
    ck_assert_int_eq(throttle_at(&st, NULL, 429, NOW + 100000),
                     POLICY_SOFT_THROTTLE);
    ck_assert_int_eq(throttle_at(&st, NULL, 500, NOW + 200000),
                     POLICY_SERVER_ERROR);
    ck_assert_int_eq(throttle_at(&st, NULL, 429, NOW + 299999),
                     POLICY_SOFT_THROTTLE);
    ck_assert_int_eq(st.count, 3);
    ck_assert_int_eq(throttle_at(&st, NULL, 429, NOW + 300000),
                     POLICY_HARD_QUOTA);
    /* the wall starts a fresh streak */
    ck_assert_int_eq(st.count, 0);
    ck_assert_int_eq(throttle_at(&st, NULL, 429, NOW + 400000),
                     POLICY_SOFT_THROTTLE);
}
END_TEST

START_TEST(test_success_breaks_streak)
{
    struct policy_streak st = {0, 0};

    ck_assert_int_eq(throttle_at(&st, NULL, 429, NOW), POLICY_SOFT_THROTTLE);
    ck_assert_int_eq(throttle_at(&st, NULL, 200, NOW + 200000), POLICY_OK);
    ck_assert_int_eq(st.count, 0);
    ck_assert_int_eq(throttle_at(&st, NULL, 429, NOW + 300000),
                     POLICY_SOFT_THROTTLE);
    ck_assert_int_eq(throttle_at(&st, NULL, 429, NOW + 500000),
                     POLICY_SOFT_THROTTLE);
    ck_assert_int_eq(throttle_at(&st, NULL, 429, NOW + 600000),
                     POLICY_HARD_QUOTA);
}
END_TEST

START_TEST(test_escalation_needs_several)
{
    struct config_policy numbers = {60, 0, 20, 1, 20};
    struct policy_streak st = {0, 0};
    struct policy_config cfg;
    struct policy_class c;
    struct policy_input in = {.status = 429, .now_ms = NOW};

    policy_config_init(&cfg, &numbers, NULL);
    ck_assert_int_eq(throttle_at(&st, &cfg, 429, NOW), POLICY_SOFT_THROTTLE);
    classify_raw(&in, "x", 1, &cfg, &st, &c);
    ck_assert_int_eq(c.outcome, POLICY_HARD_QUOTA);
    ck_assert_str_eq(c.reason, "escalated");
    /* without a streak there is no escalation */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(throttle_at(NULL, &cfg, 429, NOW + i * 999999),
                         POLICY_SOFT_THROTTLE);
}
END_TEST

/* ---- user rules ---- */

static policy_rules *
rules_of(const struct config_rule *r, size_t n)
{
    policy_rules *rules = NULL;
    char err[256] = "";

    ck_assert_msg(policy_rules_new(r, n, &rules, err, sizeof(err)) == 0, "%s",
                  err);
    return rules;
}

START_TEST(test_user_rule_overrides_default)
{
    struct config_rule r[] = {
        {429, "daily|insufficient_quota", NULL, NULL, "hard_quota", NULL},
        {500, "context", NULL, NULL, "server_error", "llama_hiccup"},
    };
    policy_rules *rules = rules_of(r, 2);
    struct policy_config cfg;
    struct policy_class c;

    policy_config_init(&cfg, NULL, rules);
    classify_one(429, NULL, 0, "rate limit, DAILY bucket", &cfg, &c);
    ck_assert_int_eq(c.outcome, POLICY_HARD_QUOTA);
    ck_assert_str_eq(c.reason, "rule");
    ck_assert_int_eq(c.rule, 0);
    classify_one(500, NULL, 0, "Context size has been exceeded", &cfg, &c);
    ck_assert_int_eq(c.outcome, POLICY_SERVER_ERROR);
    ck_assert_str_eq(c.reason, "llama_hiccup");
    ck_assert_int_eq(c.rule, 1);
    /* status must match: the default rules decide */
    classify_one(400, NULL, 0, "context length exceeded", &cfg, &c);
    ck_assert_int_eq(c.outcome, POLICY_TRUNCATED);
    ck_assert_int_eq(c.rule, -1);
    policy_rules_free(rules);
}
END_TEST

START_TEST(test_user_rule_header_and_order)
{
    struct config_rule r[] = {
        {0, NULL, "x-provider", "^groq$", "refused", "groq_rule"},
        {0, "quota", NULL, NULL, "soft_throttle", "first"},
        {0, "quota", NULL, NULL, "hard_quota", "second"},
    };
    policy_rules *rules = rules_of(r, 3);
    struct policy_header groq = {"X-Provider", "GROQ"};
    struct policy_header other = {"x-provider", "groqq"};
    struct policy_header ra = {"retry-after", "3600"};
    struct policy_config cfg;
    struct policy_class c;

    policy_config_init(&cfg, NULL, rules);
    classify_one(200, &groq, 1, completion_ok, &cfg, &c);
    ck_assert_str_eq(c.reason, "groq_rule");
    classify_one(200, &other, 1, completion_ok, &cfg, &c);
    ck_assert_int_eq(c.outcome, POLICY_OK);
    /* first match wins; a rule's throttle stays soft despite the wait */
    classify_one(429, &ra, 1, "daily quota", &cfg, &c);
    ck_assert_int_eq(c.outcome, POLICY_SOFT_THROTTLE);
    ck_assert_str_eq(c.reason, "first");
    ck_assert_int_eq(c.wait_ms, 3600000);
    policy_rules_free(rules);
}
END_TEST

START_TEST(test_user_rule_sees_past_nul)
{
    struct config_rule r[] = {{0, "tier_gone", NULL, NULL, "hard_quota", NULL}};
    policy_rules *rules = rules_of(r, 1);
    struct policy_input in = {.status = 418};
    struct policy_config cfg;
    struct policy_class c;
    static const char body[] = "\0\0binary\0tier_gone";

    policy_config_init(&cfg, NULL, rules);
    classify_raw(&in, body, sizeof(body) - 1, &cfg, NULL, &c);
    ck_assert_int_eq(c.outcome, POLICY_HARD_QUOTA);
    policy_rules_free(NULL);
    policy_rules_free(rules);
}
END_TEST

#define A16       "aaaaaaaaaaaaaaaa"
#define A256      A16 A16 A16 A16 A16 A16 A16 A16 A16 A16 A16 A16 A16 A16 A16 A16
#define LONG_RULE A256 A256 A256 A256 "a"

struct badrule {
    struct config_rule r[3];
    size_t n;
    const char *prefix;
};

static const struct badrule badrules[] = {
    {{{0, "ok", NULL, NULL, "ok", NULL},
      {429, "(unclosed", NULL, NULL, "hard_quota", NULL}},
     2,
     "classify[1].body: "},
    {{{0, NULL, "x-a", "[z-a]", "hard_quota", NULL}},
     1,
     "classify[0].header_value: "},
    {{{0, NULL, NULL, NULL, "ok", NULL},
      {0, NULL, NULL, NULL, "ok", NULL},
      {0, "x", NULL, NULL, "backoff", NULL}},
     3,
     "classify[2].outcome: "},
    {{{0, NULL, NULL, NULL, NULL, NULL}}, 1, "classify[0].outcome: "},
    /* Regular expressions that would make glibc's regcomp take gigabytes
     * (found by fuzz/fuzz_config) are refused before compiling. */
    {{{0, "a++++++++++++++++++++", NULL, NULL, "ok", NULL}},
     1,
     "classify[0].body: refused: a repetition of a repetition"},
    {{{0, "a{2}{2}", NULL, NULL, "ok", NULL}},
     1,
     "classify[0].body: refused: a repetition of a repetition"},
    {{{0, "x{256}", NULL, NULL, "ok", NULL}},
     1,
     "classify[0].body: refused: a repetition bound above 255"},
    /* fuzz/regressions/config-bound-overflow.json: a bound strtol
     * saturates, then "+ 1" overflowed */
    {{{0, "{95555555555555555555555555555,}", NULL, NULL, "refused", NULL}},
     1,
     "classify[0].body: refused: a repetition bound above 255"},
    {{{0, "a+b+c+d+e+f+g+h+i+j+k+l+m+", NULL, NULL, "ok", NULL}},
     1,
     "classify[0].body: refused: too many repetitions"},
    {{{0, NULL, "x-a", "(((((((((((((a+)+)+)+)+)+)+)+)+)+)+)+)+)+", "ok",
       NULL}},
     1,
     "classify[0].header_value: refused: too many repetitions"},
    {{{0, ".{2,300}", NULL, NULL, "ok", NULL}},
     1,
     "classify[0].body: refused: a repetition bound above 255"},
    {{{0, LONG_RULE, NULL, NULL, "ok", NULL}},
     1,
     "classify[0].body: refused: longer than 1024 characters"},
};

/* Rules that look like stacked repetitions but are not: escaped
 * operators, operators inside brackets, open bounds, optional parts. */
START_TEST(test_cheap_rules_compile)
{
    static const char *const ok[] = {"\\+\\+\\+\\+", "[+*]{2}", "[]+]+",
                                     "[^]+]+x",      "a{2,}b",  "x*y?z",
                                     "a{,2}",        "per.?day"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct config_rule r = {0, (char *)ok[i], NULL, NULL, "ok", NULL};
        policy_rules *rules = NULL;
        char err[256] = "";
        ck_assert_msg(policy_rules_new(&r, 1, &rules, err, sizeof(err)) == 0,
                      "%s: %s", ok[i], err);
        policy_rules_free(rules);
    }
}
END_TEST

START_TEST(test_bad_rule_is_named)
{
    const struct badrule *b = &badrules[_i];
    policy_rules *rules = (policy_rules *)&rules;
    policy_rules *before = rules;
    char err[256] = "";

    ck_assert_int_eq(policy_rules_new(b->r, b->n, &rules, err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_eq(rules, before);
    ck_assert_msg(strncmp(err, b->prefix, strlen(b->prefix)) == 0, "err: %s",
                  err);
}
END_TEST

/* ---- decide: every branch of the table ---- */

struct drow {
    const char *name;
    enum policy_outcome outcome;
    const char *reason;
    int64_t wait_ms;  /* server's wait, -1 none */
    int64_t reset_in; /* wall reset from now, -1 unknown */
    const char *mods; /* changes to the default step, see apply_mods */
    enum policy_action want;
    const char *want_reason;
    int64_t wait_min, wait_max;
};

/* apply_mods edits the reference default step: "al=0 tiers=0 side idem write
 * !replayable degraded schema_retried in=5000 budget=8000 slack=2000 tw=20
 * au=3 breaker=open|half". */
static void
apply_mods(struct policy_step *s, const char *mods)
{
    char buf[256], *tok, *save = NULL;

    *s = (struct policy_step){.attempts_left = 2,
                              .attempts_used = 1,
                              .input_tokens = 1200,
                              .token_budget = 8000,
                              .tiers_left = 1,
                              .replayable = true,
                              .slack_ms = 90000,
                              .now_ms = NOW,
                              .seed = 42};
    snprintf(buf, sizeof(buf), "%s", mods);
    for (tok = strtok_r(buf, " ", &save); tok != NULL;
         tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        long long v = eq ? atoll(eq + 1) : 0;
        if (eq != NULL)
            *eq = '\0';
        if (strcmp(tok, "al") == 0)
            s->attempts_left = (int)v;
        else if (strcmp(tok, "au") == 0)
            s->attempts_used = (int)v;
        else if (strcmp(tok, "in") == 0)
            s->input_tokens = v;
        else if (strcmp(tok, "budget") == 0)
            s->token_budget = v;
        else if (strcmp(tok, "tiers") == 0)
            s->tiers_left = (int)v;
        else if (strcmp(tok, "slack") == 0)
            s->slack_ms = v;
        else if (strcmp(tok, "tw") == 0)
            s->throttle_waits_used = (int)v;
        else if (strcmp(tok, "side") == 0)
            s->side_effects = true;
        else if (strcmp(tok, "idem") == 0)
            s->idempotency_key = true;
        else if (strcmp(tok, "write") == 0)
            s->write_may_have_happened = true;
        else if (strcmp(tok, "!replayable") == 0)
            s->replayable = false;
        else if (strcmp(tok, "degraded") == 0)
            s->degraded = true;
        else if (strcmp(tok, "schema_retried") == 0)
            s->schema_retried = true;
        else if (strcmp(tok, "breaker") == 0)
            s->breaker = strcmp(eq + 1, "open") == 0 ? POLICY_BREAKER_OPEN
                                                     : POLICY_BREAKER_HALF_OPEN;
        else
            ck_abort_msg("bad mod %s", tok);
    }
}

#define T  POLICY_TRUNCATED
#define SI POLICY_SCHEMA_INVALID
#define SE POLICY_SERVER_ERROR
#define TO POLICY_TIMEOUT
#define HQ POLICY_HARD_QUOTA
#define RF POLICY_REFUSED
#define ST POLICY_SOFT_THROTTLE

static const struct drow drows[] = {
    /* 1 */
    {"ok commits", POLICY_OK, NULL, -1, -1, "side write", POLICY_COMMIT, "ok",
     W(0, 0)},
    /* 2: in doubt */
    {"truncated in doubt", T, "length", -1, -1, "side write",
     POLICY_PARK_FOR_HUMAN, "in_doubt", ANYW},
    {"schema in doubt", SI, "empty_output", -1, -1, "side write",
     POLICY_PARK_FOR_HUMAN, "in_doubt", ANYW},
    {"server_error in doubt", SE, "server", -1, -1, "side write",
     POLICY_PARK_FOR_HUMAN, "in_doubt", ANYW},
    {"timeout in doubt", TO, "timeout", -1, -1, "side write",
     POLICY_PARK_FOR_HUMAN, "in_doubt", ANYW},
    {"unknown in doubt", POLICY_UNKNOWN, "status", -1, -1, "side write",
     POLICY_PARK_FOR_HUMAN, "in_doubt", ANYW},
    {"no write, no doubt", SE, "server", -1, -1, "side", POLICY_BACKOFF_RETRY,
     "backoff", W(0, 1000)},
    {"idempotency key, no doubt", SE, "server", -1, -1, "side idem write",
     POLICY_BACKOFF_RETRY, "backoff", W(0, 1000)},
    {"hard_quota is never in doubt", HQ, "daily_cap", -1, -1,
     "side write !replayable", POLICY_PARK_FOR_HUMAN, "hard_quota", ANYW},
    /* a request refused before it ran (the reference, as amended) is not in
     * doubt, even on a 5xx (llama.cpp says context overflow with 500) */
    {"context_overflow is not in doubt", T, "context_overflow", -1, -1,
     "side write !replayable", POLICY_FAIL_LOUD, "truncated", ANYW},
    {"too_large is not in doubt", T, "too_large", -1, -1,
     "side write !replayable", POLICY_FAIL_LOUD, "truncated", ANYW},
    {"context_overflow with side effects switches", T, "context_overflow", -1,
     -1, "side write", POLICY_SWITCH_TIER_REPLAY, "too_large_switch", ANYW},
    {"response_too_large is in doubt", T, "response_too_large", -1, -1,
     "side write !replayable in=5000", POLICY_PARK_FOR_HUMAN, "in_doubt", ANYW},
    /* 3: throttle waits */
    {"throttle waits the server's wait", ST, "rpm", 3000, -1, "",
     POLICY_BACKOFF_RETRY, "throttle_wait", W(3000, 3000)},
    {"throttle jitter without a server wait", ST, "rpm", -1, -1, "tw=2",
     POLICY_BACKOFF_RETRY, "throttle_wait", W(0, 4000)},
    {"throttle jitter is capped", ST, "rpm", -1, -1, "tw=19",
     POLICY_BACKOFF_RETRY, "throttle_wait", W(0, 20000)},
    {"throttle waits do not use attempts", ST, "rpm", 3000, -1, "al=0",
     POLICY_BACKOFF_RETRY, "throttle_wait", W(3000, 3000)},
    /* 4: throttle switches */
    {"throttle wait beyond slack switches", ST, "tpm", 9816, -1, "slack=2000",
     POLICY_SWITCH_TIER_REPLAY, "throttle_switch", W(0, 0)},
    {"throttle wait equal to slack switches", ST, "tpm", 5000, -1, "slack=5000",
     POLICY_SWITCH_TIER_REPLAY, "throttle_switch", ANYW},
    {"throttle waits used up switch", ST, "rpm", 1000, -1, "tw=20",
     POLICY_SWITCH_TIER_REPLAY, "throttle_switch", ANYW},
    {"throttle idempotent switch", ST, "rpm", 9000, -1,
     "slack=1000 !replayable idem side", POLICY_SWITCH_TIER_REPLAY,
     "throttle_switch", ANYW},
    {"throttle not replayable fails", ST, "rpm", 9000, -1,
     "slack=1000 !replayable", POLICY_FAIL_LOUD, "soft_throttle", ANYW},
    {"throttle no tier fails", ST, "rpm", 9000, -1, "slack=1000 tiers=0",
     POLICY_FAIL_LOUD, "soft_throttle", ANYW},
    /* 5: degrade */
    {"truncated big input degrades", T, "length", -1, -1, "in=5000",
     POLICY_DEGRADE_THEN_RETRY, "degrade", W(0, 0)},
    {"schema big input degrades", SI, "invalid_output", -1, -1, "in=5000",
     POLICY_DEGRADE_THEN_RETRY, "degrade", ANYW},
    {"60% exactly does not degrade", T, "length", -1, -1, "in=4800",
     POLICY_FAIL_LOUD, "truncated", ANYW},
    {"degrade only once", T, "length", -1, -1, "in=5000 degraded",
     POLICY_FAIL_LOUD, "truncated", ANYW},
    {"degrade needs attempts", T, "length", -1, -1, "in=5000 al=0",
     POLICY_FAIL_LOUD, "truncated", ANYW},
    {"no budget, no degrade", T, "length", -1, -1, "in=5000 budget=0",
     POLICY_FAIL_LOUD, "truncated", ANYW},
    /* an answer past max_response_bytes: the input is not the problem */
    {"response_too_large does not degrade", T, "response_too_large", -1, -1,
     "in=5000", POLICY_FAIL_LOUD, "truncated", ANYW},
    /* the seed scenario of issue 12: one request planned to fit 4000 */
    {"seed: 2770 of 4000 degrades", T, "length", -1, -1, "in=2770 budget=4000",
     POLICY_DEGRADE_THEN_RETRY, "degrade", W(0, 0)},
    /* 6: schema retry */
    {"schema retries once without wait", SI, "empty_output", 5000, -1, "",
     POLICY_BACKOFF_RETRY, "schema_retry", W(0, 0)},
    {"schema retried already", SI, "empty_output", -1, -1, "schema_retried",
     POLICY_FAIL_LOUD, "schema_invalid", ANYW},
    {"schema without attempts", SI, "empty_output", -1, -1, "al=0",
     POLICY_FAIL_LOUD, "schema_invalid", ANYW},
    /* 7: too large switches */
    {"too_large switches", T, "too_large", -1, -1, "side",
     POLICY_SWITCH_TIER_REPLAY, "too_large_switch", ANYW},
    {"context_overflow switches", T, "context_overflow", -1, -1, "",
     POLICY_SWITCH_TIER_REPLAY, "too_large_switch", ANYW},
    {"length does not switch", T, "length", -1, -1, "", POLICY_FAIL_LOUD,
     "truncated", ANYW},
    {"too_large without tier", T, "too_large", -1, -1, "tiers=0",
     POLICY_FAIL_LOUD, "truncated", ANYW},
    {"too_large not replayable", T, "too_large", -1, -1, "!replayable",
     POLICY_FAIL_LOUD, "truncated", ANYW},
    /* 8: park walls and refusals with side effects */
    {"hard_quota side effects parks", HQ, "daily_cap", -1, -1, "side",
     POLICY_PARK_FOR_HUMAN, "hard_quota", ANYW},
    {"refused side effects parks", RF, "content_filter", -1, -1, "side",
     POLICY_PARK_FOR_HUMAN, "refused", ANYW},
    /* 9: switch */
    {"hard_quota switches", HQ, "daily_cap", -1, -1, "",
     POLICY_SWITCH_TIER_REPLAY, "wall_switch", ANYW},
    {"hard_quota keyed side effects switch", HQ, "daily_cap", -1, -1,
     "side idem", POLICY_SWITCH_TIER_REPLAY, "wall_switch", ANYW},
    {"refused switches", RF, "content_filter", -1, -1, "",
     POLICY_SWITCH_TIER_REPLAY, "refused_switch", ANYW},
    {"hard_quota not replayable fails", HQ, "daily_cap", -1, -1, "!replayable",
     POLICY_FAIL_LOUD, "hard_quota", ANYW},
    {"refused without tier fails", RF, "content_filter", -1, -1, "tiers=0",
     POLICY_FAIL_LOUD, "refused", ANYW},
    /* 10: wait for the wall */
    {"wall resets within slack", HQ, "daily_cap", 578016, 578016,
     "tiers=0 slack=700000", POLICY_BACKOFF_RETRY, "wall_reset",
     W(578016, 578016)},
    {"wall resets at slack", HQ, "daily_cap", -1, 700000,
     "tiers=0 slack=700000", POLICY_BACKOFF_RETRY, "wall_reset",
     W(700000, 700000)},
    {"wall past reset retries now", HQ, "daily_cap", -1, -5000, "tiers=0",
     POLICY_BACKOFF_RETRY, "wall_reset", W(0, 0)},
    {"wall beyond slack fails", HQ, "daily_cap", -1, 578016, "tiers=0",
     POLICY_FAIL_LOUD, "hard_quota", ANYW},
    {"wall without reset fails", HQ, "auth", -1, -1, "tiers=0",
     POLICY_FAIL_LOUD, "hard_quota", ANYW},
    /* 11: server error backoff */
    {"server_error backs off", SE, "server", -1, -1, "au=3",
     POLICY_BACKOFF_RETRY, "backoff", W(0, 4000)},
    {"first attempt not counted yet", SE, "server", -1, -1, "au=0",
     POLICY_BACKOFF_RETRY, "backoff", W(0, 1000)},
    {"timeout backs off", TO, "timeout", -1, -1, "", POLICY_BACKOFF_RETRY,
     "backoff", W(0, 1000)},
    {"server wait is honoured", SE, "server", 7000, -1, "",
     POLICY_BACKOFF_RETRY, "backoff", W(7000, 7000)},
    /* 12: server error switch */
    {"server wait beyond slack switches", SE, "server", 7000, -1, "slack=5000",
     POLICY_SWITCH_TIER_REPLAY, "failure_switch", ANYW},
    {"no attempts switches", SE, "overloaded", -1, -1, "al=0",
     POLICY_SWITCH_TIER_REPLAY, "failure_switch", ANYW},
    {"open breaker switches", SE, "server", -1, -1, "breaker=open",
     POLICY_SWITCH_TIER_REPLAY, "failure_switch", ANYW},
    {"half-open breaker switches", TO, "timeout", -1, -1, "breaker=half",
     POLICY_SWITCH_TIER_REPLAY, "failure_switch", ANYW},
    {"negative slack switches", TO, "timeout", -1, -1, "slack=-1",
     POLICY_SWITCH_TIER_REPLAY, "failure_switch", ANYW},
    /* 13: fail loud */
    {"server error with nowhere to go", SE, "server", -1, -1, "al=0 tiers=0",
     POLICY_FAIL_LOUD, "server_error", ANYW},
    {"server error not replayable", SE, "server", -1, -1, "al=0 !replayable",
     POLICY_FAIL_LOUD, "server_error", ANYW},
    {"unknown fails", POLICY_UNKNOWN, "not_found", -1, -1, "", POLICY_FAIL_LOUD,
     "unknown", W(0, 0)},
};

START_TEST(test_decide_row)
{
    const struct drow *r = &drows[_i];
    struct policy_class c = {r->outcome,
                             r->reason,
                             -1,
                             r->wait_ms,
                             r->reset_in == -1 ? -1 : NOW + r->reset_in,
                             -1,
                             -1,
                             -1,
                             -1};
    struct policy_step s;
    struct policy_decision d;

    apply_mods(&s, r->mods);
    policy_decide(&c, &s, NULL, &d);
    ck_assert_msg(d.action == r->want, "%s: got %s", r->name,
                  policy_action_name(d.action));
    ck_assert_msg(strcmp(d.reason, r->want_reason) == 0, "%s: reason %s",
                  r->name, d.reason);
    if (r->wait_min != NOCHECK)
        ck_assert_msg(d.wait_ms >= r->wait_min && d.wait_ms <= r->wait_max,
                      "%s: wait %lld", r->name, (long long)d.wait_ms);
}
END_TEST

START_TEST(test_backoff_jitter)
{
    struct policy_config cfg;
    int64_t lo = INT64_MAX, hi = 0;

    policy_config_init(&cfg, NULL, NULL);
    for (uint64_t seed = 0; seed < 2000; seed++) {
        int64_t w = policy_backoff_ms(&cfg, 3, seed);
        ck_assert_int_eq(w, policy_backoff_ms(&cfg, 3, seed));
        lo = w < lo ? w : lo;
        hi = w > hi ? w : hi;
    }
    /* full jitter over [0, 8 s]: the draws spread over the window */
    ck_assert_int_lt(lo, 500);
    ck_assert_int_gt(hi, 7500);
    ck_assert_int_le(hi, 8000);
    ck_assert_int_le(policy_backoff_ms(&cfg, 1000, 7), 20000);
    cfg.backoff_base_ms = -5;
    ck_assert_int_eq(policy_backoff_ms(&cfg, 3, 7), 0);
}
END_TEST

START_TEST(test_write_may_have_happened)
{
    static const struct {
        int status;
        enum policy_transport tr;
        bool want;
    } rows[] = {
        {200, 0, true},
        {204, 0, true},
        {500, 0, true},
        {529, 0, true},
        {524, 0, true},
        {408, 0, true},
        {429, 0, false},
        {400, 0, false},
        {302, 0, false},
        {0, POLICY_TRANSPORT_TIMEOUT, true},
        {0, POLICY_TRANSPORT_RESET, true},
        {0, POLICY_TRANSPORT_TOO_LARGE, true},
        {0, POLICY_TRANSPORT_REFUSED, false},
        {0, POLICY_TRANSPORT_TLS, false},
    };

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct policy_input in = {.status = rows[i].status,
                                  .transport = rows[i].tr};
        ck_assert_msg(policy_write_may_have_happened(&in) == rows[i].want,
                      "row %zu", i);
    }
    ck_assert(policy_counts_for_breaker(POLICY_SERVER_ERROR));
    ck_assert(policy_counts_for_breaker(POLICY_TIMEOUT));
    ck_assert(!policy_counts_for_breaker(POLICY_TRUNCATED));
    ck_assert(!policy_counts_for_breaker(POLICY_HARD_QUOTA));
}
END_TEST

/* ---- header parsers against malformed values ---- */

enum pkind { DUR, RA, DATE };

struct prow {
    enum pkind kind;
    const char *in;
    int rc;
    int64_t want;
};

static const struct prow prows[] = {
    {DUR, "6m0s", 0, 360000},
    {DUR, "1.5s", 0, 1500},
    {DUR, "20ms", 0, 20},
    {DUR, "2m59.56s", 0, 179560},
    {DUR, "9m38.016s", 0, 578016},
    {DUR, "1h2m3s", 0, 3723000},
    {DUR, " 7.66s ", 0, 7660},
    {DUR, "0", 0, 0},
    {DUR, "1500us", 0, 2},
    {DUR, "99999999999999999999999h", 0, POLICY_MAX_WAIT_MS},
    {DUR, "", -EINVAL, 0},
    {DUR, "-1s", -EINVAL, 0},
    {DUR, "5", -EINVAL, 0},
    {DUR, "1.5", -EINVAL, 0},
    {DUR, "s", -EINVAL, 0},
    {DUR, "abc", -EINVAL, 0},
    {DUR, "1x", -EINVAL, 0},
    {DUR, "1s garbage", -EINVAL, 0},
    {DUR, "1e3s", -EINVAL, 0},
    {DUR, "1 s", -EINVAL, 0},
    {DUR, "2 seconds", -EINVAL, 0},
    {DUR, "1.s", -EINVAL, 0},
    {DUR, "5sec", -EINVAL, 0},
    {RA, "20", 0, 20000},
    {RA, " 3 ", 0, 3000},
    {RA, "0", 0, 0},
    {RA, "1.5", 0, 1500},
    {RA, "99999999999999999999", 0, POLICY_MAX_WAIT_MS},
    {RA, "Mon, 30 Nov 2026 03:41:00 GMT", 0, 60000},
    {RA, "Sun, 06 Nov 1994 08:49:37 GMT", 0, 0},
    {RA, "Monday, 30-Nov-26 03:40:05 GMT", 0, 5000},
    {RA, "Mon Nov 30 03:40:09 2026", 0, 9000},
    {RA, "Mon, 30 Nov 9999 03:40:00 GMT", 0, POLICY_MAX_WAIT_MS},
    {RA, "-1", -EINVAL, 0},
    {RA, "", -EINVAL, 0},
    {RA, "soon", -EINVAL, 0},
    {RA, "20s", -EINVAL, 0},
    {RA, "1e3", -EINVAL, 0},
    {RA, "Mon, 32 Nov 2026 03:40:00 GMT", -EINVAL, 0},
    {RA, "Mon, 30 Foo 2026 03:40:00 GMT", -EINVAL, 0},
    {RA, "Mon, 30 Nov 2026 25:40:00 GMT", -EINVAL, 0},
    {RA, "Mon, 30 Nov 2026 03:40:00 GMT junk", -EINVAL, 0},
    {RA, "Mon, 30 Nov 2026 03:40:00 PST", -EINVAL, 0},
    {RA, "Mon, 30 Nov 1969 03:40:00 GMT", -EINVAL, 0},
    {DATE, "Sun, 06 Nov 1994 08:49:37 GMT", 0, 784111777000},
    {DATE, "Sunday, 06-Nov-94 08:49:37 GMT", 0, 784111777000},
    {DATE, "Sun Nov  6 08:49:37 1994", 0, 784111777000},
    {DATE, "Sun, 06 Nov 1994 08:49:37", -EINVAL, 0},
    {DATE, "Sun, -6 Nov 1994 08:49:37 GMT", -EINVAL, 0},
    {DATE, "Sun, 06 November 1994 08:49:37 GMT", -EINVAL, 0},
    {DATE, "Sun, 06 Nov 1994 08:60:37 GMT", -EINVAL, 0},
    {DATE, "Sun, 06 Nov 1994 08:49:61 GMT", -EINVAL, 0},
    {DATE, "Sun, 00 Nov 1994 08:49:37 GMT", -EINVAL, 0},
    {DATE, "Sun, 06 Nov 10000 08:49:37 GMT", -EINVAL, 0},
    {DATE, "Sun, 06 Nov 1994 -8:49:37 GMT", -EINVAL, 0},
    {DUR, "-0", -EINVAL, 0},
};

START_TEST(test_header_parser)
{
    const struct prow *r = &prows[_i];
    int64_t got = -42;
    int rc = -1;

    if (r->kind == DUR)
        rc = policy_parse_duration(r->in, &got);
    else if (r->kind == RA)
        rc = policy_parse_retry_after(r->in, NOW, &got);
    else
        rc = policy_parse_http_date(r->in, &got);
    ck_assert_msg(rc == r->rc, "'%s': rc %d", r->in, rc);
    if (r->rc == 0)
        ck_assert_msg(got == r->want, "'%s': got %lld", r->in, (long long)got);
    else
        ck_assert_msg(got == -42, "'%s': out touched on failure", r->in);
}
END_TEST

START_TEST(test_parsers_take_null)
{
    int64_t v = 7;

    ck_assert_int_eq(policy_parse_duration(NULL, &v), -EINVAL);
    ck_assert_int_eq(policy_parse_retry_after(NULL, NOW, &v), -EINVAL);
    ck_assert_int_eq(policy_parse_http_date(NULL, &v), -EINVAL);
    ck_assert_int_eq(v, 7);
}
END_TEST

START_TEST(test_malformed_counts_ignored)
{
    struct policy_header h[] = {
        {"x-ratelimit-remaining-requests", "-3"},
        {"x-ratelimit-remaining-tokens", "99999999999999999999999"},
        {"anthropic-ratelimit-tokens-reset", "2026-13-45T99:00:00Z"},
        {"anthropic-ratelimit-requests-reset",
         "2026-11-30T03:40:00Z 2026-11-30T03:40:00Z 2026-11-30T03:40:00Z "},
        {"retry-after-ms", "abc"},
        {"x-ratelimit-reset", "-1"},
        {NULL, "x"},
        {"retry-after", NULL},
    };
    struct policy_class c;

    classify_one(429, h, 8, "", NULL, &c);
    ck_assert_int_eq(c.outcome, POLICY_SOFT_THROTTLE);
    ck_assert_int_eq(c.remaining_requests, -1);
    ck_assert_int_eq(c.remaining_tokens, INT64_MAX);
    ck_assert_int_eq(c.tokens_reset_at_ms, -1);
    ck_assert_int_eq(c.requests_reset_at_ms, -1);
    ck_assert_int_eq(c.wait_ms, -1);
}
END_TEST

/* ---- hostile bodies ---- */

enum hbody {
    EMPTY,
    BINARY,
    BAD_UTF8,
    TRUNC_JSON,
    MIB_TEXT,
    MIB_OPEN,
    MIB_NEST,
    MIB_ERROR,
    HBODY_COUNT
};

static char *
make_body(enum hbody kind, size_t *len)
{
    size_t mib = 1024 * 1024;
    char *b = xmalloc(mib + 16);

    switch (kind) {
    case EMPTY:
        *len = 0;
        break;
    case BINARY:
        for (size_t i = 0; i < 4096; i++)
            b[i] = (char)(i * 7 % 256);
        *len = 4096;
        break;
    case BAD_UTF8:
        memcpy(b, "{\"error\":\"\xff\xfe\xc0\xaf rate limit\xed\xa0\x80\"}",
               27);
        *len = 27;
        break;
    case TRUNC_JSON:
        memcpy(b, "{\"choices\":[{\"message\":{\"content\":\"hel", 38);
        *len = 38;
        break;
    case MIB_TEXT:
        memset(b, 'a', mib);
        *len = mib;
        break;
    case MIB_OPEN:
        memset(b, '[', mib);
        *len = mib;
        break;
    case MIB_NEST:
        for (size_t i = 0; i + 5 <= mib; i += 5)
            memcpy(b + i, "{\"a\":", 5);
        *len = mib - mib % 5;
        break;
    default:
        for (size_t i = 0; i + 9 <= mib; i += 9)
            memcpy(b + i, "{\"error\":", 9);
        *len = mib - mib % 9;
        break;
    }
    return b;
}

START_TEST(test_hostile_body)
{
    static const int statuses[] = {200, 429, 500};
    struct config_rule r[] = {{0, "zzz$", "x-a", "b", "ok", NULL}};
    policy_rules *rules = rules_of(r, 1);
    struct policy_config cfg;
    size_t len = 0;
    char *body = make_body((enum hbody)_i, &len);

    policy_config_init(&cfg, NULL, rules);
    for (size_t s = 0; s < 3; s++) {
        struct policy_input in = {.status = statuses[s]};
        struct policy_streak st = {0, 0};
        struct policy_class c;
        classify_raw(&in, body, len, &cfg, &st, &c);
        ck_assert_int_lt(c.outcome, POLICY_OUTCOME_COUNT);
        ck_assert_int_eq(c.rule, -1);
        if (statuses[s] != 200)
            ck_assert(c.outcome != POLICY_OK && c.reason != NULL);
    }
    free(body);
    policy_rules_free(rules);
}
END_TEST

START_TEST(test_wall_word_after_nul)
{
    static const char body[] = "\0\0\0{\"error\":\"insufficient_quota\"}";
    struct policy_input in = {.status = 429};
    struct policy_class c;

    classify_raw(&in, body, sizeof(body) - 1, NULL, NULL, &c);
    ck_assert_int_eq(c.outcome, POLICY_HARD_QUOTA);
    /* and a NULL body with a length is read as empty */
    in.body = NULL;
    in.body_len = 99;
    in.now_ms = NOW;
    policy_classify(&in, NULL, NULL, &c);
    ck_assert_int_eq(c.outcome, POLICY_SOFT_THROTTLE);
}
END_TEST

/* ---- stepq policy check ---- */

static int
count_cases(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;
    cJSON *root;
    int count;

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    rewind(f);
    buf = xmalloc((size_t)n + 1);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    root = cJSON_Parse(buf);
    ck_assert_ptr_nonnull(root);
    count = cJSON_GetArraySize(root);
    cJSON_Delete(root);
    free(buf);
    return count;
}

static const char *const tables[] = {"tests/cases/seed-cases.json",
                                     "tests/cases/provider-errors.json"};

START_TEST(test_cli_table_passes)
{
    char *dir = tmpdir_new();
    char *cfg = tmpdir_write(dir, "stepq.json", "{}", 2);
    char *path = source_path(tables[_i]);
    int n = count_cases(path);
    const char *argv[] = {"policy", "check", path, "--config", cfg, NULL};
    struct run_result res;
    char want[64];

    ck_assert_int_gt(n, 0);
    run_stepq(argv, NULL, &res);
    snprintf(want, sizeof(want), "\n%d passed, 0 failed\n", n);
    ck_assert_msg(res.status == 0, "exit %d\n%s%s", res.status, res.out,
                  res.err);
    ck_assert_msg(strstr(res.out, want) != NULL, "%s", res.out);
    ck_assert_ptr_null(strstr(res.out, "FAIL "));
    run_result_free(&res);
    free(path);
    free(cfg);
    tmpdir_remove(dir);
}
END_TEST

static const char failing_table[] =
    "[{\"name\": \"good\", \"response\": {\"status\": 500, \"body\": "
    "\"internal\"}, \"want\": {\"outcome\": \"server_error\", "
    "\"decision\": \"backoff_retry\"}, \"note\": \"ignored\"},\n"
    " {\"name\": \"bad one\", \"response\": {\"status\": 429, \"headers\": "
    "{\"retry-after\": 3}, \"body\": \"rate limit\"}, \"step\": "
    "{\"slack_s\": 90}, \"want\": {\"outcome\": \"ok\", \"decision\": "
    "\"commit\", \"reason\": \"none\", \"wait_s\": [0, 0]}}]";

START_TEST(test_cli_failing_case)
{
    char *dir = tmpdir_new();
    char *cfg = tmpdir_write(dir, "stepq.json", "{}", 2);
    char *cases =
        tmpdir_write(dir, "cases.json", failing_table, strlen(failing_table));
    const char *argv[] = {"--config", cfg, "policy", "check", cases, NULL};
    struct run_result res;

    run_stepq(argv, NULL, &res);
    ck_assert_int_eq(res.status, 1);
    ck_assert_msg(strstr(res.out, "PASS good\n") != NULL, "%s", res.out);
    ck_assert_msg(strstr(res.out, "FAIL bad one: got outcome=soft_throttle "
                                  "reason=rate_limit decision="
                                  "backoff_retry wait_s=3.000, want "
                                  "outcome=ok reason=none decision=commit "
                                  "wait_s=[0, 0]\n") != NULL,
                  "%s", res.out);
    ck_assert_msg(strstr(res.out, "1 passed, 1 failed\n") != NULL, "%s",
                  res.out);
    run_result_free(&res);
    free(cases);
    free(cfg);
    tmpdir_remove(dir);
}
END_TEST

struct badfile {
    const char *text; /* NULL: the file does not exist */
    const char *args; /* "": policy check FILE; else these args */
    const char *err;  /* expected in stderr */
};

static const struct badfile badfiles[] = {
    {"[{\"name\": \"x\",", "", "not valid JSON (line 1, column"},
    {"{}", "", "must be a JSON array"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200}, \"want\": "
     "{\"outcome\": \"ok\"}}, {\"name\": \"b\", \"response\": {\"status\": "
     "\"429\"}, \"want\": {\"outcome\": \"ok\"}}]",
     "", "[1].response.status"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200}, \"want\": "
     "{\"outcome\": \"fine\"}}]",
     "", "[0].want.outcome: unknown outcome"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200}, \"want\": "
     "{\"outcome\": \"ok\", \"decision\": \"retry\"}}]",
     "", "[0].want.decision"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200}, \"want\": "
     "{\"outcome\": \"ok\", \"wait_s\": [3, 1]}}]",
     "", "[0].want.wait_s"},
    {"[{\"name\": \"a\", \"response\": {\"transport_error\": \"dns\"}, "
     "\"want\": {\"outcome\": \"ok\"}}]",
     "", "[0].response.transport_error"},
    {"[{\"name\": \"a\", \"response\": {}, \"want\": {\"outcome\": "
     "\"ok\"}}]",
     "", "[0].response.status: missing"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200, "
     "\"transport_error\": \"reset\"}, \"want\": {\"outcome\": \"ok\"}}]",
     "", "[0].response: status and transport_error"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200, \"headers\": "
     "{\"x\": [1]}}, \"want\": {\"outcome\": \"ok\"}}]",
     "", "[0].response.headers.x"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200}, \"step\": "
     "{\"breaker\": \"ajar\"}, \"want\": {\"outcome\": \"ok\"}}]",
     "", "[0].step.breaker"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200}, \"step\": "
     "{\"replayable\": \"yes\"}, \"want\": {\"outcome\": \"ok\"}}]",
     "", "[0].step.replayable"},
    {"[{\"response\": {\"status\": 200}, \"want\": {\"outcome\": \"ok\"}}]", "",
     "[0].name"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200}}]", "",
     "[0].want: missing"},
    {"[{\"name\": \"a\", \"now\": \"yesterday\", \"response\": {\"status\": "
     "200}, \"want\": {\"outcome\": \"ok\"}}]",
     "", "[0].now"},
    {"[3]", "", "[0]: must be an object"},
    {NULL, "", "no such file"},
    {"[]", "policy", "usage: stepq policy check"},
    {"[]", "policy frob", "unknown subcommand 'frob'"},
    {"[]", "policy check", "missing CASES.json"},
    {"[]", "policy check a b", "unexpected argument"},
    {"[]", "policy check --nope", "unknown option --nope"},
};

START_TEST(test_cli_bad_input_exits_2)
{
    const struct badfile *b = &badfiles[_i];
    char *dir = tmpdir_new();
    char *cfg = tmpdir_write(dir, "stepq.json", "{}", 2);
    char *cases = b->text
                      ? tmpdir_write(dir, "c.json", b->text, strlen(b->text))
                      : tmpdir_join(dir, "missing.json");
    const char *argv[8] = {"--config", cfg, "policy", "check", cases, NULL};
    char args[64];
    struct run_result res;

    if (b->args[0] != '\0') {
        int n = 2;
        snprintf(args, sizeof(args), "%s", b->args);
        for (char *t = strtok(args, " "); t != NULL; t = strtok(NULL, " "))
            argv[n++] = t;
        argv[n] = NULL;
    }
    run_stepq(argv, NULL, &res);
    ck_assert_msg(res.status == 2, "exit %d: %s", res.status, res.err);
    ck_assert_msg(strstr(res.err, b->err) != NULL, "stderr: %s", res.err);
    ck_assert_str_eq(res.out, "");
    run_result_free(&res);
    free(cases);
    free(cfg);
    tmpdir_remove(dir);
}
END_TEST

START_TEST(test_cli_help)
{
    const char *argv1[] = {"policy", "--help", NULL};
    const char *argv2[] = {"policy", "check", "--help", NULL};
    struct run_result res;

    run_stepq(argv1, NULL, &res);
    ck_assert_int_eq(res.status, 0);
    ck_assert_ptr_nonnull(strstr(res.out, "usage: stepq policy check"));
    run_result_free(&res);
    run_stepq(argv2, NULL, &res);
    ck_assert_int_eq(res.status, 0);
    ck_assert_ptr_nonnull(strstr(res.out, "N passed, M failed"));
    run_result_free(&res);
}
END_TEST

static const char rule_table[] =
    "[{\"name\": \"llama 500\", \"now\": \"2026-11-30T03:40:00Z\", "
    "\"response\": {\"status\": 500, \"body\": {\"error\": \"slot busy\"}}, "
    "\"want\": {\"outcome\": \"soft_throttle\", \"reason\": \"busy\"}},"
    " {\"name\": \"short wait is a wall\", \"response\": {\"status\": 429, "
    "\"headers\": {\"retry-after\": \"3\"}, \"body\": \"rate limit\"}, "
    "\"want\": {\"outcome\": \"hard_quota\", \"reason\": \"long_wait\"}}]";

START_TEST(test_cli_applies_config)
{
    static const char conf[] =
        "{\"policy\": {\"switch_wait_s\": 2},"
        " \"classify\": [{\"status\": 500, \"body\": \"slot busy\","
        " \"outcome\": \"soft_throttle\", \"reason\": \"busy\"}]}";
    static const char bad[] =
        "{\"classify\": [{\"body\": \"(\", \"outcome\": \"ok\"}]}";
    char *dir = tmpdir_new();
    char *cfg = tmpdir_write(dir, "stepq.json", conf, strlen(conf));
    char *badcfg = tmpdir_write(dir, "bad.json", bad, strlen(bad));
    char *empty = tmpdir_write(dir, "empty.json", "{}", 2);
    char *cases = tmpdir_write(dir, "c.json", rule_table, strlen(rule_table));
    const char *argv[] = {"policy", "check", cases, "--config", cfg, NULL};
    struct run_result res;

    run_stepq(argv, NULL, &res);
    ck_assert_msg(res.status == 0, "%s%s", res.out, res.err);
    ck_assert_ptr_nonnull(strstr(res.out, "2 passed, 0 failed"));
    run_result_free(&res);
    argv[4] = empty;
    run_stepq(argv, NULL, &res);
    ck_assert_int_eq(res.status, 1);
    ck_assert_ptr_nonnull(strstr(res.out, "0 passed, 2 failed"));
    run_result_free(&res);
    argv[4] = badcfg;
    run_stepq(argv, NULL, &res);
    ck_assert_int_eq(res.status, 2);
    ck_assert_msg(strstr(res.err, "classify[0].body: ") != NULL, "%s", res.err);
    run_result_free(&res);
    free(cases);
    free(empty);
    free(badcfg);
    free(cfg);
    tmpdir_remove(dir);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("policy");
    TCase *tc;

    tc = tcase_create("names");
    tcase_add_loop_test(tc, test_outcome_names_round_trip, 0,
                        POLICY_OUTCOME_COUNT);
    tcase_add_loop_test(tc, test_action_names_round_trip, 0,
                        POLICY_ACTION_COUNT);
    tcase_add_test(tc, test_names_as_spec_prints);
    suite_add_tcase(s, tc);

    tc = tcase_create("classify");
    tcase_add_loop_test(tc, test_default_rule, 0,
                        (int)(sizeof(crows) / sizeof(crows[0])));
    tcase_add_test(tc, test_learned_windows);
    tcase_add_test(tc, test_wall_reset_time);
    tcase_add_test(tc, test_switch_wait_from_config);
    suite_add_tcase(s, tc);

    tc = tcase_create("escalation");
    tcase_add_test(tc, test_escalates_after_window);
    tcase_add_test(tc, test_success_breaks_streak);
    tcase_add_test(tc, test_escalation_needs_several);
    suite_add_tcase(s, tc);

    tc = tcase_create("user_rules");
    tcase_add_test(tc, test_user_rule_overrides_default);
    tcase_add_test(tc, test_user_rule_header_and_order);
    tcase_add_test(tc, test_user_rule_sees_past_nul);
    tcase_add_loop_test(tc, test_bad_rule_is_named, 0,
                        (int)(sizeof(badrules) / sizeof(badrules[0])));
    tcase_add_test(tc, test_cheap_rules_compile);
    suite_add_tcase(s, tc);

    tc = tcase_create("decide");
    tcase_add_loop_test(tc, test_decide_row, 0,
                        (int)(sizeof(drows) / sizeof(drows[0])));
    tcase_add_test(tc, test_backoff_jitter);
    tcase_add_test(tc, test_write_may_have_happened);
    suite_add_tcase(s, tc);

    tc = tcase_create("parsers");
    tcase_add_loop_test(tc, test_header_parser, 0,
                        (int)(sizeof(prows) / sizeof(prows[0])));
    tcase_add_test(tc, test_parsers_take_null);
    tcase_add_test(tc, test_malformed_counts_ignored);
    suite_add_tcase(s, tc);

    tc = tcase_create("hostile_bodies");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_hostile_body, 0, HBODY_COUNT);
    tcase_add_test(tc, test_wall_word_after_nul);
    suite_add_tcase(s, tc);

    tc = tcase_create("cli");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_cli_table_passes, 0, 2);
    tcase_add_test(tc, test_cli_failing_case);
    tcase_add_loop_test(tc, test_cli_bad_input_exits_2, 0,
                        (int)(sizeof(badfiles) / sizeof(badfiles[0])));
    tcase_add_test(tc, test_cli_help);
    tcase_add_test(tc, test_cli_applies_config);
    suite_add_tcase(s, tc);
    return s;
}

/* test_policy_classify.c: policy_classify against the reference's default
 * rules, one table row per case, the waits and windows it learns from headers,
 * and the escalation of a streak of soft throttles. */
#include "tests/support/support.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "policy/policy.h"
#include "tests/test_policy_support.h"

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

/* Row macros, so that a row is a line or three and not one field per line:
 * ERR an error answer (status and body), HDR one with headers (H(name,
 * value, ...)), NET a transport failure, OK2 a 2xx with the finish_reason,
 * parsed and http_step inputs. W(lo, hi) is the range wait_ms must fall in;
 * ANYW checks no wait. clang-format would spread each body over four lines.
 */
/* clang-format off */
#define W(lo, hi) .wait_min = lo, .wait_max = hi
#define ANYW      W(NOCHECK, NOCHECK)
#define H(...)    {__VA_ARGS__}
#define ERR(nm, st, bd, oc, rs, wt) \
    {.name = nm, .status = st, .body = bd, .outcome = oc, .reason = rs, wt}
#define HDR(nm, st, hd, bd, oc, rs, wt) \
    {.name = nm, .status = st, .h = hd, .body = bd, .outcome = oc, \
     .reason = rs, wt}
#define NET(nm, trn, oc, rs, wt) \
    {.name = nm, .tr = trn, .body = "", .outcome = oc, .reason = rs, wt}
#define OK2(nm, st, bd, fin, prs, htp, oc, rs, wt) \
    {.name = nm, .status = st, .body = bd, .finish = fin, .parsed = prs, \
     .http = htp, .outcome = oc, .reason = rs, wt}
/* clang-format on */

static const struct crow crows[] = {
    /* Wall words win over status. */
    ERR("insufficient_quota on 429", 429,
        "{\"error\":{\"type\":\"insufficient_quota\",\"message\":\"You exceeded"
        " your current quota\"}}",
        POLICY_HARD_QUOTA, "insufficient_quota", ANYW),
    ERR("billing_error on 400", 400,
        "{\"type\":\"error\",\"error\":{\"type\":\"billing_error\"}}",
        POLICY_HARD_QUOTA, "insufficient_quota", ANYW),
    ERR("credit balance too low", 400,
        "Your credit balance is too low to access the API", POLICY_HARD_QUOTA,
        "insufficient_quota", ANYW),
    ERR("402 without words", 402, "pay up", POLICY_HARD_QUOTA,
        "insufficient_quota", ANYW),
    ERR("spend limit", 429,
        "{\"error\":{\"code\":\"project_spend_limit_exceeded\"}}",
        POLICY_HARD_QUOTA, "spend_limit", ANYW),
    ERR("PerDay quota id", 429,
        "{'quotaId': 'GenerateRequestsPerDayPerProjectPerModel-FreeTier'}",
        POLICY_HARD_QUOTA, "daily_cap", ANYW),
    ERR("tokens per day, wait from message", 429,
        "on tokens per day (TPD): Please try again in 9m38.016s.",
        POLICY_HARD_QUOTA, "daily_cap", W(578016, 578016)),
    ERR("free-models-per-day", 429, "Rate limit exceeded: free-models-per-day",
        POLICY_HARD_QUOTA, "daily_cap", ANYW),
    ERR("limit_rpd as a word", 429, "Rate limit exceeded: limit_rpd/model/x",
        POLICY_HARD_QUOTA, "daily_cap", ANYW),
    ERR("rpd inside an id is no word", 429,
        "rate limit for org-xrpdq7 exceeded", POLICY_SOFT_THROTTLE,
        "rate_limit", ANYW),
    ERR("monthly cap", 429, "monthly token quota reached", POLICY_HARD_QUOTA,
        "monthly_cap", ANYW),
    ERR("billing URL in a TPM throttle is no wall", 429,
        "Rate limit reached on tokens per minute (TPM). Please try again in "
        "1.5s. Upgrade at https://console.groq.com/settings/billing",
        POLICY_SOFT_THROTTLE, "tpm", W(1500, 1500)),
    ERR("per-minute quota with billing details is soft", 429,
        "{\"error\":{\"message\":\"You exceeded your current quota, please "
        "check your plan and billing details. requests per minute\","
        "\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"retryDelay\": "
        "\"20s\"}]}}",
        POLICY_SOFT_THROTTLE, "rpm", W(20000, 20000)),
    ERR("RESOURCE_EXHAUSTED short", 429,
        "{\"error\":{\"status\":\"RESOURCE_EXHAUSTED\"}}", POLICY_SOFT_THROTTLE,
        "rate_limit", ANYW),
    /* The length of the wait. */
    HDR("retry-after over switch_wait is a wall", 429, H("Retry-After", "120"),
        "rate limit", POLICY_HARD_QUOTA, "long_wait", W(120000, 120000)),
    HDR("retry-after equal to switch_wait stays soft", 429,
        H("retry-after", "60"), "rate limit", POLICY_SOFT_THROTTLE,
        "rate_limit", W(60000, 60000)),
    HDR("retry-after-ms wins over retry-after", 429,
        H("retry-after", "3", "retry-after-ms", "1500"), "",
        POLICY_SOFT_THROTTLE, "rate_limit", W(1500, 1500)),
    HDR("retry-after HTTP date", 429,
        H("retry-after", "Mon, 30 Nov 2026 03:40:30 GMT"), "",
        POLICY_SOFT_THROTTLE, "rate_limit", W(30000, 30000)),
    HDR("exhausted window reset, not the other", 429,
        H("x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens",
          "9.816s"),
        "tokens", POLICY_SOFT_THROTTLE, "rate_limit", W(9816, 9816)),
    HDR("long reset of a window not exhausted is no wall", 429,
        H("retry-after", "2", "x-ratelimit-reset-requests", "2m59.56s"),
        "tokens per min", POLICY_SOFT_THROTTLE, "tpm", W(2000, 2000)),
    HDR("exhausted daily request window is a wall", 429,
        H("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests",
          "2h0m0s"),
        "", POLICY_HARD_QUOTA, "long_wait", W(7200000, 7200000)),
    HDR("anthropic reset time", 429,
        H("anthropic-ratelimit-tokens-remaining", "0",
          "anthropic-ratelimit-tokens-reset", "2026-11-30T03:40:12Z"),
        "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}",
        POLICY_SOFT_THROTTLE, "rate_limit", W(12000, 12000)),
    HDR("x-ratelimit-reset epoch ms", 429,
        H("x-ratelimit-reset", "1796010005000"), "", POLICY_SOFT_THROTTLE,
        "rate_limit", W(5000, 5000)),
    HDR("x-ratelimit-reset epoch s", 429, H("x-ratelimit-reset", "1796010007"),
        "", POLICY_SOFT_THROTTLE, "rate_limit", W(7000, 7000)),
    HDR("x-ratelimit-reset seconds", 429, H("x-ratelimit-reset", "4"), "",
        POLICY_SOFT_THROTTLE, "rate_limit", W(4000, 4000)),
    HDR("reset by reason rpm", 429,
        H("x-ratelimit-reset-requests", "3s", "x-ratelimit-reset-tokens",
          "40s"),
        "20 rpm", POLICY_SOFT_THROTTLE, "rpm", W(3000, 3000)),
    HDR("reset by reason tpm", 429,
        H("x-ratelimit-reset-requests", "30s", "x-ratelimit-reset-tokens",
          "5s"),
        "tokens per min", POLICY_SOFT_THROTTLE, "tpm", W(5000, 5000)),
    HDR("anthropic reset in the past", 429,
        H("anthropic-ratelimit-requests-remaining", "0",
          "anthropic-ratelimit-requests-reset", "2026-11-30T03:00:00Z"),
        "", POLICY_SOFT_THROTTLE, "rate_limit", W(0, 0)),
    HDR("nearest reset without a hint", 429,
        H("x-ratelimit-reset-requests", "30s", "x-ratelimit-reset-tokens",
          "4s"),
        "", POLICY_SOFT_THROTTLE, "rate_limit", W(4000, 4000)),
    HDR("malformed wait headers are ignored", 429,
        H("retry-after", "-5", "x-ratelimit-reset-tokens", "soon"), "",
        POLICY_SOFT_THROTTLE, "rate_limit", W(-1, -1)),
    /* A header wait or reset more than a day away is bogus and ignored:
     * the body and status decide. A day exactly is still believed. */
    HDR("retry-after 99999999999 is ignored", 429,
        H("retry-after", "99999999999"), "rate limit", POLICY_SOFT_THROTTLE,
        "rate_limit", W(-1, -1)),
    HDR("retry-after a day and a second is ignored", 429,
        H("retry-after", "86401"), "", POLICY_SOFT_THROTTLE, "rate_limit",
        W(-1, -1)),
    HDR("retry-after HTTP date 70 years ahead is ignored", 429,
        H("retry-after", "Fri, 30 Nov 2096 03:40:00 GMT"), "",
        POLICY_SOFT_THROTTLE, "rate_limit", W(-1, -1)),
    HDR("huge retry-after-ms is ignored", 429,
        H("retry-after-ms", "99999999999999999"), "", POLICY_SOFT_THROTTLE,
        "rate_limit", W(-1, -1)),
    HDR("ignored retry-after-ms leaves retry-after", 429,
        H("retry-after-ms", "99999999999999999", "retry-after", "3"), "",
        POLICY_SOFT_THROTTLE, "rate_limit", W(3000, 3000)),
    HDR("ignored retry-after leaves a daily cap by its words", 429,
        H("retry-after", "99999999999"), "tokens per day (TPD)",
        POLICY_HARD_QUOTA, "daily_cap", W(-1, -1)),
    HDR("retry-after of exactly a day is a wall", 429,
        H("retry-after", "86400"), "rate limit", POLICY_HARD_QUOTA, "long_wait",
        W(86400000, 86400000)),
    HDR("retry-after-ms of exactly a day is a wall", 429,
        H("retry-after-ms", "86400000"), "", POLICY_HARD_QUOTA, "long_wait",
        W(86400000, 86400000)),
    HDR("exhausted window reset past a day is ignored", 429,
        H("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests",
          "9999h"),
        "", POLICY_SOFT_THROTTLE, "rate_limit", W(-1, -1)),
    ERR("try again in N seconds", 429,
        "Rate limit is exceeded. Try again in 2 seconds.", POLICY_SOFT_THROTTLE,
        "rate_limit", W(2000, 2000)),
    ERR("retry after 86400 seconds is a wall", 429,
        "token rate limit. Please retry after 86400 seconds.",
        POLICY_HARD_QUOTA, "long_wait", W(86400000, 86400000)),
    /* A text may name a month's wait (a monthly quota), never more: past
     * 31 days the text is bogus and names no wait. */
    ERR("try again in 30 days is a wall", 429,
        "Rate limit reached. Please try again in 720h.", POLICY_HARD_QUOTA,
        "long_wait", W(2592000000, 2592000000)),
    ERR("try again in 99999999999999999999999s is ignored", 429,
        "Rate limit reached. Please try again in 99999999999999999999999s.",
        POLICY_SOFT_THROTTLE, "rate_limit", W(-1, -1)),
    ERR("a retryDelay of millennia is ignored", 429,
        "{\"error\":{\"status\":\"RESOURCE_EXHAUSTED\",\"details\":"
        "[{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\","
        "\"retryDelay\":\"99999999999999s\"}]}}",
        POLICY_SOFT_THROTTLE, "rate_limit", W(-1, -1)),
    /* Auth. */
    ERR("401", 401, "{}", POLICY_HARD_QUOTA, "auth", ANYW),
    ERR("403", 403, "", POLICY_HARD_QUOTA, "auth", ANYW),
    ERR("bad key on 400", 400,
        "API key not valid. Please pass a valid API key.", POLICY_HARD_QUOTA,
        "auth", ANYW),
    /* Sizes and context. */
    ERR("request too large on 429", 429,
        "Request too large for gpt-4o on tokens per min (TPM): Limit 30000",
        POLICY_TRUNCATED, "too_large", ANYW),
    ERR("413 without words", 413, "", POLICY_TRUNCATED, "too_large", ANYW),
    ERR("context on 500 (llama.cpp)", 500,
        "{\"error\":{\"code\":500,\"message\":\"Context size has been "
        "exceeded.\"}}",
        POLICY_TRUNCATED, "context_overflow", ANYW),
    ERR("context length on 400", 400,
        "This model's maximum context length is 8192 tokens", POLICY_TRUNCATED,
        "context_overflow", ANYW),
    /* The three providers' own 400s for a prompt over the context, as
     * they answer them (OpenAI's documented body, Anthropic's and
     * Gemini's from tests/data/native/): the tool loop trims on these. */
    ERR("OpenAI context_length_exceeded", 400,
        "{\"error\":{\"message\":\"This model's maximum context length "
        "is 128000 tokens. However, your messages resulted in 130412 tokens. "
        "Please reduce the length of the messages.\",\"type\":"
        "\"invalid_request_error\",\"param\":\"messages\",\"code\":"
        "\"context_length_exceeded\"}}",
        POLICY_TRUNCATED, "context_overflow", ANYW),
    ERR("Anthropic prompt is too long", 400,
        "{\"type\":\"error\",\"error\":{\"type\":"
        "\"invalid_request_error\",\"message\":\"prompt is too long: "
        "215341 tokens > 200000 maximum\"},\"request_id\":"
        "\"req_011CSHoEeqs5C35K2UUqR7G0\"}",
        POLICY_TRUNCATED, "context_overflow", ANYW),
    ERR("Gemini input token count", 400,
        "{\"error\":{\"code\":400,\"message\":\"The input token count "
        "(1253410) exceeds the maximum number of tokens allowed "
        "(1048576).\",\"status\":\"INVALID_ARGUMENT\"}}",
        POLICY_TRUNCATED, "context_overflow", ANYW),
    ERR("context in a 2xx error object", 200,
        "{\"error\":{\"message\":\"prompt is too long: 210000 tokens\"}}",
        POLICY_TRUNCATED, "context_overflow", ANYW),
    /* Content policy. */
    ERR("content_filter on 400", 400,
        "{\"error\":{\"code\":\"content_filter\"}}", POLICY_REFUSED,
        "content_filter", ANYW),
    ERR("finish content_filter", 200,
        "{\"choices\":[{\"message\":{\"content\":\"\"},\"finish_reason\":"
        "\"content_filter\"}]}",
        POLICY_REFUSED, "content_filter", ANYW),
    ERR("message.refusal", 200,
        "{\"choices\":[{\"message\":{\"content\":null,\"refusal\":\"I can't\"}"
        ",\"finish_reason\":\"stop\"}]}",
        POLICY_REFUSED, "content_filter", ANYW),
    /* Server errors and timeouts. */
    ERR("500", 500, "internal", POLICY_SERVER_ERROR, "server", ANYW),
    HDR("503 retry-after is learned", 503, H("retry-after", "7"), "",
        POLICY_SERVER_ERROR, "server", W(7000, 7000)),
    ERR("529", 529, "", POLICY_SERVER_ERROR, "overloaded", ANYW),
    ERR("overloaded on 429", 429,
        "model is currently overloaded with other requests",
        POLICY_SERVER_ERROR, "overloaded", ANYW),
    ERR("loading model", 503, "Loading model", POLICY_SERVER_ERROR, "loading",
        ANYW),
    ERR("HTML 502", 502, "  <!DOCTYPE html><title>502</title>",
        POLICY_SERVER_ERROR, "html_error", ANYW),
    ERR("HTML page on a 200 chat", 200, "<html><body>proxy</body>",
        POLICY_SERVER_ERROR, "html_error", ANYW),
    ERR("408", 408, "", POLICY_TIMEOUT, "timeout", ANYW),
    ERR("504", 504, "", POLICY_TIMEOUT, "timeout", ANYW),
    ERR("524 HTML", 524, "<!DOCTYPE html> 524: A timeout occurred",
        POLICY_TIMEOUT, "timeout", ANYW),
    NET("transport timeout", POLICY_TRANSPORT_TIMEOUT, POLICY_TIMEOUT,
        "timeout", W(-1, -1)),
    NET("transport refused", POLICY_TRANSPORT_REFUSED, POLICY_SERVER_ERROR,
        "refused", ANYW),
    NET("transport reset", POLICY_TRANSPORT_RESET, POLICY_SERVER_ERROR, "reset",
        ANYW),
    NET("transport tls", POLICY_TRANSPORT_TLS, POLICY_SERVER_ERROR, "tls",
        ANYW),
    NET("transport tls certificate", POLICY_TRANSPORT_TLS_CERTIFICATE,
        POLICY_HARD_QUOTA, "tls_certificate", ANYW),
    NET("transport too large", POLICY_TRANSPORT_TOO_LARGE, POLICY_TRUNCATED,
        "response_too_large", ANYW),
    NET("transport bad response", POLICY_TRANSPORT_BAD_RESPONSE,
        POLICY_SERVER_ERROR, "bad_response", ANYW),
    NET("transport out of range", POLICY_TRANSPORT_COUNT, POLICY_UNKNOWN,
        "transport", ANYW),
    /* 2xx. */
    ERR("2xx ok", 200, completion_ok, POLICY_OK, NULL, W(-1, -1)),
    ERR("2xx content asking to wait is no wait", 200,
        "{\"choices\":[{\"message\":{\"content\":\"daily: try again in 5 "
        "minutes\"},\"finish_reason\":\"stop\"}]}",
        POLICY_OK, NULL, W(-1, -1)),
    ERR("2xx error object inner 429", 200,
        "{\"error\":{\"code\":429,\"message\":\"slow down\"}}",
        POLICY_SOFT_THROTTLE, "rate_limit", ANYW),
    ERR("2xx error object inner \"502\"", 200,
        "[{\"error\":{\"code\":\"502\",\"message\":\"upstream\"}}]",
        POLICY_SERVER_ERROR, "server", ANYW),
    ERR("2xx error object without code", 200,
        "{\"object\":\"error\",\"message\":\"something\"}", POLICY_UNKNOWN,
        "error_body", ANYW),
    ERR("2xx truncated error object", 201,
        "{\"error\": {\"message\": \"daily limit", POLICY_HARD_QUOTA,
        "daily_cap", ANYW),
    OK2("2xx finish length", 200, completion_ok, "length", 0, false,
        POLICY_TRUNCATED, "length", ANYW),
    ERR("2xx empty content", 200,
        "{\"choices\":[{\"message\":{\"content\":\"\"},\"finish_reason\":"
        "\"stop\"}]}",
        POLICY_SCHEMA_INVALID, "empty_output", ANYW),
    ERR("2xx tool calls without content", 200,
        "{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[{\"id\":"
        "\"c\"}]},\"finish_reason\":\"tool_calls\"}]}",
        POLICY_OK, NULL, ANYW),
    ERR("2xx content parts", 200,
        "{\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\",\"text\":"
        "\"hi\"}]}}]}",
        POLICY_OK, NULL, ANYW),
    OK2("2xx not parsed", 200, completion_ok, "stop", POLICY_PARSED_NO, false,
        POLICY_SCHEMA_INVALID, "invalid_output", ANYW),
    ERR("2xx not a completion", 200, "hello", POLICY_SCHEMA_INVALID,
        "not_a_completion", ANYW),
    OK2("2xx not a completion but parsed", 200, "hello", NULL,
        POLICY_PARSED_YES, false, POLICY_OK, NULL, ANYW),
    OK2("2xx http step", 204, "", NULL, 0, true, POLICY_OK, NULL, ANYW),
    OK2("2xx http step error object", 200, "{\"error\":{\"code\":503}}", NULL,
        0, true, POLICY_SERVER_ERROR, "server", ANYW),
    ERR("anthropic max_tokens", 200,
        "{\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}]"
        ",\"stop_reason\":\"max_tokens\"}",
        POLICY_TRUNCATED, "length", ANYW),
    ERR("anthropic refusal", 200,
        "{\"type\":\"message\",\"content\":[],\"stop_reason\":\"refusal\"}",
        POLICY_REFUSED, "content_filter", ANYW),
    ERR("anthropic tool_use", 200,
        "{\"type\":\"message\",\"content\":[{\"type\":\"tool_use\"}],"
        "\"stop_reason\":\"tool_use\"}",
        POLICY_OK, NULL, ANYW),
    ERR("gemini MAX_TOKENS", 200,
        "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"x\"}]},"
        "\"finishReason\":\"MAX_TOKENS\"}]}",
        POLICY_TRUNCATED, "length", ANYW),
    ERR("gemini SAFETY", 200,
        "{\"candidates\":[{\"finishReason\":\"SAFETY\"}]}", POLICY_REFUSED,
        "content_filter", ANYW),
    ERR("gemini function call", 200,
        "{\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{}}]},"
        "\"finishReason\":\"STOP\"}]}",
        POLICY_OK, NULL, ANYW),
    ERR("gemini blocked prompt", 200,
        "{\"promptFeedback\":{\"blockReason\":\"SAFETY\"}}", POLICY_REFUSED,
        "content_filter", ANYW),
    /* A gateway's own failures (policy/gateway.c; the real answers are
     * tests/cases/gateway-errors.json), and look-alikes that are not. */
    ERR("gateway 400 failure", 400,
        "{\"status\":\"failure\",\"message\":\"Invalid config passed\"}",
        POLICY_UNKNOWN, "gateway_config", ANYW),
    ERR("gateway 400 failure, spaced", 400,
        " { \"message\": \"x\", \"status\": \"failure\" }", POLICY_UNKNOWN,
        "gateway_config", ANYW),
    ERR("gateway 401 failure is auth", 401,
        "{\"status\":\"failure\",\"message\":\"Invalid API Key\"}",
        POLICY_HARD_QUOTA, "auth", ANYW),
    ERR("gateway 400 failure with throttle words", 400,
        "{\"status\":\"failure\",\"message\":\"rate limit exceeded\"}",
        POLICY_SOFT_THROTTLE, "rate_limit", ANYW),
    ERR("gateway 502 failure", 502,
        "{\"status\":\"failure\",\"message\":\"x\"}", POLICY_SERVER_ERROR,
        "gateway_error", ANYW),
    ERR("failure without message", 400, "{\"status\":\"failure\"}",
        POLICY_UNKNOWN, "bad_request", ANYW),
    ERR("failure as an array", 400, "[{\"status\":\"failure\"}]",
        POLICY_UNKNOWN, "bad_request", ANYW),
    ERR("gateway exception 500", 500,
        "{\"html-message\":\"Message: fetch failed Cause: NA Name: "
        "TypeError\"}",
        POLICY_SERVER_ERROR, "gateway_error", ANYW),
    ERR("wrapped HTML 502", 502,
        "{\"html-message\":\"<html><title>502</title></html>\"}",
        POLICY_SERVER_ERROR, "html_error", ANYW),
    ERR("wrapped text 503", 503, "{\"html-message\":\"upstream reset\"}",
        POLICY_SERVER_ERROR, "server", ANYW),
    ERR("wrapped text 400", 400,
        "{\"html-message\":\"Message: a Cause: b "
        "Name: c\"}",
        POLICY_UNKNOWN, "bad_request", ANYW),
    ERR("Message without Cause", 500, "{\"html-message\":\"Message: x\"}",
        POLICY_SERVER_ERROR, "server", ANYW),
    ERR("gateway exception cut off", 500,
        "{\"html-message\":\"Message: ", POLICY_SERVER_ERROR, "server", ANYW),
    /* Anything else. */
    ERR("404", 404, "model not found", POLICY_UNKNOWN, "not_found", ANYW),
    ERR("400 plain", 400, "bad", POLICY_UNKNOWN, "bad_request", ANYW),
    ERR("418", 418, "", POLICY_UNKNOWN, "status", ANYW),
    ERR("302", 302, "", POLICY_UNKNOWN, "status", ANYW),
    ERR("429 plain", 429, "", POLICY_SOFT_THROTTLE, "rate_limit", ANYW),
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
    /* A wall lifts at now + wait, and not by itself without one. */
    if (c.outcome == POLICY_HARD_QUOTA && strcmp(c.reason, "auth") != 0)
        ck_assert_msg(c.reset_at_ms == (c.wait_ms >= 0 ? NOW + c.wait_ms : -1),
                      "%s: reset_at %lld", r->name, (long long)c.reset_at_ms);
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

Suite *
test_suite(void)
{
    Suite *s = suite_create("policy_classify");
    TCase *tc;

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
    return s;
}

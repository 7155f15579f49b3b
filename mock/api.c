/* api.c: which protocol the mock speaks on a route ("api": openai,
 * anthropic, gemini): its chat requests, the first checks of one, and its
 * error bodies, each passed to the protocol's own file (anthropic.c,
 * gemini.c) or built in OpenAI's shape (body.c).
 */
#include "mock/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

bool
mock__is_chat(const struct mock_route *r, const struct mock_request *rq)
{
    static const char *const paths[] = {"/chat/completions",
                                        "/chat/completions/"};
    size_t n = strlen(rq->path);

    switch (r->api) {
    case MOCK_API_ANTHROPIC:
        return mock__anthropic_is_chat(rq);
    case MOCK_API_GEMINI:
        return mock__gemini_is_chat(rq);
    case MOCK_API_OPENAI:
        break;
    }
    if (strcmp(rq->method, "POST") != 0)
        return false;
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(paths); i++) {
        size_t m = strlen(paths[i]);
        if (n >= m && strcmp(rq->path + n - m, paths[i]) == 0)
            return true;
    }
    return false;
}

char *
mock__api_error(enum mock_api api, int status, const char *message,
                const char *type, const char *code)
{
    switch (api) {
    case MOCK_API_ANTHROPIC:
        return mock__anthropic_status_error(status, message);
    case MOCK_API_GEMINI:
        return mock__gemini_error(status, message, NULL, -1);
    case MOCK_API_OPENAI:
        break;
    }
    if (message == NULL)
        return mock__status_error_body(status);
    return mock__error_body(message, type, code);
}

/* openai_request_ok checks a chat request's body the way OpenAI does before
 * anything else: a JSON object with a non-empty "messages" array. On a
 * refusal it writes OpenAI's message into msg and its code into *code. */
static bool
openai_request_ok(const cJSON *req, char *msg, size_t len, const char **code)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(req, "messages");

    if (!cJSON_IsObject(req)) {
        snprintf(msg, len,
                 "We could not parse the JSON body of your request. (HINT: "
                 "This likely means you aren't using your HTTP library "
                 "correctly. The OpenAI API expects a JSON payload, but what "
                 "was sent was not valid JSON.)");
        *code = NULL;
        return false;
    }
    if (m == NULL) {
        snprintf(msg, len, "Missing required parameter: 'messages'.");
        *code = "missing_required_parameter";
        return false;
    }
    if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) == 0) {
        snprintf(msg, len,
                 "Invalid 'messages': expected an array with minimum length "
                 "1.");
        *code = cJSON_IsArray(m) ? "empty_array" : "invalid_type";
        return false;
    }
    *code = NULL;
    return mock__tool_messages_ok(req, msg, len);
}

bool
mock__api_request_ok(enum mock_api api, const cJSON *req, char *msg, size_t len,
                     const char **code)
{
    *code = NULL;
    switch (api) {
    case MOCK_API_ANTHROPIC:
        return mock__anthropic_request_ok(req, msg, len);
    case MOCK_API_GEMINI:
        return mock__gemini_request_ok(req, msg, len);
    case MOCK_API_OPENAI:
        break;
    }
    return openai_request_ok(req, msg, len, code);
}

char *
mock__quota_body(enum mock_api api)
{
    switch (api) {
    case MOCK_API_ANTHROPIC:
        return mock__anthropic_status_error(
            400, "Your credit balance is too low to access the Anthropic "
                 "API. Please go to Plans & Billing to upgrade or purchase "
                 "credits.");
    case MOCK_API_GEMINI:
        /* A daily cap: its RetryInfo still asks for seconds. */
        return mock__gemini_error(
            429,
            "You exceeded your current quota, please check your plan and "
            "billing details. Quota exceeded for metric: "
            "generativelanguage.googleapis.com/"
            "generate_content_free_tier_requests, limit: 250. Please retry "
            "in 21s.",
            "GenerateRequestsPerDayPerProjectPerModel-FreeTier", 21000);
    case MOCK_API_OPENAI:
        break;
    }
    return mock__error_body("You exceeded your current quota, please check "
                            "your plan and billing details.",
                            "insufficient_quota", "insufficient_quota");
}

char *
mock__context_body(enum mock_api api, int64_t prompt, int64_t max)
{
    char msg[300];

    switch (api) {
    case MOCK_API_ANTHROPIC:
        snprintf(msg, sizeof(msg),
                 "prompt is too long: %" PRId64 " tokens > %" PRId64 " maximum",
                 prompt, max);
        return mock__anthropic_status_error(400, msg);
    case MOCK_API_GEMINI:
        snprintf(msg, sizeof(msg),
                 "The input token count (%" PRId64
                 ") exceeds the maximum number of tokens allowed (%" PRId64
                 ").",
                 prompt, max);
        return mock__gemini_error(400, msg, NULL, -1);
    case MOCK_API_OPENAI:
        break;
    }
    snprintf(msg, sizeof(msg),
             "This model's maximum context length is %" PRId64
             " tokens. However, your messages resulted in %" PRId64
             " tokens. Please reduce the length of the messages.",
             max, prompt);
    return mock__error_body(msg, "invalid_request_error",
                            "context_length_exceeded");
}

const char *
mock__finish_twin(const char *finish, const char *const *twins)
{
    for (size_t i = 0; twins[i] != NULL; i += 2) {
        if (strcmp(finish, twins[i]) == 0)
            return twins[i + 1];
    }
    return finish;
}

/* anthropic.c: the mock's Anthropic Messages API (a route's "api":
 * "anthropic"): which requests are its chat requests (POST .../messages),
 * the checks it makes of one first (messages, max_tokens), the message it
 * answers with (content blocks, stop_reason, usage) and its error bodies
 * ({"type": "error", "error": {"type", "message"}}), as Anthropic
 * documents them. Bodies only: answer.c decides which.
 */
#include "mock/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"

bool
mock__anthropic_is_chat(const struct mock_request *rq)
{
    size_t n = strlen(rq->path);

    while (n > 0 && rq->path[n - 1] == '/')
        n--;
    return strcmp(rq->method, "POST") == 0 && n >= 9 &&
           strncmp(rq->path + n - 9, "/messages", 9) == 0;
}

bool
mock__anthropic_request_ok(const cJSON *req, char *msg, size_t len)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(req, "messages");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(req, "max_tokens");

    if (!cJSON_IsObject(req))
        snprintf(msg, len,
                 "There was an issue with your request body: it "
                 "is not valid JSON.");
    else if (m == NULL)
        snprintf(msg, len, "messages: Field required");
    else if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) == 0)
        snprintf(msg, len, "messages: at least one message is required");
    else if (mt == NULL)
        snprintf(msg, len, "max_tokens: Field required");
    else if (!cJSON_IsNumber(mt) || mt->valuedouble < 1)
        snprintf(msg, len,
                 "max_tokens: Input should be a valid integer "
                 "greater than or equal to 1");
    else
        return mock__anthropic_tools_ok(req, msg, len);
    return false;
}

char *
mock__anthropic_status_error(int status, const char *message)
{
    if (message == NULL)
        message = status == 529   ? "Overloaded"
                  : status == 413 ? "Request exceeds the maximum allowed "
                                    "number of bytes."
                  : status >= 500 ? "Internal server error"
                                  : mock__status_text(status);
    return mock__anthropic_error(mock__anthropic_type(status), message);
}

/* OpenAI finish reasons and their twins in this protocol. */
static const char *const stop_reasons[] = {
    "stop",     "end_turn",       "length",  "max_tokens", "tool_calls",
    "tool_use", "content_filter", "refusal", NULL};

char *
mock__anthropic_chat(struct mock_engine *e, const char *model,
                     const char *content, const char *finish, int64_t prompt,
                     int64_t completion, const cJSON *calls)
{
    cJSON *root = cJSON_CreateObject(), *blocks, *b = cJSON_CreateObject();
    cJSON *usage;
    char id[64], *s;

    snprintf(id, sizeof(id), "msg_mock%06" PRIu64, e->seq);
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "type", "message");
    cJSON_AddStringToObject(root, "role", "assistant");
    cJSON_AddStringToObject(root, "model", model);
    blocks = cJSON_AddArrayToObject(root, "content");
    cJSON_AddStringToObject(b, "type", "text");
    cJSON_AddStringToObject(b, "text", content);
    cJSON_AddItemToArray(blocks, b);
    if (calls != NULL) {
        /* The calls as tool_use blocks (tools.c), as an OpenAI message
         * with them would carry. */
        cJSON *msg = cJSON_CreateObject();
        if (content[0] != '\0')
            cJSON_AddStringToObject(msg, "content", content);
        cJSON_AddItemToObject(msg, "tool_calls", cJSON_Duplicate(calls, 1));
        if (mock__anthropic_tool_use(msg, blocks))
            finish = "tool_calls";
        cJSON_Delete(msg);
    }
    cJSON_AddStringToObject(root, "stop_reason",
                            mock__finish_twin(finish, stop_reasons));
    cJSON_AddNullToObject(root, "stop_sequence");
    usage = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(usage, "input_tokens", (double)prompt);
    cJSON_AddNumberToObject(usage, "cache_creation_input_tokens", 0);
    cJSON_AddNumberToObject(usage, "cache_read_input_tokens", 0);
    cJSON_AddNumberToObject(usage, "output_tokens", (double)completion);
    s = json_print(root);
    cJSON_Delete(root);
    return s;
}

/* gemini.c: the mock's Gemini API (a route's "api": "gemini"): which
 * requests are its chat requests (POST .../models/M:generateContent), the
 * check it makes of one first (contents), the answer (candidates[0] with
 * text parts, finishReason, usageMetadata) and its error bodies
 * ({"error": {"code", "message", "status", "details"}}: a 429's
 * QuotaFailure and RetryInfo), as Google documents them. Bodies only:
 * answer.c decides which.
 */
#include "mock/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"

bool
mock__gemini_is_chat(const struct mock_request *rq)
{
    const char *colon = strrchr(rq->path, ':');

    return strcmp(rq->method, "POST") == 0 && colon != NULL &&
           (strcmp(colon, ":generateContent") == 0 ||
            strcmp(colon, ":streamGenerateContent") == 0) &&
           strstr(rq->path, "/models/") != NULL;
}

bool
mock__gemini_request_ok(const cJSON *req, char *msg, size_t len)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(req, "contents");

    if (!cJSON_IsObject(req))
        snprintf(msg, len, "Invalid JSON payload received. Unexpected token.");
    else if (!cJSON_IsArray(c) || cJSON_GetArraySize(c) == 0)
        snprintf(msg, len,
                 "* GenerateContentRequest.contents: contents is "
                 "not specified\n");
    else
        return mock__gemini_tools_ok(req, msg, len);
    return false;
}

/* The canonical status name of Google's errors for each HTTP status. */
static const char *
status_name(int status)
{
    switch (status) {
    case 400:
        return "INVALID_ARGUMENT";
    case 401:
        return "UNAUTHENTICATED";
    case 403:
        return "PERMISSION_DENIED";
    case 404:
        return "NOT_FOUND";
    case 409:
        return "ABORTED";
    case 429:
        return "RESOURCE_EXHAUSTED";
    case 500:
        return "INTERNAL";
    case 503:
        return "UNAVAILABLE";
    case 504:
        return "DEADLINE_EXCEEDED";
    default:
        return status >= 500 ? "UNKNOWN" : "FAILED_PRECONDITION";
    }
}

char *
mock__gemini_error(int status, const char *message, const char *quota_id,
                   int64_t retry_ms)
{
    cJSON *root = cJSON_CreateObject(), *err = cJSON_CreateObject();
    char *s;

    if (message == NULL)
        message = status == 503 ? "The model is overloaded. Please try again "
                                  "later."
                  : status >= 500
                      ? "An internal error has occurred. Please retry or "
                        "report in "
                        "https://developers.generativeai.google/guide/"
                        "troubleshooting"
                      : mock__status_text(status);
    cJSON_AddNumberToObject(err, "code", status);
    cJSON_AddStringToObject(err, "message", message);
    cJSON_AddStringToObject(err, "status", status_name(status));
    if (quota_id != NULL) {
        cJSON *details = cJSON_AddArrayToObject(err, "details");
        cJSON *qf = cJSON_CreateObject(), *v, *one = cJSON_CreateObject();
        char delay[32];
        cJSON_AddStringToObject(qf, "@type",
                                "type.googleapis.com/google.rpc.QuotaFailure");
        v = cJSON_AddArrayToObject(qf, "violations");
        cJSON_AddStringToObject(one, "quotaMetric",
                                "generativelanguage.googleapis.com/"
                                "generate_content_free_tier_requests");
        cJSON_AddStringToObject(one, "quotaId", quota_id);
        cJSON_AddItemToArray(v, one);
        cJSON_AddItemToArray(details, qf);
        if (retry_ms >= 0) {
            cJSON *ri = cJSON_CreateObject();
            snprintf(delay, sizeof(delay), "%" PRId64 "s",
                     (retry_ms + 999) / 1000);
            cJSON_AddStringToObject(ri, "@type",
                                    "type.googleapis.com/google.rpc.RetryInfo");
            cJSON_AddStringToObject(ri, "retryDelay", delay);
            cJSON_AddItemToArray(details, ri);
        }
    }
    cJSON_AddItemToObject(root, "error", err);
    s = json_print(root);
    cJSON_Delete(root);
    return s;
}

/* OpenAI finish reasons and their twins in this protocol. */
static const char *const finish_reasons[] = {
    "stop", "STOP",           "length", "MAX_TOKENS", "tool_calls",
    "STOP", "content_filter", "SAFETY", NULL};

/* The calls (OpenAI tool_calls) as functionCall parts: args an object
 * (arguments that do not parse as one become {}). */
static void
add_calls(cJSON *parts, const cJSON *calls)
{
    const cJSON *tc;

    cJSON_ArrayForEach(tc, calls)
    {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        cJSON *p = cJSON_CreateObject(), *fc, *a = NULL;
        fc = cJSON_AddObjectToObject(p, "functionCall");
        cJSON_AddItemToObject(
            fc, "name",
            cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(fn, "name"), 1));
        if (cJSON_IsString(args))
            a = cJSON_Parse(args->valuestring);
        if (!cJSON_IsObject(a)) {
            cJSON_Delete(a);
            a = cJSON_CreateObject();
        }
        cJSON_AddItemToObject(fc, "args", a);
        cJSON_AddItemToArray(parts, p);
    }
}

char *
mock__gemini_chat(struct mock_engine *e, const char *model, const char *content,
                  const char *finish, int64_t prompt, int64_t completion,
                  const cJSON *calls)
{
    cJSON *root = cJSON_CreateObject(), *cands, *c = cJSON_CreateObject();
    cJSON *ct, *parts, *p = cJSON_CreateObject(), *um;
    char id[64], *s;

    cands = cJSON_AddArrayToObject(root, "candidates");
    ct = cJSON_AddObjectToObject(c, "content");
    parts = cJSON_AddArrayToObject(ct, "parts");
    cJSON_AddStringToObject(p, "text", content);
    if (calls == NULL || content[0] != '\0')
        cJSON_AddItemToArray(parts, p);
    else
        cJSON_Delete(p);
    add_calls(parts, calls);
    cJSON_AddStringToObject(ct, "role", "model");
    cJSON_AddStringToObject(c, "finishReason",
                            mock__finish_twin(finish, finish_reasons));
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON_AddItemToArray(cands, c);
    um = cJSON_AddObjectToObject(root, "usageMetadata");
    cJSON_AddNumberToObject(um, "promptTokenCount", (double)prompt);
    cJSON_AddNumberToObject(um, "candidatesTokenCount", (double)completion);
    cJSON_AddNumberToObject(um, "totalTokenCount",
                            (double)(prompt + completion));
    cJSON_AddStringToObject(root, "modelVersion", model);
    snprintf(id, sizeof(id), "mock-%06" PRIu64, e->seq);
    cJSON_AddStringToObject(root, "responseId", id);
    s = json_print(root);
    cJSON_Delete(root);
    return s;
}

/* body.c: the provider-shaped bodies of the mock's answers.
 *
 * Chat completions in the OpenAI shape, the generic endpoint's answer,
 * OpenAI-style error objects and the 429 bodies of a limit in its
 * provider's style. Bodies are built with cJSON so that whatever the script
 * or the request contains, the JSON we send is well formed (except where a
 * fault asks for the opposite).
 */
#include "mock/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/xalloc.h"

char *
mock__error_body(const char *message, const char *type, const char *code)
{
    cJSON *root = cJSON_CreateObject(), *e = cJSON_CreateObject();
    char *s;

    cJSON_AddStringToObject(e, "message", message);
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNullToObject(e, "param");
    if (code != NULL)
        cJSON_AddStringToObject(e, "code", code);
    else
        cJSON_AddNullToObject(e, "code");
    cJSON_AddItemToObject(root, "error", e);
    s = json_print(root);
    cJSON_Delete(root);
    return s;
}

/* utf8_cut returns n moved back so that s[0..n) ends on a character. */
static size_t
utf8_cut(const char *s, size_t n)
{
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

/* default_content summarizes the last message so that chained steps see
 * something of their input, as a JSON object with a "summary" key (steps
 * with expect_json ["summary"] pass). */
static char *
default_content(const cJSON *req)
{
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(req, "messages");
    const cJSON *last = NULL, *c = NULL;
    cJSON *o = cJSON_CreateObject();
    char text[160], *s;
    int n;

    /* Gemini's turns are "contents", each text in its first part. */
    if (msgs == NULL)
        msgs = cJSON_GetObjectItemCaseSensitive(req, "contents");
    n = cJSON_IsArray(msgs) ? cJSON_GetArraySize(msgs) : 0;
    if (n > 0)
        last = cJSON_GetArrayItem(msgs, n - 1);
    if (cJSON_IsObject(last))
        c = cJSON_GetObjectItemCaseSensitive(last, "content");
    if (c == NULL && cJSON_IsObject(last))
        c = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(last, "parts"),
                               0),
            "text");
    if (cJSON_IsString(c) && c->valuestring[0] != '\0') {
        size_t len = strlen(c->valuestring), cut = len > 80 ? 80 : len;
        cut = utf8_cut(c->valuestring, cut);
        snprintf(text, sizeof(text), "mock reply to: %.*s%s", (int)cut,
                 c->valuestring, cut < len ? "..." : "");
    } else {
        snprintf(text, sizeof(text), "mock reply (%d messages)", n);
    }
    cJSON_AddStringToObject(o, "summary", text);
    s = json_print(o);
    cJSON_Delete(o);
    return s;
}

int64_t
mock__request_max_tokens(const cJSON *req)
{
    const char *keys[] = {"max_completion_tokens", "max_tokens",
                          "maxOutputTokens"};

    const cJSON *gc = cJSON_GetObjectItemCaseSensitive(req, "generationConfig");

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(keys); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, keys[i]);
        if (cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble < 1e9)
            return (int64_t)v->valuedouble;
    }
    /* Gemini's cap is in its generationConfig. */
    if (cJSON_IsObject(gc) && gc != req)
        return mock__request_max_tokens(gc);
    return 0;
}

/* print_chat prints a chat completion; calls (may be NULL, borrowed) go
 * into the message as its tool_calls, with a null content unless there is
 * some. */
static char *
print_openai(struct mock_engine *e, const char *model, const char *content,
             const char *finish, int64_t prompt, int64_t completion,
             const cJSON *calls)
{
    cJSON *root = cJSON_CreateObject(), *choices = cJSON_CreateArray();
    cJSON *choice = cJSON_CreateObject(), *msg = cJSON_CreateObject();
    cJSON *usage = cJSON_CreateObject();
    char id[64], *s;

    snprintf(id, sizeof(id), "chatcmpl-mock-%06" PRIu64, e->seq);
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "object", "chat.completion");
    cJSON_AddNumberToObject(root, "created", (double)(clock_now_ms() / 1000));
    cJSON_AddStringToObject(root, "model", model);
    cJSON_AddNumberToObject(choice, "index", 0);
    cJSON_AddStringToObject(msg, "role", "assistant");
    if (calls != NULL && content[0] == '\0')
        cJSON_AddNullToObject(msg, "content");
    else
        cJSON_AddStringToObject(msg, "content", content);
    if (calls != NULL)
        cJSON_AddItemToObject(msg, "tool_calls", cJSON_Duplicate(calls, 1));
    cJSON_AddItemToObject(choice, "message", msg);
    cJSON_AddNullToObject(choice, "logprobs");
    cJSON_AddStringToObject(choice, "finish_reason", finish);
    cJSON_AddItemToArray(choices, choice);
    cJSON_AddItemToObject(root, "choices", choices);
    cJSON_AddNumberToObject(usage, "prompt_tokens", (double)prompt);
    cJSON_AddNumberToObject(usage, "completion_tokens", (double)completion);
    cJSON_AddNumberToObject(usage, "total_tokens",
                            (double)(prompt + completion));
    cJSON_AddItemToObject(root, "usage", usage);
    cJSON_AddStringToObject(root, "system_fingerprint", "stepq-mock");
    s = json_print(root);
    cJSON_Delete(root);
    return s;
}

/* The answer in route r's protocol; calls (may be NULL) as its tool
 * calls. */
static char *
print_chat(struct mock_engine *e, const struct mock_route *r, const char *model,
           const char *content, const char *finish, int64_t prompt,
           int64_t completion, const cJSON *calls)
{
    switch (r->api) {
    case MOCK_API_ANTHROPIC:
        return mock__anthropic_chat(e, model, content, finish, prompt,
                                    completion, calls);
    case MOCK_API_GEMINI:
        return mock__gemini_chat(e, model, content, finish, prompt, completion,
                                 calls);
    case MOCK_API_OPENAI:
        break;
    }
    return print_openai(e, model, content, finish, prompt, completion, calls);
}

/* chat_body builds a chat completion. With oversize > 0 the content is
 * padded so the whole body is exactly oversize bytes (when it can be). */
/* The content an answer's fault makes of content (owned, taken): cut in
 * half (finish "length"), JSON that stops mid-way, or nothing. Returns
 * the content to send (owned). */
static char *
fault_content(char *content, enum mock_fault fault, const char **finish)
{
    if (fault == MOCK_FAULT_TRUNCATE) {
        content[utf8_cut(content, strlen(content) / 2)] = '\0';
        *finish = "length";
    } else if (fault == MOCK_FAULT_INVALID_JSON) {
        free(content);
        content = xstrdup("{\"summary\": \"this output stops in the mid");
    } else if (fault == MOCK_FAULT_EMPTY) {
        content[0] = '\0';
    }
    return content;
}

char *
mock__chat_body(struct mock_engine *e, struct mock_route *r,
                const struct mock_answer *a, const cJSON *req, int64_t prompt,
                int64_t *tokens)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(req, "model");
    const char *model = cJSON_IsString(m) && m->valuestring[0] != '\0'
                            ? m->valuestring
                            : (r->model ? r->model : "mock-model");
    const char *finish = "stop";
    char *content = NULL, *body;
    int64_t completion = -1, max_tokens = mock__request_max_tokens(req);
    enum mock_fault fault = a ? a->fault : MOCK_FAULT_NONE;
    cJSON *calls = mock__tool_calls_for(e, r, a, req, &content);
    size_t clen;

    if (calls != NULL) {
        /* A turn of calls: the answer's own text beside them, if any. */
        content = xstrdup(a != NULL && a->content != NULL ? a->content : "");
        finish = "tool_calls";
    } else if (content != NULL) {
        /* The route echoes the tool results it received. */
    } else if (a != NULL && a->content != NULL) {
        content = xstrdup(a->content);
    } else if (r->content != NULL) {
        content = xstrdup(r->content);
    } else {
        content = default_content(req);
    }
    if (a != NULL && a->finish_reason != NULL)
        finish = a->finish_reason;
    else if (r->finish_reason != NULL)
        finish = r->finish_reason;
    if (a != NULL && a->completion_tokens >= 0)
        completion = a->completion_tokens;
    else if (r->completion_tokens >= 0)
        completion = r->completion_tokens;

    content = fault_content(content, fault, &finish);
    clen = strlen(content);
    if (completion < 0 && calls != NULL) {
        char *c = json_print(calls);
        clen += strlen(c);
        free(c);
    }
    if (completion < 0)
        completion = clen == 0 ? 0 : (int64_t)(clen + 3) / 4;
    clen = strlen(content);
    /* A request that caps its output gets what a model would do: the text
     * cut at the cap and finish_reason "length". */
    if (max_tokens > 0 && completion > max_tokens) {
        size_t cut = (size_t)max_tokens * 4;
        if (cut < clen)
            content[utf8_cut(content, cut)] = '\0';
        completion = max_tokens;
        finish = "length";
    }
    body = print_chat(e, r, model, content, finish, prompt, completion, calls);
    if (a != NULL && a->oversize > 0 && (size_t)a->oversize > strlen(body)) {
        /* 'x' needs no escaping, so each one adds one byte. */
        size_t base, pad;
        free(body);
        body = print_chat(e, r, model, "", finish, prompt, completion, calls);
        base = strlen(body);
        pad = (size_t)a->oversize - base;
        free(body);
        free(content);
        content = xmalloc(pad + 1);
        memset(content, 'x', pad);
        content[pad] = '\0';
        body =
            print_chat(e, r, model, content, finish, prompt, completion, calls);
    }
    free(content);
    cJSON_Delete(calls);
    *tokens = prompt + completion;
    return body;
}

char *
mock__generic_body(struct mock_engine *e, const struct mock_request *rq,
                   int64_t oversize)
{
    cJSON *root = cJSON_CreateObject();
    char id[64], *s, *pad;
    size_t base;

    snprintf(id, sizeof(id), "mock-%06" PRIu64, e->seq);
    cJSON_AddBoolToObject(root, "ok", true);
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "method", rq->method);
    cJSON_AddStringToObject(root, "path", rq->path);
    if (rq->idempotency_key != NULL)
        cJSON_AddStringToObject(root, "idempotency_key", rq->idempotency_key);
    else
        cJSON_AddNullToObject(root, "idempotency_key");
    cJSON_AddNumberToObject(root, "received_bytes", (double)rq->body_len);
    s = json_print(root);
    if (oversize > 0 && (size_t)oversize > strlen(s)) {
        /* Measure the body with an empty "pad", then fill it: 'x' needs no
         * escaping, so each one adds one byte. */
        cJSON_AddStringToObject(root, "pad", "");
        free(s);
        s = json_print(root);
        base = strlen(s);
        if ((size_t)oversize > base) {
            free(s);
            pad = xmalloc((size_t)oversize - base + 1);
            memset(pad, 'x', (size_t)oversize - base);
            pad[(size_t)oversize - base] = '\0';
            cJSON_ReplaceItemInObject(root, "pad", cJSON_CreateString(pad));
            free(pad);
            s = json_print(root);
        }
    }
    cJSON_Delete(root);
    return s;
}

const char *
mock__status_text(int status)
{
    const char *s = http_status_str((enum http_status)status);
    return s == NULL || s[0] == '<' ? "Status" : s;
}

char *
mock__status_error_body(int status)
{
    char msg[96];

    if (status >= 500)
        return mock__error_body(
            status == 503 || status == 529
                ? "The server is overloaded or not ready yet."
                : "The server had an error while processing "
                  "your request.",
            "server_error", NULL);
    snprintf(msg, sizeof(msg), "mock answered %d %s", status,
             mock__status_text(status));
    return mock__error_body(msg, "invalid_request_error", NULL);
}

static const char *
model_of(const struct mock_route *r, const cJSON *req)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(req, "model");

    if (cJSON_IsString(m) && m->valuestring[0] != '\0')
        return m->valuestring;
    return r->model ? r->model : "mock-model";
}

/* limit_body is the 429 body in the limit's provider style. */
char *
mock__limit_body(struct mock_engine *e, struct mock_route *r,
                 const struct mock_limit_result *res, const cJSON *req,
                 int64_t now)
{
    char *msg = mock_limit_message(&r->limit, res, now, now + e->wall_offset,
                                   model_of(r, req));
    char *body;

    if (r->api == MOCK_API_GEMINI) {
        body = mock__gemini_error(
            429, msg,
            res->by_tokens ? "GenerateContentInputTokensPerModelPerMinute"
                           : "GenerateRequestsPerMinutePerProjectPerModel",
            res->retry_ms);
    } else if (r->limit.headers == MOCK_HDR_ANTHROPIC ||
               r->api == MOCK_API_ANTHROPIC) {
        cJSON *root = cJSON_CreateObject(), *err = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "type", "error");
        cJSON_AddStringToObject(err, "type", "rate_limit_error");
        cJSON_AddStringToObject(err, "message", msg);
        cJSON_AddItemToObject(root, "error", err);
        body = json_print(root);
        cJSON_Delete(root);
    } else {
        body = mock__error_body(msg, res->by_tokens ? "tokens" : "requests",
                                "rate_limit_exceeded");
    }
    free(msg);
    return body;
}

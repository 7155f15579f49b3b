/* bodies.c: the 2xx bodies. A 200 may still carry an error object
 * (OpenRouter's {"error": {"code": 502}}), which classify then reads like
 * any error answer. Otherwise the body is a completion (OpenAI chat, native
 * Anthropic or Gemini), and what it says decides: a refusal or a
 * content_filter finish, a length finish, empty output, an output that did
 * not meet expect_json, or no completion at all. Only here is a body parsed
 * as JSON.
 */
#include "policy/policy.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "policy/internal.h"

struct completion {
    bool shape;         /* the body looks like a completion */
    bool tool_calls;    /* the answer calls a tool */
    bool refusal;       /* message.refusal is set */
    size_t content;     /* bytes of text content */
    const char *finish; /* borrowed from the tree; NULL */
};

static const cJSON *
first_item(const cJSON *arr)
{
    return cJSON_IsArray(arr) ? cJSON_GetArrayItem(arr, 0) : NULL;
}

static size_t
text_len(const cJSON *v)
{
    size_t n = 0;
    const cJSON *part;

    if (cJSON_IsString(v))
        return strlen(v->valuestring);
    if (!cJSON_IsArray(v))
        return 0;
    cJSON_ArrayForEach(part, v)
    {
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (cJSON_IsString(tx))
            n += strlen(tx->valuestring);
    }
    return n;
}

static bool
nonempty_array(const cJSON *v)
{
    return cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0;
}

static const char *
str_item(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* read_completion understands the OpenAI chat completion, and the native
 * Anthropic message and Gemini candidate shapes. */
static void
read_completion(const cJSON *root, struct completion *c)
{
    const cJSON *choice =
        first_item(cJSON_GetObjectItemCaseSensitive(root, "choices"));
    const cJSON *cand =
        first_item(cJSON_GetObjectItemCaseSensitive(root, "candidates"));
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    const cJSON *part;

    memset(c, 0, sizeof(*c));
    if (cJSON_IsObject(choice)) {
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(choice, "message");
        c->shape = true;
        c->finish = str_item(choice, "finish_reason");
        c->content = text_len(cJSON_GetObjectItemCaseSensitive(msg, "content"));
        c->tool_calls =
            nonempty_array(
                cJSON_GetObjectItemCaseSensitive(msg, "tool_calls")) ||
            cJSON_IsObject(
                cJSON_GetObjectItemCaseSensitive(msg, "function_call"));
        c->refusal = str_item(msg, "refusal") != NULL &&
                     str_item(msg, "refusal")[0] != '\0';
    } else if (cJSON_IsObject(cand)) {
        const char *fr = str_item(cand, "finishReason");
        content = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cand, "content"), "parts");
        c->shape = true;
        c->content = text_len(content);
        if (!cJSON_IsArray(content))
            content = NULL;
        cJSON_ArrayForEach(part, content)
        {
            if (cJSON_GetObjectItemCaseSensitive(part, "functionCall"))
                c->tool_calls = true;
        }
        if (fr != NULL && strcmp(fr, "MAX_TOKENS") == 0)
            c->finish = "length";
        else if (fr != NULL &&
                 (strcmp(fr, "SAFETY") == 0 || strcmp(fr, "RECITATION") == 0 ||
                  strcmp(fr, "IMAGE_SAFETY") == 0 ||
                  strcmp(fr, "PROHIBITED_CONTENT") == 0 ||
                  strcmp(fr, "BLOCKLIST") == 0 || strcmp(fr, "SPII") == 0))
            c->finish = "content_filter";
    } else if (cJSON_IsArray(content)) {
        const char *sr = str_item(root, "stop_reason");
        c->shape = true;
        c->content = text_len(content);
        cJSON_ArrayForEach(part, content)
        {
            const char *ty = str_item(part, "type");
            if (ty != NULL && strcmp(ty, "tool_use") == 0)
                c->tool_calls = true;
        }
        if (sr != NULL && strcmp(sr, "max_tokens") == 0)
            c->finish = "length";
        else if (sr != NULL && strcmp(sr, "refusal") == 0)
            c->finish = "content_filter";
    } else if (cJSON_IsObject(
                   cJSON_GetObjectItemCaseSensitive(root, "promptFeedback"))) {
        c->shape = true;
        c->finish = "content_filter";
    }
}

/* error_status returns the status an error object carries (OpenRouter's
 * {"error": {"code": 502}}), 0 when it names none, or -1 when root is not
 * an error object at all. */
static int
error_status(const cJSON *root)
{
    const cJSON *err, *code;
    const char *ty;

    if (cJSON_IsArray(root))
        root = cJSON_GetArrayItem(root, 0);
    if (!cJSON_IsObject(root) ||
        cJSON_GetObjectItemCaseSensitive(root, "choices") != NULL)
        return -1;
    err = cJSON_GetObjectItemCaseSensitive(root, "error");
    ty = str_item(root, "object");
    if (ty == NULL)
        ty = str_item(root, "type");
    if ((err == NULL || cJSON_IsNull(err)) &&
        (ty == NULL || strcmp(ty, "error") != 0))
        return -1;
    code = cJSON_IsObject(err) ? cJSON_GetObjectItemCaseSensitive(err, "code")
                               : NULL;
    if (code == NULL)
        code = cJSON_GetObjectItemCaseSensitive(root, "code");
    if (cJSON_IsNumber(code) && code->valuedouble >= 100 &&
        code->valuedouble <= 599)
        return (int)code->valuedouble;
    if (cJSON_IsString(code) && strlen(code->valuestring) == 3 &&
        isdigit((unsigned char)code->valuestring[0]) &&
        isdigit((unsigned char)code->valuestring[1]) &&
        isdigit((unsigned char)code->valuestring[2]) &&
        code->valuestring[0] >= '1' && code->valuestring[0] <= '5')
        return atoi(code->valuestring);
    return 0;
}

static bool
ieq(const char *a, const char *b)
{
    while (*a != '\0' && tolower((unsigned char)*a) == *b) {
        a++;
        b++;
    }
    return *a == '\0' && *b == '\0';
}

/* success classifies a 2xx that is not an error object. */
static void
success(const struct policy_input *in, const cJSON *root,
        const struct policy__text *t, struct policy_class *out)
{
    struct completion c;
    const char *fr;

    if (in->http_step) {
        policy__set(out, POLICY_OK, POLICY_REASON_NONE);
        return;
    }
    if (policy__is_html(t)) {
        policy__set(out, POLICY_SERVER_ERROR, POLICY_REASON_HTML_ERROR);
        return;
    }
    read_completion(root, &c);
    fr = in->finish_reason != NULL ? in->finish_reason : c.finish;
    if (c.refusal || (fr != NULL && ieq(fr, "content_filter")))
        policy__set(out, POLICY_REFUSED, POLICY_REASON_CONTENT_FILTER);
    else if (fr != NULL && (ieq(fr, "length") || ieq(fr, "max_tokens")))
        policy__set(out, POLICY_TRUNCATED, POLICY_REASON_LENGTH);
    else if (c.shape && c.content == 0 && !c.tool_calls)
        policy__set(out, POLICY_SCHEMA_INVALID, POLICY_REASON_EMPTY_OUTPUT);
    else if (in->parsed == POLICY_PARSED_NO)
        policy__set(out, POLICY_SCHEMA_INVALID, POLICY_REASON_INVALID_OUTPUT);
    else if (!c.shape && in->parsed != POLICY_PARSED_YES)
        policy__set(out, POLICY_SCHEMA_INVALID, POLICY_REASON_NOT_A_COMPLETION);
    else
        policy__set(out, POLICY_OK, POLICY_REASON_NONE);
}

int
policy__body_2xx(const struct policy_input *in, const struct policy__text *t,
                 struct policy_class *out)
{
    cJSON *own = NULL;
    const cJSON *root = NULL;
    int inner = -1;

    if (in->body_len > 0 && in->body_len <= POLICY__RULE_BYTES)
        root = in->json != NULL
                   ? in->json
                   : (own = cJSON_ParseWithLength(in->body, in->body_len));
    if (root != NULL)
        inner = error_status(root);
    else if (strncmp(t->s, "{\"error\"", 8) == 0)
        inner = 0; /* a truncated error object */
    if (inner < 0)
        success(in, root, t, out);
    cJSON_Delete(own);
    return inner;
}

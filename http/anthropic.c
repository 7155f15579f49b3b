/* anthropic.c: the Anthropic Messages API (a tier's "api": "anthropic").
 *
 * The job's request stays OpenAI-shaped; here it becomes a Messages body:
 * system (and developer) messages go to the top-level "system", the other
 * messages keep their role and text, "max_tokens" is always sent (the API
 * requires it: the request's, the tier's, else CONFIG_ANTHROPIC_MAX_TOKENS),
 * "stop" becomes "stop_sequences", "user" becomes metadata.user_id. Prompt
 * caching: a message with "cache": true gets cache_control ephemeral on
 * its text block, and "cache": true on the request marks the system prompt
 * (its last block) and the last tool. Tools, tool_choice and tool turns
 * are native_tools.c's. The answer (a message with content blocks) is read
 * back into struct http_chat_answer, stop reasons as their OpenAI twins.
 */
#include "http/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "http/tools.h"

/* A text block, with cache_control when cache is set. */
static cJSON *
text_block(const char *text, bool cache)
{
    cJSON *b = cJSON_CreateObject();

    cJSON_AddStringToObject(b, "type", "text");
    cJSON_AddStringToObject(b, "text", text);
    if (cache) {
        cJSON *cc = cJSON_AddObjectToObject(b, "cache_control");
        cJSON_AddStringToObject(cc, "type", "ephemeral");
    }
    return b;
}

static bool
is_system(const struct http__msg *m)
{
    return strcmp(m->role, "system") == 0 || strcmp(m->role, "developer") == 0;
}

/* The top-level system: a string, or blocks when any is cached. */
static void
add_system(cJSON *body, const struct http__msg *msgs, size_t n,
           bool cache_system)
{
    struct xbuf joined = {0};
    bool any = false, blocks = cache_system;
    cJSON *arr;
    size_t last = 0;

    for (size_t i = 0; i < n; i++) {
        if (!is_system(&msgs[i]))
            continue;
        if (any)
            xbuf_lit(&joined, "\n\n");
        xbuf_put(&joined, msgs[i].text, strlen(msgs[i].text));
        blocks = blocks || msgs[i].cache;
        any = true;
        last = i;
    }
    if (!any)
        return;
    xbuf_put(&joined, "", 1);
    if (!blocks) {
        cJSON_AddStringToObject(body, "system", joined.p);
        free(joined.p);
        return;
    }
    free(joined.p);
    arr = cJSON_AddArrayToObject(body, "system");
    for (size_t i = 0; i < n; i++) {
        if (is_system(&msgs[i]))
            cJSON_AddItemToArray(
                arr, text_block(msgs[i].text,
                                msgs[i].cache || (cache_system && i == last)));
    }
}

/* The messages besides the system prompt, appended to arr: text with
 * its role, a tool turn as tool_use and tool_result blocks. */
static int
add_messages(cJSON *arr, const struct http__msg *msgs, size_t n, char *err,
             size_t errlen)
{
    int rc;

    for (size_t i = 0; i < n; i++) {
        cJSON *m;
        if (is_system(&msgs[i]))
            continue;
        if (msgs[i].calls != NULL) {
            if ((rc = http__native_turn(msgs, n, &i, HTTP_TOOLS_ANTHROPIC, arr,
                                        err, errlen)) != 0)
                return rc;
            continue;
        }
        m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", msgs[i].role);
        if (msgs[i].cache) {
            cJSON *c = cJSON_AddArrayToObject(m, "content");
            cJSON_AddItemToArray(c, text_block(msgs[i].text, true));
        } else {
            cJSON_AddStringToObject(m, "content", msgs[i].text);
        }
        cJSON_AddItemToArray(arr, m);
    }
    return 0;
}

int
http__anthropic_body(const cJSON *request, const struct config_tier *t,
                     cJSON **out, char *err, size_t errlen)
{
    struct http__msg *msgs = NULL;
    size_t n = 0;
    cJSON *body, *arr, *stop;
    const cJSON *user = cJSON_GetObjectItemCaseSensitive(request, "user");
    int rc;

    if ((rc = http__native_msgs(request, "anthropic", &msgs, &n, err,
                                errlen)) != 0)
        return rc;
    body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "model", t->model);
    cJSON_AddNumberToObject(body, "max_tokens",
                            (double)http__native_max_tokens(
                                request, t, CONFIG_ANTHROPIC_MAX_TOKENS));
    add_system(
        body, msgs, n,
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(request, "cache")));
    arr = cJSON_AddArrayToObject(body, "messages");
    rc = add_messages(arr, msgs, n, err, errlen);
    http__msgs_free(msgs, n);
    if (rc == 0)
        rc = http__native_tools(
            request, HTTP_TOOLS_ANTHROPIC,
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(request, "cache")),
            body, err, errlen);
    if (rc != 0) {
        cJSON_Delete(body);
        return rc;
    }
    if (cJSON_GetArraySize(arr) == 0) {
        cJSON_Delete(body);
        return http__fail(err, errlen, -EINVAL,
                          "request.messages: the anthropic api needs a "
                          "message besides the system prompt");
    }
    http__native_copy(request, "temperature", body, "temperature");
    http__native_copy(request, "top_p", body, "top_p");
    if ((stop = http__native_stop(request)) != NULL)
        cJSON_AddItemToObject(body, "stop_sequences", stop);
    if (cJSON_IsString(user)) {
        cJSON *md = cJSON_AddObjectToObject(body, "metadata");
        cJSON_AddStringToObject(md, "user_id", user->valuestring);
    }
    *out = body;
    return 0;
}

/* stop_reason -> finish_reason. */
static const char *const finishes[] = {
    "end_turn", "stop",     "stop_sequence", "stop",    "max_tokens",
    "length",   "tool_use", "tool_calls",    "refusal", "content_filter",
    NULL};

int
http__anthropic_read(const cJSON *root, struct http_chat_answer *a)
{
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    const cJSON *sr = cJSON_GetObjectItemCaseSensitive(root, "stop_reason");
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(root, "type");
    const cJSON *b;
    struct xbuf text = {0};
    bool any = false;

    if (!cJSON_IsArray(content) || !cJSON_IsString(ty) ||
        strcmp(ty->valuestring, "message") != 0)
        return -EINVAL;
    cJSON_ArrayForEach(b, content)
    {
        const cJSON *bt = cJSON_GetObjectItemCaseSensitive(b, "type");
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(b, "text");
        if (!cJSON_IsString(bt))
            continue;
        if (strcmp(bt->valuestring, "tool_use") == 0)
            a->has_tool_calls = true;
        if (strcmp(bt->valuestring, "text") == 0 && cJSON_IsString(tx)) {
            xbuf_put(&text, tx->valuestring, strlen(tx->valuestring));
            any = true;
        }
    }
    if (any) {
        xbuf_put(&text, "", 1);
        a->content = text.p;
    }
    a->finish_reason = cJSON_IsString(sr)
                           ? http__finish_twin(sr->valuestring, finishes)
                           : NULL;
    return 0;
}

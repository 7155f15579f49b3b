/* native.c: what the native protocols (anthropic.c, gemini.c) share when
 * they map the job's OpenAI-shaped request: its messages read as roles
 * and text (an assistant's tool_calls and a tool message's tool_call_id
 * kept for native_tools.c), the members neither can carry refused with
 * their path, the output cap, the stop sequences, and finish reasons
 * mapped back to their OpenAI twins (http/internal.h).
 */
#include "http/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

/* The text of content: the string, or its parts of type "text" joined.
 * Returns 0 with *out owned, or -EINVAL with the bad part's index. */
static int
content_text(const cJSON *content, char **out, int *bad)
{
    struct xbuf b = {0};
    const cJSON *part;
    int i = 0;

    if (cJSON_IsString(content)) {
        *out = xstrdup(content->valuestring);
        return 0;
    }
    if (content == NULL || cJSON_IsNull(content)) {
        *out = xstrdup("");
        return 0;
    }
    if (!cJSON_IsArray(content)) {
        *bad = -1;
        return -EINVAL;
    }
    cJSON_ArrayForEach(part, content)
    {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "text") != 0 ||
            !cJSON_IsString(tx)) {
            free(b.p);
            *bad = i;
            return -EINVAL;
        }
        xbuf_put(&b, tx->valuestring, strlen(tx->valuestring));
        i++;
    }
    xbuf_put(&b, "", 1);
    *out = b.p;
    return 0;
}

/* The tool side of message m (role given): an assistant's non-empty
 * tool_calls, a tool message's tool_call_id, which must follow a turn
 * with calls (prev: the message before, NULL for the first). */
static int
read_tool_side(const cJSON *m, const char *role, int i,
               const struct http__msg *prev, struct http__msg *out, char *err,
               size_t errlen)
{
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id");

    if (tc != NULL && !cJSON_IsNull(tc) &&
        (strcmp(role, "assistant") != 0 || !cJSON_IsArray(tc)))
        return http__fail(err, errlen, -EINVAL,
                          "request.messages[%d].tool_calls: only an "
                          "assistant message has them, as an array",
                          i);
    if (cJSON_IsArray(tc) && tc->child != NULL)
        out->calls = tc;
    if (strcmp(role, "tool") != 0)
        return 0;
    if (!cJSON_IsString(id) || id->valuestring[0] == '\0')
        return http__fail(err, errlen, -EINVAL,
                          "request.messages[%d].tool_call_id: a tool "
                          "message needs the id of the call it answers",
                          i);
    if (prev == NULL || (prev->calls == NULL && prev->call_id == NULL))
        return http__fail(err, errlen, -EINVAL,
                          "request.messages[%d]: a tool message must follow "
                          "an assistant message with tool_calls",
                          i);
    out->call_id = id->valuestring;
    return 0;
}

/* One message, checked: a string role, text content, its tool side. */
static int
read_msg(const cJSON *m, int i, const char *api, const struct http__msg *prev,
         struct http__msg *out, char *err, size_t errlen)
{
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    const cJSON *cache = cJSON_GetObjectItemCaseSensitive(m, "cache");
    int bad = 0, rc;

    if (!cJSON_IsObject(m) || !cJSON_IsString(role))
        return http__fail(err, errlen, -EINVAL,
                          "request.messages[%d]: needs a string \"role\"", i);
    if (strcmp(role->valuestring, "system") != 0 &&
        strcmp(role->valuestring, "developer") != 0 &&
        strcmp(role->valuestring, "user") != 0 &&
        strcmp(role->valuestring, "assistant") != 0 &&
        strcmp(role->valuestring, "tool") != 0)
        return http__fail(err, errlen, -EINVAL,
                          "request.messages[%d].role: %s is not mapped to the "
                          "%s api",
                          i, role->valuestring, api);
    if (cache != NULL && !cJSON_IsBool(cache))
        return http__fail(err, errlen, -EINVAL,
                          "request.messages[%d].cache: must be true or false",
                          i);
    if ((rc = read_tool_side(m, role->valuestring, i, prev, out, err,
                             errlen)) != 0)
        return rc;
    if (content_text(cJSON_GetObjectItemCaseSensitive(m, "content"), &out->text,
                     &bad) != 0) {
        if (bad < 0)
            return http__fail(err, errlen, -EINVAL,
                              "request.messages[%d].content: must be a string "
                              "or an array of text parts",
                              i);
        return http__fail(err, errlen, -EINVAL,
                          "request.messages[%d].content[%d]: only text parts "
                          "are mapped to the %s api",
                          i, bad, api);
    }
    out->role = role->valuestring;
    out->cache = cJSON_IsTrue(cache);
    out->index = i;
    return 0;
}

/* Members of a chat request the native protocols carry (mapped by each). */
static const char *const mapped[] = {
    "model",       "messages", "max_tokens",  "max_completion_tokens",
    "temperature", "top_p",    "stop",        "cache",
    "user",        "tools",    "tool_choice", "parallel_tool_calls",
    NULL};

int
http__native_msgs(const cJSON *request, const char *api,
                  struct http__msg **msgs, size_t *n, char *err, size_t errlen)
{
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(request, "messages");
    const cJSON *it,
        *cache = cJSON_GetObjectItemCaseSensitive(request, "cache");
    struct http__msg *v;
    size_t k = 0;
    int rc;

    cJSON_ArrayForEach(it, request)
    {
        bool ok = false;
        for (const char *const *m = mapped; *m != NULL && !ok; m++)
            ok = strcmp(*m, it->string) == 0;
        if (!ok)
            return http__fail(err, errlen, -EINVAL,
                              "request.%s: not mapped to the %s api",
                              it->string, api);
    }
    if (cache != NULL && !cJSON_IsBool(cache))
        return http__fail(err, errlen, -EINVAL,
                          "request.cache: must be true or false");
    if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) == 0)
        return http__fail(err, errlen, -EINVAL,
                          "request.messages: must be a non-empty array");
    v = xcalloc((size_t)cJSON_GetArraySize(ms), sizeof(*v));
    cJSON_ArrayForEach(it, ms)
    {
        if ((rc = read_msg(it, (int)k, api, k > 0 ? &v[k - 1] : NULL, &v[k],
                           err, errlen)) != 0) {
            http__msgs_free(v, k);
            return rc;
        }
        k++;
    }
    *msgs = v;
    *n = k;
    return 0;
}

void
http__msgs_free(struct http__msg *msgs, size_t n)
{
    for (size_t i = 0; msgs != NULL && i < n; i++)
        free(msgs[i].text);
    free(msgs);
}

int64_t
http__native_max_tokens(const cJSON *request, const struct config_tier *t,
                        int64_t dflt)
{
    static const char *const keys[] = {"max_completion_tokens", "max_tokens"};

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(keys); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(request, keys[i]);
        if (cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble < 1e9)
            return (int64_t)v->valuedouble;
    }
    return t->max_tokens > 0 ? t->max_tokens : dflt;
}

cJSON *
http__native_stop(const cJSON *request)
{
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(request, "stop");
    cJSON *out;

    if (cJSON_IsString(stop)) {
        out = cJSON_CreateArray();
        cJSON_AddItemToArray(out, cJSON_CreateString(stop->valuestring));
        return out;
    }
    if (cJSON_IsArray(stop) && cJSON_GetArraySize(stop) > 0)
        return cJSON_Duplicate(stop, true);
    return NULL;
}

void
http__native_copy(const cJSON *request, const char *key, cJSON *body,
                  const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(request, key);

    if (v != NULL && !cJSON_IsNull(v))
        cJSON_AddItemToObject(body, name, cJSON_Duplicate(v, true));
}

char *
http__finish_twin(const char *native, const char *const *table)
{
    if (native == NULL)
        return NULL;
    for (size_t i = 0; table[i] != NULL; i += 2) {
        if (strcmp(native, table[i]) == 0)
            return xstrdup(table[i + 1]);
    }
    return xstrdup(native);
}

/* gemini.c: Gemini's generateContent (a tier's "api": "gemini").
 *
 * The job's OpenAI-shaped request becomes a generateContent body: system
 * (and developer) messages go to "systemInstruction", user and assistant
 * messages to "contents" with roles user and model, the output cap,
 * temperature, top_p and stop to "generationConfig" (maxOutputTokens,
 * temperature, topP, stopSequences); the model goes in the URL
 * (tier.c). Tools, tool_choice and tool turns (functionCall and
 * functionResponse parts) are native_tools.c's. The answer's first candidate is
 * read back into struct http_chat_answer (its text parts joined, thoughts left
 * out), finish reasons as their OpenAI twins; a prompt blocked before any
 * candidate (promptFeedback.blockReason) reads as a content_filter finish.
 */
#include "http/internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "http/tools.h"

bool
http__gemini_model_ok(const char *model)
{
    if (model == NULL || *model == '\0')
        return false;
    for (const char *p = model; *p != '\0'; p++) {
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.' &&
            *p != '_' && *p != '/')
            return false;
    }
    return true;
}

/* {"parts": [{"text": text}]}, with role when not NULL. */
static cJSON *
content_of(const char *role, const char *text)
{
    cJSON *c = cJSON_CreateObject(), *parts, *p = cJSON_CreateObject();

    if (role != NULL)
        cJSON_AddStringToObject(c, "role", role);
    parts = cJSON_AddArrayToObject(c, "parts");
    cJSON_AddStringToObject(p, "text", text);
    cJSON_AddItemToArray(parts, p);
    return c;
}

static void
add_generation(const cJSON *request, const struct config_tier *t, cJSON *body)
{
    cJSON *gc = cJSON_CreateObject(), *stop;
    int64_t max = http__native_max_tokens(request, t, 0);

    if (max > 0)
        cJSON_AddNumberToObject(gc, "maxOutputTokens", (double)max);
    http__native_copy(request, "temperature", gc, "temperature");
    http__native_copy(request, "top_p", gc, "topP");
    if ((stop = http__native_stop(request)) != NULL)
        cJSON_AddItemToObject(gc, "stopSequences", stop);
    if (gc->child != NULL)
        cJSON_AddItemToObject(body, "generationConfig", gc);
    else
        cJSON_Delete(gc);
}

int
http__gemini_body(const cJSON *request, const struct config_tier *t,
                  cJSON **out, char *err, size_t errlen)
{
    struct http__msg *msgs = NULL;
    size_t n = 0;
    struct xbuf sys = {0};
    cJSON *body, *contents;
    int rc;

    if ((rc = http__native_msgs(request, "gemini", &msgs, &n, err, errlen)) !=
        0)
        return rc;
    body = cJSON_CreateObject();
    contents = cJSON_AddArrayToObject(body, "contents");
    for (size_t i = 0; i < n && rc == 0; i++) {
        const char *role = msgs[i].role;
        if (strcmp(role, "system") == 0 || strcmp(role, "developer") == 0) {
            if (sys.len > 0)
                xbuf_lit(&sys, "\n\n");
            xbuf_put(&sys, msgs[i].text, strlen(msgs[i].text));
        } else if (msgs[i].calls != NULL) {
            rc = http__native_turn(msgs, n, &i, HTTP_TOOLS_GEMINI, contents,
                                   err, errlen);
        } else {
            cJSON_AddItemToArray(
                contents,
                content_of(strcmp(role, "assistant") == 0 ? "model" : "user",
                           msgs[i].text));
        }
    }
    http__msgs_free(msgs, n);
    if (rc == 0)
        rc = http__native_tools(request, HTTP_TOOLS_GEMINI, false, body, err,
                                errlen);
    if (rc != 0) {
        free(sys.p);
        cJSON_Delete(body);
        return rc;
    }
    if (cJSON_GetArraySize(contents) == 0) {
        free(sys.p);
        cJSON_Delete(body);
        return http__fail(err, errlen, -EINVAL,
                          "request.messages: the gemini api needs a message "
                          "besides the system prompt");
    }
    if (sys.len > 0) {
        xbuf_put(&sys, "", 1);
        cJSON_AddItemToObject(body, "systemInstruction",
                              content_of(NULL, sys.p));
    }
    free(sys.p);
    add_generation(request, t, body);
    *out = body;
    return 0;
}

/* finishReason -> finish_reason. */
static const char *const finishes[] = {"STOP",
                                       "stop",
                                       "MAX_TOKENS",
                                       "length",
                                       "SAFETY",
                                       "content_filter",
                                       "RECITATION",
                                       "content_filter",
                                       "PROHIBITED_CONTENT",
                                       "content_filter",
                                       "BLOCKLIST",
                                       "content_filter",
                                       "SPII",
                                       "content_filter",
                                       "IMAGE_SAFETY",
                                       "content_filter",
                                       NULL};

int
http__gemini_read(const cJSON *root, struct http_chat_answer *a)
{
    const cJSON *cands = cJSON_GetObjectItemCaseSensitive(root, "candidates");
    const cJSON *c0 =
        cJSON_IsArray(cands) ? cJSON_GetArrayItem(cands, 0) : NULL;
    const cJSON *fb = cJSON_GetObjectItemCaseSensitive(root, "promptFeedback");
    const cJSON *parts, *p, *fr;
    struct xbuf text = {0};
    bool any = false;

    if (!cJSON_IsObject(c0)) {
        /* A prompt blocked: no candidate, the feedback says why. */
        if (!cJSON_IsObject(fb) || !cJSON_HasObjectItem(fb, "blockReason"))
            return -EINVAL;
        a->finish_reason = xstrdup("content_filter");
        return 0;
    }
    parts = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(c0, "content"), "parts");
    if (!cJSON_IsArray(parts))
        parts = NULL;
    cJSON_ArrayForEach(p, parts)
    {
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (cJSON_HasObjectItem(p, "functionCall"))
            a->has_tool_calls = true;
        if (cJSON_IsString(tx) &&
            !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "thought"))) {
            xbuf_put(&text, tx->valuestring, strlen(tx->valuestring));
            any = true;
        }
    }
    if (any) {
        xbuf_put(&text, "", 1);
        a->content = text.p;
    }
    fr = cJSON_GetObjectItemCaseSensitive(c0, "finishReason");
    a->finish_reason = cJSON_IsString(fr)
                           ? http__finish_twin(fr->valuestring, finishes)
                           : NULL;
    return 0;
}

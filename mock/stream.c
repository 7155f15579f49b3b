/* stream.c: the mock's streamed answers. A chat request that asks for a
 * stream (OpenAI and Anthropic: "stream": true; Gemini:
 * :streamGenerateContent) gets the answer it would have got, as the
 * protocol's server-sent events (text/event-stream), its text in deltas
 * of a few characters: OpenAI's chat.completion.chunk lines ending in
 * "data: [DONE]", Anthropic's message_start .. message_stop events,
 * Gemini's GenerateContentResponse chunks. The script's faults apply to
 * the events' bytes: close_mid_body cuts the stream, stall stops it with
 * the connection open.
 */
#include "mock/internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

#define PIECE 8 /* bytes of text per delta (whole characters) */

bool
mock__wants_stream(const struct mock_route *r, const struct mock_request *rq,
                   const cJSON *req)
{
    if (r->api == MOCK_API_GEMINI)
        return strstr(rq->path, ":streamGenerateContent") != NULL;
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "stream"));
}

/* One event: "event: NAME\n" when name is set, then "data: " and o
 * printed (deleted). */
static void
put_event(struct xbuf *b, const char *name, cJSON *o, const char *end)
{
    char *s = json_print(o);

    if (name != NULL) {
        xbuf_lit(b, "event: ");
        xbuf_put(b, name, strlen(name));
        xbuf_lit(b, "\n");
    }
    xbuf_lit(b, "data: ");
    xbuf_put(b, s, strlen(s));
    xbuf_put(b, end, strlen(end));
    free(s);
    cJSON_Delete(o);
}

/* The length of the next piece of text at s: up to PIECE bytes, not
 * cutting a character. */
static size_t
piece(const char *s)
{
    size_t n = strnlen(s, PIECE);

    while (s[n] != '\0' && ((unsigned char)s[n] & 0xC0) == 0x80)
        n++;
    return n;
}

static cJSON *
str_n(const char *s, size_t n)
{
    char *t = xstrndup(s, n);
    cJSON *v = cJSON_CreateString(t);

    free(t);
    return v;
}

static const char *
str_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* An OpenAI chunk of root's id and model with delta and finish. */
static cJSON *
oa_chunk(const cJSON *root, cJSON *delta, const char *finish)
{
    cJSON *c = cJSON_CreateObject(), *choices, *ch = cJSON_CreateObject();

    cJSON_AddStringToObject(c, "id", str_of(root, "id"));
    cJSON_AddStringToObject(c, "object", "chat.completion.chunk");
    cJSON_AddItemToObject(
        c, "created",
        cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(root, "created"), 1));
    cJSON_AddStringToObject(c, "model", str_of(root, "model"));
    choices = cJSON_AddArrayToObject(c, "choices");
    cJSON_AddNumberToObject(ch, "index", 0);
    cJSON_AddItemToObject(ch, "delta", delta);
    if (finish != NULL)
        cJSON_AddStringToObject(ch, "finish_reason", finish);
    else
        cJSON_AddNullToObject(ch, "finish_reason");
    cJSON_AddItemToArray(choices, ch);
    return c;
}

static void
sse_openai(struct xbuf *b, const cJSON *root, const cJSON *req)
{
    const cJSON *c0 = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
    const char *text =
        str_of(cJSON_GetObjectItemCaseSensitive(c0, "message"), "content");
    cJSON *d = cJSON_CreateObject();

    cJSON_AddStringToObject(d, "role", "assistant");
    cJSON_AddStringToObject(d, "content", "");
    put_event(b, NULL, oa_chunk(root, d, NULL), "\n\n");
    for (size_t n; *text != '\0'; text += n) {
        n = piece(text);
        d = cJSON_CreateObject();
        cJSON_AddItemToObject(d, "content", str_n(text, n));
        put_event(b, NULL, oa_chunk(root, d, NULL), "\n\n");
    }
    put_event(b, NULL,
              oa_chunk(root, cJSON_CreateObject(), str_of(c0, "finish_reason")),
              "\n\n");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(req, "stream_options"),
            "include_usage"))) {
        cJSON *u = oa_chunk(root, cJSON_CreateObject(), NULL);
        cJSON_ReplaceItemInObjectCaseSensitive(u, "choices",
                                               cJSON_CreateArray());
        cJSON_AddItemToObject(
            u, "usage",
            cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(root, "usage"),
                            1));
        put_event(b, NULL, u, "\n\n");
    }
    xbuf_lit(b, "data: [DONE]\n\n");
}

static cJSON *
typed(const char *type)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "type", type);
    return o;
}

/* One content block of an Anthropic message as start, deltas and stop. */
static void
an_block(struct xbuf *b, const cJSON *block, int i)
{
    bool tool = strcmp(str_of(block, "type"), "tool_use") == 0;
    cJSON *e = typed("content_block_start"), *cb = cJSON_Duplicate(block, 1);
    char *input = NULL;
    const char *text;

    cJSON_AddNumberToObject(e, "index", i);
    if (tool) {
        input = json_print(cJSON_GetObjectItemCaseSensitive(block, "input"));
        cJSON_ReplaceItemInObjectCaseSensitive(cb, "input",
                                               cJSON_CreateObject());
    } else {
        cJSON_ReplaceItemInObjectCaseSensitive(cb, "text",
                                               cJSON_CreateString(""));
    }
    cJSON_AddItemToObject(e, "content_block", cb);
    put_event(b, "content_block_start", e, "\n\n");
    text = tool ? input : str_of(block, "text");
    for (size_t n; *text != '\0'; text += n) {
        cJSON *d = typed(tool ? "input_json_delta" : "text_delta");
        n = piece(text);
        cJSON_AddItemToObject(d, tool ? "partial_json" : "text",
                              str_n(text, n));
        e = typed("content_block_delta");
        cJSON_AddNumberToObject(e, "index", i);
        cJSON_AddItemToObject(e, "delta", d);
        put_event(b, "content_block_delta", e, "\n\n");
    }
    free(input);
    e = typed("content_block_stop");
    cJSON_AddNumberToObject(e, "index", i);
    put_event(b, "content_block_stop", e, "\n\n");
}

static void
sse_anthropic(struct xbuf *b, const cJSON *root)
{
    cJSON *msg = cJSON_Duplicate(root, 1), *e, *d, *u;
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(root, "usage");
    const cJSON *block;
    int i = 0;

    cJSON_ReplaceItemInObjectCaseSensitive(msg, "content", cJSON_CreateArray());
    cJSON_ReplaceItemInObjectCaseSensitive(msg, "stop_reason",
                                           cJSON_CreateNull());
    cJSON_ReplaceItemInObjectCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(msg, "usage"), "output_tokens",
        cJSON_CreateNumber(1));
    e = typed("message_start");
    cJSON_AddItemToObject(e, "message", msg);
    put_event(b, "message_start", e, "\n\n");
    put_event(b, "ping", typed("ping"), "\n\n");
    cJSON_ArrayForEach(block, cJSON_GetObjectItemCaseSensitive(root, "content"))
        an_block(b, block, i++);
    e = typed("message_delta");
    d = cJSON_AddObjectToObject(e, "delta");
    cJSON_AddStringToObject(d, "stop_reason", str_of(root, "stop_reason"));
    cJSON_AddNullToObject(d, "stop_sequence");
    u = cJSON_AddObjectToObject(e, "usage");
    cJSON_AddItemToObject(
        u, "output_tokens",
        cJSON_Duplicate(
            cJSON_GetObjectItemCaseSensitive(usage, "output_tokens"), 1));
    put_event(b, "message_delta", e, "\n\n");
    put_event(b, "message_stop", typed("message_stop"), "\n\n");
}

/* Gemini: a chunk per piece of the first candidate's text; the last one
 * has its finishReason and the usage. An answer without candidates (a
 * blocked prompt) is one chunk. */
static void
sse_gemini(struct xbuf *b, const cJSON *root)
{
    const cJSON *c0 = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(root, "candidates"), 0);
    const cJSON *p0 = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(c0, "content"), "parts"),
        0);
    const char *text = str_of(p0, "text");
    cJSON *last;

    if (c0 == NULL) {
        put_event(b, NULL, cJSON_Duplicate(root, 1), "\r\n\r\n");
        return;
    }
    for (size_t n; *text != '\0';) {
        cJSON *chunk, *cand, *ct, *part = cJSON_CreateObject();
        n = piece(text);
        if (text[n] == '\0')
            break; /* the last piece goes with the finish */
        chunk = cJSON_CreateObject();
        cand = cJSON_CreateObject();
        cJSON_AddItemToArray(cJSON_AddArrayToObject(chunk, "candidates"), cand);
        ct = cJSON_AddObjectToObject(cand, "content");
        cJSON_AddItemToObject(part, "text", str_n(text, n));
        cJSON_AddItemToArray(cJSON_AddArrayToObject(ct, "parts"), part);
        cJSON_AddStringToObject(ct, "role", "model");
        cJSON_AddNumberToObject(cand, "index", 0);
        put_event(b, NULL, chunk, "\r\n\r\n");
        text += n;
    }
    last = cJSON_Duplicate(root, 1);
    if (p0 != NULL)
        cJSON_ReplaceItemInObjectCaseSensitive(
            cJSON_GetArrayItem(
                cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
                                               last, "candidates"),
                                           0),
                        "content"),
                    "parts"),
                0),
            "text", cJSON_CreateString(text));
    put_event(b, NULL, last, "\r\n\r\n");
}

char *
mock__sse(enum mock_api api, const char *body, const cJSON *req)
{
    cJSON *root = cJSON_Parse(body);
    struct xbuf b = {0};

    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return NULL; /* a scripted body that is not JSON: sent as is */
    }
    switch (api) {
    case MOCK_API_ANTHROPIC:
        sse_anthropic(&b, root);
        break;
    case MOCK_API_GEMINI:
        sse_gemini(&b, root);
        break;
    case MOCK_API_OPENAI:
        sse_openai(&b, root, req);
        break;
    }
    cJSON_Delete(root);
    xbuf_put(&b, "", 1);
    return b.p;
}

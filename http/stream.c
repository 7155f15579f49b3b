/* stream.c: streamed answers. The stall watch of a request (its
 * first-byte and idle timeouts, checked from curl's progress callback,
 * which curl runs about once a second while a low-speed limit is set) and
 * the assembly of server-sent events into the answer the protocol would
 * have sent unstreamed (http.h: http_stream_assemble), so that classify,
 * the usage, the cost and the output read one shape whatever the tier.
 *
 * The assembly is done once the answer has ended (whole, cut or stalled):
 * the client keeps the events as the body (capped like any answer). Tool
 * call deltas are kept as the unstreamed shape has them (OpenAI
 * tool_calls by index, Anthropic tool_use input, Gemini functionCall
 * parts); mapping them is http/tools.c's.
 */
#include "http/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/xalloc.h"

/* ---- the stall watch ----------------------------------------------------
 */

static int
progress_cb(void *p, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
            curl_off_t ulnow)
{
    struct http_call *call = p;
    int64_t now = clock_mono_ms();
    int64_t seen = (int64_t)(call->res.body_len + call->res.nheaders);

    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    if (seen > call->seen_bytes) {
        call->seen_bytes = seen;
        call->last_byte_ms = now;
        return 0;
    }
    if (call->last_byte_ms == 0 && call->first_byte_ms > 0 &&
        now - call->start_ms >= call->first_byte_ms)
        call->stalled = true;
    else if (call->last_byte_ms > 0 && call->idle_ms > 0 &&
             now - call->last_byte_ms >= call->idle_ms)
        call->stalled = true;
    return call->stalled ? 1 : 0; /* non-zero aborts the transfer */
}

void
http__watch_stall(struct http_call *call, const struct http_request *req)
{
    CURL *e = call->easy;

    if (req->first_byte_ms <= 0 && req->idle_ms <= 0)
        return;
    call->first_byte_ms = req->first_byte_ms;
    call->idle_ms = req->idle_ms;
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, progress_cb);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, call);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    /* A low-speed limit makes curl look at the transfer every second even
     * when nothing arrives, which runs progress_cb; its own time is past
     * the request's timeout, so it never ends the transfer itself. */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME,
                     (long)(call->timeout_ms / 1000 + 2));
}

/* ---- server-sent events -------------------------------------------------
 */

/* What the events of one answer build up. */
struct acc {
    enum config_api api;
    cJSON *base;  /* owned: the first chunk, or Anthropic's message */
    cJSON *error; /* owned: an error object sent as an event */
    struct xbuf text;
    cJSON *finish;        /* owned: the last finish reason */
    cJSON *usage;         /* owned: the last usage */
    cJSON *extra;         /* owned array: OpenAI tool_calls, Anthropic blocks,
                             Gemini parts other than text */
    struct xbuf json[64]; /* Anthropic: each block's deltas (text, or a
                             tool_use block's input as JSON text) */
    bool any;
};

static void
keep(cJSON **slot, const cJSON *v)
{
    if (v == NULL || cJSON_IsNull(v))
        return;
    cJSON_Delete(*slot);
    *slot = cJSON_Duplicate(v, true);
}

static void
put_text(struct acc *a, const cJSON *v)
{
    if (cJSON_IsString(v))
        xbuf_put(&a->text, v->valuestring, strlen(v->valuestring));
}

/* The call a tool call delta without "index" belongs to (Gemini's
 * OpenAI layer sends none): the one with its id, else a new one when it
 * names a function or brings an id, else the last. -1: a new call. */
static int
no_index_slot(const cJSON *extra, const cJSON *tc)
{
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(tc, "id"));
    const char *name = cJSON_GetStringValue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(tc, "function"), "name"));
    const cJSON *c;
    int i = 0, n = cJSON_GetArraySize(extra);

    cJSON_ArrayForEach(c, extra)
    {
        const char *have = cJSON_GetStringValue(cJSON_GetObjectItem(c, "id"));
        if (id != NULL && id[0] != '\0' && have != NULL &&
            strcmp(have, id) == 0)
            return i;
        i++;
    }
    if (n == 0 || (id != NULL && id[0] != '\0') ||
        (name != NULL && name[0] != '\0'))
        return -1;
    return n - 1;
}

/* OpenAI: a tool call delta merged into extra by its index: its
 * arguments appended, an extra_content (a thought signature) kept. */
static void
oa_tool(struct acc *a, const cJSON *tc)
{
    const cJSON *idx = cJSON_GetObjectItemCaseSensitive(tc, "index");
    int i = cJSON_IsNumber(idx) ? idx->valueint : no_index_slot(a->extra, tc);
    cJSON *have = i >= 0 ? cJSON_GetArrayItem(a->extra, i) : NULL, *fn, *args;
    const cJSON *dfn = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const cJSON *dargs = cJSON_GetObjectItemCaseSensitive(dfn, "arguments");
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(tc, "extra_content");
    char *joined;

    if (have == NULL) {
        if (i < 0)
            i = cJSON_GetArraySize(a->extra);
        if (i != cJSON_GetArraySize(a->extra) || i > 63)
            return;
        have = cJSON_Duplicate(tc, true);
        cJSON_DeleteItemFromObjectCaseSensitive(have, "index");
        cJSON_AddItemToArray(a->extra, have);
        return;
    }
    if (extra != NULL && !cJSON_HasObjectItem(have, "extra_content"))
        cJSON_AddItemToObject(have, "extra_content",
                              cJSON_Duplicate(extra, true));
    fn = cJSON_GetObjectItemCaseSensitive(have, "function");
    args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
    if (!cJSON_IsString(dargs) || !cJSON_IsObject(fn))
        return;
    if (args == NULL) {
        /* vLLM names the call in a delta of its own, then sends the
         * arguments. */
        cJSON_AddStringToObject(fn, "arguments", dargs->valuestring);
        return;
    }
    if (!cJSON_IsString(args))
        return;
    joined =
        xmalloc(strlen(args->valuestring) + strlen(dargs->valuestring) + 1);
    strcpy(joined, args->valuestring);
    strcat(joined, dargs->valuestring);
    cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments",
                                           cJSON_CreateString(joined));
    free(joined);
}

static void
oa_event(struct acc *a, const cJSON *o)
{
    const cJSON *c0 =
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "choices"), 0);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(c0, "delta"), *tc;

    if (a->base == NULL)
        a->base = cJSON_Duplicate(o, true);
    put_text(a, cJSON_GetObjectItemCaseSensitive(d, "content"));
    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(d, "tool_calls"))
        oa_tool(a, tc);
    keep(&a->finish, cJSON_GetObjectItemCaseSensitive(c0, "finish_reason"));
    keep(&a->usage, cJSON_GetObjectItemCaseSensitive(o, "usage"));
}

/* Anthropic: the message's events, by type. */
static void
an_event(struct acc *a, const cJSON *o)
{
    const char *ty = cJSON_GetStringValue(cJSON_GetObjectItem(o, "type"));
    const cJSON *idx = cJSON_GetObjectItemCaseSensitive(o, "index");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "delta"), *u;
    int i = cJSON_IsNumber(idx) ? idx->valueint : -1;
    cJSON *block = i >= 0 ? cJSON_GetArrayItem(a->extra, i) : NULL;

    if (ty == NULL)
        return;
    if (strcmp(ty, "message_start") == 0) {
        keep(&a->base, cJSON_GetObjectItemCaseSensitive(o, "message"));
        keep(&a->usage, cJSON_GetObjectItemCaseSensitive(a->base, "usage"));
    } else if (strcmp(ty, "content_block_start") == 0 && i >= 0 && i < 64 &&
               i == cJSON_GetArraySize(a->extra)) {
        cJSON_AddItemToArray(
            a->extra,
            cJSON_Duplicate(
                cJSON_GetObjectItemCaseSensitive(o, "content_block"), true));
    } else if (strcmp(ty, "content_block_delta") == 0 && block != NULL) {
        /* A block's deltas (text, or a tool_use's input as JSON text)
         * gather in its buffer, set in the block at the end. */
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(d, "text");
        const cJSON *pj = cJSON_GetObjectItemCaseSensitive(d, "partial_json");
        if (!cJSON_IsString(tx))
            tx = pj;
        if (cJSON_IsString(tx))
            xbuf_put(&a->json[i], tx->valuestring, strlen(tx->valuestring));
    } else if (strcmp(ty, "message_delta") == 0) {
        keep(&a->finish, cJSON_GetObjectItemCaseSensitive(d, "stop_reason"));
        u = cJSON_GetObjectItemCaseSensitive(o, "usage");
        if (cJSON_IsObject(u) && cJSON_IsObject(a->usage)) {
            const cJSON *f;
            cJSON_ArrayForEach(f, u)
            {
                cJSON_DeleteItemFromObjectCaseSensitive(a->usage, f->string);
                cJSON_AddItemToObject(a->usage, f->string,
                                      cJSON_Duplicate(f, true));
            }
        }
    }
}

static void
ge_event(struct acc *a, const cJSON *o)
{
    const cJSON *c0 = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(o, "candidates"), 0);
    const cJSON *part;

    if (a->base == NULL)
        a->base = cJSON_Duplicate(o, true);
    keep(&a->finish, cJSON_GetObjectItemCaseSensitive(c0, "finishReason"));
    keep(&a->usage, cJSON_GetObjectItemCaseSensitive(o, "usageMetadata"));
    if (cJSON_HasObjectItem(o, "promptFeedback")) {
        cJSON_DeleteItemFromObjectCaseSensitive(a->base, "promptFeedback");
        cJSON_AddItemToObject(
            a->base, "promptFeedback",
            cJSON_Duplicate(cJSON_GetObjectItem(o, "promptFeedback"), true));
    }
    cJSON_ArrayForEach(
        part, cJSON_GetObjectItemCaseSensitive(
                  cJSON_GetObjectItemCaseSensitive(c0, "content"), "parts"))
    {
        if (cJSON_HasObjectItem(part, "text") &&
            !cJSON_IsTrue(cJSON_GetObjectItem(part, "thought")))
            put_text(a, cJSON_GetObjectItemCaseSensitive(part, "text"));
        else if (cJSON_GetArraySize(a->extra) < 64)
            cJSON_AddItemToArray(a->extra, cJSON_Duplicate(part, true));
    }
}

/* One event's data. "[DONE]" and what does not parse are skipped. */
static void
on_data(struct acc *a, const char *data, size_t n)
{
    cJSON *o = json_parse_exact(data, n);

    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return;
    }
    a->any = true;
    if (cJSON_HasObjectItem(o, "error"))
        keep(&a->error, o);
    else if (a->api == CONFIG_API_ANTHROPIC)
        an_event(a, o);
    else if (a->api == CONFIG_API_GEMINI)
        ge_event(a, o);
    else
        oa_event(a, o);
    cJSON_Delete(o);
}

/* Walks body's events: each ends at a blank line; its data lines are
 * joined by newlines. An event the cut left unfinished is dropped. */
static void
walk(struct acc *a, const char *body, size_t len)
{
    struct xbuf data = {0};
    size_t i = 0;

    while (i < len) {
        const char *line = body + i, *nl = memchr(line, '\n', len - i);
        size_t n;
        if (nl == NULL)
            break; /* an unfinished line: the stream was cut */
        n = (size_t)(nl - line);
        i += n + 1;
        if (n > 0 && line[n - 1] == '\r')
            n--;
        if (n == 0) {
            if (data.len > 0)
                on_data(a, data.p, data.len);
            data.len = 0;
        } else if (n >= 5 && memcmp(line, "data:", 5) == 0) {
            size_t skip = n > 5 && line[5] == ' ' ? 6 : 5;
            if (data.len > 0)
                xbuf_lit(&data, "\n");
            xbuf_put(&data, line + skip, n - skip);
        }
    }
    free(data.p);
}

/* ---- the unstreamed answers --------------------------------------------
 */

static cJSON *
text_of(struct acc *a)
{
    cJSON *s;

    xbuf_put(&a->text, "", 1);
    s = cJSON_CreateString(a->text.p);
    return s;
}

static cJSON *
openai_answer(struct acc *a)
{
    cJSON *root = cJSON_CreateObject(), *ch = cJSON_CreateObject();
    cJSON *msg = cJSON_CreateObject();
    const char *keys[] = {"id", "created", "model"};

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(keys); i++)
        http__native_copy(a->base, keys[i], root, keys[i]);
    cJSON_AddStringToObject(root, "object", "chat.completion");
    cJSON_AddNumberToObject(ch, "index", 0);
    cJSON_AddStringToObject(msg, "role", "assistant");
    /* A tool call alone has null content, as unstreamed. */
    if (a->text.len == 0 && cJSON_GetArraySize(a->extra) > 0)
        cJSON_AddNullToObject(msg, "content");
    else
        cJSON_AddItemToObject(msg, "content", text_of(a));
    if (cJSON_GetArraySize(a->extra) > 0) {
        cJSON_AddItemToObject(msg, "tool_calls", a->extra);
        a->extra = NULL;
    }
    cJSON_AddItemToObject(ch, "message", msg);
    cJSON_AddItemToObject(ch, "finish_reason",
                          a->finish ? a->finish : cJSON_CreateNull());
    a->finish = NULL;
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "choices"), ch);
    if (a->usage != NULL)
        cJSON_AddItemToObject(root, "usage", a->usage);
    a->usage = NULL;
    return root;
}

static cJSON *
anthropic_answer(struct acc *a)
{
    cJSON *root = a->base ? a->base : cJSON_CreateObject(), *b;
    int i = 0;

    a->base = NULL;
    cJSON_ArrayForEach(b, a->extra)
    {
        struct xbuf *t = &a->json[i++];
        cJSON *in;
        if (t->len == 0)
            continue;
        if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(b, "text"))) {
            xbuf_put(t, "", 1);
            cJSON_ReplaceItemInObjectCaseSensitive(b, "text",
                                                   cJSON_CreateString(t->p));
        } else if ((in = json_parse_exact(t->p, t->len)) != NULL) {
            cJSON_DeleteItemFromObjectCaseSensitive(b, "input");
            cJSON_AddItemToObject(b, "input", in);
        }
    }
    cJSON_DeleteItemFromObjectCaseSensitive(root, "content");
    cJSON_AddItemToObject(root, "content", a->extra);
    a->extra = NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(root, "stop_reason");
    cJSON_AddItemToObject(root, "stop_reason",
                          a->finish ? a->finish : cJSON_CreateNull());
    a->finish = NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(root, "usage");
    if (a->usage != NULL)
        cJSON_AddItemToObject(root, "usage", a->usage);
    a->usage = NULL;
    return root;
}

static cJSON *
gemini_answer(struct acc *a)
{
    cJSON *root = cJSON_CreateObject(), *c, *ct, *parts, *p;
    const char *keys[] = {"promptFeedback", "modelVersion", "responseId"};
    bool cand = a->text.len > 0 || cJSON_GetArraySize(a->extra) > 0 ||
                a->finish != NULL;

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(keys); i++)
        http__native_copy(a->base, keys[i], root, keys[i]);
    if (cand) {
        c = cJSON_CreateObject();
        ct = cJSON_AddObjectToObject(c, "content");
        parts = cJSON_AddArrayToObject(ct, "parts");
        /* A text part only where there was text (or nothing else), as
         * an unstreamed answer of calls alone has none. */
        if (a->text.len > 0 || cJSON_GetArraySize(a->extra) == 0) {
            p = cJSON_CreateObject();
            cJSON_AddItemToObject(p, "text", text_of(a));
            cJSON_AddItemToArray(parts, p);
        }
        while (cJSON_GetArraySize(a->extra) > 0)
            cJSON_AddItemToArray(parts, cJSON_DetachItemFromArray(a->extra, 0));
        cJSON_AddStringToObject(ct, "role", "model");
        if (a->finish != NULL)
            cJSON_AddItemToObject(c, "finishReason", a->finish);
        a->finish = NULL;
        cJSON_AddNumberToObject(c, "index", 0);
        cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "candidates"), c);
    }
    if (a->usage != NULL)
        cJSON_AddItemToObject(root, "usageMetadata", a->usage);
    a->usage = NULL;
    return root;
}

int
http_stream_assemble(enum config_api api, const char *body, size_t len,
                     char **out)
{
    struct acc a = {.api = api, .extra = cJSON_CreateArray()};
    cJSON *root;

    walk(&a, body, len);
    if (!a.any) {
        root = NULL;
    } else if (a.error != NULL) {
        root = a.error;
        a.error = NULL;
    } else if (api == CONFIG_API_ANTHROPIC) {
        root = anthropic_answer(&a);
    } else if (api == CONFIG_API_GEMINI) {
        root = gemini_answer(&a);
    } else {
        root = openai_answer(&a);
    }
    cJSON_Delete(a.base);
    cJSON_Delete(a.error);
    cJSON_Delete(a.finish);
    cJSON_Delete(a.usage);
    cJSON_Delete(a.extra);
    free(a.text.p);
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(a.json); i++)
        free(a.json[i].p);
    if (root == NULL)
        return -EINVAL;
    *out = json_print(root);
    cJSON_Delete(root);
    return 0;
}

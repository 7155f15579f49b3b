/* toolcall.c: the tool calls of a model's answer, read from any of the
 * shapes providers send, into one shape (struct http_tool_calls).
 *
 * What real answers do, and what is made of it (tests/data/toolcalls/
 * holds one answer per provider shape, malformed ones among them):
 *  - arguments are a JSON text in a string (OpenAI and its layers), an
 *    object (Anthropic's input, Gemini's args, Ollama; some layers do it
 *    too: read as is, noted), empty ("" from a call without parameters:
 *    read as {}), or text that does not parse (a problem of that call);
 *  - ids are missing or "" (Gemini's layer, the legacy function_call,
 *    Ollama): one is made from the call's place and content, so reading
 *    the same answer again (after a crash) gives the same id;
 *  - finish_reason "stop" beside tool calls (Gemini's layer, some OpenAI
 *    models): the calls are calls, noted in stop_with_calls;
 *  - an empty or unknown name, and an id twice, are problems of that call;
 *    the other calls of the answer are read as they are.
 */
#include "http/tools.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

static const char *const problem_names[] = {
    [HTTP_CALL_OK] = "ok",
    [HTTP_CALL_EMPTY_NAME] = "empty_name",
    [HTTP_CALL_UNKNOWN_TOOL] = "unknown_tool",
    [HTTP_CALL_ARGS_NOT_JSON] = "args_not_json",
    [HTTP_CALL_ARGS_NOT_OBJECT] = "args_not_object",
    [HTTP_CALL_DUPLICATE_ID] = "duplicate_id",
};

const char *
http_call_problem_name(enum http_call_problem p)
{
    if ((size_t)p >= STEPQ_ARRAY_LEN(problem_names))
        return "unknown";
    return problem_names[p];
}

static const char *
str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* fnv1a hashes s into h (FNV-1a, 64 bits). */
static uint64_t
fnv1a(uint64_t h, const char *s)
{
    for (; s != NULL && *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
    return h;
}

/* add_call appends one call: name and id as given (NULL: absent), args
 * the arguments member as it came (NULL: absent). An object is what the
 * native shapes send; in an OpenAI-shaped answer (c->format) it is noted. */
static void
add_call(struct http_tool_calls *c, const char *id, const char *name,
         const cJSON *args)
{
    struct http_tool_call *t;
    const char *p;

    c->v = xrealloc(c->v, (c->n + 1) * sizeof(*c->v));
    t = &c->v[c->n++];
    memset(t, 0, sizeof(*t));
    t->name = xstrdup(name ? name : "");
    if (cJSON_IsString(args)) {
        t->args_text = xstrdup(args->valuestring);
        p = args->valuestring + strspn(args->valuestring, " \t\r\n");
        t->args = *p == '\0' ? cJSON_CreateObject()
                             : json_parse_exact(args->valuestring,
                                                strlen(args->valuestring));
    } else if (args == NULL || cJSON_IsNull(args)) {
        t->args = cJSON_CreateObject();
        t->args_text = xstrdup("{}");
    } else {
        t->args = cJSON_Duplicate(args, true);
        t->args_text = json_print(args);
        t->args_object = c->format == HTTP_TOOLS_OPENAI;
    }
    if (id != NULL && id[0] != '\0') {
        t->id = xstrdup(id);
    } else {
        char buf[48];
        uint64_t h =
            fnv1a(fnv1a(UINT64_C(0xcbf29ce484222325), t->name), t->args_text);
        snprintf(buf, sizeof(buf), "call_%zu_%016" PRIx64, c->n - 1, h);
        t->id = xstrdup(buf);
        t->id_made = true;
    }
}

/* judge sets each call's problem, the first in enum order. */
static void
judge(struct http_tool_calls *c, const char *const *known, size_t nknown)
{
    for (size_t i = 0; i < c->n; i++) {
        struct http_tool_call *t = &c->v[i];
        bool found = known == NULL;
        for (size_t k = 0; k < nknown && !found; k++)
            found = strcmp(known[k], t->name) == 0;
        if (t->name[0] == '\0')
            t->problem = HTTP_CALL_EMPTY_NAME;
        else if (!found)
            t->problem = HTTP_CALL_UNKNOWN_TOOL;
        else if (t->args == NULL)
            t->problem = HTTP_CALL_ARGS_NOT_JSON;
        else if (!cJSON_IsObject(t->args))
            t->problem = HTTP_CALL_ARGS_NOT_OBJECT;
        for (size_t k = 0; k < i && t->problem == HTTP_CALL_OK; k++) {
            if (strcmp(c->v[k].id, t->id) == 0)
                t->problem = HTTP_CALL_DUPLICATE_ID;
        }
    }
}

/* openai_calls reads message.tool_calls (and function_call) of an
 * OpenAI-shaped message; Ollama's own message has the same calls. */
static void
openai_calls(const cJSON *msg, struct http_tool_calls *c)
{
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
    const cJSON *legacy =
        cJSON_GetObjectItemCaseSensitive(msg, "function_call");
    const cJSON *tc;

    if (!cJSON_IsArray(calls))
        calls = NULL;
    cJSON_ArrayForEach(tc, calls)
    {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(tc, "extra_content"), "google");
        add_call(c, str_of(tc, "id"), str_of(fn, "name"),
                 cJSON_GetObjectItemCaseSensitive(fn, "arguments"));
        /* A Gemini thought signature, as Gemini's layer and stepq's
         * recorded turns carry it. */
        if (str_of(g, "thought_signature") != NULL)
            c->v[c->n - 1].signature = xstrdup(str_of(g, "thought_signature"));
    }
    if (c->n == 0 && cJSON_IsObject(legacy))
        add_call(c, NULL, str_of(legacy, "name"),
                 cJSON_GetObjectItemCaseSensitive(legacy, "arguments"));
    if (str_of(msg, "content") != NULL && str_of(msg, "content")[0] != '\0')
        c->text = xstrdup(str_of(msg, "content"));
}

static void
anthropic_calls(const cJSON *root, struct http_tool_calls *c)
{
    const cJSON *b;
    struct xbuf text = {0};

    cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(root, "content"))
    {
        const char *type = str_of(b, "type");
        if (type != NULL && (strcmp(type, "thinking") == 0 ||
                             strcmp(type, "redacted_thinking") == 0)) {
            if (c->thinking == NULL)
                c->thinking = cJSON_CreateArray();
            cJSON_AddItemToArray(c->thinking, cJSON_Duplicate(b, true));
        } else if (type != NULL && strcmp(type, "tool_use") == 0)
            add_call(c, str_of(b, "id"), str_of(b, "name"),
                     cJSON_GetObjectItemCaseSensitive(b, "input"));
        else if (type != NULL && strcmp(type, "text") == 0 &&
                 str_of(b, "text") != NULL)
            xbuf_put(&text, str_of(b, "text"), strlen(str_of(b, "text")));
    }
    c->text = text.p;
}

static void
gemini_calls(const cJSON *cand, struct http_tool_calls *c)
{
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(cand, "content");
    const cJSON *p;
    struct xbuf text = {0};

    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(content, "parts"))
    {
        const cJSON *fc = cJSON_GetObjectItemCaseSensitive(p, "functionCall");
        if (cJSON_IsObject(fc)) {
            add_call(c, str_of(fc, "id"), str_of(fc, "name"),
                     cJSON_GetObjectItemCaseSensitive(fc, "args"));
            if (str_of(p, "thoughtSignature") != NULL)
                c->v[c->n - 1].signature =
                    xstrdup(str_of(p, "thoughtSignature"));
        } else if (str_of(p, "text") != NULL &&
                   !cJSON_IsTrue(
                       cJSON_GetObjectItemCaseSensitive(p, "thought")))
            xbuf_put(&text, str_of(p, "text"), strlen(str_of(p, "text")));
    }
    c->text = text.p;
}

int
http_toolcalls_read(const cJSON *root, const char *const *known, size_t nknown,
                    struct http_tool_calls *out)
{
    struct http_tool_calls c = {0};
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    const cJSON *cands = cJSON_GetObjectItemCaseSensitive(root, "candidates");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(root, "message");
    const cJSON *first;
    const char *finish = NULL;

    if (cJSON_IsArray(choices) && cJSON_IsObject(first = choices->child)) {
        c.format = HTTP_TOOLS_OPENAI;
        openai_calls(cJSON_GetObjectItemCaseSensitive(first, "message"), &c);
        finish = str_of(first, "finish_reason");
    } else if (cJSON_IsArray(content)) {
        c.format = HTTP_TOOLS_ANTHROPIC;
        anthropic_calls(root, &c);
        finish = str_of(root, "stop_reason");
    } else if (cJSON_IsArray(cands) && cJSON_IsObject(first = cands->child)) {
        c.format = HTTP_TOOLS_GEMINI;
        gemini_calls(first, &c);
        finish = str_of(first, "finishReason");
    } else if (cJSON_IsObject(msg) &&
               cJSON_IsString(cJSON_GetObjectItem(msg, "role"))) {
        c.format = HTTP_TOOLS_OLLAMA;
        openai_calls(msg, &c);
        finish = str_of(root, "done_reason");
    } else {
        return -EINVAL;
    }
    c.finish = finish ? xstrdup(finish) : NULL;
    c.stop_with_calls =
        c.n > 0 && finish != NULL &&
        (strcmp(finish, "stop") == 0 || strcmp(finish, "end_turn") == 0 ||
         strcmp(finish, "STOP") == 0);
    judge(&c, known, nknown);
    *out = c;
    return 0;
}

void
http_toolcalls_cleanup(struct http_tool_calls *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].id);
        free(c->v[i].name);
        free(c->v[i].args_text);
        free(c->v[i].signature);
        cJSON_Delete(c->v[i].args);
    }
    free(c->v);
    free(c->text);
    free(c->finish);
    cJSON_Delete(c->thinking);
    memset(c, 0, sizeof(*c));
}

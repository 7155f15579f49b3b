/* tools.c: what a request with tools carries, in each provider's shape:
 * the "tools" a model is offered, and the messages a tool turn adds (the
 * model's calls, then their results). Pure: cJSON in, cJSON out.
 *
 * Shapes as the providers document them: OpenAI's chat completions
 * "Function calling" guide, Anthropic's Messages "Tool use" guide and
 * Gemini's generateContent "Function calling" guide (see also
 * tests/data/toolcalls/README.md for the answers).
 */
#include "http/tools.h"

#include <errno.h>
#include <string.h>

#include "common/json.h"

/* Keywords Gemini's Schema (an OpenAPI 3.0 subset) does not take; sent,
 * they make the request a 400 ("Unknown name ..."). */
static const char *const gemini_drop[] = {
    "additionalProperties", "const", "title", "default", "examples", NULL};

static bool
dropped(const char *k)
{
    for (const char *const *d = gemini_drop; *d != NULL; d++) {
        if (strcmp(*d, k) == 0)
            return true;
    }
    return false;
}

static cJSON *gemini_schema(const cJSON *s);

/* gemini_type sets o's type from a JSON Schema "type" t: one name as it
 * is; an array with "null" gives nullable, and more than one other name
 * an anyOf of each (Gemini's Schema has one type a level). */
static void
gemini_type(cJSON *o, const cJSON *t)
{
    const cJSON *c;
    cJSON *any = NULL;
    int other = 0;

    if (cJSON_IsString(t)) {
        cJSON_AddStringToObject(o, "type", t->valuestring);
        return;
    }
    cJSON_ArrayForEach(c, t) other += strcmp(c->valuestring, "null") != 0;
    cJSON_ArrayForEach(c, t)
    {
        if (strcmp(c->valuestring, "null") == 0) {
            cJSON_AddBoolToObject(o, "nullable", true);
        } else if (other == 1) {
            cJSON_AddStringToObject(o, "type", c->valuestring);
        } else {
            cJSON *alt = cJSON_CreateObject();
            if (any == NULL)
                any = cJSON_AddArrayToObject(o, "anyOf");
            cJSON_AddStringToObject(alt, "type", c->valuestring);
            cJSON_AddItemToArray(any, alt);
        }
    }
}

/* gemini_schema returns s said as Gemini's Schema. Caller owns it. */
static cJSON *
gemini_schema(const cJSON *s)
{
    cJSON *o = cJSON_CreateObject();
    const cJSON *k, *c;

    cJSON_ArrayForEach(k, s)
    {
        if (dropped(k->string))
            continue;
        if (strcmp(k->string, "type") == 0) {
            gemini_type(o, k);
        } else if (strcmp(k->string, "properties") == 0) {
            cJSON *p = cJSON_AddObjectToObject(o, "properties");
            cJSON_ArrayForEach(c, k)
                cJSON_AddItemToObject(p, c->string, gemini_schema(c));
        } else if (strcmp(k->string, "items") == 0) {
            cJSON_AddItemToObject(o, "items", gemini_schema(k));
        } else if (strcmp(k->string, "anyOf") == 0) {
            cJSON *a = cJSON_AddArrayToObject(o, "anyOf");
            cJSON_ArrayForEach(c, k) cJSON_AddItemToArray(a, gemini_schema(c));
        } else {
            cJSON_AddItemToObject(o, k->string, cJSON_Duplicate(k, true));
        }
    }
    return o;
}

static cJSON *
empty_object_schema(void)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "type", "object");
    return o;
}

/* has_properties: a schema with a non-empty "properties", or one that is
 * not an object's (a tool's parameters are one). */
static bool
has_properties(const cJSON *s)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(s, "properties");

    if (s == NULL)
        return false;
    if (cJSON_IsString(t) && strcmp(t->valuestring, "object") != 0)
        return true;
    return cJSON_IsObject(p) && p->child != NULL;
}

cJSON *
http_tools_json(const struct http_tool *tools, size_t n,
                enum http_tool_format f)
{
    cJSON *arr = cJSON_CreateArray(), *decls = NULL;

    if (f == HTTP_TOOLS_GEMINI) {
        cJSON *t = cJSON_CreateObject();
        decls = cJSON_AddArrayToObject(t, "functionDeclarations");
        cJSON_AddItemToArray(arr, t);
    }
    for (size_t i = 0; i < n; i++) {
        const struct http_tool *t = &tools[i];
        cJSON *fn = cJSON_CreateObject();
        cJSON_AddStringToObject(fn, "name", t->name);
        cJSON_AddStringToObject(fn, "description",
                                t->description ? t->description : "");
        switch (f) {
        case HTTP_TOOLS_ANTHROPIC:
            /* input_schema is required: a tool without parameters takes
             * an empty object. */
            cJSON_AddItemToObject(fn, "input_schema",
                                  t->parameters != NULL
                                      ? cJSON_Duplicate(t->parameters, true)
                                      : empty_object_schema());
            cJSON_AddItemToArray(arr, fn);
            break;
        case HTTP_TOOLS_GEMINI:
            /* Gemini refuses an object schema without properties: such a
             * tool is declared without parameters. */
            if (has_properties(t->parameters))
                cJSON_AddItemToObject(fn, "parameters",
                                      gemini_schema(t->parameters));
            cJSON_AddItemToArray(decls, fn);
            break;
        default: {
            cJSON *w = cJSON_CreateObject();
            cJSON_AddItemToObject(fn, "parameters",
                                  cJSON_Duplicate(t->parameters, true));
            cJSON_AddStringToObject(w, "type", "function");
            cJSON_AddItemToObject(w, "function", fn);
            cJSON_AddItemToArray(arr, w);
            break;
        }
        }
    }
    return arr;
}

/* ---- a tool turn's messages ---------------------------------------------- */

/* args_of returns a copy of the call's arguments as an object: {} when
 * they did not parse as one. Caller owns it. */
static cJSON *
args_of(const struct http_tool_call *c)
{
    if (cJSON_IsObject(c->args))
        return cJSON_Duplicate(c->args, true);
    return cJSON_CreateObject();
}

void
http_tool_call_extra(cJSON *tc, const struct http_tool_call *c)
{
    cJSON *g;

    if (c->signature == NULL)
        return;
    g = cJSON_AddObjectToObject(cJSON_AddObjectToObject(tc, "extra_content"),
                                "google");
    cJSON_AddStringToObject(g, "thought_signature", c->signature);
}

static void
openai_turn(cJSON *msgs, const struct http_tool_calls *c,
            const struct http_tool_result *r, size_t n)
{
    cJSON *m = cJSON_CreateObject(), *calls;

    cJSON_AddStringToObject(m, "role", "assistant");
    json_add_string(m, "content", c->text);
    calls = cJSON_AddArrayToObject(m, "tool_calls");
    for (size_t i = 0; i < c->n; i++) {
        cJSON *tc = cJSON_CreateObject(), *fn = cJSON_CreateObject();
        cJSON_AddStringToObject(tc, "id", c->v[i].id);
        cJSON_AddStringToObject(tc, "type", "function");
        cJSON_AddStringToObject(fn, "name", c->v[i].name);
        cJSON_AddStringToObject(fn, "arguments",
                                c->v[i].args_text ? c->v[i].args_text : "{}");
        cJSON_AddItemToObject(tc, "function", fn);
        http_tool_call_extra(tc, &c->v[i]);
        cJSON_AddItemToArray(calls, tc);
    }
    cJSON_AddItemToArray(msgs, m);
    for (size_t i = 0; i < n; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "role", "tool");
        cJSON_AddStringToObject(t, "tool_call_id", r[i].call->id);
        cJSON_AddStringToObject(t, "content", r[i].content);
        cJSON_AddItemToArray(msgs, t);
    }
}

static void
anthropic_turn(cJSON *msgs, const struct http_tool_calls *c,
               const struct http_tool_result *r, size_t n)
{
    cJSON *m = cJSON_CreateObject(), *u = cJSON_CreateObject(), *blocks;

    cJSON_AddStringToObject(m, "role", "assistant");
    blocks = cJSON_AddArrayToObject(m, "content");
    /* Thinking first, as it came: Anthropic checks its signature. */
    for (const cJSON *t = c->thinking ? c->thinking->child : NULL; t != NULL;
         t = t->next)
        cJSON_AddItemToArray(blocks, cJSON_Duplicate(t, true));
    if (c->text != NULL && c->text[0] != '\0') {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "text");
        cJSON_AddStringToObject(b, "text", c->text);
        cJSON_AddItemToArray(blocks, b);
    }
    for (size_t i = 0; i < c->n; i++) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "tool_use");
        cJSON_AddStringToObject(b, "id", c->v[i].id);
        cJSON_AddStringToObject(b, "name", c->v[i].name);
        cJSON_AddItemToObject(b, "input", args_of(&c->v[i]));
        cJSON_AddItemToArray(blocks, b);
    }
    cJSON_AddItemToArray(msgs, m);
    cJSON_AddStringToObject(u, "role", "user");
    blocks = cJSON_AddArrayToObject(u, "content");
    for (size_t i = 0; i < n; i++) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "tool_result");
        cJSON_AddStringToObject(b, "tool_use_id", r[i].call->id);
        cJSON_AddStringToObject(b, "content", r[i].content);
        if (r[i].is_error)
            cJSON_AddBoolToObject(b, "is_error", true);
        cJSON_AddItemToArray(blocks, b);
    }
    cJSON_AddItemToArray(msgs, u);
}

static void
gemini_turn(cJSON *msgs, const struct http_tool_calls *c,
            const struct http_tool_result *r, size_t n)
{
    cJSON *m = cJSON_CreateObject(), *u = cJSON_CreateObject(), *parts;

    cJSON_AddStringToObject(m, "role", "model");
    parts = cJSON_AddArrayToObject(m, "parts");
    if (c->text != NULL && c->text[0] != '\0') {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "text", c->text);
        cJSON_AddItemToArray(parts, p);
    }
    for (size_t i = 0; i < c->n; i++) {
        cJSON *p = cJSON_CreateObject(), *fc = cJSON_CreateObject();
        if (!c->v[i].id_made)
            cJSON_AddStringToObject(fc, "id", c->v[i].id);
        cJSON_AddStringToObject(fc, "name", c->v[i].name);
        cJSON_AddItemToObject(fc, "args", args_of(&c->v[i]));
        cJSON_AddItemToObject(p, "functionCall", fc);
        if (c->v[i].signature != NULL)
            cJSON_AddStringToObject(p, "thoughtSignature", c->v[i].signature);
        cJSON_AddItemToArray(parts, p);
    }
    cJSON_AddItemToArray(msgs, m);
    cJSON_AddStringToObject(u, "role", "user");
    parts = cJSON_AddArrayToObject(u, "parts");
    for (size_t i = 0; i < n; i++) {
        cJSON *p = cJSON_CreateObject(), *fr = cJSON_CreateObject();
        cJSON *resp = cJSON_CreateObject();
        if (!r[i].call->id_made)
            cJSON_AddStringToObject(fr, "id", r[i].call->id);
        cJSON_AddStringToObject(fr, "name", r[i].call->name);
        cJSON_AddStringToObject(resp, r[i].is_error ? "error" : "content",
                                r[i].content);
        cJSON_AddItemToObject(fr, "response", resp);
        cJSON_AddItemToObject(p, "functionResponse", fr);
        cJSON_AddItemToArray(parts, p);
    }
    cJSON_AddItemToArray(msgs, u);
}

int
http_tool_turn_messages(cJSON *messages, enum http_tool_format f,
                        const struct http_tool_calls *c,
                        const struct http_tool_result *r, size_t n)
{
    if (!cJSON_IsArray(messages) || f == HTTP_TOOLS_OLLAMA)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (r[i].call == NULL || r[i].content == NULL)
            return -EINVAL;
    }
    if (f == HTTP_TOOLS_ANTHROPIC)
        anthropic_turn(messages, c, r, n);
    else if (f == HTTP_TOOLS_GEMINI)
        gemini_turn(messages, c, r, n);
    else
        openai_turn(messages, c, r, n);
    return 0;
}

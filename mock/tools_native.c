/* tools_native.c: the checks the native protocols make of a request's
 * tools and tool turns before answering, with their own 400 messages, so
 * that a client mapping tools wrong fails against the mock as it would
 * against the provider:
 *  - Anthropic: each tool has a name and an input_schema; tool_use ids
 *    match ^[a-zA-Z0-9_-]+$; each tool_use block has its tool_result in
 *    the next message, and each tool_result a tool_use in the one before;
 *  - Gemini: a function's parameters hold no JSON Schema keyword its
 *    Schema lacks (additionalProperties, ...), an object's properties are
 *    not empty, and a turn of function calls is followed by as many
 *    function responses.
 */
#include "mock/internal.h"

#include <stdio.h>
#include <string.h>

static const char *
str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool
is_type(const cJSON *b, const char *type)
{
    const char *t = str_of(b, "type");
    return t != NULL && strcmp(t, type) == 0;
}

/* Whether content (an Anthropic message's) holds a block of type whose
 * key member is id. */
static bool
has_block(const cJSON *content, const char *type, const char *key,
          const char *id)
{
    const cJSON *b;

    cJSON_ArrayForEach(b, content)
    {
        const char *v = str_of(b, key);
        if (is_type(b, type) && v != NULL && strcmp(v, id) == 0)
            return true;
    }
    return false;
}

static bool
id_ok(const char *id)
{
    return id != NULL && id[0] != '\0' &&
           strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "0123456789_-") == strlen(id);
}

/* One message's blocks against the message before (prev) and after. */
static bool
anthropic_turn_ok(const cJSON *m, int i, const cJSON *prev, char *msg,
                  size_t len)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content"), *b;
    const cJSON *next = cJSON_GetObjectItemCaseSensitive(m->next, "content");
    int k = 0;

    cJSON_ArrayForEach(b, c)
    {
        const char *id = str_of(b, "id"), *ref = str_of(b, "tool_use_id");
        if (is_type(b, "tool_use") && !id_ok(id)) {
            snprintf(msg, len,
                     "messages.%d.content.%d.tool_use.id: String should "
                     "match pattern '^[a-zA-Z0-9_-]+$'",
                     i, k);
            return false;
        }
        if (is_type(b, "tool_use") &&
            !has_block(next, "tool_result", "tool_use_id", id)) {
            snprintf(msg, len,
                     "messages.%d: `tool_use` ids were found without "
                     "`tool_result` blocks immediately after: %s. Each "
                     "`tool_use` block must have a corresponding "
                     "`tool_result` block in the next message.",
                     i, id);
            return false;
        }
        if (is_type(b, "tool_result") &&
            (ref == NULL ||
             !has_block(cJSON_GetObjectItemCaseSensitive(prev, "content"),
                        "tool_use", "id", ref))) {
            snprintf(msg, len,
                     "messages.%d.content.%d: unexpected `tool_use_id` found "
                     "in `tool_result` blocks: %s. Each `tool_result` block "
                     "must have a corresponding `tool_use` block in the "
                     "previous message.",
                     i, k, ref ? ref : "(none)");
            return false;
        }
        k++;
    }
    return true;
}

bool
mock__anthropic_tools_ok(const cJSON *req, char *msg, size_t len)
{
    const cJSON *t, *m, *prev = NULL;
    int i = 0;

    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(req, "tools"))
    {
        const char *what = str_of(t, "name") == NULL ? "name"
                           : !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(
                                 t, "input_schema"))
                               ? "input_schema"
                               : NULL;
        if (what != NULL) {
            snprintf(msg, len, "tools.%d.custom.%s: Field required", i, what);
            return false;
        }
        i++;
    }
    i = 0;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(req, "messages"))
    {
        if (!anthropic_turn_ok(m, i++, prev, msg, len))
            return false;
        prev = m;
    }
    return true;
}

/* JSON Schema keywords Gemini's Schema has no field for. */
static const char *const unknown_keys[] = {
    "additionalProperties", "$schema", "$ref", "$defs", "const", NULL};

/* Checks schema s at path (Gemini's words for it). */
static bool
gemini_schema_ok(const cJSON *s, const char *path, char *msg, size_t len)
{
    const cJSON *k, *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    char sub[256];

    cJSON_ArrayForEach(k, s)
    {
        for (const char *const *u = unknown_keys; *u != NULL; u++) {
            if (strcmp(k->string, *u) == 0) {
                snprintf(msg, len,
                         "Invalid JSON payload received. Unknown name \"%s\" "
                         "at '%s': Cannot find field.",
                         *u, path);
                return false;
            }
        }
    }
    if (is_type(s, "object") && (!cJSON_IsObject(props) || !props->child)) {
        snprintf(msg, len,
                 "* GenerateContentRequest.%s.properties: should be "
                 "non-empty for OBJECT type\n",
                 path);
        return false;
    }
    cJSON_ArrayForEach(k, props)
    {
        snprintf(sub, sizeof(sub), "%s.properties[%s].value", path, k->string);
        if (!gemini_schema_ok(k, sub, msg, len))
            return false;
    }
    return true;
}

/* Counts the parts of content m that have member key. */
static int
parts_with(const cJSON *m, const char *key)
{
    const cJSON *p;
    int n = 0;

    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(m, "parts")) n +=
        cJSON_HasObjectItem(p, key);
    return n;
}

bool
mock__gemini_tools_ok(const cJSON *req, char *msg, size_t len)
{
    const cJSON *t, *d, *m;
    char path[128];
    int i = 0;

    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(req, "tools"))
    {
        int j = 0;
        cJSON_ArrayForEach(
            d, cJSON_GetObjectItemCaseSensitive(t, "functionDeclarations"))
        {
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(d, "parameters");
            snprintf(path, sizeof(path),
                     "tools[%d].function_declarations[%d].parameters", i, j++);
            if (p != NULL && !gemini_schema_ok(p, path, msg, len))
                return false;
        }
        i++;
    }
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(req, "contents"))
    {
        int calls = parts_with(m, "functionCall");
        if (calls > 0 && parts_with(m->next, "functionResponse") != calls) {
            snprintf(msg, len,
                     "Please ensure that the number of function response "
                     "parts is equal to the number of function call parts of "
                     "the function call turn.");
            return false;
        }
    }
    return true;
}

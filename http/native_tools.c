/* native_tools.c: the tool side of a job's OpenAI-shaped request, mapped
 * to the native protocols (anthropic.c, gemini.c call it), so that an
 * agent step's turns can go to any tier with the same conversation:
 *  - "tools" [{"type": "function", "function": {name, description,
 *    parameters}}] become Anthropic's tools (input_schema) or Gemini's
 *    functionDeclarations (http_tools_json, tools.c);
 *  - "tool_choice" becomes Anthropic's tool_choice (auto, none, any,
 *    tool) or Gemini's toolConfig.functionCallingConfig (AUTO, NONE,
 *    ANY with allowedFunctionNames); "parallel_tool_calls": false is
 *    Anthropic's disable_parallel_tool_use (Gemini has none: not sent);
 *  - an assistant message with tool_calls and the tool messages after it
 *    become one turn in the protocol's shape (http_tool_turn_messages,
 *    tools.c): tool_use and tool_result blocks, or functionCall and
 *    functionResponse parts, results in the order of the calls.
 */
#include "http/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "http/tools.h"

/* What Gemini 3 takes in place of a thought signature for a call it did
 * not make (one from another tier's turn): Google's documented value. */
#define GEMINI_NO_SIGNATURE "skip_thought_signature_validator"

/* Reads request.tools into *out (owned array of *n, borrowed strings). */
static int
read_tools(const cJSON *tools, struct http_tool **out, size_t *n, char *err,
           size_t errlen)
{
    struct http_tool *v;
    const cJSON *t;
    size_t k = 0;

    if (!cJSON_IsArray(tools))
        return http__fail(err, errlen, -EINVAL,
                          "request.tools: must be an array of functions");
    v = xcalloc((size_t)cJSON_GetArraySize(tools) + 1, sizeof(*v));
    cJSON_ArrayForEach(t, tools)
    {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(fn, "description");
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if ((ty != NULL && (!cJSON_IsString(ty) ||
                            strcmp(ty->valuestring, "function") != 0)) ||
            !cJSON_IsString(name) || name->valuestring[0] == '\0' ||
            (p != NULL && !cJSON_IsObject(p))) {
            free(v);
            return http__fail(err, errlen, -EINVAL,
                              "request.tools[%zu]: must be {\"type\": "
                              "\"function\", \"function\": {\"name\", "
                              "\"parameters\": {...}}}",
                              k);
        }
        v[k++] = (struct http_tool){
            .name = name->valuestring,
            .description = cJSON_IsString(d) ? d->valuestring : NULL,
            .parameters = p};
    }
    *out = v;
    *n = k;
    return 0;
}

/* The name a tool_choice of {"type": "function", "function": {"name"}}
 * names, or NULL. */
static const char *
choice_name(const cJSON *choice)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(choice, "function");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");

    return cJSON_IsString(name) && name->valuestring[0] != '\0'
               ? name->valuestring
               : NULL;
}

/* tool_choice's values and their twins: Anthropic's tool_choice type,
 * Gemini's functionCallingConfig mode. The last row is a named function
 * ({"type": "function", "function": {"name"}}). */
static const struct {
    const char *openai, *anthropic, *gemini;
} choices[] = {
    {"auto", "auto", "AUTO"},
    {"none", "none", "NONE"},
    {"required", "any", "ANY"},
    {NULL, "tool", "ANY"},
};

/* The row of choices for choice (NULL: auto), or -EINVAL with err. */
static int
choice_row(const cJSON *choice, char *err, size_t errlen)
{
    if (choice == NULL)
        return 0;
    for (int i = 0; cJSON_IsString(choice) && i < 3; i++) {
        if (strcmp(choice->valuestring, choices[i].openai) == 0)
            return i;
    }
    if (cJSON_IsObject(choice) && choice_name(choice) != NULL)
        return 3;
    return http__fail(err, errlen, -EINVAL,
                      "request.tool_choice: must be \"auto\", \"none\", "
                      "\"required\" or {\"type\": \"function\", "
                      "\"function\": {\"name\"}}");
}

/* Anthropic's tool_choice for row r of choices and parallel (false: one
 * call a turn); none sent for the default. */
static void
anthropic_choice(const cJSON *choice, int r, const cJSON *parallel, cJSON *body)
{
    cJSON *tc;

    if (choice == NULL && !cJSON_IsFalse(parallel))
        return;
    tc = cJSON_AddObjectToObject(body, "tool_choice");
    cJSON_AddStringToObject(tc, "type", choices[r].anthropic);
    if (r == 3)
        cJSON_AddStringToObject(tc, "name", choice_name(choice));
    if (cJSON_IsFalse(parallel) && r != 1)
        cJSON_AddTrueToObject(tc, "disable_parallel_tool_use");
}

/* Gemini's toolConfig for row r (none sent without a tool_choice). */
static void
gemini_choice(const cJSON *choice, int r, cJSON *body)
{
    cJSON *fcc;

    if (choice == NULL)
        return;
    fcc = cJSON_AddObjectToObject(cJSON_AddObjectToObject(body, "toolConfig"),
                                  "functionCallingConfig");
    cJSON_AddStringToObject(fcc, "mode", choices[r].gemini);
    if (r == 3)
        cJSON_AddItemToArray(
            cJSON_AddArrayToObject(fcc, "allowedFunctionNames"),
            cJSON_CreateString(choice_name(choice)));
}

int
http__native_tools(const cJSON *request, enum http_tool_format f, bool cache,
                   cJSON *body, char *err, size_t errlen)
{
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(request, "tools");
    const cJSON *choice =
        cJSON_GetObjectItemCaseSensitive(request, "tool_choice");
    const cJSON *parallel =
        cJSON_GetObjectItemCaseSensitive(request, "parallel_tool_calls");
    struct http_tool *v = NULL;
    size_t n = 0;
    cJSON *arr;
    int rc, r;

    if (cJSON_IsNull(choice))
        choice = NULL;
    if (parallel != NULL && !cJSON_IsBool(parallel) && !cJSON_IsNull(parallel))
        return http__fail(err, errlen, -EINVAL,
                          "request.parallel_tool_calls: must be true or false");
    if (tools == NULL || cJSON_IsNull(tools) ||
        (cJSON_IsArray(tools) && tools->child == NULL))
        return 0; /* no tools: a choice or parallel flag has no use */
    if ((r = choice_row(choice, err, errlen)) < 0 ||
        (rc = read_tools(tools, &v, &n, err, errlen)) != 0)
        return r < 0 ? r : rc;
    arr = http_tools_json(v, n, f);
    free(v);
    if (f == HTTP_TOOLS_ANTHROPIC && cache) {
        /* Tools come first in the prompt: a breakpoint on the last one
         * caches them all. */
        cJSON *cc = cJSON_AddObjectToObject(
            cJSON_GetArrayItem(arr, cJSON_GetArraySize(arr) - 1),
            "cache_control");
        cJSON_AddStringToObject(cc, "type", "ephemeral");
    }
    cJSON_AddItemToObject(body, "tools", arr);
    if (f == HTTP_TOOLS_ANTHROPIC)
        anthropic_choice(choice, r, parallel, body);
    else
        gemini_choice(choice, r, body);
    return 0;
}

/* Anthropic's tool_use ids are [A-Za-z0-9_-]+: any other byte of an id
 * another tier made becomes '_' (the same in the call and its result). */
static void
anthropic_id(char *id)
{
    for (char *p = id; *p != '\0'; p++) {
        if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') &&
            !(*p >= '0' && *p <= '9') && *p != '_' && *p != '-')
            *p = '_';
    }
}

/* made_id: an id http_toolcalls_read made for a call that came without
 * one ("call_<i>_<16 hex>"): Gemini, which pairs calls by order, gets it
 * back as it gave it, without. */
static bool
made_id(const char *id)
{
    size_t d, h;

    if (strncmp(id, "call_", 5) != 0)
        return false;
    id += 5;
    d = strspn(id, "0123456789");
    if (d == 0 || id[d] != '_')
        return false;
    h = strspn(id + d + 1, "0123456789abcdef");
    return h == 16 && id[d + 1 + h] == '\0';
}

/* The results of the calls c (in call order) from the tool messages that
 * follow msgs[i]; *last gets the last one's index. */
static int
match_results(const struct http__msg *msgs, size_t n, size_t i,
              const struct http_tool_calls *c, struct http_tool_result *res,
              size_t *last, char *err, size_t errlen)
{
    size_t j;

    for (j = i + 1; j < n && msgs[j].call_id != NULL; j++) {
        size_t k = 0;
        while (k < c->n && strcmp(c->v[k].id, msgs[j].call_id) != 0)
            k++;
        if (k == c->n || res[k].call != NULL)
            return http__fail(err, errlen, -EINVAL,
                              "request.messages[%d].tool_call_id: %s is %s",
                              msgs[j].index, msgs[j].call_id,
                              k == c->n ? "no call of the turn before it"
                                        : "answered twice");
        res[k] = (struct http_tool_result){.call = &c->v[k],
                                           .content = msgs[j].text};
    }
    for (size_t k = 0; k < c->n; k++) {
        if (res[k].call == NULL)
            return http__fail(err, errlen, -EINVAL,
                              "request.messages[%d].tool_calls[%zu]: no tool "
                              "message answers call %s",
                              msgs[i].index, k, c->v[k].id);
    }
    *last = j - 1;
    return 0;
}

int
http__native_turn(const struct http__msg *msgs, size_t n, size_t *i,
                  enum http_tool_format f, cJSON *out, char *err, size_t errlen)
{
    const struct http__msg *m = &msgs[*i];
    cJSON *root = cJSON_CreateObject(), *choice = cJSON_CreateObject();
    cJSON *msg = cJSON_CreateObject();
    struct http_tool_calls c;
    struct http_tool_result *res = NULL;
    size_t last = *i;
    int rc;

    /* Read as an answer of OpenAI's shape would be: the same ids, text
     * and thought signatures (extra_content) as the worker records. */
    cJSON_AddItemReferenceToObject(msg, "tool_calls", (cJSON *)m->calls);
    cJSON_AddItemToObject(choice, "message", msg);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "choices"), choice);
    rc = http_toolcalls_read(root, NULL, 0, &c);
    cJSON_Delete(root);
    if (rc != 0)
        return http__fail(err, errlen, -EINVAL,
                          "request.messages[%d].tool_calls: not calls",
                          m->index);
    for (size_t k = 0; k < c.n; k++) {
        if (c.v[k].name[0] == '\0' || c.v[k].id_made) {
            http_toolcalls_cleanup(&c);
            return http__fail(err, errlen, -EINVAL,
                              "request.messages[%d].tool_calls[%zu]: needs "
                              "an \"id\" and a function's \"name\"",
                              m->index, k);
        }
    }
    res = xcalloc(c.n, sizeof(*res));
    if ((rc = match_results(msgs, n, *i, &c, res, &last, err, errlen)) != 0)
        goto out;
    if (m->text[0] != '\0')
        c.text = xstrdup(m->text);
    for (size_t k = 0; k < c.n; k++) {
        if (f == HTTP_TOOLS_ANTHROPIC)
            anthropic_id(c.v[k].id);
        else
            c.v[k].id_made = made_id(c.v[k].id);
    }
    if (f == HTTP_TOOLS_GEMINI && c.v[0].signature == NULL)
        c.v[0].signature = xstrdup(GEMINI_NO_SIGNATURE);
    if ((rc = http_tool_turn_messages(out, f, &c, res, c.n)) == 0)
        *i = last;
out:
    free(res);
    http_toolcalls_cleanup(&c);
    return rc;
}

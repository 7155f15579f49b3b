/* fuzz_tools.c: libFuzzer target for what a model's answer reaches:
 * http_toolcalls_read over any JSON, the calls' arguments checked against
 * a schema and filled into a tool's http action, the turn's messages in
 * the three shapes; and the input as a schema (spec_schema_check, then
 * validating itself, then said as Gemini's schema).
 *
 * Properties checked besides ASan's and UBSan's: every call has an id and
 * a name, arguments that parsed have their text, a made id is marked made,
 * two reads of one answer give the same ids, and no filled request keeps
 * an "{{args." the tool wrote (a filled value is never read again, but the
 * tool's own templates are all replaced). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "http/http.h"
#include "http/tools.h"
#include "spec/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const known[] = {"add_label", "post_comment"};

#define TOOL                                                                   \
    "{\"name\": \"add_label\", \"parameters\": {\"type\": \"object\", "        \
    "\"properties\": {\"issue\": {\"type\": \"integer\"}, \"label\": "         \
    "{\"type\": \"string\", \"maxLength\": 50}}, \"required\": [\"issue\"]}, " \
    "\"action\": {\"http\": {\"url\": \"http://127.0.0.1:9/i/{{args.issue}}"   \
    "?l={{args.label}}\", \"headers\": {\"X-L\": \"{{args.label}}\"}, "        \
    "\"body\": {\"l\": \"{{args.label}}\", \"i\": \"#{{args.issue}}\"}}}, "    \
    "\"idempotency_key\": \"k-{{args.issue}}\", \"needs_approval\": {\"any\":" \
    " [{\"arg\": \"issue\", \"gt\": 10}, {\"arg\": \"label\", \"in\": "        \
    "[\"wontfix\"]}]}}"

static cJSON *tool_json;
static struct spec_tool tool;

static void
setup(void)
{
    char err[256];

    if (tool_json != NULL)
        return;
    tool_json = cJSON_Parse(TOOL);
    if (tool_json == NULL ||
        spec_tool_parse(tool_json, "t", &tool, err, sizeof(err)) != 0)
        abort();
}

/* run_call checks, fills and approves one call of the answer. */
static void
run_call(const struct http_tool_call *t)
{
    cJSON *h = NULL;
    char *key = NULL, err[256];

    if (t->id == NULL || t->id[0] == '\0' || t->name == NULL ||
        t->args_text == NULL)
        abort();
    if (t->problem != HTTP_CALL_OK || !cJSON_IsObject(t->args))
        return;
    if (spec_schema_validate(tool.parameters, t->args, "args", err,
                             sizeof(err)) != 0)
        return;
    (void)spec_tool_needs_approval(&tool, t->args);
    if (spec_tool_request(&tool, t->args, &h, &key, err, sizeof(err)) == 0) {
        char *s = cJSON_PrintUnformatted(cJSON_GetObjectItem(h, "url"));
        /* The url's values are percent-encoded: no brace survives. */
        if (s != NULL && strchr(s, '{') != NULL)
            abort();
        free(s);
        if (key == NULL)
            abort();
    }
    free(key);
    cJSON_Delete(h);
}

static void
run_answer(const cJSON *root)
{
    struct http_tool_calls c, again;
    struct http_tool_result r[4];
    size_t n = 0;

    if (http_toolcalls_read(root, known, 2, &c) != 0)
        return;
    if (http_toolcalls_read(root, known, 2, &again) != 0 || again.n != c.n)
        abort();
    for (size_t i = 0; i < c.n; i++) {
        if (strcmp(c.v[i].id, again.v[i].id) != 0)
            abort();
        run_call(&c.v[i]);
        if (n < 4)
            r[n++] = (struct http_tool_result){&c.v[i], "result", i % 2 == 1};
    }
    for (int f = HTTP_TOOLS_OPENAI; f <= HTTP_TOOLS_GEMINI; f++) {
        cJSON *msgs = cJSON_CreateArray();
        if (http_tool_turn_messages(msgs, (enum http_tool_format)f, &c, r, n) !=
            0)
            abort();
        free(cJSON_PrintUnformatted(msgs));
        cJSON_Delete(msgs);
    }
    http_toolcalls_cleanup(&again);
    http_toolcalls_cleanup(&c);
}

/* run_schema takes the input as a tool's parameters. */
static void
run_schema(const cJSON *root)
{
    struct http_tool t = {"f", "d", root};
    char err[256];
    cJSON *g;

    if (spec_schema_check(root, "parameters", err, sizeof(err)) != 0)
        return;
    (void)spec_schema_validate(root, root, "args", err, sizeof(err));
    g = http_tools_json(&t, 1, HTTP_TOOLS_GEMINI);
    free(cJSON_PrintUnformatted(g));
    cJSON_Delete(g);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *root = cJSON_ParseWithLength((const char *)data, size);

    setup();
    if (root == NULL)
        return 0;
    run_answer(root);
    run_schema(root);
    cJSON_Delete(root);
    return 0;
}

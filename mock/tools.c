/* tools.c: the mock as a tool-calling model (docs/mock.md "Tool calls").
 *
 * An answer's "tool_calls" scripts one answer with calls, well formed or
 * as real models get them wrong (arguments that are not JSON, an object
 * instead of a string, an unknown or empty name, no id, finish_reason
 * "stop"). A route's "tool_turns" makes the mock an agent that needs no
 * order among requests: a request whose messages hold k assistant turns
 * with calls (each answered by a tool message, as OpenAI requires) gets
 * the calls of turn k, and once the turns are spent the final text, which
 * "echo_tool_results" makes the list of results it received. So a
 * thousand jobs in flight each see their own conversation answered.
 */
#include "mock/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

#define PATH_LEN 512

static const char *const call_keys[] = {"name", "arguments", "id",
                                        "arguments_as_object", NULL};

/* check_calls checks one array of scripted calls at path. */
static int
check_calls(const cJSON *calls, const char *path, char *err, size_t len)
{
    const cJSON *c;
    char p[PATH_LEN];
    const char *name;
    bool b = false;
    int i = 0, rc;

    if (!cJSON_IsArray(calls) || calls->child == NULL)
        return json_fail(err, len, path, "must be a non-empty array of calls");
    cJSON_ArrayForEach(c, calls)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
        json_path_index(p, sizeof(p), path, i++);
        if ((rc = json_check_object(c, p, call_keys, err, len)) != 0 ||
            (rc = json_get_string(c, "name", true, p, &name, err, len)) != 0 ||
            (rc = json_get_bool(c, "arguments_as_object", p, &b, err, len)))
            return rc;
        if (id != NULL && !cJSON_IsString(id) && !cJSON_IsNull(id)) {
            char q[PATH_LEN];
            return json_fail(err, len, json_path_key(q, sizeof(q), p, "id"),
                             "must be a string, or null to send none");
        }
    }
    return 0;
}

int
mock__tools_parse(const cJSON *obj, const char *path, bool route, cJSON **calls,
                  char *err, size_t len)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(
        obj, route ? "tool_turns" : "tool_calls");
    char p[PATH_LEN], q[PATH_LEN];
    int i = 0, rc;

    if (v == NULL)
        return 0;
    json_path_key(p, sizeof(p), path, route ? "tool_turns" : "tool_calls");
    if (!route) {
        rc = check_calls(v, p, err, len);
    } else if (!cJSON_IsArray(v) || v->child == NULL) {
        rc = json_fail(err, len, p,
                       "must be a non-empty array of turns, each an array "
                       "of calls");
    } else {
        const cJSON *t;
        rc = 0;
        cJSON_ArrayForEach(t, v)
        {
            json_path_index(q, sizeof(q), p, i++);
            if ((rc = check_calls(t, q, err, len)) != 0)
                break;
        }
    }
    if (rc == 0)
        *calls = cJSON_Duplicate(v, true);
    return rc;
}

/* wire_calls builds the message's tool_calls from scripted calls. */
static cJSON *
wire_calls(const struct mock_engine *e, const cJSON *calls)
{
    cJSON *out = cJSON_CreateArray();
    const cJSON *c;
    int i = 0;

    cJSON_ArrayForEach(c, calls)
    {
        cJSON *tc = cJSON_CreateObject(), *fn = cJSON_CreateObject();
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "arguments");
        char buf[64];
        if (id == NULL) {
            snprintf(buf, sizeof(buf), "call_mock_%06" PRIu64 "_%d", e->seq, i);
            cJSON_AddStringToObject(tc, "id", buf);
        } else if (cJSON_IsString(id)) {
            cJSON_AddStringToObject(tc, "id", id->valuestring);
        }
        cJSON_AddStringToObject(tc, "type", "function");
        json_add_string(
            fn, "name",
            cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring);
        if (args == NULL) {
            cJSON_AddStringToObject(fn, "arguments", "{}");
        } else if (cJSON_IsString(args) ||
                   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                       c, "arguments_as_object"))) {
            cJSON_AddItemToObject(fn, "arguments", cJSON_Duplicate(args, 1));
        } else {
            char *s = json_print(args);
            cJSON_AddStringToObject(fn, "arguments", s);
            free(s);
        }
        cJSON_AddItemToObject(tc, "function", fn);
        cJSON_AddNumberToObject(tc, "index", i++);
        cJSON_AddItemToArray(out, tc);
    }
    return out;
}

static const char *
role_of(const cJSON *m)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
    return cJSON_IsString(r) ? r->valuestring : "";
}

/* is_block tells whether b is a content block of type type. */
static bool
is_block(const cJSON *b, const char *type)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "type");
    return cJSON_IsString(t) && strcmp(t->valuestring, type) == 0;
}

/* block_of returns the first block of type type in m's content (an
 * Anthropic message's content blocks), or NULL. */
static const cJSON *
block_of(const cJSON *m, const char *type)
{
    const cJSON *b;

    cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(m, "content"))
    {
        if (is_block(b, type))
            return b;
    }
    return NULL;
}

/* part_of returns the first part of Gemini content m that has member
 * key ("functionCall", "functionResponse"), or NULL. */
static const cJSON *
part_of(const cJSON *m, const char *key)
{
    const cJSON *p;

    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(m, "parts"))
    {
        if (cJSON_HasObjectItem(p, key))
            return p;
    }
    return NULL;
}

/* has_calls tells whether message m is an assistant turn with calls:
 * OpenAI's tool_calls, Anthropic's tool_use blocks, or Gemini's model
 * content with functionCall parts. */
static bool
has_calls(const cJSON *m)
{
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (strcmp(role_of(m), "model") == 0)
        return part_of(m, "functionCall") != NULL;
    return strcmp(role_of(m), "assistant") == 0 &&
           ((cJSON_IsArray(tc) && tc->child != NULL) ||
            block_of(m, "tool_use") != NULL);
}

/* The conversation of a chat request: its messages, or Gemini's
 * contents. */
static const cJSON *
convo_of(const cJSON *req)
{
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(req, "messages");
    return msgs != NULL ? msgs
                        : cJSON_GetObjectItemCaseSensitive(req, "contents");
}

/* echo is the final answer of an echoing route: the results received. */
static char *
echo(const cJSON *msgs, int turns)
{
    cJSON *o = cJSON_CreateObject(), *res;
    const cJSON *m;
    char text[96], *s;

    res = cJSON_AddArrayToObject(o, "tool_results");
    cJSON_ArrayForEach(m, msgs)
    {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content"), *b;
        const cJSON *p;
        if (strcmp(role_of(m), "tool") == 0)
            cJSON_AddItemToArray(res, cJSON_Duplicate(c, true));
        /* Gemini: each functionResponse's response, its output alone
         * when it says one as stepq sends it. */
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(m, "parts"))
        {
            const cJSON *r = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(p, "functionResponse"),
                "response");
            const cJSON *out = cJSON_GetObjectItemCaseSensitive(r, "content");
            if (r != NULL)
                cJSON_AddItemToArray(res, cJSON_Duplicate(out ? out : r, true));
        }
        if (strcmp(role_of(m), "user") != 0 || !cJSON_IsArray(c))
            continue;
        cJSON_ArrayForEach(b, c)
        {
            if (is_block(b, "tool_result"))
                cJSON_AddItemToArray(
                    res,
                    cJSON_Duplicate(
                        cJSON_GetObjectItemCaseSensitive(b, "content"), true));
        }
    }
    snprintf(text, sizeof(text), "done after %d tool turns, %d results", turns,
             cJSON_GetArraySize(res));
    cJSON_AddStringToObject(o, "summary", text);
    s = json_print(o);
    cJSON_Delete(o);
    return s;
}

cJSON *
mock__tool_calls_for(const struct mock_engine *e, const struct mock_route *r,
                     const struct mock_answer *a, const cJSON *req,
                     char **content)
{
    const cJSON *msgs = convo_of(req);
    const cJSON *m;
    int k = 0;

    *content = NULL;
    if (a != NULL && a->tool_calls != NULL)
        return wire_calls(e, a->tool_calls);
    if (a != NULL || r->tool_turns == NULL)
        return NULL;
    cJSON_ArrayForEach(m, msgs) k += has_calls(m);
    if (k < cJSON_GetArraySize(r->tool_turns))
        return wire_calls(e, cJSON_GetArrayItem(r->tool_turns, k));
    if (r->echo_tool_results)
        *content = echo(msgs, k);
    return NULL;
}

/* answered tells whether every call of assistant message m has a tool
 * message after it (up to the next assistant message); the first id
 * that has none goes to *missing. */
static bool
answered(const cJSON *m, const char **missing)
{
    const cJSON *tc, *t;

    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(m, "tool_calls"))
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(tc, "id");
        bool found = false;
        for (t = m->next;
             t != NULL && !found && strcmp(role_of(t), "assistant") != 0;
             t = t->next) {
            const cJSON *ref =
                cJSON_GetObjectItemCaseSensitive(t, "tool_call_id");
            found = strcmp(role_of(t), "tool") == 0 && cJSON_IsString(ref) &&
                    cJSON_IsString(id) &&
                    strcmp(ref->valuestring, id->valuestring) == 0;
        }
        if (!found) {
            *missing = cJSON_IsString(id) ? id->valuestring : "(none)";
            return false;
        }
    }
    return true;
}

bool
mock__tool_messages_ok(const cJSON *req, char *msg, size_t len)
{
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(req, "messages");
    const cJSON *m, *prev = NULL;
    const char *missing = NULL;
    int i = 0;

    cJSON_ArrayForEach(m, msgs)
    {
        if (has_calls(m) && !answered(m, &missing)) {
            snprintf(msg, len,
                     "An assistant message with 'tool_calls' must be "
                     "followed by tool messages responding to each "
                     "'tool_call_id'. The following tool_call_ids did not "
                     "have response messages: %s",
                     missing);
            return false;
        }
        if (strcmp(role_of(m), "tool") == 0 && prev == NULL) {
            snprintf(msg, len,
                     "Invalid parameter: messages with role 'tool' must be "
                     "a response to a preceeding message with "
                     "'tool_calls'. (messages[%d])",
                     i);
            return false;
        }
        if (has_calls(m))
            prev = m;
        else if (strcmp(role_of(m), "tool") != 0)
            prev = NULL;
        i++;
    }
    return true;
}

bool
mock__anthropic_tool_use(const cJSON *msg, cJSON *content)
{
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
    const cJSON *tc;
    int i = 0;

    if (!cJSON_IsArray(calls) || calls->child == NULL)
        return false;
    /* A text block only where the answer had text beside its calls. */
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(msg, "content")))
        cJSON_DeleteItemFromArray(content, 0);
    cJSON_ArrayForEach(tc, calls)
    {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(tc, "id");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        cJSON *b = cJSON_CreateObject(), *input = NULL;
        char buf[96];
        /* Anthropic's input is always an object: arguments that do not
         * parse as one (a script's malformed call) become {}. */
        if (cJSON_IsString(args))
            input =
                json_parse_exact(args->valuestring, strlen(args->valuestring));
        else if (cJSON_IsObject(args))
            input = cJSON_Duplicate(args, true);
        if (!cJSON_IsObject(input)) {
            cJSON_Delete(input);
            input = cJSON_CreateObject();
        }
        if (cJSON_IsString(id))
            snprintf(buf, sizeof(buf), "toolu_%s", id->valuestring);
        else
            snprintf(buf, sizeof(buf), "toolu_mock_%d", i);
        cJSON_AddStringToObject(b, "type", "tool_use");
        cJSON_AddStringToObject(b, "id", buf);
        json_add_string(b, "name",
                        cJSON_IsString(name) ? name->valuestring : "");
        cJSON_AddItemToObject(b, "input", input);
        cJSON_AddItemToArray(content, b);
        i++;
    }
    return true;
}

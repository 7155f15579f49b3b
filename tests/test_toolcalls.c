/* test_toolcalls.c: tool calls read from real-shaped answers, and what a
 * request with tools carries (http/toolcall.c, http/tools.c).
 *
 * The answers are files of tests/data/toolcalls/, one per provider shape
 * (README.md there says where each comes from), malformed ones among them;
 * cases.json holds what each must read as, one row of the loop test each;
 * a streamed answer (*.sse) is assembled first (http_stream_assemble).
 * A file without a row fails the suite.
 */
#include "tests/support/support.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/file.h"
#include "common/json.h"
#include "http/http.h"
#include "http/tools.h"

/* The answer of file: parsed, or for a stream (api named, the file's
 * server-sent events) the answer http_stream_assemble makes of it. */
static cJSON *
load_answer(const char *file, const char *stream)
{
    static const char *const apis[] = {"openai", "anthropic", "gemini"};
    const char *src = getenv("STEPQ_SRC");
    char path[1024], *text = NULL, *whole = NULL;
    size_t len = 0;
    cJSON *j;

    snprintf(path, sizeof(path), "%s/tests/data/toolcalls/%s", src ? src : ".",
             file);
    ck_assert_int_eq(file_read_all(path, 1 << 20, &text, &len), 0);
    for (int a = 0; a < 3 && stream != NULL; a++) {
        if (strcmp(stream, apis[a]) == 0)
            ck_assert_int_eq(
                http_stream_assemble((enum config_api)a, text, len, &whole), 0);
    }
    ck_assert_msg(stream == NULL || whole != NULL, "%s: stream %s", file,
                  stream);
    j = whole ? cJSON_Parse(whole) : cJSON_ParseWithLength(text, len);
    free(text);
    free(whole);
    ck_assert_msg(j != NULL, "%s is not JSON", file);
    return j;
}

static cJSON *
load(const char *name)
{
    const char *src = getenv("STEPQ_SRC");
    char path[1024], *text = NULL;
    size_t len = 0;
    cJSON *j;

    snprintf(path, sizeof(path), "%s/tests/data/toolcalls/%s", src ? src : ".",
             name);
    ck_assert_msg(file_read_all(path, 1 << 20, &text, &len) == 0,
                  "cannot read %s", path);
    j = cJSON_ParseWithLength(text, len);
    free(text);
    ck_assert_msg(j != NULL, "%s is not JSON", name);
    return j;
}

static const char *
format_name(enum http_tool_format f)
{
    static const char *const names[] = {"openai", "anthropic", "gemini",
                                        "ollama"};
    return names[f];
}

/* check_call compares one read call with its row ("id": "made" for an
 * id stepq made). */
static void
check_call(const char *file, size_t i, const struct http_tool_call *t,
           const cJSON *want)
{
    const char *id = cJSON_GetObjectItem(want, "id")->valuestring;
    const cJSON *args = cJSON_GetObjectItem(want, "args");
    char prefix[32];

    ck_assert_msg(
        strcmp(t->name, cJSON_GetObjectItem(want, "name")->valuestring) == 0,
        "%s call %zu: name %s", file, i, t->name);
    ck_assert_msg(
        strcmp(http_call_problem_name(t->problem),
               cJSON_GetObjectItem(want, "problem")->valuestring) == 0,
        "%s call %zu: problem %s", file, i, http_call_problem_name(t->problem));
    snprintf(prefix, sizeof(prefix), "call_%zu_", i);
    if (strcmp(id, "made") == 0)
        ck_assert_msg(t->id_made && strncmp(t->id, prefix, strlen(prefix)) == 0,
                      "%s call %zu: id %s, want one made", file, i, t->id);
    else
        ck_assert_msg(!t->id_made && strcmp(t->id, id) == 0,
                      "%s call %zu: id %s", file, i, t->id);
    ck_assert_msg(cJSON_IsNull(args) ? t->args == NULL
                                     : cJSON_Compare(t->args, args, true),
                  "%s call %zu: arguments differ", file, i);
    ck_assert_msg(t->args_object ==
                      cJSON_IsTrue(cJSON_GetObjectItem(want, "args_object")),
                  "%s call %zu: args_object", file, i);
    ck_assert_ptr_nonnull(t->args_text);
}

START_TEST(test_provider_shapes_read_as_one)
{
    cJSON *cases = load("cases.json"), *known_j, *row, *answer, *calls, *text;
    const char *known[8], *file;
    struct http_tool_calls c;
    size_t nknown = 0, i = 0;

    known_j = cJSON_GetObjectItem(cases, "known");
    for (cJSON *k = known_j->child; k != NULL; k = k->next)
        known[nknown++] = k->valuestring;
    row = cJSON_GetArrayItem(cJSON_GetObjectItem(cases, "cases"), _i);
    file = cJSON_GetObjectItem(row, "file")->valuestring;
    answer = load_answer(
        file, cJSON_GetStringValue(cJSON_GetObjectItem(row, "stream")));
    ck_assert_int_eq(http_toolcalls_read(answer, known, nknown, &c), 0);
    ck_assert_str_eq(format_name(c.format),
                     cJSON_GetObjectItem(row, "format")->valuestring);
    ck_assert_str_eq(c.finish, cJSON_GetObjectItem(row, "finish")->valuestring);
    ck_assert_int_eq(c.stop_with_calls,
                     cJSON_IsTrue(cJSON_GetObjectItem(row, "stop_with_calls")));
    text = cJSON_GetObjectItem(row, "text");
    if (cJSON_IsNull(text))
        ck_assert_msg(c.text == NULL, "%s: text %s", file, c.text);
    else
        ck_assert_str_eq(c.text, text->valuestring);
    calls = cJSON_GetObjectItem(row, "calls");
    ck_assert_int_eq(c.n, cJSON_GetArraySize(calls));
    for (cJSON *w = calls->child; w != NULL; w = w->next, i++)
        check_call(file, i, &c.v[i], w);
    http_toolcalls_cleanup(&c);
    cJSON_Delete(answer);
    cJSON_Delete(cases);
}
END_TEST

/* Every answer file has its row, so none is there untested. */
START_TEST(test_every_file_has_a_case)
{
    cJSON *cases = load("cases.json");
    char dir[1024];
    struct dirent *d;
    DIR *dp;
    int files = 0;

    snprintf(dir, sizeof(dir), "%s/tests/data/toolcalls", getenv("STEPQ_SRC"));
    ck_assert_ptr_nonnull(dp = opendir(dir));
    while ((d = readdir(dp)) != NULL) {
        const cJSON *row;
        if ((strstr(d->d_name, ".json") == NULL &&
             strstr(d->d_name, ".sse") == NULL) ||
            strcmp(d->d_name, "cases.json") == 0)
            continue;
        files++;
        cJSON_ArrayForEach(row, cJSON_GetObjectItem(cases, "cases"))
        {
            if (strcmp(cJSON_GetObjectItem(row, "file")->valuestring,
                       d->d_name) == 0)
                break;
        }
        ck_assert_msg(row != NULL, "%s has no row in cases.json", d->d_name);
    }
    closedir(dp);
    ck_assert_int_eq(files,
                     cJSON_GetArraySize(cJSON_GetObjectItem(cases, "cases")));
    cJSON_Delete(cases);
}
END_TEST

/* Reading the same answer twice (a worker that restarts reads it from
 * the ledger) gives the same made ids. */
START_TEST(test_made_ids_are_stable)
{
    cJSON *a = load("gemini.json");
    struct http_tool_calls c1, c2;

    ck_assert_int_eq(http_toolcalls_read(a, NULL, 0, &c1), 0);
    ck_assert_int_eq(http_toolcalls_read(a, NULL, 0, &c2), 0);
    ck_assert_int_eq(c1.n, 2);
    ck_assert_str_eq(c1.v[0].id, c2.v[0].id);
    ck_assert_str_eq(c1.v[1].id, c2.v[1].id);
    ck_assert_str_ne(c1.v[0].id, c1.v[1].id);
    /* Without a list of tools, no name is unknown. */
    ck_assert_int_eq(c1.v[0].problem, HTTP_CALL_OK);
    http_toolcalls_cleanup(&c1);
    http_toolcalls_cleanup(&c2);
    cJSON_Delete(a);
}
END_TEST

START_TEST(test_not_an_answer_is_refused)
{
    static const char *const bad[] = {"{}", "[]", "{\"choices\": []}",
                                      "{\"candidates\": [1]}", "42"};
    struct http_tool_calls c = {.n = 7};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cJSON *j = cJSON_Parse(bad[i]);
        ck_assert_msg(http_toolcalls_read(j, NULL, 0, &c) == -EINVAL, "%s",
                      bad[i]);
        ck_assert_int_eq(c.n, 7); /* untouched */
        cJSON_Delete(j);
    }
}
END_TEST

/* ---- what is sent ------------------------------------------------------- */

#define PARAMS                                                                 \
    "{\"type\": \"object\", \"properties\": {"                                 \
    "\"label\": {\"type\": \"string\", \"enum\": [\"bug\", \"p1\"]},"          \
    "\"note\": {\"type\": [\"string\", \"null\"], \"title\": \"Note\"},"       \
    "\"n\": {\"type\": [\"integer\", \"string\"]},"                            \
    "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\","        \
    " \"const\": \"x\"}}},"                                                    \
    "\"required\": [\"label\"], \"additionalProperties\": false}"

static cJSON *
tools_as(enum http_tool_format f, cJSON **params)
{
    struct http_tool t = {"add_label", "Adds a label", NULL};

    *params = cJSON_Parse(PARAMS);
    t.parameters = *params;
    return http_tools_json(&t, 1, f);
}

START_TEST(test_tools_openai_and_anthropic_shapes)
{
    cJSON *params, *o = tools_as(HTTP_TOOLS_OPENAI, &params), *p2;
    cJSON *a = tools_as(HTTP_TOOLS_ANTHROPIC, &p2);
    const cJSON *fn = cJSON_GetObjectItem(o->child, "function");

    ck_assert_int_eq(cJSON_GetArraySize(o), 1);
    ck_assert_str_eq(cJSON_GetObjectItem(o->child, "type")->valuestring,
                     "function");
    ck_assert_str_eq(cJSON_GetObjectItem(fn, "name")->valuestring, "add_label");
    ck_assert_str_eq(cJSON_GetObjectItem(fn, "description")->valuestring,
                     "Adds a label");
    ck_assert(cJSON_Compare(cJSON_GetObjectItem(fn, "parameters"), params, 1));
    ck_assert_str_eq(cJSON_GetObjectItem(a->child, "name")->valuestring,
                     "add_label");
    ck_assert(
        cJSON_Compare(cJSON_GetObjectItem(a->child, "input_schema"), p2, 1));
    ck_assert_ptr_null(cJSON_GetObjectItem(a->child, "parameters"));
    cJSON_Delete(o);
    cJSON_Delete(a);
    cJSON_Delete(params);
    cJSON_Delete(p2);
}
END_TEST

/* Gemini's Schema has one type a level and no additionalProperties,
 * const or title: the schema is said in its words. */
START_TEST(test_tools_gemini_shape)
{
    cJSON *params, *g = tools_as(HTTP_TOOLS_GEMINI, &params);
    const cJSON *decl, *p, *props;

    decl = cJSON_GetObjectItem(g->child, "functionDeclarations");
    ck_assert_int_eq(cJSON_GetArraySize(g), 1);
    ck_assert_int_eq(cJSON_GetArraySize(decl), 1);
    p = cJSON_GetObjectItem(decl->child, "parameters");
    ck_assert_ptr_null(cJSON_GetObjectItem(p, "additionalProperties"));
    ck_assert_str_eq(cJSON_GetObjectItem(p, "type")->valuestring, "object");
    props = cJSON_GetObjectItem(p, "properties");
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(props, "note"), "type")
            ->valuestring,
        "string");
    ck_assert(cJSON_IsTrue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(props, "note"), "nullable")));
    ck_assert_ptr_null(
        cJSON_GetObjectItem(cJSON_GetObjectItem(props, "note"), "title"));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(
                         cJSON_GetObjectItem(props, "n"), "anyOf")),
                     2);
    ck_assert_ptr_null(cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(props, "tags"), "items"),
        "const"));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(
                         cJSON_GetObjectItem(props, "label"), "enum")),
                     2);
    cJSON_Delete(g);
    cJSON_Delete(params);
}
END_TEST

/* turn reads file's calls and appends a turn in format f whose second
 * result is an error. Returns the messages. */
static cJSON *
turn(const char *file, enum http_tool_format f, struct http_tool_calls *c)
{
    cJSON *a = load(file), *msgs = cJSON_CreateArray();
    struct http_tool_result r[2];

    ck_assert_int_eq(http_toolcalls_read(a, NULL, 0, c), 0);
    ck_assert_int_ge(c->n, 2);
    r[0] = (struct http_tool_result){&c->v[0], "labelled", false};
    r[1] = (struct http_tool_result){&c->v[1], "HTTP 403: no access", true};
    ck_assert_int_eq(http_tool_turn_messages(msgs, f, c, r, 2), 0);
    cJSON_Delete(a);
    return msgs;
}

START_TEST(test_turn_openai)
{
    struct http_tool_calls c;
    cJSON *m = turn("openai.json", HTTP_TOOLS_OPENAI, &c);
    const cJSON *as = cJSON_GetArrayItem(m, 0), *tc, *t;

    ck_assert_int_eq(cJSON_GetArraySize(m), 3);
    ck_assert_str_eq(cJSON_GetObjectItem(as, "role")->valuestring, "assistant");
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(as, "content")));
    tc = cJSON_GetArrayItem(cJSON_GetObjectItem(as, "tool_calls"), 1);
    ck_assert_str_eq(cJSON_GetObjectItem(tc, "id")->valuestring,
                     "call_9Xn2dKc7Pp0eLr3sGh6vYw8u");
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(tc, "function"), "arguments")
            ->valuestring,
        "{\"issue\":412,\"body\":\"Thanks, reproduced on 2.3.\"}");
    t = cJSON_GetArrayItem(m, 2);
    ck_assert_str_eq(cJSON_GetObjectItem(t, "role")->valuestring, "tool");
    ck_assert_str_eq(cJSON_GetObjectItem(t, "tool_call_id")->valuestring,
                     "call_9Xn2dKc7Pp0eLr3sGh6vYw8u");
    ck_assert_str_eq(cJSON_GetObjectItem(t, "content")->valuestring,
                     "HTTP 403: no access");
    http_toolcalls_cleanup(&c);
    cJSON_Delete(m);
}
END_TEST

START_TEST(test_turn_anthropic)
{
    struct http_tool_calls c;
    cJSON *m = turn("anthropic.json", HTTP_TOOLS_ANTHROPIC, &c);
    const cJSON *as = cJSON_GetArrayItem(m, 0), *u = cJSON_GetArrayItem(m, 1);
    const cJSON *blocks = cJSON_GetObjectItem(as, "content"), *b;

    ck_assert_int_eq(cJSON_GetArraySize(m), 2);
    ck_assert_int_eq(cJSON_GetArraySize(blocks), 3);
    ck_assert_str_eq(cJSON_GetObjectItem(blocks->child, "type")->valuestring,
                     "text");
    b = cJSON_GetArrayItem(blocks, 1);
    ck_assert_str_eq(cJSON_GetObjectItem(b, "type")->valuestring, "tool_use");
    ck_assert_int_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(b, "input"), "issue")->valueint,
        412);
    ck_assert_str_eq(cJSON_GetObjectItem(u, "role")->valuestring, "user");
    b = cJSON_GetArrayItem(cJSON_GetObjectItem(u, "content"), 1);
    ck_assert_str_eq(cJSON_GetObjectItem(b, "type")->valuestring,
                     "tool_result");
    ck_assert_str_eq(cJSON_GetObjectItem(b, "tool_use_id")->valuestring,
                     "toolu_01B7d2kLmN3pQ4rS5tU6vW7x");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(b, "is_error")));
    ck_assert_ptr_null(cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(u, "content"), 0), "is_error"));
    http_toolcalls_cleanup(&c);
    cJSON_Delete(m);
}
END_TEST

START_TEST(test_turn_gemini)
{
    struct http_tool_calls c;
    cJSON *m = turn("gemini.json", HTTP_TOOLS_GEMINI, &c);
    const cJSON *mo = cJSON_GetArrayItem(m, 0), *u = cJSON_GetArrayItem(m, 1);
    const cJSON *fc, *fr;

    ck_assert_str_eq(cJSON_GetObjectItem(mo, "role")->valuestring, "model");
    fc = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(mo, "parts"), 0),
        "functionCall");
    ck_assert_str_eq(cJSON_GetObjectItem(fc, "name")->valuestring, "add_label");
    /* Gemini gave no id: none is sent back, it pairs calls by order. */
    ck_assert_ptr_null(cJSON_GetObjectItem(fc, "id"));
    fr = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(u, "parts"), 1),
        "functionResponse");
    ck_assert_str_eq(cJSON_GetObjectItem(fr, "name")->valuestring,
                     "post_comment");
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(fr, "response"), "error")
            ->valuestring,
        "HTTP 403: no access");
    http_toolcalls_cleanup(&c);
    cJSON_Delete(m);
}
END_TEST

/* A call whose arguments did not parse goes back as the model wrote it
 * (OpenAI) or with an empty input (Anthropic, which needs an object). */
START_TEST(test_turn_with_bad_arguments)
{
    struct http_tool_calls c;
    cJSON *m = turn("malformed_args_not_json.json", HTTP_TOOLS_OPENAI, &c);
    cJSON *a = cJSON_CreateArray();
    struct http_tool_result r = {&c.v[0], "arguments are not JSON", true};
    const cJSON *tc =
        cJSON_GetObjectItem(cJSON_GetArrayItem(m, 0), "tool_calls")->child;

    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(tc, "function"), "arguments")
            ->valuestring,
        "{\"issue\": 412, \"label\": \"bu");
    ck_assert_int_eq(
        http_tool_turn_messages(a, HTTP_TOOLS_ANTHROPIC, &c, &r, 1), 0);
    tc = cJSON_GetArrayItem(cJSON_GetObjectItem(a->child, "content"), 0);
    ck_assert(cJSON_IsObject(cJSON_GetObjectItem(tc, "input")));
    ck_assert_ptr_null(cJSON_GetObjectItem(tc, "input")->child);
    ck_assert_int_eq(http_tool_turn_messages(a, HTTP_TOOLS_OLLAMA, &c, &r, 1),
                     -EINVAL);
    http_toolcalls_cleanup(&c);
    cJSON_Delete(m);
    cJSON_Delete(a);
}
END_TEST

/* What a thinking model needs back verbatim goes back: Gemini's
 * thoughtSignature with its call, Anthropic's thinking blocks first. */
START_TEST(test_turn_keeps_what_thinking_needs)
{
    cJSON *g = load("gemini_thought_signature.json");
    cJSON *a = load("anthropic_thinking.json");
    cJSON *gm = cJSON_CreateArray(), *am = cJSON_CreateArray();
    struct http_tool_calls gc, ac;
    struct http_tool_result r;
    const cJSON *part, *blocks;

    ck_assert_int_eq(http_toolcalls_read(g, NULL, 0, &gc), 0);
    r = (struct http_tool_result){&gc.v[0], "labelled", false};
    ck_assert_int_eq(http_tool_turn_messages(gm, HTTP_TOOLS_GEMINI, &gc, &r, 1),
                     0);
    part = cJSON_GetArrayItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(gm, 0), "parts"), 0);
    ck_assert_str_eq(cJSON_GetObjectItem(part, "thoughtSignature")->valuestring,
                     "CiQB0e2Kb3xQm1n9Jp4rT7vWy0aZcE8dFgHiJkLmNoPqRsTuVw==");
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(part, "functionCall"), "id")
            ->valuestring,
        "fc_7b2d9e41");
    part = cJSON_GetArrayItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(gm, 1), "parts"), 0);
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(part, "functionResponse"), "id")
            ->valuestring,
        "fc_7b2d9e41");
    ck_assert_int_eq(http_toolcalls_read(a, NULL, 0, &ac), 0);
    r = (struct http_tool_result){&ac.v[0], "labelled", false};
    ck_assert_int_eq(
        http_tool_turn_messages(am, HTTP_TOOLS_ANTHROPIC, &ac, &r, 1), 0);
    blocks = cJSON_GetObjectItem(cJSON_GetArrayItem(am, 0), "content");
    ck_assert_int_eq(cJSON_GetArraySize(blocks), 3);
    ck_assert(cJSON_Compare(
        cJSON_GetArrayItem(blocks, 0),
        cJSON_GetArrayItem(cJSON_GetObjectItem(a, "content"), 0), true));
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetArrayItem(blocks, 1), "type")->valuestring,
        "redacted_thinking");
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetArrayItem(blocks, 2), "type")->valuestring,
        "tool_use");
    http_toolcalls_cleanup(&gc);
    http_toolcalls_cleanup(&ac);
    cJSON_Delete(gm);
    cJSON_Delete(am);
    cJSON_Delete(g);
    cJSON_Delete(a);
}
END_TEST

static TCase *
sent_tcase(void)
{
    TCase *t = tcase_create("sent");

    tcase_add_test(t, test_tools_openai_and_anthropic_shapes);
    tcase_add_test(t, test_tools_gemini_shape);
    tcase_add_test(t, test_turn_openai);
    tcase_add_test(t, test_turn_anthropic);
    tcase_add_test(t, test_turn_gemini);
    tcase_add_test(t, test_turn_with_bad_arguments);
    tcase_add_test(t, test_turn_keeps_what_thinking_needs);
    return t;
}

Suite *
test_suite(void)
{
    Suite *s = suite_create("toolcalls");
    TCase *read = tcase_create("read");
    cJSON *cases = NULL;
    char path[1024], *text = NULL;
    size_t len = 0;
    int n = 0;

    /* The table's size, read once here: each row is one loop test. */
    snprintf(path, sizeof(path), "%s/tests/data/toolcalls/cases.json",
             getenv("STEPQ_SRC") ? getenv("STEPQ_SRC") : ".");
    if (file_read_all(path, 1 << 20, &text, &len) == 0 &&
        (cases = cJSON_Parse(text)) != NULL)
        n = cJSON_GetArraySize(cJSON_GetObjectItem(cases, "cases"));
    cJSON_Delete(cases);
    free(text);
    tcase_add_loop_test(read, test_provider_shapes_read_as_one, 0, n);
    tcase_add_test(read, test_every_file_has_a_case);
    tcase_add_test(read, test_made_ids_are_stable);
    tcase_add_test(read, test_not_an_answer_is_refused);
    suite_add_tcase(s, read);
    suite_add_tcase(s, sent_tcase());
    return s;
}

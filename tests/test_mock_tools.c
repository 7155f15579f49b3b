/* test_mock_tools.c: the mock as a tool-calling model, over loopback
 * (docs/mock.md "Tool calls"): scripted calls, malformed ones as models
 * send them, an agent route answered by the conversation it is sent
 * (tool_turns), the results echoed back, OpenAI's 400 for a call without
 * its tool message, usage in every answer, Anthropic's tool_use blocks in
 * its Message Batches, and what http_toolcalls_read makes of each answer.
 */
#include "tests/support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "http/http.h"
#include "http/tools.h"
#include "tests/support/batchcl.h"
#include "tests/support/httpcl.h"
#include "tests/support/mockproc.h"

#define USER       "{\"role\":\"user\",\"content\":\"triage 412\"}"
#define BODY(msgs) "{\"model\":\"m\",\"messages\":[" msgs "]}"
/* An assistant turn with one call, and its result. */
#define CALLED(id)                                                             \
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"" id   \
    "\",\"type\":\"function\",\"function\":{\"name\":\"add_label\","           \
    "\"arguments\":\"{}\"}}]}"
#define RESULT(id, text)                                                       \
    "{\"role\":\"tool\",\"tool_call_id\":\"" id "\",\"content\":\"" text "\"}"

static const char *const known[] = {"add_label", "post_comment"};

/* post sends body to path, expects status and returns the answer's
 * calls as http_toolcalls_read reads them (*j: the answer, caller
 * deletes). */
static void
post(int port, const char *path, const char *body, cJSON **j,
     struct http_tool_calls *c)
{
    struct reply r;

    req(port, "POST", path, NULL, body, &r);
    ck_assert_msg(r.status == 200, "%d: %s", r.status, r.body);
    *j = body_json(&r);
    reply_free(&r);
    ck_assert_int_eq(http_toolcalls_read(*j, known, 2, c), 0);
    /* Usage in every answer, calls or not. */
    ck_assert_int_gt((int)jnum(*j, "usage.prompt_tokens"), 0);
    ck_assert_int_gt((int)jnum(*j, "usage.completion_tokens"), 0);
}

START_TEST(test_agent_turns_follow_the_conversation)
{
    int port = mockproc_fixture_start("tools.json");
    struct http_tool_calls c;
    cJSON *j, *res;

    /* Turn 0: two calls at once, ids of the mock's own. */
    post(port, "/agent" CHAT, BODY(USER), &j, &c);
    ck_assert_int_eq(c.n, 2);
    ck_assert_str_eq(c.finish, "tool_calls");
    ck_assert_str_eq(c.v[1].name, "post_comment");
    ck_assert_str_eq(cJSON_GetObjectItem(c.v[1].args, "body")->valuestring,
                     "Reproduced.");
    ck_assert(!c.v[0].id_made && c.v[0].problem == HTTP_CALL_OK);
    ck_assert(cJSON_IsNull(jget(j, "choices.message.content")));
    http_toolcalls_cleanup(&c);
    cJSON_Delete(j);
    /* Turn 1: one assistant turn answered: the next turn's call. */
    post(port, "/agent" CHAT, BODY(USER "," CALLED("a") "," RESULT("a", "ok")),
         &j, &c);
    ck_assert_int_eq(c.n, 1);
    ck_assert_int_eq((int)cJSON_GetObjectItem(c.v[0].args, "issue")->valueint,
                     412);
    http_toolcalls_cleanup(&c);
    cJSON_Delete(j);
    /* Both answered: the final text, listing the results it received. */
    post(port, "/agent" CHAT,
         BODY(USER "," CALLED("a") "," RESULT("a", "labelled bug") "," CALLED(
             "b") "," RESULT("b", "labelled p1")),
         &j, &c);
    ck_assert_int_eq(c.n, 0);
    ck_assert_str_eq(c.finish, "stop");
    res = cJSON_Parse(c.text);
    ck_assert_int_eq(
        cJSON_GetArraySize(cJSON_GetObjectItem(res, "tool_results")), 2);
    ck_assert_str_eq(
        cJSON_GetArrayItem(cJSON_GetObjectItem(res, "tool_results"), 1)
            ->valuestring,
        "labelled p1");
    cJSON_Delete(res);
    http_toolcalls_cleanup(&c);
    cJSON_Delete(j);
}
END_TEST

/* OpenAI refuses a conversation whose calls lack their results, and a
 * result no call asked for; so does the mock, with OpenAI's words. */
START_TEST(test_call_without_result_is_400)
{
    int port = mockproc_fixture_start("tools.json");
    struct reply r;
    cJSON *j;

    req(port, "POST", "/agent" CHAT, NULL, BODY(USER "," CALLED("a")), &r);
    ck_assert_int_eq(r.status, 400);
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "error.type"), "invalid_request_error");
    ck_assert_ptr_nonnull(
        strstr(jstr(j, "error.message"), "did not have response messages: a"));
    cJSON_Delete(j);
    reply_free(&r);
    req(port, "POST", "/agent" CHAT, NULL, BODY(USER "," RESULT("a", "x")), &r);
    ck_assert_int_eq(r.status, 400);
    ck_assert_ptr_nonnull(strstr(r.body, "messages with role 'tool' must be"));
    reply_free(&r);
}
END_TEST

/* The calls real models get wrong, one scripted answer each, and how the
 * reader takes them. */
START_TEST(test_malformed_calls)
{
    int port = mockproc_fixture_start("tools.json");
    struct http_tool_calls c;
    cJSON *j;

    post(port, "/sloppy" CHAT, BODY(USER), &j, &c);
    ck_assert_int_eq(c.v[0].problem, HTTP_CALL_ARGS_NOT_JSON);
    ck_assert_str_eq(c.v[0].args_text, "{\"issue\": 412, \"label\": \"bu");
    ck_assert_int_eq(c.v[1].problem, HTTP_CALL_UNKNOWN_TOOL);
    ck_assert_int_eq(c.v[2].problem, HTTP_CALL_EMPTY_NAME);
    http_toolcalls_cleanup(&c);
    cJSON_Delete(j);
    post(port, "/sloppy" CHAT, BODY(USER), &j, &c);
    /* Arguments as an object, no id, finish_reason "stop": still a call. */
    ck_assert_int_eq(c.n, 1);
    ck_assert(c.v[0].args_object && c.v[0].id_made && c.stop_with_calls);
    ck_assert_int_eq(c.v[0].problem, HTTP_CALL_OK);
    ck_assert_ptr_null(cJSON_GetObjectItem(
        cJSON_GetArrayItem(jget(j, "choices.message.tool_calls"), 0), "id"));
    http_toolcalls_cleanup(&c);
    cJSON_Delete(j);
}
END_TEST

/* A route that speaks Anthropic (its Message Batches) answers the same
 * turns as tool_use blocks, and counts Anthropic's tool_use and
 * tool_result blocks as the conversation's turns and results. */
#define ANT_ITEM(id, msgs)                                                     \
    "{\"custom_id\":\"" id "\",\"params\":{\"model\":\"claude-m\","            \
    "\"max_tokens\":500,\"messages\":[" msgs "]}}"
#define ANT_USE                                                                \
    "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":"      \
    "\"toolu_1\",\"name\":\"add_label\",\"input\":{}}]}"
#define ANT_RESULT                                                             \
    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","               \
    "\"tool_use_id\":\"toolu_1\",\"content\":\"labelled\"}]}"

START_TEST(test_anthropic_batch_tool_use)
{
    int port = mockproc_fixture_start(
        "{\"echo_tool_results\": true, \"tool_turns\": [[{\"name\": "
        "\"add_label\", \"arguments\": {\"label\": \"bug\"}}]]}");
    cJSON *b = bc_call(port, "POST", "/v1/messages/batches",
                       "{\"requests\":[" ANT_ITEM("t0", USER) "," ANT_ITEM(
                           "t1", USER "," ANT_USE "," ANT_RESULT) "]}",
                       200);
    char at[160];
    cJSON *lines, *res;
    const cJSON *msg;
    struct http_tool_calls c;

    snprintf(at, sizeof(at), "/v1/messages/batches/%s", jstr(b, "id"));
    cJSON_Delete(bc_poll(port, at, "processing_status", "ended", NULL, 0));
    strcat(at, "/results");
    lines = bc_lines(port, at);
    msg = jget(bc_find(lines, "t0"), "result.message");
    ck_assert_str_eq(jstr(msg, "stop_reason"), "tool_use");
    ck_assert_int_eq(http_toolcalls_read(msg, known, 2, &c), 0);
    ck_assert_int_eq(c.format, HTTP_TOOLS_ANTHROPIC);
    ck_assert_int_eq(c.n, 1);
    ck_assert(c.v[0].problem == HTTP_CALL_OK && !c.v[0].id_made);
    ck_assert_ptr_nonnull(strstr(c.v[0].id, "toolu_"));
    ck_assert_str_eq(cJSON_GetObjectItem(c.v[0].args, "label")->valuestring,
                     "bug");
    ck_assert_ptr_null(c.text);
    http_toolcalls_cleanup(&c);
    msg = jget(bc_find(lines, "t1"), "result.message");
    ck_assert_str_eq(jstr(msg, "stop_reason"), "end_turn");
    res =
        cJSON_Parse(jstr(cJSON_GetArrayItem(jget(msg, "content"), 0), "text"));
    ck_assert_str_eq(
        cJSON_GetArrayItem(cJSON_GetObjectItem(res, "tool_results"), 0)
            ->valuestring,
        "labelled");
    cJSON_Delete(res);
    cJSON_Delete(lines);
    cJSON_Delete(b);
}
END_TEST

static const struct {
    const char *script;
    const char *want;
} bad[] = {
    {"{\"answers\": [{\"tool_calls\": []}]}",
     "answers[0].tool_calls: must be a non-empty array of calls"},
    {"{\"answers\": [{\"tool_calls\": [{\"arguments\": {}}]}]}",
     "answers[0].tool_calls[0].name: missing"},
    {"{\"answers\": [{\"tool_calls\": [{\"name\": \"a\", \"id\": 3}]}]}",
     "answers[0].tool_calls[0].id: must be a string, or null"},
    {"{\"answers\": [{\"tool_calls\": [{\"name\": \"a\", \"nam\": 1}]}]}",
     "answers[0].tool_calls[0].nam: unknown field"},
    {"{\"answers\": [{\"body\": \"x\", \"tool_calls\": [{\"name\": \"a\"}]}]}",
     "answers[0].tool_calls: go into the chat answer the mock makes"},
    {"{\"tool_turns\": [{\"name\": \"a\"}]}",
     "tool_turns[0]: must be a non-empty array of calls"},
    {"{\"tool_turns\": []}", "tool_turns: must be a non-empty array of turns"},
    {"{\"echo_tool_results\": 1}", "echo_tool_results: must be"},
};

START_TEST(test_bad_script_exits_2_naming_path)
{
    char *sp = tmpdir_write(mockproc_dir, "bad.json", bad[_i].script,
                            strlen(bad[_i].script));
    const char *argv[] = {"mock", "--check", "--script", sp, NULL};
    struct run_result res;

    run_stepq(argv, NULL, &res);
    ck_assert_int_eq(res.status, 2);
    ck_assert_msg(strstr(res.err, bad[_i].want) != NULL,
                  "stderr lacks \"%s\": %s", bad[_i].want, res.err);
    run_result_free(&res);
    free(sp);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("mock_tools");
    TCase *tc = tcase_create("tools");

    tcase_add_checked_fixture(tc, mockproc_setup, mockproc_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_agent_turns_follow_the_conversation);
    tcase_add_test(tc, test_call_without_result_is_400);
    tcase_add_test(tc, test_malformed_calls);
    tcase_add_test(tc, test_anthropic_batch_tool_use);
    tcase_add_loop_test(tc, test_bad_script_exits_2_naming_path, 0,
                        (int)(sizeof(bad) / sizeof(bad[0])));
    suite_add_tcase(s, tc);
    return s;
}

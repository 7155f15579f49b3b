/* test_native_mock.c: the mock's native routes over loopback, read back
 * by the client's own parsers: a scripted tool call comes as Anthropic's
 * tool_use blocks and as Gemini's functionCall parts (http_toolcalls_read
 * finds each, with its arguments), streamed too (http_stream_assemble
 * gives the unstreamed answer, its tool_use input whole), a tool turn a
 * provider would refuse refused with its message, and a script with a bad
 * "api" is refused naming it.
 */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "http/tools.h"
#include "tests/support/httpcl.h"
#include "tests/support/mockproc.h"

#define CALL                                                                   \
    "{\"tool_calls\": [{\"name\": \"add_label\", \"arguments\": "              \
    "{\"issue\": 412, \"label\": \"bug\"}}]}"
#define SCRIPT                                                                 \
    "{\"routes\": [{\"path\": \"/a\", \"api\": \"anthropic\", \"loop\": true," \
    " \"answers\": [" CALL "]}, {\"path\": \"/g\", \"api\": \"gemini\","       \
    " \"loop\": true, \"answers\": [" CALL "]}]}"
#define AN_BODY(stream)                                                        \
    "{\"model\": \"m\", \"max_tokens\": 100," stream " \"messages\": "         \
    "[{\"role\": \"user\", \"content\": \"label it\"}]}"
#define GE_BODY                                                                \
    "{\"contents\": [{\"role\": \"user\", \"parts\": [{\"text\": \"label "     \
    "it\"}]}]}"

static int port;

static void
setup(void)
{
    mockproc_setup();
    port = mockproc_fixture_start(SCRIPT);
}

/* The call read back from root: add_label with issue 412. */
static void
expect_call(const cJSON *root)
{
    struct http_tool_calls c;

    ck_assert_int_eq(http_toolcalls_read(root, NULL, 0, &c), 0);
    ck_assert_int_eq((int)c.n, 1);
    ck_assert_str_eq(c.v[0].name, "add_label");
    ck_assert_int_eq(cJSON_GetObjectItem(c.v[0].args, "issue")->valueint, 412);
    http_toolcalls_cleanup(&c);
}

static const struct {
    const char *path, *body;
    enum config_api api;
    const char *finish; /* the native finish of a call */
} routes[] = {
    {"/a/v1/messages", AN_BODY(""), CONFIG_API_ANTHROPIC, "tool_use"},
    {"/g/v1/models/m:generateContent", GE_BODY, CONFIG_API_GEMINI, "STOP"},
    {"/a/v1/messages", AN_BODY(" \"stream\": true,"), CONFIG_API_ANTHROPIC,
     "tool_use"},
    {"/g/v1/models/m:streamGenerateContent", GE_BODY, CONFIG_API_GEMINI,
     "STOP"},
};

START_TEST(test_tool_call_in_the_native_shape)
{
    struct reply r;
    char *text = NULL;
    cJSON *root;
    struct http_chat_answer ans;
    bool streamed = strstr(routes[_i].path, "stream") != NULL ||
                    strstr(routes[_i].body, "stream") != NULL;

    req(port, "POST", routes[_i].path, "", routes[_i].body, &r);
    ck_assert_int_eq(r.status, 200);
    if (streamed) {
        ck_assert_str_eq(hdr(&r, "content-type"), "text/event-stream");
        ck_assert_int_eq(
            http_stream_assemble(routes[_i].api, r.body, strlen(r.body), &text),
            0);
    }
    root = cJSON_Parse(text != NULL ? text : r.body);
    ck_assert_ptr_nonnull(root);
    expect_call(root);
    ck_assert_int_eq(http_chat_read(root, &ans), 0);
    ck_assert(ans.has_tool_calls);
    ck_assert_str_eq(
        cJSON_GetStringValue(cJSON_GetObjectItem(
            routes[_i].api == CONFIG_API_ANTHROPIC
                ? root
                : cJSON_GetArrayItem(cJSON_GetObjectItem(root, "candidates"),
                                     0),
            routes[_i].api == CONFIG_API_ANTHROPIC ? "stop_reason"
                                                   : "finishReason")),
        routes[_i].finish);
    http_chat_answer_cleanup(&ans);
    cJSON_Delete(root);
    free(text);
    reply_free(&r);
}
END_TEST

#define AN_TURN(blocks)                                                        \
    "{\"model\": \"m\", \"max_tokens\": 9, \"messages\": [{\"role\": "         \
    "\"user\", \"content\": \"go\"}, " blocks "]}"
#define TOOL_USE(id)                                                           \
    "{\"role\": \"assistant\", \"content\": [{\"type\": \"tool_use\", "        \
    "\"id\": \"" id "\", \"name\": \"f\", \"input\": {}}]}"
#define RESULT(id)                                                             \
    "{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", "          \
    "\"tool_use_id\": \"" id "\", \"content\": \"ok\"}]}"
#define GE_TOOLS(params)                                                       \
    "{\"contents\": [{\"role\": \"user\", \"parts\": [{\"text\": \"go\"}]}],"  \
    " \"tools\": [{\"functionDeclarations\": [{\"name\": \"f\", "              \
    "\"parameters\": " params "}]}]}"
#define GE_CALL                                                                \
    "{\"role\": \"model\", \"parts\": [{\"functionCall\": {\"name\": "         \
    "\"f\", \"args\": {}}}, {\"functionCall\": {\"name\": \"f\", \"args\":"    \
    " {}}}]}"

/* What the providers refuse of a tool turn, refused by the mock with
 * their message (400). */
static const struct {
    const char *path, *body, *says;
} refused[] = {
    {"/a/v1/messages", AN_TURN(TOOL_USE("toolu_1")),
     "`tool_use` ids were found without `tool_result` blocks immediately "
     "after: toolu_1"},
    {"/a/v1/messages",
     AN_TURN(TOOL_USE("toolu_1") ", {\"role\": \"user\", \"content\": [{"
                                 "\"type\": \"tool_result\", \"tool_use_id\":"
                                 " \"toolu_1\"}, {\"type\": \"tool_result\","
                                 " \"tool_use_id\": \"toolu_2\"}]}"),
     "unexpected `tool_use_id` found in `tool_result` blocks: toolu_2"},
    {"/a/v1/messages", AN_TURN(TOOL_USE("call.1") ", " RESULT("call.1")),
     "tool_use.id: String should match pattern"},
    {"/a/v1/messages",
     "{\"model\": \"m\", \"max_tokens\": 9, \"tools\": [{\"name\": \"f\"}],"
     " \"messages\": [{\"role\": \"user\", \"content\": \"go\"}]}",
     "tools.0.custom.input_schema: Field required"},
    {"/g/v1/models/m:generateContent",
     GE_TOOLS("{\"type\": \"object\", \"properties\": {\"a\": {\"type\":"
              " \"string\"}}, \"additionalProperties\": false}"),
     "Unknown name \\\"additionalProperties\\\""},
    {"/g/v1/models/m:generateContent", GE_TOOLS("{\"type\": \"object\"}"),
     "properties: should be non-empty for OBJECT type"},
    {"/g/v1/models/m:generateContent",
     "{\"contents\": [{\"role\": \"user\", \"parts\": [{\"text\": "
     "\"go\"}]}, " GE_CALL
     ", {\"role\": \"user\", \"parts\": [{\"functionResponse\": "
     "{\"name\": \"f\", \"response\": {}}}]}]}",
     "the number of function response parts is equal to the number of "
     "function call parts"},
};

START_TEST(test_bad_tool_turn_refused_as_the_provider_does)
{
    struct reply r;

    req(port, "POST", refused[_i].path, "", refused[_i].body, &r);
    ck_assert_int_eq(r.status, 400);
    ck_assert_msg(strstr(r.body, refused[_i].says) != NULL, "%s", r.body);
    reply_free(&r);
}
END_TEST

START_TEST(test_bad_api_in_a_script_is_refused)
{
    char *script = tmpdir_write(
        mockproc_dir, "bad.json",
        "{\"routes\": [{\"path\": \"/x\", \"api\": \"claude\"}]}",
        sizeof("{\"routes\": [{\"path\": \"/x\", \"api\": \"claude\"}]}") - 1);
    struct run_result res;

    ck_assert_int_eq(RUN(&res, NULL, "mock", "--script", script, "--check"), 2);
    ck_assert_ptr_nonnull(
        strstr(res.err, "routes[0].api: must be openai, anthropic or gemini"));
    run_result_free(&res);
    free(script);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("native_mock");
    TCase *tc = tcase_create("tools");

    tcase_add_checked_fixture(tc, setup, mockproc_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_tool_call_in_the_native_shape, 0,
                        (int)STEPQ_ARRAY_LEN(routes));
    tcase_add_loop_test(tc, test_bad_tool_turn_refused_as_the_provider_does, 0,
                        (int)STEPQ_ARRAY_LEN(refused));
    tcase_add_test(tc, test_bad_api_in_a_script_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

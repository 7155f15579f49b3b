/* test_http_build.c: the chat and http step builders and the chat answer
 * parser of http/http.h, as plain functions (no loop, no network).
 */
#include "tests/support/support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/xalloc.h"
#include "http/http.h"
#include "tests/support/httpenv.h"

static void
setup(void)
{
    setenv(KEY_ENV, KEY_VALUE, 1);
}

/* ---- builders ----------------------------------------------------------- */

START_TEST(test_chat_request_sets_model_and_bearer_only)
{
    cJSON *req = cJSON_Parse(REQ_JSON), *body;
    struct http_request r;
    char err[256];

    ck_assert_int_eq(http_chat_request(req, "http://h:1/v1/", "tier-model",
                                       KEY_ENV, 1234, &r, err, sizeof(err)),
                     0);
    ck_assert_str_eq(r.method, "POST");
    ck_assert_str_eq(r.url, "http://h:1/v1/chat/completions");
    ck_assert_int_eq(r.timeout_ms, 1234);
    ck_assert_str_eq(http_request_header(&r, "authorization"),
                     "Bearer " KEY_VALUE);
    ck_assert_str_eq(http_request_header(&r, "Content-Type"),
                     "application/json");
    body = cJSON_ParseWithLength(r.body, r.body_len);
    ck_assert_str_eq(json_at(body, "model", NULL), "tier-model");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(body, "messages")),
                     1);
    ck_assert_str_eq(json_at(req, "model", NULL), "from-job"); /* untouched */
    /* The key is in the Authorization value and nowhere else. */
    ck_assert_ptr_null(strstr(r.body, KEY_VALUE));
    ck_assert_ptr_null(strstr(r.url, KEY_VALUE));
    for (size_t i = 0; i < r.nheaders; i++)
        ck_assert(strstr(r.headers[i].value, KEY_VALUE) == NULL ||
                  strcmp(r.headers[i].name, "Authorization") == 0);
    cJSON_Delete(body);
    cJSON_Delete(req);
    http_request_cleanup(&r);
}
END_TEST

START_TEST(test_chat_request_without_key)
{
    cJSON *req = cJSON_Parse("{\"messages\": []}");
    struct http_request r;
    char err[256];

    ck_assert_int_eq(http_chat_request(req, "http://h/v1", "m", NULL, 0, &r,
                                       err, sizeof(err)),
                     0);
    ck_assert_ptr_null(http_request_header(&r, "Authorization"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"model\":\"m\""));
    http_request_cleanup(&r);
    unsetenv(KEY_ENV);
    ck_assert_int_eq(http_chat_request(req, "http://h/v1", "m", KEY_ENV, 0, &r,
                                       err, sizeof(err)),
                     0);
    ck_assert_ptr_null(http_request_header(&r, "Authorization"));
    http_request_cleanup(&r);
    setenv(KEY_ENV, "", 1);
    ck_assert_int_eq(http_chat_request(req, "http://h/v1", "m", KEY_ENV, 0, &r,
                                       err, sizeof(err)),
                     0);
    ck_assert_ptr_null(http_request_header(&r, "Authorization"));
    http_request_cleanup(&r);
    cJSON_Delete(req);
}
END_TEST

START_TEST(test_chat_request_refuses_bad_input)
{
    cJSON *arr = cJSON_Parse("[1]"), *obj = cJSON_Parse("{}");
    struct http_request r = {0};
    char err[256];

    ck_assert_int_eq(
        http_chat_request(arr, "http://h", "m", NULL, 0, &r, err, sizeof(err)),
        -EINVAL);
    ck_assert_str_eq(err, "request: must be an object");
    ck_assert_int_eq(
        http_chat_request(obj, "ftp://h", "m", NULL, 0, &r, err, sizeof(err)),
        -EINVAL);
    setenv(KEY_ENV, "sk-Bad\r\nX-Injected: 1", 1);
    ck_assert_int_eq(http_chat_request(obj, "http://h", "m", KEY_ENV, 0, &r,
                                       err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_null(strstr(err, "sk-Bad"));
    ck_assert_ptr_nonnull(strstr(err, KEY_ENV));
    ck_assert_ptr_null(r.url); /* untouched */
    cJSON_Delete(arr);
    cJSON_Delete(obj);
}
END_TEST

START_TEST(test_step_request_resolves_env_and_key)
{
    cJSON *step = cJSON_Parse(
        "{\"url\": \"http://h/c\", \"headers\": {\"Authorization\": "
        "\"env:" KEY_ENV "\", \"Idempotency-Key\": \"from-job\"}, "
        "\"body\": {\"text\": \"hi\"}}");
    struct http_request r;
    char err[256];

    ck_assert_int_eq(http_step_request(step, "k-9", 0, &r, err, sizeof(err)),
                     0);
    ck_assert_str_eq(r.method, "POST");
    ck_assert_str_eq(http_request_header(&r, "authorization"), KEY_VALUE);
    ck_assert_str_eq(http_request_header(&r, "idempotency-key"), "k-9");
    ck_assert_str_eq(http_request_header(&r, "content-type"),
                     "application/json");
    ck_assert_str_eq(r.body, "{\"text\":\"hi\"}");
    http_request_cleanup(&r);
    unsetenv(KEY_ENV);
    ck_assert_int_eq(http_step_request(step, NULL, 0, &r, err, sizeof(err)),
                     -ENOENT);
    ck_assert_str_eq(err,
                     "http.headers.Authorization: environment variable " KEY_ENV
                     " is not set");
    cJSON_Delete(step);
}
END_TEST

START_TEST(test_step_request_defaults_and_errors)
{
    cJSON *get = cJSON_Parse("{\"url\": \"https://h/x\"}");
    cJSON *text = cJSON_Parse("{\"method\": \"PUT\", \"url\": \"http://h/x\","
                              " \"body\": \"raw text\"}");
    cJSON *bad =
        cJSON_Parse("{\"url\": \"http://h\", \"headers\": {\"A\": 1}}");
    struct http_request r;
    char err[256];

    ck_assert_int_eq(http_step_request(get, NULL, 0, &r, err, sizeof(err)), 0);
    ck_assert_str_eq(r.method, "GET");
    ck_assert_ptr_null(r.body);
    ck_assert_ptr_null(http_request_header(&r, "Idempotency-Key"));
    http_request_cleanup(&r);
    ck_assert_int_eq(http_step_request(text, NULL, 0, &r, err, sizeof(err)), 0);
    ck_assert_str_eq(r.method, "PUT");
    ck_assert_str_eq(r.body, "raw text");
    ck_assert_str_eq(http_request_header(&r, "Content-Type"),
                     "text/plain; charset=utf-8");
    http_request_cleanup(&r);
    ck_assert_int_eq(http_step_request(bad, NULL, 0, &r, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, "http.headers.A: must be a string header");
    cJSON_Delete(get);
    cJSON_Delete(text);
    cJSON_Delete(bad);
}
END_TEST

/* ---- chat answer parser ------------------------------------------------- */

START_TEST(test_chat_parse_good_answer)
{
    const char *b =
        "{\"id\":\"x\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
        "\"assistant\",\"content\":\"hello\",\"tool_calls\":[{\"id\":\"t\"}]},"
        "\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":12,"
        "\"completion_tokens\":3,\"total_tokens\":15}}";
    struct http_chat_answer a;

    ck_assert_int_eq(http_chat_parse(b, strlen(b), &a), 0);
    ck_assert_str_eq(a.content, "hello");
    ck_assert(a.has_tool_calls);
    ck_assert_str_eq(a.finish_reason, "tool_calls");
    ck_assert_int_eq(a.prompt_tokens, 12);
    ck_assert_int_eq(a.completion_tokens, 3);
    ck_assert_int_eq(a.total_tokens, 15);
    http_chat_answer_cleanup(&a);
    ck_assert_ptr_null(a.content);
    http_chat_answer_cleanup(NULL);
}
END_TEST

/* Hostile bodies: rc, then has content, tool calls, prompt tokens. */
static const struct {
    const char *body;
    int rc;
    bool content, tools;
    int64_t prompt;
} hostile[] = {
    {"", -EINVAL, false, false, -1},
    {"null", -EINVAL, false, false, -1},
    {"[]", -EINVAL, false, false, -1},
    {"{}", -EINVAL, false, false, -1},
    {"{\"choices\": []}", -EINVAL, false, false, -1},
    {"{\"choices\": [1]}", -EINVAL, false, false, -1},
    {"{\"choices\": [{\"message\": \"x\"}]}", -EINVAL, false, false, -1},
    {"{\"choices\": {\"message\": {}}}", -EINVAL, false, false, -1},
    {"{\"choices\": [{\"message\": {\"content\": \"a\"", -EINVAL, false, false,
     -1},
    {"<html>502 Bad Gateway</html>", -EINVAL, false, false, -1},
    /* A completion with text after it is not JSON (RFC 8259): not read. */
    {"{\"choices\": [{\"message\": {\"content\": \"a\"}}]}garbage", -EINVAL,
     false, false, -1},
    {"{\"choices\": [{\"message\": {\"content\": \"a\"}}]} \r\n", 0, true,
     false, -1},
    {"{\"error\": {\"type\": \"insufficient_quota\"}}", -EINVAL, false, false,
     -1},
    {"{\"choices\": [{\"message\": {}}]}", 0, false, false, -1},
    {"{\"choices\": [{\"message\": {\"content\": null, \"tool_calls\": "
     "[{}]}}]}",
     0, false, true, -1},
    {"{\"choices\": [{\"message\": {\"content\": 5, \"tool_calls\": []}}],"
     " \"usage\": {\"prompt_tokens\": -5}}",
     0, false, false, -1},
    {"{\"choices\": [{\"message\": {\"content\": \"\"}}], \"usage\": "
     "{\"prompt_tokens\": 1.5}}",
     0, true, false, -1},
    {"{\"choices\": [{\"message\": {\"content\": \"x\"}}], \"usage\": "
     "{\"prompt_tokens\": 1e300}}",
     0, true, false, -1},
    {"{\"choices\": [{\"message\": {\"content\": \"x\"}}], \"usage\": "
     "{\"prompt_tokens\": \"7\"}}",
     0, true, false, -1},
    {"{\"choices\": [{\"message\": {\"content\": \"x\"}}], \"usage\": "
     "{\"prompt_tokens\": 7}}",
     0, true, false, 7},
    {"{\"choices\": [{\"message\": {\"function_call\": {}}}], \"usage\": 3}", 0,
     false, true, -1},
};

START_TEST(test_chat_parse_hostile)
{
    struct http_chat_answer a = {(char *)"untouched", false, NULL, 9, 9, 9,
                                 PRICE_USAGE_NONE};
    const char *b = hostile[_i].body;
    char *copy = xmalloc(strlen(b) + 1);

    memcpy(copy, b, strlen(b)); /* not NUL-terminated on purpose */
    ck_assert_int_eq(http_chat_parse(copy, strlen(b), &a), hostile[_i].rc);
    if (hostile[_i].rc != 0) {
        ck_assert_str_eq(a.content, "untouched");
    } else {
        ck_assert(hostile[_i].content == (a.content != NULL));
        ck_assert(hostile[_i].tools == a.has_tool_calls);
        ck_assert_int_eq(a.prompt_tokens, hostile[_i].prompt);
        http_chat_answer_cleanup(&a);
    }
    free(copy);
}
END_TEST

START_TEST(test_chat_parse_deep_and_binary)
{
    size_t n = 200000;
    char *deep = xmalloc(n);
    struct http_chat_answer a;
    const char bin[] = "{\"choices\"\0\xff\xfe[{}]}";

    memset(deep, '[', n);
    ck_assert_int_eq(http_chat_parse(deep, n, &a), -EINVAL);
    ck_assert_int_eq(http_chat_parse(bin, sizeof(bin) - 1, &a), -EINVAL);
    ck_assert_int_eq(http_chat_parse(NULL, 0, &a), -EINVAL);
    free(deep);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("http_build");
    TCase *build = tcase_create("build"), *parse = tcase_create("parse");
    TCase *all[] = {build, parse};

    tcase_add_test(build, test_chat_request_sets_model_and_bearer_only);
    tcase_add_test(build, test_chat_request_without_key);
    tcase_add_test(build, test_chat_request_refuses_bad_input);
    tcase_add_test(build, test_step_request_resolves_env_and_key);
    tcase_add_test(build, test_step_request_defaults_and_errors);
    tcase_add_test(parse, test_chat_parse_good_answer);
    tcase_add_loop_test(parse, test_chat_parse_hostile, 0,
                        (int)STEPQ_ARRAY_LEN(hostile));
    tcase_add_test(parse, test_chat_parse_deep_and_binary);
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(all); i++) {
        tcase_add_checked_fixture(all[i], setup, NULL);
        tcase_set_timeout(all[i], 20);
        suite_add_tcase(s, all[i]);
    }
    return s;
}

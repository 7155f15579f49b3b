/* test_mock_auth.c: a mock route that asserts what a provider requires:
 * headers with an exact value (401, provider-shaped, when one is missing
 * or wrong), query parameters (404 otherwise) and, with "exact", the path
 * itself (other paths go to the catch-all route). The request log never
 * shows a credential, whatever header or parameter carries it.
 */
#include "tests/support/support.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tests/support/httpcl.h"
#include "tests/support/mockproc.h"

#define AZURE_PATH "/openai/deployments/gpt-4o-mini/chat/completions"
#define SCRIPT                                                                 \
    "{\"answers\": [{\"status\": 404}], \"loop\": true, \"routes\": ["         \
    "{\"path\": \"" AZURE_PATH "\", \"exact\": true,"                          \
    " \"require_headers\": {\"api-key\": \"az-Secret-1\"},"                    \
    " \"require_query\": {\"api-version\": \"2024-10-21\"}},"                  \
    "{\"path\": \"/anthropic\", \"require_headers\": {\"x-api-key\": \"k\"},"  \
    " \"unauthorized\": {\"body\": {\"type\": \"error\", \"error\": "          \
    "{\"type\": \"authentication_error\", \"message\": \"invalid "             \
    "x-api-key\"}}}}]}"

START_TEST(test_required_header_and_query_pass)
{
    int port = mockproc_fixture_start(SCRIPT);
    struct reply r;
    cJSON *j;

    req(port, "POST", AZURE_PATH "?api-version=2024-10-21",
        "API-Key: az-Secret-1\r\n", CHAT_BODY, &r);
    ck_assert_int_eq(r.status, 200);
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "object"), "chat.completion");
    cJSON_Delete(j);
    reply_free(&r);
    /* Percent-encoding is decoded before the comparison. */
    req(port, "POST", AZURE_PATH "?x=1&api%2Dversion=2024%2D10%2D21",
        "api-key: az-Secret-1\r\n", CHAT_BODY, &r);
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
}
END_TEST

START_TEST(test_missing_or_wrong_header_is_401)
{
    int port = mockproc_fixture_start(SCRIPT);
    struct reply r;
    cJSON *j;

    req(port, "POST", AZURE_PATH "?api-version=2024-10-21", NULL, CHAT_BODY,
        &r);
    ck_assert_int_eq(r.status, 401);
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "error.code"), "invalid_api_key");
    ck_assert_ptr_nonnull(strstr(jstr(j, "error.message"), "api-key"));
    cJSON_Delete(j);
    reply_free(&r);
    /* The key sent as a Bearer token is not the header the route wants. */
    req(port, "POST", AZURE_PATH "?api-version=2024-10-21",
        "Authorization: Bearer az-Secret-1\r\n", CHAT_BODY, &r);
    ck_assert_int_eq(r.status, 401);
    reply_free(&r);
    req(port, "POST", AZURE_PATH "?api-version=2024-10-21",
        "api-key: az-Secret-2\r\n", CHAT_BODY, &r);
    ck_assert_int_eq(r.status, 401);
    reply_free(&r);
    /* A route's own unauthorized answer, in its provider's shape. */
    chat(port, "/anthropic/v1/chat/completions", &r);
    ck_assert_int_eq(r.status, 401);
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "error.type"), "authentication_error");
    cJSON_Delete(j);
    reply_free(&r);
}
END_TEST

START_TEST(test_wrong_query_or_path_is_404)
{
    int port = mockproc_fixture_start(SCRIPT);
    struct reply r;

    req(port, "POST", AZURE_PATH "?api-version=2024-02-01",
        "api-key: az-Secret-1\r\n", CHAT_BODY, &r);
    ck_assert_int_eq(r.status, 404);
    reply_free(&r);
    req(port, "POST", AZURE_PATH, "api-key: az-Secret-1\r\n", CHAT_BODY, &r);
    ck_assert_int_eq(r.status, 404);
    reply_free(&r);
    /* exact: a path below the route's is not the route's. */
    req(port, "POST", AZURE_PATH "/v1/chat/completions?api-version=2024-10-21",
        "api-key: az-Secret-1\r\n", CHAT_BODY, &r);
    ck_assert_int_eq(r.status, 404);
    reply_free(&r);
    chat(port, "/v1/chat/completions", &r);
    ck_assert_int_eq(r.status, 404);
    reply_free(&r);
}
END_TEST

START_TEST(test_log_shows_no_credential)
{
    int port = mockproc_fixture_start(SCRIPT);
    struct reply r;
    cJSON *log;
    char *text;

    req(port, "POST", AZURE_PATH "?api-version=2024-10-21&key=q-Secret-3",
        "api-key: az-Secret-1\r\nx-portkey-api-key: pk-Secret-2\r\n"
        "x-title: nightly\r\n",
        CHAT_BODY, &r);
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
    log = mockproc_read_log(mockproc_dir, 1);
    text = cJSON_PrintUnformatted(log);
    ck_assert_ptr_null(strstr(text, "Secret"));
    ck_assert_ptr_nonnull(strstr(text, "\"x-title\":\"nightly\""));
    ck_assert_ptr_nonnull(strstr(text, "api-version=2024-10-21&key=***"));
    free(text);
    cJSON_Delete(log);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("mock_auth");
    TCase *tc = tcase_create("require");

    tcase_add_checked_fixture(tc, mockproc_setup, mockproc_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_required_header_and_query_pass);
    tcase_add_test(tc, test_missing_or_wrong_header_is_401);
    tcase_add_test(tc, test_wrong_query_or_path_is_404);
    tcase_add_test(tc, test_log_shows_no_credential);
    suite_add_tcase(s, tc);
    return s;
}

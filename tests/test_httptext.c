/* test_httptext.c: which header and query parameter names carry a
 * credential (httptext_is_credential_name, common/httptext.c). Their
 * values are masked in what stepq shows of a request and in the answers
 * it keeps, so a name that is not a credential must not be taken for one
 * ("x-portkey-provider: openai" would turn every "openai" of an answer
 * into "***"), and every real credential name must be. */
#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/httptext.h"
#include "tests/support/support.h"

static const struct name_case {
    const char *name;
    bool credential;
} cases[] = {
    /* Credentials, as providers and gateways name them. */
    {"Authorization", true},
    {"Proxy-Authorization", true},
    {"x-api-key", true},
    {"api-key", true},
    {"api_key", true},
    {"apiKey", true},
    {"APIKEY", true},
    {"x-goog-api-key", true},
    {"x-portkey-api-key", true},
    {"x-portkey-virtual-key", true},
    {"Ocp-Apim-Subscription-Key", true},
    {"key", true},
    {"access_token", true},
    {"accessToken", true},
    {"X-Auth-Token", true},
    {"x-session-token", true},
    {"client_secret", true},
    {"x-db-password", true},
    {"sig", true},
    {"X-Amz-Signature", true},
    {"Cookie", true},
    {"cf-aig-authorization", true},
    /* Look-alikes: a credential word inside another word, or "key" that
     * names something else. */
    {"x-portkey-provider", false},
    {"x-portkey-retry", false},
    {"x-portkey-custom-host", false},
    {"x-portkey-config", false},
    {"portkey", false},
    {"monkey", false},
    {"keyword", false},
    {"Idempotency-Key", false},
    {"x-cache-key", false},
    {"key-id", false},
    {"tokens", false},
    {"max_tokens", false},
    {"author", false},
    {"signal", false},
    {"design", false},
    {"x-request-id", false},
    {"Content-Type", false},
    {"", false},
    {"-", false},
};

START_TEST(test_credential_names)
{
    const struct name_case *c = &cases[_i];

    ck_assert_msg(httptext_is_credential_name(c->name, strlen(c->name)) ==
                      c->credential,
                  "\"%s\": want %s", c->name,
                  c->credential ? "a credential" : "not a credential");
}
END_TEST

/* Only the first n bytes count: a query's "key=..." is read by name. */
START_TEST(test_name_is_its_first_bytes)
{
    ck_assert(httptext_is_credential_name("key=abc", 3));
    ck_assert(!httptext_is_credential_name("keyword=abc", 7));
    ck_assert(httptext_is_credential_name("x-api-key: v", 9));
    ck_assert(!httptext_is_credential_name("x-api-key", 5)); /* "x-api" */
}
END_TEST

/* A URL shown to an operator keeps everything but its secrets. */
START_TEST(test_url_masked_for_showing)
{
    static const char *const urls[][2] = {
        {"https://h.example/v1/comments?page=2",
         "https://h.example/v1/comments?page=2"},
        {"https://h.example/p?key=abc123456&page=2&access_token=zz#frag",
         "https://h.example/p?key=***&page=2&access_token=***#frag"},
        {"http://bo:hunter22@h.example:8080/x?monkey=1",
         "http://bo:***@h.example:8080/x?monkey=1"},
        {"http://bo@h.example/x", "http://bo@h.example/x"},
        {"https://h.example/{{steps.a.output}}?apiKey=",
         "https://h.example/{{steps.a.output}}?apiKey=***"},
        {"https://h.example/p#a?key=1", "https://h.example/p#a?key=1"},
        {"https://h.example/p?key&x=1", "https://h.example/p?key&x=1"},
        {"", ""},
    };

    for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
        char *got = httptext_url_masked(urls[i][0]);
        ck_assert_msg(strcmp(got, urls[i][1]) == 0, "%s: got %s, want %s",
                      urls[i][0], got, urls[i][1]);
        free(got);
    }
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("httptext");
    TCase *tc = tcase_create("credential_names");

    tcase_add_loop_test(tc, test_credential_names, 0,
                        (int)(sizeof(cases) / sizeof(cases[0])));
    tcase_add_test(tc, test_name_is_its_first_bytes);
    tcase_add_test(tc, test_url_masked_for_showing);
    suite_add_tcase(s, tc);
    return s;
}

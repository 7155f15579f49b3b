/* test_http_tier.c: a tier's auth, headers and query (common/config.c and
 * http/tier.c): what the config accepts and refuses, with the JSON
 * path of the problem, and the request a tier builds from it, with every
 * env: value read at build time and never anywhere but its header or
 * query parameter.
 */
#include "tests/support/support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/config.h"
#include "common/xalloc.h"
#include "http/http.h"

#define TIER(extra)                                                            \
    "{\"tiers\":[{\"name\":\"t\",\"base_url\":\"https://h.example/v1\","       \
    "\"model\":\"m\"" extra "}]}"
#define SECRET "sk-tier-Secret-0123456789abcdef"

static void
setup(void)
{
    setenv("TIER_KEY", SECRET, 1);
    setenv("TIER_TITLE", "nightly jobs", 1);
    unsetenv("TIER_UNSET");
}

/* tier parses text, which must be a valid config; the caller frees *cfg. */
static const struct config_tier *
tier(const char *text, struct config **cfg)
{
    char err[512];

    ck_assert_msg(
        config_parse(text, strlen(text), NULL, cfg, err, sizeof(err)) == 0,
        "%s", err);
    return &(*cfg)->tiers[0];
}

/* ---- the config ---------------------------------------------------------- */

struct bad {
    const char *extra; /* tier fields after the required ones */
    const char *want;  /* in the error */
};

static const struct bad bad_configs[] = {
    {",\"spill\":\"later\"", "tiers[0].spill: must be \"deadline\", \"now\""},
    {",\"spill\":-1", "tiers[0].spill: must be"},
    {",\"spill\":true", "tiers[0].spill: must be"},
    {",\"headers\":{\"X-Title\":7}",
     "tiers[0].headers.X-Title: must be a string"},
    {",\"headers\":[]", "tiers[0].headers: must be an object"},
    {",\"headers\":{\"Content-Type\":\"text/plain\"}",
     "tiers[0].headers.Content-Type: Content-Type is set by stepq"},
    {",\"headers\":{\"idempotency-key\":\"k\"}",
     "tiers[0].headers.idempotency-key: Idempotency-Key is set by stepq"},
    {",\"headers\":{\"X-A\":\"a\\r\\nX-Injected: 1\"}",
     "tiers[0].headers.X-A: must not hold CR, LF"},
    {",\"headers\":{\"X-A\":\"a\\nb\"}", "tiers[0].headers.X-A: must not hold"},
    {",\"headers\":{\"Bad Name\":\"v\"}",
     "tiers[0].headers.Bad Name: not a valid header name"},
    {",\"headers\":{\"X-A\":\"1\",\"x-a\":\"2\"}",
     "tiers[0].headers.x-a: same header as X-A"},
    {",\"headers\":{\"X-A\":\"env:\"}",
     "tiers[0].headers.X-A: env: must be followed by a variable name"},
    {",\"api_key_env\":\"K\",\"headers\":{\"authorization\":\"x\"}",
     "tiers[0].headers.authorization: the key goes in this header"},
    {",\"api_key_env\":\"K\",\"auth\":\"header:api-key\","
     "\"headers\":{\"API-Key\":\"x\"}",
     "tiers[0].headers.API-Key: the key goes in this header"},
    {",\"auth\":\"basic\"",
     "tiers[0].auth: must be bearer, header:NAME or none"},
    {",\"auth\":\"header:\",\"api_key_env\":\"K\"",
     "tiers[0].auth: header: needs a header name"},
    {",\"auth\":\"header:Content-Type\",\"api_key_env\":\"K\"",
     "tiers[0].auth: Content-Type is set by stepq"},
    {",\"auth\":\"bearer\"", "tiers[0].auth: bearer needs api_key_env"},
    {",\"auth\":\"header:x-api-key\"",
     "tiers[0].auth: header:x-api-key needs api_key_env"},
    {",\"auth\":\"none\",\"api_key_env\":\"K\"",
     "tiers[0].auth: none sends no key"},
    {",\"query\":{\"api-version\":1}",
     "tiers[0].query.api-version: must be a string"},
    {",\"query\":{\"\":\"x\"}", "tiers[0].query.: must not be empty"},
    {",\"query\":\"a=b\"", "tiers[0].query: must be an object"},
    {",\"haeders\":{}", "tiers[0].haeders: unknown field"},
    {",\"base_url\":\"https://h/v1#frag\"", "tiers[0].base_url: must not hold"},
    {",\"api_key_env\":\"A B\"",
     "tiers[0].api_key_env: must name an environment variable"},
    {",\"api_key_env\":\"9K\"",
     "tiers[0].api_key_env: must name an environment variable"},
    {",\"base_url\":\"http://127.0.0.1:70000/v1\"",
     "tiers[0].base_url: port must be 1 to 65535"},
    {",\"base_url\":\"http://127.0.0.1:0/v1\"",
     "tiers[0].base_url: port must be 1 to 65535"},
    {",\"base_url\":\"http:///v1\"",
     "tiers[0].base_url: needs a host (http://HOST/...)"},
    {",\"base_url\":\"http://[::1/v1\"",
     "tiers[0].base_url: bad IPv6 address in the host"},
    {",\"base_url\":\"https://user@:8080\"",
     "tiers[0].base_url: needs a host (http://HOST/...)"},
};

/* A tier's name is printed in tables and logs, its model sent in every
 * request: both are refused blank or with control characters. */
static const struct bad bad_names[] = {
    {"{\"tiers\":[{\"name\":\"a\\u001b[31m\",\"model\":\"m\","
     "\"base_url\":\"http://h/v1\"}]}",
     "tiers[0].name: must be printable text, not blank"},
    {"{\"tiers\":[{\"name\":\"  \",\"model\":\"m\","
     "\"base_url\":\"http://h/v1\"}]}",
     "tiers[0].name: must be printable text, not blank"},
    {"{\"tiers\":[{\"name\":\"host:h:80\",\"model\":\"m\","
     "\"base_url\":\"http://h/v1\"}]}",
     "tiers[0].name: must not start with \"host:\" (kept for the walls of "
     "http steps' hosts)"},
    {"{\"tiers\":[{\"name\":\"t\",\"model\":\"\","
     "\"base_url\":\"http://h/v1\"}]}",
     "tiers[0].model: must be a name without control characters"},
};

START_TEST(test_bad_tier_names_refused)
{
    char err[512];
    struct config *cfg = NULL;

    ck_assert_int_eq(config_parse(bad_names[_i].extra,
                                  strlen(bad_names[_i].extra), NULL, &cfg, err,
                                  sizeof(err)),
                     -EINVAL);
    ck_assert_msg(strstr(err, bad_names[_i].want) != NULL,
                  "want \"%s\", got \"%s\"", bad_names[_i].want, err);
}
END_TEST

START_TEST(test_bad_tier_fields_refused_with_path)
{
    const struct bad *b = &bad_configs[_i];
    char text[1024], err[512];
    struct config *cfg = NULL;

    /* A later "base_url" overrides nothing: json_check_object refuses the
     * duplicate, so the base_url case builds its own tier. */
    if (strstr(b->extra, "base_url") != NULL)
        snprintf(text, sizeof(text),
                 "{\"tiers\":[{\"name\":\"t\",\"model\":\"m\"%s}]}", b->extra);
    else
        snprintf(text, sizeof(text), TIER("%s"), b->extra);
    ck_assert_int_eq(
        config_parse(text, strlen(text), NULL, &cfg, err, sizeof(err)),
        -EINVAL);
    ck_assert_msg(strstr(err, b->want) != NULL, "want \"%s\", got \"%s\"",
                  b->want, err);
    ck_assert_ptr_null(cfg);
}
END_TEST

/* A tier's name is at most 200 bytes: every store indexes it. */
START_TEST(test_tier_name_length_bounded)
{
    char name[202], text[512], err[256];
    struct config *cfg = NULL;

    for (int extra = 0; extra < 2; extra++) {
        memset(name, 't', sizeof(name));
        name[200 + extra] = '\0';
        snprintf(text, sizeof(text),
                 "{\"tiers\":[{\"name\":\"%s\",\"base_url\":\"http://h/v1\","
                 "\"model\":\"m\"}]}",
                 name);
        ck_assert_int_eq(
            config_parse(text, strlen(text), NULL, &cfg, err, sizeof(err)),
            extra ? -EINVAL : 0);
        config_free(cfg);
        cfg = NULL;
    }
    ck_assert_str_eq(err, "tiers[0].name: longer than 200 bytes");
}
END_TEST

START_TEST(test_tier_fields_parsed)
{
    struct config *cfg = NULL;
    const struct config_tier *t =
        tier(TIER(",\"api_key_env\":\"TIER_KEY\",\"auth\":\"header:api-key\","
                  "\"headers\":{\"X-Title\":\"env:TIER_TITLE\",\"A\":\"b\"},"
                  "\"query\":{\"api-version\":\"2024-10-21\"}"),
             &cfg);

    ck_assert_int_eq(t->auth, CONFIG_AUTH_HEADER);
    ck_assert_str_eq(config_tier_key_header(t), "api-key");
    ck_assert_uint_eq(t->nheaders, 2);
    ck_assert_str_eq(t->headers[0].name, "X-Title");
    ck_assert_str_eq(t->headers[0].value, "env:TIER_TITLE"); /* not read */
    ck_assert_uint_eq(t->nquery, 1);
    config_free(cfg);
    /* Without auth: Bearer with a key env, nothing without one. */
    t = tier(TIER(""), &cfg);
    ck_assert_ptr_null(config_tier_key_header(t));
    ck_assert_int_eq(t->auth, CONFIG_AUTH_DEFAULT);
    ck_assert_int_eq(t->spill_after_ms, CONFIG_SPILL_DEADLINE);
    config_free(cfg);
    /* spill: at once, after N seconds, or (the default) by the deadline */
    t = tier(TIER(",\"spill\":\"now\""), &cfg);
    ck_assert_int_eq(t->spill_after_ms, 0);
    config_free(cfg);
    t = tier(TIER(",\"spill\":2.5"), &cfg);
    ck_assert_int_eq(t->spill_after_ms, 2500);
    config_free(cfg);
    t = tier(TIER(",\"spill\":\"deadline\""), &cfg);
    ck_assert_int_eq(t->spill_after_ms, CONFIG_SPILL_DEADLINE);
    config_free(cfg);
}
END_TEST

/* ---- the request ----------------------------------------------------------
 */

START_TEST(test_request_carries_headers_query_and_key_header)
{
    struct config *cfg = NULL;
    const struct config_tier *t =
        tier("{\"tiers\":[{\"name\":\"az\",\"model\":\"gpt\",\"base_url\":"
             "\"https://r.example/openai/deployments/gpt/\","
             "\"api_key_env\":\"TIER_KEY\",\"auth\":\"header:api-key\","
             "\"headers\":{\"X-Title\":\"env:TIER_TITLE\",\"Accept\":\"*/*\"},"
             "\"query\":{\"api-version\":\"2024-10-21\",\"q\":\"a b&c\"}}]}",
             &cfg);
    cJSON *req = cJSON_Parse("{\"messages\":[]}");
    struct http_request r;
    char err[256];

    ck_assert_int_eq(
        http_tier_request(req, t, false, 500, &r, err, sizeof(err)), 0);
    ck_assert_str_eq(r.url, "https://r.example/openai/deployments/gpt/chat/"
                            "completions?api-version=2024-10-21&q=a%20b%26c");
    ck_assert_str_eq(http_request_header(&r, "api-key"), SECRET);
    ck_assert_ptr_null(http_request_header(&r, "Authorization"));
    ck_assert_str_eq(http_request_header(&r, "x-title"), "nightly jobs");
    ck_assert_str_eq(http_request_header(&r, "Accept"), "*/*");
    ck_assert_str_eq(http_request_header(&r, "Content-Type"),
                     "application/json");
    ck_assert_ptr_null(strstr(r.body, SECRET));
    ck_assert_ptr_null(strstr(r.url, SECRET));
    http_request_cleanup(&r);
    cJSON_Delete(req);
    config_free(cfg);
}
END_TEST

START_TEST(test_url_keeps_base_query_and_masks_env_values)
{
    struct config *cfg = NULL;
    const struct config_tier *t =
        tier("{\"tiers\":[{\"name\":\"g\",\"model\":\"m\",\"base_url\":"
             "\"http://h/v1?a=1\",\"query\":{\"key\":\"env:TIER_KEY\","
             "\"sig\":\"lit\",\"v\":\"1\"}}]}",
             &cfg);
    char *url = NULL, err[256];

    ck_assert_int_eq(http_tier_url(t, false, &url, err, sizeof(err)), 0);
    ck_assert_str_eq(url,
                     "http://h/v1/chat/completions?a=1&key=***&sig=***&v=1");
    free(url);
    ck_assert_int_eq(http_tier_url(t, true, &url, err, sizeof(err)), 0);
    ck_assert_str_eq(url, "http://h/v1/chat/completions?a=1&key=" SECRET
                          "&sig=lit&v=1");
    free(url);
    config_free(cfg);
}
END_TEST

/* What base_url itself carries of a credential (a userinfo's password, a
 * token as userinfo, a credential-named parameter of its own query) is
 * shown as "***", as the query's are; sent as written. */
START_TEST(test_url_masks_credentials_in_base_url)
{
    static const struct {
        const char *base, *shown, *sent;
    } rows[] = {
        {"http://u:pw1234@h:8080/v1?key=k9876&x=1",
         "http://u:***@h:8080/v1/chat/completions?key=***&x=1",
         "http://u:pw1234@h:8080/v1/chat/completions?key=k9876&x=1"},
        {"https://tok123@h/v1", "https://***@h/v1/chat/completions",
         "https://tok123@h/v1/chat/completions"},
        {"http://h/v1?api_key=zz99&token=&a=b",
         "http://h/v1/chat/completions?api_key=***&token=&a=b",
         "http://h/v1/chat/completions?api_key=zz99&token=&a=b"},
    };
    char text[512], *url = NULL, err[256];

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct config *cfg = NULL;
        const struct config_tier *t;
        snprintf(text, sizeof(text),
                 "{\"tiers\":[{\"name\":\"g\",\"model\":\"m\","
                 "\"base_url\":\"%s\"}]}",
                 rows[i].base);
        t = tier(text, &cfg);
        ck_assert_int_eq(http_tier_url(t, false, &url, err, sizeof(err)), 0);
        ck_assert_str_eq(url, rows[i].shown);
        free(url);
        ck_assert_int_eq(http_tier_url(t, true, &url, err, sizeof(err)), 0);
        ck_assert_str_eq(url, rows[i].sent);
        free(url);
        config_free(cfg);
    }
}
END_TEST

START_TEST(test_unset_env_fails_naming_the_variable)
{
    struct config *cfg = NULL;
    cJSON *req = cJSON_Parse("{\"messages\":[]}");
    struct http_request r = {0};
    char err[256];
    const struct config_tier *t =
        tier(TIER(",\"headers\":{\"X-T\":\"env:TIER_UNSET\"}"), &cfg);

    ck_assert_int_eq(http_tier_request(req, t, false, 0, &r, err, sizeof(err)),
                     -ENOENT);
    ck_assert_str_eq(err, "tier t: headers.X-T: environment variable "
                          "TIER_UNSET is not set");
    ck_assert_ptr_null(r.url); /* untouched: nothing to send */
    config_free(cfg);
    /* An explicit auth needs its key; the default sends none without. */
    t = tier(TIER(",\"api_key_env\":\"TIER_UNSET\",\"auth\":\"bearer\""), &cfg);
    ck_assert_int_eq(http_tier_request(req, t, false, 0, &r, err, sizeof(err)),
                     -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "api_key_env: environment variable "
                                      "TIER_UNSET is not set"));
    config_free(cfg);
    t = tier(TIER(",\"api_key_env\":\"TIER_UNSET\""), &cfg);
    ck_assert_int_eq(http_tier_request(req, t, false, 0, &r, err, sizeof(err)),
                     0);
    ck_assert_ptr_null(http_request_header(&r, "Authorization"));
    http_request_cleanup(&r);
    config_free(cfg);
    cJSON_Delete(req);
}
END_TEST

START_TEST(test_control_characters_in_env_values_refused)
{
    struct config *cfg = NULL;
    cJSON *req = cJSON_Parse("{\"messages\":[]}");
    struct http_request r = {0};
    char err[256];
    const struct config_tier *t =
        tier(TIER(",\"query\":{\"v\":\"env:TIER_TITLE\"},\"headers\":{\"X-T\":"
                  "\"env:TIER_TITLE\"}"),
             &cfg);

    setenv("TIER_TITLE", "evil\r\nX-Injected: 1", 1);
    ck_assert_int_eq(http_tier_request(req, t, false, 0, &r, err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "TIER_TITLE holds control characters"));
    ck_assert_ptr_null(strstr(err, "evil"));
    ck_assert_ptr_null(r.url);
    config_free(cfg);
    cJSON_Delete(req);
}
END_TEST

START_TEST(test_auth_none_sends_no_key)
{
    struct config *cfg = NULL;
    cJSON *req = cJSON_Parse("{\"messages\":[]}");
    struct http_request r;
    char err[256];
    const struct config_tier *t =
        tier(TIER(",\"auth\":\"none\",\"headers\":{\"Authorization\":"
                  "\"Basic env:TIER_KEY\"}"),
             &cfg);

    /* With auth none an Authorization header of the tier's own is fine;
     * "env:" only counts at the start of a value. */
    ck_assert_int_eq(http_tier_request(req, t, false, 0, &r, err, sizeof(err)),
                     0);
    ck_assert_str_eq(http_request_header(&r, "Authorization"),
                     "Basic env:TIER_KEY");
    http_request_cleanup(&r);
    config_free(cfg);
    cJSON_Delete(req);
}
END_TEST

/* Whether a chat request streams is its caller's word (the worker weighs
 * the tier's "stream" with the step's), not the tier's: the body, URL and
 * Accept of each api follow it, and the request carries it. */
static const enum config_api stream_apis[] = {
    CONFIG_API_OPENAI, CONFIG_API_ANTHROPIC, CONFIG_API_GEMINI};

START_TEST(test_stream_is_the_callers_word)
{
    static const char *const names[] = {"openai", "anthropic", "gemini"};
    enum config_api api = stream_apis[_i / 4];
    bool tier_streams = (_i & 2) != 0, stream = (_i & 1) != 0;
    struct config *cfg = NULL;
    cJSON *req = cJSON_Parse("{\"messages\":[{\"role\":\"user\","
                             "\"content\":\"hi\"}],\"max_tokens\":9}");
    cJSON *body;
    struct http_request r;
    char text[256], err[256];

    snprintf(text, sizeof(text), TIER(",\"api\":\"%s\",\"stream\":%s"),
             names[_i / 4], tier_streams ? "true" : "false");
    ck_assert_int_eq(http_tier_request(req, tier(text, &cfg), stream, 0, &r,
                                       err, sizeof(err)),
                     0);
    ck_assert(r.stream == stream);
    ck_assert_str_eq(http_request_header(&r, "Accept"),
                     stream ? "text/event-stream" : "application/json");
    body = cJSON_Parse(r.body);
    if (api == CONFIG_API_GEMINI)
        ck_assert((strstr(r.url, ":streamGenerateContent?alt=sse") != NULL) ==
                  stream);
    else
        ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(body, "stream")) == stream);
    cJSON_Delete(body);
    http_request_cleanup(&r);
    config_free(cfg);
    cJSON_Delete(req);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("http_tier");
    TCase *conf = tcase_create("config"), *build = tcase_create("build");

    tcase_add_loop_test(conf, test_bad_tier_fields_refused_with_path, 0,
                        (int)(sizeof(bad_configs) / sizeof(bad_configs[0])));
    tcase_add_loop_test(conf, test_bad_tier_names_refused, 0,
                        (int)(sizeof(bad_names) / sizeof(bad_names[0])));
    tcase_add_test(conf, test_tier_fields_parsed);
    tcase_add_test(conf, test_tier_name_length_bounded);
    tcase_add_test(build, test_request_carries_headers_query_and_key_header);
    tcase_add_test(build, test_url_keeps_base_query_and_masks_env_values);
    tcase_add_test(build, test_url_masks_credentials_in_base_url);
    tcase_add_test(build, test_unset_env_fails_naming_the_variable);
    tcase_add_test(build, test_control_characters_in_env_values_refused);
    tcase_add_test(build, test_auth_none_sends_no_key);
    tcase_add_loop_test(
        build, test_stream_is_the_callers_word, 0,
        (int)(4 * (sizeof(stream_apis) / sizeof(stream_apis[0]))));
    tcase_add_checked_fixture(conf, setup, NULL);
    tcase_add_checked_fixture(build, setup, NULL);
    tcase_set_timeout(conf, 20);
    tcase_set_timeout(build, 20);
    suite_add_tcase(s, conf);
    suite_add_tcase(s, build);
    return s;
}

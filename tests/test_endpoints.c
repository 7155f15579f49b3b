/* test_endpoints.c: the recipes of docs/endpoints.md, each run through
 * `stepq tiers --check` against a `stepq mock` route that demands what its
 * endpoint demands (path, query, the key's header and the other headers,
 * each with its exact value), and each drifted (key, headers or query
 * removed, path broken) to show that the route tells. A recipe on the page
 * without a row here, or a row without a recipe, fails too.
 *
 * The table below is what each provider wants, written from its own
 * documentation (a native protocol's route speaks it: "api"), apart from the
 * page: a recipe edited into something the endpoint would refuse no longer
 * passes.
 */
#include "tests/support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/file.h"
#include "common/xalloc.h"
#include "tests/support/mockproc.h"

#define MARKER "<!-- recipe: "

/* What one endpoint wants. Every secret holds "Secret", so that one search
 * of the output finds any of them. */
struct recipe {
    const char *name;
    const char *path;    /* the chat completions path it serves */
    const char *env[3];  /* "NAME=VALUE" for the run */
    const char *headers; /* JSON: required headers, exact values */
    const char *query;   /* JSON: required query, or NULL */
};

#define KEY(v)    "sk-" v "-Secret-0123456789abcdef"
#define BEARER(v) "{\"Authorization\": \"Bearer " KEY(v) "\"}"

static const struct recipe recipes[] = {
    {"openai",
     "/v1/chat/completions",
     {"OPENAI_API_KEY=" KEY("oa")},
     BEARER("oa"),
     NULL},
    {"azure",
     "/openai/deployments/gpt-4o-mini/chat/completions",
     {"AZURE_OPENAI_API_KEY=" KEY("az")},
     "{\"api-key\": \"" KEY("az") "\"}",
     "{\"api-version\": \"2024-10-21\"}"},
    {"anthropic",
     "/v1/chat/completions",
     {"ANTHROPIC_API_KEY=" KEY("an")},
     BEARER("an"),
     NULL},
    {"gemini",
     "/v1beta/openai/chat/completions",
     {"GEMINI_API_KEY=" KEY("ge")},
     BEARER("ge"),
     NULL},
    {"anthropic-native",
     "/v1/messages",
     {"ANTHROPIC_API_KEY=" KEY("an")},
     "{\"x-api-key\": \"" KEY("an") "\", \"anthropic-version\": "
                                    "\"2023-06-01\"}",
     NULL},
    {"gemini-native",
     "/v1beta/models/gemini-2.5-flash:generateContent",
     {"GEMINI_API_KEY=" KEY("ge")},
     "{\"x-goog-api-key\": \"" KEY("ge") "\"}",
     NULL},
    {"groq",
     "/openai/v1/chat/completions",
     {"GROQ_API_KEY=" KEY("gq")},
     BEARER("gq"),
     NULL},
    {"openrouter",
     "/api/v1/chat/completions",
     {"OPENROUTER_API_KEY=" KEY("or")},
     "{\"Authorization\": \"Bearer " KEY(
         "or") "\", \"HTTP-Referer\": "
               "\"https://github.com/your-org/nightly\", \"X-Title\": "
               "\"nightly-jobs\"}",
     NULL},
    {"mistral",
     "/v1/chat/completions",
     {"MISTRAL_API_KEY=" KEY("mi")},
     BEARER("mi"),
     NULL},
    {"deepseek",
     "/chat/completions",
     {"DEEPSEEK_API_KEY=" KEY("ds")},
     BEARER("ds"),
     NULL},
    {"ollama", "/v1/chat/completions", {NULL}, "{}", NULL},
    {"llamacpp",
     "/v1/chat/completions",
     {"LLAMA_API_KEY=" KEY("lc")},
     BEARER("lc"),
     NULL},
    {"vllm",
     "/v1/chat/completions",
     {"VLLM_API_KEY=" KEY("vl")},
     BEARER("vl"),
     NULL},
    {"lmstudio", "/v1/chat/completions", {NULL}, "{}", NULL},
    {"litellm",
     "/v1/chat/completions",
     {"LITELLM_API_KEY=" KEY("ll")},
     BEARER("ll"),
     NULL},
    {"portkey",
     "/v1/chat/completions",
     {"PORTKEY_API_KEY=" KEY("pk")},
     "{\"x-portkey-api-key\": \"" KEY(
         "pk") "\", \"x-portkey-config\": "
               "\"pc-nightly-0a1b2c\", \"x-portkey-forward-headers\": "
               "\"idempotency-key\"}",
     NULL},
    {"portkey-local",
     "/v1/chat/completions",
     {"OPENAI_API_KEY=" KEY("pl")},
     "{\"Authorization\": \"Bearer " KEY(
         "pl") "\", \"x-portkey-provider\": "
               "\"openai\", \"x-portkey-custom-host\": "
               "\"https://api.openai.com/v1\", "
               "\"x-portkey-forward-headers\": \"idempotency-key\"}",
     NULL},
    {"cloudflare",
     "/v1/ACCOUNT_ID/GATEWAY_ID/openai/chat/completions",
     {"OPENAI_API_KEY=" KEY("cf"), "CF_AIG_AUTHORIZATION=Bearer " KEY("aig")},
     "{\"Authorization\": \"Bearer " KEY("cf") "\", \"cf-aig-authorization\": "
                                               "\"Bearer " KEY("aig") "\"}",
     NULL},
};
#define NRECIPES ((int)(sizeof(recipes) / sizeof(recipes[0])))

/* ---- the page ---------------------------------------------------------- */

static char *
read_page(void)
{
    char *path = source_path("docs/endpoints.md"), *text = NULL;
    size_t len = 0;

    ck_assert_int_eq(file_read_all(path, 1 << 20, &text, &len), 0);
    free(path);
    return text;
}

/* recipe_json returns the tier object of the page's recipe name (the JSON
 * block after its marker). Caller deletes. Fails the test without one. */
static cJSON *
recipe_json(const char *page, const char *name)
{
    char marker[128];
    const char *p, *start, *end;
    cJSON *j;

    snprintf(marker, sizeof(marker), MARKER "%s -->", name);
    p = strstr(page, marker);
    ck_assert_msg(p != NULL, "docs/endpoints.md has no recipe %s", name);
    start = strstr(p, "```json\n");
    ck_assert_ptr_nonnull(start);
    start += 8;
    end = strstr(start, "```");
    ck_assert_ptr_nonnull(end);
    j = cJSON_ParseWithLength(start, (size_t)(end - start));
    ck_assert_msg(cJSON_IsObject(j), "recipe %s is not a JSON object", name);
    return j;
}

/* to_mock points base_url's scheme and host at the mock, keeping its path
 * and query. */
static void
to_mock(cJSON *tier, int port)
{
    const char *url =
        cJSON_GetStringValue(cJSON_GetObjectItem(tier, "base_url"));
    const char *rest;
    char buf[1024];

    ck_assert_ptr_nonnull(url);
    rest = strstr(url, "://");
    ck_assert_ptr_nonnull(rest);
    rest += 3;
    rest += strcspn(rest, "/?");
    snprintf(buf, sizeof(buf), "http://127.0.0.1:%d%s", port, rest);
    cJSON_ReplaceItemInObject(tier, "base_url", cJSON_CreateString(buf));
}

/* ---- a run ------------------------------------------------------------- */

static void
set_env(const struct recipe *r)
{
    for (int i = 0; i < NRECIPES; i++) {
        for (int k = 0; k < 3 && recipes[i].env[k] != NULL; k++) {
            char name[64];
            snprintf(name, sizeof(name), "%.*s",
                     (int)strcspn(recipes[i].env[k], "="), recipes[i].env[k]);
            unsetenv(name);
        }
    }
    for (int k = 0; k < 3 && r->env[k] != NULL; k++) {
        char name[64];
        size_t n = strcspn(r->env[k], "=");
        snprintf(name, sizeof(name), "%.*s", (int)n, r->env[k]);
        ck_assert_int_eq(setenv(name, r->env[k] + n + 1, 1), 0);
    }
}

/* start_route starts the mock with one exact route that demands r's path,
 * headers and query, behind a catch-all that answers 404; the route speaks
 * the api of the recipe's tier. */
static int
start_route(const struct recipe *r, const cJSON *tier)
{
    const char *api = cJSON_GetStringValue(cJSON_GetObjectItem(tier, "api"));
    char script[2048];

    snprintf(script, sizeof(script),
             "{\"answers\": [{\"status\": 404}], \"loop\": true, \"routes\": "
             "[{\"path\": \"%s\", \"exact\": true, \"api\": \"%s\","
             " \"require_headers\": %s%s%s}]}",
             r->path, api ? api : "openai", r->headers,
             r->query ? ", \"require_query\": " : "", r->query ? r->query : "");
    return mockproc_fixture_start(script);
}

/* check writes a config holding tier and runs `tiers ARGS --json` on it;
 * returns the exit code, with the first result's field in *out (caller
 * frees, NULL when absent) and the output in *res. */
static int
check(const cJSON *tier, const char *args, const char *field, char **out,
      struct run_result *res)
{
    cJSON *cfg = cJSON_CreateObject(),
          *arr = cJSON_AddArrayToObject(cfg, "tiers");
    char *text, *path;
    cJSON *j;
    int rc;

    cJSON_AddItemToArray(arr, cJSON_Duplicate(tier, true));
    text = cJSON_Print(cfg);
    path = tmpdir_write(mockproc_dir, "stepq.json", text, strlen(text));
    free(text);
    cJSON_Delete(cfg);
    rc = RUN(res, NULL, "--config", path, "tiers", args, "--json");
    free(path);
    j = cJSON_Parse(res->out);
    *out = NULL;
    if (cJSON_IsArray(j) &&
        cJSON_IsString(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), field)))
        *out = xstrdup(
            cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), field)->valuestring);
    cJSON_Delete(j);
    return rc;
}

/* expect runs --check on tier and asserts its exit code and result, and
 * that no secret reached stdout or stderr. */
static void
expect(const char *name, const char *drift, const cJSON *tier, int code,
       const char *want)
{
    struct run_result res;
    char *result = NULL;
    int rc = check(tier, "--check", "result", &result, &res);

    ck_assert_msg(rc == code && result != NULL && strcmp(result, want) == 0,
                  "%s (%s): exit %d, result %s, want %d %s; out %s err %s",
                  name, drift, rc, result ? result : "none", code, want,
                  res.out, res.err);
    ck_assert_msg(strstr(res.out, "Secret") == NULL &&
                      strstr(res.err, "Secret") == NULL,
                  "%s: a key was printed", name);
    free(result);
    run_result_free(&res);
}

/* no_warnings asserts that tiers --check has no warning for a recipe as
 * written (a gateway's recipe forwards Idempotency-Key, asks no retry). */
static void
no_warnings(const char *name, const cJSON *tier)
{
    struct run_result res;
    char *unused = NULL;
    cJSON *j, *w;

    check(tier, "--dry-run", "tier", &unused, &res);
    j = cJSON_Parse(res.out);
    w = cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "warnings");
    ck_assert_msg(cJSON_IsArray(w) && cJSON_GetArraySize(w) == 0,
                  "%s: warnings: %s", name, res.out);
    cJSON_Delete(j);
    free(unused);
    run_result_free(&res);
}

START_TEST(test_recipe_reaches_its_endpoint)
{
    const struct recipe *r = &recipes[_i];
    char *page = read_page();
    cJSON *tier = recipe_json(page, r->name);
    int port;

    set_env(r);
    port = start_route(r, tier);
    to_mock(tier, port);
    expect(r->name, "as written", tier, 0, "reachable");
    no_warnings(r->name, tier);
    cJSON_Delete(tier);
    free(page);
}
END_TEST

START_TEST(test_drifted_recipe_fails)
{
    const struct recipe *r = &recipes[_i];
    char *page = read_page(), buf[1024];
    cJSON *tier = recipe_json(page, r->name), *d;
    int port, drifts = 0;

    set_env(r);
    port = start_route(r, tier);
    to_mock(tier, port);
    if (strcmp(r->headers, "{}") != 0 &&
        cJSON_HasObjectItem(tier, "api_key_env")) {
        d = cJSON_Duplicate(tier, true);
        cJSON_DeleteItemFromObject(d, "api_key_env");
        cJSON_DeleteItemFromObject(d, "auth");
        expect(r->name, "no key", d, 1, "auth_failed");
        cJSON_Delete(d);
        drifts++;
    }
    if (cJSON_HasObjectItem(tier, "headers")) {
        d = cJSON_Duplicate(tier, true);
        cJSON_DeleteItemFromObject(d, "headers");
        expect(r->name, "no headers", d, 1, "auth_failed");
        cJSON_Delete(d);
        drifts++;
    }
    if (cJSON_HasObjectItem(tier, "query")) {
        d = cJSON_Duplicate(tier, true);
        cJSON_DeleteItemFromObject(d, "query");
        expect(r->name, "no query", d, 1, "wrong_path");
        cJSON_Delete(d);
        drifts++;
    }
    d = cJSON_Duplicate(tier, true);
    snprintf(buf, sizeof(buf), "%s/v2",
             cJSON_GetStringValue(cJSON_GetObjectItem(d, "base_url")));
    cJSON_ReplaceItemInObject(d, "base_url", cJSON_CreateString(buf));
    expect(r->name, "wrong path", d, 1, "wrong_path");
    cJSON_Delete(d);
    /* An endpoint that wants a header is drifted by removing it. */
    ck_assert(strcmp(r->headers, "{}") == 0 || drifts > 0);
    cJSON_Delete(tier);
    free(page);
}
END_TEST

START_TEST(test_every_recipe_on_the_page_is_tested)
{
    char *page = read_page();
    int n = 0;

    for (const char *p = strstr(page, MARKER); p != NULL;
         p = strstr(p + 1, MARKER)) {
        const char *name = p + strlen(MARKER);
        size_t len = strcspn(name, " ");
        bool found = false;
        for (int i = 0; i < NRECIPES; i++)
            found = found || (strlen(recipes[i].name) == len &&
                              strncmp(recipes[i].name, name, len) == 0);
        ck_assert_msg(found, "recipe %.*s has no row in test_endpoints.c",
                      (int)len, name);
        n++;
    }
    ck_assert_int_eq(n, NRECIPES);
    free(page);
}
END_TEST

START_TEST(test_dry_run_masks_every_secret)
{
    const struct recipe *r = &recipes[_i];
    char *page = read_page(), *url = NULL;
    cJSON *tier = recipe_json(page, r->name);
    struct run_result res;

    set_env(r);
    ck_assert_int_eq(check(tier, "--dry-run", "url", &url, &res), 0);
    ck_assert_ptr_null(strstr(res.out, "Secret"));
    ck_assert_ptr_nonnull(strstr(url, r->path));
    free(url);
    run_result_free(&res);
    cJSON_Delete(tier);
    free(page);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("endpoints");
    TCase *tc = tcase_create("recipes");

    tcase_add_checked_fixture(tc, mockproc_setup, mockproc_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_every_recipe_on_the_page_is_tested);
    tcase_add_loop_test(tc, test_recipe_reaches_its_endpoint, 0, NRECIPES);
    tcase_add_loop_test(tc, test_drifted_recipe_fails, 0, NRECIPES);
    tcase_add_loop_test(tc, test_dry_run_masks_every_secret, 0, NRECIPES);
    suite_add_tcase(s, tc);
    return s;
}

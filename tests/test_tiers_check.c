/* test_tiers_check.c: `stepq tiers --check` and `--dry-run` against the
 * mock (a peer that hangs, an answer that echoes the key, an env: variable
 * that is unset, a tier behind a gateway warned of, bad flags and bad
 * tiers), and a tier's headers, query and auth header through the real
 * worker: the job succeeds on a route that demands them, and fails loud,
 * sending nothing, when a variable is unset.
 */
#include "tests/support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/xalloc.h"
#include "tests/support/mockproc.h"

#define KEY     "sk-test-Secret-0123456789abcdef"
#define WRONG   "sk-wrong-Secret-0123456789abcdef"
#define AZ_PATH "/openai/deployments/d/chat/completions"
#define SCRIPT                                                                 \
    "{\"answers\": [{\"status\": 404}], \"loop\": true, \"routes\": ["         \
    "{\"path\": \"" AZ_PATH "\", \"exact\": true,"                             \
    " \"require_headers\": {\"api-key\": \"" KEY                               \
    "\", \"x-title\": \"nightly\"},"                                           \
    " \"require_query\": {\"api-version\": \"2024-10-21\"}},"                  \
    "{\"path\": \"/hang\", \"answers\": [{\"fault\": \"hang\"}], \"loop\": "   \
    "true},"                                                                   \
    "{\"path\": \"/drop\", \"answers\": [{\"fault\": \"close_mid_body\"}]},"   \
    "{\"path\": \"/echo\", \"require_headers\": {\"authorization\": "          \
    "\"Bearer " KEY                                                            \
    "\"}, \"unauthorized\": {\"body\": {\"error\": {\"message\": "             \
    "\"Incorrect API key provided: " WRONG "\", \"code\": "                    \
    "\"invalid_api_key\"}}}}]}"
#define JOB                                                                    \
    "{\"name\":\"n\",\"steps\":[{\"name\":\"a\",\"request\":{\"messages\":"    \
    "[{\"role\":\"user\",\"content\":\"hi\"}]}}]}"

static int port;

static void
setup(void)
{
    mockproc_setup();
    setenv("AZ_KEY", KEY, 1);
    setenv("TITLE", "nightly", 1);
    unsetenv("UNSET_VAR");
    port = mockproc_fixture_start(SCRIPT);
}

/* config writes a config of one tier: base is the path after the mock's
 * host, extra more fields. Returns its path (caller frees). */
static char *
config(const char *name, const char *base, const char *extra)
{
    char text[2048];

    snprintf(text, sizeof(text),
             "{\"tiers\": [{\"name\": \"%s\", \"base_url\": "
             "\"http://127.0.0.1:%d%s\", \"model\": \"m\"%s}]}",
             name, port, base, extra);
    return tmpdir_write(mockproc_dir, "stepq.json", text, strlen(text));
}

#define AZURE                                                                  \
    ", \"api_key_env\": \"AZ_KEY\", \"auth\": \"header:api-key\", "            \
    "\"headers\": {\"X-Title\": \"env:TITLE\"}, \"query\": "                   \
    "{\"api-version\": \"2024-10-21\"}"

/* result runs `tiers --check --json` and returns the first tier's result
 * (caller frees) with the exit code in *rc. */
static char *
result(const char *cfg, int *rc, struct run_result *res)
{
    cJSON *j, *r;
    char *out = NULL;

    *rc = RUN(res, NULL, "--config", cfg, "tiers", "--check", "--json");
    j = cJSON_Parse(res->out);
    r = cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "result");
    if (cJSON_IsString(r))
        out = xstrdup(r->valuestring);
    cJSON_Delete(j);
    ck_assert_ptr_null(strstr(res->out, "Secret"));
    ck_assert_ptr_null(strstr(res->err, "Secret"));
    return out;
}

START_TEST(test_check_honours_the_tier_timeout)
{
    char *cfg = config("slow", "/hang", ", \"timeout_s\": 0.3"), *r;
    struct run_result res;
    int rc;

    r = result(cfg, &rc, &res);
    ck_assert_int_eq(rc, 1);
    ck_assert_str_eq(r, "timeout");
    free(r);
    run_result_free(&res);
    free(cfg);
}
END_TEST

START_TEST(test_check_reports_a_dropped_connection)
{
    char *cfg = config("drop", "/drop", ""), *r;
    struct run_result res;
    int rc;

    r = result(cfg, &rc, &res);
    ck_assert_int_eq(rc, 1);
    ck_assert_str_eq(r, "unreachable");
    free(r);
    run_result_free(&res);
    free(cfg);
}
END_TEST

START_TEST(test_check_scrubs_a_key_the_answer_echoes)
{
    char *cfg = config("echo", "/echo", ", \"api_key_env\": \"AZ_KEY\""), *r;
    struct run_result res;
    int rc;

    setenv("AZ_KEY", WRONG, 1);
    r = result(cfg, &rc, &res);
    ck_assert_int_eq(rc, 1);
    ck_assert_str_eq(r, "auth_failed");
    ck_assert_ptr_nonnull(strstr(res.out, "Incorrect API key provided: ***"));
    free(r);
    run_result_free(&res);
    /* The text output too. */
    ck_assert_int_eq(RUN(&res, NULL, "--config", cfg, "tiers", "--check"), 1);
    ck_assert_ptr_null(strstr(res.out, "Secret"));
    ck_assert_ptr_nonnull(strstr(res.out, "0 of 1 tiers reachable"));
    run_result_free(&res);
    free(cfg);
}
END_TEST

START_TEST(test_unset_variable_is_not_sent)
{
    char *cfg =
        config("t", AZ_PATH, ", \"headers\": {\"X-Title\": \"env:UNSET_VAR\"}");
    struct run_result res;
    cJSON *log, *j;
    int rc;

    free(result(cfg, &rc, &res));
    ck_assert_int_eq(rc, 1);
    j = cJSON_Parse(res.out);
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "result")->valuestring,
        "not_sent");
    ck_assert_ptr_nonnull(strstr(res.out, "environment variable UNSET_VAR is "
                                          "not set"));
    cJSON_Delete(j);
    run_result_free(&res);
    log = mockproc_read_log(mockproc_dir, 0);
    ck_assert_int_eq(cJSON_GetArraySize(log), 0);
    cJSON_Delete(log);
    free(cfg);
}
END_TEST

START_TEST(test_check_and_dry_run_text)
{
    char *cfg = config("az", "/openai/deployments/d", AZURE);
    struct run_result res;

    ck_assert_int_eq(RUN(&res, NULL, "--config", cfg, "tiers", "--check"), 0);
    ck_assert_ptr_nonnull(strstr(res.out, "reachable"));
    ck_assert_ptr_nonnull(strstr(res.out, "1 of 1 tiers reachable"));
    run_result_free(&res);
    ck_assert_int_eq(RUN(&res, NULL, "--config", cfg, "tiers", "--dry-run"), 0);
    ck_assert_ptr_nonnull(strstr(res.out, "POST http://127.0.0.1:"));
    ck_assert_ptr_nonnull(strstr(res.out, AZ_PATH "?api-version=2024-10-21\n"));
    ck_assert_ptr_nonnull(strstr(res.out, "api-key: sk-\u2026cdef\n"));
    ck_assert_ptr_nonnull(strstr(res.out, "X-Title: ***\n"));
    ck_assert_ptr_nonnull(strstr(res.out, "\"model\":\"m\""));
    ck_assert_ptr_null(strstr(res.out, "Secret"));
    ck_assert_ptr_null(strstr(res.out, "nightly")); /* an env: value */
    run_result_free(&res);
    free(cfg);
}
END_TEST

/* A tier behind Portkey that does not forward Idempotency-Key is warned of
 * in both outputs, and the warning does not change the exit code. */
START_TEST(test_check_warns_of_a_gateway)
{
    char *cfg = config("pk", "/echo/v1",
                       ", \"api_key_env\": \"AZ_KEY\", \"headers\": "
                       "{\"x-portkey-provider\": \"openai\"}");
    struct run_result res;

    ck_assert_int_eq(RUN(&res, NULL, "--config", cfg, "tiers", "--check"), 0);
    ck_assert_ptr_nonnull(strstr(res.out, "1 of 1 tiers reachable"));
    ck_assert_msg(strstr(res.out, "\n    warning: tier pk: Portkey drops "
                                  "Idempotency-Key") != NULL,
                  "%s", res.out);
    run_result_free(&res);
    ck_assert_int_eq(RUN(&res, NULL, "--config", cfg, "tiers", "--dry-run"), 0);
    ck_assert_msg(strstr(res.out, "\n# warning: tier pk: ") != NULL, "%s",
                  res.out);
    ck_assert_ptr_nonnull(strstr(res.out, "x-portkey-forward-headers"));
    run_result_free(&res);
    free(cfg);
}
END_TEST

struct bad_use {
    const char *extra; /* tier fields */
    const char *args[4];
    int code;
    const char *want; /* in stderr */
};

static const struct bad_use bad_uses[] = {
    {", \"headers\": {\"Content-Type\": \"text/plain\"}",
     {"--check"},
     2,
     "tiers[0].headers.Content-Type: Content-Type is set by stepq"},
    {", \"headers\": {\"X-A\": 1}",
     {"--check"},
     2,
     "tiers[0].headers.X-A: must be a string"},
    {", \"headers\": {\"X-A\": \"a\\r\\nX-B: b\"}",
     {"--check"},
     2,
     "tiers[0].headers.X-A: must not hold CR, LF"},
    {", \"auth\": \"header:api-key\"",
     {"--check"},
     2,
     "tiers[0].auth: header:api-key needs api_key_env"},
    {"", {"--check", "--tier", "nope"}, 3, "no tier nope in the config"},
    {"", {"--tier", "t"}, 2, "--tier and --request go with --check"},
    {"", {"--check", "--request", "/nonexistent/r.json"}, 2, "--request"},
};

START_TEST(test_bad_use_exit_codes)
{
    const struct bad_use *b = &bad_uses[_i];
    char *cfg = config("t", "/v1", b->extra);
    struct run_result res;
    const char *argv[10] = {"--config", cfg, "tiers"};
    int n = 3;

    for (int i = 0; i < 4 && b->args[i] != NULL; i++)
        argv[n++] = b->args[i];
    argv[n] = NULL;
    ck_assert_int_eq(run_cmd(&res, NULL, argv), b->code);
    ck_assert_msg(strstr(res.err, b->want) != NULL, "want \"%s\" in \"%s\"",
                  b->want, res.err);
    run_result_free(&res);
    free(cfg);
}
END_TEST

/* ---- through the worker ------------------------------------------------ */

static char *
run_job(const char *cfg, const char *db)
{
    struct run_result res;
    cJSON *j;
    char *state;

    ck_assert_int_eq(RUN(&res, NULL, "--db", db, "init"), 0);
    run_result_free(&res);
    ck_assert_int_eq(RUN(&res, JOB, "--config", cfg, "--db", db, "enqueue"), 0);
    run_result_free(&res);
    ck_assert_int_eq(
        RUN(&res, NULL, "--config", cfg, "--db", db, "work", "--drain"), 0);
    ck_assert_ptr_null(strstr(res.err, "Secret"));
    run_result_free(&res);
    ck_assert_int_eq(RUN(&res, NULL, "--db", db, "jobs", "show", "1", "--json"),
                     0);
    j = cJSON_Parse(res.out);
    state = xstrdup(cJSON_GetObjectItem(j, "state")->valuestring);
    if (strcmp(state, "failed") == 0)
        ck_assert_ptr_nonnull(
            strstr(cJSON_GetObjectItem(j, "error")->valuestring,
                   "tier az: headers.X-Title: environment variable TITLE is "
                   "not set"));
    cJSON_Delete(j);
    run_result_free(&res);
    return state;
}

START_TEST(test_worker_sends_headers_query_and_key_header)
{
    char *cfg = config("az", "/openai/deployments/d", AZURE);
    char *db = tmpdir_join(mockproc_dir, "q.db"), *state = run_job(cfg, db);
    cJSON *log = mockproc_read_log(mockproc_dir, 1);

    ck_assert_str_eq(state, "succeeded");
    ck_assert_int_eq(cJSON_GetArraySize(log), 1);
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetArrayItem(log, 0), "kind")->valuestring,
        "chat");
    cJSON_Delete(log);
    free(state);
    free(db);
    free(cfg);
}
END_TEST

START_TEST(test_worker_fails_loud_on_unset_variable)
{
    char *cfg = config("az", "/openai/deployments/d", AZURE), *db, *state;
    cJSON *log;

    unsetenv("TITLE");
    db = tmpdir_join(mockproc_dir, "q.db");
    state = run_job(cfg, db);
    ck_assert_str_eq(state, "failed");
    log = mockproc_read_log(mockproc_dir, 0);
    ck_assert_int_eq(cJSON_GetArraySize(log), 0); /* nothing was sent */
    cJSON_Delete(log);
    free(state);
    free(db);
    free(cfg);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("tiers_check");
    TCase *check = tcase_create("check"), *work = tcase_create("worker");

    tcase_add_checked_fixture(check, setup, mockproc_teardown);
    tcase_set_timeout(check, 60);
    tcase_add_test(check, test_check_honours_the_tier_timeout);
    tcase_add_test(check, test_check_reports_a_dropped_connection);
    tcase_add_test(check, test_check_scrubs_a_key_the_answer_echoes);
    tcase_add_test(check, test_unset_variable_is_not_sent);
    tcase_add_test(check, test_check_and_dry_run_text);
    tcase_add_test(check, test_check_warns_of_a_gateway);
    tcase_add_loop_test(check, test_bad_use_exit_codes, 0,
                        (int)(sizeof(bad_uses) / sizeof(bad_uses[0])));
    suite_add_tcase(s, check);
    tcase_add_checked_fixture(work, setup, mockproc_teardown);
    tcase_set_timeout(work, 120);
    tcase_add_test(work, test_worker_sends_headers_query_and_key_header);
    tcase_add_test(work, test_worker_fails_loud_on_unset_variable);
    suite_add_tcase(s, work);
    return s;
}

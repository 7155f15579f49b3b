/* test_worker_secrets.c: a secret an endpoint echoes stays out of stepq.
 * The real `stepq work` against the real `stepq mock`, whose answers
 * quote the tier's API key (a 401 "Incorrect API key provided: ...") and
 * an http step's env: header value (a 500 "bad token ..."). Neither may
 * reach the database file, the worker's log, or any --json output; the
 * place where it stood says "***". */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "tests/support/e2e.h"

#define KEY   "sk-test-secret-123" /* FREE_KEY, set by e2e_setup */
#define TOKEN "htok-SECRET-9876"

#define CHAT_JOB                                                               \
    "{\"name\":\"c\",\"steps\":[{\"name\":\"ask\",\"tiers\":[\"free\"],"       \
    "\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}}]}"
#define HOOK_JOB                                                               \
    "{\"name\":\"h\",\"steps\":[{\"name\":\"post\",\"kind\":\"http\","         \
    "\"http\":{\"method\":\"POST\",\"url\":\"http://127.0.0.1:%d/hook\","      \
    "\"headers\":{\"Authorization\":\"env:HOOK_TOKEN\"},\"body\":{}}}]}"

/* Whether the len bytes at text (which may hold NULs) hold s. */
static bool
holds(const char *text, size_t len, const char *s)
{
    size_t k = strlen(s);

    for (size_t i = 0; i + k <= len; i++) {
        if (memcmp(text + i, s, k) == 0)
            return true;
    }
    return false;
}

/* Fails the test when text (what, for the message) holds either secret. */
static void
expect_clean(const char *what, const char *text, size_t len)
{
    ck_assert_msg(!holds(text, len, KEY) && !holds(text, len, TOKEN),
                  "%s holds a secret:\n%.*s", what,
                  (int)(len < 4000 ? len : 4000), text);
}

static void
expect_file_clean(const char *path)
{
    char *text = NULL;
    size_t len = 0;

    if (file_read_all(path, 1 << 28, &text, &len) != 0)
        return; /* the log file is gone once folded in */
    expect_clean(path, text, len);
    free(text);
}

static void
expect_output_clean(const char *const *args)
{
    struct run_result r;

    ck_assert_int_eq(run_args(&r, args), 0);
    expect_clean(args[0], r.out, strlen(r.out));
    expect_clean(args[0], r.err, strlen(r.err));
    run_result_free(&r);
}

/* Job id's first attempt kept its answer with want in it. */
static void
expect_masked(int id, const char *want)
{
    cJSON *shown = e2e_show(id);
    const cJSON *h = e2e_hist(shown, 0, 0);

    ck_assert_msg(h != NULL && e2e_str(h, "body") != NULL &&
                      strstr(e2e_str(h, "body"), want) != NULL,
                  "job %d's first attempt: no \"%s\"", id, want);
    cJSON_Delete(shown);
}

START_TEST(test_echoed_secrets_stay_out)
{
    char job[512], *log;

    setenv("HOOK_TOKEN", TOKEN, 1);
    e2e_start("{\"routes\":[{\"path\":\"/free\",\"loop\":true,\"answers\":"
              "[{\"status\":401,\"body\":{\"error\":{\"message\":"
              "\"Incorrect API key provided: " KEY "\",\"code\":"
              "\"invalid_api_key\"}}}]},{\"path\":\"/hook\",\"loop\":true,"
              "\"answers\":[{\"status\":500,\"headers\":{\"x-echo\":\"" TOKEN
              "\"},\"body\":\"bad token " TOKEN " rejected\"}]}]}",
              "");
    e2e_enqueue(CHAT_JOB);
    snprintf(job, sizeof(job), HOOK_JOB, e2e_mock.port);
    e2e_enqueue(job);
    log = e2e_drain();
    expect_clean("the worker's log", log, strlen(log));
    free(log);
    /* The answers did quote them: "***" stands where they were. */
    expect_masked(1, "provided: ***");
    expect_masked(2, "bad token ***");
    expect_output_clean((const char *[]){"jobs", "show", "1", "--json", NULL});
    expect_output_clean((const char *[]){"jobs", "show", "2", "--json", NULL});
    expect_output_clean(
        (const char *[]){"park", "list", "--all", "--json", NULL});
    expect_output_clean((const char *[]){"jobs", "list", "--json", NULL});
    expect_file_clean("stepq.db");
    expect_file_clean("stepq.db-wal");
}
END_TEST

/* A one-step chat job to tier free saying content, its output checked for
 * the key "summary". */
#define ASK_JOB(content)                                                       \
    "{\"name\":\"a\",\"steps\":[{\"name\":\"ask\",\"tiers\":[\"free\"],"       \
    "\"expect_json\":[\"summary\"],\"request\":{\"messages\":[{\"role\":"      \
    "\"user\",\"content\":\"" content "\"}]}}]}"

/* Job id succeeded; returns its first step's output (owned) and whether
 * its last attempt says it was masked. */
static char *
succeeded_output(int id, bool *masked)
{
    cJSON *shown = e2e_show(id);
    const cJSON *st = e2e_step_of(shown, 0);
    const cJSON *hist = cJSON_GetObjectItemCaseSensitive(st, "history");
    const cJSON *last = cJSON_GetArrayItem(hist, cJSON_GetArraySize(hist) - 1);
    char *out;

    ck_assert_str_eq(e2e_str(shown, "state"), "succeeded");
    ck_assert_ptr_nonnull(e2e_str(st, "output"));
    out = strdup(e2e_str(st, "output"));
    *masked = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(last, "masked"));
    cJSON_Delete(shown);
    return out;
}

/* Through a gateway's headers (Portkey's names hold "key", and their
 * values are common words), the answer is kept as it came: the provider's
 * name and "false" stay in the output, which stays JSON. */
START_TEST(test_answer_kept_as_it_came)
{
    char *out;
    bool masked = true;

    e2e_start("{}", "");
    e2e_config(1, "\"api_key_env\": \"FREE_KEY\", \"headers\": "
                  "{\"x-portkey-provider\": \"openai\","
                  " \"x-portkey-retry\": \"false\"}");
    e2e_enqueue(ASK_JOB("tell me about openai and whether false is true"));
    free(e2e_drain());
    out = succeeded_output(1, &masked);
    ck_assert_str_eq(out, "{\"summary\":\"mock reply to: tell me about "
                          "openai and whether false is true\"}");
    ck_assert(!masked);
    free(out);
}
END_TEST

/* A key the endpoint echoed into the completion is kept as "***", and the
 * attempt says so; the output's check read the answer as it came, so a
 * key that stood where masking leaves no JSON still passes. */
START_TEST(test_secret_in_a_completion_masked)
{
    char *out, *log;
    bool masked = false;

    setenv("FREE_KEY", "98765432", 1);
    e2e_start("{\"routes\":[{\"path\":\"/free\",\"content\":"
              "\"{\\\"summary\\\": \\\"your key\\\", \\\"n\\\": 98765432}\"}]}",
              "");
    e2e_enqueue(ASK_JOB("hi"));
    log = e2e_drain();
    expect_file_clean("stepq.db");
    ck_assert_ptr_null(strstr(log, "98765432"));
    free(log);
    out = succeeded_output(1, &masked);
    ck_assert_str_eq(out, "{\"summary\": \"your key\", \"n\": ***}");
    ck_assert(masked);
    free(out);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("worker_secrets");
    TCase *tc = tcase_create("secrets");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_echoed_secrets_stay_out);
    tcase_add_test(tc, test_answer_kept_as_it_came);
    tcase_add_test(tc, test_secret_in_a_completion_masked);
    suite_add_tcase(s, tc);
    return s;
}

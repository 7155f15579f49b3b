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

Suite *
test_suite(void)
{
    Suite *s = suite_create("worker_secrets");
    TCase *tc = tcase_create("secrets");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_echoed_secrets_stay_out);
    suite_add_tcase(s, tc);
    return s;
}

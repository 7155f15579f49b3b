/* test_agent_trim.c: a model turn of the tool loop answered with a
 * context overflow (issue 41), through the real CLI, the real worker and
 * the mock's context_tokens over loopback: the oldest tool results are
 * trimmed once and the turn asked again; a second overflow fails the
 * step saying so; a worker that resumes the loop sends the conversation
 * trimmed as the first did.
 */
#include "tests/support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tests/support/e2e.h"

#define RESULT_BYTES 4000
/* A prompt of one tool result passes, one of two overflows. */
#define CONTEXT_TOKENS 1700

#define CALL(name, args) "{\"name\": \"" name "\", \"arguments\": " args "}"
#define FETCH            "[" CALL("fetch_log", "{}") "]"

/* Starts the mock: /big answers every request with RESULT_BYTES of log,
 * /free is a model that calls the tools of turns (JSON array text), then
 * answers with the results it received, and overflows above
 * CONTEXT_TOKENS. */
static void
start(const char *turns)
{
    size_t n = RESULT_BYTES + strlen(turns) + 512;
    char *script = malloc(n), *big = malloc(RESULT_BYTES + 1);

    memset(big, 'x', RESULT_BYTES);
    big[RESULT_BYTES] = '\0';
    snprintf(script, n,
             "{\"routes\": [{\"path\": \"/big\", \"loop\": true, \"answers\":"
             " [{\"body\": \"%s\"}]}, {\"path\": \"/free\","
             " \"echo_tool_results\": true, \"context_tokens\": %d,"
             " \"tool_turns\": %s}]}",
             big, CONTEXT_TOKENS, turns);
    e2e_start(script, "");
    free(script);
    free(big);
}

/* Enqueues the agent job: tools fetch_log (GET /big) and post_comment
 * (needs approval), and a user message of user_bytes. */
static void
enqueue(int user_bytes)
{
    char *job = malloc((size_t)user_bytes + 2048),
         *user = malloc((size_t)user_bytes + 1);

    memset(user, 'u', (size_t)user_bytes);
    user[user_bytes] = '\0';
    sprintf(job,
            "{\"name\": \"j\", \"steps\": [{\"name\": \"a\", \"tools\": ["
            "{\"name\": \"fetch_log\", \"parameters\": {\"type\": \"object\"},"
            " \"action\": {\"http\": {\"method\": \"GET\", \"url\":"
            " \"http://127.0.0.1:%d/big\"}}},"
            " {\"name\": \"post_comment\", \"parameters\": {\"type\":"
            " \"object\"}, \"needs_approval\": \"always\", \"side_effects\":"
            " true, \"action\": {\"http\": {\"method\": \"POST\", \"url\":"
            " \"http://127.0.0.1:%d/comments\"}}}],"
            " \"request\": {\"messages\": [{\"role\": \"user\","
            " \"content\": \"triage %s\"}]}}]}",
            e2e_mock.port, e2e_mock.port, user);
    e2e_enqueue(job);
    free(job);
    free(user);
}

/* The messages of the chat request i to /free (cJSON_Delete it). */
static cJSON *
turn_messages(int i)
{
    cJSON *log = e2e_mock_log(), *out = NULL;
    const cJSON *req;
    int k = 0;

    cJSON_ArrayForEach(req, log)
    {
        if (strncmp(e2e_str(req, "path"), "/free", 5) != 0 || k++ != i)
            continue;
        cJSON *body = e2e_body_of(req);
        out = cJSON_DetachItemFromObject(body, "messages");
        cJSON_Delete(body);
    }
    cJSON_Delete(log);
    ck_assert_msg(out != NULL, "no chat request %d", i);
    return out;
}

/* Checks the tool messages of msgs: n of them, the first trimmed ones
 * holding the marker, the next whole ones whole, and every one answering
 * a call of an assistant message before it. */
static void
expect_tools(const cJSON *msgs, int n, int trimmed, int whole)
{
    const cJSON *m, *tc;
    char ids[16][64];
    int k = 0, nids = 0;

    cJSON_ArrayForEach(m, msgs)
    {
        cJSON_ArrayForEach(tc, cJSON_GetObjectItem(m, "tool_calls"))
        {
            snprintf(ids[nids++ % 16], 64, "%s", e2e_str(tc, "id"));
        }
        if (strcmp(e2e_str(m, "role"), "tool") != 0)
            continue;
        const char *c = e2e_str(m, "content"), *id = e2e_str(m, "tool_call_id");
        bool paired = false;
        for (int i = 0; i < nids && i < 16; i++)
            paired |= strcmp(ids[i], id) == 0;
        ck_assert_msg(paired, "tool result %s answers no call", id);
        if (k++ < trimmed)
            ck_assert_msg(strstr(c, "4000 bytes of this tool result were "
                                    "trimmed after the model's context "
                                    "overflowed"),
                          "%s", c);
        else if (k <= trimmed + whole)
            ck_assert_int_ge(strlen(c), RESULT_BYTES);
    }
    ck_assert_int_eq(k, n);
}

/* The third turn (two results) overflows: the first result is trimmed,
 * the turn asked again on the same tier, and the job succeeds; the
 * ledger shows the overflow as its own attempt. */
START_TEST(test_overflow_trims_oldest_once)
{
    cJSON *shown, *msgs;
    const char *out;

    start("[" FETCH ", " FETCH "]");
    enqueue(10);
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "succeeded");
    ck_assert_int_eq(e2e_sent_to(NULL, "/free"), 4);
    ck_assert_int_eq(e2e_sent_to(NULL, "/big"), 2);
    msgs = turn_messages(2); /* the one that overflowed: whole */
    expect_tools(msgs, 2, 0, 2);
    cJSON_Delete(msgs);
    msgs = turn_messages(3);
    expect_tools(msgs, 2, 1, 1);
    cJSON_Delete(msgs);
    out = e2e_str(e2e_step_of(shown, 0), "output");
    ck_assert_msg(strstr(out, "were trimmed after the model"), "%s", out);
    /* turn, call, turn, call, the overflow, the last turn */
    e2e_expect_attempt(shown, 4, "truncated", "context_overflow",
                       "backoff_retry");
    cJSON_Delete(shown);
}
END_TEST

/* Still too long after the trim (the turn asked again calls one more
 * tool, whose result overflows again): the step fails, saying that the
 * conversation overflows after the trim; no turn follows. */
START_TEST(test_second_overflow_fails_loud)
{
    cJSON *shown;
    const char *err;

    start("[" FETCH ", " FETCH ", " FETCH "]");
    enqueue(10);
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "failed");
    err = e2e_str(shown, "error");
    ck_assert_msg(strstr(err, "step a: context_overflow: the conversation "
                              "still overflows the model's context after "
                              "its 1 oldest tool results were trimmed") &&
                      strstr(err, "context_length_exceeded"),
                  "%s", err);
    ck_assert_int_eq(e2e_sent_to(NULL, "/free"), 5);
    ck_assert_int_eq(e2e_sent_to(NULL, "/big"), 3);
    cJSON_Delete(shown);
}
END_TEST

/* An overflow before any tool ran has nothing to trim: the step fails at
 * once, saying so. */
START_TEST(test_overflow_without_results_fails)
{
    cJSON *shown;
    const char *err;

    start("[" FETCH "]");
    enqueue(8000);
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "failed");
    err = e2e_str(shown, "error");
    ck_assert_msg(strstr(err, "step a: context_overflow: the model's context "
                              "overflows and there is no tool result to trim"),
                  "%s", err);
    ck_assert_int_eq(e2e_sent_to(NULL, "/free"), 1);
    cJSON_Delete(shown);
}
END_TEST

/* The turn asked again after the trim calls a tool that needs approval:
 * the job parks. The worker that resumes it after the approval reads the
 * overflow from the ledger and sends the conversation trimmed as before
 * (whole, it would overflow again). */
START_TEST(test_trim_survives_resume)
{
    struct run_result r;
    cJSON *shown, *msgs;

    start("[" FETCH ", " FETCH ", [" CALL("post_comment", "{}") "]]");
    enqueue(10);
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "parked");
    cJSON_Delete(shown);
    ck_assert_int_eq(
        RUN_ARGS(&r, "park", "resolve", "1", "--approve", "--by", "ann"), 0);
    run_result_free(&r);
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "succeeded");
    ck_assert_int_eq(e2e_sent_to(NULL, "/free"), 5);
    ck_assert_int_eq(e2e_sent_to(NULL, "/comments"), 1);
    msgs = turn_messages(4);
    expect_tools(msgs, 3, 1, 1);
    cJSON_Delete(msgs);
    cJSON_Delete(shown);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("agent_trim");
    TCase *tc = tcase_create("overflow");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_overflow_trims_oldest_once);
    tcase_add_test(tc, test_second_overflow_fails_loud);
    tcase_add_test(tc, test_overflow_without_results_fails);
    tcase_add_test(tc, test_trim_survives_resume);
    suite_add_tcase(s, tc);
    return s;
}

/* test_worker_budget.c: a step's token budget, spend cap and timeout end
 * to end (docs/reference.md "Job file" as amended 2026-12-01), with the real
 * `stepq mock` and the real binary: token_budget is the size of one request and
 * the yardstick of the 60% rule, max_total_tokens caps the spend over all
 * attempts (held in the database, across crashes), timeout_s bounds one
 * attempt. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/e2e.h"
#include "tests/support/mockproc.h"

/* A step of about 2,770 input tokens asking for 200 output tokens, planned
 * to fit token_budget 4000, its answer truncated; extra is spliced into the
 * step ("" for none). */
static void
enqueue_seed_step(const char *extra)
{
    char big[11200], jobtext[12000];

    memset(big, 'x', 11000);
    big[11000] = '\0';
    snprintf(jobtext, sizeof(jobtext),
             "{\"name\":\"j\",\"steps\":[{\"name\":\"a\",\"token_budget\":"
             "4000,\"degrade\":{\"max_tokens\":100},\"tiers\":[\"free\"],"
             "\"request\":{\"max_tokens\":200,\"messages\":[{\"role\":"
             "\"user\",\"content\":\"%s\"}]}%s}]}",
             big, extra);
    e2e_enqueue(jobtext);
}

/* Issue 12's seed: token_budget is the size of one request, not a cap on
 * spend, so the degraded request is sent although the two requests
 * together pass 4000 tokens. */
START_TEST(test_degraded_request_sent_past_token_budget)
{
    cJSON *job, *log, *b1;

    e2e_start_file("free-truncated-once.json", "");
    enqueue_seed_step("");
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_msg(strcmp(e2e_str(job, "state"), "succeeded") == 0, "%s",
                  e2e_str(job, "error"));
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "decision"),
                     "degrade_then_retry");
    ck_assert_int_gt(
        cJSON_GetObjectItem(e2e_step_of(job, 0), "tokens")->valueint, 4000);
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 2);
    b1 = e2e_sent_body(log, 1);
    ck_assert_int_eq(cJSON_GetObjectItem(b1, "max_tokens")->valueint, 100);
    cJSON_Delete(b1);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

/* A transport error may have been billed for all it asked: the attempt
 * keeps its estimate (with max_tokens 1000, or max_completion_tokens as
 * OpenAI's reasoning models take it), as an attempt in doubt does; it was
 * cut back to the prompt's bytes / 4. */
START_TEST(test_timed_out_attempt_keeps_its_estimate)
{
    static const char *const caps[] = {"max_tokens", "max_completion_tokens"};
    char text[512];
    cJSON *job;
    int tokens;

    e2e_start("{\"answers\":[{\"fault\":\"hang\"}]}", "");
    snprintf(text, sizeof(text),
             "{\"name\":\"n\",\"steps\":[{\"name\":\"a\",\"timeout_s\":1,"
             "\"tiers\":[\"free\"],\"request\":{\"%s\":1000,"
             "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}}]}",
             caps[_i]);
    e2e_enqueue(text);
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    e2e_expect_attempt(job, 0, "timeout", NULL, "backoff_retry");
    tokens = cJSON_GetObjectItem(e2e_step_of(job, 0), "tokens")->valueint;
    ck_assert_msg(tokens >= 1000, "tokens %d", tokens);
    cJSON_Delete(job);
}
END_TEST

/* A request that never reached the endpoint (the connection refused: the
 * mock is gone) cost nothing: the step keeps no tokens of it, where the
 * estimate with max_tokens 1000 was charged for good. */
START_TEST(test_refused_attempt_costs_nothing)
{
    cJSON *job;
    int tokens;

    e2e_start("{}", "");
    ck_assert_int_eq(mockproc_stop(&e2e_mock), 0);
    e2e_enqueue("{\"name\":\"n\",\"steps\":[{\"name\":\"a\",\"max_attempts\":"
                "1,\"tiers\":[\"free\"],\"request\":{\"max_tokens\":1000,"
                "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}}]}");
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "failed");
    tokens = cJSON_GetObjectItem(e2e_step_of(job, 0), "tokens")->valueint;
    ck_assert_msg(tokens == 0, "tokens %d", tokens);
    cJSON_Delete(job);
}
END_TEST

/* Degrading keeps the request valid: a tool result stays with the
 * assistant message that called for it, drop_tools takes
 * parallel_tool_calls too, and a degrade max_tokens above the request's
 * does not raise it. */
START_TEST(test_degrade_keeps_tool_pairs_and_lowers_only)
{
    char big[400], job[2048];
    static const char *const want[] = {"system", "assistant", "tool", "user"};
    cJSON *log, *b1, *msgs;

    memset(big, 'x', 399);
    big[399] = '\0';
    e2e_start("{\"answers\":[{\"fault\":\"truncate\"}]}", "");
    snprintf(job, sizeof(job),
             "{\"name\":\"t\",\"steps\":[{\"name\":\"a\",\"token_budget\":100,"
             "\"tiers\":[\"free\"],\"degrade\":{\"max_tokens\":5000,"
             "\"drop_tools\":true,\"keep_last_messages\":2},\"request\":{"
             "\"max_tokens\":50,\"parallel_tool_calls\":true,\"tools\":[{"
             "\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
             "\"messages\":[{\"role\":\"system\",\"content\":\"s\"},"
             "{\"role\":\"user\",\"content\":\"%s\"},{\"role\":\"assistant\","
             "\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":"
             "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}"
             "]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"r\"},"
             "{\"role\":\"user\",\"content\":\"go\"}]}}]}",
             big);
    e2e_enqueue(job);
    free(e2e_drain());
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 2);
    b1 = e2e_sent_body(log, 1);
    msgs = cJSON_GetObjectItem(b1, "messages");
    ck_assert_int_eq(cJSON_GetArraySize(msgs), 4);
    for (int i = 0; i < 4; i++)
        ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(msgs, i), "role"), want[i]);
    ck_assert_ptr_null(cJSON_GetObjectItem(b1, "tools"));
    ck_assert_ptr_null(cJSON_GetObjectItem(b1, "parallel_tool_calls"));
    ck_assert_int_eq(cJSON_GetObjectItem(b1, "max_tokens")->valueint, 50);
    cJSON_Delete(b1);
    cJSON_Delete(log);
}
END_TEST

/* max_total_tokens caps the step's spend: the degraded request would pass
 * 5000 tokens, so it is not sent and the job fails with budget_spent. */
START_TEST(test_max_total_tokens_stops_the_send)
{
    cJSON *job, *log;

    e2e_start_file("free-truncated-once.json", "");
    enqueue_seed_step(",\"max_total_tokens\":5000");
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "failed");
    ck_assert_msg(strstr(e2e_str(job, "error"), "budget_spent") != NULL, "%s",
                  e2e_str(job, "error"));
    ck_assert_ptr_nonnull(strstr(e2e_str(job, "error"), "max_total_tokens"));
    ck_assert_int_le(
        cJSON_GetObjectItem(e2e_step_of(job, 0), "tokens")->valueint, 5000);
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 1);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

/* Past its deadline a job sends nothing more: one due two hours ago with
 * a minute to run fails at once; one whose first step outlasts the
 * deadline does not send its second. */
START_TEST(test_deadline_passed_sends_nothing_more)
{
    char text[512], at[40];
    cJSON *job, *log;

    e2e_start("{\"latency_ms\":8000}", "");
    clock_format_utc(clock_now_ms() - 7200 * 1000, at, sizeof(at));
    snprintf(text, sizeof(text),
             "{\"name\":\"late\",\"run_at\":\"%s\",\"deadline_s\":60,"
             "\"steps\":[{\"name\":\"a\",\"request\":{\"messages\":[{"
             "\"role\":\"user\",\"content\":\"x\"}]}}]}",
             at);
    e2e_enqueue(text);
    /* 6 s to send the first step (a loaded machine's start-up fits), whose
     * answer takes 8 (its own timeout_s over the tier's 5). */
    e2e_enqueue(
        "{\"name\":\"slow\",\"deadline_s\":6,\"steps\":[{\"name\":"
        "\"a\",\"timeout_s\":20,\"request\":{\"messages\":[{\"role\":\"user\","
        "\"content\":\"x\"}]}},{\"name\":\"b\",\"request\":{"
        "\"messages\":[{\"role\":\"user\",\"content\":\"y\"}]}}]}");
    free(e2e_drain());
    for (int id = 1; id <= 2; id++) {
        job = e2e_show(id);
        ck_assert_str_eq(e2e_str(job, "state"), "failed");
        ck_assert_msg(strstr(e2e_str(job, "error"), "deadline_passed") != NULL,
                      "%s", e2e_str(job, "error"));
        ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "state"),
                         id == 1 ? "failed" : "succeeded");
        if (id == 2)
            ck_assert_str_eq(e2e_str(e2e_step_of(job, 1), "state"), "failed");
        cJSON_Delete(job);
    }
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 1); /* job 2's first step */
    cJSON_Delete(log);
}
END_TEST

/* An error answer was not billed: a 503's 8 KB HTML page adds nothing to
 * the step's tokens (it counted 2,000 and spent max_total_tokens). */
START_TEST(test_error_answer_costs_no_tokens)
{
    char script[9000];
    cJSON *job;
    int tokens;

    snprintf(script, sizeof(script),
             "{\"answers\":[{\"status\":503,\"body\":\"<html>%0*d</html>\"}]}",
             8000, 0);
    e2e_start(script, "");
    e2e_enqueue("{\"name\":\"n\",\"steps\":[{\"name\":\"a\","
                "\"max_total_tokens\":1000,\"request\":{\"messages\":[{"
                "\"role\":\"user\",\"content\":\"hi\"}]}}]}");
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_int_eq(
        cJSON_GetArraySize(cJSON_GetObjectItem(e2e_step_of(job, 0), "history")),
        2);
    tokens = cJSON_GetObjectItem(e2e_step_of(job, 0), "tokens")->valueint;
    ck_assert_msg(tokens > 0 && tokens < 100, "tokens %d", tokens);
    cJSON_Delete(job);
}
END_TEST

/* A step's timeout_s bounds one attempt, for chat steps (below the tier's
 * 5 s) and for http steps (which had a fixed 60 s). */
START_TEST(test_step_timeout_bounds_an_attempt)
{
    char jobtext[512];
    cJSON *job;

    e2e_start_file("free-and-comments-4s.json", "");
    e2e_enqueue(E2E_CHAT_JOB("\"tiers\":[\"free\"],\"timeout_s\":1,", ""));
    snprintf(jobtext, sizeof(jobtext),
             "{\"name\":\"p\",\"steps\":[{\"name\":\"post\",\"kind\":"
             "\"http\",\"timeout_s\":1,\"http\":{\"method\":\"POST\","
             "\"url\":\"http://127.0.0.1:%d/comments\"}}]}",
             e2e_mock.port);
    e2e_enqueue(jobtext);
    free(e2e_drain());
    for (int id = 1; id <= 2; id++) {
        job = e2e_show(id);
        ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "outcome"), "timeout");
        ck_assert_int_lt(
            cJSON_GetObjectItem(e2e_hist(job, 0, 0), "latency_ms")->valueint,
            2500);
        cJSON_Delete(job);
    }
    job = e2e_show(2); /* no key: in doubt after a timeout */
    ck_assert_str_eq(e2e_str(job, "state"), "parked");
    cJSON_Delete(job);
}
END_TEST

/* A request lost with its worker was charged its estimate when it was
 * recorded; settling it in doubt keeps that charge (the endpoint may have
 * spent the tokens), so max_total_tokens holds across crashes. */
START_TEST(test_in_doubt_attempt_keeps_its_tokens)
{
    char big[4200], jobtext[4600];
    cJSON *job;

    memset(big, 'x', 4000);
    big[4000] = '\0';
    e2e_start_file("free-delay-3s-once.json", "");
    snprintf(jobtext, sizeof(jobtext),
             "{\"name\":\"j\",\"steps\":[{\"name\":\"a\",\"tiers\":[\"free\"],"
             "\"request\":{\"messages\":[{\"role\":\"user\","
             "\"content\":\"%s\"}]}}]}",
             big);
    e2e_enqueue(jobtext);
    e2e_kill_mid_request_then_drain();
    job = e2e_show(1);
    ck_assert_msg(strcmp(e2e_str(job, "state"), "succeeded") == 0, "%s",
                  e2e_str(job, "error"));
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "reason"), "in_doubt");
    /* about 1,000 input tokens each: the lost one and the answered one */
    ck_assert_int_gt(
        cJSON_GetObjectItem(e2e_step_of(job, 0), "tokens")->valueint, 1800);
    cJSON_Delete(job);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("worker_budget");
    TCase *tc = tcase_create("budget");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_degraded_request_sent_past_token_budget);
    tcase_add_test(tc, test_max_total_tokens_stops_the_send);
    tcase_add_test(tc, test_step_timeout_bounds_an_attempt);
    tcase_add_test(tc, test_deadline_passed_sends_nothing_more);
    tcase_add_test(tc, test_error_answer_costs_no_tokens);
    tcase_add_test(tc, test_degrade_keeps_tool_pairs_and_lowers_only);
    tcase_add_loop_test(tc, test_timed_out_attempt_keeps_its_estimate, 0, 2);
    tcase_add_test(tc, test_refused_attempt_costs_nothing);
    tcase_add_test(tc, test_in_doubt_attempt_keeps_its_tokens);
    suite_add_tcase(s, tc);
    return s;
}

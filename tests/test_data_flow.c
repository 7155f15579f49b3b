/* test_data_flow.c: data between steps, end to end through the real
 * binary, worker and mock (issue 41): paths into a step's JSON output
 * and the job's input flowing into what the next step sends (read back
 * from the mock's request log), JSON types kept, input given by the CLI,
 * the API, a schedule and the job file, "when" skipping a step,
 * templates refused at enqueue with nothing written, a path missing at
 * run time failing the step with nothing sent, and `stepq check`. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/e2e.h"
#include "tests/support/servefix.h"

/* The mock's first answer: a JSON object, as a triage step gives one. */
#define TRIAGE_SCRIPT                                                          \
    "{\"answers\":[{\"content\":{\"kind\":\"bug\",\"labels\":[\"ui\","         \
    "\"crash\"],\"n\":3}}]}"

/* A chat step NAME sending content C, with extra members X (",..." or ""). */
#define STEP(name, c, x)                                                       \
    "{\"name\":\"" name "\",\"request\":{\"messages\":[{\"role\":\"user\","    \
    "\"content\":\"" c "\"}]" x "}}"

/* The chat request body of logged request i. */
static cJSON *
sent(const cJSON *log, int i)
{
    cJSON *b = e2e_sent_body(log, i);

    ck_assert_ptr_nonnull(b);
    return b;
}

static const char *
content_of(const cJSON *body)
{
    return e2e_str(cJSON_GetArrayItem(cJSON_GetObjectItem(body, "messages"), 0),
                   "content");
}

/* ---- paths into outputs, types kept --------------------------------- */

/* Step "label" reads into triage's output; step "post" (http, at the
 * mock's port %d) sends triage's output whole and its kind in the url. */
static const char flow_job[] =
    "{\"name\":\"t\",\"steps\":["
    "{\"name\":\"triage\",\"request\":{\"messages\":[{\"role\":\"user\","
    "\"content\":\"triage this\"}]}},"
    "{\"name\":\"label\",\"request\":{\"messages\":[{\"role\":\"user\","
    "\"content\":\"label {{steps.triage.output.labels.0}} of "
    "{{steps.triage.output.labels}}\"}],"
    "\"labels\":\"{{steps.triage.output.labels}}\","
    "\"count\":\"{{steps.triage.output.n}}\"}},"
    "{\"name\":\"post\",\"kind\":\"http\",\"http\":{\"url\":"
    "\"http://127.0.0.1:%d/comments?k={{steps.triage.output.kind}}\","
    "\"body\":\"{{steps.triage.output}}\"}}]}";

START_TEST(test_output_path_flows_into_next_request)
{
    char job[2048];
    cJSON *shown, *log, *b, *h;

    e2e_start(TRIAGE_SCRIPT, "");
    snprintf(job, sizeof(job), flow_job, e2e_mock.port);
    e2e_enqueue(job);
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "succeeded");
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 3);
    b = sent(log, 1);
    ck_assert_str_eq(content_of(b), "label ui of [\"ui\",\"crash\"]");
    /* a whole-string template keeps the value's JSON type */
    ck_assert(cJSON_IsArray(cJSON_GetObjectItem(b, "labels")));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(b, "labels")), 2);
    ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(b, "count")));
    ck_assert_int_eq(cJSON_GetObjectItem(b, "count")->valueint, 3);
    h = cJSON_GetArrayItem(log, 2);
    ck_assert_str_eq(e2e_str(h, "path"), "/comments");
    ck_assert_str_eq(e2e_str(h, "query"), "k=bug");
    cJSON_Delete(b);
    /* {{steps.NAME.output}} whole stays the output's text, and an http
     * body that is a string is sent as its text: the triage object */
    ck_assert_str_eq(e2e_str(cJSON_GetObjectItem(h, "body"), "kind"), "bug");
    cJSON_Delete(log);
    cJSON_Delete(shown);
}
END_TEST

/* `jobs show 1` (text) holds line. */
static void
expect_shown_text(const char *line)
{
    struct run_result r;

    ck_assert_int_eq(RUN(&r, NULL, "jobs", "show", "1"), 0);
    ck_assert_msg(strstr(r.out, line) != NULL, "%s", r.out);
    run_result_free(&r);
}

/* Runs the queue: job 1 failed with error, after one request (its first
 * step's): nothing of the failed step was sent. */
static void
expect_failed_after_one(const char *error)
{
    cJSON *shown, *log;

    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "failed");
    ck_assert_str_eq(e2e_str(shown, "error"), error);
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 1);
    cJSON_Delete(log);
    cJSON_Delete(shown);
}

/* Every attempt of a step sends the same filled values (the fill made
 * when it is entered: worker__fill asserts it is the step's): a truncated
 * answer's degrade (which keeps the last message and lowers max_tokens)
 * and a 500's retry send what the first attempt sent, and the next step
 * gets a fill of its own. */
START_TEST(test_every_attempt_sends_the_fill)
{
    char big[5300], job[7000];
    cJSON *shown, *log, *b;

    memset(big, 'x', 5200);
    big[5200] = '\0';
    e2e_start("{\"answers\":[{\"content\":{\"kind\":\"bug\",\"labels\":["
              "\"ui\"],\"n\":3}},{\"finish_reason\":\"length\"},"
              "{\"status\":500}]}",
              "");
    snprintf(
        job, sizeof(job),
        "{\"name\":\"t\",\"steps\":[" STEP(
            "triage", "x",
            "") ","
                "{\"name\":\"label\",\"token_budget\":2000,\"degrade\":{"
                "\"max_tokens\":300,\"keep_last_messages\":1},\"request\":{"
                "\"max_tokens\":800,\"n_of\":\"{{steps.triage.output.n}}\","
                "\"messages\":[{\"role\":\"user\",\"content\":\"%s\"},{"
                "\"role\":"
                "\"user\",\"content\":\"label {{steps.triage.output.labels.0}} "
                "as {{steps.triage.output.kind}}\"}]}}," STEP(
                    "post", "after {{steps.label.output}}", "") "]}",
        big);
    e2e_enqueue(job);
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "succeeded");
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 5);
    for (int i = 1; i <= 3; i++) { /* label: sent, degraded, retried */
        cJSON *msgs;
        b = sent(log, i);
        msgs = cJSON_GetObjectItem(b, "messages");
        ck_assert_int_eq(cJSON_GetArraySize(msgs), i == 1 ? 2 : 1);
        ck_assert_str_eq(
            e2e_str(cJSON_GetArrayItem(msgs, i == 1 ? 1 : 0), "content"),
            "label ui as bug");
        ck_assert_int_eq(cJSON_GetObjectItem(b, "n_of")->valueint, 3);
        ck_assert_int_eq(cJSON_GetObjectItem(b, "max_tokens")->valueint,
                         i == 1 ? 800 : 300);
        cJSON_Delete(b);
    }
    b = sent(log, 4);
    ck_assert_ptr_nonnull(strstr(content_of(b), "after "));
    ck_assert_str_eq(content_of(b) + 6,
                     e2e_str(e2e_step_of(shown, 1), "output"));
    cJSON_Delete(b);
    cJSON_Delete(log);
    cJSON_Delete(shown);
}
END_TEST

START_TEST(test_missing_path_fails_the_step_nothing_sent)
{
    e2e_start(TRIAGE_SCRIPT, "");
    e2e_enqueue("{\"name\":\"t\",\"steps\":[" STEP("triage", "x", "") "," STEP(
        "b", "{{steps.triage.output.labels.5}}", "") "]}");
    expect_failed_after_one("step b: {{steps.triage.output.labels.5}}: no "
                            "labels.5 in the output of step triage; nothing "
                            "sent");
}
END_TEST

/* ---- when ------------------------------------------------------------ */

START_TEST(test_when_false_skips_true_runs)
{
    cJSON *shown, *log, *b;

    e2e_start(TRIAGE_SCRIPT, "");
    e2e_enqueue("{\"name\":\"w\",\"steps\":[" STEP(
        "triage", "x",
        "") ","
            "{\"name\":\"feature\",\"when\":{\"eq\":[\"{{steps.triage.output."
            "kind}}\",\"feature\"]},\"request\":{\"messages\":[{\"role\":"
            "\"user\","
            "\"content\":\"f\"}]}},"
            "{\"name\":\"bug\",\"when\":{\"all\":[{\"in\":[\"crash\",\"{{steps."
            "triage.output.labels}}\"]},{\"ge\":[\"{{steps.triage.output.n}}\","
            "3]},{\"not\":{\"exists\":\"{{steps.triage.output.nope}}\"}}]},"
            "\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"b\"}]}"
            "}]}");
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(shown, 1), "state"), "skipped");
    ck_assert_str_eq(e2e_str(e2e_step_of(shown, 1), "reason"),
                     "when was false: {\"eq\":[\"bug\",\"feature\"]}");
    ck_assert_ptr_null(e2e_str(e2e_step_of(shown, 1), "output"));
    expect_shown_text("    when was false: {\"eq\":[\"bug\",\"feature\"]}\n");
    ck_assert_str_eq(e2e_str(e2e_step_of(shown, 2), "state"), "succeeded");
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 2);
    b = sent(log, 1);
    ck_assert_str_eq(content_of(b), "b");
    cJSON_Delete(b);
    cJSON_Delete(log);
    cJSON_Delete(shown);
}
END_TEST

/* A later step that reads a skipped step's output fails, naming it. */
START_TEST(test_reading_a_skipped_step_fails)
{
    e2e_start(TRIAGE_SCRIPT, "");
    e2e_enqueue("{\"name\":\"w\",\"steps\":[" STEP(
        "triage", "x",
        "") ","
            "{\"name\":\"s\",\"when\":{\"exists\":\"{{steps.triage.output."
            "none}}\"},\"request\":{\"messages\":[{\"role\":\"user\","
            "\"content\":\"s\"}]}}," STEP("after", "{{steps.s.output}}",
                                          "") "]}");
    expect_failed_after_one("step after: {{steps.s.output}}: step s was "
                            "skipped (its \"when\" was false); nothing sent");
}
END_TEST

/* A worker killed after a skip: the next one reads the skip from the
 * store, so a later step reading the skipped step's output still fails
 * (and is not sent with an empty output). Consecutive skips go on. */
START_TEST(test_skip_survives_a_killed_worker)
{
    cJSON *shown;

    e2e_start_file("free-delay-3s-once.json", "");
    e2e_enqueue(
        "{\"name\":\"k\",\"steps\":["
        "{\"name\":\"s\",\"when\":{\"exists\":\"{{input.none}}\"},"
        "\"request\":{\"messages\":[{\"role\":\"user\"}]}},"
        "{\"name\":\"s2\",\"when\":{\"not\":{\"eq\":[1,1]}},"
        "\"request\":{\"messages\":[{\"role\":\"user\"}]}}," STEP(
            "a", "slow", "") "," STEP("after", "{{steps.s.output}}", "") "]}");
    e2e_kill_mid_request_then_drain();
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(e2e_step_of(shown, 0), "state"), "skipped");
    ck_assert_str_eq(e2e_str(e2e_step_of(shown, 1), "state"), "skipped");
    ck_assert_str_eq(e2e_str(e2e_step_of(shown, 2), "state"), "succeeded");
    ck_assert_str_eq(e2e_str(shown, "error"),
                     "step after: {{steps.s.output}}: step s was skipped (its "
                     "\"when\" was false); nothing sent");
    ck_assert_int_eq(e2e_sent_to(NULL, "/free"), 2); /* a, sent again */
    cJSON_Delete(shown);
}
END_TEST

/* ---- input ----------------------------------------------------------- */

#define INPUT_JOB                                                              \
    "{\"name\":\"i\",\"steps\":[" STEP(                                        \
        "a", "fix {{input.issue.title}}",                                      \
        ",\"labels\":\"{{input.issue.labels}}\"") "]}"

/* Runs the queue and checks that the mock got the input's title and its
 * labels as an array, and that jobs show gives the input. */
static void
expect_input_sent(void)
{
    cJSON *shown, *log, *b;

    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(cJSON_GetObjectItem(
                                 cJSON_GetObjectItem(shown, "input"), "issue"),
                             "title"),
                     "Crash");
    log = e2e_mock_log();
    b = sent(log, 0);
    ck_assert_str_eq(content_of(b), "fix Crash");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(b, "labels")), 2);
    cJSON_Delete(b);
    cJSON_Delete(log);
    cJSON_Delete(shown);
}

#define ISSUE "{\"issue\":{\"title\":\"Crash\",\"labels\":[\"bug\",\"ui\"]}}"

START_TEST(test_input_from_the_cli)
{
    struct run_result r;

    e2e_start("{}", "");
    ck_assert_msg(RUN(&r, INPUT_JOB, "enqueue", "--input", ISSUE) == 0, "%s",
                  r.err);
    run_result_free(&r);
    expect_input_sent();
    expect_shown_text("  input    " ISSUE "\n");
}
END_TEST

START_TEST(test_input_from_a_file_and_the_job_file)
{
    struct run_result r;

    e2e_start("{}", "");
    free(tmpdir_write(e2e_dir, "in.json", ISSUE, strlen(ISSUE)));
    ck_assert_msg(RUN(&r, INPUT_JOB, "enqueue", "--input", "@in.json") == 0,
                  "%s", r.err);
    run_result_free(&r);
    /* the job file's own "input": a second job, same request */
    e2e_enqueue("{\"name\":\"own\",\"input\":" ISSUE
                ",\"steps\":[" STEP("a", "fix {{input.issue.title}}", "") "]}");
    expect_input_sent();
}
END_TEST

START_TEST(test_input_through_the_api)
{
    struct server s;
    int st = 0;
    cJSON *o;

    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    o = serve_call(
        &s, "POST", "/v1/jobs/check",
        "{\"name\":\"n\",\"steps\":[" STEP("a", "{{input.x}}", "") "]}", &st);
    ck_assert_int_eq(st, 400);
    ck_assert_str_eq(
        e2e_str(cJSON_GetObjectItem(o, "error"), "message"),
        "steps[0].request.messages[0].content: {{input.x}}: the job has no "
        "input");
    cJSON_Delete(o);
    o = serve_call(&s, "POST", "/v1/jobs/check",
                   "{\"name\":\"n\",\"input\":" ISSUE
                   ",\"steps\":[" STEP("a", "{{input.issue.title}}", "") "]}",
                   &st);
    ck_assert_int_eq(st, 200);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(o, "ok")));
    cJSON_Delete(o);
    ck_assert_int_eq(run_job_count(e2e_db), 0);
    o = serve_call(&s, "POST", "/v1/jobs",
                   "{\"name\":\"n\",\"input\":" ISSUE ",\"steps\":[" STEP(
                       "a", "fix {{input.issue.title}}",
                       ",\"labels\":\"{{input.issue.labels}}\"") "]}",
                   &st);
    ck_assert_int_eq(st, 201);
    cJSON_Delete(o);
    serve_stop(&s);
    expect_input_sent();
}
END_TEST

/* A schedule's job fills its input from the schedule's own variables. */
START_TEST(test_input_from_a_schedule)
{
    struct run_result r;
    cJSON *shown, *log, *b;
    char want[64];

    e2e_start("{}", "\"schedules\":[{\"name\":\"nightly\",\"cron\":"
                    "\"0 3 * * *\",\"job\":{\"name\":\"s\",\"input\":{\"day\":"
                    "\"{{schedule.date}}\"},\"steps\":[" STEP(
                        "a", "day {{input.day}}", "") "]}}]");
    ck_assert_msg(RUN(&r, NULL, "schedules", "run", "nightly") == 0, "%s",
                  r.err);
    run_result_free(&r);
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "succeeded");
    snprintf(want, sizeof(want), "day %s",
             e2e_str(cJSON_GetObjectItem(shown, "input"), "day"));
    ck_assert_int_eq(strlen(want), strlen("day 2026-12-06"));
    log = e2e_mock_log();
    b = sent(log, 0);
    ck_assert_str_eq(content_of(b), want);
    cJSON_Delete(b);
    cJSON_Delete(log);
    cJSON_Delete(shown);
}
END_TEST

/* ---- refused at enqueue, nothing written ----------------------------- */

static const struct refusal {
    const char *job, *input, *want;
} refusals[] = {
    {"{\"name\":\"r\",\"steps\":[" STEP("a", "{{schedule.date}}", "") "]}",
     NULL,
     "steps[0].request.messages[0].content: {{schedule.date}}: only a "
     "schedule's job has {{schedule.*}} filled in; this job is not a "
     "schedule's"},
    {"{\"name\":\"r\",\"steps\":[" STEP("a", "key {{env.TOKEN}}", "") "]}",
     NULL,
     "steps[0].request.messages[0].content: {{env.TOKEN}}: stepq fills no "
     "{{env.*}} template; a header value \"env:TOKEN\" is read from the "
     "environment when sent"},
    {"{\"name\":\"r\",\"steps\":[" STEP("a", "{{input.who}}", "") "]}",
     "{\"name\":\"x\"}",
     "steps[0].request.messages[0].content: {{input.who}}: no who in the "
     "input"},
    {"{\"name\":\"r\",\"steps\":[" STEP("a", "{{steps.z.output.k}}", "") "]}",
     NULL,
     "steps[0].request.messages[0].content: template names unknown step z"},
    {"{\"name\":\"r\",\"steps\":[" STEP("a", "x", ",\"stream\":true") "]}",
     NULL,
     "steps[0].request.stream: a stream is asked for by the step's "
     "\"stream\" or the tier's, not in the request: leave it out (or "
     "false)"},
    {"{\"name\":\"r\",\"steps\":[" STEP("a", "x", ",\"n\":2") "]}", NULL,
     "steps[0].request.n: stepq keeps one choice of an answer: leave \"n\" "
     "out (or 1)"},
    {"{\"name\":\"r\",\"steps\":[{\"name\":\"a\",\"when\":{\"eq\":[1]},"
     "\"request\":{\"messages\":[{\"role\":\"user\"}]}}]}",
     NULL, "steps[0].when.eq: must be an array of two values"},
    {"{\"name\":\"r\",\"steps\":[{\"name\":\"a\",\"when\":{\"all\":[{\"eq\":"
     "[\"x {{input.k}}\",1]}]},\"request\":{\"messages\":[{\"role\":"
     "\"user\"}]}}]}",
     "{\"k\":1}",
     "steps[0].when.all[0].eq[0]: a template in a condition must be the "
     "whole string"},
    {"{\"name\":\"r\",\"steps\":[{\"name\":\"a\",\"when\":{\"eq\":[\"{{steps."
     "a.output}}\",1]},\"request\":{\"messages\":[{\"role\":\"user\"}]}}]}",
     NULL, "steps[0].when.eq[0]: template names its own step a"},
    {"{\"name\":\"r\",\"steps\":[{\"name\":\"a\",\"idempotency_key\":"
     "\"{{schedule.name}}-{{schedule.date}}\",\"request\":{\"messages\":[{"
     "\"role\":\"user\"}]}}]}",
     NULL, "steps[0].idempotency_key: {{schedule.name}}: only a schedule's"},
};

START_TEST(test_refused_at_enqueue_nothing_written)
{
    const struct refusal *c = &refusals[_i];
    struct run_result r;
    int rc;

    fixture_init(FIXTURE_DB);
    rc = c->input ? RUN(&r, c->job, "--db", FIXTURE_DB, "enqueue", "--input",
                        c->input)
                  : RUN(&r, c->job, "--db", FIXTURE_DB, "enqueue");
    ck_assert_msg(rc == 2, "row %d: exit %d", _i, rc);
    ck_assert_msg(strstr(r.err, c->want) != NULL, "row %d: %s", _i, r.err);
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 0);
}
END_TEST

START_TEST(test_input_refused_when_not_json)
{
    struct run_result r;

    fixture_init(FIXTURE_DB);
    ck_assert_int_eq(RUN(&r, INPUT_JOB, "--db", FIXTURE_DB, "enqueue",
                         "--input", "{\"issue\":"),
                     2);
    ck_assert_ptr_nonnull(strstr(r.err, "enqueue: --input: input is not "
                                        "valid JSON"));
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, INPUT_JOB, "--db", FIXTURE_DB, "enqueue",
                         "--input", "@missing.json"),
                     2);
    ck_assert_ptr_nonnull(strstr(r.err, "--input @missing.json: no such file"));
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 0);
}
END_TEST

/* ---- stepq check ------------------------------------------------------ */

#define ENV_JOB                                                                \
    "{\"name\":\"c\",\"steps\":[" STEP(                                        \
        "a", "{{input.t}}",                                                    \
        "") ",{\"name\":\"post\",\"kind\":\"http\",\"http\":{\"url\":\"http:/" \
            "/"                                                                \
            "127.0.0.1:9/c\",\"headers\":{\"Authorization\":\"env:"            \
            "STEPQ_TEST_NO_SUCH_TOKEN\"},\"body\":{\"t\":\"{{steps.a.output}}" \
            "\"}}}]}"

START_TEST(test_check_finds_a_missing_env_var)
{
    struct run_result r;

    unsetenv("STEPQ_TEST_NO_SUCH_TOKEN");
    ck_assert_int_eq(RUN(&r, ENV_JOB, "check", "--input", "{\"t\":\"hi\"}"), 2);
    ck_assert_str_eq(r.err, "stepq: check: stdin: steps[1].http.headers."
                            "Authorization: environment variable "
                            "STEPQ_TEST_NO_SUCH_TOKEN is not set (step post "
                            "reads it when it sends)\n");
    run_result_free(&r);
    setenv("STEPQ_TEST_NO_SUCH_TOKEN", "x", 1);
    ck_assert_int_eq(
        RUN(&r, ENV_JOB, "check", "--input", "{\"t\":\"hi\"}", "--json"), 0);
    ck_assert_str_eq(
        r.out, "{\"ok\":true,\"jobs\":[{\"name\":\"c\",\"input\":{\"t\":"
               "\"hi\"},\"steps\":[{\"name\":\"a\",\"kind\":\"chat\","
               "\"when\":null,\"sends\":{\"messages\":[{\"role\":\"user\","
               "\"content\":\"hi\"}]}},{\"name\":\"post\",\"kind\":\"http\","
               "\"when\":null,\"sends\":{\"url\":\"http://127.0.0.1:9/c\","
               "\"headers\":{\"Authorization\":\"env:STEPQ_TEST_NO_SUCH_"
               "TOKEN\"},\"body\":{\"t\":\"{{steps.a.output}}\"}}}]}]}\n");
    run_result_free(&r);
    /* nothing was written: check opens no database */
    ck_assert_int_eq(access(FIXTURE_DB, F_OK), -1);
    ck_assert_int_eq(access("stepq.db", F_OK), -1);
}
END_TEST

START_TEST(test_check_names_an_unknown_tier)
{
    struct run_result r;

    /* a config without tiers: a tier named is unknown to check */
    ck_assert_int_eq(RUN(&r,
                         "{\"name\":\"c\",\"steps\":[{\"name\":\"a\","
                         "\"tiers\":[\"paid\"],\"request\":{\"messages\":"
                         "[{\"role\":\"user\"}]}}]}",
                         "check"),
                     2);
    ck_assert_ptr_nonnull(
        strstr(r.err, "steps[0].tiers[0]: no tier named paid in the config"));
    run_result_free(&r);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("data between steps");
    TCase *flow = tcase_create("flow"), *refuse = tcase_create("refuse");
    TCase *check = tcase_create("check"), *api = tcase_create("api");

    tcase_add_checked_fixture(flow, e2e_setup, e2e_teardown);
    tcase_set_timeout(flow, 60);
    tcase_add_test(flow, test_output_path_flows_into_next_request);
    tcase_add_test(flow, test_every_attempt_sends_the_fill);
    tcase_add_test(flow, test_missing_path_fails_the_step_nothing_sent);
    tcase_add_test(flow, test_when_false_skips_true_runs);
    tcase_add_test(flow, test_reading_a_skipped_step_fails);
    tcase_add_test(flow, test_skip_survives_a_killed_worker);
    tcase_add_test(flow, test_input_from_the_cli);
    tcase_add_test(flow, test_input_from_a_file_and_the_job_file);
    tcase_add_test(flow, test_input_from_a_schedule);
    suite_add_tcase(s, flow);

    tcase_add_checked_fixture(api, serve_setup, e2e_teardown);
    tcase_set_timeout(api, 60);
    tcase_add_test(api, test_input_through_the_api);
    suite_add_tcase(s, api);

    tcase_add_checked_fixture(refuse, fixture_setup, fixture_teardown);
    tcase_add_loop_test(refuse, test_refused_at_enqueue_nothing_written, 0,
                        (int)(sizeof(refusals) / sizeof(refusals[0])));
    tcase_add_test(refuse, test_input_refused_when_not_json);
    suite_add_tcase(s, refuse);

    tcase_add_checked_fixture(check, fixture_setup, fixture_teardown);
    tcase_add_test(check, test_check_finds_a_missing_env_var);
    tcase_add_test(check, test_check_names_an_unknown_tier);
    suite_add_tcase(s, check);
    return s;
}

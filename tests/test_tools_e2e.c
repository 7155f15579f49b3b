/* test_tools_e2e.c: a chat step's "tools" through the real binary: the
 * config's shared tools checked when it is loaded, a job's tools checked
 * at enqueue (nothing written when one is wrong). The loop that runs
 * them is test_agent_e2e.c's.
 */
#include "tests/support/support.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tests/support/e2e.h"
#include "tests/support/servefix.h"

#define ADD_LABEL                                                              \
    "{\"name\": \"add_label\", \"description\": \"Label an issue\","           \
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"label\":"      \
    " {\"type\": \"string\"}}, \"required\": [\"label\"]},"                    \
    " \"action\": {\"http\": {\"url\": \"http://127.0.0.1:9/l/"                \
    "{{args.label}}\"}}}"
#define CONFIG_TOOLS "\"tools\": [" ADD_LABEL "]"
#define ASK                                                                    \
    "{\"name\": \"ask_owner\", \"parameters\": {\"type\": \"object\"},"        \
    " \"action\": {\"ask\": \"Close it?\"}, \"needs_approval\": \"never\"}"
#define JOB_WITH(tools)                                                        \
    E2E_CHAT_JOB("\"tools\": [" tools "], \"max_turns\": 4,", "")

START_TEST(test_enqueue_refuses_unknown_tool)
{
    struct run_result r;

    e2e_start("{}", CONFIG_TOOLS);
    ck_assert_int_eq(
        RUN(&r, JOB_WITH("\"add_label\", \"close_issue\""), "enqueue", "-"), 2);
    ck_assert_msg(strstr(r.err, "steps[0].tools[1]: no tool named "
                                "close_issue in the config") != NULL,
                  "%s", r.err);
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(e2e_db), 0);
}
END_TEST

/* A shared tool the config defines wrong stops every command that reads
 * the config (enqueue, work, ...), with its path in the config, even for
 * a job that names no tool. */
START_TEST(test_bad_config_tool_is_exit_2)
{
    struct run_result r;

    e2e_start("{}", "\"tools\": [{\"name\": \"t\", \"parameters\": {\"type\":"
                    " \"object\"}, \"action\": {\"ask\": \"ok?\"},"
                    " \"idempotency_key\": \"k\"}]");
    ck_assert_int_eq(RUN(&r, E2E_CHAT_JOB("", ""), "enqueue", "-"), 2);
    ck_assert_msg(strstr(r.err, "tools[0].idempotency_key: only for an "
                                "\"http\" action") != NULL,
                  "%s", r.err);
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(e2e_db), 0);
}
END_TEST

/* POST /v1/jobs checks tools as enqueue does, against the config the
 * server read. */
START_TEST(test_api_checks_tools)
{
    const char *args[] = {"--no-auth", NULL};
    struct server s;
    cJSON *o;
    int st;

    e2e_start("{}", CONFIG_TOOLS);
    ck_assert_int_eq(serve_start(&s, NULL, args), -1);
    o = serve_call(&s, "POST", "/v1/jobs", JOB_WITH("\"add_labels\""), &st);
    ck_assert_int_eq(st, 400);
    ck_assert_str_eq(serve_error_code(o), "invalid_job");
    ck_assert_ptr_nonnull(
        strstr(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message")
                   ->valuestring,
               "steps[0].tools[0]: no tool named add_labels in the config"));
    cJSON_Delete(o);
    o = serve_call(&s, "POST", "/v1/jobs", JOB_WITH("\"add_label\""), &st);
    ck_assert_int_eq(st, 201);
    cJSON_Delete(o);
    serve_stop(&s);
    ck_assert_int_eq(run_job_count(e2e_db), 1);
}
END_TEST

/* A tool posting to url with body (JSON text), and a job of one step
 * "a" offering tools (JSON text), with an input (JSON text, or NULL). */
#define POSTER(name, url, body)                                                \
    "{\"name\": \"" name "\", \"parameters\": {\"type\": \"object\"},"         \
    " \"action\": {\"http\": {\"method\": \"POST\", \"url\": \"" url           \
    "\", \"body\": " body "}}}"
#define TWO_STEPS(tools)                                                       \
    "{\"name\": \"j\", \"steps\": [{\"name\": \"a\", \"tools\": [" tools       \
    "], \"request\": {\"messages\": [{\"role\": \"user\", \"content\":"        \
    " \"go\"}]}}, {\"name\": \"b\", \"request\": {\"messages\":"               \
    " [{\"role\": \"user\", \"content\": \"next\"}]}}]}"

struct tpl_case {
    const char *config; /* spliced into the config, or "" */
    const char *job;
    const char *input; /* --input, or NULL */
    const char *want;  /* in the error of enqueue and of check */
};

static const struct tpl_case tpl_bad[] = {
    {"",
     TWO_STEPS(POSTER("t", "http://127.0.0.1:9/x/{{steps.nope.output}}", "{}")),
     NULL,
     "steps[0].tools[0].action.http.url: template names unknown step "
     "nope"},
    /* A later step's output does not exist when the loop runs. */
    {"",
     TWO_STEPS(POSTER("t", "http://127.0.0.1:9/x",
                      "{\"s\": \"{{steps.b.output}}\"}")),
     NULL, "steps[0].tools[0].action.http.body.s: template names step b"},
    {"",
     TWO_STEPS(
         POSTER("t", "http://127.0.0.1:9/x", "{\"r\": \"{{input.repo}}\"}")),
     "{\"owner\": \"ann\"}",
     "steps[0].tools[0].action.http.body.r: {{input.repo}}: no repo in the "
     "input"},
    {"",
     TWO_STEPS(
         POSTER("t", "http://127.0.0.1:9/x", "{\"d\": \"{{schedule.date}}\"}")),
     NULL,
     "steps[0].tools[0].action.http.body.d: {{schedule.date}}: only a "
     "schedule's job has {{schedule.*}} filled in"},
    /* A shared tool's action is checked where a job names it. */
    {"\"tools\": [" POSTER("fetch", "http://127.0.0.1:9/{{input.repo}}",
                           "{}") "]",
     TWO_STEPS("\"fetch\""), "{\"owner\": \"ann\"}",
     "steps[0].tools[0].action.http.url: {{input.repo}}: no repo in the "
     "input (config tool fetch)"},
};

/* A template in a tool's http action that cannot resolve where it stands
 * is refused by enqueue and by check, naming the field; nothing is
 * written. */
START_TEST(test_tool_action_templates_refused)
{
    const struct tpl_case *c = &tpl_bad[_i];
    const char *verbs[] = {"enqueue", "check"};
    struct run_result r;

    e2e_start("{}", c->config);
    for (int v = 0; v < 2; v++) {
        int rc = c->input ? RUN(&r, c->job, verbs[v], "-", "--input", c->input)
                          : RUN(&r, c->job, verbs[v], "-");
        ck_assert_msg(rc == 2 && strstr(r.err, c->want) != NULL,
                      "%s exited %d: %s", verbs[v], rc, r.err);
        run_result_free(&r);
    }
    ck_assert_int_eq(run_job_count(e2e_db), 0);
}
END_TEST

/* The same action is taken once what it names is there. */
START_TEST(test_tool_action_templates_accepted)
{
    struct run_result r;

    e2e_start("{}", "");
    ck_assert_int_eq(
        RUN(&r,
            TWO_STEPS(POSTER("t", "http://127.0.0.1:9/{{input.repo}}",
                             "{\"r\": \"{{input.repo}}\"}")),
            "enqueue", "-", "--input", "{\"repo\": \"r\"}"),
        0);
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(e2e_db), 1);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("tools_e2e");
    TCase *tc = tcase_create("tools");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_enqueue_refuses_unknown_tool);
    tcase_add_test(tc, test_bad_config_tool_is_exit_2);
    tcase_add_test(tc, test_api_checks_tools);
    tcase_add_loop_test(tc, test_tool_action_templates_refused, 0,
                        (int)(sizeof(tpl_bad) / sizeof(tpl_bad[0])));
    tcase_add_test(tc, test_tool_action_templates_accepted);
    suite_add_tcase(s, tc);
    return s;
}

/* test_native_tools.c: an agent step's tool loop on the native protocols
 * (issue 43), through the real worker and the mock over loopback: its
 * turns on an anthropic tier and on a gemini tier (plain and streamed),
 * the mock refusing what the provider would (a tool_use without its
 * tool_result, a schema keyword Gemini lacks, unequal function call and
 * response counts), and a loop that meets a wall mid-way and goes on on a
 * tier of another api with the same conversation. The mapping of
 * tool_choice and of bad tool turns is checked on the request built
 * (http_tier_request).
 */
#define _GNU_SOURCE /* asprintf */
#include "tests/support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "http/http.h"
#include "tests/support/e2e.h"

#define CALL(name, args) "{\"name\": \"" name "\", \"arguments\": " args "}"
#define LABEL(l)         CALL("add_label", "{\"label\": \"" l "\"}")
/* Two turns: two calls in parallel, then one. */
#define TWO_TURNS                                                              \
    "[[" LABEL("bug") ", " LABEL("p1") "], [" LABEL("triaged") "]]"

/* A job of one agent step "a" with tool add_label (posting to the mock's
 * /labels; additionalProperties is in its schema, which Gemini's Schema
 * lacks). Caller frees. */
static char *
agent_job(void)
{
    char *job = NULL;

    ck_assert_int_gt(
        asprintf(
            &job,
            "{\"name\": \"j\", \"steps\": [{\"name\": \"a\", \"max_turns\": 5,"
            " \"tools\": [{\"name\": \"add_label\", \"description\": \"Label "
            "it\", \"parameters\": {\"type\": \"object\", \"properties\": "
            "{\"label\": {\"type\": \"string\"}}, \"required\": [\"label\"],"
            " \"additionalProperties\": false}, \"action\": {\"http\": "
            "{\"method\": \"POST\", \"url\": \"http://127.0.0.1:%d/labels/"
            "{{args.label}}\", \"body\": {\"l\": \"{{args.label}}\"}}}}],"
            " \"request\": {\"messages\": [{\"role\": \"system\", \"content\":"
            " \"triage\"}, {\"role\": \"user\", \"content\": \"issue "
            "412\"}]}}]}",
            e2e_mock.port),
        0);
    return job;
}

/* Starts the mock with routes (JSON members of the routes array) and a
 * config whose tier free speaks api a on /free and local api b on
 * /local (each with more fields, "" or a leading-comma member). */
static void
start(const char *routes, const char *a, const char *afields, const char *b)
{
    char script[4096], *cfg = NULL;
    const char *base[] = {"openai", "/v1",    "anthropic",
                          "/v1",    "gemini", "/v1beta"};
    const char *pa = "", *pb = "";

    snprintf(script, sizeof(script), "{\"routes\": [%s]}", routes);
    e2e_start(script, "");
    for (size_t i = 0; i < 6; i += 2) {
        pa = strcmp(a, base[i]) == 0 ? base[i + 1] : pa;
        pb = strcmp(b, base[i]) == 0 ? base[i + 1] : pb;
    }
    ck_assert_int_gt(
        asprintf(&cfg,
                 "{\"worker\": {\"lease_s\": 1}, \"policy\": "
                 "{\"backoff_base_s\": 0.05, \"backoff_cap_s\": 0.2},"
                 " \"tiers\": [{\"name\": \"free\", \"api\": \"%s\", "
                 "\"base_url\": \"http://127.0.0.1:%d/free%s\", \"model\": "
                 "\"small\", \"timeout_s\": 5%s}, {\"name\": \"local\", "
                 "\"api\": \"%s\", \"base_url\": \"http://127.0.0.1:%d/local%s"
                 "\", \"model\": \"llama\", \"timeout_s\": 5}]}",
                 a, e2e_mock.port, pa, afields, b, e2e_mock.port, pb),
        0);
    free(tmpdir_write(e2e_dir, "stepq.json", cfg, strlen(cfg)));
    free(cfg);
}

/* Counts the members named key anywhere in j. */
static int
count_key(const cJSON *j, const char *key)
{
    const cJSON *c;
    int n = 0;

    cJSON_ArrayForEach(c, j)
    {
        n += c->string != NULL && strcmp(c->string, key) == 0;
        n += count_key(c, key);
    }
    return n;
}

/* The calls and the results a request of api carries in its shape. */
static void
turns_in(const cJSON *body, const char *api, int *calls, int *results)
{
    static const char *const keys[] = {
        "openai",      "arguments", "tool_call_id", "anthropic",       "input",
        "tool_use_id", "gemini",    "functionCall", "functionResponse"};

    for (size_t i = 0; i < 9; i += 3) {
        if (strcmp(api, keys[i]) == 0) {
            *calls = count_key(body, keys[i + 1]);
            *results = count_key(body, keys[i + 2]);
        }
    }
}

/* The bodies of the chat requests logged on the route of prefix. */
static cJSON *
bodies_on(const char *prefix)
{
    cJSON *log = e2e_mock_log(), *out = cJSON_CreateArray(), *req;

    cJSON_ArrayForEach(req, log)
    {
        const char *path = e2e_str(req, "path");
        if (path != NULL && strncmp(path, prefix, strlen(prefix)) == 0)
            cJSON_AddItemToArray(out, e2e_body_of(req));
    }
    cJSON_Delete(log);
    return out;
}

/* Drains the queue: job 1 succeeded with text in its output. */
static void
drain_succeeded(const char *text)
{
    cJSON *shown;
    const char *out;

    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "succeeded");
    out = e2e_str(e2e_step_of(shown, 0), "output");
    ck_assert_msg(out != NULL && strstr(out, text) != NULL, "%s",
                  out ? out : "(no output)");
    cJSON_Delete(shown);
}

/* ---- an agent loop on one native tier ------------------------------ */

static const struct {
    const char *api;
    const char *fields; /* more tier fields */
} one_tier[] = {
    {"anthropic", ""},
    {"gemini", ""},
    {"anthropic", ", \"stream\": true"},
    {"gemini", ", \"stream\": true"},
};

/* Three turns on one tier: two calls in parallel, then one, then the
 * answer, which lists the three results the model received in its
 * protocol's shape; every turn carried the conversation so far. */
START_TEST(test_agent_loop_on_a_native_tier)
{
    char routes[1024], *job;
    cJSON *bodies;
    int calls = -1, results = -1;

    snprintf(routes, sizeof(routes),
             "{\"path\": \"/free\", \"api\": \"%s\", \"echo_tool_results\": "
             "true, \"tool_turns\": " TWO_TURNS "}",
             one_tier[_i].api);
    start(routes, one_tier[_i].api, one_tier[_i].fields, "openai");
    e2e_enqueue(job = agent_job());
    free(job);
    drain_succeeded("3 results");
    ck_assert_int_eq(e2e_sent_to(NULL, "/labels"), 3);
    bodies = bodies_on("/free");
    ck_assert_int_eq(cJSON_GetArraySize(bodies), 3);
    turns_in(cJSON_GetArrayItem(bodies, 1), one_tier[_i].api, &calls, &results);
    ck_assert_int_eq(calls, 2);
    ck_assert_int_eq(results, 2);
    turns_in(cJSON_GetArrayItem(bodies, 2), one_tier[_i].api, &calls, &results);
    ck_assert_int_eq(calls, 3);
    ck_assert_int_eq(results, 3);
    cJSON_Delete(bodies);
}
END_TEST

/* ---- a wall mid-loop: the next tier speaks another api -------------- */

static const struct {
    const char *from, *to;
} switches[] = {
    {"anthropic", "openai"},
    {"openai", "gemini"},
    {"gemini", "anthropic"},
};

/* free calls add_label once, then its allowance is spent (a wall, in its
 * protocol's shape); local, of another api, gets the same conversation
 * (the call and its result in its shape) and answers. */
START_TEST(test_wall_mid_loop_switches_api)
{
    char routes[1024], *job;
    cJSON *bodies;
    int calls = -1, results = -1;

    snprintf(routes, sizeof(routes),
             "{\"path\": \"/free\", \"api\": \"%s\", \"allowance_tokens\": 1,"
             " \"tool_turns\": [[" LABEL("bug") "], [" LABEL(
                 "x") "]]},"
                      " {\"path\": \"/local\", \"api\": \"%s\", "
                      "\"echo_tool_results\":"
                      " true, \"tool_turns\": [[" LABEL("y") "]]}",
             switches[_i].from, switches[_i].to);
    start(routes, switches[_i].from, "", switches[_i].to);
    e2e_enqueue(job = agent_job());
    free(job);
    drain_succeeded("/labels/bug");
    ck_assert_int_eq(e2e_sent_to(NULL, "/free"), 2);
    ck_assert_int_eq(e2e_sent_to(NULL, "/labels"), 1);
    bodies = bodies_on("/local");
    ck_assert_int_eq(cJSON_GetArraySize(bodies), 1);
    turns_in(cJSON_GetArrayItem(bodies, 0), switches[_i].to, &calls, &results);
    ck_assert_int_eq(calls, 1);
    ck_assert_int_eq(results, 1);
    cJSON_Delete(bodies);
}
END_TEST

/* ---- the request built ------------------------------------------------ */

/* The body http_tier_request builds of request (JSON text) for a tier of
 * api; NULL when refused, with the error in err. */
static cJSON *
built(enum config_api api, const char *request, char *err, size_t len)
{
    struct config_tier t = {.name = "t",
                            .base_url = "http://127.0.0.1:1/v1",
                            .model = "m",
                            .api = api};
    cJSON *req = cJSON_Parse(request), *body = NULL;
    struct http_request r;

    ck_assert_ptr_nonnull(req);
    err[0] = '\0';
    if (http_tier_request(req, &t, false, 1000, &r, err, len) == 0) {
        body = cJSON_Parse(r.body);
        http_request_cleanup(&r);
    }
    cJSON_Delete(req);
    return body;
}

#define TOOLS                                                                  \
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\","     \
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\":"          \
    " {\"type\": \"string\"}}}}}, {\"type\": \"function\", \"function\":"      \
    " {\"name\": \"g\"}}]"
#define USER "{\"role\": \"user\", \"content\": \"hi\"}"
#define CALLS                                                                  \
    "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\":"   \
    " \"c.1\", \"type\": \"function\", \"function\": {\"name\": \"f\","        \
    " \"arguments\": \"{\\\"a\\\": \\\"b\\\"}\"}}]}"
#define RESULT(id)                                                             \
    "{\"role\": \"tool\", \"tool_call_id\": \"" id "\", \"content\": \"ok\"}"

static const struct {
    enum config_api api;
    const char *request; /* its members, besides model */
    const char *want;    /* in the body built, or else in the error */
} mapped[] = {
    {CONFIG_API_ANTHROPIC,
     TOOLS ", \"tool_choice\": \"required\", \"parallel_tool_calls\": false,"
           " \"messages\": [" USER "]",
     "\"tool_choice\":{\"type\":\"any\",\"disable_parallel_tool_use\":true}"},
    {CONFIG_API_ANTHROPIC,
     TOOLS ", \"tool_choice\": {\"type\": \"function\", \"function\":"
           " {\"name\": \"g\"}}, \"messages\": [" USER "]",
     "{\"name\":\"g\",\"description\":\"\",\"input_schema\":{\"type\":"
     "\"object\"}}],\"tool_choice\":{\"type\":\"tool\",\"name\":\"g\"}"},
    /* An id another tier made, in Anthropic's alphabet. */
    {CONFIG_API_ANTHROPIC,
     "\"messages\": [" USER ", " CALLS ", " RESULT("c.1") "]",
     "{\"type\":\"tool_use\",\"id\":\"c_1\",\"name\":\"f\",\"input\":{\"a\":"
     "\"b\"}}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
     "\"tool_use_id\":\"c_1\",\"content\":\"ok\"}]}"},
    {CONFIG_API_GEMINI,
     TOOLS ", \"tool_choice\": {\"type\": \"function\", \"function\":"
           " {\"name\": \"f\"}}, \"messages\": [" USER "]",
     "\"toolConfig\":{\"functionCallingConfig\":{\"mode\":\"ANY\","
     "\"allowedFunctionNames\":[\"f\"]}}"},
    /* A call no Gemini turn made: the documented stand-in signature. */
    {CONFIG_API_GEMINI,
     "\"messages\": [" USER ", " CALLS ", " RESULT("c.1") "]",
     "\"thoughtSignature\":\"skip_thought_signature_validator\""},
    {CONFIG_API_GEMINI, TOOLS ", \"messages\": [" USER "]",
     "{\"name\":\"g\",\"description\":\"\"}]}]"},
    {CONFIG_API_ANTHROPIC, "\"messages\": [" USER ", " CALLS "]",
     "request.messages[1].tool_calls[0]: no tool message answers call c.1"},
    {CONFIG_API_GEMINI,
     "\"messages\": [" USER ", " CALLS ", " RESULT("c.2") "]",
     "request.messages[2].tool_call_id: c.2 is no call of the turn before it"},
    {CONFIG_API_ANTHROPIC, "\"messages\": [" USER ", " RESULT("c.1") "]",
     "request.messages[1]: a tool message must follow an assistant message "
     "with tool_calls"},
    {CONFIG_API_GEMINI,
     TOOLS ", \"tool_choice\": \"sometimes\", \"messages\": [" USER "]",
     "request.tool_choice: must be"},
};

START_TEST(test_tools_mapped_to_the_api)
{
    char request[2048], err[512], *text;
    cJSON *body;

    snprintf(request, sizeof(request), "{%s}", mapped[_i].request);
    body = built(mapped[_i].api, request, err, sizeof(err));
    text = body ? cJSON_PrintUnformatted(body) : NULL;
    ck_assert_msg(strstr(text ? text : err, mapped[_i].want) != NULL,
                  "row %d: %s", _i, text ? text : err);
    free(text);
    cJSON_Delete(body);
}
END_TEST

/* A thought signature Gemini gave goes back with its call, read from the
 * OpenAI-shaped conversation (extra_content, as Gemini's layer says it);
 * an openai tier does not send it. */
START_TEST(test_thought_signature_kept_for_gemini_only)
{
    const char *req =
        "{\"messages\": [" USER ", {\"role\": \"assistant\", \"tool_calls\":"
        " [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\":"
        " \"f\", \"arguments\": \"{}\"}, \"extra_content\": {\"google\":"
        " {\"thought_signature\": \"c2lnbmVk\"}}}]}, " RESULT("c1") "]}";
    char err[256], *g, *o;
    cJSON *gb = built(CONFIG_API_GEMINI, req, err, sizeof(err));
    cJSON *ob = built(CONFIG_API_OPENAI, req, err, sizeof(err));

    ck_assert_ptr_nonnull(gb);
    ck_assert_ptr_nonnull(ob);
    g = cJSON_PrintUnformatted(gb);
    o = cJSON_PrintUnformatted(ob);
    ck_assert_msg(strstr(g, "\"thoughtSignature\":\"c2lnbmVk\"") != NULL, "%s",
                  g);
    ck_assert_msg(strstr(o, "extra_content") == NULL, "%s", o);
    free(g);
    free(o);
    cJSON_Delete(gb);
    cJSON_Delete(ob);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("native_tools");
    TCase *tc = tcase_create("loop");
    TCase *req = tcase_create("request");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_agent_loop_on_a_native_tier, 0,
                        (int)STEPQ_ARRAY_LEN(one_tier));
    tcase_add_loop_test(tc, test_wall_mid_loop_switches_api, 0,
                        (int)STEPQ_ARRAY_LEN(switches));
    suite_add_tcase(s, tc);
    tcase_add_loop_test(req, test_tools_mapped_to_the_api, 0,
                        (int)STEPQ_ARRAY_LEN(mapped));
    tcase_add_test(req, test_thought_signature_kept_for_gemini_only);
    suite_add_tcase(s, req);
    return s;
}

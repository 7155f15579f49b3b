/* test_agent_e2e.c: the tool loop of a chat step with tools (issue 41)
 * through the real CLI, the real worker and the mock over loopback: turns
 * whose calls run in parallel and whose results the model receives,
 * invalid calls answered with errors, max_turns, a throttle mid-loop,
 * approvals and questions through `park resolve`, and a worker killed -9
 * mid-call.
 */
#include "tests/support/support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "tests/support/e2e.h"

/* A tool add_label posting to the mock's generic endpoint, with extra
 * fields spliced in (a member with a leading comma, or ""). */
#define ADD_LABEL(extra)                                                       \
    "{\"name\": \"add_label\", \"description\": \"Label an issue\","           \
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"label\":"      \
    " {\"type\": \"string\"}}, \"required\": [\"label\"],"                     \
    " \"additionalProperties\": false},"                                       \
    " \"action\": {\"http\": {\"method\": \"POST\", \"url\":"                  \
    " \"http://127.0.0.1:PORT/labels/{{args.label}}\","                        \
    " \"body\": {\"label\": \"{{args.label}}\"}}}" extra "}"

/* Builds the job of one chat step "a" with tools (JSON text, "PORT"
 * where the mock's port goes) and more step fields (each with a leading
 * comma, or ""). Caller frees. */
static char *
agent_job(const char *tools, const char *fields)
{
    char port[16], *job = malloc(16384), *o = job;
    const char *p = tools;

    snprintf(port, sizeof(port), "%d", e2e_mock.port);
    o += sprintf(o, "{\"name\": \"j\", \"steps\": [{\"name\": \"a\", "
                    "\"tools\": [");
    while (*p != '\0') {
        if (strncmp(p, "PORT", 4) == 0) {
            o += sprintf(o, "%s", port);
            p += 4;
        } else {
            *o++ = *p++;
        }
    }
    sprintf(o,
            "]%s, \"request\": {\"messages\": [{\"role\": \"user\","
            " \"content\": \"triage 412\"}]}}]}",
            fields);
    return job;
}

/* The chat requests the mock received, in order: their message arrays
 * (cJSON_Delete the result). */
static cJSON *
chat_messages(void)
{
    cJSON *log = e2e_mock_log(), *out = cJSON_CreateArray(), *req;

    cJSON_ArrayForEach(req, log)
    {
        const char *path = e2e_str(req, "path");
        if (path == NULL || strncmp(path, "/free", 5) != 0)
            continue;
        cJSON *body = e2e_body_of(req);
        cJSON_AddItemToArray(out, cJSON_DetachItemFromObject(body, "messages"));
        cJSON_Delete(body);
    }
    cJSON_Delete(log);
    return out;
}

/* Counts the messages of role in msgs. */
static int
count_role(const cJSON *msgs, const char *role)
{
    const cJSON *m;
    int n = 0;

    cJSON_ArrayForEach(m, msgs)
    {
        const char *r = e2e_str(m, "role");
        n += r != NULL && strcmp(r, role) == 0;
    }
    return n;
}

#define TWO_TURNS                                                              \
    "{\"routes\": [{\"path\": \"/free\", \"echo_tool_results\": true,"         \
    " \"tool_turns\": [[{\"name\": \"add_label\", \"arguments\": {\"label\":"  \
    " \"bug\"}}, {\"name\": \"add_label\", \"arguments\": {\"label\":"         \
    " \"p1\"}}], [{\"name\": \"add_label\", \"arguments\": {\"label\":"        \
    " \"triaged\"}}]]}]}"

/* Three model turns: two with calls (two in parallel, then one), then the
 * answer, which holds the three results the model received. */
START_TEST(test_three_turn_loop)
{
    char *job;
    cJSON *shown, *msgs;
    const char *out;

    e2e_start(TWO_TURNS, "");
    e2e_enqueue(job = agent_job(ADD_LABEL(""), ""));
    free(job);
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "succeeded");
    out = e2e_str(e2e_step_of(shown, 0), "output");
    ck_assert_ptr_nonnull(out);
    ck_assert_msg(strstr(out, "done after 2 tool turns, 3 results") &&
                      strstr(out, "/labels/triaged"),
                  "%s", out);
    ck_assert_int_eq(e2e_sent_to(NULL, "/free"), 3);
    ck_assert_int_eq(e2e_sent_to(NULL, "/labels"), 3);
    msgs = chat_messages();
    /* The last turn carries the whole conversation, in order. */
    const cJSON *last = cJSON_GetArrayItem(msgs, 2);
    ck_assert_int_eq(count_role(last, "assistant"), 2);
    ck_assert_int_eq(count_role(last, "tool"), 3);
    ck_assert_int_eq(count_role(cJSON_GetArrayItem(msgs, 0), "tool"), 0);
    cJSON_Delete(msgs);
    cJSON_Delete(shown);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("agent_e2e");
    TCase *tc = tcase_create("loop");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_three_turn_loop);
    suite_add_tcase(s, tc);
    return s;
}

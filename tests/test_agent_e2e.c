/* test_agent_e2e.c: the tool loop of a chat step with tools (issue 41)
 * through the real CLI, the real worker and the mock over loopback: turns
 * whose calls run in parallel and whose results the model receives,
 * invalid calls answered with errors, max_turns, a throttle mid-loop,
 * approvals and questions through `park resolve`, and a worker killed -9
 * mid-call.
 */
#include "tests/support/support.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "tests/support/e2e.h"
#include "tests/support/servefix.h"

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

/* Enqueues agent_job(tools, fields). */
static void
enqueue_agent(const char *tools, const char *fields)
{
    char *job = agent_job(tools, fields);

    e2e_enqueue(job);
    free(job);
}

/* The chat requests the mock received on the route of prefix, in order:
 * their message arrays
 * (cJSON_Delete the result). */
static cJSON *
chat_messages(const char *prefix)
{
    cJSON *log = e2e_mock_log(), *out = cJSON_CreateArray(), *req;

    cJSON_ArrayForEach(req, log)
    {
        const char *path = e2e_str(req, "path");
        if (path == NULL || strncmp(path, prefix, strlen(prefix)) != 0)
            continue;
        cJSON *body = e2e_body_of(req);
        cJSON_AddItemToArray(out, cJSON_DetachItemFromObject(body, "messages"));
        cJSON_Delete(body);
    }
    cJSON_Delete(log);
    return out;
}

/* Drains the queue; job 1 must have succeeded with text in its first
 * step's output. Returns it shown (cJSON_Delete it). */
static cJSON *
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
    return shown;
}

/* Rejects park item id (by ann, with note); the job then succeeds with
 * text in its output, path having been sent to sent times. */
static void
reject_then_succeed(const char *id, const char *note, const char *text,
                    const char *path, int sent)
{
    struct run_result r;
    cJSON *shown;

    ck_assert_int_eq(RUN_ARGS(&r, "park", "resolve", id, "--reject", "--note",
                              note, "--by", "ann"),
                     0);
    run_result_free(&r);
    shown = drain_succeeded(text);
    ck_assert_int_eq(e2e_sent_to(NULL, path), sent);
    cJSON_Delete(shown);
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
    cJSON *shown, *msgs;
    const char *out;

    e2e_start(TWO_TURNS, "");
    enqueue_agent(ADD_LABEL(""), "");
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
    msgs = chat_messages("/free");
    /* The last turn carries the whole conversation, in order. */
    const cJSON *last = cJSON_GetArrayItem(msgs, 2);
    ck_assert_int_eq(count_role(last, "assistant"), 2);
    ck_assert_int_eq(count_role(last, "tool"), 3);
    ck_assert_int_eq(count_role(cJSON_GetArrayItem(msgs, 0), "tool"), 0);
    cJSON_Delete(msgs);
    cJSON_Delete(shown);
}
END_TEST

/* A plain chat step after an agent step is sent as a chat step: no
 * tools, no conversation of the loop before it. */
START_TEST(test_step_after_agent_is_plain)
{
    char *job, *two;
    cJSON *log, *body;
    const cJSON *req;

    e2e_start(TWO_TURNS, "");
    job = agent_job(ADD_LABEL(""), "");
    two = malloc(strlen(job) + 256);
    strcpy(two, job);
    strcpy(two + strlen(two) - 2,
           ", {\"name\": \"b\", \"tiers\": [\"local\"], \"request\":"
           " {\"messages\": [{\"role\": \"user\", \"content\": \"next\"}]}}]}");
    e2e_enqueue(two);
    free(job);
    free(two);
    cJSON_Delete(drain_succeeded("done after 2 tool turns"));
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/local"), 1);
    cJSON_ArrayForEach(req, log)
    {
        if (strncmp(e2e_str(req, "path"), "/local", 6) != 0)
            continue;
        body = e2e_body_of(req);
        ck_assert_ptr_null(cJSON_GetObjectItem(body, "tools"));
        ck_assert_int_eq(
            cJSON_GetArraySize(cJSON_GetObjectItem(body, "messages")), 1);
        cJSON_Delete(body);
    }
    cJSON_Delete(log);
}
END_TEST

/* Mock scripts: one route /free whose model calls what turns says, and
 * answers with the results it received. */
#define ECHO_ROUTE(path, turns)                                                \
    "{\"path\": \"" path                                                       \
    "\", \"echo_tool_results\": true, \"tool_turns\": " turns "}"
#define CALL(name, args) "{\"name\": \"" name "\", \"arguments\": " args "}"

/* A tool the step does not offer and arguments that fail the schema are
 * not run: the model receives an error result for each and goes on. */
START_TEST(test_invalid_calls_answered_with_errors)
{
    cJSON *shown;
    const char *out;

    e2e_start(
        "{\"routes\": [" ECHO_ROUTE(
            "/free", "[[" CALL("add_labels", "{\"label\": \"bug\"}") ", " CALL(
                         "add_label", "{\"label\": 5}") "]]") "]}",
        "");
    enqueue_agent(ADD_LABEL(""), "");
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "succeeded");
    out = e2e_str(e2e_step_of(shown, 0), "output");
    ck_assert_msg(strstr(out, "there is no tool named \\\"add_labels\\\"") &&
                      strstr(out, "args.label: expected string"),
                  "%s", out);
    ck_assert_int_eq(e2e_sent_to(NULL, "/labels"), 0);
    cJSON_Delete(shown);
}
END_TEST

/* More invalid calls than max_tool_errors fails the step, naming it. */
START_TEST(test_max_tool_errors)
{
    cJSON *shown;

    e2e_start("{\"routes\": [" ECHO_ROUTE(
                  "/free",
                  "[[" CALL("nope", "{}") ", " CALL("nope2", "{}") "]]") "]}",
              "");
    enqueue_agent(ADD_LABEL(""), ", \"max_tool_errors\": 1");
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "failed");
    ck_assert_msg(strstr(e2e_str(shown, "error"), "step a: max_tool_errors"),
                  "%s", e2e_str(shown, "error"));
    cJSON_Delete(shown);
}
END_TEST

/* A model that still calls tools after max_turns turns fails the step;
 * no turn past the bound is sent. */
START_TEST(test_max_turns_reached)
{
    cJSON *shown;

    e2e_start(
        "{\"routes\": [" ECHO_ROUTE(
            "/free", "[[" CALL("add_label", "{\"label\": \"a\"}") "], [" CALL(
                         "add_label",
                         "{\"label\": \"b\"}") "], [" CALL("add_label",
                                                           "{\"label\": "
                                                           "\"c\"}") "]]") "]}",
        "");
    enqueue_agent(ADD_LABEL(""), ", \"max_turns\": 2");
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "failed");
    ck_assert_msg(strstr(e2e_str(shown, "error"), "step a: max_turns: the "
                                                  "model still called tools "
                                                  "after 2 turns"),
                  "%s", e2e_str(shown, "error"));
    ck_assert_int_eq(e2e_sent_to(NULL, "/free"), 2);
    ck_assert_int_eq(e2e_sent_to(NULL, "/labels"), 2);
    cJSON_Delete(shown);
}
END_TEST

/* A daily wall on the first tier after a turn with calls: the next turn
 * goes to the other tier with the same messages (the results included). */
START_TEST(test_wall_mid_loop_switches_tier)
{
    char *job;
    cJSON *shown, *msgs;

    e2e_start(
        "{\"routes\": [{\"path\": \"/free\", \"answers\": [{\"tool_calls\":"
        " [" CALL(
            "add_label",
            "{\"label\": \"bug\"}") "]},"
                                    " {\"status\": 429, \"body\": \"daily "
                                    "quota exceeded\"}]}," ECHO_ROUTE(
                                        "/local",
                                        "[[" CALL(
                                            "add_label",
                                            "{\"label\": \"x\"}") "]]") "]}",
        "");
    e2e_enqueue(
        job = agent_job(ADD_LABEL(""), ", \"tiers\": [\"free\", \"local\"]"));
    free(job);
    shown = drain_succeeded("/labels/bug");
    msgs = chat_messages("/local");
    ck_assert_int_eq(cJSON_GetArraySize(msgs), 1);
    /* The same conversation: the call on free and its result. */
    ck_assert_int_eq(count_role(cJSON_GetArrayItem(msgs, 0), "assistant"), 1);
    ck_assert_int_eq(count_role(cJSON_GetArrayItem(msgs, 0), "tool"), 1);
    cJSON_Delete(msgs);
    ck_assert_int_eq(e2e_sent_to(NULL, "/free"), 2);
    ck_assert_int_eq(e2e_sent_to(NULL, "/labels"), 1);
    cJSON_Delete(shown);
}
END_TEST

/* A tool that posts a comment, only once an operator approved it. */
#define POST_COMMENT                                                           \
    "{\"name\": \"post_comment\", \"parameters\": {\"type\": \"object\","      \
    " \"properties\": {\"body\": {\"type\": \"string\"}}, \"required\":"       \
    " [\"body\"]}, \"needs_approval\": \"always\", \"action\": {\"http\":"     \
    " {\"method\": \"POST\", \"url\": \"http://127.0.0.1:PORT/comments\","     \
    " \"body\": {\"body\": \"{{args.body}}\"}}}}"
#define ASK_OWNER                                                              \
    "{\"name\": \"ask_owner\", \"parameters\": {\"type\": \"object\"},"        \
    " \"action\": {\"ask\": \"Close it?\"}}"

/* Runs the agent job of tools whose model calls calls (one turn), drains
 * the queue and returns the id of the park item it left with reason. */
static long long
parked_call(const char *tools, const char *calls, const char *reason)
{
    char script[2048];
    struct run_result r;
    cJSON *items, *it;
    long long id;

    snprintf(script, sizeof(script), "{\"routes\": [%s]}", calls);
    e2e_start(script, "");
    enqueue_agent(tools, "");
    free(e2e_drain());
    ck_assert_int_eq(RUN_ARGS(&r, "park", "list", "--json"), 0);
    items = cJSON_Parse(r.out);
    run_result_free(&r);
    it = cJSON_GetArrayItem(items, 0);
    ck_assert_ptr_nonnull(it);
    ck_assert_str_eq(e2e_str(it, "reason"), reason);
    id = (long long)cJSON_GetObjectItem(it, "id")->valuedouble;
    cJSON_Delete(items);
    return id;
}

#define COMMENT_TURN                                                           \
    ECHO_ROUTE("/free",                                                        \
               "[[" CALL("post_comment", "{\"body\": \"Reproduced.\"}") "]]")

/* A call that needs approval parks before it is sent, showing the tool
 * and its exact arguments; approved with edited arguments, those are
 * sent, and the model gets the result. */
START_TEST(test_approval_with_edited_args)
{
    struct run_result r;
    long long id = parked_call(POST_COMMENT, COMMENT_TURN, "approval");
    char idtext[32];
    cJSON *shown, *log, *req;

    snprintf(idtext, sizeof(idtext), "%lld", id);
    ck_assert_int_eq(e2e_sent_to(NULL, "/comments"), 0);
    ck_assert_int_eq(RUN_ARGS(&r, "park", "show", idtext), 0);
    ck_assert_msg(strstr(r.out, "post_comment") && strstr(r.out, "Reproduced."),
                  "%s", r.out);
    run_result_free(&r);
    /* Arguments that fail the tool's parameters: refused, nothing done. */
    ck_assert_int_eq(RUN(&r, "{\"body\": 5}", "park", "resolve", idtext,
                         "--approve", "--args", "-"),
                     2);
    ck_assert_msg(strstr(r.err, "args.body: expected string"), "%s", r.err);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, "{\"body\": \"Edited.\"}", "park", "resolve",
                         idtext, "--approve", "--args", "-", "--by", "ann"),
                     0);
    run_result_free(&r);
    free(e2e_drain());
    /* The transcript: the turn, the call parked, the call run with the
     * edited arguments, the last turn, and who approved it. */
    ck_assert_int_eq(RUN_ARGS(&r, "jobs", "show", "1"), 0);
    ck_assert_msg(strstr(r.out, "#1 turn  tier free") &&
                      strstr(r.out, "finish tool_calls (1 calls)") &&
                      strstr(r.out, "#3 call  post_comment "
                                    "{\"body\":\"Edited.\"}: ok") &&
                      strstr(r.out, "resolved approve by ann"),
                  "%s", r.out);
    run_result_free(&r);
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_hist(shown, 0, 2), "tool"), "post_comment");
    ck_assert_str_eq(e2e_str(e2e_hist(shown, 0, 2), "kind"), "tool");
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/comments"), 1);
    cJSON_ArrayForEach(req, log)
    {
        if (strcmp(e2e_str(req, "path"), "/comments") == 0)
            ck_assert_str_eq(e2e_str(cJSON_GetObjectItem(req, "body"), "body"),
                             "Edited.");
    }
    cJSON_Delete(log);
    cJSON_Delete(shown);
}
END_TEST

/* A rejected call is never sent; the model receives the note. */
START_TEST(test_reject_note_reaches_model)
{
    long long id = parked_call(POST_COMMENT, COMMENT_TURN, "approval");
    char idtext[32];

    snprintf(idtext, sizeof(idtext), "%lld", id);
    reject_then_succeed(idtext, "not in public",
                        "rejected by ann: not in public", "/comments", 0);
}
END_TEST

/* An ask tool parks with its question; the operator's answer (done
 * --output) is the tool's result. */
START_TEST(test_ask_answered_by_operator)
{
    struct run_result r;
    long long id = parked_call(
        ASK_OWNER, ECHO_ROUTE("/free", "[[" CALL("ask_owner", "{}") "]]"),
        "question");
    char idtext[32];
    cJSON *shown;

    snprintf(idtext, sizeof(idtext), "%lld", id);
    ck_assert_int_eq(RUN(&r, "yes, close it", "park", "resolve", idtext,
                         "--done", "--output", "-"),
                     0);
    run_result_free(&r);
    /* approve and reject go with tool calls only: here, with the answer
     * given, the item is resolved already. */
    shown = drain_succeeded("yes, close it");
    cJSON_Delete(shown);
}
END_TEST

/* The API resolves a tool call's item by the same rules: arguments that
 * fail the tool's parameters are a 400 naming the field, approved ones
 * are what is sent. */
START_TEST(test_api_approves_with_args)
{
    const char *args[] = {"--no-auth", NULL};
    long long id = parked_call(POST_COMMENT, COMMENT_TURN, "approval");
    char path[64];
    struct server sv;
    cJSON *o, *shown;
    int st;

    snprintf(path, sizeof(path), "/v1/park/%lld/resolve", id);
    ck_assert_int_eq(serve_start(&sv, NULL, args), -1);
    o = serve_call(&sv, "POST", path,
                   "{\"resolution\": \"approve\", \"by\": \"ann\","
                   " \"args\": {\"body\": 5}}",
                   &st);
    ck_assert_int_eq(st, 400);
    ck_assert_ptr_nonnull(
        strstr(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message")
                   ->valuestring,
               "args.body: expected string"));
    cJSON_Delete(o);
    o = serve_call(&sv, "POST", path,
                   "{\"resolution\": \"approve\", \"by\": \"ann\","
                   " \"args\": {\"body\": \"Via the API.\"}}",
                   &st);
    ck_assert_int_eq(st, 200);
    cJSON_Delete(o);
    serve_stop(&sv);
    shown = drain_succeeded("/comments");
    ck_assert_int_eq(e2e_sent_to(NULL, "/comments"), 1);
    cJSON_Delete(shown);
}
END_TEST

/* A route /post whose first request hangs (the worker is killed while it
 * waits), and a tool posting there, with extra fields. */
#define POST_HANGS "{\"path\": \"/post\", \"answers\": [{\"fault\": \"hang\"}]}"
#define POST_TOOL(name, extra)                                                 \
    "{\"name\": \"" name "\", \"parameters\": {\"type\": \"object\","          \
    " \"properties\": {\"label\": {\"type\": \"string\"}}}, \"action\":"       \
    " {\"http\": {\"method\": \"POST\", \"url\":"                              \
    " \"http://127.0.0.1:PORT/post/{{args.label}}\", \"body\": {\"label\":"    \
    " \"{{args.label}}\"}}}" extra "}"

/* Runs a worker until the mock logged n requests, then kills it -9. */
static void
kill_after(int n)
{
    pid_t w = e2e_spawn_worker("--drain");

    e2e_wait_for_requests(n, 10000);
    kill(w, SIGKILL);
    ck_assert_int_eq(e2e_wait_exit(w), 128 + SIGKILL);
}

/* Killed -9 while a model turn was in flight: the next worker asks that
 * turn again at once. The lost send does not hold the tier until it would
 * have timed out (timeout_s 60 and its margin here), as a plain step's
 * does not. */
START_TEST(test_crash_mid_turn_asked_again_at_once)
{
    int64_t t0, took;
    cJSON *shown;

    e2e_start("{\"routes\": [{\"path\": \"/free\", \"content\": \"all done\","
              " \"answers\": [{\"fault\": \"hang\"}]}]}",
              "");
    e2e_config(1, "\"api_key_env\": \"FREE_KEY\", \"timeout_s\": 60");
    enqueue_agent(ADD_LABEL(""), ", \"tiers\": [\"free\"]");
    kill_after(1); /* the first turn, which hangs */
    t0 = clock_mono_ms();
    shown = drain_succeeded("all done");
    took = clock_mono_ms() - t0;
    ck_assert_msg(took < 30000, "the turn was asked again after %lld ms",
                  (long long)took);
    ck_assert_int_eq(e2e_sent_to(NULL, "/free"), 2);
    cJSON_Delete(shown);
}
END_TEST

/* Killed -9 while a keyed call was in flight: the next worker resends it
 * with the same key, and the loop resumes from the last committed
 * message: the model's first turn is not asked again. */
START_TEST(test_crash_keyed_call_resent_with_its_key)
{
    char *job;
    cJSON *shown, *log, *req, *msgs;
    int posts = 0;

    e2e_start(
        "{\"routes\": [" POST_HANGS ", " ECHO_ROUTE(
            "/free", "[[" CALL("add_label", "{\"label\": \"bug\"}") "]]") "]}",
        "");
    e2e_enqueue(
        job = agent_job(POST_TOOL("add_label", ", \"idempotency_key\":"
                                               " \"label-{{args.label}}\""),
                        ""));
    free(job);
    kill_after(2); /* the turn, then the call that hangs */
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "succeeded");
    log = e2e_mock_log();
    cJSON_ArrayForEach(req, log)
    {
        if (strncmp(e2e_str(req, "path"), "/post", 5) != 0)
            continue;
        ck_assert_str_eq(e2e_str(req, "idempotency_key"), "label-bug");
        posts++;
    }
    ck_assert_int_eq(posts, 2);
    ck_assert_int_eq(e2e_sent_to(log, "/free"), 2);
    cJSON_Delete(log);
    msgs = chat_messages("/free");
    ck_assert_int_eq(count_role(cJSON_GetArrayItem(msgs, 1), "assistant"), 1);
    ck_assert_int_eq(count_role(cJSON_GetArrayItem(msgs, 1), "tool"), 1);
    cJSON_Delete(msgs);
    cJSON_Delete(shown);
}
END_TEST

/* Killed -9 while a side-effecting call without a key was in flight: it
 * is parked in_doubt with its tool and arguments, never sent again
 * without a human; a reject gives the model the operator's note. */
START_TEST(test_crash_unkeyed_call_parked_in_doubt)
{
    struct run_result r;
    cJSON *shown;

    e2e_start("{\"routes\": [" POST_HANGS ", " ECHO_ROUTE(
                  "/free",
                  "[[" CALL("post_comment", "{\"label\": \"bug\"}") "]]") "]}",
              "");
    enqueue_agent(POST_TOOL("post_comment", ""), "");
    kill_after(2);
    free(e2e_drain());
    shown = e2e_show(1);
    ck_assert_str_eq(e2e_str(shown, "state"), "parked");
    cJSON_Delete(shown);
    ck_assert_int_eq(RUN_ARGS(&r, "park", "show", "1"), 0);
    ck_assert_msg(strstr(r.out, "in_doubt") && strstr(r.out, "post_comment") &&
                      strstr(r.out, "\"label\":\"bug\""),
                  "%s", r.out);
    run_result_free(&r);
    reject_then_succeed("1", "posted by hand",
                        "rejected by ann: posted by hand", "/post", 1);
}
END_TEST

/* ---- the crash soak ------------------------------------------------- */

#define SOAK_JOBS  24
#define SOAK_KILLS 6

/* Job i of the soak: a keyed label and an unkeyed comment, each posting
 * to a path of its own job, so that the mock's log tells them apart. */
static void
soak_enqueue(int i)
{
    char tools[2048];

    snprintf(tools, sizeof(tools),
             "{\"name\": \"add_label\", \"parameters\": {\"type\": \"object\","
             " \"properties\": {\"label\": {\"type\": \"string\"}}},"
             " \"idempotency_key\": \"j%d-{{args.label}}\", \"action\":"
             " {\"http\": {\"method\": \"POST\", \"url\":"
             " \"http://127.0.0.1:PORT/slow/j%d/label\"}}},"
             " {\"name\": \"post_comment\", \"parameters\": {\"type\":"
             " \"object\"}, \"action\": {\"http\": {\"method\": \"POST\","
             " \"url\": \"http://127.0.0.1:PORT/slow/j%d/comment\"}}}",
             i, i, i);
    enqueue_agent(tools, "");
}

/* Runs a worker until the mock logged n requests in all (or 10 s went
 * by), then kills it -9; one that drained the queue before (everything
 * done or parked) ended by itself. A worker that hangs is caught by the
 * drain that ends the soak. Returns the requests logged by then. */
static int
kill_at(int n)
{
    pid_t w = e2e_spawn_worker("--drain");
    int64_t end = clock_mono_ms() + 10000;
    int got = 0, st;

    for (;;) {
        cJSON *log = e2e_mock_log();
        got = cJSON_GetArraySize(log);
        cJSON_Delete(log);
        if (got >= n || waitpid(w, &st, WNOHANG) == w)
            break;
        if (clock_mono_ms() >= end) /* a slow machine: killed all the same */
            break;
        poll(NULL, 0, 10);
    }
    if (got >= n || clock_mono_ms() >= end) {
        kill(w, SIGKILL);
        st = e2e_wait_exit(w); /* it may have drained meanwhile */
        ck_assert_msg(st == 128 + SIGKILL || st == 0, "worker: %d", st);
    }
    return got;
}

/* How many requests of the log went to path. */
static int
sent_exactly(const cJSON *log, const char *path)
{
    const cJSON *req;
    int n = 0;

    cJSON_ArrayForEach(req, log) n += strcmp(e2e_str(req, "path"), path) == 0;
    return n;
}

/* Agent jobs whose worker is killed -9 again and again, each time a few
 * requests after it started: no job is lost, each ends succeeded or
 * parked (a comment in doubt), an unkeyed comment is never sent twice
 * without a human, and every label carries its job's key. */
START_TEST(test_crash_soak)
{
    cJSON *log, *shown;
    char path[64];
    unsigned seed = (unsigned)getpid(); /* said on failure */
    int seen = 0;

    e2e_start(
        "{\"routes\": [{\"path\": \"/slow\", \"latency_ms\": 150}, " ECHO_ROUTE(
            "/free",
            "[[" CALL("add_label",
                      "{\"label\": "
                      "\"bug\"}") ", " CALL("post_comment", "{}") "]]") "]}",
        "");
    for (int i = 0; i < SOAK_JOBS; i++)
        soak_enqueue(i);
    for (int k = 0; k < SOAK_KILLS; k++) {
        seen = kill_at(seen + 1 + rand_r(&seed) % 6);
    }
    free(e2e_drain());
    log = e2e_mock_log();
    for (int i = 0; i < SOAK_JOBS; i++) {
        const char *st;
        shown = e2e_show(i + 1);
        st = e2e_str(shown, "state");
        ck_assert_msg(strcmp(st, "succeeded") == 0 || strcmp(st, "parked") == 0,
                      "job %d: %s (seed %u)", i + 1, st, (unsigned)getpid());
        snprintf(path, sizeof(path), "/slow/j%d/comment", i);
        ck_assert_int_le(sent_exactly(log, path), 1);
        snprintf(path, sizeof(path), "/slow/j%d/label", i);
        ck_assert_int_ge(sent_exactly(log, path), 1);
        cJSON_Delete(shown);
    }
    const cJSON *req;
    cJSON_ArrayForEach(req, log)
    {
        const char *p = e2e_str(req, "path");
        if (strstr(p, "/label") != NULL)
            ck_assert_msg(e2e_str(req, "idempotency_key") != NULL &&
                              strstr(e2e_str(req, "idempotency_key"), "-bug"),
                          "%s without its key", p);
    }
    cJSON_Delete(log);
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
    tcase_add_test(tc, test_step_after_agent_is_plain);
    tcase_add_test(tc, test_invalid_calls_answered_with_errors);
    tcase_add_test(tc, test_max_tool_errors);
    tcase_add_test(tc, test_max_turns_reached);
    tcase_add_test(tc, test_wall_mid_loop_switches_tier);
    tcase_add_test(tc, test_approval_with_edited_args);
    tcase_add_test(tc, test_reject_note_reaches_model);
    tcase_add_test(tc, test_ask_answered_by_operator);
    tcase_add_test(tc, test_api_approves_with_args);
    tcase_add_test(tc, test_crash_mid_turn_asked_again_at_once);
    tcase_add_test(tc, test_crash_keyed_call_resent_with_its_key);
    tcase_add_test(tc, test_crash_unkeyed_call_parked_in_doubt);
    suite_add_tcase(s, tc);
    TCase *soak = tcase_create("soak");
    tcase_add_checked_fixture(soak, e2e_setup, e2e_teardown);
    tcase_set_timeout(soak, 120);
    tcase_add_test(soak, test_crash_soak);
    suite_add_tcase(s, soak);
    return s;
}

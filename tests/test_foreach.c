/* test_foreach.c: a step run once per element of an array (issue 41,
 * docs/reference.md "Foreach"), end to end through the real binary,
 * worker and mock: the outputs collected in order and read by the next
 * step, the parallelism bound seen at the mock, an element parked while
 * the others succeed and the job going on once it is resolved, a worker
 * killed -9 mid-foreach resuming without sending a committed element
 * again, cancelling, "when" per element, and the example triage agent
 * run per issue. Bad sources: test_foreach_bad.c. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/e2e.h"

/* A job whose step "post" POSTs each element of its input's "items" to
 * the mock at /items/N (port %d), FE being the rest of its "foreach"
 * (",\"parallelism\":2" or ""), X more members of the step; then a chat
 * step "sum" reading the third element's output and the whole array. */
#define FE_JOB(fe, x)                                                          \
    "{\"name\":\"fe\",\"steps\":[{\"name\":\"post\",\"kind\":\"http\","        \
    "\"foreach\":{\"in\":\"{{input.items}}\",\"as\":\"it\"" fe "},"            \
    "\"http\":{\"url\":\"http://127.0.0.1:%d/items/{{it.n}}\",\"body\":{"      \
    "\"n\":\"{{it.n}}\"}}" x "},"                                              \
    "{\"name\":\"sum\",\"request\":{\"messages\":[{\"role\":\"user\","         \
    "\"content\":\"third {{steps.post.output.2.path}}\"}],"                    \
    "\"all\":\"{{steps.post.output}}\"}}]}"

/* Enqueues job with the input items n elements {"n": 0}..{"n": n-1}. */
static void
enqueue_items(const char *job, int n)
{
    char input[4096];
    struct run_result r;
    size_t len = 0;

    len += (size_t)snprintf(input, sizeof(input), "{\"items\":[");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(input + len, sizeof(input) - len,
                                "%s{\"n\":%d}", i ? "," : "", i);
    snprintf(input + len, sizeof(input) - len, "]}");
    ck_assert_msg(RUN(&r, job, "enqueue", "-", "--input", input) == 0, "%s",
                  r.err);
    run_result_free(&r);
}

/* FE_JOB(fe, x) at the mock's port, with n items. */
#define ENQUEUE_ITEMS(fe, x, n)                                                \
    do {                                                                       \
        char job_[2048];                                                       \
        snprintf(job_, sizeof(job_), FE_JOB(fe, x), e2e_mock.port);            \
        enqueue_items(job_, n);                                                \
    } while (0)

/* The output of step i of shown job o, parsed (cJSON_Delete it). */
static cJSON *
output_of(const cJSON *o, int i)
{
    cJSON *v = cJSON_Parse(e2e_str(e2e_step_of(o, i), "output"));

    ck_assert_ptr_nonnull(v);
    return v;
}

/* Whether job id exists (`jobs show` exits 0, else 3). */
static bool
job_exists(int id)
{
    struct run_result r;
    char ids[16];
    int rc;

    snprintf(ids, sizeof(ids), "%d", id);
    rc = RUN(&r, NULL, "jobs", "show", ids);
    run_result_free(&r);
    ck_assert(rc == 0 || rc == 3);
    return rc == 0;
}

/* The idempotency key of the first request the mock logged at path, or
 * NULL. Borrowed from log. */
static const char *
key_at(const cJSON *log, const char *path)
{
    const cJSON *q;

    cJSON_ArrayForEach(q, log)
    {
        const char *p = e2e_str(q, "path");
        if (p != NULL && strcmp(p, path) == 0)
            return e2e_str(q, "idempotency_key");
    }
    return NULL;
}

/* Checks that the output array of step 0 of o has n elements, element k
 * the mock's answer to /items/k (all of them when skip is -1). */
static void
expect_in_order(const cJSON *o, int n)
{
    cJSON *out = output_of(o, 0);
    char want[32];

    ck_assert_int_eq(cJSON_GetArraySize(out), n);
    for (int k = 0; k < n; k++) {
        snprintf(want, sizeof(want), "/items/%d", k);
        ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(out, k), "path"), want);
    }
    cJSON_Delete(out);
}

/* ---- order, the next step, elements shown -------------------------- */

START_TEST(test_outputs_in_order_read_by_next_step)
{
    cJSON *o, *log, *body;
    const cJSON *els;

    e2e_start("{\"content\":\"ok\"}", "");
    ENQUEUE_ITEMS(",\"parallelism\":3", "", 7);
    e2e_drain_at("8");
    o = e2e_show(1);
    ck_assert_str_eq(e2e_str(o, "state"), "succeeded");
    expect_in_order(o, 7);
    els = cJSON_GetObjectItem(e2e_step_of(o, 0), "elements");
    ck_assert_int_eq(cJSON_GetArraySize(els), 7);
    for (int k = 0; k < 7; k++) {
        const cJSON *e = cJSON_GetArrayItem(els, k);
        ck_assert_int_eq(cJSON_GetObjectItem(e, "index")->valueint, k);
        ck_assert_str_eq(e2e_str(e, "state"), "succeeded");
    }
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 8); /* 7 elements, then sum */
    body = e2e_sent_body(log, 7);
    ck_assert_str_eq(
        e2e_str(cJSON_GetArrayItem(cJSON_GetObjectItem(body, "messages"), 0),
                "content"),
        "third /items/2");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(body, "all")), 7);
    cJSON_Delete(body);
    cJSON_Delete(log);
    cJSON_Delete(o);
}
END_TEST

/* Each element is a job of its own, keyed by the job, step and index. */
START_TEST(test_each_element_a_keyed_job)
{
    cJSON *o;
    char key[64];

    e2e_start("{\"content\":\"ok\"}", "");
    ENQUEUE_ITEMS("", "", 3);
    e2e_drain_at("8");
    for (int k = 0; k < 3; k++) {
        o = e2e_show(2 + k);
        snprintf(key, sizeof(key), "foreach:1:0:%d", k);
        ck_assert_str_eq(e2e_str(o, "key"), key);
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "steps")),
                         1);
        ck_assert_int_eq(
            cJSON_GetObjectItem(e2e_step_of(o, 0), "attempts")->valueint, 1);
        cJSON_Delete(o);
    }
}
END_TEST

/* ---- the parallelism bound, as the mock saw it ---------------------- */

START_TEST(test_parallelism_bound_seen_at_mock)
{
    static const char job[] =
        "{\"name\":\"p\",\"input\":[1,2,3,4,5,6],\"steps\":[{\"name\":\"c\","
        "\"tiers\":[\"free\"],\"foreach\":{\"in\":\"{{input}}\","
        "\"parallelism\":2},\"request\":{\"messages\":[{\"role\":\"user\","
        "\"content\":\"n {{item}}\"}]}}]}";
    double at[16], end[16];
    int n, most = 0;
    cJSON *log, *o;
    const cJSON *q;

    e2e_start("{\"routes\":[{\"path\":\"/free\",\"latency_ms\":300,"
              "\"content\":\"done\"}]}",
              "");
    e2e_enqueue(job);
    e2e_drain_at("8");
    o = e2e_show(1);
    ck_assert_str_eq(e2e_str(o, "state"), "succeeded");
    cJSON_Delete(o);
    log = e2e_mock_log();
    n = 0;
    cJSON_ArrayForEach(q, log)
    {
        at[n] = cJSON_GetObjectItem(q, "ts_ms")->valuedouble;
        end[n] = at[n] + cJSON_GetObjectItem(q, "delay_ms")->valuedouble;
        n++;
    }
    ck_assert_int_eq(n, 6);
    for (int i = 0; i < n; i++) { /* in flight when request i arrived */
        int in = 0;
        for (int k = 0; k < n; k++)
            in += at[k] <= at[i] && end[k] > at[i];
        most = in > most ? in : most;
    }
    ck_assert_int_eq(most, 2); /* never more, and the bound was used */
    cJSON_Delete(log);
}
END_TEST

/* ---- a parked element does not stop the others ---------------------- */

START_TEST(test_parked_element_others_succeed)
{
    struct run_result r;
    cJSON *o, *out;
    const cJSON *els;

    e2e_start("{\"content\":\"ok\",\"routes\":[{\"path\":\"/items/1\","
              "\"loop\":true,\"answers\":[{\"status\":500,\"body\":\"boom\"}]}"
              "]}",
              "");
    ENQUEUE_ITEMS(",\"parallelism\":2", "", 5);
    free(e2e_drain()); /* ends: only a parked element is left */
    o = e2e_show(1);
    ck_assert_str_eq(e2e_str(o, "state"), "queued");
    ck_assert_str_eq(e2e_str(e2e_step_of(o, 0), "state"), "running");
    els = cJSON_GetObjectItem(e2e_step_of(o, 0), "elements");
    ck_assert_int_eq(cJSON_GetArraySize(els), 5);
    for (int k = 0; k < 5; k++)
        ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(els, k), "state"),
                         k == 1 ? "parked" : "succeeded");
    cJSON_Delete(o);
    /* The element's own park item, with its own job; done by hand. */
    free(tmpdir_write(e2e_dir, "out.json", "{\"path\":\"by hand\"}", 18));
    ck_assert_msg(RUN(&r, NULL, "park", "resolve", "1", "--done", "--output",
                      "out.json") == 0,
                  "%s", r.err);
    run_result_free(&r);
    free(e2e_drain());
    o = e2e_show(1);
    ck_assert_str_eq(e2e_str(o, "state"), "succeeded");
    out = output_of(o, 0);
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(out, 1), "path"), "by hand");
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(out, 4), "path"), "/items/4");
    cJSON_Delete(out);
    cJSON_Delete(o);
}
END_TEST

/* A failed element fails the job once the others ended, naming it. */
START_TEST(test_failed_element_fails_job_after_others)
{
    cJSON *o, *log;

    e2e_start("{\"content\":\"ok\",\"routes\":[{\"path\":\"/items/0\","
              "\"loop\":true,\"answers\":[{\"status\":404,\"body\":\"gone\"}]}"
              "]}",
              "");
    ENQUEUE_ITEMS(",\"parallelism\":1", "", 3);
    free(e2e_drain());
    o = e2e_show(1);
    ck_assert_str_eq(e2e_str(o, "state"), "failed");
    ck_assert_msg(
        strstr(e2e_str(o, "error"), "step post: element 0 (job 2): ") != NULL,
        "%s", e2e_str(o, "error"));
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/items/2"), 1); /* the others ran */
    cJSON_Delete(log);
    cJSON_Delete(o);
}
END_TEST

/* ---- kill -9 mid-foreach -------------------------------------------- */

START_TEST(test_kill9_resumes_without_resending_committed)
{
    cJSON *o, *log;
    char path[32];
    pid_t pid;
    int twice = 0;

    e2e_start("{\"content\":\"ok\",\"routes\":[{\"path\":\"/items\","
              "\"latency_ms\":150}]}",
              "");
    ENQUEUE_ITEMS(",\"parallelism\":2",
                  ",\"idempotency_key\":\"item-{{it.n}}\"", 8);
    pid = e2e_spawn_worker("--drain");
    e2e_wait_for_requests(4, 20000);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(e2e_wait_exit(pid), 128 + SIGKILL);
    free(e2e_drain());
    o = e2e_show(1);
    ck_assert_str_eq(e2e_str(o, "state"), "succeeded");
    expect_in_order(o, 8);
    cJSON_Delete(o);
    ck_assert(job_exists(9) && !job_exists(10)); /* 8 elements: 2..9 */
    log = e2e_mock_log();
    for (int k = 0; k < 8; k++) {
        snprintf(path, sizeof(path), "/items/%d", k);
        ck_assert_int_ge(e2e_sent_to(log, path), 1);
        ck_assert_int_le(e2e_sent_to(log, path), 2);
        twice += e2e_sent_to(log, path) == 2;
    }
    /* Only what was in flight at the kill went again, with its key. */
    ck_assert_int_le(twice, 2);
    ck_assert_str_eq(key_at(log, "/items/3"), "item-3");
    cJSON_Delete(log);
}
END_TEST

/* Cancelling the foreach job cancels its elements that have not ended. */
START_TEST(test_cancel_cancels_elements)
{
    struct run_result r;
    cJSON *o;
    pid_t pid;

    e2e_start("{\"content\":\"ok\",\"routes\":[{\"path\":\"/items\","
              "\"latency_ms\":3000}]}",
              "");
    ENQUEUE_ITEMS(",\"parallelism\":2", "", 5);
    pid = e2e_spawn_worker("--drain");
    e2e_wait_for_requests(2, 20000);
    ck_assert_msg(RUN(&r, NULL, "jobs", "cancel", "1") == 0, "%s", r.err);
    run_result_free(&r);
    ck_assert_int_eq(e2e_wait_exit(pid), 0);
    for (int id = 1; id <= 3; id++) {
        o = e2e_show(id);
        ck_assert_str_eq(e2e_str(o, "state"), "cancelled");
        cJSON_Delete(o);
    }
    ck_assert(!job_exists(4)); /* the next ones were never made */
}
END_TEST

/* ---- "when" per element --------------------------------------------- */

START_TEST(test_when_per_element)
{
    static const char job[] =
        "{\"name\":\"w\",\"input\":{\"items\":[{\"n\":0,\"k\":\"bug\"},"
        "{\"n\":1,\"k\":\"idea\"},{\"n\":2,\"k\":\"bug\"}]},\"steps\":["
        "{\"name\":\"post\",\"kind\":\"http\",\"when\":{\"eq\":[\"{{item.k}}\","
        "\"bug\"]},\"foreach\":{\"in\":\"{{input.items}}\"},\"http\":{\"url\":"
        "\"http://127.0.0.1:%d/items/{{item.n}}\"}},"
        "{\"name\":\"none\",\"kind\":\"http\",\"when\":{\"eq\":[\"{{input.x}}"
        "\","
        "1]},\"foreach\":{\"in\":\"{{input.items}}\"},\"http\":{\"url\":"
        "\"http://127.0.0.1:%d/never\"}}]}";
    char text[1024];
    cJSON *o, *out, *log;

    e2e_start("{\"content\":\"ok\"}", "");
    snprintf(text, sizeof(text), job, e2e_mock.port, e2e_mock.port);
    e2e_enqueue(text);
    free(e2e_drain());
    o = e2e_show(1);
    ck_assert_str_eq(e2e_str(o, "state"), "succeeded");
    out = output_of(o, 0);
    ck_assert_int_eq(cJSON_GetArraySize(out), 3);
    ck_assert(cJSON_IsNull(cJSON_GetArrayItem(out, 1)));
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(out, 2), "path"), "/items/2");
    /* a "when" that does not read the element is the step's */
    ck_assert_str_eq(e2e_str(e2e_step_of(o, 1), "state"), "skipped");
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 2);
    cJSON_Delete(log);
    cJSON_Delete(out);
    cJSON_Delete(o);
}
END_TEST

/* ---- examples/triage-agent.json: an agent per element ------------------ */

/* The text of the source tree's file rel with every from replaced by to.
 * Caller frees. */
static char *
example(const char *rel, const char *from, const char *to)
{
    char *path = source_path(rel), *text = malloc(65536), *out, *o, *p;
    FILE *f = fopen(path, "r");
    size_t n;

    ck_assert_ptr_nonnull(f);
    n = fread(text, 1, 65535, f);
    fclose(f);
    free(path);
    text[n] = '\0';
    out = o = malloc(2 * n + 1);
    for (p = text; *p != '\0';) {
        if (strncmp(p, from, strlen(from)) == 0) {
            o += sprintf(o, "%s", to);
            p += strlen(from);
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    free(text);
    return out;
}

/* The chat requests the mock logged: each element's conversation holds
 * its own issue and never the other's. */
static void
expect_own_conversations(const cJSON *log)
{
    const cJSON *q;
    int chats = 0;

    cJSON_ArrayForEach(q, log)
    {
        cJSON *b =
            strcmp(e2e_str(q, "kind"), "chat") == 0 ? e2e_body_of(q) : NULL;
        char *text = b ? cJSON_PrintUnformatted(b) : NULL;
        if (text == NULL)
            continue;
        chats++;
        ck_assert_msg((strstr(text, "#1234") != NULL) !=
                          (strstr(text, "#1235") != NULL),
                      "%s", text);
        free(text);
        cJSON_Delete(b);
    }
    ck_assert_int_eq(chats, 6); /* 3 turns a conversation */
}

START_TEST(test_example_triage_agent_per_issue)
{
    char port[32], *job, *script;
    struct run_result r;
    cJSON *o, *log, *out;

    script = example("examples/mock-triage.json", "\"/v1\"", "\"/local\"");
    e2e_start(script, "");
    snprintf(port, sizeof(port), "127.0.0.1:%d", e2e_mock.port);
    job = example("examples/triage-agent.json", "127.0.0.1:8080", port);
    e2e_enqueue(job);
    free(e2e_drain()); /* both comments wait for approval */
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/issues/1234/labels/bug"), 1);
    ck_assert_int_eq(e2e_sent_to(log, "/issues/1235/labels/p1"), 1);
    /* the tool's idempotency key reads the element */
    ck_assert_str_eq(key_at(log, "/issues/1235/labels/p1"),
                     "issue-1235-label-p1");
    ck_assert_int_eq(e2e_sent_to(log, "/issues/1234/comments"), 0);
    cJSON_Delete(log);
    for (int i = 1; i <= 2; i++) {
        char id[8];
        snprintf(id, sizeof(id), "%d", i);
        ck_assert_msg(RUN(&r, NULL, "park", "resolve", id, "--approve") == 0,
                      "%s", r.err);
        run_result_free(&r);
    }
    free(e2e_drain());
    o = e2e_show(1);
    ck_assert_str_eq(e2e_str(o, "state"), "succeeded");
    out = output_of(o, 0);
    ck_assert_int_eq(cJSON_GetArraySize(out), 2);
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/issues/1234/comments"), 1);
    ck_assert_int_eq(e2e_sent_to(log, "/issues/1235/comments"), 1);
    ck_assert_int_eq(e2e_sent_to(log, "/issues/1234/labels/bug"), 1);
    expect_own_conversations(log);
    cJSON_Delete(log);
    cJSON_Delete(out);
    cJSON_Delete(o);
    free(job);
    free(script);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("foreach");
    TCase *flow = tcase_create("flow");

    tcase_add_checked_fixture(flow, e2e_setup, e2e_teardown);
    tcase_set_timeout(flow, 60);
    tcase_add_test(flow, test_outputs_in_order_read_by_next_step);
    tcase_add_test(flow, test_each_element_a_keyed_job);
    tcase_add_test(flow, test_parallelism_bound_seen_at_mock);
    tcase_add_test(flow, test_parked_element_others_succeed);
    tcase_add_test(flow, test_failed_element_fails_job_after_others);
    tcase_add_test(flow, test_kill9_resumes_without_resending_committed);
    tcase_add_test(flow, test_cancel_cancels_elements);
    tcase_add_test(flow, test_when_per_element);
    tcase_add_test(flow, test_example_triage_agent_per_issue);
    suite_add_tcase(s, flow);
    return s;
}

/* test_agent_soak.c: the agent crash soak of issue 41 with two workers on
 * PostgreSQL (the suite runs on the test cluster only). 200 agent jobs,
 * each a model that calls, in one turn, a read-only tool, a side-effecting
 * tool with an idempotency key and one without, then, in a second turn, a
 * tool that needs approval in one job of four. Two real workers share the
 * store; one of them, picked at random, is killed -9 at a random moment
 * (after a random number of requests) thirty times, and started again.
 *
 * Invariants: no job is lost; every job ends succeeded, or parked with an
 * open item (in_doubt, approval), or failed with a reason; a side-effecting
 * call without a key is never sent twice without a human; every keyed call
 * carries its own key (the server's dedupe makes it one effect per key);
 * a call that needs approval is never sent without one.
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
#include "common/xalloc.h"
#include "tests/support/e2e.h"

#define JOBS  200
#define KILLS 30

#define CALL(name, args) "{\"name\": \"" name "\", \"arguments\": " args "}"

/* The tool server (/slow) and the model (/free): one turn with three
 * calls at once, then one that asks for a review, then the answer. */
#define SOAK_SCRIPT                                                            \
    "{\"routes\": [{\"path\": \"/slow\", \"latency_ms\": 100},"                \
    " {\"path\": \"/free\", \"echo_tool_results\": true,"                      \
    " \"tool_turns\": [[" CALL("lookup", "{}") ", " CALL(                      \
        "add_label",                                                           \
        "{\"label\": \"bug\"}") ", " CALL("post_note",                         \
                                          "{}") "], [" CALL("request_review",  \
                                                            "{}") "]]}]}"

/* The tools of job i: paths of its own under /slow, so that the mock's
 * log tells jobs apart. Returns a step's "tools" array's inside. */
static void
tools_of(int i, char *buf, size_t len)
{
    snprintf(
        buf, len,
        "{\"name\": \"lookup\", \"parameters\": {\"type\": \"object\"},"
        " \"replayable\": true, \"side_effects\": false, \"action\":"
        " {\"http\": {\"method\": \"GET\", \"url\":"
        " \"http://127.0.0.1:%d/slow/j%d/lookup\"}}},"
        " {\"name\": \"add_label\", \"parameters\": {\"type\": \"object\","
        " \"properties\": {\"label\": {\"type\": \"string\"}}},"
        " \"idempotency_key\": \"j%d-{{args.label}}\", \"action\":"
        " {\"http\": {\"method\": \"POST\", \"url\":"
        " \"http://127.0.0.1:%d/slow/j%d/label\"}}},"
        " {\"name\": \"post_note\", \"parameters\": {\"type\": \"object\"},"
        " \"action\": {\"http\": {\"method\": \"POST\", \"url\":"
        " \"http://127.0.0.1:%d/slow/j%d/note\"}}},"
        " {\"name\": \"request_review\", \"parameters\": {\"type\":"
        " \"object\"}, \"needs_approval\": \"%s\", \"idempotency_key\":"
        " \"j%d-review\", \"action\": {\"http\": {\"method\": \"POST\","
        " \"url\": \"http://127.0.0.1:%d/slow/j%d/review\"}}}",
        e2e_mock.port, i, i, e2e_mock.port, i, e2e_mock.port, i,
        i % 4 == 0 ? "always" : "never", i, e2e_mock.port, i);
}

/* Enqueues the JOBS agent jobs in one call. */
static void
enqueue_all(void)
{
    size_t cap = (size_t)JOBS * 2048, used = 0;
    char *text = xmalloc(cap), tools[1800];

    used += (size_t)snprintf(text, cap, "[");
    for (int i = 0; i < JOBS; i++) {
        tools_of(i, tools, sizeof(tools));
        used += (size_t)snprintf(
            text + used, cap - used,
            "%s{\"name\": \"agent-%d\", \"steps\": [{\"name\": \"a\","
            " \"tools\": [%s], \"request\": {\"messages\": [{\"role\":"
            " \"user\", \"content\": \"triage %d\"}]}}]}",
            i ? ", " : "", i, tools, i);
    }
    snprintf(text + used, cap - used, "]");
    e2e_enqueue(text);
    free(text);
}

/* The requests the mock logged so far: the lines of mock.log. */
static int
logged(void)
{
    FILE *f = fopen("mock.log", "r");
    int n = 0, c;

    if (f == NULL)
        return 0;
    while ((c = getc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

static pid_t
spawn(void)
{
    return e2e_spawn_workerv((const char *[]){"--concurrency", "100", NULL});
}

/* Waits until the mock logged n requests, or 1 s passed (the run may be
 * all but done, or waiting for a dead worker's leases); returns the
 * requests logged then. */
static int
wait_logged(int n)
{
    int64_t end = clock_mono_ms() + 1000;
    int got;

    while ((got = logged()) < n && clock_mono_ms() < end)
        poll(NULL, 0, 10);
    return got;
}

/* The requests of the log to exactly path, and, for keyed ones, whether
 * each carried key. */
static int
sent_to(const cJSON *log, const char *path, const char *key, bool *keyed)
{
    const cJSON *req;
    int n = 0;

    cJSON_ArrayForEach(req, log)
    {
        const char *k = e2e_str(req, "idempotency_key");
        if (strcmp(e2e_str(req, "path"), path) != 0)
            continue;
        n++;
        if (key != NULL && (k == NULL || strcmp(k, key) != 0))
            *keyed = false;
    }
    return n;
}

/* The open park items' reasons by job id (1-based; "" when none). */
static void
open_items(char reasons[JOBS + 1][16])
{
    struct run_result r;
    cJSON *items;
    const cJSON *it;

    for (int i = 0; i <= JOBS; i++)
        reasons[i][0] = '\0';
    ck_assert_int_eq(RUN_ARGS(&r, "park", "list", "--json"), 0);
    items = cJSON_Parse(r.out);
    run_result_free(&r);
    cJSON_ArrayForEach(it, items)
    {
        int job = (int)cJSON_GetObjectItem(it, "job_id")->valuedouble;
        ck_assert(job >= 1 && job <= JOBS);
        snprintf(reasons[job], sizeof(reasons[job]), "%s",
                 e2e_str(it, "reason"));
    }
    cJSON_Delete(items);
}

/* Checks job i (id i + 1, as listed: job) against the invariants;
 * counts its end. */
static void
check_job(int i, const cJSON *job, const cJSON *log, char reasons[JOBS + 1][16],
          int *ok, int *parked)
{
    char path[64], key[32];
    const char *st = e2e_str(job, "state");
    bool keyed = true;

    ck_assert_int_eq((int)cJSON_GetObjectItem(job, "id")->valuedouble, i + 1);
    snprintf(path, sizeof(path), "/slow/j%d/note", i);
    ck_assert_msg(sent_to(log, path, NULL, NULL) <= 1,
                  "job %d: a note without a key sent twice", i);
    snprintf(path, sizeof(path), "/slow/j%d/label", i);
    snprintf(key, sizeof(key), "j%d-bug", i);
    sent_to(log, path, key, &keyed);
    ck_assert_msg(keyed, "job %d: a label without its key", i);
    snprintf(path, sizeof(path), "/slow/j%d/review", i);
    if (i % 4 == 0)
        ck_assert_msg(sent_to(log, path, NULL, NULL) == 0,
                      "job %d: sent without approval", i);
    if (strcmp(st, "succeeded") == 0) {
        ck_assert_msg(i % 4 != 0, "job %d succeeded unapproved", i);
        (*ok)++;
    } else if (strcmp(st, "parked") == 0) {
        ck_assert_msg(strcmp(reasons[i + 1], "in_doubt") == 0 ||
                          strcmp(reasons[i + 1], "approval") == 0,
                      "job %d parked with item '%s'", i, reasons[i + 1]);
        (*parked)++;
    } else {
        cJSON *shown = e2e_show(i + 1); /* the list leaves the error out */
        ck_assert_msg(strcmp(st, "failed") == 0 && e2e_str(shown, "error"),
                      "job %d: %s", i, st);
        cJSON_Delete(shown);
    }
}

START_TEST(test_agent_soak_two_workers)
{
    unsigned seed = (unsigned)getpid();
    pid_t w[2];
    int seen = 0, kills = 0, ok = 0, parked = 0, looked = 0, hit = 0;
    static char reasons[JOBS + 1][16];
    struct run_result r;
    cJSON *log, *jobs;

    e2e_start(SOAK_SCRIPT, "");
    enqueue_all();
    w[0] = spawn();
    w[1] = spawn();
    for (int k = 0; k < KILLS; k++) {
        int which = (int)(rand_r(&seed) % 2);
        seen = wait_logged(seen + 1 + (int)(rand_r(&seed) % 30));
        kill(w[which], SIGKILL);
        kills += e2e_wait_exit(w[which]) == 128 + SIGKILL;
        w[which] = spawn();
    }
    for (int i = 0; i < 2; i++) {
        kill(w[i], SIGKILL);
        e2e_wait_exit(w[i]);
    }
    free(e2e_drain());
    ck_assert_int_eq(kills, KILLS);
    open_items(reasons);
    log = e2e_mock_log();
    ck_assert_int_eq(RUN_ARGS(&r, "jobs", "list", "--json"), 0);
    jobs = cJSON_Parse(r.out);
    run_result_free(&r);
    ck_assert_int_eq(cJSON_GetArraySize(jobs), JOBS); /* none lost */
    for (int i = 0; i < JOBS; i++)
        check_job(i, cJSON_GetArrayItem(jobs, i), log, reasons, &ok, &parked);
    cJSON_Delete(jobs);
    /* Not vacuous: most loops ran their first turn's calls (jobs, not
     * requests: a replay after a kill counts once), the kills hit work in
     * flight (a lookup sent again, or a job parked in doubt), and the jobs
     * that need approval parked. How many succeed depends on where the
     * kills fell: the agents run in step, so one kill while the notes are
     * out parks most of them. */
    for (int i = 0; i < JOBS; i++) {
        char path[64];
        int n;
        snprintf(path, sizeof(path), "/slow/j%d/lookup", i);
        n = sent_to(log, path, NULL, NULL);
        looked += n > 0;
        hit += n > 1 || strcmp(reasons[i + 1], "in_doubt") == 0;
    }
    ck_assert_msg(looked >= JOBS / 2 && hit > 0,
                  "%d jobs looked up, %d hit by a kill; %d succeeded, %d "
                  "parked (seed %u)",
                  looked, hit, ok, parked, (unsigned)getpid());
    ck_assert_int_ge(parked, JOBS / 4);
    cJSON_Delete(log);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("agent_soak");
    TCase *tc = tcase_create("soak");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, test_agent_soak_two_workers);
    suite_add_tcase(s, tc);
    return s;
}

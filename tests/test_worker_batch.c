/* test_worker_batch.c: a tier in batch mode, end to end (docs/reference.md
 * "Batches"), with the real `stepq mock` (both providers' batch APIs), the
 * real worker and a real store: a batch submitted and each result applied
 * to its job in its own ledger row at the batch price; a worker killed
 * with SIGKILL mid-poll, restarted, the batch found again and each result
 * applied once (the mock's log shows one submission); the state a worker
 * killed between recording a batch and keeping its provider id leaves,
 * found by its metadata, or not found and its steps sent realtime; an
 * expired and an errored item retried on the realtime tier; steps that
 * must not be replayed, or whose slack is too short, never batched. Runs
 * on SQLite and (test_worker_batch_pg) PostgreSQL. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "queue/batch.h"
#include "queue/queue.h"
#include "queue/report.h"
#include "tests/support/batchcl.h"
#include "tests/support/e2e.h"

/* $1 and $2 a million tokens in a batch: 1,000 and 2,000 nano-dollars a
 * token; the realtime tier bills twice that. */
#define CONFIG                                                                 \
    "{\"worker\": {\"lease_s\": 1},"                                           \
    " \"policy\": {\"backoff_base_s\": 0.05, \"backoff_cap_s\": 0.2},"         \
    " \"tiers\": [{\"name\": \"cheap\", \"base_url\": "                        \
    "\"http://127.0.0.1:%d/v1\", \"model\": \"m\", \"mode\": \"batch\","       \
    " \"batch\": {\"api\": \"%s\", \"gather_s\": 0.2, \"poll_s\": 0.1,"        \
    " \"expect_s\": %d}, \"timeout_s\": 5,"                                    \
    " \"price\": {\"input_per_mtok\": 1, \"output_per_mtok\": 2}},"            \
    " {\"name\": \"rt\", \"base_url\": \"http://127.0.0.1:%d/v1\","            \
    " \"model\": \"m\", \"timeout_s\": 5,"                                     \
    " \"price\": {\"input_per_mtok\": 2, \"output_per_mtok\": 4}}]}"

#define JOB(name, extra)                                                       \
    "{\"name\":\"" name "\",\"deadline_s\":600,\"steps\":[{\"name\":\"a\","    \
    "\"tiers\":[\"cheap\",\"rt\"]" extra ",\"request\":{\"messages\":[{"       \
    "\"role\":\"user\",\"content\":\"" name "\"}]}}]}\n"

/* Starts the mock on script, writes the config for api (a batch is
 * expected to take expect_s), inits the store. */
static void
start_expecting(const char *script, const char *api, int expect_s)
{
    const char *args[] = {"--script", "script.json", "--log", "mock.log", NULL};
    char cfg[2048];

    free(tmpdir_write(e2e_dir, "script.json", script, strlen(script)));
    mockproc_start(&e2e_mock, args);
    snprintf(cfg, sizeof(cfg), CONFIG, e2e_mock.port, api, expect_s,
             e2e_mock.port);
    free(tmpdir_write(e2e_dir, "stepq.json", cfg, strlen(cfg)));
    e2e_init();
}

static void
start(const char *script, const char *api)
{
    start_expecting(script, api, 60);
}

/* Logged requests of method whose path starts with prefix. */
static int
sent(const char *method, const char *prefix)
{
    cJSON *log = e2e_mock_log();
    const cJSON *it;
    int n = 0;

    cJSON_ArrayForEach(it, log)
    {
        const char *p = e2e_str(it, "path"), *m = e2e_str(it, "method");
        n += p && m && strcmp(m, method) == 0 &&
             strncmp(p, prefix, strlen(prefix)) == 0;
    }
    cJSON_Delete(log);
    return n;
}

/* Job id succeeded: the tiers of its step's attempts, in order
 * ("cheap", "cheap,rt"; static), the last one ok. */
static const char *
tiers_of(int id)
{
    static char got[128];
    cJSON *job = e2e_show(id);
    const cJSON *h, *hist = cJSON_GetObjectItem(e2e_step_of(job, 0), "history");

    got[0] = '\0';
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    cJSON_ArrayForEach(h, hist)
    {
        const cJSON *b = cJSON_GetObjectItem(h, "batch");
        if (got[0] != '\0')
            strcat(got, ",");
        strncat(got, e2e_str(h, "tier"), 32);
        /* jobs show names the batch of an attempt on the batch tier
         * (expect_one_batch: with its provider's id); none on rt */
        if (strcmp(e2e_str(h, "tier"), "cheap") == 0) {
            ck_assert_msg(cJSON_IsObject(b), "job %d: no batch named", id);
            ck_assert_int_gt(cJSON_GetObjectItem(b, "id")->valueint, 0);
        } else {
            ck_assert(cJSON_IsNull(b));
        }
    }
    h = cJSON_GetArrayItem(hist, cJSON_GetArraySize(hist) - 1);
    ck_assert_str_eq(e2e_str(h, "outcome"), "ok");
    cJSON_Delete(job);
    return got;
}

/* Jobs 1 to n went in one batch: jobs show names the same one for each
 * (the text form too). */
static void
expect_one_batch(int n)
{
    struct run_result r;
    char want[160] = "";

    for (int i = 1; i <= n; i++) {
        cJSON *job = e2e_show(i);
        const cJSON *b = cJSON_GetObjectItem(e2e_hist(job, 0, 0), "batch");
        char got[160];
        ck_assert_ptr_nonnull(e2e_str(b, "provider_id"));
        snprintf(got, sizeof(got), "in batch %d (%s at the provider)",
                 cJSON_GetObjectItem(b, "id")->valueint,
                 e2e_str(b, "provider_id"));
        if (i == 1)
            memcpy(want, got, sizeof(want));
        ck_assert_str_eq(got, want);
        cJSON_Delete(job);
    }
    ck_assert_int_eq(RUN(&r, NULL, "jobs", "show", "1"), 0);
    ck_assert_msg(strstr(r.out, want) != NULL, "no '%s' in: %s", want, r.out);
    run_result_free(&r);
}

static void
expect_job(int id, const char *tiers)
{
    const char *got = tiers_of(id);

    ck_assert_msg(strcmp(got, tiers) == 0, "job %d went to %s, not %s", id, got,
                  tiers);
}

/* report: the batch tier's items, their cost and, at the default
 * realtime price (twice the batch price), twice that realtime: saved the
 * cost again, and the tier's cost in the report is the same. */
static void
expect_saved(int items)
{
    struct run_result r;
    cJSON *rep, *b;
    double cost, tier_cost = -1;
    const cJSON *t;

    ck_assert_int_eq(RUN(&r, NULL, "report", "--json"), 0);
    rep = cJSON_Parse(r.out);
    run_result_free(&r);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(rep, "batches")),
                     1);
    b = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "batches"), 0);
    ck_assert_str_eq(e2e_str(b, "tier"), "cheap");
    ck_assert_int_eq(cJSON_GetObjectItem(b, "items")->valueint, items);
    cost = cJSON_GetObjectItem(b, "cost_usd")->valuedouble;
    ck_assert(cost > 0);
    ck_assert_double_eq_tol(cJSON_GetObjectItem(b, "realtime_usd")->valuedouble,
                            2 * cost, 1e-12);
    ck_assert_double_eq_tol(cJSON_GetObjectItem(b, "saved_usd")->valuedouble,
                            cost, 1e-12);
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(rep, "tiers"))
    {
        if (e2e_str(t, "tier") && strcmp(e2e_str(t, "tier"), "cheap") == 0)
            tier_cost = cJSON_GetObjectItem(t, "cost_usd")->valuedouble;
    }
    ck_assert_double_eq_tol(tier_cost, cost, 1e-12);
    cJSON_Delete(rep);
}

START_TEST(test_openai_batch_applies_each_result)
{
    cJSON *job;
    const cJSON *h;
    int tokens;
    int64_t nusd;

    start("{\"batch\": {\"delay_ms\": 200}}", "openai");
    e2e_enqueue(JOB("j1", "") JOB("j2", "") JOB("j3", ""));
    free(e2e_drain());
    for (int i = 1; i <= 3; i++)
        expect_job(i, "cheap");
    expect_one_batch(3);
    ck_assert_int_eq(sent("POST", "/v1/files"), 1);
    ck_assert_int_eq(sent("POST", "/v1/batches"), 1);
    ck_assert_int_eq(sent("POST", "/v1/chat/completions"), 0);
    /* Its cost is its usage at the batch price ($1 in, $2 out a million
     * tokens): between 1,000 and 2,000 nano-dollars a token, from the
     * usage the item reported. */
    job = e2e_show(1);
    h = e2e_hist(job, 0, 0);
    tokens = cJSON_GetObjectItem(h, "tokens")->valueint;
    nusd =
        (int64_t)(cJSON_GetObjectItem(h, "cost_usd")->valuedouble * 1e9 + 0.5);
    ck_assert_int_gt(tokens, 0);
    ck_assert_int_ge(nusd, (int64_t)tokens * 1000);
    ck_assert_int_le(nusd, (int64_t)tokens * 2000);
    ck_assert(!cJSON_IsTrue(cJSON_GetObjectItem(h, "cost_estimated")));
    cJSON_Delete(job);
    expect_saved(3);
}
END_TEST

START_TEST(test_anthropic_batch_applies_each_result)
{
    start("{\"batch\": {\"delay_ms\": 200}}", "anthropic");
    e2e_enqueue(JOB("j1", "") JOB("j2", ""));
    free(e2e_drain());
    expect_job(1, "cheap");
    expect_job(2, "cheap");
    ck_assert_int_eq(sent("POST", "/v1/messages/batches"), 1);
    /* polled, then its results read */
    ck_assert_int_ge(sent("GET", "/v1/messages/batches/"), 2);
    ck_assert_int_eq(sent("POST", "/v1/chat/completions"), 0);
}
END_TEST

/* Killed while its batch runs, the worker's jobs are taken by the next
 * one once their leases end: it joins the batch from the store, polls it
 * and applies each result once; nothing is submitted again. */
static void
kill_mid_poll(const char *api, const char *create)
{
    pid_t w;

    start("{\"batch\": {\"delay_ms\": 2500}}", api);
    e2e_enqueue(JOB("j1", "") JOB("j2", "") JOB("j3", ""));
    w = e2e_spawn_worker("--drain");
    while (sent("GET", create) < 2) /* created and polled twice */
        poll(NULL, 0, 20);
    kill(w, SIGKILL);
    e2e_wait_exit(w);
    free(e2e_drain());
    for (int i = 1; i <= 3; i++)
        expect_job(i, "cheap");
    ck_assert_int_eq(sent("POST", create), 1);
    ck_assert_int_eq(sent("POST", "/v1/chat/completions"), 0);
}

START_TEST(test_killed_mid_poll_openai)
{
    kill_mid_poll("openai", "/v1/batches");
}
END_TEST

START_TEST(test_killed_mid_poll_anthropic)
{
    kill_mid_poll("anthropic", "/v1/messages/batches");
}
END_TEST

/* What a worker killed between recording a batch and keeping its
 * provider id leaves: two jobs leased to a dead worker (leases ended), the
 * attempts of their step on tier cheap as items of a batch SUBMITTING
 * without a provider id, key KEY. Written through queue.h. */
static void
dead_worker_state(void)
{
    q_db *db = NULL;
    struct q_job *jobs = NULL;
    size_t n = 0;
    int64_t now, id = 0;

    e2e_enqueue(JOB("j1", "") JOB("j2", ""));
    now = clock_now_ms();
    ck_assert_int_eq(q_open(e2e_db, NULL, &db), 0);
    ck_assert_int_eq(q_claim(db, "dead", now, 1, 2, &jobs, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(q_batch_create(db, "cheap", "openai", "dead-key", "dead",
                                    now + 1, now, &id),
                     0);
    for (size_t i = 0; i < n; i++) {
        struct q_attempt_start st = {.job_id = jobs[i].id,
                                     .worker = "dead",
                                     .tier = "cheap",
                                     .request_sha256 = "x",
                                     .started_at = now};
        int64_t aid = 0;
        int num = 0;
        ck_assert_int_eq(q_attempt_begin(db, &st, &aid, &num), 0);
        ck_assert_int_eq(aid, jobs[i].id); /* a1, a2: bc_openai_batch's */
        ck_assert_int_eq(q_batch_item_add(db, id, aid, jobs[i].id, 0), 0);
    }
    q_jobs_free(jobs, n);
    ck_assert_int_eq(q_close(db), 0);
}

/* The create reached the provider: the next worker finds the batch by
 * its metadata and applies its results; nothing is submitted again. */
START_TEST(test_unrecorded_batch_found_by_metadata)
{
    cJSON *b;

    start("{\"batch\": {\"delay_ms\": 100}}", "openai");
    dead_worker_state();
    b = bc_openai_batch(e2e_mock.port, 2, "a",
                        "{\"stepq_batch\":\"dead-key\"}");
    cJSON_Delete(b);
    free(e2e_drain());
    expect_job(1, "cheap");
    expect_job(2, "cheap");
    /* the list, once (its query is logged apart from the path) */
    ck_assert_int_eq(sent("GET", "/v1/batches") - sent("GET", "/v1/batches/"),
                     1);
    ck_assert_int_eq(sent("POST", "/v1/batches"), 1); /* the test's own */
    ck_assert_int_eq(sent("POST", "/v1/files"), 1);   /* likewise */
    ck_assert_int_eq(sent("POST", "/v1/chat/completions"), 0);
}
END_TEST

/* The create never reached the provider: not found, the items are not
 * submitted again but go to the step's realtime tier. */
START_TEST(test_unrecorded_batch_not_found_goes_realtime)
{
    start("{\"batch\": {\"delay_ms\": 100}}", "openai");
    dead_worker_state();
    free(e2e_drain());
    expect_job(1, "cheap,rt");
    expect_job(2, "cheap,rt");
    ck_assert_int_eq(sent("POST", "/v1/batches"), 0);
    ck_assert_int_eq(sent("POST", "/v1/chat/completions"), 2);
}
END_TEST

/* An item that expired, and one that errored, go to the realtime tier;
 * the others are applied from the batch. */
static void
failed_items(const char *api)
{
    start("{\"batch\": {\"delay_ms\": 100, \"expire_ids\": [\"a2\"],"
          " \"error_ids\": [\"a3\"], \"error_status\": 500}}",
          api);
    int batched = 0, retried = 0;

    e2e_enqueue(JOB("j1", "") JOB("j2", "") JOB("j3", ""));
    free(e2e_drain());
    for (int i = 1; i <= 3; i++) {
        batched += strcmp(tiers_of(i), "cheap") == 0;
        retried += strcmp(tiers_of(i), "cheap,rt") == 0;
    }
    ck_assert_int_eq(batched, 1);
    ck_assert_int_eq(retried, 2);
    ck_assert_int_eq(sent("POST", "/v1/chat/completions"), 2);
}

START_TEST(test_failed_items_retried_realtime_openai)
{
    cJSON *job;
    int id = 1;

    failed_items("openai");
    while (strcmp(tiers_of(id), "cheap,rt") != 0)
        id++;
    job = e2e_show(id);
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "outcome"), "server_error");
    /* an expired item was not billed */
    ck_assert_int_eq((int)(cJSON_GetObjectItem(e2e_hist(job, 0, 0), "cost_usd")
                               ->valuedouble *
                           1e9),
                     0);
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_failed_items_retried_realtime_anthropic)
{
    failed_items("anthropic");
}
END_TEST

/* A step that must not be replayed, one with side effects and one whose
 * deadline leaves less than the batch's expected time go realtime at
 * once, and say why. */
START_TEST(test_unfit_steps_never_batched)
{
    cJSON *job;

    start("{\"batch\": {\"delay_ms\": 100}}", "openai");
    e2e_enqueue(JOB("j1", ",\"replayable\":false") JOB(
        "j2",
        ",\"side_effects\":true") "{\"name\":\"j3\",\"deadline_s\":30,"
                                  "\"steps\":[{"
                                  "\"name\":\"a\",\"tiers\":[\"cheap\",\"rt\"],"
                                  "\"request\":{\"messages\":[{\"role\":"
                                  "\"user\","
                                  "\"content\":\"j3\"}]}}]}\n");
    free(e2e_drain());
    for (int i = 1; i <= 3; i++)
        expect_job(i, "rt");
    ck_assert_int_eq(sent("POST", "/v1/files"), 0);
    ck_assert_int_eq(sent("POST", "/v1/batches"), 0);
    job = e2e_show(3);
    ck_assert_ptr_nonnull(
        strstr(e2e_str(e2e_hist(job, 0, 0), "route"), "a batch is expected"));
    cJSON_Delete(job);
}
END_TEST

/* A batch that has not ended by a job's deadline: the step's item is
 * answered as late, and with no time left the job fails; nothing is sent
 * realtime. */
START_TEST(test_deadline_passes_in_a_batch)
{
    cJSON *job;

    start_expecting("{\"batch\": {\"delay_ms\": 60000}}", "openai", 1);
    e2e_enqueue("{\"name\":\"j\",\"deadline_s\":3,\"steps\":[{\"name\":"
                "\"a\",\"tiers\":[\"cheap\",\"rt\"],\"request\":{"
                "\"messages\":[{\"role\":\"user\",\"content\":\"j\"}]}}]}");
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "failed");
    ck_assert_ptr_nonnull(strstr(e2e_str(job, "error"), "deadline_passed"));
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "tier"), "cheap");
    ck_assert_ptr_nonnull(
        strstr(e2e_str(e2e_hist(job, 0, 0), "body"), "batch_late"));
    ck_assert_int_eq(
        cJSON_GetArraySize(cJSON_GetObjectItem(e2e_step_of(job, 0), "history")),
        1);
    cJSON_Delete(job);
    ck_assert_int_eq(sent("POST", "/v1/batches"), 1);
    ck_assert_int_eq(sent("POST", "/v1/chat/completions"), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("worker: batch tier mode");
    TCase *ok = tcase_create("submitted");
    TCase *crash = tcase_create("crashes");
    TCase *bad = tcase_create("failures");

    tcase_add_checked_fixture(ok, e2e_setup, e2e_teardown);
    tcase_set_timeout(ok, 60);
    tcase_add_test(ok, test_openai_batch_applies_each_result);
    tcase_add_test(ok, test_anthropic_batch_applies_each_result);
    tcase_add_test(ok, test_unfit_steps_never_batched);
    suite_add_tcase(s, ok);
    tcase_add_checked_fixture(crash, e2e_setup, e2e_teardown);
    tcase_set_timeout(crash, 60);
    tcase_add_test(crash, test_killed_mid_poll_openai);
    tcase_add_test(crash, test_killed_mid_poll_anthropic);
    tcase_add_test(crash, test_unrecorded_batch_found_by_metadata);
    tcase_add_test(crash, test_unrecorded_batch_not_found_goes_realtime);
    suite_add_tcase(s, crash);
    tcase_add_checked_fixture(bad, e2e_setup, e2e_teardown);
    tcase_set_timeout(bad, 60);
    tcase_add_test(bad, test_failed_items_retried_realtime_openai);
    tcase_add_test(bad, test_failed_items_retried_realtime_anthropic);
    tcase_add_test(bad, test_deadline_passes_in_a_batch);
    suite_add_tcase(s, bad);
    return s;
}

/* test_jobs_retry.c: `stepq jobs retry` and POST /v1/jobs/ID/retry end to
 * end: jobs failed by the real worker against the real mock, retried with
 * the real binary (or the real server), and the worker running them
 * again; the mock's request log tells what was sent again and what was
 * not. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/e2e.h"
#include "tests/support/servefix.h"

#define STEPQ(r, ...) RUN_ARGS(r, __VA_ARGS__)

/* /two answers 400 once (a bad request: the job fails), then 200: the
 * endpoint is fixed by the time the job is retried. */
static const char fails_at_two[] =
    "{\"routes\":[{\"path\":\"/two\",\"answers\":[{\"status\":400,"
    "\"body\":\"bad n\"}]}]}";
/* The same of /three, after a side-effecting /post. */
static const char fails_at_three[] =
    "{\"routes\":[{\"path\":\"/three\",\"answers\":[{\"status\":400,"
    "\"body\":\"bad n\"}]}]}";

#define NOFX ",\"side_effects\":false"

/* An http step NAME to /PATH; fx: "" (side effects, as http steps have
 * by default) or NOFX. */
static void
step(char *buf, size_t len, const char *name, const char *path, const char *fx,
     const char *body)
{
    snprintf(buf, len,
             "{\"name\":\"%s\",\"kind\":\"http\"%s,\"http\":{\"url\":"
             "\"http://127.0.0.1:%d/%s\",\"body\":%s}}",
             name, fx, e2e_mock.port, path, body);
}

/* Enqueues a job of three http steps: one (/one), second (/PATH2, with
 * side effects unless fx2 is NOFX), third (/three, reading one's
 * output). */
static void
enqueue_three(const char *path2, const char *fx2)
{
    char a[512], b[512], c[512], job[2048];

    step(a, sizeof(a), "one", "one", NOFX, "{\"n\":1}");
    step(b, sizeof(b), "second", path2, fx2, "{\"n\":2}");
    step(c, sizeof(c), "third", "three", NOFX,
         "{\"first\":\"{{steps.one.output}}\"}");
    snprintf(job, sizeof(job),
             "{\"name\":\"three\",\"deadline_s\":7200,\"steps\":[%s,%s,%s]}", a,
             b, c);
    e2e_enqueue(job);
}

/* Runs the queue dry and checks job id's state. */
static void
drain_expect(int id, const char *state)
{
    cJSON *job;

    free(e2e_drain());
    job = e2e_show(id);
    ck_assert_str_eq(e2e_str(job, "state"), state);
    cJSON_Delete(job);
}

/* Checks a run's exit code and that its stderr says says (NULL: any). */
static void
expect(struct run_result *r, int rc, int code, const char *says)
{
    ck_assert_msg(rc == code, "exit %d, not %d: %s", rc, code, r->err);
    if (says != NULL)
        ck_assert_msg(strstr(r->err, says) != NULL, "stderr: %s", r->err);
    run_result_free(r);
}

static int
nretries(int id)
{
    cJSON *job = e2e_show(id);
    int n = cJSON_GetArraySize(cJSON_GetObjectItem(job, "retries"));

    cJSON_Delete(job);
    return n;
}

START_TEST(test_failed_job_retried_keeps_step_one)
{
    struct run_result r;
    const cJSON *rt;
    int64_t t0, deadline;
    cJSON *job, *out;
    char *one;

    e2e_start(fails_at_two, "");
    enqueue_three("two", NOFX);
    drain_expect(1, "failed");
    job = e2e_show(1);
    one = strdup(e2e_str(e2e_step_of(job, 0), "output"));
    cJSON_Delete(job);
    t0 = clock_now_ms();
    ck_assert_int_eq(STEPQ(&r, "jobs", "retry", "1", "--by", "ana", "--json"),
                     0);
    out = cJSON_Parse(r.out);
    ck_assert_str_eq(e2e_str(out, "state"), "queued");
    ck_assert_str_eq(e2e_str(out, "from"), "second");
    ck_assert_str_eq(e2e_str(out, "by"), "ana");
    cJSON_Delete(out);
    run_result_free(&r);
    job = e2e_show(1);
    ck_assert_int_eq(clock_parse_utc(e2e_str(job, "deadline_at"), &deadline),
                     0);
    ck_assert_msg(deadline >= t0 + 7199000, "deadline %lld s after",
                  (long long)((deadline - t0) / 1000));
    ck_assert_ptr_null(e2e_str(job, "error"));
    cJSON_Delete(job);
    drain_expect(1, "succeeded");
    ck_assert_int_eq(e2e_sent_to(NULL, "/one"), 1); /* not sent again */
    ck_assert_int_eq(e2e_sent_to(NULL, "/two"), 2);
    ck_assert_int_eq(e2e_sent_to(NULL, "/three"), 1);
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "output"), one);
    ck_assert_str_eq(e2e_str(e2e_hist(job, 1, 1), "decision"), "commit");
    /* the attempts name the retry they ran after: none for the first run */
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(e2e_hist(job, 0, 0), "retry")));
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(e2e_hist(job, 1, 0), "retry")));
    ck_assert_int_eq(
        cJSON_GetObjectItem(e2e_hist(job, 1, 1), "retry")->valueint, 1);
    ck_assert_int_eq(
        cJSON_GetObjectItem(e2e_hist(job, 2, 0), "retry")->valueint, 1);
    rt = cJSON_GetArrayItem(cJSON_GetObjectItem(job, "retries"), 0);
    ck_assert_str_eq(e2e_str(rt, "by"), "ana");
    ck_assert_str_eq(e2e_str(rt, "from"), "second");
    ck_assert_str_eq(e2e_str(rt, "state"), "failed");
    ck_assert_ptr_nonnull(strstr(e2e_str(rt, "error"), "HTTP 400"));
    cJSON_Delete(job);
    free(one);
}
END_TEST

/* The text of `jobs show` has the retry: who, from which step, and what
 * the job was before; and the attempts after it say so. */
START_TEST(test_retry_shown_in_text)
{
    struct run_result r;

    e2e_start(fails_at_two, "");
    enqueue_three("two", NOFX);
    drain_expect(1, "failed");
    expect(&r, STEPQ(&r, "jobs", "retry", "1", "--by", "bo"), 0, NULL);
    drain_expect(1, "succeeded");
    ck_assert_int_eq(STEPQ(&r, "jobs", "show", "1"), 0);
    ck_assert_msg(strstr(r.out, " by bo from step second (was failed: ") !=
                      NULL,
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "(retry 1, by bo)\n    #2 ") != NULL, "%s",
                  r.out);
    run_result_free(&r);
}
END_TEST

START_TEST(test_from_an_earlier_step)
{
    struct run_result r;

    e2e_start(fails_at_two, "");
    enqueue_three("two", NOFX);
    drain_expect(1, "failed");
    expect(&r, STEPQ(&r, "jobs", "retry", "1", "--from", "one"), 0, NULL);
    drain_expect(1, "succeeded");
    ck_assert_int_eq(e2e_sent_to(NULL, "/one"), 2);
    ck_assert_int_eq(e2e_sent_to(NULL, "/two"), 2);
    ck_assert_int_eq(e2e_sent_to(NULL, "/three"), 1);
    /* A succeeded job runs again only from a step it names. */
    expect(&r, STEPQ(&r, "jobs", "retry", "1"), 4, "--from STEP");
    expect(&r, STEPQ(&r, "jobs", "retry", "1", "--from", "third"), 0, NULL);
    drain_expect(1, "succeeded");
    ck_assert_int_eq(e2e_sent_to(NULL, "/one"), 2);
    ck_assert_int_eq(e2e_sent_to(NULL, "/two"), 2);
    ck_assert_int_eq(e2e_sent_to(NULL, "/three"), 2);
    ck_assert_int_eq(nretries(1), 2);
}
END_TEST

/* A side-effecting step that succeeded is not sent again by a retry from
 * an earlier step unless forced; a retry after it leaves it alone. */
START_TEST(test_side_effect_not_resent)
{
    struct run_result r;
    cJSON *job;

    e2e_start(fails_at_three, "");
    enqueue_three("post", "");
    drain_expect(1, "failed");
    expect(&r, STEPQ(&r, "jobs", "retry", "1", "--from", "one"), 4,
           "step second has side effects and it succeeded");
    job = e2e_show(1); /* nothing changed */
    ck_assert_str_eq(e2e_str(job, "state"), "failed");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(job, "retries")),
                     0);
    cJSON_Delete(job);
    expect(&r, STEPQ(&r, "jobs", "retry", "1"), 0, NULL);
    drain_expect(1, "succeeded");
    ck_assert_int_eq(e2e_sent_to(NULL, "/post"), 1);
    ck_assert_int_eq(e2e_sent_to(NULL, "/three"), 2);
    expect(&r, STEPQ(&r, "jobs", "retry", "1", "--from", "second"), 4,
           "--force-side-effects");
    expect(&r,
           STEPQ(&r, "jobs", "retry", "1", "--from", "second",
                 "--force-side-effects"),
           0, NULL);
    drain_expect(1, "succeeded");
    ck_assert_int_eq(e2e_sent_to(NULL, "/post"), 2);
    ck_assert_int_eq(e2e_sent_to(NULL, "/one"), 1);
}
END_TEST

START_TEST(test_wrong_states_and_unknown_ids)
{
    struct run_result r;

    e2e_start(fails_at_two, "");
    enqueue_three("two", NOFX);
    expect(&r, STEPQ(&r, "jobs", "retry", "1"), 4, "job 1 is queued");
    expect(&r, STEPQ(&r, "jobs", "retry", "9"), 3, "no job 9");
    expect(&r, STEPQ(&r, "jobs", "retry", "x"), 2, NULL);
    expect(&r, STEPQ(&r, "jobs", "retry"), 2, "which job");
    drain_expect(1, "failed");
    expect(&r, STEPQ(&r, "jobs", "retry", "1", "--from", "fourth"), 2,
           "job 1 has no step named fourth");
    expect(&r, STEPQ(&r, "jobs", "retry", "1", "--from", "third"), 2,
           "step third comes after step second, which has not succeeded");
    expect(&r, STEPQ(&r, "jobs", "retry", "1", "--by", " "), 2, "by");
    ck_assert_int_eq(nretries(1), 0); /* none of these changed anything */
    expect(&r, STEPQ(&r, "jobs", "retry", "1"), 0, NULL);
    expect(&r, STEPQ(&r, "jobs", "retry", "1"), 4, "job 1 is queued");
    ck_assert_int_eq(nretries(1), 1);
}
END_TEST

/* A cancelled job (cancelled before it ran) goes on from its start; one
 * parked is resolved, not retried. */
START_TEST(test_cancelled_and_parked)
{
    struct run_result r;

    e2e_start_file("comments-daily-wall-once.json", "");
    e2e_enqueue(E2E_CHAT_JOB("", ""));
    expect(&r, STEPQ(&r, "jobs", "cancel", "1"), 0, NULL);
    expect(&r, STEPQ(&r, "jobs", "retry", "1", "--json"), 0, NULL);
    drain_expect(1, "succeeded");
    enqueue_three("comments", ""); /* 429 daily wall: parked */
    drain_expect(2, "parked");
    expect(&r, STEPQ(&r, "jobs", "retry", "2"), 4, "park resolve");
}
END_TEST

/* A side-effecting step in flight when its job was cancelled has no
 * known answer: the endpoint may have acted on it, so a retry that would
 * send it again is refused unless forced. */
START_TEST(test_cancelled_mid_post_not_resent_blindly)
{
    static const char hangs[] =
        "{\"routes\":[{\"path\":\"/post\",\"answers\":[{\"fault\":"
        "\"hang\"}]}]}";
    struct run_result r;
    pid_t w;

    e2e_start(hangs, "");
    enqueue_three("post", "");
    w = e2e_spawn_worker("--grace=1");
    e2e_wait_for_requests(2, 10000); /* /one, then /post hangs */
    expect(&r, STEPQ(&r, "jobs", "cancel", "1"), 0, NULL);
    kill(w, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    expect(&r, STEPQ(&r, "jobs", "retry", "1"), 4,
           "step second has side effects and its last attempt was sent and "
           "has no known answer");
    ck_assert_int_eq(nretries(1), 0);
    expect(&r, STEPQ(&r, "jobs", "retry", "1", "--force-side-effects"), 0,
           NULL);
    drain_expect(1, "succeeded");
    ck_assert_int_eq(e2e_sent_to(NULL, "/one"), 1);
    ck_assert_int_eq(e2e_sent_to(NULL, "/post"), 2);
}
END_TEST

/* A post parked in doubt (its worker killed mid-request) and then failed
 * by an operator: a retry refuses to send it blindly; forced, it is sent
 * again, not parked again. */
START_TEST(test_in_doubt_post_failed_then_forced)
{
    static const char hangs[] =
        "{\"routes\":[{\"path\":\"/post\",\"answers\":[{\"fault\":"
        "\"hang\"}]}]}";
    struct run_result r;
    cJSON *job;
    pid_t w;

    e2e_start(hangs, "");
    enqueue_three("post", "");
    w = e2e_spawn_worker("--drain");
    e2e_wait_for_requests(2, 10000); /* /one, then /post hangs */
    kill(w, SIGKILL);
    ck_assert_int_eq(e2e_wait_exit(w), 128 + SIGKILL);
    drain_expect(1, "parked"); /* the post in doubt */
    expect(&r, STEPQ(&r, "park", "resolve", "1", "--fail"), 0, NULL);
    expect(&r, STEPQ(&r, "jobs", "retry", "1"), 4, "no known answer");
    expect(&r, STEPQ(&r, "jobs", "retry", "1", "--force-side-effects"), 0,
           NULL);
    drain_expect(1, "succeeded");
    ck_assert_int_eq(e2e_sent_to(NULL, "/post"), 2);
    job = e2e_show(1); /* the first attempt, as parking settled it */
    ck_assert_str_eq(e2e_str(e2e_hist(job, 1, 0), "outcome"), "unknown");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 1, 0), "reason"), "in_doubt");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 1, 1), "outcome"), "ok");
    cJSON_Delete(job);
}
END_TEST

/* A job cancelled less than a lease ago is due a lease after its cancel:
 * a worker that held it must have found its lease gone first. */
START_TEST(test_cancelled_job_due_after_a_lease)
{
    struct run_result r;
    int64_t t0, due;
    cJSON *out;

    e2e_start(fails_at_two, "");
    e2e_config(30, "");
    enqueue_three("two", NOFX);
    t0 = clock_now_ms();
    expect(&r, STEPQ(&r, "jobs", "cancel", "1"), 0, NULL);
    ck_assert_int_eq(STEPQ(&r, "jobs", "retry", "1", "--json"), 0);
    out = cJSON_Parse(r.out);
    ck_assert_int_eq(clock_parse_utc(e2e_str(out, "run_at"), &due), 0);
    ck_assert_msg(due >= t0 + 29000 && due <= clock_now_ms() + 30000,
                  "due %lld ms after the cancel", (long long)(due - t0));
    cJSON_Delete(out);
    run_result_free(&r);
    ck_assert_int_eq(STEPQ(&r, "jobs", "show", "1", "--json"), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "\"state\":\"queued\""));
    run_result_free(&r);
}
END_TEST

/* Ten retries of one job at once: one wins, nine exit 4, one retry is
 * recorded. */
START_TEST(test_racing_retries_one_wins)
{
    e2e_start(fails_at_two, "");
    enqueue_three("two", NOFX);
    drain_expect(1, "failed");
    ck_assert_int_eq(e2e_race(10, (const char *[]){"jobs", "retry", "1", NULL}),
                     1); /* the nine others exit 4 */
    ck_assert_int_eq(nretries(1), 1);
    drain_expect(1, "succeeded");
    ck_assert_int_eq(e2e_sent_to(NULL, "/two"), 2);
}
END_TEST

/* The API answers as the CLI does: the same JSON for the same retry of
 * two like jobs (but the id and the time), and the reference's codes. */
START_TEST(test_api_same_as_cli)
{
    struct run_result r;
    struct server s;
    cJSON *cli, *api;
    int status;

    e2e_start(fails_at_two, "");
    enqueue_three("two", NOFX);
    drain_expect(1, "failed");
    enqueue_three("two", NOFX);
    free(e2e_drain());
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    /* Job 1 failed, job 2 succeeded (/two's 400 went to job 1): both
     * are retried from their first step, which gives the same answer. */
    ck_assert_int_eq(STEPQ(&r, "jobs", "retry", "1", "--by", "api", "--from",
                           "one", "--json"),
                     0);
    cli = cJSON_Parse(r.out);
    run_result_free(&r);
    api = serve_call(&s, "POST", "/v1/jobs/2/retry", "{\"from\": \"one\"}",
                     &status);
    ck_assert_int_eq(status, 200);
    cJSON_ReplaceItemInObject(api, "id", cJSON_CreateNumber(1));
    cJSON_ReplaceItemInObject(
        api, "run_at",
        cJSON_Duplicate(cJSON_GetObjectItem(cli, "run_at"), true));
    ck_assert_msg(cJSON_Compare(cli, api, true), "%s vs %s",
                  cJSON_PrintUnformatted(cli), cJSON_PrintUnformatted(api));
    cJSON_Delete(cli);
    cJSON_Delete(api);
    serve_same_as_cli(&s, "/v1/jobs/2",
                      (const char *[]){"jobs", "show", "2", "--json", NULL});
    api = serve_call(&s, "POST", "/v1/jobs/2/retry", NULL, &status);
    ck_assert_int_eq(status, 409);
    cJSON_Delete(api);
    api = serve_call(&s, "POST", "/v1/jobs/9/retry", "{}", &status);
    ck_assert_int_eq(status, 404);
    cJSON_Delete(api);
    api = serve_call(&s, "POST", "/v1/jobs/2/retry", "{\"form\": \"one\"}",
                     &status);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(serve_error_code(api), "bad_request");
    cJSON_Delete(api);
    serve_stop(&s);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("jobs_retry");
    TCase *tc = tcase_create("retry");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_failed_job_retried_keeps_step_one);
    tcase_add_test(tc, test_retry_shown_in_text);
    tcase_add_test(tc, test_from_an_earlier_step);
    tcase_add_test(tc, test_side_effect_not_resent);
    tcase_add_test(tc, test_wrong_states_and_unknown_ids);
    tcase_add_test(tc, test_cancelled_and_parked);
    tcase_add_test(tc, test_cancelled_mid_post_not_resent_blindly);
    tcase_add_test(tc, test_cancelled_job_due_after_a_lease);
    tcase_add_test(tc, test_in_doubt_post_failed_then_forced);
    tcase_add_test(tc, test_racing_retries_one_wins);
    tcase_add_test(tc, test_api_same_as_cli);
    suite_add_tcase(s, tc);
    return s;
}

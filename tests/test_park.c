/* test_park.c: the operators' review end to end: steps parked by a real
 * worker against the real mock, then listed, shown and resolved with the
 * real binary, and the worker carrying each resolution out. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/file.h"
#include "tests/support/e2e.h"

/* The post meets a daily wall once (then the mock answers 200); the
 * chat step after it uses the post's output. */

static void
enqueue_post_then_chat(void)
{
    char job[1024];

    snprintf(job, sizeof(job),
             "{\"name\":\"p\",\"steps\":["
             "{\"name\":\"post\",\"kind\":\"http\",\"http\":{\"url\":"
             "\"http://127.0.0.1:%d/comments\",\"body\":{\"t\":\"x\"}}},"
             "{\"name\":\"after\",\"request\":{\"messages\":[{\"role\":"
             "\"user\",\"content\":\"saw [{{steps.post.output}}]\"}]}}]}",
             e2e_mock.port);
    e2e_enqueue(job);
}

#define STEPQ(r, ...) RUN_ARGS(r, __VA_ARGS__)

static void
park_one(void)
{
    cJSON *job;

    e2e_start_file("comments-daily-wall-once.json", "");
    enqueue_post_then_chat();
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "parked");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(job, "park")), 1);
    cJSON_Delete(job);
}

static cJSON *
park_list_json(bool all)
{
    struct run_result r;
    cJSON *o;

    if (all)
        ck_assert_int_eq(STEPQ(&r, "park", "list", "--all", "--json"), 0);
    else
        ck_assert_int_eq(STEPQ(&r, "park", "list", "--json"), 0);
    o = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(o);
    run_result_free(&r);
    return o;
}

START_TEST(test_list_and_show)
{
    struct run_result r;
    cJSON *arr, *it, *show;
    const cJSON *step;
    char url[128], line[160];

    park_one();
    arr = park_list_json(false);
    ck_assert_int_eq(cJSON_GetArraySize(arr), 1);
    it = cJSON_GetArrayItem(arr, 0);
    ck_assert_int_eq(cJSON_GetObjectItem(it, "job_id")->valueint, 1);
    ck_assert_str_eq(e2e_str(it, "step"), "post");
    ck_assert_str_eq(e2e_str(it, "reason"), "hard_quota");
    ck_assert_str_eq(e2e_str(it, "state"), "open");
    ck_assert_int_eq(cJSON_GetObjectItem(it, "attempts")->valueint, 1);
    ck_assert_int_eq(strlen(e2e_str(it, "request_sha256")), 64);
    ck_assert_ptr_nonnull(strstr(e2e_str(it, "error"), "HTTP 429"));
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(it, "resolution")));
    cJSON_Delete(arr);
    ck_assert_int_eq(STEPQ(&r, "park", "show", "1", "--json"), 0);
    show = cJSON_Parse(r.out);
    ck_assert_str_eq(e2e_str(show, "request"), "{\"t\":\"x\"}");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(show, "side_effects")));
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(show, "idempotency_key")));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(show, "history")),
                     1);
    /* where the post goes, without the job file */
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/comments", e2e_mock.port);
    ck_assert_str_eq(e2e_str(cJSON_GetObjectItem(show, "http"), "method"),
                     "POST");
    ck_assert_str_eq(e2e_str(cJSON_GetObjectItem(show, "http"), "url"), url);
    cJSON_Delete(show);
    run_result_free(&r);
    ck_assert_int_eq(STEPQ(&r, "park", "show", "1"), 0);
    snprintf(line, sizeof(line), "sends     POST %s\n", url);
    ck_assert_ptr_nonnull(strstr(r.out, line));
    run_result_free(&r);
    /* jobs show: each step's kind, an http step's target, its secrets
     * masked */
    e2e_enqueue("{\"name\":\"q\",\"run_at\":\"2999-01-01T00:00:00Z\","
                "\"steps\":[{\"name\":\"put\",\"kind\":\"http\",\"http\":"
                "{\"method\":\"PUT\",\"url\":\"https://h.example/x?key="
                "abcdefgh1234&page=2\"}},{\"name\":\"c\",\"request\":"
                "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}}]}");
    show = e2e_show(2);
    step = e2e_step_of(show, 0);
    ck_assert_str_eq(e2e_str(step, "kind"), "http");
    ck_assert_str_eq(e2e_str(cJSON_GetObjectItem(step, "http"), "method"),
                     "PUT");
    ck_assert_str_eq(e2e_str(cJSON_GetObjectItem(step, "http"), "url"),
                     "https://h.example/x?key=***&page=2");
    ck_assert_str_eq(e2e_str(e2e_step_of(show, 1), "kind"), "chat");
    ck_assert_ptr_null(cJSON_GetObjectItem(e2e_step_of(show, 1), "http"));
    cJSON_Delete(show);
    ck_assert_int_eq(STEPQ(&r, "jobs", "show", "2"), 0);
    ck_assert_ptr_null(strstr(r.out, "abcdefgh1234"));
    ck_assert_ptr_nonnull(strstr(r.out, "PUT https://h.example/x?key=***"));
    run_result_free(&r);
    ck_assert_int_eq(STEPQ(&r, "park", "list"), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "1 open; by reason: hard_quota 1"));
    run_result_free(&r);
}
END_TEST

START_TEST(test_retry_sends_again)
{
    struct run_result r;
    cJSON *job, *log, *arr;

    park_one();
    ck_assert_int_eq(STEPQ(&r, "park", "resolve", "1", "--retry", "--lift-wall",
                           "--by", "ana", "--note", "quota reset"),
                     0);
    run_result_free(&r);
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 1), "decision"), "commit");
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/comments"), 2);
    arr = park_list_json(true);
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 0), "resolution"),
                     "retry");
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 0), "resolved_by"), "ana");
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 0), "note"),
                     "quota reset");
    cJSON_Delete(arr);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_retry_pinned_to_tier)
{
    struct run_result r;
    cJSON *job;

    e2e_start_file("free-daily-wall-always.json", "");
    e2e_enqueue("{\"name\":\"c\",\"steps\":[{\"name\":\"a\",\"side_effects\":"
                "true,\"replayable\":false,\"request\":{\"messages\":[{"
                "\"role\":\"user\",\"content\":\"hi\"}]}}]}");
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "parked");
    cJSON_Delete(job);
    ck_assert_int_eq(
        STEPQ(&r, "park", "resolve", "1", "--retry", "--tier", "local"), 0);
    run_result_free(&r);
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "tier"), "local");
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_skip_continues)
{
    struct run_result r;
    cJSON *job, *log, *body;

    park_one();
    ck_assert_int_eq(STEPQ(&r, "park", "resolve", "1", "--skip"), 0);
    run_result_free(&r);
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "state"), "skipped");
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/comments"), 1);
    body = e2e_sent_body(log, 1);
    ck_assert_str_eq(
        e2e_str(cJSON_GetArrayItem(cJSON_GetObjectItem(body, "messages"), 0),
                "content"),
        "saw []");
    cJSON_Delete(body);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_done_output_feeds_later_steps)
{
    struct run_result r;
    cJSON *job, *log, *body;

    park_one();
    free(tmpdir_write(e2e_dir, "out.txt", "posted by hand", 14));
    ck_assert_int_eq(
        STEPQ(&r, "park", "resolve", "1", "--done", "--output", "out.txt"), 0);
    run_result_free(&r);
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "output"), "posted by hand");
    log = e2e_mock_log();
    body = e2e_sent_body(log, 1);
    ck_assert_str_eq(
        e2e_str(cJSON_GetArrayItem(cJSON_GetObjectItem(body, "messages"), 0),
                "content"),
        "saw [posted by hand]");
    cJSON_Delete(body);
    cJSON_Delete(log);
    cJSON_Delete(job);
}
END_TEST

/* Done or skip on a job's last step ends the job at the resolve: it does
 * not wait as queued for a worker that has nothing left to run. A step
 * before the last one puts the job back in the queue, as before. */
START_TEST(test_last_step_resolved_ends_the_job)
{
    struct run_result r;
    char job[512];
    cJSON *j;

    e2e_start_file("comments-daily-wall-thrice.json", "");
    for (int i = 0; i < 2; i++) {
        snprintf(job, sizeof(job),
                 "{\"name\":\"only-post\",\"steps\":[{\"name\":\"post\","
                 "\"kind\":\"http\",\"http\":{\"url\":\"http://127.0.0.1:"
                 "%d/comments\",\"body\":{\"t\":%d}}}]}",
                 e2e_mock.port, i);
        e2e_enqueue(job);
    }
    enqueue_post_then_chat();
    free(e2e_drain());
    for (int id = 1; id <= 3; id++) {
        j = e2e_show(id);
        ck_assert_msg(strcmp(e2e_str(j, "state"), "parked") == 0,
                      "job %d is %s", id, e2e_str(j, "state"));
        cJSON_Delete(j);
    }
    for (int id = 1; id <= 3; id++) {
        char item[16];
        j = e2e_show(id);
        snprintf(
            item, sizeof(item), "%d",
            (int)cJSON_GetNumberValue(cJSON_GetObjectItem(
                cJSON_GetArrayItem(cJSON_GetObjectItem(j, "park"), 0), "id")));
        cJSON_Delete(j);
        ck_assert_int_eq(
            STEPQ(&r, "park", "resolve", item, id == 1 ? "--done" : "--skip"),
            0);
        run_result_free(&r);
        if (id == 3)
            break;
        j = e2e_show(id);
        ck_assert_str_eq(e2e_str(j, "state"), "succeeded");
        ck_assert_str_eq(e2e_str(e2e_step_of(j, 0), "state"),
                         id == 1 ? "succeeded" : "skipped");
        cJSON_Delete(j);
    }
    j = e2e_show(3);
    ck_assert_str_eq(e2e_str(j, "state"), "queued");
    cJSON_Delete(j);
}
END_TEST

/* A host that answered a wall holds every later send there: the next
 * posts park unsent (the mock sees one request), a read-only step whose
 * deadline comes first fails unsent, a retry meanwhile parks again
 * unsent, and a retry can wait for the wall's end (--not-before). */
START_TEST(test_host_wall_holds_later_posts)
{
    struct run_result r;
    char job[512];
    cJSON *j, *log;
    const cJSON *p;

    e2e_start_file("comments-daily-wall-once.json", "");
    for (int i = 0; i < 3; i++) {
        snprintf(job, sizeof(job),
                 "{\"name\":\"post%d\",\"steps\":[{\"name\":\"post\","
                 "\"kind\":\"http\",\"http\":{\"url\":\"http://127.0.0.1:"
                 "%d/comments\",\"body\":{\"t\":%d}}}]}",
                 i, e2e_mock.port, i);
        e2e_enqueue(job);
        free(e2e_drain()); /* one at a time: the first meets the wall */
    }
    snprintf(job, sizeof(job),
             "{\"name\":\"read\",\"deadline_s\":60,\"steps\":[{\"name\":"
             "\"get\",\"kind\":\"http\",\"side_effects\":false,\"http\":{"
             "\"method\":\"GET\",\"url\":\"http://127.0.0.1:%d/comments\"}}]}",
             e2e_mock.port);
    e2e_enqueue(job);
    free(e2e_drain());
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/comments"), 1);
    cJSON_Delete(log);
    for (int id = 2; id <= 3; id++) {
        j = e2e_show(id);
        ck_assert_str_eq(e2e_str(j, "state"), "parked");
        p = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "park"), 0);
        ck_assert_str_eq(e2e_str(p, "reason"), "hard_quota");
        ck_assert_msg(strstr(e2e_str(p, "error"), "not sent") &&
                          strstr(e2e_str(p, "error"), "daily_cap") &&
                          strstr(e2e_str(p, "error"), "holds until"),
                      "%s", e2e_str(p, "error"));
        ck_assert_int_eq(cJSON_GetArraySize(
                             cJSON_GetObjectItem(e2e_step_of(j, 0), "history")),
                         0);
        cJSON_Delete(j);
    }
    j = e2e_show(4);
    ck_assert_str_eq(e2e_str(j, "state"), "failed");
    ck_assert_ptr_nonnull(strstr(e2e_str(j, "error"), "past the job's"));
    cJSON_Delete(j);
    /* a retry while the wall holds parks again, unsent */
    ck_assert_int_eq(STEPQ(&r, "park", "resolve", "2", "--retry"), 0);
    run_result_free(&r);
    free(e2e_drain());
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/comments"), 1);
    cJSON_Delete(log);
    /* not before a time: due then, the deadline counted from it */
    ck_assert_int_eq(STEPQ(&r, "park", "resolve", "3", "--retry",
                           "--not-before", "2999-01-01T00:00:00Z"),
                     0);
    run_result_free(&r);
    j = e2e_show(3);
    ck_assert_str_eq(e2e_str(j, "state"), "queued");
    ck_assert_str_eq(e2e_str(j, "run_at"), "2999-01-01T00:00:00Z");
    ck_assert_str_eq(e2e_str(j, "deadline_at"), "2999-01-01T01:00:00Z");
    cJSON_Delete(j);
    ck_assert_int_eq(
        STEPQ(&r, "park", "resolve", "4", "--skip", "--not-before", "6h"), 2);
    run_result_free(&r);
    ck_assert_int_eq(
        STEPQ(&r, "park", "resolve", "4", "--retry", "--not-before", "soon"),
        2);
    run_result_free(&r);
    /* an operator who knows the wall ended lifts it: job 2's post (its
     * item 4, parked again by the retry above) is sent, and done */
    ck_assert_int_eq(
        STEPQ(&r, "park", "resolve", "4", "--retry", "--lift-wall"), 0);
    run_result_free(&r);
    free(e2e_drain());
    j = e2e_show(2);
    ck_assert_str_eq(e2e_str(j, "state"), "succeeded");
    cJSON_Delete(j);
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/comments"), 2);
    cJSON_Delete(log);
}
END_TEST

START_TEST(test_fail_fails_job)
{
    struct run_result r;
    cJSON *job;

    park_one();
    ck_assert_int_eq(STEPQ(&r, "park", "resolve", "1", "--fail", "--by", "bo",
                           "--note", "not tonight"),
                     0);
    run_result_free(&r);
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "failed");
    ck_assert_ptr_nonnull(strstr(e2e_str(job, "error"), "failed by bo"));
    ck_assert_ptr_nonnull(strstr(e2e_str(job, "error"), "not tonight"));
    cJSON_Delete(job);
    ck_assert_int_eq(STEPQ(&r, "park", "resolve", "1", "--skip"), 4);
    run_result_free(&r);
}
END_TEST

START_TEST(test_bad_input_changes_nothing)
{
    struct run_result r;
    cJSON *arr;

    park_one();
    ck_assert_int_eq(STEPQ(&r, "park", "resolve", "9", "--skip"), 3);
    run_result_free(&r);
    ck_assert_int_eq(STEPQ(&r, "park", "resolve", "1", "--skip", "--fail"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "exactly one"));
    run_result_free(&r);
    ck_assert_int_eq(
        STEPQ(&r, "park", "resolve", "1", "--retry", "--tier", "paid"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "no tier named paid"));
    run_result_free(&r);
    ck_assert_int_eq(
        STEPQ(&r, "park", "resolve", "1", "--retry", "--tier", "local"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "an http step's, which has no tiers"));
    run_result_free(&r);
    ck_assert_int_eq(
        STEPQ(&r, "park", "resolve", "1", "--done", "--output", "missing.txt"),
        2);
    ck_assert_ptr_nonnull(strstr(r.err, "missing.txt: no such file"));
    run_result_free(&r);
    ck_assert_int_eq(STEPQ(&r, "park", "resolve", "1"), 2);
    run_result_free(&r);
    ck_assert_int_eq(STEPQ(&r, "park", "show", "7"), 3);
    run_result_free(&r);
    arr = park_list_json(false);
    ck_assert_int_eq(cJSON_GetArraySize(arr), 1); /* still open */
    cJSON_Delete(arr);
}
END_TEST

START_TEST(test_ten_racing_resolves_one_wins)
{
    cJSON *arr;

    park_one();
    ck_assert_int_eq(
        e2e_race(10, (const char *[]){"park", "resolve", "1", "--skip", "--by",
                                      "op", NULL}),
        1); /* the nine others exit 4 */
    arr = park_list_json(true);
    ck_assert_int_eq(cJSON_GetArraySize(arr), 1);
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 0), "resolution"), "skip");
    cJSON_Delete(arr);
}
END_TEST

START_TEST(test_cancel_closes_the_park_item)
{
    struct run_result r;
    cJSON *st, *arr;

    park_one();
    ck_assert_int_eq(STEPQ(&r, "jobs", "cancel", "1", "--by", "al", "--json"),
                     0);
    ck_assert_str_eq(r.out, "{\"id\":1,\"state\":\"cancelled\"}\n");
    run_result_free(&r);
    st = e2e_status();
    ck_assert_int_eq(cJSON_GetObjectItem(st, "park_open")->valueint, 0);
    cJSON_Delete(st);
    ck_assert_int_eq(STEPQ(&r, "park", "list", "--all", "--json"), 0);
    arr = cJSON_Parse(r.out);
    run_result_free(&r);
    ck_assert_int_eq(cJSON_GetArraySize(arr), 1);
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 0), "state"), "resolved");
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 0), "resolution"),
                     "cancel");
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 0), "resolved_by"), "al");
    cJSON_Delete(arr);
}
END_TEST

START_TEST(test_resolve_all_matching)
{
    struct run_result r;
    cJSON *st;

    /* one at a time: the first meets the wall, which holds the others */
    e2e_start_file("comments-daily-wall-once.json", "");
    for (int i = 0; i < 3; i++) {
        enqueue_post_then_chat();
        free(e2e_drain());
    }
    st = e2e_status();
    ck_assert_int_eq(e2e_count(st, "parked"), 3);
    cJSON_Delete(st);
    ck_assert_int_eq(STEPQ(&r, "park", "resolve", "--all-matching", "--reason",
                           "in_doubt", "--skip"),
                     0);
    ck_assert_str_eq(r.out, "resolved 0 item(s): skip\n");
    run_result_free(&r);
    ck_assert_int_eq(STEPQ(&r, "park", "resolve", "--all-matching", "--reason",
                           "hard_quota", "--retry", "--lift-wall", "--json"),
                     0);
    ck_assert_str_eq(r.out, "{\"resolved\":3,\"resolution\":\"retry\"}\n");
    run_result_free(&r);
    free(e2e_drain());
    st = e2e_status();
    ck_assert_int_eq(e2e_count(st, "succeeded"), 3);
    ck_assert_int_eq(cJSON_GetObjectItem(st, "park_open")->valueint, 0);
    cJSON_Delete(st);
}
END_TEST

START_TEST(test_hook_gets_json_and_slow_hook_is_killed)
{
    char *text = NULL, *err;
    size_t len = 0;
    cJSON *o;
    int64_t t0;

    e2e_start_file("comments-daily-wall-once.json",
                   "\"on_park\": \"cat > hook.json; sleep 30\","
                   " \"on_park_timeout_s\": 0.5");
    enqueue_post_then_chat();
    t0 = clock_mono_ms();
    err = e2e_drain();
    ck_assert_int_lt(clock_mono_ms() - t0, 20000);
    ck_assert_ptr_nonnull(strstr(err, "killed after its time limit"));
    free(err);
    ck_assert_int_eq(file_read_all("hook.json", 1 << 20, &text, &len), 0);
    o = cJSON_Parse(text);
    ck_assert_ptr_nonnull(o);
    ck_assert_str_eq(e2e_str(o, "step"), "post");
    ck_assert_str_eq(e2e_str(o, "state"), "open");
    cJSON_Delete(o);
    free(text);
}
END_TEST

/* on_done and on_fail tell of each job a worker ended, after its commit,
 * with the job as `jobs show --json` gives it; a parked job tells
 * neither. */
START_TEST(test_done_and_fail_hooks_get_the_job)
{
    char job[512];
    cJSON *o;

    e2e_start_file("comments-daily-wall-once.json",
                   "\"on_done\": \"cat > done-$$.json\","
                   " \"on_fail\": \"cat > fail-$$.json\"");
    enqueue_post_then_chat(); /* parks */
    e2e_enqueue("{\"name\":\"ok\",\"steps\":[{\"name\":\"s\",\"tiers\":"
                "[\"local\"],\"request\":{\"messages\":[{\"role\":\"user\","
                "\"content\":\"hi\"}]}}]}");
    snprintf(job, sizeof(job),
             "{\"name\":\"no-env\",\"steps\":[{\"name\":\"post\","
             "\"kind\":\"http\",\"http\":{\"url\":\"http://127.0.0.1:%d/"
             "other\",\"headers\":{\"Authorization\":"
             "\"env:STEPQ_TEST_NOT_SET\"}}}]}",
             e2e_mock.port);
    e2e_enqueue(job);
    free(e2e_drain());
    o = e2e_one_file("done-*.json");
    ck_assert_str_eq(e2e_str(o, "name"), "ok");
    ck_assert_str_eq(e2e_str(o, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(o, 0), "state"), "succeeded");
    cJSON_Delete(o);
    o = e2e_one_file("fail-*.json");
    ck_assert_str_eq(e2e_str(o, "name"), "no-env");
    ck_assert_str_eq(e2e_str(o, "state"), "failed");
    ck_assert_ptr_nonnull(strstr(e2e_str(o, "error"), "STEPQ_TEST_NOT_SET"));
    cJSON_Delete(o);
}
END_TEST

/* A stopping worker gives a running hook its --grace, then kills it: the
 * hook's own limit (here two minutes, up to an hour) no longer holds the
 * worker past a service manager's stop timeout. */
START_TEST(test_stop_kills_hook_after_grace)
{
    int64_t t0;
    pid_t w;

    e2e_start_file("comments-daily-wall-once.json",
                   "\"on_park\": \"cat > hook.json; sleep 60\","
                   " \"on_park_timeout_s\": 120");
    enqueue_post_then_chat();
    w = e2e_spawn_worker("--grace=1");
    t0 = clock_mono_ms() + 20000;
    while (access("hook.json", F_OK) != 0) {
        ck_assert_msg(clock_mono_ms() < t0, "the hook never started");
        poll(NULL, 0, 20);
    }
    t0 = clock_mono_ms();
    kill(w, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    ck_assert_msg(clock_mono_ms() - t0 < 30000, "stopped after %lld ms",
                  (long long)(clock_mono_ms() - t0));
}
END_TEST

/* An operator's go-ahead gives the job its whole deadline_s again, from
 * the resolve. The job was given back once (its worker stopped), which
 * moved its run_at: the deadline is not taken from the run_at it has. */
START_TEST(test_retry_gives_the_whole_deadline)
{
    struct run_result r;
    char job[512];
    int64_t t1, deadline = 0;
    cJSON *o;
    pid_t w;

    e2e_start("{\"answers\":[{\"fault\":\"hang\"}]}", "");
    snprintf(job, sizeof(job),
             "{\"name\":\"p\",\"deadline_s\":7200,\"steps\":[{\"name\":"
             "\"post\",\"kind\":\"http\",\"http\":{\"url\":"
             "\"http://127.0.0.1:%d/hook\",\"body\":{}}}]}",
             e2e_mock.port);
    e2e_enqueue(job);
    w = e2e_spawn_worker("--grace=3");
    e2e_wait_for_requests(1, 20000);
    kill(w, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    free(e2e_drain()); /* the attempt left open: parked in doubt */
    t1 = clock_now_ms();
    ck_assert_int_eq(STEPQ(&r, "park", "resolve", "1", "--retry"), 0);
    run_result_free(&r);
    o = e2e_show(1);
    ck_assert_int_eq(clock_parse_utc(e2e_str(o, "deadline_at"), &deadline), 0);
    ck_assert_msg(deadline >= t1 + 7199000, "deadline %lld s after",
                  (long long)((deadline - t1) / 1000));
    cJSON_Delete(o);
    free(e2e_drain());
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 1);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("park");
    TCase *tc = tcase_create("park");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_list_and_show);
    tcase_add_test(tc, test_retry_sends_again);
    tcase_add_test(tc, test_retry_pinned_to_tier);
    tcase_add_test(tc, test_skip_continues);
    tcase_add_test(tc, test_done_output_feeds_later_steps);
    tcase_add_test(tc, test_last_step_resolved_ends_the_job);
    tcase_add_test(tc, test_host_wall_holds_later_posts);
    tcase_add_test(tc, test_fail_fails_job);
    tcase_add_test(tc, test_bad_input_changes_nothing);
    tcase_add_test(tc, test_ten_racing_resolves_one_wins);
    tcase_add_test(tc, test_cancel_closes_the_park_item);
    tcase_add_test(tc, test_resolve_all_matching);
    tcase_add_test(tc, test_hook_gets_json_and_slow_hook_is_killed);
    tcase_add_test(tc, test_done_and_fail_hooks_get_the_job);
    tcase_add_test(tc, test_stop_kills_hook_after_grace);
    tcase_add_test(tc, test_retry_gives_the_whole_deadline);
    suite_add_tcase(s, tc);
    return s;
}

/* test_schedules.c: schedules end to end, with real workers whose clock is
 * Debian's libfaketime (started at a chosen time, running fast): a worker
 * across a midnight fires each slot once; two workers on one database
 * fire each slot once; a worker down for three nights catches up as each
 * schedule says; a paused schedule fires nothing; bad schedules are
 * refused with their JSON path; the table of `stepq schedules` keeps its
 * columns lined up. SQLite only: the store's clock is the
 * worker's here, and a PostgreSQL server's cannot be faked. */
#define _GNU_SOURCE /* asprintf */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/file.h"
#include "tests/support/e2e.h"

/* A schedule with an inline one-step chat job naming its date. */
#define SCHEDULE(name, cron, extra)                                            \
    "{\"name\": \"" name "\", \"cron\": \"" cron "\"" extra ", \"job\": "      \
    "{\"name\": \"" name "\", \"steps\": [{\"name\": \"s\", \"request\": "     \
    "{\"messages\": [{\"role\": \"user\", \"content\": \"night of "            \
    "{{schedule.date}}\"}]}}]}}"

/* The keys of the jobs of schedule name, in order ("schedule:NAME:SLOT"
 * with the prefix cut off: the slots). Caller deletes the array. */
static cJSON *
slots_of(const char *name)
{
    struct run_result r;
    cJSON *jobs, *j, *out = cJSON_CreateArray();
    char prefix[128];

    snprintf(prefix, sizeof(prefix), "schedule:%s:", name);
    ck_assert_int_eq(RUN_ARGS(&r, "jobs", "list", "--json"), 0);
    jobs = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(jobs);
    run_result_free(&r);
    cJSON_ArrayForEach(j, jobs)
    {
        const char *k = e2e_str(j, "key");
        if (k != NULL && strncmp(k, prefix, strlen(prefix)) == 0)
            cJSON_AddItemToArray(out, cJSON_CreateString(k + strlen(prefix)));
    }
    cJSON_Delete(jobs);
    return out;
}

/* Waits (20 s at most, real time) until schedule name has n jobs. */
static void
wait_slots(const char *name, int n)
{
    int64_t until = clock_mono_ms() + 20000;
    int got = 0;

    while (clock_mono_ms() < until) {
        cJSON *s = slots_of(name);
        got = cJSON_GetArraySize(s);
        cJSON_Delete(s);
        if (got >= n)
            return;
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    ck_abort_msg("schedule %s: %d jobs, want %d", name, got, n);
}

/* A worker whose clock starts at `at` (UTC) and runs 30 times as fast. */
static pid_t
worker_at(const char *at, const char *id)
{
    char ft[64];

    snprintf(ft, sizeof(ft), "@%s x30", at);
    return e2e_spawn_faked(ft, false,
                           (const char *[]){"--worker-id", id, NULL});
}

static void
stop(pid_t pid)
{
    kill(pid, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(pid), 0);
}

/* Slot i of the array, as text. */
static const char *
slot(const cJSON *slots, int i)
{
    return cJSON_GetStringValue(cJSON_GetArrayItem(slots, i));
}

/* The mock, and a config with a nightly and a minutely schedule. */
static void
start_two(void)
{
    e2e_start("{}", "\"schedules\": [" SCHEDULE(
                        "nightly", "0 0 * * *",
                        "") ", " SCHEDULE("minutely", "* * * * *", "") "]");
}

/* Minute slots one after another from 23:59 on, and midnight once. */
static void
expect_each_slot_once(void)
{
    cJSON *m = slots_of("minutely"), *n = slots_of("nightly");
    int64_t prev = 0, t;

    ck_assert_str_eq(slot(m, 0), "2026-11-30T23:59:00Z");
    for (int i = 0; i < cJSON_GetArraySize(m); i++) {
        ck_assert_int_eq(clock_parse_utc(slot(m, i), &t), 0);
        if (i > 0)
            ck_assert_msg(t - prev == 60000, "%s after %s", slot(m, i),
                          slot(m, i - 1));
        prev = t;
    }
    ck_assert_int_eq(cJSON_GetArraySize(n), 1);
    ck_assert_str_eq(slot(n, 0), "2026-12-01T00:00:00Z");
    cJSON_Delete(m);
    cJSON_Delete(n);
}

START_TEST(test_a_worker_across_midnight_fires_each_slot_once)
{
    struct run_result r;
    cJSON *arr, *job;
    char id[32];
    pid_t w;

    start_two();
    w = worker_at("2026-11-30 23:58:30", "w1");

    wait_slots("minutely", 4); /* 23:59 00:00 00:01 00:02 */
    wait_slots("nightly", 1);
    stop(w);
    expect_each_slot_once();
    /* the job names its night; the schedule knows its last slot */
    ck_assert_int_eq(RUN_ARGS(&r, "schedules", "--json"), 0);
    arr = cJSON_Parse(r.out);
    run_result_free(&r);
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 0), "name"), "nightly");
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 0), "last_slot"),
                     "2026-12-01T00:00:00Z");
    job = cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "last_job");
    snprintf(id, sizeof(id), "%d", cJSON_GetObjectItem(job, "id")->valueint);
    ck_assert_int_eq(RUN_ARGS(&r, "jobs", "show", id, "--json"), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "night of 2026-12-01"));
    run_result_free(&r);
    cJSON_Delete(arr);
}
END_TEST

START_TEST(test_two_workers_fire_each_slot_once)
{
    pid_t a, b;

    start_two();
    a = worker_at("2026-11-30 23:58:30", "a");
    b = worker_at("2026-11-30 23:58:30", "b");

    wait_slots("minutely", 4);
    wait_slots("nightly", 1);
    stop(a);
    stop(b);
    expect_each_slot_once();
}
END_TEST

START_TEST(test_three_nights_down_catch_up_as_asked)
{
    static const char *const names[] = {"latest", "all", "none"};
    static const int want[] = {2, 4, 1};
    pid_t w;

    e2e_start(
        "{}",
        "\"schedules\": [" SCHEDULE("latest", "0 0 * * *", "") ", " SCHEDULE(
            "all", "0 0 * * *",
            ", \"catch_up\": \"all\"") ", " SCHEDULE("none",
                                                     "0 0 * "
                                                     "* *",
                                                     ", "
                                                     "\"catch"
                                                     "_up\": "
                                                     "\"none"
                                                     "\"") "]");
    w = worker_at("2026-11-26 23:57:00", "before");
    for (int i = 0; i < 3; i++)
        wait_slots(names[i], 1); /* 2026-11-27 */
    stop(w);
    w = worker_at("2026-11-30 00:10:00", "after"); /* 10 min late */
    wait_slots("latest", 2);
    wait_slots("all", 4);
    sleep(1); /* 30 s of its time: "none" had its chance to fire */
    stop(w);
    for (int i = 0; i < 3; i++) {
        cJSON *s = slots_of(names[i]);
        ck_assert_msg(cJSON_GetArraySize(s) == want[i], "%s: %d slots",
                      names[i], cJSON_GetArraySize(s));
        ck_assert_str_eq(slot(s, 0), "2026-11-27T00:00:00Z");
        if (want[i] > 1)
            ck_assert_str_eq(slot(s, want[i] - 1), "2026-11-30T00:00:00Z");
        cJSON_Delete(s);
    }
    cJSON *s = slots_of("all");
    ck_assert_str_eq(slot(s, 1), "2026-11-28T00:00:00Z");
    cJSON_Delete(s);
}
END_TEST

/* A drain started half a minute before a slot waits for it and runs its
 * job; with a schedule of every minute too, it still ends: a later slot
 * is not waited for. */
START_TEST(test_drain_runs_a_slot_due_within_the_minute)
{
    cJSON *n, *m;
    pid_t w;

    start_two();
    w = e2e_spawn_faked("@2026-11-30 23:59:30 x10", false,
                        (const char *[]){"--drain", NULL});
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    n = slots_of("nightly");
    ck_assert_int_eq(cJSON_GetArraySize(n), 1);
    ck_assert_str_eq(slot(n, 0), "2026-12-01T00:00:00Z");
    m = slots_of("minutely");
    ck_assert_int_le(cJSON_GetArraySize(m), 3);
    cJSON_Delete(n);
    cJSON_Delete(m);
    ck_assert_int_eq(e2e_count(NULL, "queued"), 0);
    ck_assert_int_eq(e2e_count(NULL, "failed"), 0);
    ck_assert_int_ge(e2e_count(NULL, "succeeded"), 2);
}
END_TEST

/* A drain waits for a near slot of a schedule that is not paused only: a
 * paused nightly's midnight does not hide the hourly one's, at the same
 * slot, which is waited for and runs. */
START_TEST(test_drain_waits_past_a_paused_schedule_of_the_same_slot)
{
    struct run_result r;
    cJSON *n, *h;
    pid_t w;

    e2e_start("{}", "\"schedules\": [" SCHEDULE(
                        "nightly", "0 0 * * *",
                        "") ", " SCHEDULE("hourly", "0 * * * *", "") "]");
    ck_assert_int_eq(RUN_ARGS(&r, "schedules", "pause", "nightly"), 0);
    run_result_free(&r);
    w = e2e_spawn_faked("@2026-11-30 23:59:30 x10", false,
                        (const char *[]){"--drain", NULL});
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    n = slots_of("nightly");
    h = slots_of("hourly");
    ck_assert_int_eq(cJSON_GetArraySize(n), 0);
    ck_assert_int_eq(cJSON_GetArraySize(h), 1);
    ck_assert_str_eq(slot(h, 0), "2026-12-01T00:00:00Z");
    cJSON_Delete(n);
    cJSON_Delete(h);
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 1);
}
END_TEST

START_TEST(test_paused_fires_nothing_and_run_enqueues_now)
{
    struct run_result r;
    cJSON *arr, *s;
    pid_t w;

    start_two();
    ck_assert_int_eq(RUN_ARGS(&r, "schedules", "pause", "nightly"), 0);
    run_result_free(&r);
    w = worker_at("2026-11-30 23:58:30", "w");
    wait_slots("minutely", 4); /* 23:59 to 00:02: midnight has passed */
    stop(w);
    s = slots_of("nightly");
    ck_assert_int_eq(cJSON_GetArraySize(s), 0);
    cJSON_Delete(s);
    ck_assert_int_eq(RUN_ARGS(&r, "schedules", "--json"), 0);
    arr = cJSON_Parse(r.out);
    run_result_free(&r);
    ck_assert(cJSON_IsTrue(
        cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "paused")));
    ck_assert(cJSON_IsFalse(
        cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "paused")));
    cJSON_Delete(arr);
    /* resumed, nothing is caught up; run enqueues one now, once */
    ck_assert_int_eq(RUN_ARGS(&r, "schedules", "resume", "nightly"), 0);
    run_result_free(&r);
    ck_assert_int_eq(RUN_ARGS(&r, "schedules", "run", "nightly", "--json"), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "\"duplicate\":false"));
    run_result_free(&r);
    s = slots_of("nightly");
    ck_assert_int_eq(cJSON_GetArraySize(s), 1);
    cJSON_Delete(s);
    ck_assert_int_eq(RUN_ARGS(&r, "schedules", "pause", "nope"), 3);
    run_result_free(&r);
    /* each of the three writes is in the audit trail, in order */
    ck_assert_int_eq(RUN_ARGS(&r, "audit", "--json"), 0);
    arr = cJSON_Parse(r.out);
    run_result_free(&r);
    ck_assert_int_eq(cJSON_GetArraySize(arr), 3);
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 0), "action"),
                     "schedule.pause");
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 1), "action"),
                     "schedule.resume");
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 2), "action"),
                     "schedule.run");
    ck_assert(cJSON_IsNumber(
        cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 2), "job_id")));
    cJSON_Delete(arr);
}
END_TEST

/* A schedule whose expression changes in the config fires no slot of the
 * new one from before the change: the progress moved on while nothing
 * was due. */
START_TEST(test_changed_expression_does_not_catch_up)
{
    char *path = tmpdir_join(e2e_dir, "stepq.json"), *cfg = NULL, *at;
    char *changed = NULL;
    size_t len = 0;
    cJSON *slots;
    pid_t w;

    e2e_start("{}", "\"schedules\": [" SCHEDULE("n", "0 0 1 1 *", "") "]");
    w = worker_at("2026-12-02 10:27:00", "w"); /* until about 10:31 */
    sleep(8);
    stop(w);
    ck_assert_int_eq(file_read_all(path, 1 << 20, &cfg, &len), 0);
    ck_assert_ptr_nonnull(at = strstr(cfg, "0 0 1 1 *"));
    ck_assert_int_ne(asprintf(&changed, "%.*s30 10 * * *%s", (int)(at - cfg),
                              cfg, at + strlen("0 0 1 1 *")),
                     -1); /* daily at 10:30 */
    free(tmpdir_write(e2e_dir, "stepq.json", changed, strlen(changed)));
    free(changed);
    w = worker_at("2026-12-02 10:33:00", "w");
    sleep(1);
    stop(w);
    slots = slots_of("n");
    ck_assert_int_eq(cJSON_GetArraySize(slots), 0);
    cJSON_Delete(slots);
    free(cfg);
    free(path);
}
END_TEST

/* Bad schedules: refused with their JSON path, by every command (the
 * expression, the zone, the fields) or where the job is used (work). */
static const struct bad {
    const char *schedule, *says;
} bads[] = {
    {SCHEDULE("n", "61 * * * *", ""), "schedules[0].cron: minute"},
    {SCHEDULE("n", "@daily", ", \"tz\": \"Mars/Base\""),
     "schedules[0].tz: unknown time zone Mars/Base"},
    {SCHEDULE("n", "@daily", ", \"every\": 1"), "schedules[0].every"},
    {SCHEDULE("n", "@daily", ", \"catch_up\": \"some\""),
     "schedules[0].catch_up"},
    {SCHEDULE("bad name", "@daily", ""), "schedules[0].name"},
    {"{\"name\": \"n\", \"cron\": \"@daily\", \"job\": \"nope.json\"}",
     "schedules[0].job: "},
    {"{\"name\": \"n\", \"cron\": \"@daily\", \"job\": {\"name\": \"j\", "
     "\"key\": \"k\", \"steps\": [{\"name\": \"s\", \"request\": "
     "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}}]}}",
     "schedules[0].job: key"},
};

START_TEST(test_bad_schedule_refused)
{
    struct run_result r;
    char extra[1024];
    bool at_work = strstr(bads[_i].says, ".job") != NULL;

    e2e_init();
    snprintf(extra, sizeof(extra), "{\"schedules\": [%s]}", bads[_i].schedule);
    free(tmpdir_write(e2e_dir, "stepq.json", extra, strlen(extra)));
    if (!at_work) {
        ck_assert_int_eq(RUN_ARGS(&r, "tiers"), 2);
        ck_assert_msg(strstr(r.err, bads[_i].says) != NULL, "%s", r.err);
        run_result_free(&r);
    }
    ck_assert_int_eq(RUN_ARGS(&r, "work", "--drain"), 2);
    ck_assert_msg(strstr(r.err, bads[_i].says) != NULL, "%s", r.err);
    run_result_free(&r);
}
END_TEST

/* The table's columns start where their headings do, whatever the width
 * of a cell: a zone and a name longer than any fixed column. Each row's
 * cells as printed ("20": a next slot of this century). */
static const char *const headings[7] = {
    "SCHEDULE", "CRON", "ZONE", "PAUSED", "NEXT SLOT", "LAST SLOT", "LAST JOB"};
static const char *const table[2][7] = {
    {"nightly", "0 3 * * *", "America/Argentina/Buenos_Aires", "no", "20", "-",
     "-"},
    {"a-much-longer-schedule-name", "*/15 9-17 * * MON-FRI", "UTC", "no", "20",
     "-", "-"},
};

START_TEST(test_table_columns_align)
{
    struct run_result r;
    char cfg[2048];
    const char *line;

    snprintf(
        cfg, sizeof(cfg), "{\"schedules\": [%s, %s]}",
        SCHEDULE("nightly", "0 3 * * *",
                 ", \"tz\": \"America/Argentina/Buenos_Aires\""),
        SCHEDULE("a-much-longer-schedule-name", "*/15 9-17 * * MON-FRI", ""));
    e2e_init();
    free(tmpdir_write(e2e_dir, "stepq.json", cfg, strlen(cfg)));
    ck_assert_int_eq(RUN_ARGS(&r, "schedules"), 0);
    line = r.out;
    for (int i = 0; i < 2; i++) {
        ck_assert_ptr_nonnull(line = strchr(line, '\n'));
        line++;
        for (int c = 0; c < 7; c++) {
            size_t at = (size_t)(strstr(r.out, headings[c]) - r.out);
            ck_assert_msg(
                (at == 0 || line[at - 1] == ' ') &&
                    strncmp(line + at, table[i][c], strlen(table[i][c])) == 0,
                "row %d, %s at %zu:\n%s", i, headings[c], at, r.out);
        }
    }
    run_result_free(&r);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("schedules");
    TCase *tc = tcase_create("fire");
    TCase *bad = tcase_create("bad");
    TCase *list = tcase_create("list");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_a_worker_across_midnight_fires_each_slot_once);
    tcase_add_test(tc, test_two_workers_fire_each_slot_once);
    tcase_add_test(tc, test_three_nights_down_catch_up_as_asked);
    tcase_add_test(tc, test_drain_runs_a_slot_due_within_the_minute);
    tcase_add_test(tc,
                   test_drain_waits_past_a_paused_schedule_of_the_same_slot);
    tcase_add_test(tc, test_paused_fires_nothing_and_run_enqueues_now);
    tcase_add_test(tc, test_changed_expression_does_not_catch_up);
    suite_add_tcase(s, tc);
    tcase_add_checked_fixture(bad, e2e_setup, e2e_teardown);
    tcase_add_loop_test(bad, test_bad_schedule_refused, 0,
                        sizeof(bads) / sizeof(bads[0]));
    suite_add_tcase(s, bad);
    tcase_add_checked_fixture(list, e2e_setup, e2e_teardown);
    tcase_add_test(list, test_table_columns_align);
    suite_add_tcase(s, list);
    return s;
}

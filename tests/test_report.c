/* test_report.c: the morning report after a scripted night with the mock:
 * two jobs throttled twice on tier free and then done, one failing loud
 * on tier local, one post parked on a daily wall, and a schedule whose
 * worker (on a libfaketime clock) ran one night of many. The report's
 * counts are checked against the ledger, as `jobs show` gives it. */
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

#define CHAT(tier)                                                             \
    "{\"name\": \"chat-" tier "\", \"steps\": [{\"name\": \"s\", \"tiers\": "  \
    "[\"" tier "\"], \"request\": {\"messages\": [{\"role\": \"user\", "       \
    "\"content\": \"hi\"}]}}]}"

static cJSON *
report(const char *since)
{
    struct run_result r;
    cJSON *o;

    ck_assert_int_eq(RUN_ARGS(&r, "report", "--since", since, "--json"), 0);
    o = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(o);
    run_result_free(&r);
    return o;
}

static int
num(const cJSON *o, const char *path)
{
    return (int)cJSON_GetNumberValue(cJSON_GetObjectItem(o, path));
}

/* The report's entry of tier (NULL: http steps). */
static const cJSON *
tier_of(const cJSON *rep, const char *tier)
{
    const cJSON *t;

    cJSON_ArrayForEach(t, cJSON_GetObjectItem(rep, "tiers"))
    {
        const char *name = e2e_str(t, "tier");
        if ((tier == NULL && name == NULL) ||
            (tier != NULL && name != NULL && strcmp(tier, name) == 0))
            return t;
    }
    ck_abort_msg("no tier %s in the report", tier ? tier : "(none)");
    return NULL;
}

/* Counts the ledger's attempts on tier (NULL: none) with outcome (NULL:
 * any) over jobs 1..n. */
static int
ledger(int n, const char *tier, const char *outcome)
{
    int count = 0;

    for (int id = 1; id <= n; id++) {
        cJSON *job = e2e_show(id);
        const cJSON *h;
        cJSON_ArrayForEach(h,
                           cJSON_GetObjectItem(e2e_step_of(job, 0), "history"))
        {
            const char *t = e2e_str(h, "tier"), *o = e2e_str(h, "outcome");
            if (((tier == NULL) == (t == NULL)) &&
                (tier == NULL || strcmp(t, tier) == 0) &&
                (outcome == NULL || (o && strcmp(o, outcome) == 0)))
                count++;
        }
        cJSON_Delete(job);
    }
    return count;
}

static void
night(void)
{
    char post[512];

    e2e_start_file("report-night.json", "");
    e2e_enqueue(CHAT("free"));
    e2e_enqueue(CHAT("free"));
    e2e_enqueue(CHAT("local"));
    snprintf(post, sizeof(post),
             "{\"name\": \"post\", \"steps\": [{\"name\": \"post\", \"kind\": "
             "\"http\", \"http\": {\"url\": \"http://127.0.0.1:%d/comments\", "
             "\"body\": {\"t\": 1}}}]}",
             e2e_mock.port);
    e2e_enqueue(post);
    free(e2e_drain());
}

START_TEST(test_report_equals_the_ledger)
{
    cJSON *rep, *jobs;
    const cJSON *f, *by;
    bool throttle = false, fail = false;

    night();
    rep = report("24h");
    jobs = cJSON_GetObjectItem(rep, "jobs");
    by = cJSON_GetObjectItem(jobs, "by_state");
    ck_assert_int_eq(num(jobs, "created"), 4);
    ck_assert_int_eq(num(by, "succeeded"), 2);
    ck_assert_int_eq(num(by, "failed"), 1);
    ck_assert_int_eq(num(by, "parked"), 1);
    ck_assert_int_eq(num(tier_of(rep, "free"), "requests"),
                     ledger(4, "free", NULL));
    ck_assert_int_eq(num(tier_of(rep, "free"), "throttles"),
                     ledger(4, "free", "soft_throttle"));
    ck_assert_int_eq(num(tier_of(rep, "free"), "throttles"), 2);
    ck_assert_int_eq(num(tier_of(rep, "free"), "ok"), 2);
    ck_assert_int_eq(num(tier_of(rep, "local"), "requests"),
                     ledger(4, "local", NULL));
    ck_assert_int_eq(num(tier_of(rep, NULL), "walls"), 1);
    ck_assert_int_eq(num(cJSON_GetObjectItem(rep, "park"), "waiting"), 1);
    ck_assert_str_eq(
        e2e_str(
            cJSON_GetArrayItem(
                cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "park"), "oldest"),
                0),
            "step"),
        "post");
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(rep, "failures"))
    {
        const char *body = e2e_str(cJSON_GetObjectItem(f, "example"), "body");
        /* the step by its name, as park items and the log give it */
        ck_assert(cJSON_IsString(
            cJSON_GetObjectItem(cJSON_GetObjectItem(f, "example"), "step")));
        if (strcmp(e2e_str(f, "outcome"), "soft_throttle") == 0)
            throttle =
                num(f, "count") == 2 && body && strstr(body, "rate limited");
        if (body != NULL && strstr(body, "frob") != NULL)
            fail = num(f, "count") == ledger(4, "local", NULL);
    }
    ck_assert_msg(throttle && fail, "failures: %.3000s",
                  cJSON_PrintUnformatted(cJSON_GetObjectItem(rep, "failures")));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(rep, "slowest")),
                     3);
    cJSON_Delete(rep);
    /* since a time to come: nothing happened yet */
    rep = report("2999-01-01T00:00:00Z");
    ck_assert_int_eq(num(cJSON_GetObjectItem(rep, "jobs"), "created"), 0);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(rep, "tiers")), 0);
    cJSON_Delete(rep);
}
END_TEST

/* The report names every job that failed, also one that failed before
 * any attempt (its header's env variable is missing), and every park item
 * resolved in the window, with who resolved it. */
START_TEST(test_report_names_every_failure_and_resolution)
{
    char job[512];
    struct run_result r;
    cJSON *rep;
    const cJSON *failed, *res, *e;
    bool env_named = false;

    night();
    snprintf(job, sizeof(job),
             "{\"name\": \"no-env\", \"steps\": [{\"name\": \"post\", "
             "\"kind\": \"http\", \"http\": {\"url\": "
             "\"http://127.0.0.1:%d/comments\", \"headers\": "
             "{\"Authorization\": \"env:STEPQ_TEST_NOT_SET\"}}}]}",
             e2e_mock.port);
    e2e_enqueue(job);
    free(e2e_drain());
    ck_assert_int_eq(RUN_ARGS(&r, "park", "resolve", "1", "--skip", "--by",
                              "alice", "--note", "posted by hand"),
                     0);
    run_result_free(&r);
    rep = report("24h");
    failed = cJSON_GetObjectItem(rep, "failed_jobs");
    ck_assert_int_eq(num(failed, "count"), 2);
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(failed, "latest"))
    {
        const char *err = e2e_str(e, "error");
        if (strcmp(e2e_str(e, "name"), "no-env") == 0)
            env_named = err != NULL && strstr(err, "STEPQ_TEST_NOT_SET");
    }
    ck_assert_msg(env_named, "failed_jobs: %s", cJSON_PrintUnformatted(failed));
    /* the job that failed before any attempt has no attempt failure */
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(rep, "failures"))
    {
        const char *body = e2e_str(cJSON_GetObjectItem(e, "example"), "body");
        ck_assert(body == NULL || strstr(body, "STEPQ_TEST_NOT_SET") == NULL);
    }
    res = cJSON_GetObjectItem(rep, "resolutions");
    ck_assert_int_eq(num(res, "count"), 1);
    e = cJSON_GetArrayItem(cJSON_GetObjectItem(res, "latest"), 0);
    ck_assert_str_eq(e2e_str(e, "by"), "alice");
    ck_assert_str_eq(e2e_str(e, "resolution"), "skip");
    ck_assert_str_eq(e2e_str(e, "step"), "post");
    ck_assert_str_eq(e2e_str(e, "note"), "posted by hand");
    ck_assert(cJSON_IsString(cJSON_GetObjectItem(e, "at")));
    cJSON_Delete(rep);
    /* before the resolve's time: none */
    rep = report("2999-01-01T00:00:00Z");
    ck_assert_int_eq(num(cJSON_GetObjectItem(rep, "resolutions"), "count"), 0);
    ck_assert_int_eq(num(cJSON_GetObjectItem(rep, "failed_jobs"), "count"), 0);
    cJSON_Delete(rep);
}
END_TEST

START_TEST(test_bad_since_refused)
{
    struct run_result r;

    e2e_start("{}", "");
    ck_assert_int_eq(RUN_ARGS(&r, "report", "--since", "yesterday"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--since yesterday"));
    run_result_free(&r);
    ck_assert_int_eq(RUN_ARGS(&r, "report", "--since", "5x"), 2);
    run_result_free(&r);
    ck_assert_int_eq(RUN_ARGS(&r, "report"), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "jobs created: 0"));
    run_result_free(&r);
}
END_TEST

/* A nightly schedule whose worker ran three days ago only: that night
 * ran, every night since is missed. */
START_TEST(test_report_tells_missed_nights)
{
    int64_t now = clock_now_ms(), first = now - 3 * 86400000LL;
    time_t t = (time_t)(first / 1000);
    char at[64], since[32], slot[32];
    struct tm tm;
    struct run_result r;
    cJSON *rep, *run;
    const cJSON *s, *m;
    pid_t w;

    gmtime_r(&t, &tm);
    strftime(at, sizeof(at), "@%Y-%m-%d 03:38:00 x30", &tm);
    strftime(since, sizeof(since), "%Y-%m-%dT00:00:00Z", &tm);
    strftime(slot, sizeof(slot), "%Y-%m-%dT03:40:00Z", &tm);
    ck_assert_int_eq(clock_parse_utc(slot, &first), 0);
    e2e_start("{}", "\"schedules\": [{\"name\": \"nightly\", \"cron\": \"40 3 "
                    "* * *\", \"job\": " CHAT("free") "}]");
    w = e2e_spawn_faked(at, false, (const char *[]){"--worker-id", "w", NULL});
    for (int64_t until = clock_mono_ms() + 20000;
         clock_mono_ms() < until && e2e_count(NULL, "succeeded") < 1;)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    kill(w, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    /* a manual run is reported as one, not as a slot */
    ck_assert_int_eq(RUN_ARGS(&r, "schedules", "run", "nightly", "--json"), 0);
    run = cJSON_Parse(r.out);
    run_result_free(&r);
    rep = report(since);
    s = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "schedules"), 0);
    m = cJSON_GetObjectItem(s, "manual_runs");
    ck_assert_int_eq(cJSON_GetArraySize(m), 1);
    ck_assert_int_eq(num(cJSON_GetArrayItem(m, 0), "job_id"), num(run, "id"));
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(m, 0), "state"), "queued");
    cJSON_Delete(run);
    ck_assert_int_eq(num(s, "ran"), 1);
    ck_assert_int_eq(num(s, "missed"), (int)((now - first) / 86400000));
    ck_assert_int_eq(num(s, "failed"), 0);
    ck_assert_str_eq(
        e2e_str(cJSON_GetArrayItem(cJSON_GetObjectItem(s, "slots"), 0),
                "state"),
        "succeeded");
    cJSON_Delete(rep);
}
END_TEST

/* A schedule first seen a moment after a slot's second began fires
 * nothing from before that moment, and the report counts no such slot as
 * missed: first seen at 00:00:00.1, a midnight schedule missed only the
 * midnights after. */
START_TEST(test_report_counts_no_slot_before_first_seen)
{
    int64_t now = clock_now_ms(), day0;
    time_t t = (time_t)((now - 3 * 86400000LL) / 1000);
    char at[64], since[32];
    struct tm tm;
    cJSON *rep = NULL;
    const cJSON *s = NULL;
    pid_t w;

    gmtime_r(&t, &tm);
    strftime(at, sizeof(at), "@%Y-%m-%d 00:00:00", &tm);
    strftime(since, sizeof(since), "%Y-%m-%dT00:00:00Z", &tm);
    ck_assert_int_eq(clock_parse_utc(since, &day0), 0);
    e2e_start("{}", "\"schedules\": [{\"name\": \"midnight\", \"cron\": \"0 0 "
                    "* * *\", \"job\": " CHAT("free") "}]");
    w = e2e_spawn_faked(at, false, (const char *[]){"--worker-id", "w", NULL});
    for (int64_t until = clock_mono_ms() + 20000; clock_mono_ms() < until;) {
        cJSON_Delete(rep);
        rep = report(since);
        s = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "schedules"), 0);
        if (num(s, "missed") + num(s, "ran") > 0) /* seen */
            break;
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    kill(w, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    ck_assert_int_eq(num(s, "ran"), 0);
    ck_assert_int_eq(num(s, "missed"), (int)((now - day0) / 86400000));
    cJSON_Delete(rep);
}
END_TEST

/* span_ms is a report's until minus its since, in ms. */
static int64_t
span_ms(const cJSON *r)
{
    int64_t since = 0, until = 0;

    ck_assert_int_eq(clock_parse_utc(e2e_str(r, "since"), &since), 0);
    ck_assert_int_eq(clock_parse_utc(e2e_str(r, "until"), &until), 0);
    return until - since;
}

/* on_report: two workers, one report a slot (every minute here), each
 * the JSON report on the hook's input: the first of the day before its
 * slot, each later one from the slot of the one before to its own, so
 * that every moment is in exactly one report. */
START_TEST(test_on_report_once_a_slot)
{
    char *text = NULL, *line, *save = NULL, minutes[16][17], until[64] = "";
    size_t len = 0;
    int n = 0;
    pid_t a, b;

    e2e_start("{}", "\"on_report\": {\"cron\": \"* * * * *\", \"command\": "
                    "\"cat >> reports.jsonl; echo >> reports.jsonl\"}");
    a = e2e_spawn_faked("@2026-12-02 10:00:30 x30", false,
                        (const char *[]){"--worker-id", "a", NULL});
    b = e2e_spawn_faked("@2026-12-02 10:00:30 x30", false,
                        (const char *[]){"--worker-id", "b", NULL});
    sleep(7); /* three and a half minutes of their time */
    kill(a, SIGTERM);
    kill(b, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(a), 0);
    ck_assert_int_eq(e2e_wait_exit(b), 0);
    sleep(1); /* the last hook's cat */
    ck_assert_int_eq(file_read_all("reports.jsonl", 1 << 24, &text, &len), 0);
    for (line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        cJSON *r = cJSON_Parse(line);
        ck_assert_msg(r != NULL, "not JSON: %.200s", line);
        ck_assert_ptr_nonnull(cJSON_GetObjectItem(r, "tiers"));
        ck_assert_int_lt(n, 16);
        snprintf(minutes[n], sizeof(minutes[n]), "%.16s", e2e_str(r, "until"));
        for (int i = 0; i < n; i++) /* one report a slot, of all workers */
            ck_assert_str_ne(minutes[i], minutes[n]);
        if (n > 0) /* from where the one before ended */
            ck_assert_str_eq(e2e_str(r, "since"), until);
        else
            ck_assert_int_eq(span_ms(r), 24 * 3600 * 1000LL);
        snprintf(until, sizeof(until), "%s", e2e_str(r, "until"));
        n++;
        cJSON_Delete(r);
    }
    ck_assert_int_ge(n, 2);
    ck_assert_int_le(n, 4);
    free(text);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("report");
    TCase *tc = tcase_create("night");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_report_equals_the_ledger);
    tcase_add_test(tc, test_report_names_every_failure_and_resolution);
    tcase_add_test(tc, test_bad_since_refused);
    tcase_add_test(tc, test_report_tells_missed_nights);
    tcase_add_test(tc, test_report_counts_no_slot_before_first_seen);
    tcase_add_test(tc, test_on_report_once_a_slot);
    suite_add_tcase(s, tc);
    return s;
}

/* test_preference.c: tier order is preference (SPEC "Tiers and
 * admission", amended 2026-12-06). The real worker against the real
 * `stepq mock`, whose /free route is a token bucket as providers document
 * it and whose /local route (the "paid" tier) has no limit: a step waits
 * for the free tier while its slack allows, and goes to the paid one only
 * past a wall, when waiting would miss the deadline, or when the free
 * tier's spill says so. Each attempt on the paid tier says why. */
#include "tests/support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/xalloc.h"
#include "tests/support/e2e.h"

/* The mock: /free a token bucket of rpm requests a minute holding one,
 * with OpenAI's headers; /local no limit. */
static void
start_bucket(int rpm)
{
    char script[256];

    snprintf(
        script, sizeof(script),
        "{\"routes\":[{\"path\":\"/free\",\"limit\":{\"shape\":"
        "\"token_bucket\",\"rpm\":%d,\"burst\":1}},{\"path\":\"/local\"}]}",
        rpm);
    e2e_start(script, "");
}

/* Tier free declared as the bucket is (rpm, burst 1) with the extra
 * fields free_extra ("" for none); local unlimited. */
static void
config_free(int rpm, const char *free_extra)
{
    char fields[256];

    snprintf(fields, sizeof(fields), "\"rpm\": %d, \"burst\": 1%s%s", rpm,
             free_extra[0] ? ", " : "", free_extra);
    e2e_config(5, fields);
}

/* n one-step chat jobs over both tiers (the config's order), each with a
 * deadline of deadline_s. */
static void
enqueue(int n, int deadline_s)
{
    size_t cap = (size_t)n * 200 + 16, len = 0;
    char *text = xmalloc(cap);

    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(
            text + len, cap - len,
            "{\"name\":\"j%d\",\"deadline_s\":%d,\"steps\":[{\"name\":\"a\","
            "\"request\":{\"messages\":[{\"role\":\"user\",\"content\":"
            "\"n%d\"}]}}]}\n",
            i, deadline_s, i);
    e2e_enqueue(text);
    free(text);
}

/* Job id succeeded; its one attempt went to tier want, and its route
 * holds route (NULL: the first choice, no route). */
static void
expect_served(int id, const char *want, const char *route)
{
    cJSON *job = e2e_show(id);
    const cJSON *h = e2e_hist(job, 0, 0);
    const char *got = e2e_str(h, "route");

    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(h, "tier"), want);
    if (route == NULL)
        ck_assert_msg(got == NULL, "job %d: route \"%s\"", id, got);
    else
        ck_assert_msg(got != NULL && strstr(got, route) != NULL,
                      "job %d: route \"%s\", want \"%s\"", id,
                      got ? got : "(null)", route);
    cJSON_Delete(job);
}

/* `tiers` says what a step that prefers a tier does now (steps NULL: not
 * checked), and why. */
static void
expect_tier(const char *name, const char *steps, const char *refused_by,
            const char *spill)
{
    cJSON *t = e2e_tier(name);

    if (steps != NULL)
        ck_assert_str_eq(e2e_str(t, "steps"), steps);
    if (steps != NULL && refused_by == NULL)
        ck_assert_ptr_null(e2e_str(t, "refused_by"));
    else if (refused_by != NULL)
        ck_assert_str_eq(e2e_str(t, "refused_by"), refused_by);
    ck_assert_str_eq(e2e_str(t, "spill"), spill);
    cJSON_Delete(t);
}

/* Six jobs, a free tier of 120 a minute (one every 0.5 s) and ten
 * minutes to do them in: every one waits for the free tier, none reaches
 * the paid one, and the bucket is never overrun. */
START_TEST(test_waits_for_the_preferred_tier)
{
    cJSON *log;
    int n429 = 0;

    start_bucket(120);
    config_free(120, "");
    enqueue(6, 600);
    free(e2e_drain());
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_arrivals(log, "/free", NULL, 0, &n429), 6);
    ck_assert_int_eq(n429, 0);
    ck_assert_int_eq(e2e_sent_to(log, "/local"), 0);
    cJSON_Delete(log);
    for (int id = 1; id <= 6; id++)
        expect_served(id, "free", NULL);
}
END_TEST

/* A free tier of 6 a minute (one every 10 s) and 5 s per job: the first
 * job takes the free tier's one request, the others cannot wait for the
 * next and go to the paid tier, saying why. */
START_TEST(test_spills_when_waiting_would_miss_the_deadline)
{
    cJSON *log;

    start_bucket(6);
    config_free(6, "");
    enqueue(3, 5);
    free(e2e_drain());
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/free"), 1);
    ck_assert_int_eq(e2e_sent_to(log, "/local"), 2);
    cJSON_Delete(log);
    expect_served(1, "free", NULL);
    /* paced by its bucket, or by the wait its headers named */
    expect_served(2, "local", "would miss the deadline");
    expect_served(3, "local", "would miss the deadline");
}
END_TEST

/* A free tier behind a quota wall: one request finds the wall, and every
 * step goes to the paid tier, the first after its answer, the rest past
 * the wall. */
START_TEST(test_spills_past_a_wall)
{
    cJSON *log;

    e2e_start_file("free-quota-wall-local-20ms.json", "");
    enqueue(3, 600);
    free(e2e_drain());
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/free"), 1);
    ck_assert_int_eq(e2e_sent_to(log, "/local"), 3);
    cJSON_Delete(log);
    for (int id = 1; id <= 3; id++) {
        cJSON *job = e2e_show(id);
        const cJSON *h = e2e_hist(job, 0, id == 1 ? 1 : 0);
        const char *route = e2e_str(h, "route");
        ck_assert_str_eq(e2e_str(h, "tier"), "local");
        ck_assert_msg(route != NULL &&
                          strstr(route, id == 1 ? "free: left after its answer"
                                                : "free: exhausted") != NULL,
                      "job %d: route %s", id, route ? route : "(null)");
        cJSON_Delete(job);
    }
    expect_tier("free", "passes", "exhausted", "deadline");
    expect_tier("local", "admits", NULL, "deadline");
}
END_TEST

/* spill "now" is the old way: a paced free tier is passed over at once. */
START_TEST(test_spill_now_passes_a_paced_tier)
{
    cJSON *log;

    start_bucket(60);
    config_free(60, "\"spill\": \"now\"");
    enqueue(4, 600);
    free(e2e_drain());
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/free"), 1);
    ck_assert_int_eq(e2e_sent_to(log, "/local"), 3);
    cJSON_Delete(log);
    expect_served(1, "free", NULL);
    expect_served(4, "local", "(spill: now)");
    /* whether its bucket has refilled by now, it is passed over */
    expect_tier("free", NULL, NULL, "now");
}
END_TEST

/* spill N: a step waits for the free tier at most N seconds. A free tier
 * of 60 a minute and spill 1.5: the second job's wait of 1 s is taken,
 * the later ones would wait longer and go to the paid tier. */
START_TEST(test_spill_after_seconds)
{
    cJSON *log;
    int free_n;

    start_bucket(60);
    config_free(60, "\"spill\": 1.5");
    enqueue(5, 600);
    free(e2e_drain());
    log = e2e_mock_log();
    free_n = e2e_sent_to(log, "/free");
    ck_assert_int_ge(free_n, 2);
    ck_assert_int_lt(free_n, 5);
    ck_assert_int_eq(free_n + e2e_sent_to(log, "/local"), 5);
    cJSON_Delete(log);
}
END_TEST

/* A run waiting for the free tier holds no slot: with two slots and six
 * jobs in line for a free tier of one a second, two jobs bound to the
 * paid tier alone (enqueued last) are sent at once, not after the line. */
START_TEST(test_waiting_runs_hold_no_slot)
{
    struct run_result r;
    double free_at[6], local_at[2];
    cJSON *log;

    start_bucket(60);
    config_free(60, "");
    enqueue(6, 600);
    e2e_enqueue(
        "{\"name\":\"p1\",\"steps\":[{\"name\":\"a\",\"tiers\":"
        "[\"local\"],\"request\":{\"messages\":[{\"role\":\"user\"}]}}]}"
        "\n{\"name\":\"p2\",\"steps\":[{\"name\":\"a\",\"tiers\":"
        "[\"local\"],\"request\":{\"messages\":[{\"role\":\"user\"}]}}]}");
    ck_assert_int_eq(RUN(&r, NULL, "work", "--drain", "--concurrency", "2"), 0);
    run_result_free(&r);
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_arrivals(log, "/free", free_at, 6, NULL), 6);
    ck_assert_int_eq(e2e_arrivals(log, "/local", local_at, 2, NULL), 2);
    cJSON_Delete(log);
    ck_assert_msg(local_at[1] < free_at[1],
                  "the paid jobs waited behind the free line: %.0f ms vs "
                  "the second free send at %.0f ms",
                  local_at[1] - free_at[0], free_at[1] - free_at[0]);
}
END_TEST

/* Runs in hand may outnumber the concurrency while they wait for a tier,
 * requests in flight may not: with two slots, eight jobs and answers that
 * take 300 ms, no three requests are ever out at once. */
START_TEST(test_concurrency_caps_requests_in_flight)
{
    struct run_result r;
    double at[8];
    cJSON *log;
    int most = 0;

    e2e_start("{\"routes\":[{\"path\":\"/free\",\"latency_ms\":300}]}", "");
    config_free(6000, "");
    enqueue(8, 600);
    ck_assert_int_eq(RUN(&r, NULL, "work", "--drain", "--concurrency", "2"), 0);
    run_result_free(&r);
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_arrivals(log, "/free", at, 8, NULL), 8);
    cJSON_Delete(log);
    /* A request arrives at at[i] and is answered 300 ms later: count the
     * arrivals within 290 ms before each one. */
    for (int i = 0; i < 8; i++) {
        int out = 0;
        for (int k = 0; k <= i; k++)
            out += at[i] - at[k] < 290;
        most = out > most ? out : most;
    }
    ck_assert_msg(most <= 2, "%d requests in flight at once", most);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("preference");
    TCase *tc = tcase_create("preference");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_waits_for_the_preferred_tier);
    tcase_add_test(tc, test_spills_when_waiting_would_miss_the_deadline);
    tcase_add_test(tc, test_spills_past_a_wall);
    tcase_add_test(tc, test_spill_now_passes_a_paced_tier);
    tcase_add_test(tc, test_spill_after_seconds);
    tcase_add_test(tc, test_waiting_runs_hold_no_slot);
    tcase_add_test(tc, test_concurrency_caps_requests_in_flight);
    suite_add_tcase(s, tc);
    return s;
}

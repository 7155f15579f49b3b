/* test_admission.c: paced admission end to end, seen from the endpoint.
 * The real worker against the real `stepq mock`: pacing to a bucket, a
 * tier-wide cooldown shared by two processes, remaining-0 and bogus
 * headers, the pace falling after 429s, one request into a wall, and a
 * storm met one request at a time. */
#include "tests/support/support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/xalloc.h"
#include "tests/support/e2e.h"

/* Tiers free and local, leases of 5 s; free has a timeout of 5 s and
 * the extra fields free_extra. */
static void
config(const char *free_extra)
{
    char fields[512];

    snprintf(fields, sizeof(fields), "\"timeout_s\": 5%s%s",
             free_extra[0] ? ", " : "", free_extra);
    e2e_config(5, fields);
}

static int
status_of(const cJSON *req)
{
    const cJSON *s = cJSON_GetObjectItem(req, "status");
    return cJSON_IsNumber(s) ? s->valueint : 0;
}

/* The tier called name in `tiers --json` (cJSON_Delete it). */
static cJSON *
tier_json(const char *name)
{
    cJSON *arr = e2e_tiers(), *found = NULL;
    const cJSON *it;

    cJSON_ArrayForEach(it, arr)
    {
        if (strcmp(e2e_str(it, "name"), name) == 0)
            found = cJSON_Duplicate(it, true);
    }
    cJSON_Delete(arr);
    ck_assert_ptr_nonnull(found);
    return found;
}

/* 64 runs due at once against a one-per-second limit: the worker sends
 * one a second and gets no 429. The mock's limit is a sliding window of
 * one request per second, stricter than any bucket of one. */
START_TEST(test_burst_of_64_paced_to_one_per_second)
{
    double at[16];
    cJSON *log;
    pid_t w;
    int n, n429;

    e2e_start_file("free-rpm-1-per-second.json", "");
    config("\"rpm\": 60");
    e2e_enqueue_many(64, "\"tiers\":[\"free\"],");
    w = e2e_spawn_worker("--concurrency=64");
    e2e_wait_for_requests(4, 10000);
    kill(w, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    log = e2e_mock_log();
    n = e2e_arrivals(log, "/free", at, 16, &n429);
    ck_assert_int_eq(n429, 0);
    ck_assert_int_ge(n, 4);
    ck_assert_int_le(n, 6);
    for (int i = 1; i < n && i < 16; i++)
        ck_assert_msg(at[i] - at[i - 1] >= 950, "requests %d, %d %.0f ms apart",
                      i - 1, i, at[i] - at[i - 1]);
    cJSON_Delete(log);
}
END_TEST

/* A 429 with retry-after-ms 800 holds the tier for every run of both
 * worker processes: nothing reaches it for 800 ms, then the jobs finish
 * there (their retries wait for the tier, they do not hop away). */
START_TEST(test_retry_after_ms_holds_both_processes)
{
    double at[32];
    cJSON *log, *st;
    pid_t w1, w2;
    int n, n429;

    e2e_start_file("free-429-retry-after-800ms.json", "");
    config("");
    e2e_enqueue_many(20, "\"tiers\":[\"free\"],");
    w1 = e2e_spawn_worker("--drain");
    w2 = e2e_spawn_worker("--drain");
    ck_assert_int_eq(e2e_wait_exit(w1), 0);
    ck_assert_int_eq(e2e_wait_exit(w2), 0);
    st = e2e_status();
    ck_assert_int_eq(e2e_count(st, "succeeded"), 20);
    cJSON_Delete(st);
    log = e2e_mock_log();
    n = e2e_arrivals(log, "/free", at, 32, &n429);
    ck_assert_int_eq(n429, 1);
    ck_assert_int_eq(n, 21);
    ck_assert_int_eq(status_of(cJSON_GetArrayItem(log, 0)), 429);
    for (int i = 1; i < n; i++)
        ck_assert_msg(at[i] - at[0] >= 800, "request %d %.0f ms after the 429",
                      i, at[i] - at[0]);
    cJSON_Delete(log);
}
END_TEST

/* x-ratelimit-remaining-requests 0 with a reset of 1 s: the tier waits
 * for the reset. */
START_TEST(test_remaining_zero_waits_for_reset)
{
    double at[8];
    cJSON *log;
    int n, n429;

    e2e_start_file("free-remaining-zero-reset-1s.json", "");
    config("");
    e2e_enqueue_many(3, "\"tiers\":[\"free\"],");
    free(e2e_drain());
    log = e2e_mock_log();
    n = e2e_arrivals(log, "/free", at, 8, &n429);
    ck_assert_int_eq(n, 3);
    ck_assert_msg(at[1] - at[0] >= 950, "second request %.0f ms after",
                  at[1] - at[0]);
    cJSON_Delete(log);
}
END_TEST

/* Azure sends -1 where it has no figure: ignored, nothing waits and no
 * limit is learned. */
START_TEST(test_azure_minus_one_ignored)
{
    double at[16];
    cJSON *log, *t;
    int n, n429;

    e2e_start_file("free-azure-minus-one.json", "");
    config("");
    e2e_enqueue_many(10, "\"tiers\":[\"free\"],");
    free(e2e_drain());
    log = e2e_mock_log();
    n = e2e_arrivals(log, "/free", at, 16, &n429);
    ck_assert_int_eq(n, 10);
    ck_assert_msg(at[9] - at[0] < 900, "10 requests took %.0f ms",
                  at[9] - at[0]);
    cJSON_Delete(log);
    t = tier_json("free");
    ck_assert_int_eq(cJSON_GetObjectItem(t, "rate_rpm")->valueint, 0);
    cJSON_Delete(t);
}
END_TEST

/* Limit headers teach the pace: an rpm declared 4x too high is paced to
 * the 600 the endpoint names. */
START_TEST(test_limit_header_caps_declared_rpm)
{
    cJSON *t;

    e2e_start_file("free-limit-600-rpm.json", "");
    config("\"rpm\": 2400");
    e2e_enqueue_many(2, "\"tiers\":[\"free\"],");
    free(e2e_drain());
    t = tier_json("free");
    ck_assert_int_eq(cJSON_GetObjectItem(t, "rate_rpm")->valueint, 600);
    cJSON_Delete(t);
}
END_TEST

/* 429s in spite of pacing lower the pace `tiers` shows. */
START_TEST(test_pace_falls_after_429s)
{
    cJSON *t;

    e2e_start_file("free-429-retry-after-50ms.json", "");
    config("\"rpm\": 600");
    e2e_enqueue_many(3, "\"tiers\":[\"free\"],");
    free(e2e_drain());
    t = tier_json("free");
    ck_assert_int_lt(cJSON_GetObjectItem(t, "rate_rpm")->valuedouble, 600);
    ck_assert_int_ge(cJSON_GetObjectItem(t, "rate_rpm")->valuedouble, 400);
    cJSON_Delete(t);
}
END_TEST

/* A quota wall on free, 64 jobs due: exactly one request meets the wall,
 * every job finishes on local. */
START_TEST(test_one_request_into_a_wall)
{
    cJSON *log, *st;

    e2e_start_file("free-quota-wall-local-20ms.json", "");
    config("");
    e2e_enqueue_many(64, "");
    free(e2e_drain());
    st = e2e_status();
    ck_assert_int_eq(e2e_count(st, "succeeded"), 64);
    cJSON_Delete(st);
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/free"), 1);
    ck_assert_int_eq(e2e_sent_to(log, "/local"), 64);
    cJSON_Delete(log);
}
END_TEST

/* A storm of 503s on free: one request at a time (each waits for the one
 * before to answer), until the breaker opens; the jobs finish on local. */
START_TEST(test_storm_one_at_a_time_then_breaker)
{
    double at[64];
    cJSON *log, *st, *t;
    int n, n429;

    e2e_start_file("free-storm-503-local-20ms.json", "");
    config("\"breaker\": {\"failures\": 5, \"cooldown_s\": 30}");
    e2e_enqueue_many(64, "");
    free(e2e_drain());
    st = e2e_status();
    ck_assert_int_eq(e2e_count(st, "succeeded"), 64);
    cJSON_Delete(st);
    log = e2e_mock_log();
    n = e2e_arrivals(log, "/free", at, 64, &n429);
    ck_assert_int_le(n, 5);
    for (int i = 1; i < n; i++)
        ck_assert_msg(at[i] - at[i - 1] >= 95, "two in flight: %.0f ms apart",
                      at[i] - at[i - 1]);
    cJSON_Delete(log);
    t = tier_json("free");
    if (n == 5)
        ck_assert_str_eq(e2e_str(t, "breaker"), "open");
    cJSON_Delete(t);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("admission");
    TCase *pace = tcase_create("pacing");
    TCase *learn = tcase_create("headers");
    TCase *trouble = tcase_create("walls and storms");

    tcase_add_checked_fixture(pace, e2e_setup, e2e_teardown);
    tcase_set_timeout(pace, 60);
    tcase_add_test(pace, test_burst_of_64_paced_to_one_per_second);
    tcase_add_test(pace, test_retry_after_ms_holds_both_processes);
    tcase_add_test(pace, test_pace_falls_after_429s);
    suite_add_tcase(s, pace);

    tcase_add_checked_fixture(learn, e2e_setup, e2e_teardown);
    tcase_set_timeout(learn, 60);
    tcase_add_test(learn, test_remaining_zero_waits_for_reset);
    tcase_add_test(learn, test_azure_minus_one_ignored);
    tcase_add_test(learn, test_limit_header_caps_declared_rpm);
    suite_add_tcase(s, learn);

    tcase_add_checked_fixture(trouble, e2e_setup, e2e_teardown);
    tcase_set_timeout(trouble, 60);
    tcase_add_test(trouble, test_one_request_into_a_wall);
    tcase_add_test(trouble, test_storm_one_at_a_time_then_breaker);
    suite_add_tcase(s, trouble);
    return s;
}

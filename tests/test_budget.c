/* test_budget.c: budgets in money, end to end (docs/reference.md
 * "Budgets"). The real worker against the real `stepq mock`, a paid tier
 * priced at $1 a request (no token price: what a send may cost and what it
 * costs are the same dollar), and a budget: nothing is sent over it, the
 * steps it cannot cover are parked with reason "budget", two worker
 * processes on one store share it and never overspend it, and an
 * operator who raises it resumes the parked steps. A job's own
 * max_cost_usd holds the same way. */
#include "tests/support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/xalloc.h"
#include "tests/support/e2e.h"

/* Tier "paid" on the mock's /local route at $1 a request, and a budget
 * of usd dollars over it (a month's: no window ends within a job's 60 s,
 * so a step it cannot cover parks instead of waiting for the next). */
static void
config(double usd)
{
    char cfg[1024];

    snprintf(cfg, sizeof(cfg),
             "{\"worker\": {\"lease_s\": 5},"
             " \"tiers\": [{\"name\": \"paid\", \"base_url\":"
             " \"http://127.0.0.1:%d/local/v1\", \"model\": \"m\","
             " \"price\": {\"per_request\": 1}}],"
             " \"budgets\": [{\"name\": \"paid-month\", \"usd\": %g,"
             " \"per\": \"month\", \"tiers\": [\"paid\"]}]}",
             e2e_mock.port, usd);
    free(tmpdir_write(e2e_dir, "stepq.json", cfg, strlen(cfg)));
}

static void
enqueue(int n, const char *job_extra)
{
    size_t cap = (size_t)n * 300 + 16, len = 0;
    char *text = xmalloc(cap);

    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(
            text + len, cap - len,
            "{\"name\":\"j%d\",\"deadline_s\":60%s,\"steps\":[{\"name\":"
            "\"a\",\"request\":{\"messages\":[{\"role\":\"user\","
            "\"content\":\"n%d\"}]}}]}\n",
            i, job_extra, i);
    e2e_enqueue(text);
    free(text);
}

/* The jobs in state state, from status --json. */
static int
jobs_in(const char *state)
{
    struct run_result r;
    cJSON *st;
    int n;

    ck_assert_int_eq(RUN(&r, NULL, "status", "--json"), 0);
    st = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(st);
    n = cJSON_GetObjectItem(cJSON_GetObjectItem(st, "jobs"), state)->valueint;
    cJSON_Delete(st);
    run_result_free(&r);
    return n;
}

/* Every open park item has reason budget and says why; returns them. */
static int
budget_items(void)
{
    struct run_result r;
    const cJSON *it;
    cJSON *arr;
    int n = 0;

    ck_assert_int_eq(RUN(&r, NULL, "park", "list", "--json"), 0);
    arr = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(arr);
    cJSON_ArrayForEach(it, arr)
    {
        ck_assert_str_eq(e2e_str(it, "reason"), "budget");
        ck_assert_ptr_nonnull(strstr(e2e_str(it, "error"), "paid-month"));
        n++;
    }
    cJSON_Delete(arr);
    run_result_free(&r);
    return n;
}

/* The report's one budget window: its limit and what was spent of it,
 * nothing left reserved. */
static void
expect_report(double usd, double spent)
{
    struct run_result r;
    const cJSON *b;
    cJSON *rep;

    ck_assert_int_eq(RUN(&r, NULL, "report", "--json"), 0);
    rep = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(rep, "budgets")),
                     1);
    b = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "budgets"), 0);
    ck_assert_str_eq(e2e_str(b, "name"), "paid-month");
    ck_assert(cJSON_GetObjectItem(b, "usd")->valuedouble == usd);
    ck_assert(cJSON_GetObjectItem(b, "spent_usd")->valuedouble == spent);
    ck_assert(cJSON_GetObjectItem(b, "reserved_usd")->valuedouble == 0);
    cJSON_Delete(rep);
    run_result_free(&r);
}

/* A budget of $3: three sends, the other two steps parked, nothing sent
 * over it. */
START_TEST(test_nothing_is_sent_over_a_budget)
{
    e2e_start("{}", "");
    config(3);
    enqueue(5, "");
    free(e2e_drain());
    ck_assert_int_eq(e2e_sent_to(NULL, "/local"), 3);
    ck_assert_int_eq(jobs_in("succeeded"), 3);
    ck_assert_int_eq(jobs_in("parked"), 2);
    ck_assert_int_eq(budget_items(), 2);
    expect_report(3, 3);
}
END_TEST

/* Two worker processes on one store share one budget of $4 for ten
 * jobs: four sends in all, whoever made them; raised to $10, the parked
 * steps resume and the rest are sent. */
START_TEST(test_two_workers_share_it_then_raised)
{
    const char *args[] = {"--drain", "--concurrency", "8", NULL};
    struct run_result r;
    pid_t a, b;

    e2e_start("{\"latency_ms\": 20}", "");
    config(4);
    enqueue(10, "");
    a = e2e_spawn_workerv(args);
    b = e2e_spawn_workerv(args);
    ck_assert_int_eq(e2e_wait_exit(a), 0);
    ck_assert_int_eq(e2e_wait_exit(b), 0);
    ck_assert_int_eq(e2e_sent_to(NULL, "/local"), 4);
    ck_assert_int_eq(budget_items(), 6);
    config(10);
    ck_assert_int_eq(
        RUN(&r, NULL, "park", "resolve", "--all-matching", "--retry"), 0);
    run_result_free(&r);
    free(e2e_drain());
    ck_assert_int_eq(e2e_sent_to(NULL, "/local"), 10);
    ck_assert_int_eq(jobs_in("succeeded"), 10);
    expect_report(10, 10);
}
END_TEST

/* A job's max_cost_usd of $1.50 covers its first $1 step, not its
 * second. */
START_TEST(test_job_max_cost)
{
    cJSON *job;

    e2e_start("{}", "");
    config(100);
    e2e_enqueue("{\"name\":\"two\",\"max_cost_usd\":1.5,\"steps\":["
                "{\"name\":\"a\",\"request\":{\"messages\":[{\"role\":\"user\","
                "\"content\":\"a\"}]}},"
                "{\"name\":\"b\",\"request\":{\"messages\":[{\"role\":\"user\","
                "\"content\":\"b\"}]}}]}");
    free(e2e_drain());
    ck_assert_int_eq(e2e_sent_to(NULL, "/local"), 1);
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "parked");
    ck_assert_ptr_nonnull(
        strstr(e2e_str(e2e_step_of(job, 1), "state"), "park"));
    cJSON_Delete(job);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("budget");
    TCase *tc = tcase_create("budget");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_nothing_is_sent_over_a_budget);
    tcase_add_test(tc, test_two_workers_share_it_then_raised);
    tcase_add_test(tc, test_job_max_cost);
    suite_add_tcase(s, tc);
    return s;
}

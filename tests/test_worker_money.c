/* test_worker_money.c: what attempts cost, end to end (docs/reference.md
 * "Prices"), with the real `stepq mock`, the real worker and a tier with a
 * price: each provider's usage shape costed exactly, an error answer
 * costing 0, an answer without usage costing its estimate, and the same
 * money in `jobs show`, `report` and `/metrics` (checked by promtool).
 * Runs on SQLite and (test_worker_money_pg) PostgreSQL; a schedule's cost
 * in the report, on SQLite only. */
#define _GNU_SOURCE /* asprintf */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/price.h"
#include "tests/support/e2e.h"
#include "tests/support/httpcl.h"
#include "tests/support/pgfix.h"
#include "tests/support/servefix.h"

/* $1, $2, $0.50 and $1.25 per million: 1,000, 2,000, 500 and 1,250
 * nano-dollars a token. */
#define PRICE                                                                  \
    "\"price\": {\"input_per_mtok\": 1, \"output_per_mtok\": 2,"               \
    " \"cached_input_per_mtok\": 0.5, \"cache_write_per_mtok\": 1.25}"

/* What the script's answers cost (tests/data/e2e/free-usage-shapes.json):
 * OpenAI 600 uncached, 400 cached, 200 out; Anthropic 100 in, 1,000 read,
 * 200 written, 50 out; Gemini 200 uncached, 100 cached, 20 + 10 out. */
#define OPENAI_NUSD    (600 * 1000 + 400 * 500 + 200 * 2000)
#define ANTHROPIC_NUSD (100 * 1000 + 1000 * 500 + 200 * 1250 + 50 * 2000)
#define GEMINI_NUSD    (200 * 1000 + 100 * 500 + 30 * 2000)

#define STEP(n)                                                                \
    "{\"name\":\"" n "\",\"tiers\":[\"free\"],\"request\":{\"messages\":"      \
    "[{\"role\":\"user\",\"content\":\"" n "\"}]}}"
#define FOUR_STEPS                                                             \
    "{\"name\":\"priced\",\"steps\":[" STEP("a") "," STEP("b") "," STEP(       \
        "c") "," STEP("d") "]}"

static void
setup(void)
{
    e2e_setup();
    e2e_start_file("free-usage-shapes.json", "");
    e2e_config(1, PRICE ", \"timeout_s\": 5");
    e2e_enqueue(FOUR_STEPS);
    free(e2e_drain());
}

/* The member cost_usd of o in nano-dollars (it must be a number). */
static int64_t
nusd_of(const cJSON *o)
{
    const cJSON *c = cJSON_GetObjectItem(o, "cost_usd");

    ck_assert_msg(cJSON_IsNumber(c), "cost_usd is not a number");
    return price_from_usd(c->valuedouble);
}

static bool
estimated(const cJSON *o)
{
    return cJSON_IsTrue(cJSON_GetObjectItem(o, "cost_estimated"));
}

/* The cost of every attempt of the job, summed from jobs show. */
static int64_t
shown_total(const cJSON *job)
{
    int64_t sum = 0;
    const cJSON *s, *h;

    cJSON_ArrayForEach(s, cJSON_GetObjectItem(job, "steps"))
    {
        cJSON_ArrayForEach(h, cJSON_GetObjectItem(s, "history")) sum +=
            nusd_of(h);
    }
    return sum;
}

/* Each usage shape costs exactly what its counts say at the tier's
 * prices; the 429 before it costs nothing (not billed), and an answer
 * without usage costs its estimate, marked so. */
START_TEST(test_jobs_show_costs_each_usage_shape)
{
    cJSON *job = e2e_show(1);
    const cJSON *d;

    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_int_eq(nusd_of(e2e_hist(job, 0, 0)), 0); /* the 429 */
    ck_assert(!estimated(e2e_hist(job, 0, 0)));
    ck_assert_int_eq(nusd_of(e2e_hist(job, 0, 1)), OPENAI_NUSD);
    ck_assert_int_eq(nusd_of(e2e_step_of(job, 0)), OPENAI_NUSD);
    ck_assert_int_eq(nusd_of(e2e_hist(job, 1, 0)), ANTHROPIC_NUSD);
    ck_assert_int_eq(nusd_of(e2e_hist(job, 2, 0)), GEMINI_NUSD);
    ck_assert(!estimated(e2e_hist(job, 2, 0)));
    /* No usage: request and answer bytes / 4 at the input and output
     * prices, and the tokens charged the same way. */
    d = e2e_hist(job, 3, 0);
    ck_assert(estimated(d));
    ck_assert_int_gt(nusd_of(d), 0);
    ck_assert_int_gt(cJSON_GetObjectItem(d, "tokens")->valueint, 0);
    ck_assert_int_eq(nusd_of(job), shown_total(job));
    cJSON_Delete(job);
}
END_TEST

/* report: the tier's cost, the total and the costliest job are the sum
 * of what jobs show shows, exactly; the text names the dollars. */
START_TEST(test_report_costs_by_tier_and_job)
{
    cJSON *job = e2e_show(1), *rep;
    int64_t total = shown_total(job);
    struct run_result r;
    const cJSON *t, *free_tier = NULL, *top;
    char want[64];

    ck_assert_int_eq(RUN(&r, NULL, "report", "--json"), 0);
    rep = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(rep);
    run_result_free(&r);
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(rep, "tiers"))
    {
        if (strcmp(e2e_str(t, "tier"), "free") == 0)
            free_tier = t;
    }
    ck_assert_ptr_nonnull(free_tier);
    ck_assert_int_eq(nusd_of(free_tier), total);
    ck_assert_int_eq(nusd_of(rep), total);
    top = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "costliest"), 0);
    ck_assert_int_eq(cJSON_GetObjectItem(top, "id")->valueint, 1);
    ck_assert_int_eq(nusd_of(top), total);
    ck_assert_int_eq(RUN(&r, NULL, "report"), 0);
    snprintf(want, sizeof(want), "cost: %s\n",
             price_format(total, want + 32, 32));
    ck_assert_msg(strstr(r.out, want) != NULL, "no %s in %s", want, r.out);
    run_result_free(&r);
    cJSON_Delete(rep);
    cJSON_Delete(job);
}
END_TEST

/* tiers shows each tier's declared price, null for one without. */
START_TEST(test_tiers_show_the_price)
{
    struct run_result r;
    cJSON *t, *p;

    t = e2e_tier("free");
    p = cJSON_GetObjectItem(t, "price");
    ck_assert(cJSON_IsObject(p));
    ck_assert_double_eq(
        cJSON_GetNumberValue(cJSON_GetObjectItem(p, "input_per_mtok")), 1);
    ck_assert_double_eq(
        cJSON_GetNumberValue(cJSON_GetObjectItem(p, "cached_input_per_mtok")),
        0.5);
    ck_assert_double_eq(
        cJSON_GetNumberValue(cJSON_GetObjectItem(p, "cache_write_per_mtok")),
        1.25);
    ck_assert_double_eq(
        cJSON_GetNumberValue(cJSON_GetObjectItem(p, "per_request")), 0);
    cJSON_Delete(t);
    t = e2e_tier("local");
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(t, "price")));
    cJSON_Delete(t);
    ck_assert_int_eq(RUN(&r, NULL, "tiers"), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "PRICE IN/OUT"));
    ck_assert_ptr_nonnull(strstr(r.out, "$1/$2"));
    run_result_free(&r);
}
END_TEST

/* /metrics: stepq_cost_usd_total of the tier is the same sum, printed
 * exactly, and promtool accepts the text. */
START_TEST(test_metrics_cost_passes_promtool)
{
    cJSON *job = e2e_show(1);
    int64_t total = shown_total(job);
    struct server s;
    struct reply r = {0};
    char line[128], *out = NULL, *cmd = NULL;
    int rc;

    snprintf(line, sizeof(line),
             "stepq_cost_usd_total{tier=\"free\"} %lld.%09lld\n",
             (long long)(total / PRICE_NUSD_PER_USD),
             (long long)(total % PRICE_NUSD_PER_USD));
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    req(s.port, "GET", "/metrics", AUTH, "", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(strstr(r.body, line) != NULL, "no %s in %.3000s", line,
                  r.body);
    ck_assert_ptr_nonnull(strstr(r.body, "stepq_tokens_total{tier=\"free\"}"));
    ck_assert_ptr_null(strstr(r.body, "stepq_cost_usd_total{tier=\"local\""));
    free(tmpdir_write(e2e_dir, "metrics.txt", r.body, r.body_len));
    reply_free(&r);
    ck_assert_int_gt(
        asprintf(&cmd, "promtool check metrics < %s/metrics.txt", e2e_dir), 0);
    rc = run_sh(cmd, &out);
    ck_assert_msg(rc == 0, "promtool: %s", out);
    free(out);
    free(cmd);
    serve_stop(&s);
    cJSON_Delete(job);
}
END_TEST

/* Gives tier free of stepq.json the price above, keeping the rest (the
 * schedules e2e_start put there). */
static void
price_free(void)
{
    char *path = tmpdir_join(e2e_dir, "stepq.json"), *text, buf[8192];
    FILE *f = fopen(path, "r");
    size_t n;
    cJSON *cfg, *tier, *price;

    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    cfg = cJSON_Parse(buf);
    tier = cJSON_GetArrayItem(cJSON_GetObjectItem(cfg, "tiers"), 0);
    ck_assert_str_eq(e2e_str(tier, "name"), "free");
    price = cJSON_Parse("{" PRICE "}");
    cJSON_AddItemToObject(tier, "price",
                          cJSON_DetachItemFromObject(price, "price"));
    cJSON_Delete(price);
    cJSON_DeleteItemFromObject(tier, "api_key_env");
    text = cJSON_PrintUnformatted(cfg);
    free(tmpdir_write(e2e_dir, "stepq.json", text, strlen(text)));
    free(text);
    free(path);
    cJSON_Delete(cfg);
}

/* A schedule's night on a libfaketime clock: its slot's job (the 429,
 * then the OpenAI answer) costs OPENAI_NUSD, and the report says so for
 * the schedule, for the slot and for the job. */
START_TEST(test_report_costs_a_schedule)
{
    int64_t first = clock_now_ms() - 86400000LL;
    time_t t = (time_t)(first / 1000);
    char at[64], since[32];
    struct run_result r;
    struct tm tm;
    cJSON *rep;
    const cJSON *s;
    pid_t w;

    gmtime_r(&t, &tm);
    strftime(at, sizeof(at), "@%Y-%m-%d 03:39:58", &tm);
    strftime(since, sizeof(since), "%Y-%m-%dT00:00:00Z", &tm);
    e2e_start_file("free-usage-shapes.json",
                   "\"schedules\": [{\"name\": \"nightly\", \"cron\": "
                   "\"40 3 * * *\", \"job\": {\"name\": \"n\", \"steps\": "
                   "[" STEP("a") "]}}]");
    price_free();
    w = e2e_spawn_faked(at, false, (const char *[]){"--worker-id", "w", NULL});
    for (int64_t until = clock_mono_ms() + 20000;
         clock_mono_ms() < until && e2e_count(NULL, "succeeded") < 1;)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    kill(w, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(w), 0);
    ck_assert_int_eq(RUN_ARGS(&r, "report", "--since", since, "--json"), 0);
    rep = cJSON_Parse(r.out);
    run_result_free(&r);
    s = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "schedules"), 0);
    ck_assert_int_eq(nusd_of(s), OPENAI_NUSD);
    ck_assert_int_eq(
        nusd_of(cJSON_GetArrayItem(cJSON_GetObjectItem(s, "slots"), 0)),
        OPENAI_NUSD);
    ck_assert_int_eq(
        nusd_of(cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "costliest"), 0)),
        OPENAI_NUSD);
    cJSON_Delete(rep);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("worker: money");
    TCase *tc = tcase_create("money");

    tcase_add_checked_fixture(tc, setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_jobs_show_costs_each_usage_shape);
    tcase_add_test(tc, test_report_costs_by_tier_and_job);
    tcase_add_test(tc, test_metrics_cost_passes_promtool);
    tcase_add_test(tc, test_tiers_show_the_price);
    suite_add_tcase(s, tc);
    /* The schedule's night runs on libfaketime's clock, which a
     * PostgreSQL store does not follow (its times are the server's): on
     * SQLite only, as test_report's nights. */
    if (pgfix_backend_is_pg())
        return s;
    tc = tcase_create("schedule");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_report_costs_a_schedule);
    suite_add_tcase(s, tc);
    return s;
}

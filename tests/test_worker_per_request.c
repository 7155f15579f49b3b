/* test_worker_per_request.c: an http step's price (docs/reference.md
 * "Prices"): a tier's per_request, charged to an http step that names the
 * tier in its `tiers`, with the real worker and `stepq mock`: a 2xx
 * answer costs exactly per_request, an error answer nothing, and a step
 * that names no priced tier has no cost. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/price.h"
#include "tests/support/e2e.h"

#define HTTP_JOB(name, path, tiers)                                            \
    "{\"name\":\"" name                                                        \
    "\",\"steps\":[{\"name\":\"a\",\"kind\":\"http\"," tiers                   \
    "\"http\":{\"method\":\"POST\",\"url\":\"http://127.0.0.1:%d" path         \
    "\",\"body\":{\"n\":1}}}]}\n"

static int64_t
cost_of(const cJSON *o)
{
    const cJSON *c = cJSON_GetObjectItem(o, "cost_usd");

    if (cJSON_IsNull(c))
        return -1;
    ck_assert_msg(cJSON_IsNumber(c), "cost_usd is not a number");
    return price_from_usd(c->valuedouble);
}

START_TEST(test_http_step_charged_per_request)
{
    char jobs[1024];
    cJSON *job;

    e2e_start("{\"routes\": [{\"path\": \"/gone\", \"loop\": true,"
              " \"answers\": [{\"status\": 404}]}]}",
              "");
    /* tier free gets a price of $0.002 a request (and a token price that
     * an http step does not pay) */
    e2e_config(1, "\"price\": {\"per_request\": 0.002, \"input_per_mtok\": 5}");
    snprintf(jobs, sizeof(jobs),
             HTTP_JOB("paid", "/hook", "\"tiers\":[\"local\",\"free\"],")
                 HTTP_JOB("gone", "/gone", "\"tiers\":[\"free\"],")
                     HTTP_JOB("none", "/hook", ""),
             e2e_mock.port, e2e_mock.port, e2e_mock.port);
    e2e_enqueue(jobs);
    free(e2e_drain());
    job = e2e_show(1);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_int_eq(cost_of(e2e_hist(job, 0, 0)), 2000000);
    ck_assert(!cJSON_IsTrue(
        cJSON_GetObjectItem(e2e_hist(job, 0, 0), "cost_estimated")));
    cJSON_Delete(job);
    job = e2e_show(2);
    ck_assert_int_eq(cost_of(e2e_hist(job, 0, 0)), 0); /* 404: not billed */
    cJSON_Delete(job);
    job = e2e_show(3);
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_int_eq(cost_of(e2e_hist(job, 0, 0)), -1); /* no price */
    cJSON_Delete(job);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("worker: an http step's price per request");
    TCase *tc = tcase_create("per_request");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_http_step_charged_per_request);
    suite_add_tcase(s, tc);
    return s;
}

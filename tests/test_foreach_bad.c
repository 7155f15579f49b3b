/* test_foreach_bad.c: a foreach step's source that cannot be an array
 * (issue 41, docs/reference.md "Foreach"), through the real binary: refused
 * at enqueue and by `stepq check` with the JSON path and why, nothing
 * written; too many elements; and an output read when the job runs that
 * is not an array or too long failing the job with nothing sent. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/spec.h"
#include "tests/support/e2e.h"

#define FE_STEP(fe)                                                            \
    "{\"name\":\"r\",\"steps\":[{\"name\":\"a\",\"request\":{\"messages\":"    \
    "[{\"role\":\"user\",\"content\":\"x\"}]}},{\"name\":\"b\","               \
    "\"foreach\":" fe ",\"request\":{\"messages\":[{\"role\":\"user\","        \
    "\"content\":\"{{item}}\"}]}}]}"

static const struct refusal {
    const char *job, *input, *want;
} refusals[] = {
    {FE_STEP("{\"in\":\"{{input.items}}\"}"), "{\"items\":{\"a\":1}}",
     "steps[1].foreach.in: {{input.items}} is an object, not an array"},
    {FE_STEP("{\"in\":\"{{input.items}}\"}"), "{\"items\":\"abc\"}",
     "steps[1].foreach.in: {{input.items}} is a string, not an array"},
    {FE_STEP("{\"in\":\"{{input.nope}}\"}"), "{\"items\":[]}",
     "steps[1].foreach.in: {{input.nope}}: no nope in the input"},
    {FE_STEP("{\"in\":\"{{input.items}}\"}"), NULL,
     "steps[1].foreach.in: {{input.items}}: the job has no input"},
    {FE_STEP("{\"in\":\"{{steps.a.output}}\"}"), NULL,
     "steps[1].foreach.in: {{steps.a.output}} is text, not an array: read a "
     "path into the output, such as {{steps.a.output.items}}"},
    {FE_STEP("{\"in\":\"{{steps.zz.output.x}}\"}"), NULL,
     "steps[1].foreach.in: template names unknown step zz"},
    {FE_STEP("{\"in\":\"items: {{input.items}}\"}"), "{\"items\":[]}",
     "steps[1].foreach.in: must be one template whole"},
    {FE_STEP("{\"in\":\"{{input}}\",\"as\":\"steps\"}"), "[]",
     "steps[1].foreach: as: \"steps\" is not an element name"},
    {FE_STEP("{\"in\":\"{{input}}\",\"parallelism\":0}"), "[]",
     "steps[1].foreach.parallelism"},
    {FE_STEP("{\"in\":\"{{input}}\",\"max\":3}"), "[]",
     "steps[1].foreach: max: unknown field"},
    {FE_STEP("{\"element\":1}"), NULL,
     "steps[1].foreach: \"element\" is for the jobs stepq makes"},
    {FE_STEP("\"{{input}}\""), "[]", "steps[1].foreach: must be an object"},
    {"{\"name\":\"r\",\"key\":\"foreach:1:0:0\",\"steps\":[{\"name\":\"a\","
     "\"request\":{\"messages\":[{\"role\":\"user\"}]}}]}",
     NULL, "key: keys starting with foreach: are the foreach elements' own"},
};

START_TEST(test_refused_at_enqueue_and_check)
{
    const struct refusal *c = &refusals[_i];
    const char *verbs[] = {"enqueue", "check"};
    struct run_result r;
    int rc;

    fixture_init(FIXTURE_DB);
    for (int v = 0; v < 2; v++) {
        rc = c->input ? RUN(&r, c->job, "--db", FIXTURE_DB, verbs[v], "-",
                            "--input", c->input)
                      : RUN(&r, c->job, "--db", FIXTURE_DB, verbs[v], "-");
        ck_assert_msg(rc == 2, "row %d %s: exit %d: %s", _i, verbs[v], rc,
                      r.err);
        ck_assert_msg(strstr(r.err, c->want) != NULL, "row %d: %s", _i, r.err);
        run_result_free(&r);
    }
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 0);
}
END_TEST

/* Too many elements: refused at enqueue from the input, and failing the
 * job from an output, with nothing sent. */
START_TEST(test_too_many_elements)
{
    struct run_result r;
    char *many = malloc(8192), *script = malloc(8300);
    size_t len = (size_t)snprintf(many, 8192, "[0");
    cJSON *o, *log;

    for (int i = 1; i <= SPEC_FOREACH_MAX; i++)
        len += (size_t)snprintf(many + len, 8192 - len, ",%d", i % 10);
    snprintf(many + len, 8192 - len, "]");
    snprintf(script, 8300, "{\"content\":{\"items\":%s}}", many);
    e2e_start(script, "");
    ck_assert_int_eq(RUN(&r, FE_STEP("{\"in\":\"{{input}}\"}"), "enqueue", "-",
                         "--input", many),
                     2);
    ck_assert_msg(strstr(r.err, "steps[1].foreach.in: {{input}} holds 1001 "
                                "elements, more than the 1000 a foreach step "
                                "may run over") != NULL,
                  "%s", r.err);
    run_result_free(&r);
    e2e_enqueue(FE_STEP("{\"in\":\"{{steps.a.output.items}}\"}"));
    free(e2e_drain());
    o = e2e_show(1);
    ck_assert_str_eq(e2e_str(o, "state"), "failed");
    ck_assert_str_eq(e2e_str(o, "error"),
                     "step b: foreach: {{steps.a.output.items}} holds 1001 "
                     "elements, more than the 1000 a foreach step may run "
                     "over; nothing sent");
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 1); /* step a only */
    cJSON_Delete(log);
    cJSON_Delete(o);
    free(many);
    free(script);
}
END_TEST

/* A source known only when the job runs that is not an array fails it,
 * naming it, with no element made and nothing sent. */
START_TEST(test_output_not_array_fails_job)
{
    struct run_result r;
    cJSON *o, *log;

    e2e_start("{\"content\":{\"items\":{\"x\":1}}}", "");
    e2e_enqueue(FE_STEP("{\"in\":\"{{steps.a.output.items}}\"}"));
    free(e2e_drain());
    o = e2e_show(1);
    ck_assert_str_eq(e2e_str(o, "state"), "failed");
    ck_assert_str_eq(e2e_str(o, "error"),
                     "step b: foreach: {{steps.a.output.items}} is an object, "
                     "not an array; nothing sent");
    cJSON_Delete(o);
    ck_assert_int_eq(RUN(&r, NULL, "jobs", "show", "2"), 3); /* none made */
    run_result_free(&r);
    log = e2e_mock_log();
    ck_assert_int_eq(cJSON_GetArraySize(log), 1);
    cJSON_Delete(log);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("foreach_bad");
    TCase *bad = tcase_create("bad"), *refuse = tcase_create("refuse");

    tcase_add_checked_fixture(bad, e2e_setup, e2e_teardown);
    tcase_set_timeout(bad, 60);
    tcase_add_test(bad, test_too_many_elements);
    tcase_add_test(bad, test_output_not_array_fails_job);
    suite_add_tcase(s, bad);
    tcase_add_checked_fixture(refuse, fixture_setup, fixture_teardown);
    tcase_add_loop_test(refuse, test_refused_at_enqueue_and_check, 0,
                        (int)(sizeof(refusals) / sizeof(refusals[0])));
    suite_add_tcase(s, refuse);
    return s;
}

/* test_fuzz_regressions.c: every input the fuzz targets (fuzz/) found or
 * confirmed, fed through the same entry point as its target, with the
 * target's check. Add one test per kept input in fuzz/crashes/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "spec/spec.h"
#include "tests/support/support.h"

static const char *const outputs[] = {"OUT-A", NULL};

/* A job of two steps, "a" and "b", whose b request is req (owned); b's
 * request filled with a's output "OUT-A" (fuzz_expand's entry point). */
static cJSON *
fill_b(cJSON *req)
{
    cJSON *job =
        cJSON_Parse("{\"name\":\"f\",\"steps\":[{\"name\":\"a\",\"request\":"
                    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}},"
                    "{\"name\":\"b\"}]}");
    struct spec_vars v = {.outputs = outputs};
    struct spec_job *j = NULL;
    cJSON *out = NULL;
    char err[512];

    cJSON_AddItemToObject(
        cJSON_GetArrayItem(cJSON_GetObjectItem(job, "steps"), 1), "request",
        req);
    ck_assert_msg(spec_from_json(job, NULL, &j, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_int_eq(spec_step_fill(j, 1, &v, &out, err, sizeof(err)), 0);
    spec_job_free(j);
    return out;
}

/* fuzz_expand: a node with more than 256 children. The first expander
 * walked the copy with a fixed stack of 256 pending nodes and silently
 * skipped the children that did not fit, so the 257th element kept its
 * template. */
START_TEST(test_expand_wide_array)
{
    cJSON *req = cJSON_Parse("{\"messages\":[{\"role\":\"user\"}]}");
    cJSON *in = cJSON_AddArrayToObject(req, "v"), *out;
    int i = 0;
    const cJSON *it;

    for (int k = 0; k < 256; k++)
        cJSON_AddItemToArray(in, cJSON_CreateNumber(k));
    cJSON_AddItemToArray(in, cJSON_CreateString("{{steps.a.output}}"));
    out = fill_b(req);
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(out, "v"))
    {
        if (i++ == 256)
            ck_assert_str_eq(it->valuestring, "OUT-A");
    }
    ck_assert_int_eq(i, 257);
    cJSON_Delete(out);
}
END_TEST

/* The same through a chat request: 300 messages, each with a template. */
START_TEST(test_expand_many_messages)
{
    cJSON *req = cJSON_CreateObject(), *out;
    cJSON *msgs = cJSON_AddArrayToObject(req, "messages");
    const cJSON *m;

    for (int k = 0; k < 300; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "role", "user");
        cJSON_AddStringToObject(o, "content", "x {{steps.a.output}}");
        cJSON_AddItemToArray(msgs, o);
    }
    out = fill_b(req);
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(out, "messages"))
    {
        ck_assert_str_eq(cJSON_GetObjectItem(m, "content")->valuestring,
                         "x OUT-A");
    }
    cJSON_Delete(out);
}
END_TEST

/* fuzz_expand (fuzz/regressions/expand-input-whole.json): {{input}},
 * a template without a path, walked the input from a NULL path plus 0,
 * which UBSan reports (the ASan build fails here). */
START_TEST(test_input_whole_has_no_path)
{
    static const char text[] =
        "{\"name\":\"f\",\"input\":{\"a\":[1]},\"steps\":[{\"name\":"
        "\"a\",\"request\":{\"messages\":[{\"role\":\"user\"}],\"v\":"
        "\"{{input}}\",\"w\":\"x{{input}}\"}}]}";
    struct spec_job *j = NULL;
    struct spec_vars v = {0};
    cJSON *out = NULL;
    char err[256];

    ck_assert_int_eq(spec_parse(text, strlen(text), NULL, &j, err, sizeof(err)),
                     0);
    v.input = j->input;
    ck_assert_int_eq(spec_step_fill(j, 0, &v, &out, err, sizeof(err)), 0);
    ck_assert(
        cJSON_IsArray(cJSON_GetObjectItem(cJSON_GetObjectItem(out, "v"), "a")));
    ck_assert_str_eq(cJSON_GetObjectItem(out, "w")->valuestring,
                     "x{\"a\":[1]}");
    cJSON_Delete(out);
    spec_job_free(j);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("fuzz_regressions");
    TCase *tc = tcase_create("expand");

    tcase_add_test(tc, test_expand_wide_array);
    tcase_add_test(tc, test_expand_many_messages);
    tcase_add_test(tc, test_input_whole_has_no_path);
    suite_add_tcase(s, tc);
    return s;
}

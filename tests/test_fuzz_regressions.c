/* test_fuzz_regressions.c: every input the fuzz targets (fuzz/) found or
 * confirmed, fed through the same entry point as its target, with the
 * target's check. Add one test per kept input in fuzz/crashes/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tests/support/support.h"
#include "worker/internal.h"

static const char *const names[] = {"a"};
static const char *const outputs[] = {"OUT-A"};

/* fuzz_expand: a node with more than 256 children. worker__expand walks
 * the copy with a fixed stack of 256 pending nodes and silently skips the
 * children that do not fit, so the 257th element keeps its template. */
START_TEST(test_expand_wide_array)
{
    cJSON *in = cJSON_CreateArray(), *out;
    int i = 0;
    const cJSON *it;

    for (int k = 0; k < 256; k++)
        cJSON_AddItemToArray(in, cJSON_CreateNumber(k));
    cJSON_AddItemToArray(in, cJSON_CreateString("{{steps.a.output}}"));
    out = worker__expand(in, names, outputs, 1);
    ck_assert_ptr_nonnull(out);
    cJSON_ArrayForEach(it, out)
    {
        if (i++ == 256)
            ck_assert_str_eq(it->valuestring, "OUT-A");
    }
    ck_assert_int_eq(i, 257);
    cJSON_Delete(out);
    cJSON_Delete(in);
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
    out = worker__expand(req, names, outputs, 1);
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(out, "messages"))
    {
        ck_assert_str_eq(cJSON_GetObjectItem(m, "content")->valuestring,
                         "x OUT-A");
    }
    cJSON_Delete(out);
    cJSON_Delete(req);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("fuzz_regressions");
    TCase *tc = tcase_create("expand");

    tcase_add_test(tc, test_expand_wide_array);
    tcase_add_test(tc, test_expand_many_messages);
    suite_add_tcase(s, tc);
    return s;
}

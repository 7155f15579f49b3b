/* test_mock_batch_anthropic.c: the mock's Message Batches, its batch log
 * lines and its "batch" script checks, over real HTTP.
 *
 * A client of Anthropic's Message Batches API against the real `stepq
 * mock`: create, poll until processing_status is ended (request_counts stay
 * "processing" until then, as Anthropic documents), read the results by
 * custom_id with each message's usage checked against the mock's rule;
 * per-item errors, expiry, cancellation (honoured or not), the list, routes
 * kept apart and bad input. test_mock_batch.c does OpenAI's side.
 */
#include "tests/support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/defs.h"
#include "tests/support/batchcl.h"
#include "tests/support/httpcl.h"
#include "tests/support/mockproc.h"

#define ANT "/v1/messages/batches"
#define ITEM(id, max)                                                          \
    "{\"custom_id\":\"" id "\",\"params\":{\"model\":\"claude-m\","            \
    "\"max_tokens\":" #max ",\"messages\":[{\"role\":\"user\","                \
    "\"content\":\"say " id "\"}]}}"
#define THREE                                                                  \
    "{\"requests\":[" ITEM("ok", 100) "," ITEM("e", 100) "," ITEM("x", 100) "]}"

static char path[256];

/* at is ANT/ID followed by tail ("", "/results", "/cancel"). */
static const char *
at(const cJSON *batch, const char *tail)
{
    snprintf(path, sizeof(path), ANT "/%s%s", jstr(batch, "id"), tail);
    return path;
}

/* ended polls batch until it has ended and returns it (caller deletes). */
static cJSON *
ended(int port, const cJSON *batch)
{
    return bc_poll(port, at(batch, ""), "processing_status", "ended", NULL, 0);
}

static const char *
result_type(const cJSON *lines, const char *id)
{
    return jstr(bc_find(lines, id), "result.type");
}

START_TEST(test_anthropic_create_poll_results)
{
    int port = mockproc_fixture_start("{\"batch\": {\"delay_ms\": 1000}}");
    cJSON *b =
        bc_call(port, "POST", ANT,
                "{\"requests\":[" ITEM("a", 100) "," ITEM("b", 5) "]}", 200);
    cJSON *e = bc_call(port, "GET", at(b, "/results"), NULL, 400), *d, *res;
    const cJSON *msg;

    ck_assert_str_eq(jstr(b, "type"), "message_batch");
    ck_assert_str_eq(jstr(b, "processing_status"), "in_progress");
    ck_assert_int_eq(jnum(b, "request_counts.processing"), 2);
    ck_assert(cJSON_IsNull(jget(b, "results_url")));
    ck_assert_str_eq(jstr(e, "error.type"), "invalid_request_error");
    d = ended(port, b);
    ck_assert_int_eq(jnum(d, "request_counts.succeeded"), 2);
    ck_assert_ptr_nonnull(strstr(jstr(d, "results_url"), at(b, "/results")));
    res = bc_lines(port, at(b, "/results"));
    msg = jget(bc_find(res, "a"), "result.message");
    ck_assert_str_eq(jstr(msg, "type"), "message");
    ck_assert_str_eq(jstr(msg, "stop_reason"), "end_turn");
    ck_assert_int_eq(
        jnum(msg, "usage.output_tokens"),
        (strlen(jstr(cJSON_GetArrayItem(jget(msg, "content"), 0), "text")) +
         3) /
            4);
    ck_assert_str_eq(jstr(bc_find(res, "b"), "result.message.stop_reason"),
                     "max_tokens");
    ck_assert_int_eq(jnum(bc_find(res, "b"), "result.message.usage."
                                             "output_tokens"),
                     5);
    cJSON_Delete(res);
    cJSON_Delete(d);
    cJSON_Delete(e);
    cJSON_Delete(b);
}
END_TEST

START_TEST(test_anthropic_input_tokens_follow_the_params)
{
    int port = mockproc_fixture_start("{}");
    cJSON *b =
        bc_call(port, "POST", ANT, "{\"requests\":[" ITEM("a", 100) "]}", 200);
    cJSON *d = ended(port, b), *res = bc_lines(port, at(b, "/results"));
    cJSON *params = cJSON_Parse("{\"model\":\"claude-m\",\"max_tokens\":100,"
                                "\"messages\":[{\"role\":\"user\","
                                "\"content\":\"say a\"}]}");

    ck_assert_int_eq(
        jnum(bc_find(res, "a"), "result.message.usage.input_tokens"),
        bc_prompt_tokens(params));
    ck_assert_str_eq(jstr(bc_find(res, "a"), "result.message.model"),
                     "claude-m");
    cJSON_Delete(params);
    cJSON_Delete(res);
    cJSON_Delete(d);
    cJSON_Delete(b);
}
END_TEST

START_TEST(test_anthropic_item_errors_and_expiry)
{
    int port = mockproc_fixture_start(
        "{\"batch\": {\"error_ids\": [\"e\"], \"expire_ids\": [\"x\"], "
        "\"error_status\": 529}}");
    cJSON *b = bc_call(port, "POST", ANT, THREE, 200), *d, *res;

    d = ended(port, b);
    ck_assert_int_eq(jnum(d, "request_counts.succeeded"), 1);
    ck_assert_int_eq(jnum(d, "request_counts.errored"), 1);
    ck_assert_int_eq(jnum(d, "request_counts.expired"), 1);
    res = bc_lines(port, at(b, "/results"));
    ck_assert_str_eq(result_type(res, "ok"), "succeeded");
    ck_assert_str_eq(result_type(res, "e"), "errored");
    ck_assert_str_eq(jstr(bc_find(res, "e"), "result.error.error.type"),
                     "overloaded_error");
    ck_assert_str_eq(result_type(res, "x"), "expired");
    cJSON_Delete(res);
    cJSON_Delete(d);
    cJSON_Delete(b);
}
END_TEST

START_TEST(test_anthropic_expiry_by_time)
{
    /* Items are done at 100, 200 and 300 ms; the window ends at 150. */
    int port = mockproc_fixture_start(
        "{\"batch\": {\"delay_ms\": 300, \"expire_ms\": 150}}");
    cJSON *b = bc_call(port, "POST", ANT, THREE, 200), *d, *res;

    d = ended(port, b);
    ck_assert_int_eq(jnum(d, "request_counts.succeeded"), 1);
    ck_assert_int_eq(jnum(d, "request_counts.expired"), 2);
    res = bc_lines(port, at(b, "/results"));
    ck_assert_str_eq(result_type(res, "ok"), "succeeded");
    ck_assert_str_eq(result_type(res, "x"), "expired");
    cJSON_Delete(res);
    cJSON_Delete(d);
    cJSON_Delete(b);
}
END_TEST

START_TEST(test_anthropic_cancel)
{
    int port = mockproc_fixture_start(
        "{\"batch\": {\"delay_ms\": 60000, \"cancel_ms\": 200}}");
    cJSON *b = bc_call(port, "POST", ANT, THREE, 200), *c, *d, *res;

    c = bc_call(port, "POST", at(b, "/cancel"), "", 200);
    ck_assert_str_eq(jstr(c, "processing_status"), "canceling");
    ck_assert(cJSON_IsString(jget(c, "cancel_initiated_at")));
    d = ended(port, b);
    ck_assert_int_eq(jnum(d, "request_counts.canceled"), 3);
    res = bc_lines(port, at(b, "/results"));
    ck_assert_str_eq(result_type(res, "e"), "canceled");
    cJSON_Delete(res);
    cJSON_Delete(d);
    cJSON_Delete(c);
    cJSON_Delete(b);
}
END_TEST

START_TEST(test_anthropic_cancel_not_honored_lets_items_finish)
{
    int port = mockproc_fixture_start(
        "{\"batch\": {\"delay_ms\": 1500, \"honor_cancel\": false}}");
    cJSON *b = bc_call(port, "POST", ANT, THREE, 200), *c, *d;

    c = bc_call(port, "POST", at(b, "/cancel"), "", 200);
    ck_assert_str_eq(jstr(c, "processing_status"), "canceling");
    d = ended(port, b);
    ck_assert_int_eq(jnum(d, "request_counts.succeeded"), 3);
    ck_assert_int_eq(jnum(d, "request_counts.canceled"), 0);
    cJSON_Delete(d);
    cJSON_Delete(c);
    cJSON_Delete(b);
}
END_TEST

START_TEST(test_anthropic_list_pages_newest_first)
{
    int port = mockproc_fixture_start("{}");
    cJSON *b1 = bc_call(port, "POST", ANT, THREE, 200);
    cJSON *b2 = bc_call(port, "POST", ANT, THREE, 200);
    cJSON *p1 = bc_call(port, "GET", ANT "?limit=1", NULL, 200), *p2;
    char q[128];

    ck_assert_int_eq(cJSON_GetArraySize(jget(p1, "data")), 1);
    ck_assert(cJSON_IsTrue(jget(p1, "has_more")));
    ck_assert_str_eq(jstr(p1, "first_id"), jstr(b2, "id"));
    snprintf(q, sizeof(q), ANT "?limit=5&after_id=%s", jstr(p1, "last_id"));
    p2 = bc_call(port, "GET", q, NULL, 200);
    ck_assert_int_eq(cJSON_GetArraySize(jget(p2, "data")), 1);
    ck_assert(cJSON_IsFalse(jget(p2, "has_more")));
    ck_assert_str_eq(jstr(p2, "last_id"), jstr(b1, "id"));
    cJSON_Delete(p2);
    cJSON_Delete(p1);
    cJSON_Delete(b2);
    cJSON_Delete(b1);
}
END_TEST

START_TEST(test_routes_keep_their_batches_apart)
{
    int port = mockproc_fixture_start(
        "{\"routes\": [{\"path\": \"/a\"}, {\"path\": \"/b\"}]}");
    cJSON *b = bc_call(port, "POST", "/a" ANT, THREE, 200), *d, *e;
    char p[160];

    snprintf(p, sizeof(p), "/a" ANT "/%s", jstr(b, "id"));
    d = bc_poll(port, p, "processing_status", "ended", NULL, 0);
    ck_assert_ptr_nonnull(strstr(jstr(d, "results_url"), "/a" ANT "/"));
    snprintf(p, sizeof(p), "/b" ANT "/%s", jstr(b, "id"));
    e = bc_call(port, "GET", p, NULL, 404);
    ck_assert_str_eq(jstr(e, "error.type"), "not_found_error");
    cJSON_Delete(e);
    cJSON_Delete(d);
    cJSON_Delete(b);
}
END_TEST

static const struct {
    const char *method, *path, *body;
    int status;
    const char *want; /* in error.message */
} bad_anthropic[] = {
    {"POST", ANT, "{}", 400, "requests: Field required"},
    {"POST", ANT, "{\"requests\":[]}", 400, "at least 1 item"},
    {"POST", ANT, "[1]", 400, "must be a JSON object"},
    {"POST", ANT,
     "{\"requests\":[{\"custom_id\":\"a\",\"params\":{\"model\":\"m\","
     "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}}]}",
     400, "requests.0.params.max_tokens"},
    {"POST", ANT, "{\"requests\":[" ITEM("a b", 5) "]}", 400,
     "requests.0.custom_id"},
    {"POST", ANT, "{\"requests\":[" ITEM("a", 5) "," ITEM("a", 5) "]}", 400,
     "requests.1.custom_id: must be unique"},
    {"POST", ANT, THREE, 400, "at most 2 requests"},
    {"GET", ANT "/msgbatch_nope", NULL, 404, "not found"},
    {"GET", ANT "/msgbatch_nope/cancel", NULL, 404, "Not Found"},
};

START_TEST(test_anthropic_bad_input_gets_anthropic_errors)
{
    int port = mockproc_fixture_start("{\"batch\": {\"max_items\": 2}}");
    cJSON *e = bc_call(port, bad_anthropic[_i].method, bad_anthropic[_i].path,
                       bad_anthropic[_i].body, bad_anthropic[_i].status);

    ck_assert_str_eq(jstr(e, "type"), "error");
    ck_assert_ptr_nonnull(
        strstr(jstr(e, "error.message"), bad_anthropic[_i].want));
    cJSON_Delete(e);
}
END_TEST

START_TEST(test_batch_requests_are_logged)
{
    int port = mockproc_fixture_start("{}");
    cJSON *b = bc_call(port, "POST", ANT, THREE, 200), *d = ended(port, b);
    cJSON *res = bc_lines(port, at(b, "/results"));
    cJSON *log = mockproc_read_log(mockproc_dir, 3), *last;
    int n = cJSON_GetArraySize(log);

    last = cJSON_GetArrayItem(log, n - 1);
    ck_assert_str_eq(jstr(cJSON_GetArrayItem(log, 0), "kind"), "batch");
    ck_assert_str_eq(jstr(cJSON_GetArrayItem(log, 0), "batch.op"), "create");
    ck_assert_int_eq(jnum(cJSON_GetArrayItem(log, 0), "batch.items"), 3);
    ck_assert_str_eq(jstr(last, "batch.api"), "anthropic");
    ck_assert_str_eq(jstr(last, "batch.op"), "results");
    ck_assert_str_eq(jstr(last, "batch.id"), jstr(b, "id"));
    ck_assert_int_eq(jnum(last, "batch.items"), 3);
    cJSON_Delete(log);
    cJSON_Delete(res);
    cJSON_Delete(d);
    cJSON_Delete(b);
}
END_TEST

static const struct {
    const char *script, *want;
} bad_scripts[] = {
    {"{\"batch\": {\"delay\": 1}}", "batch.delay: unknown field"},
    {"{\"batch\": \"x\"}", "batch: must be an object"},
    {"{\"batch\": {\"error_status\": 200}}",
     "batch.error_status: must be between 400 and 599"},
    {"{\"routes\": [{\"path\": \"/a\", \"batch\": {\"error_ids\": [1]}}]}",
     "routes[0].batch.error_ids[0]: must be a non-empty string"},
    {"{\"batch\": {\"max_items\": 0}}", "batch.max_items: must be between"},
    {"{\"batch\": {\"honor_cancel\": 1}}", "batch.honor_cancel"},
};

START_TEST(test_bad_batch_script_exits_2_naming_path)
{
    char *sp = tmpdir_write(mockproc_dir, "bad.json", bad_scripts[_i].script,
                            strlen(bad_scripts[_i].script));
    const char *argv[] = {"mock", "--check", "--script", sp, NULL};
    struct run_result res;

    run_stepq(argv, NULL, &res);
    ck_assert_int_eq(res.status, 2);
    ck_assert_msg(strstr(res.err, bad_scripts[_i].want) != NULL,
                  "stderr lacks \"%s\": %s", bad_scripts[_i].want, res.err);
    run_result_free(&res);
    free(sp);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("mock_batch_anthropic");
    TCase *flow = tcase_create("anthropic_flow");
    TCase *bad = tcase_create("anthropic_bad_input");
    TCase *all[] = {flow, bad};

    tcase_add_test(flow, test_anthropic_create_poll_results);
    tcase_add_test(flow, test_anthropic_input_tokens_follow_the_params);
    tcase_add_test(flow, test_anthropic_item_errors_and_expiry);
    tcase_add_test(flow, test_anthropic_expiry_by_time);
    tcase_add_test(flow, test_anthropic_cancel);
    tcase_add_test(flow, test_anthropic_cancel_not_honored_lets_items_finish);
    tcase_add_test(flow, test_anthropic_list_pages_newest_first);
    tcase_add_test(flow, test_routes_keep_their_batches_apart);
    tcase_add_test(flow, test_batch_requests_are_logged);
    tcase_add_loop_test(bad, test_anthropic_bad_input_gets_anthropic_errors, 0,
                        (int)STEPQ_ARRAY_LEN(bad_anthropic));
    tcase_add_loop_test(bad, test_bad_batch_script_exits_2_naming_path, 0,
                        (int)STEPQ_ARRAY_LEN(bad_scripts));
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(all); i++) {
        tcase_add_checked_fixture(all[i], mockproc_setup, mockproc_teardown);
        tcase_set_timeout(all[i], 20);
        suite_add_tcase(s, all[i]);
    }
    return s;
}

/* test_mock_batch.c: the mock's batch APIs over real HTTP.
 *
 * Each test starts the real `stepq mock` with a "batch" script and plays a
 * client of OpenAI's Files and Batch APIs or Anthropic's Message Batches:
 * upload, create, poll, read the results by custom_id, with the usage of
 * every answer checked against the mock's rule (prompt = the item's
 * compact request bytes / 4). Per-item errors, expiry, cancellation, the
 * list a client uses to find its batch again, caps and bad input follow.
 * Polls wait on a condition with a deadline; nothing sleeps a fixed time.
 */
#include "tests/support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tests/support/batchcl.h"
#include "tests/support/httpcl.h"
#include "tests/support/mockproc.h"

#define CREATE_FMT                                                             \
    "{\"input_file_id\":\"%s\",\"endpoint\":\"/v1/chat/completions\","         \
    "\"completion_window\":\"24h\"}"

static char path[256];

/* batch_path is "/v1/batches/ID"; content_path "/v1/files/ID/content". */
static const char *
batch_path(const char *id)
{
    snprintf(path, sizeof(path), "/v1/batches/%s", id);
    return path;
}

static const char *
content_path(const char *id)
{
    snprintf(path, sizeof(path), "/v1/files/%s/content", id);
    return path;
}

/* check_chat asserts that an item's answer is a chat completion whose
 * usage follows the mock's rule for the request it answers. */
static void
check_chat(const cJSON *chat, const cJSON *request)
{
    const char *content = jstr(chat, "choices.message.content");
    int completion = (int)(strlen(content) + 3) / 4;

    ck_assert_str_eq(jstr(chat, "object"), "chat.completion");
    ck_assert_int_eq(jnum(chat, "usage.prompt_tokens"),
                     bc_prompt_tokens(request));
    ck_assert_int_eq(jnum(chat, "usage.completion_tokens"), completion);
    ck_assert_int_eq(jnum(chat, "usage.total_tokens"),
                     bc_prompt_tokens(request) + completion);
}

/* ---- OpenAI -------------------------------------------------------------- */

START_TEST(test_openai_upload_create_poll_results)
{
    int port = mockproc_fixture_start("{\"batch\": {\"delay_ms\": 200}}");
    cJSON *b = bc_openai_batch(port, 3, "q", "{\"run\":\"r1\"}"), *done, *out;
    char seen[256] = "";

    ck_assert_str_eq(jstr(b, "status"), "validating");
    ck_assert_int_eq(jnum(b, "request_counts.total"), 3);
    ck_assert(cJSON_IsNull(jget(b, "output_file_id")));
    done = bc_poll(port, batch_path(jstr(b, "id")), "status", "completed", seen,
                   sizeof(seen));
    ck_assert_int_eq(jnum(done, "request_counts.completed"), 3);
    ck_assert(cJSON_IsNull(jget(done, "error_file_id")));
    out = bc_lines(port, content_path(jstr(done, "output_file_id")));
    ck_assert_int_eq(cJSON_GetArraySize(out), 3);
    for (int i = 1; i <= 3; i++) {
        char id[8], item[16];
        const cJSON *line;
        cJSON *want;
        snprintf(id, sizeof(id), "q%d", i);
        snprintf(item, sizeof(item), "item %d", i);
        line = bc_find(out, id);
        ck_assert_int_eq(jnum(line, "response.status_code"), 200);
        ck_assert(cJSON_IsNull(jget(line, "error")));
        want = cJSON_CreateObject();
        cJSON_AddStringToObject(want, "model", "m-batch");
        cJSON_AddItemToObject(
            want, "messages",
            cJSON_Parse("[{\"role\":\"user\",\"content\":\"x\"}]"));
        cJSON_ReplaceItemInObject(
            cJSON_GetArrayItem(cJSON_GetObjectItem(want, "messages"), 0),
            "content", cJSON_CreateString(item));
        check_chat(jget(line, "response.body"), want);
        cJSON_Delete(want);
    }
    cJSON_Delete(out);
    cJSON_Delete(done);
    cJSON_Delete(b);
}
END_TEST

START_TEST(test_openai_validating_finalizing_in_order)
{
    int port = mockproc_fixture_start("{\"batch\": {\"validate_ms\": 500, "
                                      "\"delay_ms\": 500, "
                                      "\"finalize_ms\": 500}}");
    cJSON *b = bc_openai_batch(port, 2, "v", NULL), *done;
    char seen[256] = "";

    ck_assert_str_eq(jstr(b, "status"), "validating");
    ck_assert(cJSON_IsNull(jget(b, "in_progress_at")));
    done = bc_poll(port, batch_path(jstr(b, "id")), "status", "completed", seen,
                   sizeof(seen));
    ck_assert_str_eq(seen, "validating,in_progress,finalizing,completed");
    ck_assert(jnum(done, "finalizing_at") >= jnum(done, "in_progress_at"));
    ck_assert(jnum(done, "completed_at") >= jnum(done, "finalizing_at"));
    cJSON_Delete(done);
    cJSON_Delete(b);
}
END_TEST

START_TEST(test_openai_per_item_errors_go_to_the_error_file)
{
    int port = mockproc_fixture_start(
        "{\"batch\": {\"error_every\": 2, \"error_ids\": [\"e1\"]}}");
    cJSON *b = bc_openai_batch(port, 4, "e", NULL), *done, *out, *err;

    done = bc_poll(port, batch_path(jstr(b, "id")), "status", "completed", NULL,
                   0);
    ck_assert_int_eq(jnum(done, "request_counts.completed"), 1);
    ck_assert_int_eq(jnum(done, "request_counts.failed"), 3);
    out = bc_lines(port, content_path(jstr(done, "output_file_id")));
    err = bc_lines(port, content_path(jstr(done, "error_file_id")));
    ck_assert_int_eq(cJSON_GetArraySize(out), 1);
    ck_assert_int_eq(jnum(bc_find(out, "e3"), "response.status_code"), 200);
    ck_assert_int_eq(cJSON_GetArraySize(err), 3);
    ck_assert_int_eq(jnum(bc_find(err, "e1"), "response.status_code"), 500);
    ck_assert_str_eq(jstr(bc_find(err, "e4"), "response.body.error.type"),
                     "server_error");
    cJSON_Delete(out);
    cJSON_Delete(err);
    cJSON_Delete(done);
    cJSON_Delete(b);
}
END_TEST

START_TEST(test_openai_expiry_cuts_the_items_not_done)
{
    /* Items are done at 100, 200, 300 and 400 ms; the window ends at 200. */
    int port = mockproc_fixture_start(
        "{\"batch\": {\"delay_ms\": 400, \"expire_ms\": 200}}");
    cJSON *b = bc_openai_batch(port, 4, "x", NULL), *done, *out, *err;

    done =
        bc_poll(port, batch_path(jstr(b, "id")), "status", "expired", NULL, 0);
    ck_assert(cJSON_IsNumber(jget(done, "expired_at")));
    ck_assert_int_eq(jnum(done, "request_counts.completed"), 1);
    out = bc_lines(port, content_path(jstr(done, "output_file_id")));
    err = bc_lines(port, content_path(jstr(done, "error_file_id")));
    ck_assert_int_eq(cJSON_GetArraySize(out), 1);
    bc_find(out, "x1");
    ck_assert_int_eq(cJSON_GetArraySize(err), 3);
    ck_assert_str_eq(jstr(bc_find(err, "x4"), "error.code"), "batch_expired");
    ck_assert(cJSON_IsNull(jget(bc_find(err, "x2"), "response")));
    cJSON_Delete(out);
    cJSON_Delete(err);
    cJSON_Delete(done);
    cJSON_Delete(b);
}
END_TEST

START_TEST(test_openai_cancel)
{
    int port = mockproc_fixture_start(
        "{\"batch\": {\"delay_ms\": 60000, \"cancel_ms\": 200}}");
    cJSON *b = bc_openai_batch(port, 3, "c", NULL), *c, *done, *err, *again;
    const char *id = jstr(b, "id");
    char cancel[128];

    snprintf(cancel, sizeof(cancel), "/v1/batches/%s/cancel", id);
    c = bc_call(port, "POST", cancel, "", 200);
    ck_assert_str_eq(jstr(c, "status"), "cancelling");
    ck_assert(cJSON_IsNumber(jget(c, "cancelling_at")));
    done = bc_poll(port, batch_path(id), "status", "cancelled", NULL, 0);
    ck_assert_int_eq(jnum(done, "request_counts.failed"), 3);
    ck_assert(cJSON_IsNull(jget(done, "output_file_id")));
    err = bc_lines(port, content_path(jstr(done, "error_file_id")));
    ck_assert_str_eq(jstr(bc_find(err, "c2"), "error.code"), "batch_cancelled");
    again = bc_call(port, "POST", cancel, "", 400);
    cJSON_Delete(again);
    cJSON_Delete(err);
    cJSON_Delete(done);
    cJSON_Delete(c);
    cJSON_Delete(b);
}
END_TEST

START_TEST(test_openai_list_finds_a_batch_by_metadata)
{
    int port = mockproc_fixture_start("{}");
    cJSON *b1 = bc_openai_batch(port, 1, "a", "{\"stepq_run\":\"r1\"}");
    cJSON *b2 = bc_openai_batch(port, 1, "b", "{\"stepq_run\":\"r2\"}");
    cJSON *b3 = bc_openai_batch(port, 1, "c", "{\"stepq_run\":\"r3\"}");
    cJSON *p1 = bc_call(port, "GET", "/v1/batches?limit=2", NULL, 200), *p2;

    ck_assert_int_eq(cJSON_GetArraySize(jget(p1, "data")), 2);
    ck_assert(cJSON_IsTrue(jget(p1, "has_more")));
    ck_assert_str_eq(jstr(p1, "first_id"), jstr(b3, "id"));
    p2 = bc_call(port, "GET",
                 (snprintf(path, sizeof(path), "/v1/batches?limit=2&after=%s",
                           jstr(p1, "last_id")),
                  path),
                 NULL, 200);
    ck_assert_int_eq(cJSON_GetArraySize(jget(p2, "data")), 1);
    ck_assert(cJSON_IsFalse(jget(p2, "has_more")));
    ck_assert_str_eq(
        jstr(cJSON_GetArrayItem(jget(p2, "data"), 0), "metadata.stepq_run"),
        "r1");
    ck_assert_str_eq(jstr(cJSON_GetArrayItem(jget(p2, "data"), 0), "id"),
                     jstr(b1, "id"));
    cJSON_Delete(p1);
    cJSON_Delete(p2);
    cJSON_Delete(b1);
    cJSON_Delete(b2);
    cJSON_Delete(b3);
}
END_TEST

/* Bad input: each row is one request after a good upload (file FID). */
static const struct {
    const char *method, *path, *body;
    int status;
    const char *code; /* error.code, "" for null */
} bad_openai[] = {
    {"POST", "/v1/batches",
     "{\"input_file_id\":\"file-nope\",\"endpoint\":\"/v1/chat/completions\","
     "\"completion_window\":\"24h\"}",
     404, ""},
    {"POST", "/v1/batches",
     "{\"input_file_id\":\"FID\",\"endpoint\":\"/v1/embeddings\","
     "\"completion_window\":\"24h\"}",
     400, "invalid_value"},
    {"POST", "/v1/batches",
     "{\"input_file_id\":\"FID\",\"endpoint\":\"/v1/chat/completions\"}", 400,
     "missing_required_parameter"},
    {"POST", "/v1/batches",
     "{\"input_file_id\":\"FID\",\"endpoint\":\"/v1/chat/completions\","
     "\"completion_window\":\"1h\"}",
     400, "invalid_value"},
    {"POST", "/v1/batches",
     "{\"input_file_id\":\"FID\",\"endpoint\":\"/v1/chat/completions\","
     "\"completion_window\":\"24h\",\"metadata\":{\"n\":1}}",
     400, "invalid_value"},
    {"GET", "/v1/batches/batch_nope", NULL, 404, ""},
    {"GET", "/v1/files/file-nope/content", NULL, 404, ""},
    {"DELETE", "/v1/batches/batch_nope", NULL, 404, ""},
};

START_TEST(test_openai_bad_input_gets_openai_errors)
{
    int port = mockproc_fixture_start("{}"), status;
    char *lines = bc_jsonl(1, "k", "/v1/chat/completions"), *body = NULL;
    cJSON *file = bc_upload(port, "in.jsonl", "batch", lines, &status), *e;
    const char *fid = jstr(file, "id"), *b = bad_openai[_i].body, *p;

    if (b != NULL && (p = strstr(b, "FID")) != NULL) {
        body = malloc(strlen(b) + strlen(fid));
        snprintf(body, strlen(b) + strlen(fid), "%.*s%s%s", (int)(p - b), b,
                 fid, p + 3);
    }
    e = bc_call(port, bad_openai[_i].method, bad_openai[_i].path,
                body ? body : b, bad_openai[_i].status);
    ck_assert_str_eq(jstr(e, "error.type"), "invalid_request_error");
    if (bad_openai[_i].code[0] != '\0')
        ck_assert_str_eq(jstr(e, "error.code"), bad_openai[_i].code);
    else
        ck_assert(cJSON_IsNull(jget(e, "error.code")));
    cJSON_Delete(e);
    cJSON_Delete(file);
    free(lines);
    free(body);
}
END_TEST

START_TEST(test_openai_bad_uploads_are_refused)
{
    int port = mockproc_fixture_start("{}"), status;
    cJSON *e;

    e = bc_upload(port, "in.jsonl", "batch",
                  "{\"custom_id\":\"a\"}\nnot json\n", &status);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(jstr(e, "error.code"), "invalid_file_format");
    ck_assert_ptr_nonnull(strstr(jstr(e, "error.message"), "line 2"));
    cJSON_Delete(e);
    e = bc_upload(port, "in.txt", "batch", "{}\n", &status);
    ck_assert_int_eq(status, 400);
    cJSON_Delete(e);
    e = bc_upload(port, "in.jsonl", NULL, "{}\n", &status);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(jstr(e, "error.code"), "missing_required_parameter");
    cJSON_Delete(e);
    e = bc_upload(port, "notes.txt", "assistants", "caf\xe9\n", &status);
    ck_assert_int_eq(status, 400); /* not UTF-8: the mock keeps text */
    cJSON_Delete(e);
}
END_TEST

START_TEST(test_openai_lines_that_do_not_fit_fail_validation)
{
    int port = mockproc_fixture_start("{}"), status;
    const char *lines =
        "{\"custom_id\":\"a\",\"method\":\"POST\",\"url\":\"/v1/chat/"
        "completions\",\"body\":{}}\n{\"custom_id\":\"a\",\"method\":\"POST\","
        "\"url\":\"/v1/chat/completions\",\"body\":{}}\n{\"custom_id\":\"b\","
        "\"method\":\"POST\",\"url\":\"/v1/embeddings\",\"body\":{}}\n";
    cJSON *f = bc_upload(port, "in.jsonl", "batch", lines, &status), *c, *b;
    char body[256];

    snprintf(body, sizeof(body), CREATE_FMT, jstr(f, "id"));
    c = bc_call(port, "POST", "/v1/batches", body, 200);
    ck_assert_str_eq(jstr(c, "status"), "validating");
    ck_assert(cJSON_IsNull(jget(c, "errors")));
    b = bc_poll(port, batch_path(jstr(c, "id")), "status", "failed", NULL, 0);
    ck_assert_int_eq(cJSON_GetArraySize(jget(b, "errors.data")), 2);
    ck_assert_str_eq(
        jstr(cJSON_GetArrayItem(jget(b, "errors.data"), 0), "code"),
        "duplicate_custom_id");
    ck_assert_int_eq(
        jnum(cJSON_GetArrayItem(jget(b, "errors.data"), 1), "line"), 3);
    cJSON_Delete(c);
    cJSON_Delete(b);
    cJSON_Delete(f);
}
END_TEST

START_TEST(test_openai_scripted_validation_failure)
{
    int port = mockproc_fixture_start(
        "{\"batch\": {\"fail_validation\": true, \"validate_ms\": 100}}");
    cJSON *b = bc_openai_batch(port, 2, "a", NULL), *done;

    ck_assert_str_eq(jstr(b, "status"), "validating");
    done =
        bc_poll(port, batch_path(jstr(b, "id")), "status", "failed", NULL, 0);
    ck_assert(cJSON_IsNumber(jget(done, "failed_at")));
    ck_assert_str_eq(
        jstr(cJSON_GetArrayItem(jget(done, "errors.data"), 0), "code"),
        "invalid_request");
    cJSON_Delete(done);
    cJSON_Delete(b);
}
END_TEST

START_TEST(test_openai_caps_refuse_with_openai_errors)
{
    int port = mockproc_fixture_start("{\"batch\": {\"max_items\": 2, "
                                      "\"max_batches\": 1, "
                                      "\"delay_ms\": 60000}}");
    cJSON *b = bc_openai_batch(port, 2, "a", NULL), *f, *e;
    char *lines = bc_jsonl(3, "z", "/v1/chat/completions"), body[256];
    int status;

    f = bc_upload(port, "in.jsonl", "batch", lines, &status);
    snprintf(body, sizeof(body), CREATE_FMT, jstr(f, "id"));
    e = bc_call(port, "POST", "/v1/batches", body, 400);
    ck_assert_str_eq(jstr(e, "error.code"), "batch_too_large");
    cJSON_Delete(e);
    /* One batch is live: a second one waits its turn. */
    snprintf(body, sizeof(body), CREATE_FMT, jstr(b, "input_file_id"));
    e = bc_call(port, "POST", "/v1/batches", body, 429);
    ck_assert_str_eq(jstr(e, "error.code"), "batch_limit_exceeded");
    cJSON_Delete(e);
    cJSON_Delete(f);
    cJSON_Delete(b);
    free(lines);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("mock_batch");
    TCase *flow = tcase_create("openai_flow");
    TCase *bad = tcase_create("openai_bad_input");
    TCase *all[] = {flow, bad};

    tcase_add_test(flow, test_openai_upload_create_poll_results);
    tcase_add_test(flow, test_openai_validating_finalizing_in_order);
    tcase_add_test(flow, test_openai_per_item_errors_go_to_the_error_file);
    tcase_add_test(flow, test_openai_expiry_cuts_the_items_not_done);
    tcase_add_test(flow, test_openai_cancel);
    tcase_add_test(flow, test_openai_list_finds_a_batch_by_metadata);
    tcase_add_loop_test(bad, test_openai_bad_input_gets_openai_errors, 0,
                        (int)(sizeof(bad_openai) / sizeof(bad_openai[0])));
    tcase_add_test(bad, test_openai_bad_uploads_are_refused);
    tcase_add_test(bad, test_openai_lines_that_do_not_fit_fail_validation);
    tcase_add_test(bad, test_openai_scripted_validation_failure);
    tcase_add_test(bad, test_openai_caps_refuse_with_openai_errors);
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        tcase_add_checked_fixture(all[i], mockproc_setup, mockproc_teardown);
        tcase_set_timeout(all[i], 20);
        suite_add_tcase(s, all[i]);
    }
    return s;
}

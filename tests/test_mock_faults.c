/* test_mock_faults.c: the scripted answers and faults of `stepq mock`.
 *
 * Each test starts the real binary on a script from tests/data/mock/ and
 * talks to it over loopback: answer sequences per route, scripted status,
 * headers and bodies, the rpm limit, the token allowance, 5xx storms, the
 * content faults (truncate, invalid_json, empty) and the wire faults (hang,
 * close, close_mid_body), oversize bodies, and delays.
 */
#include "tests/support/support.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "tests/support/httpcl.h"
#include "tests/support/mockproc.h"

/* ---- scripted faults ---------------------------------------------------- */

START_TEST(test_sequence_advances_per_path)
{
    int port = mockproc_fixture_start("sequence_500_then_second.json");
    struct reply r[4];
    cJSON *j;

    chat(port, CHAT, &r[0]);
    chat(port, "/other" CHAT, &r[1]);
    chat(port, CHAT, &r[2]);
    chat(port, CHAT, &r[3]);
    ck_assert_int_eq(r[0].status, 500);
    ck_assert_int_eq(r[1].status, 200);
    j = body_json(&r[0]);
    ck_assert_str_eq(jstr(j, "error.type"), "server_error");
    cJSON_Delete(j);
    j = body_json(&r[2]);
    ck_assert_str_eq(jstr(j, "choices.message.content"), "second");
    cJSON_Delete(j);
    j = body_json(&r[3]);
    ck_assert(strstr(jstr(j, "choices.message.content"), "summary") != NULL);
    cJSON_Delete(j);
    for (int i = 0; i < 4; i++)
        reply_free(&r[i]);
}
END_TEST

START_TEST(test_scripted_status_headers_body)
{
    int port = mockproc_fixture_start("answer_429_headers_body.json");
    struct reply r;
    cJSON *j;

    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 429);
    ck_assert_str_eq(hdr(&r, "retry-after"), "7");
    ck_assert_str_eq(hdr(&r, "x-custom"), "yes");
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "error.code"), "daily");
    cJSON_Delete(j);
    reply_free(&r);
}
END_TEST

/* A chat request OpenAI would refuse before anything else: 400 with its
 * error object, never a completion. */
static const struct {
    const char *body, *code;
} refused_chats[] = {
    {"{\"model\": \"m\", \"messages\": [", NULL},
    {"{\"model\": \"m\"}", "missing_required_parameter"},
    {"{\"model\": \"m\", \"messages\": []}", "empty_array"},
    {"[1]", NULL},
};

START_TEST(test_chat_request_refused_like_openai)
{
    int port = mockproc_fixture_start("{}");
    struct reply r;
    cJSON *j;

    req(port, "POST", CHAT, NULL, refused_chats[_i].body, &r);
    ck_assert_int_eq(r.status, 400);
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "error.type"), "invalid_request_error");
    if (refused_chats[_i].code != NULL)
        ck_assert_str_eq(jstr(j, "error.code"), refused_chats[_i].code);
    else
        ck_assert(cJSON_IsNull(jget(j, "error.code")));
    cJSON_Delete(j);
    reply_free(&r);
}
END_TEST

/* 204 and 304 carry no body and no length; the connection stays usable. */
START_TEST(test_bodiless_status_sends_no_body)
{
    int port = mockproc_fixture_start(
        "{\"answers\": [{\"status\": 204}, {\"status\": 304}]}");
    int fd = cl_connect(port);
    struct reply r;

    for (int i = 0; i < 3; i++) {
        cl_send(fd, "POST", CHAT, NULL, CHAT_BODY);
        cl_recv(fd, 5000, &r);
        ck_assert(r.complete);
        ck_assert_int_eq(r.status, i == 0 ? 204 : i == 1 ? 304 : 200);
        ck_assert_int_eq(r.body_len > 0, i == 2);
        ck_assert_int_eq(hdr(&r, "content-length") != NULL, i == 2);
        reply_free(&r);
    }
    close(fd);
}
END_TEST

START_TEST(test_rpm_limit_answers_429_retry_after)
{
    int port = mockproc_fixture_start("rpm_2.json");
    struct reply r[3];
    cJSON *j;
    int ra;

    for (int i = 0; i < 3; i++)
        chat(port, CHAT, &r[i]);
    ck_assert_int_eq(r[0].status, 200);
    ck_assert_int_eq(r[1].status, 200);
    ck_assert_int_eq(r[2].status, 429);
    ck_assert_ptr_nonnull(hdr(&r[2], "retry-after"));
    ra = atoi(hdr(&r[2], "retry-after"));
    ck_assert(ra >= 1 && ra <= 60);
    ck_assert_str_eq(hdr(&r[2], "x-ratelimit-remaining-requests"), "0");
    j = body_json(&r[2]);
    ck_assert_str_eq(jstr(j, "error.code"), "rate_limit_exceeded");
    cJSON_Delete(j);
    for (int i = 0; i < 3; i++)
        reply_free(&r[i]);
}
END_TEST

/* retry_until_ok repeats a chat request until it gets 200 or 5 s pass;
 * returns the ms waited and the first status in *first. */
static int64_t
retry_until_ok(int port, int *first)
{
    int64_t t0 = clock_mono_ms();
    struct reply r;
    int status = 0;

    *first = 0;
    while (status != 200 && clock_mono_ms() - t0 < 5000) {
        chat(port, CHAT, &r);
        status = r.status;
        if (*first == 0)
            *first = status;
        reply_free(&r);
        if (status != 200)
            poll(NULL, 0, 20);
    }
    ck_assert_int_eq(status, 200);
    return clock_mono_ms() - t0;
}

START_TEST(test_rpm_window_slides)
{
    int port = mockproc_fixture_start("rpm_1_window_400ms.json");
    struct reply r;
    int first;

    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
    ck_assert_int_ge(retry_until_ok(port, &first), 300);
    ck_assert_int_eq(first, 429);
}
END_TEST

START_TEST(test_allowance_then_insufficient_quota)
{
    int port = mockproc_fixture_start("allowance_60.json");
    struct reply r;
    cJSON *j = NULL;
    int ok = 0, spent = 0, last = 0;

    for (int i = 0; i < 20; i++) {
        chat(port, CHAT, &r);
        j = body_json(&r);
        if (r.status != 200)
            break;
        ok++;
        last = (int)jnum(j, "usage.total_tokens");
        spent += last;
        cJSON_Delete(j);
        reply_free(&r);
    }
    ck_assert_int_eq(r.status, 429);
    ck_assert_str_eq(jstr(j, "error.code"), "insufficient_quota");
    ck_assert_int_ge(ok, 1);
    ck_assert_int_ge(spent, 60);
    ck_assert_int_lt(spent - last, 60);
    cJSON_Delete(j);
    reply_free(&r);
    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 429);
    reply_free(&r);
}
END_TEST

START_TEST(test_storm_for_n_requests_then_recovers)
{
    int port = mockproc_fixture_start("storm_502_two_after_one.json");
    const int want[] = {200, 502, 502, 200, 200};
    struct reply r;

    for (int i = 0; i < 5; i++) {
        chat(port, CHAT, &r);
        ck_assert_msg(r.status == want[i], "request %d: %d, want %d", i,
                      r.status, want[i]);
        reply_free(&r);
    }
}
END_TEST

START_TEST(test_storm_for_seconds_then_recovers)
{
    int port = mockproc_fixture_start("storm_for_0.4s.json");
    int first;

    ck_assert_int_ge(retry_until_ok(port, &first), 300);
    ck_assert_int_eq(first, 503);
}
END_TEST

START_TEST(test_truncate_gives_finish_reason_length)
{
    int port = mockproc_fixture_start("fault_truncate.json");
    struct reply r;
    cJSON *j, *content;

    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 200);
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "choices.finish_reason"), "length");
    content = cJSON_Parse(jstr(j, "choices.message.content"));
    ck_assert_ptr_null(content);
    cJSON_Delete(j);
    reply_free(&r);
}
END_TEST

START_TEST(test_invalid_json_content)
{
    int port = mockproc_fixture_start("fault_invalid_json_then_empty.json");
    struct reply r;
    cJSON *j;

    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 200);
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "choices.finish_reason"), "stop");
    ck_assert_ptr_null(cJSON_Parse(jstr(j, "choices.message.content")));
    cJSON_Delete(j);
    reply_free(&r);
    chat(port, CHAT, &r);
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "choices.message.content"), "");
    cJSON_Delete(j);
    reply_free(&r);
}
END_TEST

START_TEST(test_hang_never_answers)
{
    int port = mockproc_fixture_start("route_slow_hangs.json");
    int fd = cl_connect(port);
    struct reply r;
    cJSON *log;

    cl_send(fd, "POST", "/slow" CHAT, NULL, CHAT_BODY);
    cl_recv(fd, 300, &r);
    ck_assert(r.timed_out);
    ck_assert_int_eq((int)r.received, 0);
    reply_free(&r);
    chat(port, CHAT, &r); /* other connections are still served */
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
    close(fd);
    log = mockproc_read_log(mockproc_dir, 2);
    ck_assert_str_eq(jstr(cJSON_GetArrayItem(log, 0), "fault"), "hang");
    ck_assert(cJSON_IsNull(jget(cJSON_GetArrayItem(log, 0), "status")));
    cJSON_Delete(log);
}
END_TEST

START_TEST(test_close_mid_body_is_a_short_read)
{
    int port = mockproc_fixture_start("fault_close_mid_body.json");
    struct reply r;
    long cl;

    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(hdr(&r, "content-length"));
    cl = atol(hdr(&r, "content-length"));
    ck_assert(r.eof);
    ck_assert(!r.complete);
    ck_assert_int_gt(cl, 0);
    ck_assert_int_lt((long)r.body_len, cl);
    reply_free(&r);
}
END_TEST

START_TEST(test_close_without_answer)
{
    int port = mockproc_fixture_start("fault_close.json");
    struct reply r;

    chat(port, CHAT, &r);
    ck_assert(r.eof);
    ck_assert(!r.timed_out);
    ck_assert_int_eq((int)r.received, 0);
    reply_free(&r);
    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
}
END_TEST

/* A request asking to switch protocols is answered as a plain one, once;
 * the bytes after it are not HTTP/1.1, so the mock closes after the answer
 * (it used to answer them with a second, 400, answer). */
START_TEST(test_upgrade_answered_once_then_closed)
{
    static const char h2[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    int port = mockproc_fixture_start("{}");
    int fd = cl_connect(port);
    struct reply r;

    cl_send(fd, "POST", CHAT, "Connection: Upgrade\r\nUpgrade: h2c\r\n",
            CHAT_BODY);
    ck_assert_int_eq(write(fd, h2, sizeof(h2) - 1), (int)sizeof(h2) - 1);
    cl_recv(fd, 5000, &r);
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
    cl_recv(fd, 5000, &r);
    ck_assert(r.eof);
    ck_assert_int_eq((int)r.received, 0);
    reply_free(&r);
    close(fd);
}
END_TEST

START_TEST(test_oversize_body_has_exact_size)
{
    int port = mockproc_fixture_start("oversize_300000_big_5000.json");
    struct reply r;
    cJSON *j;

    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(r.complete);
    ck_assert_int_eq((int)r.body_len, 300000);
    ck_assert_str_eq(hdr(&r, "content-length"), "300000");
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "object"), "chat.completion");
    cJSON_Delete(j);
    reply_free(&r);
    req(port, "POST", "/big/upload", NULL, "{}", &r);
    ck_assert_int_eq((int)r.body_len, 5000);
    reply_free(&r);
}
END_TEST

START_TEST(test_delay_and_latency)
{
    int port = mockproc_fixture_start("latency_100_delay_250.json");
    struct reply r;
    int64_t t0 = clock_mono_ms(), t1;

    chat(port, CHAT, &r);
    t1 = clock_mono_ms();
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_ge(t1 - t0, 350);
    reply_free(&r);
    chat(port, CHAT, &r);
    ck_assert_int_ge(clock_mono_ms() - t1, 100);
    reply_free(&r);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("mock_faults");
    TCase *seq = tcase_create("sequence"), *limits = tcase_create("limits");
    TCase *content = tcase_create("content"), *wire = tcase_create("wire");
    TCase *all[] = {seq, limits, content, wire};

    tcase_add_test(seq, test_sequence_advances_per_path);
    tcase_add_test(seq, test_scripted_status_headers_body);
    tcase_add_loop_test(
        seq, test_chat_request_refused_like_openai, 0,
        (int)(sizeof(refused_chats) / sizeof(refused_chats[0])));
    tcase_add_test(seq, test_bodiless_status_sends_no_body);
    tcase_add_test(limits, test_rpm_limit_answers_429_retry_after);
    tcase_add_test(limits, test_rpm_window_slides);
    tcase_add_test(limits, test_allowance_then_insufficient_quota);
    tcase_add_test(limits, test_storm_for_n_requests_then_recovers);
    tcase_add_test(limits, test_storm_for_seconds_then_recovers);
    tcase_add_test(content, test_truncate_gives_finish_reason_length);
    tcase_add_test(content, test_invalid_json_content);
    tcase_add_test(content, test_oversize_body_has_exact_size);
    tcase_add_test(content, test_delay_and_latency);
    tcase_add_test(wire, test_hang_never_answers);
    tcase_add_test(wire, test_close_mid_body_is_a_short_read);
    tcase_add_test(wire, test_close_without_answer);
    tcase_add_test(wire, test_upgrade_answered_once_then_closed);
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        tcase_add_checked_fixture(all[i], mockproc_setup, mockproc_teardown);
        tcase_set_timeout(all[i], 20);
        suite_add_tcase(s, all[i]);
    }
    return s;
}

/* test_http.c: the HTTP client (libcurl multi on libuv) against the mock:
 * scripted faults reach the client as status, headers and body, and
 * transport errors (timeouts, caps, resets, refused connections, TLS to a
 * plain server) as http_error values.
 *
 * Each test starts the mock in process on the test's own loop (httpenv.h)
 * with a script from tests/data/mock/, and ends with the client and mock
 * closed and uv_loop_close() == 0. Cancel, shutdown, volume and the real
 * `stepq mock` process are in test_http_life.c, the builders and the chat
 * answer parser in test_http_build.c.
 */
#include "tests/support/support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "common/file.h"
#include "common/xalloc.h"
#include "http/http.h"
#include "mock/mock.h"
#include "tests/support/httpenv.h"
#include "tests/support/mockproc.h"

/* ---- fixtures ----------------------------------------------------------- */

static void
setup(void)
{
    mockproc_setup();
    setenv(KEY_ENV, KEY_VALUE, 1);
}

/* ---- faults reach the client as status, headers and body ---------------- */

START_TEST(test_ok_answer_parses)
{
    struct env e;
    struct result r;
    struct http_chat_answer a;

    env_start(&e, NULL, NULL, NULL);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.error, HTTP_ERR_NONE);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(result_header(&r, "content-type"), "application/json");
    ck_assert_int_eq(http_chat_parse(r.body, r.body_len, &a), 0);
    ck_assert_ptr_nonnull(strstr(a.content, "summary"));
    ck_assert_str_eq(a.finish_reason, "stop");
    ck_assert_int_gt(a.prompt_tokens, 0);
    ck_assert_int_eq(a.total_tokens, a.prompt_tokens + a.completion_tokens);
    http_chat_answer_cleanup(&a);
    result_free(&r);
    env_stop(&e);
}
END_TEST

START_TEST(test_rpm_429_with_retry_after)
{
    struct env e;
    struct result r;

    env_start(&e, "rpm_1.json", NULL, NULL);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.status, 200);
    result_free(&r);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.error, HTTP_ERR_NONE);
    ck_assert_int_eq(r.status, 429);
    ck_assert_ptr_nonnull(result_header(&r, "retry-after"));
    ck_assert_int_gt(atoi(result_header(&r, "retry-after")), 0);
    ck_assert_ptr_nonnull(strstr(r.body, "rate_limit_exceeded"));
    result_free(&r);
    env_stop(&e);
}
END_TEST

START_TEST(test_allowance_insufficient_quota)
{
    struct env e;
    struct result r;

    env_start(&e, "allowance_5.json", NULL, NULL);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.status, 200);
    result_free(&r);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.status, 429);
    ck_assert_ptr_nonnull(strstr(r.body, "insufficient_quota"));
    result_free(&r);
    env_stop(&e);
}
END_TEST

START_TEST(test_storm_of_5xx_then_ok)
{
    struct env e;
    struct result r;

    env_start(&e, "storm_503_three.json", NULL, NULL);
    for (int i = 0; i < 4; i++) {
        chat(&e, "/v1", 5000, &r);
        ck_assert_int_eq(r.error, HTTP_ERR_NONE);
        ck_assert_int_eq(r.status, i < 3 ? 503 : 200);
        result_free(&r);
    }
    env_stop(&e);
}
END_TEST

START_TEST(test_truncate_finish_reason_length)
{
    struct env e;
    struct result r;
    struct http_chat_answer a;

    env_start(&e, "fault_truncate.json", NULL, NULL);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(http_chat_parse(r.body, r.body_len, &a), 0);
    ck_assert_str_eq(a.finish_reason, "length");
    http_chat_answer_cleanup(&a);
    result_free(&r);
    env_stop(&e);
}
END_TEST

START_TEST(test_invalid_json_content)
{
    struct env e;
    struct result r;
    struct http_chat_answer a;
    cJSON *content;

    env_start(&e, "fault_invalid_json.json", NULL, NULL);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(http_chat_parse(r.body, r.body_len, &a), 0);
    ck_assert_ptr_nonnull(a.content);
    content = cJSON_Parse(a.content);
    ck_assert_ptr_null(content);
    http_chat_answer_cleanup(&a);
    result_free(&r);
    env_stop(&e);
}
END_TEST

START_TEST(test_scripted_status_headers_body)
{
    const char *script = "answer_418_headers_plain_body.json";
    struct env e;
    struct result r;

    env_start(&e, script, NULL, NULL);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.status, 418);
    ck_assert_str_eq(result_header(&r, "x-custom-thing"), "spaced value");
    ck_assert_str_eq(result_header(&r, "retry-after"), "7");
    ck_assert_ptr_null(result_header(&r, "X-Custom-Thing"));
    ck_assert_uint_eq(r.body_len, 5);
    ck_assert_str_eq(r.body, "plain");
    result_free(&r);
    env_stop(&e);
}
END_TEST

/* A request that asked for events gets its answer back marked so (what
 * the worker assembles, and only then); one that did not, unmarked. */
START_TEST(test_stream_comes_back_with_its_answer)
{
    struct config_tier t = {.name = "t", .model = "m"};
    cJSON *req = cJSON_Parse(REQ_JSON);
    struct http_request q;
    struct result r;
    struct env e;
    char base[96], err[256];

    env_start(&e, NULL, NULL, NULL);
    snprintf(base, sizeof(base), "%s/v1", e.base);
    t.base_url = base;
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(
            http_tier_request(req, &t, k == 1, 5000, &q, err, sizeof(err)), 0);
        fetch(&e, &q, &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert(r.stream == (k == 1));
        ck_assert_str_eq(result_header(&r, "content-type"),
                         k == 1 ? "text/event-stream" : "application/json");
        result_free(&r);
        http_request_cleanup(&q);
    }
    cJSON_Delete(req);
    env_stop(&e);
}
END_TEST

/* ---- transport errors --------------------------------------------------- */

START_TEST(test_hang_times_out)
{
    struct env e;
    struct result r;

    env_start(&e, "fault_hang.json", NULL, NULL);
    chat(&e, "/v1", 300, &r);
    ck_assert_int_eq(r.error, HTTP_ERR_TIMEOUT);
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_ge(r.latency_ms, 300);
    ck_assert_int_lt(r.latency_ms, 3000);
    ck_assert_str_ne(r.error_text, "");
    result_free(&r);
    env_stop(&e);
}
END_TEST

START_TEST(test_oversize_is_too_large_then_client_works)
{
    struct http_client_opts o = {.max_response_bytes = 65536};
    struct env e;
    struct result r;

    env_start(&e, "oversize_300000.json", NULL, &o);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.error, HTTP_ERR_TOO_LARGE);
    ck_assert_str_eq(http_error_name(r.error), "too_large");
    ck_assert_uint_le(r.body_len, 65536);
    /* Said in our words, with the size: refused on its Content-Length. */
    ck_assert_msg(strstr(r.error_text, "response of 300000 bytes") != NULL,
                  "%s", r.error_text);
    result_free(&r);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.error, HTTP_ERR_NONE);
    ck_assert_int_eq(r.status, 200);
    result_free(&r);
    env_stop(&e);
}
END_TEST

START_TEST(test_answer_at_the_cap_passes)
{
    struct http_client_opts o = {.max_response_bytes = 65536};
    struct env e;
    struct result r;

    env_start(&e, "oversize_65536.json", NULL, &o);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.error, HTTP_ERR_NONE);
    ck_assert_uint_eq(r.body_len, 65536);
    ck_assert_uint_eq(strlen(r.body), 65536);
    result_free(&r);
    env_stop(&e);
}
END_TEST

START_TEST(test_close_mid_body_is_reset)
{
    struct env e;
    struct result r;

    env_start(&e, "fault_close_mid_body.json", NULL, NULL);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.error, HTTP_ERR_RESET);
    ck_assert_int_eq(r.status, 200); /* the head came, the body did not */
    result_free(&r);
    env_stop(&e);
}
END_TEST

/* An answer that is not HTTP is not a lost connection: the server got
 * the request and said something no client can read. */
START_TEST(test_bad_status_line_is_bad_response)
{
    struct env e;
    struct result r;

    env_start(&e, "fault_bad_status.json", NULL, NULL);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.error, HTTP_ERR_BAD_RESPONSE);
    ck_assert_str_eq(http_error_name(r.error), "bad_response");
    result_free(&r);
    env_stop(&e);
}
END_TEST

START_TEST(test_close_without_answer_is_reset)
{
    struct env e;
    struct result r;

    env_start(&e, "fault_close.json", NULL, NULL);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.error, HTTP_ERR_RESET);
    ck_assert_int_eq(r.status, 0);
    result_free(&r);
    env_stop(&e);
}
END_TEST

START_TEST(test_https_to_plain_http_is_tls_error)
{
    struct env e;
    struct result r;

    env_start(&e, NULL, NULL, NULL);
    snprintf(e.base, sizeof(e.base), "https://127.0.0.1:%d", e.port);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.error, HTTP_ERR_TLS);
    ck_assert_str_eq(http_error_name(r.error), "tls");
    result_free(&r);
    env_stop(&e);
}
END_TEST

START_TEST(test_header_caps_drop_extra_headers)
{
    struct http_client_opts o = {.max_headers = 2};
    struct env e;
    struct result r;

    env_start(&e, NULL, NULL, &o);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.nheaders, 2);
    ck_assert(r.headers_truncated);
    result_free(&r);
    http_client_close(e.c, NULL, NULL);
    o.max_headers = 0;
    o.max_header_bytes = 8;
    ck_assert_int_eq(http_client_new(&e.loop, &o, &e.c), 0);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.nheaders, 0);
    ck_assert(r.headers_truncated);
    result_free(&r);
    env_stop(&e);
}
END_TEST

/* free_port returns a loopback port nobody listens on: bound, then closed. */
static int
free_port(void)
{
    struct sockaddr_in sa = {0};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

START_TEST(test_connection_refused)
{
    struct env e;
    struct result r;

    memset(&e, 0, sizeof(e));
    ck_assert_int_eq(uv_loop_init(&e.loop), 0);
    env_init(&e, free_port(), NULL);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.error, HTTP_ERR_REFUSED);
    ck_assert_str_eq(http_error_name(r.error), "refused");
    ck_assert_ptr_null(strstr(r.error_text, KEY_VALUE));
    result_free(&r);
    env_stop(&e);
}
END_TEST

START_TEST(test_keep_alive_reuses_connection)
{
    struct env e;
    struct result r;
    struct mock_stats st;

    env_start(&e, NULL, NULL, NULL);
    for (int i = 0; i < 20; i++) {
        chat(&e, "/v1", 5000, &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_int_eq(r.new_connections, i == 0 ? 1 : 0);
        result_free(&r);
    }
    mock_get_stats(e.m, &st);
    ck_assert_int_eq((int)st.requests, 20);
    ck_assert_int_eq((int)st.connections, 1);
    env_stop(&e);
}
END_TEST

/* Bursts of `burst` transfers, each burst ending before the next starts
 * (as a worker's sends do when its claims come in batches): with
 * max_idle_connections at the burst's size every burst reuses the first
 * one's connections. libcurl alone sizes its cache to the transfers still
 * in flight, and closes connections as a burst drains. Above 256 the
 * client spreads them over several curl multi handles, each with its own
 * cache: every request still finds a free connection in the one it is
 * given. */
static void
run_bursts(int burst, int bursts)
{
    struct http_client_opts o = {.max_idle_connections = burst};
    struct env e;
    struct result *r = calloc((size_t)burst, sizeof(*r));
    struct http_request req;
    struct mock_stats st;

    env_start(&e, "{\"answers\":[{\"delay_ms\":20}],\"loop\":true}", NULL, &o);
    chat_req(&e, "/v1", 10000, &req);
    for (int b = 0; b < bursts; b++) {
        memset(r, 0, (size_t)burst * sizeof(*r));
        for (int i = 0; i < burst; i++)
            ck_assert_int_eq(http_send(e.c, &req, on_done, &r[i], NULL), 0);
        for (int i = 0; i < burst; i++) {
            if (!r[i].done)
                run_until(&e, &r[i].done, 10000);
        }
        for (int i = 0; i < burst; i++) {
            ck_assert_int_eq(r[i].status, 200);
            result_free(&r[i]);
        }
    }
    http_request_cleanup(&req);
    mock_get_stats(e.m, &st);
    ck_assert_int_eq((int)st.requests, burst * bursts);
    ck_assert_int_eq((int)st.connections, burst);
    free(r);
    env_stop(&e);
}

START_TEST(test_bursts_keep_their_connections)
{
    run_bursts(16, 4);
}
END_TEST

START_TEST(test_bursts_over_several_multi_handles)
{
    run_bursts(300, 3);
}
END_TEST

/* A host's max_connections keeps its calls beyond the cap in the client's
 * queue, one connection serving them in turn, while a call to another
 * host passes them: three capped calls of 300 ms each and one other, the
 * other done while the third capped one still waits; two connections. */
START_TEST(test_capped_host_waits_others_pass)
{
    struct env e;
    struct result r[4] = {0};
    struct http_request capped, other;
    struct mock_stats st;
    char url[256];

    env_start(&e, "{\"answers\":[{\"delay_ms\":300}],\"loop\":true}", NULL,
              NULL);
    chat_req(&e, "/v1", 10000, &capped);
    capped.max_connections = 1;
    chat_req(&e, "/v1", 10000, &other);
    snprintf(url, sizeof(url), "http://localhost:%d/v1/chat/completions",
             e.port);
    ck_assert_int_eq(http_request_set(&other, "POST", url), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(http_send(e.c, &capped, on_done, &r[i], NULL), 0);
    ck_assert_int_eq(http_send(e.c, &other, on_done, &r[3], NULL), 0);
    run_until(&e, &r[3].done, 10000);
    ck_assert_int_eq(r[3].status, 200);
    ck_assert(!r[2].done);
    run_until(&e, &r[2].done, 10000);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(r[i].status, 200);
        result_free(&r[i]);
    }
    mock_get_stats(e.m, &st);
    ck_assert_int_eq((int)st.connections, 2);
    http_request_cleanup(&capped);
    http_request_cleanup(&other);
    env_stop(&e);
}
END_TEST

/* Closing a client with requests in flight on every multi handle cancels
 * each once and closes every handle (env_stop closes it, and checks the
 * loop is empty after). */
START_TEST(test_close_with_many_in_flight)
{
    enum { N = 300 };
    struct http_client_opts o = {.max_idle_connections = N};
    struct env e;
    struct result *r = calloc(N, sizeof(*r));
    struct http_request req;
    struct mock_stats st;

    env_start(&e, "{\"answers\":[{\"fault\":\"hang\"}],\"loop\":true}", NULL,
              &o);
    chat_req(&e, "/v1", 10000, &req);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(http_send(e.c, &req, on_done, &r[i], NULL), 0);
    http_request_cleanup(&req);
    do {
        uv_run(&e.loop, UV_RUN_ONCE);
        mock_get_stats(e.m, &st);
    } while (st.requests < N);
    ck_assert_uint_eq(http_client_inflight(e.c), N);
    env_stop(&e); /* closes the client with all of them in flight */
    for (int i = 0; i < N; i++) {
        ck_assert(r[i].done);
        ck_assert_int_eq(r[i].error, HTTP_ERR_CANCELLED);
        result_free(&r[i]);
    }
    free(r);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("http");
    TCase *faults = tcase_create("faults"),
          *transport = tcase_create("transport");
    TCase *all[] = {faults, transport};

    tcase_add_test(faults, test_ok_answer_parses);
    tcase_add_test(faults, test_rpm_429_with_retry_after);
    tcase_add_test(faults, test_allowance_insufficient_quota);
    tcase_add_test(faults, test_storm_of_5xx_then_ok);
    tcase_add_test(faults, test_truncate_finish_reason_length);
    tcase_add_test(faults, test_invalid_json_content);
    tcase_add_test(faults, test_scripted_status_headers_body);
    tcase_add_test(faults, test_stream_comes_back_with_its_answer);
    tcase_add_test(transport, test_hang_times_out);
    tcase_add_test(transport, test_oversize_is_too_large_then_client_works);
    tcase_add_test(transport, test_answer_at_the_cap_passes);
    tcase_add_test(transport, test_close_mid_body_is_reset);
    tcase_add_test(transport, test_close_without_answer_is_reset);
    tcase_add_test(transport, test_bad_status_line_is_bad_response);
    tcase_add_test(transport, test_connection_refused);
    tcase_add_test(transport, test_https_to_plain_http_is_tls_error);
    tcase_add_test(transport, test_header_caps_drop_extra_headers);
    tcase_add_test(transport, test_keep_alive_reuses_connection);
    tcase_add_test(transport, test_bursts_keep_their_connections);
    tcase_add_test(transport, test_bursts_over_several_multi_handles);
    tcase_add_test(transport, test_capped_host_waits_others_pass);
    tcase_add_test(transport, test_close_with_many_in_flight);
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(all); i++) {
        tcase_add_checked_fixture(all[i], setup, mockproc_teardown);
        tcase_set_timeout(all[i], 20);
        suite_add_tcase(s, all[i]);
    }
    return s;
}

/* test_http_life.c: the HTTP client's life: cancelling a call, closing the
 * client with calls in flight (also from inside a callback), refusing bad
 * requests, 10,000 requests in a row, requests against the real `stepq
 * mock` process (its request log shows what the client sent), and the
 * queue of calls waiting for a place to connect.
 *
 * Loop tests end with the client and mock closed and uv_loop_close() == 0.
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

/* ---- cancel and shutdown ------------------------------------------------ */

START_TEST(test_cancel_in_flight)
{
    struct env e;
    struct result r = {0};
    struct http_request req;
    http_call *call = NULL;

    env_start(&e, "fault_hang.json", NULL, NULL);
    chat_req(&e, "/v1", 60000, &req);
    ck_assert_int_eq(http_send(e.c, &req, on_done, &r, &call), 0);
    http_request_cleanup(&req);
    ck_assert_uint_eq(http_client_inflight(e.c), 1);
    /* Let the request reach the mock and hang there. */
    for (;;) {
        struct mock_stats st;
        mock_get_stats(e.m, &st);
        if (st.faults == 1)
            break;
        uv_run(&e.loop, UV_RUN_ONCE);
    }
    ck_assert_int_eq(http_cancel(call), 0);
    ck_assert(r.done);
    ck_assert_int_eq(r.error, HTTP_ERR_CANCELLED);
    ck_assert_uint_eq(http_client_inflight(e.c), 0);
    result_free(&r);
    env_stop(&e);
}
END_TEST

START_TEST(test_close_cancels_everything_in_flight)
{
    struct env e;
    struct result r[3] = {{0}};
    struct http_request req;
    bool cdone = false, mdone = false;

    env_start(&e, "fault_hang_three.json", NULL, NULL);
    chat_req(&e, "/v1", 60000, &req);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(http_send(e.c, &req, on_done, &r[i], NULL), 0);
    http_request_cleanup(&req);
    for (int i = 0; i < 5; i++)
        uv_run(&e.loop, UV_RUN_NOWAIT);
    http_client_close(e.c, on_flag, &cdone);
    for (int i = 0; i < 3; i++) {
        ck_assert(r[i].done);
        ck_assert_int_eq(r[i].error, HTTP_ERR_CANCELLED);
        result_free(&r[i]);
    }
    ck_assert_int_eq(http_send(e.c, &req, on_done, &r[0], NULL), -ESHUTDOWN);
    mock_stop(e.m, on_flag, &mdone);
    uv_close((uv_handle_t *)&e.guard, NULL);
    uv_run(&e.loop, UV_RUN_DEFAULT);
    ck_assert(cdone && mdone);
    ck_assert_int_eq(uv_loop_close(&e.loop), 0);
}
END_TEST

/* A callback that closes the client while others are in flight. */
struct closer {
    http_client *c;
    bool closed;
    int done, cancelled;
};

static void
on_done_close(http_call *call, struct http_response *res, void *arg)
{
    struct closer *k = arg;

    (void)call;
    k->done++;
    if (res->error == HTTP_ERR_CANCELLED) {
        k->cancelled++;
        return;
    }
    ck_assert_int_eq(res->status, 200);
    http_client_close(k->c, on_flag, &k->closed);
}

START_TEST(test_close_from_a_callback)
{
    const char *script = "route_hang_twice.json";
    struct env e;
    struct closer k = {0};
    struct http_request a, h;
    bool mdone = false;

    env_start(&e, script, NULL, NULL);
    k.c = e.c;
    chat_req(&e, "/hang/v1", 60000, &h);
    chat_req(&e, "/v1", 60000, &a);
    ck_assert_int_eq(http_send(e.c, &h, on_done_close, &k, NULL), 0);
    ck_assert_int_eq(http_send(e.c, &h, on_done_close, &k, NULL), 0);
    ck_assert_int_eq(http_send(e.c, &a, on_done_close, &k, NULL), 0);
    http_request_cleanup(&a);
    http_request_cleanup(&h);
    run_until(&e, &k.closed, 10000);
    ck_assert_int_eq(k.done, 3);
    ck_assert_int_eq(k.cancelled, 2);
    mock_stop(e.m, on_flag, &mdone);
    uv_close((uv_handle_t *)&e.guard, NULL);
    uv_run(&e.loop, UV_RUN_DEFAULT);
    ck_assert(mdone);
    ck_assert_int_eq(uv_loop_close(&e.loop), 0);
}
END_TEST

START_TEST(test_bad_requests_are_refused)
{
    struct env e;
    struct http_request r;
    struct result res = {0};

    env_start(&e, NULL, NULL, NULL);
    http_request_init(&r);
    ck_assert_int_eq(http_send(e.c, &r, on_done, &res, NULL), -EINVAL);
    ck_assert_int_eq(http_request_set(&r, "GET", "ftp://127.0.0.1/x"), 0);
    ck_assert_int_eq(http_send(e.c, &r, on_done, &res, NULL), -EINVAL);
    ck_assert_int_eq(http_request_set(&r, "GE T", e.base), -EINVAL);
    ck_assert_int_eq(http_request_add_header(&r, "X-A", "a\r\nX-B: b"),
                     -EINVAL);
    ck_assert_int_eq(http_request_add_header(&r, "X A", "a"), -EINVAL);
    ck_assert_uint_eq(r.nheaders, 0);
    ck_assert(!res.done);
    http_request_cleanup(&r);
    env_stop(&e);
}
END_TEST

/* ---- 10,000 requests (leaks show under ASan/LSan and valgrind) --------- */

#define MANY     10000
#define PARALLEL 64

struct many {
    http_client *c;
    const struct http_request *req;
    int sent, ok, failed;
};

static void
on_many(http_call *call, struct http_response *res, void *arg)
{
    struct many *m = arg;

    (void)call;
    if (res->error == HTTP_ERR_NONE && res->status == 200)
        m->ok++;
    else
        m->failed++;
    if (m->sent < MANY) {
        m->sent++;
        ck_assert_int_eq(http_send(m->c, m->req, on_many, m, NULL), 0);
    }
}

START_TEST(test_ten_thousand_requests)
{
    struct env e;
    struct http_request req;
    struct many m = {0};
    struct mock_stats st;
    bool all = false;

    env_start(&e, NULL, NULL, NULL);
    chat_req(&e, "/v1", 10000, &req);
    m.c = e.c;
    m.req = &req;
    for (; m.sent < PARALLEL; m.sent++)
        ck_assert_int_eq(http_send(e.c, &req, on_many, &m, NULL), 0);
    while (!all) {
        uv_run(&e.loop, UV_RUN_ONCE);
        all = m.ok + m.failed == MANY;
    }
    ck_assert_int_eq(m.ok, MANY);
    ck_assert_uint_eq(http_client_inflight(e.c), 0);
    mock_get_stats(e.m, &st);
    ck_assert_uint_le(st.connections, PARALLEL);
    http_request_cleanup(&req);
    env_stop(&e);
}
END_TEST

/* ---- against the real `stepq mock` process ------------------------------ */

/* log_lines reads the mock's request log as an array of JSON objects. */
static cJSON *
log_lines(const char *path, char **text)
{
    cJSON *arr = cJSON_CreateArray();
    size_t len = 0;
    char *save = NULL;

    ck_assert_int_eq(file_read_all(path, 1 << 20, text, &len), 0);
    for (char *line = strtok_r(*text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(line);
        ck_assert_ptr_nonnull(o);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

START_TEST(test_process_chat_with_bearer_and_faults)
{
    char *lpath = tmpdir_join(mockproc_dir, "log.jsonl"), *text = NULL;
    struct env e;
    struct result r;
    cJSON *lines, *l0;

    mockproc_fixture_start("route_flaky_429_then_close_mid_body.json");
    env_start_proc(&e);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.status, 200);
    result_free(&r);
    chat(&e, "/flaky/v1", 5000, &r);
    ck_assert_int_eq(r.status, 429);
    ck_assert_str_eq(result_header(&r, "retry-after"), "20");
    result_free(&r);
    chat(&e, "/flaky/v1", 5000, &r);
    ck_assert_int_eq(r.error, HTTP_ERR_RESET);
    result_free(&r);
    env_stop(&e);
    ck_assert_int_eq(mockproc_stop(&mockproc_mp), 0);
    lines = log_lines(lpath, &text);
    ck_assert_int_eq(cJSON_GetArraySize(lines), 3);
    l0 = cJSON_GetArrayItem(lines, 0);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(l0, "authorization")));
    ck_assert_str_eq(json_at(l0, "auth_scheme", NULL), "Bearer");
    ck_assert_str_eq(json_at(l0, "body", "model"), "tier-model");
    ck_assert_str_eq(json_at(l0, "path", NULL), "/v1/chat/completions");
    ck_assert_ptr_null(strstr(text, "Secret-4242"));
    cJSON_Delete(lines);
    free(text);
    free(lpath);
}
END_TEST

START_TEST(test_process_http_step_env_and_idempotency_key)
{
    char *lpath = tmpdir_join(mockproc_dir, "log.jsonl"), *text = NULL,
         url[128];
    const char *args[] = {"--log", lpath, NULL};
    struct env e;
    struct result r;
    struct http_request req;
    cJSON *step, *lines, *l0;
    char err[256];

    setenv("STEPQ_TEST_TRACE", "trace-77", 1);
    mockproc_start(&mockproc_mp, args);
    env_start_proc(&e);
    step = cJSON_CreateObject();
    snprintf(url, sizeof(url), "%s/comments", e.base);
    cJSON_AddStringToObject(step, "url", url);
    cJSON_AddItemToObject(
        step, "headers",
        cJSON_Parse(
            "{\"Authorization\": \"env:" KEY_ENV "\", "
            "\"X-Trace\": \"env:STEPQ_TEST_TRACE\", \"X-Plain\": \"p\"}"));
    cJSON_AddItemToObject(step, "body", cJSON_Parse("{\"text\": \"hi\"}"));
    ck_assert_int_eq(
        http_step_request(step, "k-1", 5000, &req, err, sizeof(err)), 0);
    fetch(&e, &req, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "k-1"));
    result_free(&r);
    http_request_cleanup(&req);
    cJSON_Delete(step);
    env_stop(&e);
    ck_assert_int_eq(mockproc_stop(&mockproc_mp), 0);
    lines = log_lines(lpath, &text);
    l0 = cJSON_GetArrayItem(lines, 0);
    ck_assert_str_eq(json_at(l0, "method", NULL), "POST");
    ck_assert_str_eq(json_at(l0, "idempotency_key", NULL), "k-1");
    ck_assert_str_eq(json_at(l0, "headers", "x-trace"), "trace-77");
    ck_assert_str_eq(json_at(l0, "headers", "x-plain"), "p");
    ck_assert_str_eq(json_at(l0, "headers", "content-type"),
                     "application/json");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(l0, "authorization")));
    ck_assert_str_eq(json_at(l0, "body", "text"), "hi");
    cJSON_Delete(lines);
    free(text);
    free(lpath);
}
END_TEST

/* ---- the connect queue (http/admit.c) ---------------------------- */

/* A TCP listener that never answers: a TLS handshake to it hangs in
 * connect (the kernel accepts into the backlog). Returns the socket. */
static int
silent_listener(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t alen = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(fd, 16), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

START_TEST(test_many_calls_pass_two_connecting_at_once)
{
    struct http_client_opts o = {.max_connecting = 2,
                                 .max_idle_connections = 64};
    struct env e;
    struct result r[64] = {{0}};
    struct http_request req;
    long conns = 0;

    env_start(&e, NULL, NULL, &o);
    chat_req(&e, "/v1", 60000, &req);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(http_send(e.c, &req, on_done, &r[i], NULL), 0);
    http_request_cleanup(&req);
    for (int i = 0; i < 64; i++) {
        run_until(&e, &r[i].done, 10000);
        ck_assert_int_eq(r[i].status, 200);
        conns += r[i].new_connections;
        result_free(&r[i]);
    }
    ck_assert_int_ge(conns, 1);
    ck_assert_int_le(conns, 64);
    env_stop(&e);
}
END_TEST

/* The second call waits in the queue while the first hangs connecting;
 * its connect timeout starts when it leaves the queue, so the first one's
 * wait is not counted against it. */
START_TEST(test_queued_time_is_not_connect_time)
{
    struct http_client_opts o = {.max_connecting = 1,
                                 .connect_timeout_ms = 300};
    struct env e;
    struct result hung = {0}, ok = {0};
    struct http_request h, req;
    char url[64];
    int port, fd = silent_listener(&port);

    env_start(&e, NULL, NULL, &o);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/", port);
    http_request_init(&h);
    ck_assert_int_eq(http_request_set(&h, "GET", url), 0);
    chat_req(&e, "/v1", 60000, &req);
    ck_assert_int_eq(http_send(e.c, &h, on_done, &hung, NULL), 0);
    ck_assert_int_eq(http_send(e.c, &req, on_done, &ok, NULL), 0);
    http_request_cleanup(&h);
    http_request_cleanup(&req);
    run_until(&e, &ok.done, 10000);
    ck_assert(hung.done);
    ck_assert_int_eq(hung.error, HTTP_ERR_TIMEOUT);
    ck_assert_int_eq(ok.error, HTTP_ERR_NONE);
    ck_assert_int_eq(ok.status, 200);
    ck_assert_int_ge(ok.latency_ms, 300);
    result_free(&hung);
    result_free(&ok);
    env_stop(&e);
    close(fd);
}
END_TEST

START_TEST(test_cancel_and_close_with_calls_queued)
{
    struct http_client_opts o = {.max_connecting = 1};
    struct env e;
    struct result r[3] = {{0}};
    struct http_request h;
    http_call *calls[3];
    char url[64];
    int port, fd = silent_listener(&port);

    env_start(&e, NULL, NULL, &o);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/", port);
    http_request_init(&h);
    ck_assert_int_eq(http_request_set(&h, "GET", url), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(http_send(e.c, &h, on_done, &r[i], &calls[i]), 0);
    http_request_cleanup(&h);
    for (int i = 0; i < 5; i++)
        uv_run(&e.loop, UV_RUN_NOWAIT);
    ck_assert_int_eq(http_cancel(calls[1]), 0); /* queued */
    ck_assert(r[1].done && !r[0].done && !r[2].done);
    ck_assert_int_eq(r[1].error, HTTP_ERR_CANCELLED);
    ck_assert_uint_eq(http_client_inflight(e.c), 2);
    env_stop(&e); /* cancels the one connecting and the one queued */
    for (int i = 0; i < 3; i++) {
        ck_assert(r[i].done);
        ck_assert_int_eq(r[i].error, HTTP_ERR_CANCELLED);
        result_free(&r[i]);
    }
    close(fd);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("http_life");
    TCase *life = tcase_create("lifecycle"), *many = tcase_create("many");
    TCase *proc = tcase_create("process"), *queue = tcase_create("queue");
    TCase *all[] = {life, many, proc, queue};

    tcase_add_test(life, test_cancel_in_flight);
    tcase_add_test(life, test_close_cancels_everything_in_flight);
    tcase_add_test(life, test_close_from_a_callback);
    tcase_add_test(life, test_bad_requests_are_refused);
    tcase_add_test(many, test_ten_thousand_requests);
    tcase_add_test(proc, test_process_chat_with_bearer_and_faults);
    tcase_add_test(proc, test_process_http_step_env_and_idempotency_key);
    tcase_add_test(queue, test_many_calls_pass_two_connecting_at_once);
    tcase_add_test(queue, test_queued_time_is_not_connect_time);
    tcase_add_test(queue, test_cancel_and_close_with_calls_queued);
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(all); i++) {
        tcase_add_checked_fixture(all[i], setup, mockproc_teardown);
        tcase_set_timeout(all[i], all[i] == many ? 120 : 20);
        suite_add_tcase(s, all[i]);
    }
    return s;
}

/* test_http.c: the HTTP client (libcurl multi on libuv) against the mock,
 * and the chat / http step builders and the chat answer parser.
 *
 * Loop tests start the mock in process on the test's own loop (mock_start)
 * or, for the "process" case, the real `stepq mock` binary; each ends with
 * the client and mock closed and uv_loop_close() == 0. Waits are bounded by
 * a guard timer, never by sleeping.
 */
#include "tests/support/support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "common/file.h"
#include "common/xalloc.h"
#include "mock/mock.h"
#include "tests/support/mockproc.h"
#include "worker/http.h"

#define REQ_JSON                                                               \
    "{\"model\":\"from-job\",\"messages\":[{\"role\":\"user\","                \
    "\"content\":\"Summarize: hello world\"}],\"max_tokens\":200}"
#define KEY_ENV   "STEPQ_TEST_HTTP_KEY"
#define KEY_VALUE "sk-test-Secret-4242"

static char *dir;
static struct mockproc mp;

/* ---- a loop with a client (and an in-process mock) ---------------------- */

struct env {
    uv_loop_t loop;
    uv_timer_t guard;
    mock *m; /* NULL when talking to the mock process */
    int port;
    http_client *c;
    char base[64]; /* http://127.0.0.1:PORT */
};

/* What one request ended with; body and headers are moved out of the
 * response, so they outlive the callback. */
struct result {
    bool done;
    int status;
    enum http_error error;
    char error_text[HTTP_ERROR_TEXT];
    char *body;
    size_t body_len;
    struct http_header *headers;
    size_t nheaders;
    bool headers_truncated;
    int64_t latency_ms;
    long new_connections;
};

static void
on_done(http_call *call, struct http_response *res, void *arg)
{
    struct result *r = arg;

    (void)call;
    ck_assert(!r->done);
    r->done = true;
    r->status = res->status;
    r->error = res->error;
    memcpy(r->error_text, res->error_text, sizeof(r->error_text));
    r->body = res->body;
    r->body_len = res->body_len;
    r->headers = res->headers;
    r->nheaders = res->nheaders;
    r->headers_truncated = res->headers_truncated;
    r->latency_ms = res->latency_ms;
    r->new_connections = res->new_connections;
    res->body = NULL;
    res->headers = NULL;
    res->nheaders = 0;
}

static void
result_free(struct result *r)
{
    for (size_t i = 0; i < r->nheaders; i++) {
        free(r->headers[i].name);
        free(r->headers[i].value);
    }
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof(*r));
}

static const char *
result_header(const struct result *r, const char *name)
{
    for (size_t i = 0; i < r->nheaders; i++) {
        if (strcmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    }
    return NULL;
}

static void
on_guard(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

/* run_until runs the loop until *flag is set; fails after ms. */
static void
run_until(struct env *e, const bool *flag, int ms)
{
    bool expired = false;

    e->guard.data = &expired;
    uv_timer_start(&e->guard, on_guard, (uint64_t)ms, 0);
    while (!*flag && !expired)
        uv_run(&e->loop, UV_RUN_ONCE);
    uv_timer_stop(&e->guard);
    ck_assert_msg(*flag, "nothing happened within %d ms", ms);
}

static void
env_init(struct env *e, int port, const struct http_client_opts *o)
{
    e->port = port;
    snprintf(e->base, sizeof(e->base), "http://127.0.0.1:%d", port);
    ck_assert_int_eq(uv_timer_init(&e->loop, &e->guard), 0);
    ck_assert_int_eq(http_client_new(&e->loop, o, &e->c), 0);
}

/* env_start: loop, in-process mock running script, client with opts o. */
static void
env_start(struct env *e, const char *script, const char *log,
          const struct http_client_opts *o)
{
    int port = 0;

    memset(e, 0, sizeof(*e));
    ck_assert_int_eq(uv_loop_init(&e->loop), 0);
    ck_assert_int_eq(mock_start(&e->loop, script, log, &e->m, &port), 0);
    env_init(e, port, o);
}

/* env_start_proc: loop and client against the running mock process. */
static void
env_start_proc(struct env *e)
{
    memset(e, 0, sizeof(*e));
    ck_assert_int_eq(uv_loop_init(&e->loop), 0);
    env_init(e, mp.port, NULL);
}

static void
on_flag(void *arg)
{
    *(bool *)arg = true;
}

/* env_stop closes client, mock and guard, and checks the loop is empty. */
static void
env_stop(struct env *e)
{
    bool cdone = false, mdone = e->m == NULL;

    http_client_close(e->c, on_flag, &cdone);
    if (e->m != NULL)
        mock_stop(e->m, on_flag, &mdone);
    uv_close((uv_handle_t *)&e->guard, NULL);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    ck_assert(cdone);
    ck_assert(mdone);
    ck_assert_int_eq(uv_loop_close(&e->loop), 0);
}

/* chat_req builds a chat completion to base+prefix with the test key. */
static void
chat_req(const struct env *e, const char *prefix, int64_t timeout_ms,
         struct http_request *r)
{
    cJSON *req = cJSON_Parse(REQ_JSON);
    char base[128], err[256];

    snprintf(base, sizeof(base), "%s%s", e->base, prefix);
    ck_assert_int_eq(http_chat_request(req, base, "tier-model", KEY_ENV,
                                       timeout_ms, r, err, sizeof(err)),
                     0);
    cJSON_Delete(req);
}

/* fetch sends r and runs the loop until it ends (10 s at most). */
static void
fetch(struct env *e, const struct http_request *r, struct result *res)
{
    memset(res, 0, sizeof(*res));
    ck_assert_int_eq(http_send(e->c, r, on_done, res, NULL), 0);
    run_until(e, &res->done, 10000);
}

/* chat sends one chat completion under prefix. */
static void
chat(struct env *e, const char *prefix, int64_t timeout_ms, struct result *res)
{
    struct http_request r;

    chat_req(e, prefix, timeout_ms, &r);
    fetch(e, &r, res);
    http_request_cleanup(&r);
}

/* ---- fixtures ----------------------------------------------------------- */

static void
setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    setenv(KEY_ENV, KEY_VALUE, 1);
    dir = tmpdir_new();
    memset(&mp, 0, sizeof(mp));
}

static void
teardown(void)
{
    mockproc_stop(&mp);
    tmpdir_remove(dir);
    dir = NULL;
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

    env_start(&e, "{\"rpm\": 1}", NULL, NULL);
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

    env_start(&e, "{\"allowance_tokens\": 5}", NULL, NULL);
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

    env_start(&e, "{\"storm\": {\"status\": 503, \"requests\": 3}}", NULL,
              NULL);
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

    env_start(&e, "{\"answers\": [{\"fault\": \"truncate\"}]}", NULL, NULL);
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

    env_start(&e, "{\"answers\": [{\"fault\": \"invalid_json\"}]}", NULL, NULL);
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
    const char *script =
        "{\"answers\": [{\"status\": 418, \"headers\": {\"X-Custom-Thing\": "
        "\"  spaced value  \", \"Retry-After\": \"7\"}, \"body\": \"plain\"}]}";
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

/* ---- transport errors --------------------------------------------------- */

START_TEST(test_hang_times_out)
{
    struct env e;
    struct result r;

    env_start(&e, "{\"answers\": [{\"fault\": \"hang\"}]}", NULL, NULL);
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

    env_start(&e, "{\"answers\": [{\"oversize_bytes\": 300000}]}", NULL, &o);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.error, HTTP_ERR_TOO_LARGE);
    ck_assert_str_eq(http_error_name(r.error), "too_large");
    ck_assert_uint_le(r.body_len, 65536);
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

    env_start(&e, "{\"answers\": [{\"oversize_bytes\": 65536}]}", NULL, &o);
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

    env_start(&e, "{\"answers\": [{\"fault\": \"close_mid_body\"}]}", NULL,
              NULL);
    chat(&e, "/v1", 5000, &r);
    ck_assert_int_eq(r.error, HTTP_ERR_RESET);
    ck_assert_int_eq(r.status, 200); /* the head came, the body did not */
    result_free(&r);
    env_stop(&e);
}
END_TEST

START_TEST(test_close_without_answer_is_reset)
{
    struct env e;
    struct result r;

    env_start(&e, "{\"answers\": [{\"fault\": \"close\"}]}", NULL, NULL);
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

/* ---- cancel and shutdown ------------------------------------------------ */

START_TEST(test_cancel_in_flight)
{
    struct env e;
    struct result r = {0};
    struct http_request req;
    http_call *call = NULL;

    env_start(&e, "{\"answers\": [{\"fault\": \"hang\"}]}", NULL, NULL);
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

    env_start(&e, "{\"answers\": [{\"fault\": \"hang\", \"count\": 3}]}", NULL,
              NULL);
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
    const char *script = "{\"routes\": [{\"path\": \"/hang\", \"answers\": "
                         "[{\"fault\": \"hang\", \"count\": 2}]}]}";
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

static const char *
jstr(const cJSON *o, const char *path1, const char *path2)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, path1);

    if (path2 != NULL)
        v = cJSON_GetObjectItemCaseSensitive(v, path2);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

START_TEST(test_process_chat_with_bearer_and_faults)
{
    const char *script = "{\"routes\": [{\"path\": \"/flaky\", \"answers\": "
                         "[{\"status\": 429, \"headers\": {\"Retry-After\": "
                         "\"20\"}}, {\"fault\": \"close_mid_body\"}]}]}";
    char *spath = tmpdir_write(dir, "s.json", script, strlen(script));
    char *lpath = tmpdir_join(dir, "log.jsonl"), *text = NULL;
    const char *args[] = {"--script", spath, "--log", lpath, NULL};
    struct env e;
    struct result r;
    cJSON *lines, *l0;

    mockproc_start(&mp, args);
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
    ck_assert_int_eq(mockproc_stop(&mp), 0);
    lines = log_lines(lpath, &text);
    ck_assert_int_eq(cJSON_GetArraySize(lines), 3);
    l0 = cJSON_GetArrayItem(lines, 0);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(l0, "authorization")));
    ck_assert_str_eq(jstr(l0, "auth_scheme", NULL), "Bearer");
    ck_assert_str_eq(jstr(l0, "body", "model"), "tier-model");
    ck_assert_str_eq(jstr(l0, "path", NULL), "/v1/chat/completions");
    ck_assert_ptr_null(strstr(text, "Secret-4242"));
    cJSON_Delete(lines);
    free(text);
    free(spath);
    free(lpath);
}
END_TEST

START_TEST(test_process_http_step_env_and_idempotency_key)
{
    char *lpath = tmpdir_join(dir, "log.jsonl"), *text = NULL, url[128];
    const char *args[] = {"--log", lpath, NULL};
    struct env e;
    struct result r;
    struct http_request req;
    cJSON *step, *lines, *l0;
    char err[256];

    setenv("STEPQ_TEST_TRACE", "trace-77", 1);
    mockproc_start(&mp, args);
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
    ck_assert_int_eq(mockproc_stop(&mp), 0);
    lines = log_lines(lpath, &text);
    l0 = cJSON_GetArrayItem(lines, 0);
    ck_assert_str_eq(jstr(l0, "method", NULL), "POST");
    ck_assert_str_eq(jstr(l0, "idempotency_key", NULL), "k-1");
    ck_assert_str_eq(jstr(l0, "headers", "x-trace"), "trace-77");
    ck_assert_str_eq(jstr(l0, "headers", "x-plain"), "p");
    ck_assert_str_eq(jstr(l0, "headers", "content-type"), "application/json");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(l0, "authorization")));
    ck_assert_str_eq(jstr(l0, "body", "text"), "hi");
    cJSON_Delete(lines);
    free(text);
    free(lpath);
}
END_TEST

/* ---- builders ----------------------------------------------------------- */

START_TEST(test_chat_request_sets_model_and_bearer_only)
{
    cJSON *req = cJSON_Parse(REQ_JSON), *body;
    struct http_request r;
    char err[256];

    ck_assert_int_eq(http_chat_request(req, "http://h:1/v1/", "tier-model",
                                       KEY_ENV, 1234, &r, err, sizeof(err)),
                     0);
    ck_assert_str_eq(r.method, "POST");
    ck_assert_str_eq(r.url, "http://h:1/v1/chat/completions");
    ck_assert_int_eq(r.timeout_ms, 1234);
    ck_assert_str_eq(http_request_header(&r, "authorization"),
                     "Bearer " KEY_VALUE);
    ck_assert_str_eq(http_request_header(&r, "Content-Type"),
                     "application/json");
    body = cJSON_ParseWithLength(r.body, r.body_len);
    ck_assert_str_eq(jstr(body, "model", NULL), "tier-model");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(body, "messages")),
                     1);
    ck_assert_str_eq(jstr(req, "model", NULL), "from-job"); /* untouched */
    /* The key is in the Authorization value and nowhere else. */
    ck_assert_ptr_null(strstr(r.body, KEY_VALUE));
    ck_assert_ptr_null(strstr(r.url, KEY_VALUE));
    for (size_t i = 0; i < r.nheaders; i++)
        ck_assert(strstr(r.headers[i].value, KEY_VALUE) == NULL ||
                  strcmp(r.headers[i].name, "Authorization") == 0);
    cJSON_Delete(body);
    cJSON_Delete(req);
    http_request_cleanup(&r);
}
END_TEST

START_TEST(test_chat_request_without_key)
{
    cJSON *req = cJSON_Parse("{\"messages\": []}");
    struct http_request r;
    char err[256];

    ck_assert_int_eq(http_chat_request(req, "http://h/v1", "m", NULL, 0, &r,
                                       err, sizeof(err)),
                     0);
    ck_assert_ptr_null(http_request_header(&r, "Authorization"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"model\":\"m\""));
    http_request_cleanup(&r);
    unsetenv(KEY_ENV);
    ck_assert_int_eq(http_chat_request(req, "http://h/v1", "m", KEY_ENV, 0, &r,
                                       err, sizeof(err)),
                     0);
    ck_assert_ptr_null(http_request_header(&r, "Authorization"));
    http_request_cleanup(&r);
    setenv(KEY_ENV, "", 1);
    ck_assert_int_eq(http_chat_request(req, "http://h/v1", "m", KEY_ENV, 0, &r,
                                       err, sizeof(err)),
                     0);
    ck_assert_ptr_null(http_request_header(&r, "Authorization"));
    http_request_cleanup(&r);
    cJSON_Delete(req);
}
END_TEST

START_TEST(test_chat_request_refuses_bad_input)
{
    cJSON *arr = cJSON_Parse("[1]"), *obj = cJSON_Parse("{}");
    struct http_request r = {0};
    char err[256];

    ck_assert_int_eq(
        http_chat_request(arr, "http://h", "m", NULL, 0, &r, err, sizeof(err)),
        -EINVAL);
    ck_assert_str_eq(err, "request: must be an object");
    ck_assert_int_eq(
        http_chat_request(obj, "ftp://h", "m", NULL, 0, &r, err, sizeof(err)),
        -EINVAL);
    setenv(KEY_ENV, "sk-Bad\r\nX-Injected: 1", 1);
    ck_assert_int_eq(http_chat_request(obj, "http://h", "m", KEY_ENV, 0, &r,
                                       err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_null(strstr(err, "sk-Bad"));
    ck_assert_ptr_nonnull(strstr(err, KEY_ENV));
    ck_assert_ptr_null(r.url); /* untouched */
    cJSON_Delete(arr);
    cJSON_Delete(obj);
}
END_TEST

START_TEST(test_step_request_resolves_env_and_key)
{
    cJSON *step = cJSON_Parse(
        "{\"url\": \"http://h/c\", \"headers\": {\"Authorization\": "
        "\"env:" KEY_ENV "\", \"Idempotency-Key\": \"from-job\"}, "
        "\"body\": {\"text\": \"hi\"}}");
    struct http_request r;
    char err[256];

    ck_assert_int_eq(http_step_request(step, "k-9", 0, &r, err, sizeof(err)),
                     0);
    ck_assert_str_eq(r.method, "POST");
    ck_assert_str_eq(http_request_header(&r, "authorization"), KEY_VALUE);
    ck_assert_str_eq(http_request_header(&r, "idempotency-key"), "k-9");
    ck_assert_str_eq(http_request_header(&r, "content-type"),
                     "application/json");
    ck_assert_str_eq(r.body, "{\"text\":\"hi\"}");
    http_request_cleanup(&r);
    unsetenv(KEY_ENV);
    ck_assert_int_eq(http_step_request(step, NULL, 0, &r, err, sizeof(err)),
                     -ENOENT);
    ck_assert_str_eq(err,
                     "http.headers.Authorization: environment variable " KEY_ENV
                     " is not set");
    cJSON_Delete(step);
}
END_TEST

START_TEST(test_step_request_defaults_and_errors)
{
    cJSON *get = cJSON_Parse("{\"url\": \"https://h/x\"}");
    cJSON *text = cJSON_Parse("{\"method\": \"PUT\", \"url\": \"http://h/x\","
                              " \"body\": \"raw text\"}");
    cJSON *bad =
        cJSON_Parse("{\"url\": \"http://h\", \"headers\": {\"A\": 1}}");
    struct http_request r;
    char err[256];

    ck_assert_int_eq(http_step_request(get, NULL, 0, &r, err, sizeof(err)), 0);
    ck_assert_str_eq(r.method, "GET");
    ck_assert_ptr_null(r.body);
    ck_assert_ptr_null(http_request_header(&r, "Idempotency-Key"));
    http_request_cleanup(&r);
    ck_assert_int_eq(http_step_request(text, NULL, 0, &r, err, sizeof(err)), 0);
    ck_assert_str_eq(r.method, "PUT");
    ck_assert_str_eq(r.body, "raw text");
    ck_assert_str_eq(http_request_header(&r, "Content-Type"),
                     "text/plain; charset=utf-8");
    http_request_cleanup(&r);
    ck_assert_int_eq(http_step_request(bad, NULL, 0, &r, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, "http.headers.A: must be a string header");
    cJSON_Delete(get);
    cJSON_Delete(text);
    cJSON_Delete(bad);
}
END_TEST

/* ---- chat answer parser ------------------------------------------------- */

START_TEST(test_chat_parse_good_answer)
{
    const char *b =
        "{\"id\":\"x\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
        "\"assistant\",\"content\":\"hello\",\"tool_calls\":[{\"id\":\"t\"}]},"
        "\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":12,"
        "\"completion_tokens\":3,\"total_tokens\":15}}";
    struct http_chat_answer a;

    ck_assert_int_eq(http_chat_parse(b, strlen(b), &a), 0);
    ck_assert_str_eq(a.content, "hello");
    ck_assert(a.has_tool_calls);
    ck_assert_str_eq(a.finish_reason, "tool_calls");
    ck_assert_int_eq(a.prompt_tokens, 12);
    ck_assert_int_eq(a.completion_tokens, 3);
    ck_assert_int_eq(a.total_tokens, 15);
    http_chat_answer_cleanup(&a);
    ck_assert_ptr_null(a.content);
    http_chat_answer_cleanup(NULL);
}
END_TEST

/* Hostile bodies: rc, then has content, tool calls, prompt tokens. */
static const struct {
    const char *body;
    int rc;
    bool content, tools;
    int64_t prompt;
} hostile[] = {
    {"", -EINVAL, false, false, -1},
    {"null", -EINVAL, false, false, -1},
    {"[]", -EINVAL, false, false, -1},
    {"{}", -EINVAL, false, false, -1},
    {"{\"choices\": []}", -EINVAL, false, false, -1},
    {"{\"choices\": [1]}", -EINVAL, false, false, -1},
    {"{\"choices\": [{\"message\": \"x\"}]}", -EINVAL, false, false, -1},
    {"{\"choices\": {\"message\": {}}}", -EINVAL, false, false, -1},
    {"{\"choices\": [{\"message\": {\"content\": \"a\"", -EINVAL, false, false,
     -1},
    {"<html>502 Bad Gateway</html>", -EINVAL, false, false, -1},
    {"{\"error\": {\"type\": \"insufficient_quota\"}}", -EINVAL, false, false,
     -1},
    {"{\"choices\": [{\"message\": {}}]}", 0, false, false, -1},
    {"{\"choices\": [{\"message\": {\"content\": null, \"tool_calls\": "
     "[{}]}}]}",
     0, false, true, -1},
    {"{\"choices\": [{\"message\": {\"content\": 5, \"tool_calls\": []}}],"
     " \"usage\": {\"prompt_tokens\": -5}}",
     0, false, false, -1},
    {"{\"choices\": [{\"message\": {\"content\": \"\"}}], \"usage\": "
     "{\"prompt_tokens\": 1.5}}",
     0, true, false, -1},
    {"{\"choices\": [{\"message\": {\"content\": \"x\"}}], \"usage\": "
     "{\"prompt_tokens\": 1e300}}",
     0, true, false, -1},
    {"{\"choices\": [{\"message\": {\"content\": \"x\"}}], \"usage\": "
     "{\"prompt_tokens\": \"7\"}}",
     0, true, false, -1},
    {"{\"choices\": [{\"message\": {\"content\": \"x\"}}], \"usage\": "
     "{\"prompt_tokens\": 7}}",
     0, true, false, 7},
    {"{\"choices\": [{\"message\": {\"function_call\": {}}}], \"usage\": 3}", 0,
     false, true, -1},
};

START_TEST(test_chat_parse_hostile)
{
    struct http_chat_answer a = {(char *)"untouched", false, NULL, 9, 9, 9};
    const char *b = hostile[_i].body;
    char *copy = xmalloc(strlen(b) + 1);

    memcpy(copy, b, strlen(b)); /* not NUL-terminated on purpose */
    ck_assert_int_eq(http_chat_parse(copy, strlen(b), &a), hostile[_i].rc);
    if (hostile[_i].rc != 0) {
        ck_assert_str_eq(a.content, "untouched");
    } else {
        ck_assert(hostile[_i].content == (a.content != NULL));
        ck_assert(hostile[_i].tools == a.has_tool_calls);
        ck_assert_int_eq(a.prompt_tokens, hostile[_i].prompt);
        http_chat_answer_cleanup(&a);
    }
    free(copy);
}
END_TEST

START_TEST(test_chat_parse_deep_and_binary)
{
    size_t n = 200000;
    char *deep = xmalloc(n);
    struct http_chat_answer a;
    const char bin[] = "{\"choices\"\0\xff\xfe[{}]}";

    memset(deep, '[', n);
    ck_assert_int_eq(http_chat_parse(deep, n, &a), -EINVAL);
    ck_assert_int_eq(http_chat_parse(bin, sizeof(bin) - 1, &a), -EINVAL);
    ck_assert_int_eq(http_chat_parse(NULL, 0, &a), -EINVAL);
    free(deep);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("http");
    TCase *faults = tcase_create("faults"),
          *transport = tcase_create("transport");
    TCase *life = tcase_create("lifecycle"), *many = tcase_create("many");
    TCase *proc = tcase_create("process"), *build = tcase_create("build");
    TCase *parse = tcase_create("parse");
    TCase *all[] = {faults, transport, life, many, proc, build, parse};

    tcase_add_test(faults, test_ok_answer_parses);
    tcase_add_test(faults, test_rpm_429_with_retry_after);
    tcase_add_test(faults, test_allowance_insufficient_quota);
    tcase_add_test(faults, test_storm_of_5xx_then_ok);
    tcase_add_test(faults, test_truncate_finish_reason_length);
    tcase_add_test(faults, test_invalid_json_content);
    tcase_add_test(faults, test_scripted_status_headers_body);
    tcase_add_test(transport, test_hang_times_out);
    tcase_add_test(transport, test_oversize_is_too_large_then_client_works);
    tcase_add_test(transport, test_answer_at_the_cap_passes);
    tcase_add_test(transport, test_close_mid_body_is_reset);
    tcase_add_test(transport, test_close_without_answer_is_reset);
    tcase_add_test(transport, test_connection_refused);
    tcase_add_test(transport, test_https_to_plain_http_is_tls_error);
    tcase_add_test(transport, test_header_caps_drop_extra_headers);
    tcase_add_test(transport, test_keep_alive_reuses_connection);
    tcase_add_test(life, test_cancel_in_flight);
    tcase_add_test(life, test_close_cancels_everything_in_flight);
    tcase_add_test(life, test_close_from_a_callback);
    tcase_add_test(life, test_bad_requests_are_refused);
    tcase_add_test(many, test_ten_thousand_requests);
    tcase_add_test(proc, test_process_chat_with_bearer_and_faults);
    tcase_add_test(proc, test_process_http_step_env_and_idempotency_key);
    tcase_add_test(build, test_chat_request_sets_model_and_bearer_only);
    tcase_add_test(build, test_chat_request_without_key);
    tcase_add_test(build, test_chat_request_refuses_bad_input);
    tcase_add_test(build, test_step_request_resolves_env_and_key);
    tcase_add_test(build, test_step_request_defaults_and_errors);
    tcase_add_test(parse, test_chat_parse_good_answer);
    tcase_add_loop_test(parse, test_chat_parse_hostile, 0,
                        (int)STEPQ_ARRAY_LEN(hostile));
    tcase_add_test(parse, test_chat_parse_deep_and_binary);
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(all); i++) {
        tcase_add_checked_fixture(all[i], setup, teardown);
        tcase_set_timeout(all[i], all[i] == many ? 120 : 20);
        suite_add_tcase(s, all[i]);
    }
    return s;
}

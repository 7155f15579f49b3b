/* test_mock.c: `stepq mock` over loopback, and mock_start in process.
 *
 * The process tests start the real binary with a script (most of them from
 * tests/data/mock/), talk to it with a plain socket client whose responses
 * are parsed with http_parser, and read the request log it writes. The
 * library tests run the mock on a loop in this process with a client
 * thread, and end with uv_loop_close() == 0. The scripted faults are in
 * test_mock_faults.c, the limiter shapes in test_mock_limits.c.
 */
#include "tests/support/support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <http_parser.h>
#include <uv.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "mock/mock.h"
#include "tests/support/httpcl.h"
#include "tests/support/mockproc.h"

/* ---- chat --------------------------------------------------------------- */

START_TEST(test_chat_default_shape)
{
    int port = mockproc_fixture_start("{}");
    struct reply r;
    cJSON *j, *content;
    double prompt, completion;

    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(hdr(&r, "content-type"), "application/json");
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "object"), "chat.completion");
    ck_assert_str_eq(jstr(j, "model"), "m-test");
    ck_assert_str_eq(jstr(j, "choices.finish_reason"), "stop");
    content = cJSON_Parse(jstr(j, "choices.message.content"));
    ck_assert(strstr(jstr(content, "summary"), "hello world") != NULL);
    prompt = jnum(j, "usage.prompt_tokens");
    completion = jnum(j, "usage.completion_tokens");
    ck_assert_int_eq((int)prompt, (int)(strlen(CHAT_BODY) / 4));
    ck_assert(completion > 0);
    ck_assert_int_eq((int)jnum(j, "usage.total_tokens"),
                     (int)(prompt + completion));
    cJSON_Delete(content);
    cJSON_Delete(j);
    reply_free(&r);
}
END_TEST

static const char *const chat_paths[] = {
    "/v1/chat/completions", "/free/v1/chat/completions", "/chat/completions",
    "/openai/deployments/x/chat/completions?api-version=1"};

START_TEST(test_chat_any_base_path)
{
    int port = mockproc_fixture_start("{}");
    struct reply r;
    cJSON *j;

    chat(port, chat_paths[_i], &r);
    ck_assert_int_eq(r.status, 200);
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "object"), "chat.completion");
    cJSON_Delete(j);
    reply_free(&r);
}
END_TEST

START_TEST(test_chat_configured_content_and_max_tokens)
{
    int port = mockproc_fixture_start("content_fixed.json");
    struct reply r;
    cJSON *j;
    const char *small =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
        "\"max_tokens\":2}";

    chat(port, CHAT, &r);
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "choices.message.content"),
                     "{\"summary\":\"fixed\",\"n\":1}");
    cJSON_Delete(j);
    reply_free(&r);
    req(port, "POST", CHAT, NULL, small, &r);
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "choices.finish_reason"), "length");
    ck_assert_int_eq((int)jnum(j, "usage.completion_tokens"), 2);
    cJSON_Delete(j);
    reply_free(&r);
}
END_TEST

START_TEST(test_keep_alive_serves_two_requests)
{
    int port = mockproc_fixture_start("{}");
    int fd = cl_connect(port);
    struct reply a, b;

    cl_send(fd, "POST", CHAT, NULL, CHAT_BODY);
    cl_recv(fd, 5000, &a);
    cl_send(fd, "POST", CHAT, NULL, CHAT_BODY);
    cl_recv(fd, 5000, &b);
    close(fd);
    ck_assert_int_eq(a.status, 200);
    ck_assert_int_eq(b.status, 200);
    ck_assert_str_eq(hdr(&a, "connection"), "keep-alive");
    ck_assert_str_ne(hdr(&a, "x-request-id"), hdr(&b, "x-request-id"));
    reply_free(&a);
    reply_free(&b);
}
END_TEST

/* log_lines counts the requests the mock has logged so far. */
static int
log_lines(void)
{
    char *path = tmpdir_join(mockproc_dir, "log.jsonl");
    FILE *f = fopen(path, "r");
    int n = 0, ch;

    ck_assert_ptr_nonnull(f);
    while ((ch = getc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    free(path);
    return n;
}

/* count_answers counts the status lines in buf; the default chat answer
 * never holds that text in its body. */
static size_t
count_answers(const char *buf, size_t len)
{
    static const char status[] = "HTTP/1.1 200 OK\r\n";
    size_t n = 0, k = sizeof(status) - 1;

    for (size_t i = 0; i + k <= len; i++)
        n += memcmp(buf + i, status, k) == 0;
    return n;
}

/* send_some sends what the socket takes now; false once it takes nothing. */
static bool
send_some(int fd, const char *all, size_t total, size_t *sent)
{
    ssize_t w = send(fd, all + *sent, total - *sent, MSG_NOSIGNAL);

    if (w < 0)
        ck_assert_msg(errno == EAGAIN, "send: %s", strerror(errno));
    if (w > 0)
        *sent += (size_t)w;
    return w > 0;
}

/* A client that pipelines requests and reads no answer: the mock stops
 * reading once its answers back up (it answers only what the sockets and
 * a few dozen queued answers hold), so its memory stays flat; once the
 * client reads, every request is answered, in order. Without the stop it
 * parsed all of them and held every answer: 400 MB after five seconds. */
START_TEST(test_pipelined_flood_is_held_back_then_answered)
{
    enum { N = 60000 };
    int port = mockproc_fixture_start("{}");
    int fd = socket(AF_INET, SOCK_STREAM, 0), small = 4096;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    char one[512], *all, *in = xmalloc(1 << 16);
    size_t one_len, total, sent = 0, got = 0, keep, answers = 0;
    int64_t stall_until = clock_mono_ms() + 1000;

    /* A small receive buffer of our own: the answers back up at once. */
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    one_len = (size_t)snprintf(one, sizeof(one),
                               "POST " CHAT " HTTP/1.1\r\nHost: t\r\n"
                               "Content-Type: application/json\r\n"
                               "Content-Length: %zu\r\n\r\n%s",
                               strlen(CHAT_BODY), CHAT_BODY);
    total = one_len * N;
    all = xmalloc(total);
    for (int i = 0; i < N; i++)
        memcpy(all + (size_t)i * one_len, one, one_len);
    /* Send, reading nothing, until nothing more is taken for a second. */
    while (sent < total && clock_mono_ms() < stall_until) {
        if (send_some(fd, all, total, &sent))
            stall_until = clock_mono_ms() + 1000;
        else
            poll(&(struct pollfd){.fd = fd, .events = POLLOUT}, 1, 50);
    }
    ck_assert_msg(log_lines() < N / 2, "%d of %d answered unread", log_lines(),
                  N);
    /* Now read: the rest goes out as answers come back, every one a 200. */
    while (answers < N) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t r;
        p.events |= sent < total ? POLLOUT : 0;
        ck_assert_int_gt(poll(&p, 1, 5000), 0);
        if ((p.revents & POLLOUT) != 0)
            send_some(fd, all, total, &sent);
        r = recv(fd, in + got, (1 << 16) - got, 0);
        ck_assert_msg(r > 0 || (r < 0 && errno == EAGAIN), "recv: %zd", r);
        got += r > 0 ? (size_t)r : 0;
        answers += count_answers(in, got);
        /* Keep a tail too short to hold a whole status line, which may
         * hold the start of the next one. */
        keep = got < 16 ? got : 16;
        memmove(in, in + got - keep, keep);
        got = keep;
    }
    ck_assert_int_eq(answers, N);
    close(fd);
    free(all);
    free(in);
}
END_TEST

/* ---- generic endpoint and log ------------------------------------------- */

START_TEST(test_generic_records_idempotency_key)
{
    int port = mockproc_fixture_start("{}");
    struct reply r;
    cJSON *j, *log, *line;
    char *raw = NULL, *lp = tmpdir_join(mockproc_dir, "log.jsonl");
    size_t len;

    req(port, "POST", "/comments",
        "Idempotency-Key: k-123\r\nAuthorization: Bearer sekrit-42\r\n",
        "{\"text\":\"hi\"}", &r);
    ck_assert_int_eq(r.status, 200);
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "idempotency_key"), "k-123");
    ck_assert_str_eq(jstr(j, "path"), "/comments");
    log = mockproc_read_log(mockproc_dir, 1);
    line = cJSON_GetArrayItem(log, 0);
    ck_assert_str_eq(jstr(line, "idempotency_key"), "k-123");
    ck_assert(cJSON_IsTrue(jget(line, "authorization")));
    ck_assert_str_eq(jstr(line, "body.text"), "hi");
    ck_assert_int_eq((int)jnum(line, "status"), 200);
    ck_assert_int_eq(file_read_all(lp, 1 << 20, &raw, &len), 0);
    ck_assert_msg(strstr(raw, "sekrit") == NULL, "secret logged: %s", raw);
    free(raw);
    free(lp);
    cJSON_Delete(log);
    cJSON_Delete(j);
    reply_free(&r);
}
END_TEST

START_TEST(test_generic_replays_known_key)
{
    int port = mockproc_fixture_start("{}");
    struct reply a, b, c;
    const char *k1 = "Idempotency-Key: same\r\n";

    req(port, "POST", "/comments", k1, "{}", &a);
    req(port, "POST", "/comments", k1, "{}", &b);
    req(port, "POST", "/comments", "Idempotency-Key: other\r\n", "{}", &c);
    ck_assert_int_eq(b.status, 200);
    ck_assert_str_eq(a.body, b.body);
    ck_assert_ptr_nonnull(hdr(&b, "idempotent-replayed"));
    ck_assert_ptr_null(hdr(&a, "idempotent-replayed"));
    ck_assert_str_ne(a.body, c.body);
    reply_free(&a);
    reply_free(&b);
    reply_free(&c);
}
END_TEST

START_TEST(test_log_lines_are_json)
{
    int port = mockproc_fixture_start("route_gone_404.json");
    struct reply r;
    cJSON *log;
    const char *paths[] = {CHAT, "/hooks/x", "/gone/a"};
    const int want[] = {200, 200, 404};

    for (int i = 0; i < 3; i++) {
        req(port, i == 1 ? "PUT" : "POST", paths[i], NULL,
            i == 0 ? CHAT_BODY : "{}", &r);
        ck_assert_int_eq(r.status, want[i]);
        reply_free(&r);
    }
    log = mockproc_read_log(mockproc_dir, 3);
    ck_assert_int_eq(cJSON_GetArraySize(log), 3);
    for (int i = 0; i < 3; i++) {
        const cJSON *l = cJSON_GetArrayItem(log, i);
        ck_assert_str_eq(jstr(l, "path"), paths[i]);
        ck_assert_str_eq(jstr(l, "method"), i == 1 ? "PUT" : "POST");
        ck_assert_int_eq((int)jnum(l, "status"), want[i]);
    }
    cJSON_Delete(log);
}
END_TEST

/* ---- command line ------------------------------------------------------- */

static const struct {
    const char *script, *want;
} bad_scripts[] = {
    {"{\"rpm\": 0}", "rpm: must be between"},
    {"{\"routes\": [{\"path\": \"/a\", \"rmp\": 3}]}",
     "routes[0].rmp: unknown field"},
    {"{\"routes\": [{\"path\": \"/a\", \"answers\": [{\"fault\": \"boom\"}]}]}",
     "routes[0].answers[0].fault: must be one of"},
    {"{\"storm\": {\"status\": 503}}", "storm: needs"},
    {"{\"answers\": [{\"status\": 99}]}", "answers[0].status"},
    {"{\"routes\": [{\"rpm\": 1}]}", "routes[0].path: missing"},
    {"{\"answers\": [{\"headers\": {\"X-A\": \"a\\r\\nb\"}}]}",
     "answers[0].headers.X-A: must not contain"},
    {"{\"routes\": [{\"path\": \"/a\", \"require_headers\": {\"api-key\": "
     "1}}]}",
     "routes[0].require_headers.api-key: must be a string"},
    {"{\"routes\": [{\"path\": \"/a\", \"require_headers\": {\"a b\": "
     "\"x\"}}]}",
     "routes[0].require_headers.a b: not a valid header name"},
    {"{\"routes\": [{\"path\": \"/a\", \"require_query\": []}]}",
     "routes[0].require_query: must be an object"},
    {"{\"exact\": true}", "exact: only a route of"},
    {"{\"routes\": [{\"path\": \"/a\", \"unauthorized\": {\"fault\": "
     "\"nope\"}}]}",
     "routes[0].unauthorized.fault: must be one of"},
    {"{\"seed\": 1,\n \"rpm\": }", "not valid JSON (line 2"},
    {"[]", "must be an object"},
    /* a NUL would cut the path short: "/a\u0000b" served "/a" */
    {"{\"routes\": [{\"path\": \"/a\\u0000b\"}]}", "a NUL character"},
    /* fields the mock could not carry out */
    {"{\"answers\": [{\"status\": 204, \"body\": {\"a\": 1}}]}",
     "answers[0].body: a 204 answer has no body"},
    {"{\"answers\": [{\"oversize_bytes\": 100, \"body\": \"x\"}]}",
     "answers[0].oversize_bytes: pads the body the mock makes"},
    {"{\"answers\": [{\"oversize_bytes\": 100, \"status\": 500}]}",
     "answers[0].oversize_bytes: pads the body the mock makes"},
};

START_TEST(test_bad_script_exits_2_naming_path)
{
    char *sp = tmpdir_write(mockproc_dir, "bad.json", bad_scripts[_i].script,
                            strlen(bad_scripts[_i].script));
    const char *argv[] = {"mock", "--port", "0", "--script", sp, NULL};
    struct run_result res;

    run_stepq(argv, NULL, &res);
    ck_assert_int_eq(res.status, 2);
    ck_assert_msg(strstr(res.err, bad_scripts[_i].want) != NULL,
                  "stderr lacks \"%s\": %s", bad_scripts[_i].want, res.err);
    ck_assert_str_eq(res.out, "");
    run_result_free(&res);
    free(sp);
}
END_TEST

START_TEST(test_missing_script_exits_2)
{
    char *sp = tmpdir_join(mockproc_dir, "nope.json");
    const char *argv[] = {"mock", "--script", sp, NULL};
    struct run_result res;

    run_stepq(argv, NULL, &res);
    ck_assert_int_eq(res.status, 2);
    ck_assert(strstr(res.err, "no such file") != NULL);
    run_result_free(&res);
    free(sp);
    /* a folder: one line saying so, exit 2 */
    argv[2] = mockproc_dir;
    run_stepq(argv, NULL, &res);
    ck_assert_int_eq(res.status, 2);
    ck_assert_msg(strstr(res.err, "a folder, not a script") != NULL, "%s",
                  res.err);
    run_result_free(&res);
}
END_TEST

START_TEST(test_example_scripts_are_valid)
{
    char *pattern = source_path("examples/mock-*.json");
    glob_t g;

    ck_assert_int_eq(glob(pattern, 0, NULL, &g), 0);
    ck_assert_int_ge((int)g.gl_pathc, 2);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *argv[] = {"mock", "--check", "--script", g.gl_pathv[i],
                              NULL};
        struct run_result res;
        run_stepq(argv, NULL, &res);
        ck_assert_msg(res.status == 0, "%s: %s", g.gl_pathv[i], res.err);
        run_result_free(&res);
    }
    globfree(&g);
    free(pattern);
}
END_TEST

START_TEST(test_sigterm_exits_0_with_hung_connection)
{
    int port = mockproc_fixture_start("hang_then_delay_60s.json");
    int a = cl_connect(port), b = cl_connect(port);
    cJSON *log;

    cl_send(a, "POST", CHAT, NULL, CHAT_BODY);
    cl_send(b, "POST", CHAT, NULL, CHAT_BODY);
    log = mockproc_read_log(
        mockproc_dir, 2); /* both requests are in: one hung, one waiting */
    ck_assert_int_eq(cJSON_GetArraySize(log), 2);
    ck_assert_int_eq(mockproc_stop(&mockproc_mp), 0);
    close(a);
    close(b);
    cJSON_Delete(log);
}
END_TEST

/* ---- in process --------------------------------------------------------- */

struct lib_ctx {
    mock *m;
    int port;
    uv_async_t async; /* data = this */
    uv_thread_t thread;
    int status[3];
    int hang_fd;
    struct mock_stats stats;
    bool stopped;
};

static void
client_thread(void *arg)
{
    struct lib_ctx *ctx = arg;
    struct reply r;

    /* A hung request and a slow one stay open while the mock stops. */
    ctx->hang_fd = cl_connect(ctx->port);
    cl_send(ctx->hang_fd, "POST", "/hang" CHAT, NULL, CHAT_BODY);
    cl_recv(ctx->hang_fd, 100, &r);
    ctx->status[0] = r.timed_out ? -1 : r.status;
    reply_free(&r);
    for (int i = 1; i < 3; i++) {
        chat(ctx->port, CHAT, &r);
        ctx->status[i] = r.status;
        reply_free(&r);
    }
    uv_async_send(&ctx->async);
}

static void
on_stopped(void *arg)
{
    ((struct lib_ctx *)arg)->stopped = true;
}

static void
on_client_done(uv_async_t *a)
{
    struct lib_ctx *ctx = a->data;

    mock_get_stats(ctx->m, &ctx->stats);
    mock_stop(ctx->m, on_stopped, ctx);
    uv_close((uv_handle_t *)a, NULL);
}

START_TEST(test_lib_serves_and_stops_cleanly)
{
    char *script = mockproc_script("rpm_1_route_hang.json");
    struct lib_ctx ctx = {0};
    uv_loop_t loop;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(mock_start(&loop, script, NULL, &ctx.m, &ctx.port), 0);
    free(script);
    ck_assert_int_eq(mock_port(ctx.m), ctx.port);
    uv_async_init(&loop, &ctx.async, on_client_done);
    ctx.async.data = &ctx;
    ck_assert_int_eq(uv_thread_create(&ctx.thread, client_thread, &ctx), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_thread_join(&ctx.thread);
    close(ctx.hang_fd);
    ck_assert(ctx.stopped);
    ck_assert_int_eq(ctx.status[0], -1);
    ck_assert_int_eq(ctx.status[1], 200);
    ck_assert_int_eq(ctx.status[2], 429);
    ck_assert_int_eq((int)ctx.stats.requests, 3);
    ck_assert_int_eq((int)ctx.stats.rate_limited, 1);
    ck_assert_int_eq((int)ctx.stats.faults, 1);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

START_TEST(test_lib_bad_script_touches_nothing)
{
    struct mock_options o = {.script = "{\"routes\": [{\"path\": \"x\"}]}"};
    uv_loop_t loop;
    mock *m = NULL;
    int port = -1;
    char err[256];

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(mock_start_with(&loop, &o, &m, &port, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, "routes[0].path: must start with /");
    ck_assert_ptr_null(m);
    ck_assert_int_eq(port, -1);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

START_TEST(test_lib_port_in_use)
{
    struct mock_options o = {0};
    uv_loop_t loop;
    mock *a = NULL, *b = NULL;
    int port = 0, port2 = 0;
    char err[256];

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(mock_start_with(&loop, &o, &a, &port, err, sizeof(err)),
                     0);
    o.port = port;
    ck_assert_int_eq(mock_start_with(&loop, &o, &b, &port2, err, sizeof(err)),
                     -EADDRINUSE);
    ck_assert_ptr_null(b);
    mock_stop(a, NULL, NULL);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("mock");
    TCase *chat_tc = tcase_create("chat"), *gen = tcase_create("generic");
    TCase *cli = tcase_create("cli");
    TCase *lib = tcase_create("library");
    TCase *all[] = {chat_tc, gen, cli, lib};

    tcase_add_test(chat_tc, test_chat_default_shape);
    tcase_add_loop_test(chat_tc, test_chat_any_base_path, 0,
                        (int)(sizeof(chat_paths) / sizeof(chat_paths[0])));
    tcase_add_test(chat_tc, test_chat_configured_content_and_max_tokens);
    tcase_add_test(chat_tc, test_keep_alive_serves_two_requests);
    tcase_add_test(chat_tc, test_pipelined_flood_is_held_back_then_answered);
    tcase_add_test(gen, test_generic_records_idempotency_key);
    tcase_add_test(gen, test_generic_replays_known_key);
    tcase_add_test(gen, test_log_lines_are_json);
    tcase_add_loop_test(cli, test_bad_script_exits_2_naming_path, 0,
                        (int)(sizeof(bad_scripts) / sizeof(bad_scripts[0])));
    tcase_add_test(cli, test_missing_script_exits_2);
    tcase_add_test(cli, test_example_scripts_are_valid);
    tcase_add_test(cli, test_sigterm_exits_0_with_hung_connection);
    tcase_add_test(lib, test_lib_serves_and_stops_cleanly);
    tcase_add_test(lib, test_lib_bad_script_touches_nothing);
    tcase_add_test(lib, test_lib_port_in_use);
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        tcase_add_checked_fixture(all[i], mockproc_setup, mockproc_teardown);
        tcase_set_timeout(all[i], 20);
        suite_add_tcase(s, all[i]);
    }
    return s;
}

/* test_serve.c: `stepq serve` end to end: the real binary serving the
 * API over loopback, a real worker parking a step against the real mock,
 * and every answer compared with what the CLI's --json prints for the
 * same store. Runs on SQLite and (test_serve_pg) on PostgreSQL. */
#define _GNU_SOURCE /* asprintf */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/e2e.h"
#include "tests/support/httpcl.h"

#define TOKEN "test-token-0123456789abcdef"
#define AUTH  "Authorization: Bearer " TOKEN "\r\n"

#define JOB(key)                                                               \
    "{\"name\":\"n\",\"key\":\"" key "\",\"steps\":[{\"name\":\"s\","          \
    "\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}}]}"

struct server {
    pid_t pid;
    int port;
};

/* Starts `stepq serve --listen 127.0.0.1:0 ARGS` on e2e_db with $STEPQ_TOKEN
 * set to token (NULL: unset) and reads its "listening" line. Returns the
 * exit code instead when it exits first (port 0 then). */
static int
serve_start(struct server *s, const char *token, const char *const *args)
{
    const char *base[] = {"serve", "--listen", "127.0.0.1:0", NULL};
    const char *argv[16];
    const char **full;
    char line[128] = "";
    int out[2], n = 0, k = 0;
    FILE *f;

    for (int i = 0; base[i] != NULL; i++)
        argv[n++] = base[i];
    for (int i = 0; args != NULL && args[i] != NULL && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    full = run_argv(NULL, argv);
    ck_assert_int_eq(pipe(out), 0);
    s->pid = fork();
    ck_assert_int_ge(s->pid, 0);
    if (s->pid == 0) {
        if (token != NULL)
            setenv("STEPQ_TOKEN", token, 1);
        else
            unsetenv("STEPQ_TOKEN");
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execv(full[0], (char *const *)full);
        _exit(127);
    }
    free(full);
    close(out[1]);
    f = fdopen(out[0], "r");
    ck_assert_ptr_nonnull(f);
    s->port = 0;
    if (fgets(line, sizeof(line), f) != NULL)
        k = sscanf(line, "listening 127.0.0.1:%d", &s->port);
    fclose(f);
    if (k != 1 || s->port <= 0) {
        s->port = 0;
        return e2e_wait_exit(s->pid);
    }
    return -1;
}

/* SIGTERM, and the server must stop cleanly. */
static void
serve_stop(struct server *s)
{
    ck_assert_int_eq(kill(s->pid, SIGTERM), 0);
    ck_assert_int_eq(e2e_wait_exit(s->pid), 0);
}

/* One request; its parsed body (NULL unless JSON) and *status. */
static cJSON *
call(const struct server *s, const char *method, const char *path,
     const char *body, int *status)
{
    struct reply r = {0};
    cJSON *o;

    req(s->port, method, path, AUTH, body ? body : "", &r);
    *status = r.status;
    o = r.body ? cJSON_ParseWithLength(r.body, r.body_len) : NULL;
    reply_free(&r);
    return o;
}

/* `stepq ARGS --json` parsed. */
static cJSON *
cli_json(const char *const *argv)
{
    struct run_result r;
    cJSON *o;

    ck_assert_int_eq(run_args(&r, argv), 0);
    o = cJSON_Parse(r.out);
    ck_assert_msg(o != NULL, "not JSON: %s", r.out);
    run_result_free(&r);
    return o;
}

/* The API's answer to GET path equals the CLI's --json of argv. */
static void
same_as_cli(const struct server *s, const char *path, const char *const *argv)
{
    int st = 0;
    cJSON *api = call(s, "GET", path, NULL, &st), *cli = cli_json(argv);
    char *a = cJSON_PrintUnformatted(api), *b = cJSON_PrintUnformatted(cli);

    ck_assert_int_eq(st, 200);
    ck_assert_msg(cJSON_Compare(api, cli, true), "GET %s\n api %s\n cli %s",
                  path, a, b);
    free(a);
    free(b);
    cJSON_Delete(api);
    cJSON_Delete(cli);
}

static const char *
error_code(const cJSON *o)
{
    return cJSON_GetStringValue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "code"));
}

/* Every test has the mock and a config with its tiers (the park test's
 * script: a daily wall once, then 200). */
static void
setup(void)
{
    e2e_setup();
    e2e_start_file("comments-daily-wall-once.json", "");
}

START_TEST(test_enqueue_list_show_cancel)
{
    struct server s;
    char path[64], id[16];
    int st = 0, b, c, d, e;
    cJSON *o;

    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    o = call(&s, "POST", "/v1/jobs", JOB("a"), &st);
    ck_assert_int_eq(st, 201);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "id")->valueint, 1);
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(o, "duplicate")));
    cJSON_Delete(o);
    /* the same key again: the same job, 200 */
    o = call(&s, "POST", "/v1/jobs", JOB("a"), &st);
    ck_assert_int_eq(st, 200);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "id")->valueint, 1);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(o, "duplicate")));
    cJSON_Delete(o);
    /* an array and JSON lines: one transaction each, an array answered */
    o = call(&s, "POST", "/v1/jobs", "[" JOB("b") "," JOB("c") "]", &st);
    ck_assert_int_eq(st, 201);
    ck_assert_int_eq(cJSON_GetArraySize(o), 2);
    b = cJSON_GetArrayItem(o, 0)->child->valueint;
    c = cJSON_GetArrayItem(o, 1)->child->valueint;
    cJSON_Delete(o);
    o = call(&s, "POST", "/v1/jobs", JOB("d") "\n" JOB("e") "\n", &st);
    ck_assert_int_eq(st, 201);
    d = cJSON_GetArrayItem(o, 0)->child->valueint;
    e = cJSON_GetArrayItem(o, 1)->child->valueint;
    ck_assert_int_gt(e, d);
    cJSON_Delete(o);
    /* one bad job of three: nothing is written, and the error says where */
    o = call(&s, "POST", "/v1/jobs",
             "[" JOB("f") ",{\"name\":\"x\",\"steps\":[]}," JOB("g") "]", &st);
    ck_assert_int_eq(st, 400);
    ck_assert_str_eq(error_code(o), "invalid_job");
    ck_assert_ptr_nonnull(
        strstr(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message")
                   ->valuestring,
               "job 1: steps"));
    cJSON_Delete(o);
    ck_assert_int_eq(run_job_count(e2e_db), 5);
    o = call(&s, "POST", "/v1/jobs", "", &st);
    ck_assert_int_eq(st, 400);
    cJSON_Delete(o);

    /* pages */
    o = call(&s, "GET", "/v1/jobs?limit=2", NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_int_eq(cJSON_GetArraySize(o), 2);
    cJSON_Delete(o);
    snprintf(path, sizeof(path), "/v1/jobs?limit=2&after=%d", d);
    o = call(&s, "GET", path, NULL, &st);
    ck_assert_int_eq(cJSON_GetArraySize(o), 1);
    ck_assert_int_eq(cJSON_GetArrayItem(o, 0)->child->valueint, e);
    cJSON_Delete(o);
    o = call(&s, "GET", "/v1/jobs?state=nope", NULL, &st);
    ck_assert_int_eq(st, 400);
    cJSON_Delete(o);
    o = call(&s, "GET", "/v1/jobs?limit=0", NULL, &st);
    ck_assert_int_eq(st, 400);
    cJSON_Delete(o);
    same_as_cli(&s, "/v1/jobs",
                (const char *[]){"jobs", "list", "--json", NULL});
    snprintf(path, sizeof(path), "/v1/jobs/%d", c);
    snprintf(id, sizeof(id), "%d", c);
    same_as_cli(&s, path, (const char *[]){"jobs", "show", id, "--json", NULL});

    /* cancel: once, then a conflict; unknown ids are 404 */
    snprintf(path, sizeof(path), "/v1/jobs/%d/cancel", b);
    o = call(&s, "POST", path, "", &st);
    ck_assert_int_eq(st, 200);
    ck_assert_str_eq(cJSON_GetObjectItem(o, "state")->valuestring, "cancelled");
    cJSON_Delete(o);
    o = call(&s, "POST", path, "", &st);
    ck_assert_int_eq(st, 409);
    ck_assert_str_eq(error_code(o), "conflict");
    cJSON_Delete(o);
    o = call(&s, "GET", "/v1/jobs/9999", NULL, &st);
    ck_assert_int_eq(st, 404);
    cJSON_Delete(o);
    o = call(&s, "GET", "/v1/jobs?state=cancelled", NULL, &st);
    ck_assert_int_eq(cJSON_GetArraySize(o), 1);
    cJSON_Delete(o);
    same_as_cli(&s, "/v1/status", (const char *[]){"status", "--json", NULL});
    same_as_cli(&s, "/v1/tiers", (const char *[]){"tiers", "--json", NULL});
    serve_stop(&s);
}
END_TEST

START_TEST(test_park_review_over_http)
{
    struct server s;
    cJSON *o, *st_json;
    char job[1024];
    int st = 0;

    snprintf(job, sizeof(job),
             "{\"name\":\"p\",\"steps\":[{\"name\":\"post\",\"kind\":\"http\","
             "\"http\":{\"url\":\"http://127.0.0.1:%d/comments\",\"body\":"
             "{\"t\":\"x\"}}}]}",
             e2e_mock.port);
    e2e_enqueue(job);
    free(e2e_drain());
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    same_as_cli(&s, "/v1/park",
                (const char *[]){"park", "list", "--json", NULL});
    same_as_cli(&s, "/v1/park/1",
                (const char *[]){"park", "show", "1", "--json", NULL});
    o = call(&s, "GET", "/v1/park?state=all&reason=hard_quota", NULL, &st);
    ck_assert_int_eq(cJSON_GetArraySize(o), 1);
    cJSON_Delete(o);

    /* bad decisions change nothing */
    const char *bad[] = {
        "{\"resolution\":\"retry\"}",                       /* no by */
        "{\"resolution\":\"again\",\"by\":\"ana\"}",        /* unknown */
        "{\"resolution\":\"skip\",\"by\":\"ana\",\"x\":1}", /* field */
        "{\"resolution\":\"skip\",\"by\":\"ana\",\"output\":\"o\"}",
        "{\"resolution\":\"retry\",\"by\":\"ana\",\"tier\":\"nope\"}",
        "[1]",
        "{\"resolution\":3}",
        "not json",
        "{\"resolution\":\"skip\",\"by\":\"ana\"} trailing",
        "{\"resolution\":\"skip\",\"by\":\"ana\",\"job_id\":1}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        o = call(&s, "POST", "/v1/park/1/resolve", bad[i], &st);
        ck_assert_msg(st == 400, "%s: %d", bad[i], st);
        ck_assert_str_eq(error_code(o), "bad_request");
        cJSON_Delete(o);
    }
    o = call(&s, "POST", "/v1/park/9/resolve",
             "{\"resolution\":\"skip\",\"by\":\"ana\"}", &st);
    ck_assert_int_eq(st, 404);
    cJSON_Delete(o);
    st_json = e2e_status();
    ck_assert_int_eq(cJSON_GetObjectItem(st_json, "park_open")->valueint, 1);
    cJSON_Delete(st_json);

    o = call(&s, "POST", "/v1/park/1/resolve",
             "{\"resolution\":\"retry\",\"by\":\"ana\",\"note\":\"wall "
             "over\"}",
             &st);
    ck_assert_int_eq(st, 200);
    ck_assert_str_eq(cJSON_GetObjectItem(o, "resolution")->valuestring,
                     "retry");
    cJSON_Delete(o);
    o = call(&s, "POST", "/v1/park/1/resolve",
             "{\"resolution\":\"skip\",\"by\":\"bo\"}", &st);
    ck_assert_int_eq(st, 409);
    cJSON_Delete(o);
    o = call(&s, "GET", "/v1/park/1", NULL, &st);
    ck_assert_str_eq(cJSON_GetObjectItem(o, "resolved_by")->valuestring, "ana");
    ck_assert_str_eq(cJSON_GetObjectItem(o, "note")->valuestring, "wall over");
    cJSON_Delete(o);
    /* bulk: done is per item; a filter of an unknown tier is refused */
    o = call(&s, "POST", "/v1/park/resolve",
             "{\"resolution\":\"done\",\"by\":\"ana\"}", &st);
    ck_assert_int_eq(st, 400);
    cJSON_Delete(o);
    o = call(&s, "POST", "/v1/park/resolve",
             "{\"resolution\":\"skip\",\"by\":\"ana\",\"tier\":\"nope\"}", &st);
    ck_assert_int_eq(st, 400);
    cJSON_Delete(o);
    o = call(&s, "POST", "/v1/park/resolve",
             "{\"resolution\":\"skip\",\"by\":\"ana\",\"reason\":\"in_doubt\"}",
             &st);
    ck_assert_int_eq(st, 200);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "resolved")->valueint, 0);
    cJSON_Delete(o);
    serve_stop(&s);

    /* the worker carries the retry out */
    free(e2e_drain());
    o = e2e_show(1);
    ck_assert_str_eq(e2e_str(o, "state"), "succeeded");
    cJSON_Delete(o);
}
END_TEST

START_TEST(test_token_origin_and_size)
{
    const char *small[] = {"--max-body", "1024", NULL};
    struct server s;
    struct reply r = {0};
    char *big;
    int st = 0;
    cJSON *o;

    ck_assert_int_eq(serve_start(&s, TOKEN, small), -1);
    req(s.port, "GET", "/v1/status", NULL, "", &r);
    ck_assert_int_eq(r.status, 401);
    ck_assert_str_eq(hdr(&r, "WWW-Authenticate"), "Bearer");
    reply_free(&r);
    req(s.port, "GET", "/v1/status", "Authorization: Bearer " TOKEN "x\r\n", "",
        &r);
    ck_assert_int_eq(r.status, 401);
    reply_free(&r);
    req(s.port, "GET", "/v1/status", "Authorization: Basic abc\r\n", "", &r);
    ck_assert_int_eq(r.status, 401);
    reply_free(&r);
    /* a page of another site posting: refused, nothing written */
    req(s.port, "POST", "/v1/jobs", AUTH "Origin: http://evil.example\r\n",
        JOB("z"), &r);
    ck_assert_int_eq(r.status, 403);
    reply_free(&r);
    req(s.port, "POST", "/v1/jobs", AUTH "Sec-Fetch-Site: cross-site\r\n",
        JOB("z"), &r);
    ck_assert_int_eq(r.status, 403);
    reply_free(&r);
    ck_assert_int_eq(run_job_count(e2e_db), 0);
    /* too large: 413, nothing written */
    big = malloc(4096);
    memset(big, ' ', 4095);
    big[4095] = '\0';
    memcpy(big, JOB("big"), strlen(JOB("big")));
    o = call(&s, "POST", "/v1/jobs", big, &st);
    ck_assert_int_eq(st, 413);
    ck_assert_str_eq(error_code(o), "too_large");
    cJSON_Delete(o);
    free(big);
    ck_assert_int_eq(run_job_count(e2e_db), 0);
    o = call(&s, "GET", "/nope", NULL, &st);
    ck_assert_int_eq(st, 404);
    cJSON_Delete(o);
    o = call(&s, "DELETE", "/v1/jobs", NULL, &st);
    ck_assert_int_eq(st, 405);
    cJSON_Delete(o);
    o = call(&s, "GET", "/healthz", NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(o, "ok")));
    cJSON_Delete(o);
    serve_stop(&s);
}
END_TEST

START_TEST(test_refuses_to_start_unsafely)
{
    const char *no_auth[] = {"--no-auth", NULL};
    const char *open_no_auth[] = {"--listen", "0.0.0.0:0", "--no-auth", NULL};
    const char *bad_addr[] = {"--listen", "localhost:80", NULL};
    const char *bad_port[] = {"--listen", "127.0.0.1:70000", NULL};
    struct server s;
    struct reply r = {0};

    /* no token and no --no-auth */
    ck_assert_int_eq(serve_start(&s, NULL, NULL), 2);
    ck_assert_int_eq(serve_start(&s, "short", NULL), 2);
    /* --no-auth only on loopback (the later --listen wins) */
    ck_assert_int_eq(serve_start(&s, TOKEN, open_no_auth), 2);
    ck_assert_int_eq(serve_start(&s, TOKEN, bad_addr), 2);
    ck_assert_int_eq(serve_start(&s, TOKEN, bad_port), 2);
    /* loopback without a token when asked */
    ck_assert_int_eq(serve_start(&s, NULL, no_auth), -1);
    req(s.port, "GET", "/v1/status", NULL, "", &r);
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
    serve_stop(&s);
}
END_TEST

/* The Python example client (standard library only) against the server:
 * its exit codes are the CLI's. */
START_TEST(test_python_example_client)
{
    char *client = source_path("examples/serve_client.py"), *out = NULL;
    char cmd[2048], base[64];
    struct server s;
    int id = 0;
    cJSON *o;

    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    free(tmpdir_write(e2e_dir, "job.json", JOB("py"), strlen(JOB("py"))));
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", s.port);
#define PY(args)                                                               \
    (snprintf(cmd, sizeof(cmd),                                                \
              "env -u http_proxy -u HTTP_PROXY STEPQ_TOKEN=" TOKEN             \
              " python3 %s %s " args,                                          \
              client, base),                                                   \
     free(out), out = NULL, run_sh(cmd, &out))
    ck_assert_msg(PY("enqueue job.json") == 0, "%s", out);
    o = cJSON_Parse(out);
    ck_assert_ptr_nonnull(o);
    id = cJSON_GetObjectItem(o, "id")->valueint;
    cJSON_Delete(o);
    ck_assert_int_eq(PY("jobs --state queued"), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"key\": \"py\""));
    ck_assert_int_eq(PY("park"), 0);
    ck_assert_str_eq(out, "[]\n");
    ck_assert_int_eq(PY("resolve 9999 skip --by ana"), 3);
    ck_assert_ptr_nonnull(strstr(out, "404 not_found"));
    snprintf(base + strlen(base), sizeof(base) - strlen(base), " cancel %d",
             id);
    ck_assert_int_eq(PY(""), 0);
    ck_assert_int_eq(PY(""), 4);
#undef PY
    free(out);
    free(client);
    serve_stop(&s);
}
END_TEST

/* A client that sends half a request and hangs holds up no one else, and
 * is closed after --timeout; so is one that stops in the middle of a body. */
START_TEST(test_a_peer_that_hangs_blocks_no_one)
{
    const char *quick[] = {"--timeout", "1", NULL};
    static const char half[] = "GET /v1/status HTTP/1.1\r\nHost: x\r\n";
    static const char part[] = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\n" AUTH
                               "Content-Length: 500\r\n\r\n{\"name\"";
    struct server s;
    struct reply r = {0};
    int a, b, st = 0;
    int64_t t0;
    char c;
    cJSON *o;

    ck_assert_int_eq(serve_start(&s, TOKEN, quick), -1);
    a = cl_connect(s.port);
    b = cl_connect(s.port);
    ck_assert_int_eq(write(a, half, strlen(half)), (ssize_t)strlen(half));
    ck_assert_int_eq(write(b, part, strlen(part)), (ssize_t)strlen(part));
    t0 = clock_mono_ms();
    o = call(&s, "GET", "/v1/status", NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_int_lt(clock_mono_ms() - t0, 900); /* not behind a's timeout */
    cJSON_Delete(o);
    /* both are closed by the server once idle for a second */
    ck_assert_int_le(read(a, &c, 1), 0);
    ck_assert_int_le(read(b, &c, 1), 0);
    ck_assert_int_lt(clock_mono_ms() - t0, 5000);
    close(a);
    close(b);
    ck_assert_int_eq(run_job_count(e2e_db), 0);
    req(s.port, "GET", "/healthz", AUTH, "", &r);
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
    serve_stop(&s);
}
END_TEST

/* The metrics text holds line (whole lines, value included). */
static void
has(const struct reply *r, const char *line)
{
    ck_assert_msg(strstr(r->body, line) != NULL, "no line %s in:\n%.3000s",
                  line, r->body);
}

/* GET /metrics after a real night: two chat jobs done on "free", one post
 * parked at a wall. Debian's promtool must accept the text, and the
 * numbers must be the ledger's. */
START_TEST(test_metrics_pass_promtool)
{
    struct server s;
    struct reply r = {0};
    char job[1024], *out = NULL, *cmd;
    int rc;

    snprintf(job, sizeof(job),
             "{\"name\":\"p\",\"steps\":[{\"name\":\"post\",\"kind\":\"http\","
             "\"http\":{\"url\":\"http://127.0.0.1:%d/comments\",\"body\":"
             "{\"t\":\"x\"}}}]}",
             e2e_mock.port);
    e2e_enqueue(job);
    e2e_enqueue_many(2, "\"tiers\":[\"free\"],");
    free(e2e_drain());
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    req(s.port, "GET", "/metrics", AUTH, "", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(hdr(&r, "Content-Type"), "version=0.0.4"));
    free(tmpdir_write(e2e_dir, "metrics.txt", r.body, r.body_len));
    has(&r, "stepq_jobs{state=\"succeeded\"} 2\n");
    has(&r, "stepq_jobs{state=\"parked\"} 1\n");
    has(&r, "stepq_park_open{reason=\"hard_quota\"} 1\n");
    has(&r, "stepq_attempts_total{tier=\"free\",outcome=\"ok\","
            "decision=\"commit\"} 2\n");
    has(&r, "stepq_request_latency_seconds_count{tier=\"free\"} 2\n");
    has(&r,
        "stepq_request_latency_seconds_bucket{tier=\"free\",le=\"+Inf\"} 2\n");
    has(&r, "stepq_tier_breaker{tier=\"local\",state=\"closed\"} 1\n");
    reply_free(&r);
    ck_assert_int_gt(
        asprintf(&cmd, "promtool check metrics < %s/metrics.txt", e2e_dir), 0);
    rc = run_sh(cmd, &out);
    ck_assert_msg(rc == 0, "promtool: %s", out);
    free(out);
    free(cmd);
    serve_stop(&s);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("serve");
    TCase *tc = tcase_create("api");

    tcase_add_checked_fixture(tc, setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_enqueue_list_show_cancel);
    tcase_add_test(tc, test_park_review_over_http);
    tcase_add_test(tc, test_token_origin_and_size);
    tcase_add_test(tc, test_refuses_to_start_unsafely);
    tcase_add_test(tc, test_python_example_client);
    tcase_add_test(tc, test_metrics_pass_promtool);
    tcase_add_test(tc, test_a_peer_that_hangs_blocks_no_one);
    suite_add_tcase(s, tc);
    return s;
}

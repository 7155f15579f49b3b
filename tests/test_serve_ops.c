/* test_serve_ops.c: `stepq serve` for the people who run it: /metrics
 * after a real night checked by promtool and against the ledger, its
 * counters kept across a prune, the
 * OpenAPI description against the routes, the Python example client, and
 * a client that hangs. Runs on SQLite and (test_serve_ops_pg) PostgreSQL. */
#define _GNU_SOURCE /* asprintf */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "tests/support/e2e.h"
#include "tests/support/httpcl.h"
#include "tests/support/servefix.h"

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
    o = serve_call(&s, "GET", "/v1/status", NULL, &st);
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
    /* one that sends a header byte every 300 ms is never idle for a
     * second, and is still closed: its headers must come within --timeout */
    a = cl_connect(s.port);
    t0 = clock_mono_ms();
    for (const char *p =
             "GET /v1/status HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa";
         *p != '\0'; p++) {
        if (write(a, p, 1) != 1)
            break; /* closed under us: as wanted */
        poll(NULL, 0, 300);
    }
    ck_assert_int_le(read(a, &c, 1), 0);
    ck_assert_int_lt(clock_mono_ms() - t0, 4000);
    close(a);
    req(s.port, "GET", "/healthz", AUTH, "", &r);
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
    serve_stop(&s);
}
END_TEST

/* docs/openapi.json describes the routes the server has: every path and
 * method in it is routed (not 404 "no such path", not 405), and its JSON
 * is valid. */
START_TEST(test_openapi_matches_the_routes)
{
    char *path = source_path("docs/openapi.json"), *text = NULL;
    const cJSON *p, *m;
    struct server s;
    size_t len = 0;
    int checked = 0;
    cJSON *doc;

    ck_assert_int_eq(file_read_all(path, 1 << 20, &text, &len), 0);
    doc = cJSON_Parse(text);
    ck_assert_ptr_nonnull(doc);
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(doc, "paths"))
    {
        char url[256];
        const char *brace = strstr(p->string, "{id}");
        if (brace != NULL)
            snprintf(url, sizeof(url), "%.*s1%s", (int)(brace - p->string),
                     p->string, brace + 4);
        else
            snprintf(url, sizeof(url), "%s", p->string);
        cJSON_ArrayForEach(m, p)
        {
            char method[8];
            struct reply r = {0};
            size_t i = 0;
            for (; m->string[i] && i < sizeof(method) - 1; i++)
                method[i] = (char)(m->string[i] - 'a' + 'A');
            method[i] = '\0';
            req(s.port, method, url, AUTH, "{}", &r);
            ck_assert_msg(r.status != 405, "%s %s: 405", method, url);
            ck_assert_msg(r.status != 404 || !strstr(r.body, "no such path"),
                          "%s %s: not routed", method, url);
            reply_free(&r);
            checked++;
        }
    }
    ck_assert_int_eq(checked, 16);
    cJSON_Delete(doc);
    free(text);
    free(path);
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
    char *out = NULL, *cmd;
    int rc;

    serve_enqueue_post();
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
    has(&r, "# TYPE stepq_store_lock_wait_longest_seconds gauge\n");
    has(&r, "stepq_store_lock_waits_ran_out_total 0\n"); /* serve alone */
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

/* The lines of a metrics text whose names start with one of the ledger's
 * counters: attempts, tokens, cost and the latency histogram. */
static char *
ledger_series(const struct reply *r)
{
    static const char *const names[] = {
        "stepq_attempts_total", "stepq_tokens_total", "stepq_cost_usd_total",
        "stepq_request_latency_seconds"};
    char *out = xcalloc(1, r->body_len + 1), *o = out;

    for (const char *l = r->body; *l != '\0';) {
        size_t len = strcspn(l, "\n");
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
            if (strncmp(l, names[k], strlen(names[k])) == 0) {
                memcpy(o, l, len + 1);
                o += len + 1;
                break;
            }
        }
        l += len + (l[len] == '\n');
    }
    return out;
}

/* Job 3's worker is killed (kill -9) while the mock, restarted on a
 * script that never answers, holds its request: its attempt stays in the
 * ledger without an outcome (in doubt), as after a crash. */
static void
leave_an_attempt_in_doubt(void)
{
    static const char hang[] = "{\"answers\":[{\"fault\":\"hang\"}]}";
    const char *args[] = {"--script", "hang.json", "--log", "mock.log", NULL};
    int64_t end = clock_mono_ms() + 10000;
    cJSON *job = NULL;
    pid_t w;

    free(tmpdir_write(e2e_dir, "hang.json", hang, strlen(hang)));
    ck_assert_int_eq(mockproc_stop(&e2e_mock), 0);
    mockproc_start(&e2e_mock, args);
    e2e_config(60, "\"timeout_s\": 60");
    e2e_enqueue_many(1, "\"tiers\":[\"free\"],");
    w = e2e_spawn_worker("--drain");
    while (job == NULL || e2e_hist(job, 0, 0) == NULL) {
        ck_assert_msg(clock_mono_ms() < end, "job 3 has no attempt");
        cJSON_Delete(job);
        poll(NULL, 0, 20);
        job = e2e_show(3);
    }
    cJSON_Delete(job);
    kill(w, SIGKILL);
    ck_assert_int_eq(e2e_wait_exit(w), 128 + SIGKILL);
}

/* A prune that removes every attempt of the night leaves the ledger's
 * counters as they were: a counter that dropped would be a reset to
 * Prometheus (rate() spikes). They count ended attempts only: one in
 * doubt (or in flight) has no series of its own (an outcome="none"
 * series would drop when it ended) and is in none of the sums. */
START_TEST(test_metrics_counters_kept_across_a_prune)
{
    struct server s;
    struct reply r = {0};
    struct run_result pr;
    char *before, *after;
    cJSON *o;

    e2e_enqueue_many(2, "\"tiers\":[\"free\"],");
    free(e2e_drain());
    leave_an_attempt_in_doubt();
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    req(s.port, "GET", "/metrics", AUTH, "", &r);
    ck_assert_int_eq(r.status, 200);
    has(&r, "stepq_jobs{state=\"running\"} 1\n");
    before = ledger_series(&r);
    reply_free(&r);
    ck_assert_ptr_nonnull(strstr(before, "stepq_attempts_total{tier=\"free\","
                                         "outcome=\"ok\",decision=\"commit\"}"
                                         " 2\n"));
    ck_assert_ptr_null(strstr(before, "outcome=\"none\""));
    ck_assert_ptr_nonnull(
        strstr(before, "stepq_request_latency_seconds_count{tier=\"free\"} 2"));
    ck_assert_int_eq(RUN(&pr, NULL, "prune", "--older-than", "0s", "--json"),
                     0);
    o = cJSON_Parse(pr.out);
    ck_assert_int_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(o, "pruned"), "attempts")
            ->valueint,
        2);
    cJSON_Delete(o);
    run_result_free(&pr);
    req(s.port, "GET", "/metrics", AUTH, "", &r);
    ck_assert_int_eq(r.status, 200);
    has(&r, "stepq_jobs{state=\"succeeded\"} 0\n"); /* pruned */
    ck_assert_str_eq(after = ledger_series(&r), before);
    reply_free(&r);
    free(before);
    free(after);
    serve_stop(&s);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("serve: operations");
    TCase *tc = tcase_create("ops");

    tcase_add_checked_fixture(tc, serve_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_python_example_client);
    tcase_add_test(tc, test_metrics_pass_promtool);
    tcase_add_test(tc, test_metrics_counters_kept_across_a_prune);
    tcase_add_test(tc, test_openapi_matches_the_routes);
    tcase_add_test(tc, test_a_peer_that_hangs_blocks_no_one);
    suite_add_tcase(s, tc);
    return s;
}

/* test_serve.c: `stepq serve`'s API end to end: the real binary serving
 * over loopback, a real worker parking a step against the real mock, and
 * every answer compared with what the CLI's --json prints for the same
 * store. Runs on SQLite and (test_serve_pg) on PostgreSQL. */
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
#include "common/file.h"
#include "tests/support/e2e.h"
#include "tests/support/httpcl.h"
#include "tests/support/servefix.h"

START_TEST(test_enqueue_list_show_cancel)
{
    struct server s;
    char path[64], id[16];
    int st = 0, b, c, d, e;
    cJSON *o;

    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    o = serve_call(&s, "POST", "/v1/jobs", JOB("a"), &st);
    ck_assert_int_eq(st, 201);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "id")->valueint, 1);
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(o, "duplicate")));
    cJSON_Delete(o);
    /* the same key again: the same job, 200 */
    o = serve_call(&s, "POST", "/v1/jobs", JOB("a"), &st);
    ck_assert_int_eq(st, 200);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "id")->valueint, 1);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(o, "duplicate")));
    cJSON_Delete(o);
    /* an array and JSON lines: one transaction each, an array answered */
    o = serve_call(&s, "POST", "/v1/jobs", "[" JOB("b") "," JOB("c") "]", &st);
    ck_assert_int_eq(st, 201);
    ck_assert_int_eq(cJSON_GetArraySize(o), 2);
    b = cJSON_GetArrayItem(o, 0)->child->valueint;
    c = cJSON_GetArrayItem(o, 1)->child->valueint;
    cJSON_Delete(o);
    o = serve_call(&s, "POST", "/v1/jobs", JOB("d") "\n" JOB("e") "\n", &st);
    ck_assert_int_eq(st, 201);
    d = cJSON_GetArrayItem(o, 0)->child->valueint;
    e = cJSON_GetArrayItem(o, 1)->child->valueint;
    ck_assert_int_gt(e, d);
    cJSON_Delete(o);
    /* one bad job of three: nothing is written, and the error says where */
    o = serve_call(&s, "POST", "/v1/jobs",
                   "[" JOB("f") ",{\"name\":\"x\",\"steps\":[]}," JOB("g") "]",
                   &st);
    ck_assert_int_eq(st, 400);
    ck_assert_str_eq(serve_error_code(o), "invalid_job");
    ck_assert_ptr_nonnull(
        strstr(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message")
                   ->valuestring,
               "job 1: steps"));
    cJSON_Delete(o);
    ck_assert_int_eq(run_job_count(e2e_db), 5);
    o = serve_call(&s, "POST", "/v1/jobs", "", &st);
    ck_assert_int_eq(st, 400);
    cJSON_Delete(o);

    /* pages */
    o = serve_call(&s, "GET", "/v1/jobs?limit=2", NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_int_eq(cJSON_GetArraySize(o), 2);
    cJSON_Delete(o);
    snprintf(path, sizeof(path), "/v1/jobs?limit=2&after=%d", d);
    o = serve_call(&s, "GET", path, NULL, &st);
    ck_assert_int_eq(cJSON_GetArraySize(o), 1);
    ck_assert_int_eq(cJSON_GetArrayItem(o, 0)->child->valueint, e);
    cJSON_Delete(o);
    o = serve_call(&s, "GET", "/v1/jobs?state=nope", NULL, &st);
    ck_assert_int_eq(st, 400);
    cJSON_Delete(o);
    o = serve_call(&s, "GET", "/v1/jobs?limit=0", NULL, &st);
    ck_assert_int_eq(st, 400);
    cJSON_Delete(o);
    serve_same_as_cli(&s, "/v1/jobs",
                      (const char *[]){"jobs", "list", "--json", NULL});
    snprintf(path, sizeof(path), "/v1/jobs/%d", c);
    snprintf(id, sizeof(id), "%d", c);
    serve_same_as_cli(&s, path,
                      (const char *[]){"jobs", "show", id, "--json", NULL});

    /* cancel: once, then a conflict; unknown ids are 404 */
    snprintf(path, sizeof(path), "/v1/jobs/%d/cancel", b);
    o = serve_call(&s, "POST", path, "", &st);
    ck_assert_int_eq(st, 200);
    ck_assert_str_eq(cJSON_GetObjectItem(o, "state")->valuestring, "cancelled");
    cJSON_Delete(o);
    o = serve_call(&s, "POST", path, "", &st);
    ck_assert_int_eq(st, 409);
    ck_assert_str_eq(serve_error_code(o), "conflict");
    cJSON_Delete(o);
    o = serve_call(&s, "GET", "/v1/jobs/9999", NULL, &st);
    ck_assert_int_eq(st, 404);
    cJSON_Delete(o);
    o = serve_call(&s, "GET", "/v1/jobs?state=cancelled", NULL, &st);
    ck_assert_int_eq(cJSON_GetArraySize(o), 1);
    cJSON_Delete(o);
    serve_same_as_cli(&s, "/v1/status",
                      (const char *[]){"status", "--json", NULL});
    serve_same_as_cli(&s, "/v1/tiers",
                      (const char *[]){"tiers", "--json", NULL});
    serve_stop(&s);
}
END_TEST

/* A body of several batches is written batch by batch in one
 * transaction: a bad line near its end, after two batches went in, leaves
 * nothing written; the good body goes in whole, answered in input order,
 * and again as duplicates. */
START_TEST(test_enqueue_many_batches)
{
    char *bad = job_lines(5000, 4999), *good = job_lines(5000, 0);
    struct server s;
    int st = 0;
    cJSON *o;

    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    o = serve_call(&s, "POST", "/v1/jobs", bad, &st);
    ck_assert_int_eq(st, 400);
    ck_assert_ptr_nonnull(
        strstr(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message")
                   ->valuestring,
               "line 4999: steps"));
    cJSON_Delete(o);
    ck_assert_int_eq(run_job_count(e2e_db), 0);
    for (int round = 0, first = 0; round < 2; round++) {
        o = serve_call(&s, "POST", "/v1/jobs", good, &st);
        ck_assert_int_eq(st, round == 0 ? 201 : 200);
        ck_assert_int_eq(cJSON_GetArraySize(o), 5000);
        /* PostgreSQL's sequence does not give back the ids of a rolled
         * back transaction: the first id is the store's, the rest follow */
        if (round == 0)
            first = cJSON_GetObjectItem(o->child, "id")->valueint;
        for (int i = 0; i < 5000; i += 1249) {
            cJSON *it = cJSON_GetArrayItem(o, i);
            ck_assert_int_eq(cJSON_GetObjectItem(it, "id")->valueint,
                             first + i);
            ck_assert(cJSON_IsBool(cJSON_GetObjectItem(it, "duplicate")) &&
                      cJSON_IsTrue(cJSON_GetObjectItem(it, "duplicate")) ==
                          (round == 1));
        }
        cJSON_Delete(o);
    }
    ck_assert_int_eq(run_job_count(e2e_db), 5000);
    serve_stop(&s);
    free(bad);
    free(good);
}
END_TEST

START_TEST(test_park_review_over_http)
{
    struct server s;
    cJSON *o, *st_json;
    int st = 0;

    serve_enqueue_post();
    free(e2e_drain());
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    serve_same_as_cli(&s, "/v1/park",
                      (const char *[]){"park", "list", "--json", NULL});
    serve_same_as_cli(&s, "/v1/park/1",
                      (const char *[]){"park", "show", "1", "--json", NULL});
    o = serve_call(&s, "GET", "/v1/park?state=all&reason=hard_quota", NULL,
                   &st);
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
        "{\"resolution\":\"skip\",\"by\":\"a\\u0000b\"}",
        "{\"resolution\":\"skip\",\"by\":\"ana\"} trailing",
        "{\"resolution\":\"skip\",\"by\":\"ana\",\"job_id\":1}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        o = serve_call(&s, "POST", "/v1/park/1/resolve", bad[i], &st);
        ck_assert_msg(st == 400, "%s: %d", bad[i], st);
        ck_assert_str_eq(serve_error_code(o), "bad_request");
        cJSON_Delete(o);
    }
    o = serve_call(&s, "POST", "/v1/park/9/resolve",
                   "{\"resolution\":\"skip\",\"by\":\"ana\"}", &st);
    ck_assert_int_eq(st, 404);
    cJSON_Delete(o);
    /* not_before and lift_wall go with a retry, a time as RFC 3339 */
    o = serve_call(&s, "POST", "/v1/park/1/resolve",
                   "{\"resolution\":\"skip\",\"by\":\"ana\","
                   "\"lift_wall\":true}",
                   &st);
    ck_assert_int_eq(st, 400);
    cJSON_Delete(o);
    o = serve_call(&s, "POST", "/v1/park/1/resolve",
                   "{\"resolution\":\"retry\",\"by\":\"ana\","
                   "\"not_before\":\"6h\"}",
                   &st);
    ck_assert_int_eq(st, 400);
    cJSON_Delete(o);
    st_json = e2e_status();
    ck_assert_int_eq(cJSON_GetObjectItem(st_json, "park_open")->valueint, 1);
    cJSON_Delete(st_json);

    o = serve_call(&s, "POST", "/v1/park/1/resolve",
                   "{\"resolution\":\"retry\",\"by\":\"ana\",\"note\":\"wall "
                   "over\",\"lift_wall\":true}",
                   &st);
    ck_assert_int_eq(st, 200);
    ck_assert_str_eq(cJSON_GetObjectItem(o, "resolution")->valuestring,
                     "retry");
    cJSON_Delete(o);
    o = serve_call(&s, "POST", "/v1/park/1/resolve",
                   "{\"resolution\":\"skip\",\"by\":\"bo\"}", &st);
    ck_assert_int_eq(st, 409);
    cJSON_Delete(o);
    o = serve_call(&s, "GET", "/v1/park/1", NULL, &st);
    ck_assert_str_eq(cJSON_GetObjectItem(o, "resolved_by")->valuestring, "ana");
    ck_assert_str_eq(cJSON_GetObjectItem(o, "note")->valuestring, "wall over");
    cJSON_Delete(o);
    /* bulk, as the CLI: done is per item; a retry's tier filter must be a
     * tier of the config, a skip's need not (a tier since removed) */
    o = serve_call(&s, "POST", "/v1/park/resolve",
                   "{\"resolution\":\"done\",\"by\":\"ana\"}", &st);
    ck_assert_int_eq(st, 400);
    cJSON_Delete(o);
    o = serve_call(
        &s, "POST", "/v1/park/resolve",
        "{\"resolution\":\"retry\",\"by\":\"ana\",\"tier\":\"nope\"}", &st);
    ck_assert_int_eq(st, 400);
    cJSON_Delete(o);
    o = serve_call(&s, "POST", "/v1/park/resolve",
                   "{\"resolution\":\"skip\",\"by\":\"ana\",\"tier\":\"nope\"}",
                   &st);
    ck_assert_int_eq(st, 200);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "resolved")->valueint, 0);
    cJSON_Delete(o);
    o = serve_call(
        &s, "POST", "/v1/park/resolve",
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

/* Requests refused before anything is read or written, with the status
 * and a part of the message; the last is a request that passes. */
static const struct refusal {
    const char *method, *path;
    int status;
    const char *message;
} refusals[] = {
    {"GET", "/nope", 404, NULL},
    {"DELETE", "/v1/jobs", 405, NULL},
    /* a misspelt, doubled or NUL-holding query parameter */
    {"GET", "/v1/park?job=1", 400, "unknown query parameter job"},
    {"GET", "/v1/jobs?limit=1&limit=2", 400, "given twice"},
    {"GET", "/v1/park?state=open%00x", 400, "holds a NUL"},
    {"GET", "/v1/jobs?limit=5", 200, NULL},
};

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
    /* a prefix of the token, or none, is not the token; spaces around it
     * are not part of it */
    req(s.port, "GET", "/v1/status", "Authorization: Bearer test-token\r\n", "",
        &r);
    ck_assert_int_eq(r.status, 401);
    reply_free(&r);
    req(s.port, "GET", "/v1/status", "Authorization: Bearer \r\n", "", &r);
    ck_assert_int_eq(r.status, 401);
    reply_free(&r);
    req(s.port, "GET", "/v1/status", "Authorization: bearer  " TOKEN " \r\n",
        "", &r);
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
    /* a write with the wrong token writes nothing */
    req(s.port, "POST", "/v1/jobs", "Authorization: Bearer " TOKEN "x\r\n",
        JOB("w"), &r);
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
    o = serve_call(&s, "POST", "/v1/jobs", big, &st);
    ck_assert_int_eq(st, 413);
    ck_assert_str_eq(serve_error_code(o), "too_large");
    cJSON_Delete(o);
    free(big);
    ck_assert_int_eq(run_job_count(e2e_db), 0);
    /* no length announced: a chunked body past the limit (1,024 bytes) is
     * read to its end and answered 413, nothing written; one that goes
     * on past twice the limit has its connection closed */
    for (int past = 0; past < 2; past++) {
        static const char head[] = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\n" AUTH
                                   "Transfer-Encoding: chunked\r\n\r\n";
        char chunk[600];
        int fd = cl_connect(s.port);
        memset(chunk, ' ', sizeof(chunk));
        memcpy(chunk, "200\r\n", 5);
        memcpy(chunk + 5 + 512, "\r\n", 2);
        ck_assert_int_eq(write(fd, head, strlen(head)), (ssize_t)strlen(head));
        for (int i = 0; i < (past ? 8 : 3); i++)
            (void)!write(fd, chunk, 5 + 512 + 2);
        (void)!write(fd, "0\r\n\r\n", 5);
        cl_recv(fd, 3000, &r);
        if (past) {
            ck_assert(r.eof || r.status == 0);
            ck_assert_int_ne(r.status, 201);
        } else {
            ck_assert_int_eq(r.status, 413);
            ck_assert_ptr_nonnull(strstr(r.body, "too_large"));
        }
        reply_free(&r);
        close(fd);
    }
    ck_assert_int_eq(run_job_count(e2e_db), 0);
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        const struct refusal *f = &refusals[i];
        const cJSON *e;

        o = serve_call(&s, f->method, f->path, NULL, &st);
        ck_assert_msg(st == f->status, "%s %s: %d", f->method, f->path, st);
        e = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message");
        ck_assert_msg(f->message == NULL ||
                          (cJSON_IsString(e) &&
                           strstr(e->valuestring, f->message) != NULL),
                      "%s %s: no \"%s\"", f->method, f->path, f->message);
        cJSON_Delete(o);
    }
    o = serve_call(&s, "GET", "/healthz", NULL, &st);
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
    /* a page on a name rebound to 127.0.0.1 sends that name as Host: it
     * gets nothing without a token, not even a read */
    {
        int fd = cl_connect(s.port);
        static const char get[] = "GET /v1/status HTTP/1.1\r\n"
                                  "Host: evil.example:8377\r\n\r\n";
        ck_assert_int_eq(write(fd, get, strlen(get)), (ssize_t)strlen(get));
        cl_recv(fd, 3000, &r);
        ck_assert_int_eq(r.status, 403);
        reply_free(&r);
        close(fd);
    }
    serve_stop(&s);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("serve");
    TCase *tc = tcase_create("api");

    tcase_add_checked_fixture(tc, serve_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_enqueue_list_show_cancel);
    tcase_add_test(tc, test_enqueue_many_batches);
    tcase_add_test(tc, test_park_review_over_http);
    tcase_add_test(tc, test_token_origin_and_size);
    tcase_add_test(tc, test_refuses_to_start_unsafely);
    suite_add_tcase(s, tc);
    return s;
}

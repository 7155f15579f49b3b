/* test_serve_auth.c: named operators of `stepq serve` end to end: the
 * real binary over loopback on a real store, operators made with the
 * CLI. Roles (a viewer cannot resolve, a resolver cannot enqueue), a
 * "by" that is not the token's operator refused, two operators resolving
 * one item at once (one wins, the other is told who), audit rows for
 * each kind of write (the API's and the CLI's, jobs retry too), a
 * rotated or removed token refused at once, failed logins answered 429 per
 * address while the server goes on serving, and the shared token's mode. Runs
 * on SQLite and (test_serve_auth_pg) on PostgreSQL. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/e2e.h"
#include "tests/support/httpcl.h"
#include "tests/support/servefix.h"

#define RESOLVE_SKIP "{\"resolution\":\"skip\"}"

/* call sends one request with token tok (NULL: none) and returns its
 * parsed body (NULL unless JSON); *status gets the status. */
static cJSON *
call(const struct server *s, const char *tok, const char *method,
     const char *path, const char *body, int *status)
{
    char auth[160] = "";
    struct reply r = {0};
    cJSON *o;

    if (tok != NULL)
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", tok);
    req(s->port, method, path, auth, body ? body : "", &r);
    *status = r.status;
    o = r.body ? cJSON_ParseWithLength(r.body, r.body_len) : NULL;
    reply_free(&r);
    return o;
}

/* expect asserts the status of one call, and its error code if given. */
static void
expect(const struct server *s, const char *tok, const char *method,
       const char *path, const char *body, int status, const char *code)
{
    int st = 0;
    cJSON *o = call(s, tok, method, path, body, &st);

    ck_assert_msg(st == status, "%s %s: %d, not %d", method, path, st, status);
    if (code != NULL)
        ck_assert_str_eq(serve_error_code(o), code);
    cJSON_Delete(o);
}

/* park_one parks one http step on the mock's daily wall (item 1, job 1). */
static void
park_one(void)
{
    serve_enqueue_post();
    free(e2e_drain());
}

/* item_state is park item 1's state ("open", "resolved") as the CLI
 * shows it; copies resolved_by into by (len bytes; "" if none). */
static void
item_state(char *state, char *by, size_t len)
{
    struct run_result r;
    cJSON *o;

    ck_assert_int_eq(RUN_ARGS(&r, "park", "show", "1", "--json"), 0);
    o = cJSON_Parse(r.out);
    snprintf(state, len, "%s", e2e_str(o, "state"));
    snprintf(by, len, "%s",
             cJSON_IsString(cJSON_GetObjectItem(o, "resolved_by"))
                 ? e2e_str(o, "resolved_by")
                 : "");
    cJSON_Delete(o);
    run_result_free(&r);
}

START_TEST(test_roles_and_by)
{
    char viewer[80], resolver[80], admin[80], state[64], by[64];
    struct server s;
    int st = 0;
    cJSON *o;

    park_one();
    serve_operator_add("vera", "viewer", viewer, sizeof(viewer));
    serve_operator_add("rita", "resolver", resolver, sizeof(resolver));
    serve_operator_add("adam", "admin", admin, sizeof(admin));
    /* started with the shared token set: once operators exist it is
     * not accepted, and neither is no token */
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    expect(&s, TOKEN, "GET", "/v1/status", NULL, 401, "unauthorized");
    expect(&s, NULL, "GET", "/v1/status", NULL, 401, "unauthorized");
    o = call(&s, viewer, "GET", "/v1/me", NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_str_eq(e2e_str(o, "name"), "vera");
    ck_assert_str_eq(e2e_str(o, "role"), "viewer");
    ck_assert_str_eq(e2e_str(o, "mode"), "operators");
    cJSON_Delete(o);
    /* a viewer reads, and writes nothing */
    expect(&s, viewer, "GET", "/v1/park/1", NULL, 200, NULL);
    expect(&s, viewer, "POST", "/v1/park/1/resolve", RESOLVE_SKIP, 403,
           "forbidden");
    expect(&s, viewer, "POST", "/v1/park/resolve", RESOLVE_SKIP, 403,
           "forbidden");
    expect(&s, viewer, "POST", "/v1/jobs/1/cancel", "", 403, "forbidden");
    expect(&s, viewer, "POST", "/v1/jobs/1/retry", "{}", 403, "forbidden");
    /* a resolver enqueues nothing; a by that is not its name is refused */
    expect(&s, resolver, "POST", "/v1/jobs", JOB("r"), 403, "forbidden");
    expect(&s, resolver, "POST", "/v1/park/1/resolve",
           "{\"resolution\":\"skip\",\"by\":\"the-ceo\"}", 403, "by_mismatch");
    expect(&s, resolver, "POST", "/v1/jobs/1/retry", "{\"by\":\"the-ceo\"}",
           403, "by_mismatch");
    item_state(state, by, sizeof(state));
    ck_assert_str_eq(state, "open");
    ck_assert_int_eq(run_job_count(e2e_db), 1);
    /* its own name, or none, is recorded as its name */
    expect(&s, resolver, "POST", "/v1/park/1/resolve",
           "{\"resolution\":\"skip\",\"note\":\"wall\"}", 200, NULL);
    item_state(state, by, sizeof(state));
    ck_assert_str_eq(by, "rita");
    /* an admin enqueues */
    expect(&s, admin, "POST", "/v1/jobs", JOB("a"), 201, NULL);
    serve_stop(&s);
}
END_TEST

/* row asserts that audit row i of arr is action by who from source, of
 * job and item (0: none). */
static void
row(const cJSON *arr, int i, const char *action, const char *who,
    const char *source, int job, int item)
{
    const cJSON *r = cJSON_GetArrayItem(arr, i);

    ck_assert_msg(r != NULL, "no audit row %d", i);
    ck_assert_str_eq(e2e_str(r, "action"), action);
    ck_assert_str_eq(e2e_str(r, "who"), who);
    ck_assert_str_eq(e2e_str(r, "source"), source);
    if (job > 0)
        ck_assert_int_eq(cJSON_GetObjectItem(r, "job_id")->valueint, job);
    else
        ck_assert(cJSON_IsNull(cJSON_GetObjectItem(r, "job_id")));
    if (item > 0)
        ck_assert_int_eq(cJSON_GetObjectItem(r, "park_id")->valueint, item);
    ck_assert(cJSON_IsObject(cJSON_GetObjectItem(r, "detail")));
}

START_TEST(test_audit_rows_for_each_write)
{
    char admin[80], os_user[64];
    struct run_result r;
    struct server s;
    cJSON *api, *cli, *o;
    int st = 0;

    park_one(); /* enqueued through the CLI: the first row */
    snprintf(os_user, sizeof(os_user), "%s", getpwuid(getuid())->pw_name);
    serve_operator_add("adam", "admin", admin, sizeof(admin));
    ck_assert_int_eq(serve_start(&s, NULL, NULL), -1);
    expect(&s, admin, "POST", "/v1/park/1/resolve",
           "{\"resolution\":\"retry\",\"by\":\"adam\"}", 200, NULL);
    expect(&s, admin, "POST", "/v1/jobs", JOB("a"), 201, NULL);
    expect(&s, admin, "POST", "/v1/jobs/2/cancel", "", 200, NULL);
    expect(&s, admin, "POST", "/v1/park/resolve", RESOLVE_SKIP, 200, NULL);
    ck_assert_int_eq(RUN_ARGS(&r, "jobs", "cancel", "1"), 0);
    run_result_free(&r);
    expect(&s, admin, "POST", "/v1/jobs/1/retry", "{}", 200, NULL);
    ck_assert_int_eq(RUN_ARGS(&r, "jobs", "retry", "2"), 0);
    run_result_free(&r);
    ck_assert_int_eq(RUN_ARGS(&r, "operators", "rotate", "adam"), 0);
    run_result_free(&r);
    ck_assert_int_eq(RUN_ARGS(&r, "operators", "remove", "adam"), 0);
    run_result_free(&r);

    ck_assert_int_eq(RUN_ARGS(&r, "audit", "--json"), 0);
    cli = cJSON_Parse(r.out);
    run_result_free(&r);
    ck_assert_int_eq(cJSON_GetArraySize(cli), 11);
    row(cli, 0, "enqueue", os_user, "cli", 1, 0);
    row(cli, 1, "operator.add", os_user, "cli", 0, 0);
    row(cli, 2, "park.resolve", "adam", "127.0.0.1", 1, 1);
    row(cli, 3, "enqueue", "adam", "127.0.0.1", 2, 0);
    row(cli, 4, "job.cancel", "adam", "127.0.0.1", 2, 0);
    row(cli, 5, "park.resolve_all", "adam", "127.0.0.1", 0, 0);
    row(cli, 6, "job.cancel", os_user, "cli", 1, 0);
    row(cli, 7, "job.retry", "adam", "127.0.0.1", 1, 0);
    row(cli, 8, "job.retry", os_user, "cli", 2, 0);
    row(cli, 9, "operator.rotate", os_user, "cli", 0, 0);
    row(cli, 10, "operator.remove", os_user, "cli", 0, 0);
    ck_assert_str_eq(
        e2e_str(cJSON_GetObjectItem(cJSON_GetArrayItem(cli, 2), "detail"),
                "resolution"),
        "retry");
    /* no operator left: the server is back to the shared token, which
     * this one was started without: --no-auth is not asked either */
    serve_stop(&s);
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    api = serve_call(&s, "GET", "/v1/audit?since=1h", NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_msg(cJSON_Compare(api, cli, true), "GET /v1/audit differs");
    /* the job and the item show their own */
    o = serve_call(&s, "GET", "/v1/park/1", NULL, &st);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "audit")), 1);
    cJSON_Delete(o);
    o = serve_call(&s, "GET", "/v1/jobs/1", NULL, &st);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "audit")), 4);
    cJSON_Delete(o);
    expect(&s, TOKEN, "GET", "/v1/audit?since=yesterday", NULL, 400,
           "bad_request");
    serve_stop(&s);
    cJSON_Delete(api);
    cJSON_Delete(cli);
}
END_TEST

/* Both requests are sent before either is answered: the server takes
 * them one at a time, so one resolution wins and the other is told who
 * won. */
START_TEST(test_two_operators_resolve_at_once)
{
    char ana[80], bob[80], head[256];
    struct reply ra = {0}, rb = {0};
    struct server s;
    int fa, fb;

    park_one();
    serve_operator_add("ana", "resolver", ana, sizeof(ana));
    serve_operator_add("bob", "resolver", bob, sizeof(bob));
    ck_assert_int_eq(serve_start(&s, NULL, NULL), -1);
    fa = cl_connect(s.port);
    fb = cl_connect(s.port);
    snprintf(head, sizeof(head), "Authorization: Bearer %s\r\n", ana);
    cl_send(fa, "POST", "/v1/park/1/resolve", head, RESOLVE_SKIP);
    snprintf(head, sizeof(head), "Authorization: Bearer %s\r\n", bob);
    cl_send(fb, "POST", "/v1/park/1/resolve", head,
            "{\"resolution\":\"retry\"}");
    cl_recv(fa, 5000, &ra);
    cl_recv(fb, 5000, &rb);
    close(fa);
    close(fb);
    ck_assert_msg((ra.status == 200) != (rb.status == 200), "%d and %d",
                  ra.status, rb.status);
    {
        struct reply *lost = ra.status == 200 ? &rb : &ra;
        const char *winner = ra.status == 200 ? "by ana (skip)"
                                              : "by bob "
                                                "(retry)";
        cJSON *o = body_json(lost);
        ck_assert_int_eq(lost->status, 409);
        ck_assert_ptr_nonnull(strstr(jstr(o, "error.message"), winner));
        cJSON_Delete(o);
    }
    reply_free(&ra);
    reply_free(&rb);
    serve_stop(&s);
}
END_TEST

START_TEST(test_rotate_and_remove_refuse_at_once)
{
    char old[80], fresh[80], cmd[512], *hash = NULL;
    struct run_result r;
    struct server s;
    cJSON *o;

    serve_operator_add("ana", "viewer", old, sizeof(old));
    ck_assert_int_eq(serve_start(&s, NULL, NULL), -1);
    expect(&s, old, "GET", "/v1/me", NULL, 200, NULL);
    ck_assert_int_eq(RUN_ARGS(&r, "operators", "rotate", "ana", "--json"), 0);
    o = cJSON_Parse(r.out);
    snprintf(fresh, sizeof(fresh), "%s", e2e_str(o, "token"));
    cJSON_Delete(o);
    run_result_free(&r);
    ck_assert_str_ne(old, fresh);
    expect(&s, old, "GET", "/v1/me", NULL, 401, "unauthorized");
    expect(&s, fresh, "GET", "/v1/me", NULL, 200, NULL);
    /* neither the lists nor the audit trail show a token or its hash */
    snprintf(cmd, sizeof(cmd), "printf %%s '%s' | sha256sum", fresh);
    ck_assert_int_eq(run_sh(cmd, &hash), 0);
    hash[64] = '\0';
    if (strncmp(e2e_db, "postgres", 8) != 0) { /* the hash is what is kept */
        char *kept = NULL;
        snprintf(cmd, sizeof(cmd),
                 "sqlite3 '%s' 'SELECT token_sha256 FROM operators'", e2e_db);
        ck_assert_int_eq(run_sh(cmd, &kept), 0);
        ck_assert_ptr_nonnull(strstr(kept, hash));
        free(kept);
    }
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(RUN_ARGS(&r, i == 2 ? "audit" : "operators",
                                  i == 2 ? "--json" : "list",
                                  i == 1 ? "--json" : NULL),
                         0);
        ck_assert_ptr_null(strstr(r.out, fresh + 6));
        ck_assert_ptr_null(strstr(r.out, hash));
        ck_assert_ptr_nonnull(strstr(r.out, "ana"));
        run_result_free(&r);
    }
    free(hash);
    ck_assert_int_eq(RUN_ARGS(&r, "operators", "remove", "ana"), 0);
    run_result_free(&r);
    expect(&s, fresh, "GET", "/v1/me", NULL, 401, "unauthorized");
    serve_stop(&s);
}
END_TEST

/* After SERVE_GATE_FAILS (10) wrong tokens in a minute, the address gets
 * 429 with Retry-After, a right token included; the server goes on
 * answering meanwhile (the page, which needs no token). */
START_TEST(test_failed_logins_slowed)
{
    char tok[80];
    struct reply r = {0};
    struct server s;
    long after;

    serve_operator_add("ana", "viewer", tok, sizeof(tok));
    ck_assert_int_eq(serve_start(&s, NULL, NULL), -1);
    for (int i = 0; i < 10; i++)
        expect(&s, "stepq_wrong", "GET", "/v1/status", NULL, 401,
               "unauthorized");
    req(s.port, "GET", "/v1/me", "Authorization: Bearer stepq_wrong\r\n", "",
        &r);
    ck_assert_int_eq(r.status, 429);
    ck_assert_ptr_nonnull(hdr(&r, "Retry-After"));
    after = strtol(hdr(&r, "Retry-After"), NULL, 10);
    ck_assert(after >= 1 && after <= 60);
    reply_free(&r);
    expect(&s, tok, "GET", "/v1/me", NULL, 429, "too_many_failures");
    req(s.port, "GET", "/", "", "", &r);
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
    serve_stop(&s);
}
END_TEST

/* Without operators, the shared token may do everything, under the name
 * "token" in the audit trail. */
START_TEST(test_shared_token_mode)
{
    struct server s;
    int st = 0;
    cJSON *o;

    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    o = serve_call(&s, "GET", "/v1/me", NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(o, "name")));
    ck_assert_str_eq(e2e_str(o, "role"), "admin");
    ck_assert_str_eq(e2e_str(o, "mode"), "token");
    cJSON_Delete(o);
    expect(&s, TOKEN, "POST", "/v1/jobs", JOB("t"), 201, NULL);
    o = serve_call(&s, "GET", "/v1/audit", NULL, &st);
    row(o, 0, "enqueue", "token", "127.0.0.1", 1, 0);
    cJSON_Delete(o);
    serve_stop(&s);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("serve: operators");
    TCase *tc = tcase_create("operators");

    tcase_add_checked_fixture(tc, serve_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_roles_and_by);
    tcase_add_test(tc, test_audit_rows_for_each_write);
    tcase_add_test(tc, test_two_operators_resolve_at_once);
    tcase_add_test(tc, test_rotate_and_remove_refuse_at_once);
    tcase_add_test(tc, test_failed_logins_slowed);
    tcase_add_test(tc, test_shared_token_mode);
    suite_add_tcase(s, tc);
    return s;
}

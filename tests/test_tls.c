/* test_tls.c: TLS with real parts. A throwaway CA made with the openssl
 * CLI, Debian's nginx terminating TLS 1.3 (an HTTP/1.1 listener, an
 * `ssl http2` one, and one that requires client certificates) in front of
 * the real `stepq mock`, and the real `stepq work` and `stepq tiers
 * --check` reaching it through tiers whose ca_file, client_cert and
 * client_key point at those files (tests/support/tlsenv.h). */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "tests/support/e2e.h"
#include "tests/support/servefix.h"
#include "tests/support/tlsenv.h"

#define TIER(name) "\"tiers\":[\"" name "\"],"

static struct tlsenv tls;

/* The mock answers every chat request (no script); nginx closes a client
 * connection after 10 answers, so the worker has to reconnect. */
static void
setup(void)
{
    const char *args[] = {"--log", "mock.log", NULL};

    e2e_setup();
    tlsenv_certs(e2e_dir);
    mockproc_start(&e2e_mock, args);
    tlsenv_start(&tls, e2e_dir, e2e_mock.port, 10);
}

static void
teardown(void)
{
    tlsenv_stop(&tls);
    e2e_teardown();
}

/* Writes stepq.json with tiers h1, h2 (the HTTP/2 listener) and mtls,
 * each with its fields (JSON members, may be "") spliced in, and runs
 * `stepq init`. */
static void
config(const char *h1, const char *h2, const char *mtls)
{
    char cfg[4096];
    int n = snprintf(
        cfg, sizeof(cfg),
        "{\"worker\": {\"lease_s\": 5},"
        " \"policy\": {\"backoff_base_s\": 0.05, \"backoff_cap_s\": 0.2},"
        " \"tiers\": ["
        "{\"name\": \"h1\", \"base_url\": \"https://127.0.0.1:%d/v1\","
        " \"model\": \"m\"%s%s},"
        "{\"name\": \"h2\", \"base_url\": \"https://localhost:%d/v1\","
        " \"model\": \"m\"%s%s},"
        "{\"name\": \"mtls\", \"base_url\": \"https://127.0.0.1:%d/v1\","
        " \"model\": \"m\"%s%s}]}",
        tls.port_h1, h1[0] ? ", " : "", h1, tls.port_h2, h2[0] ? ", " : "", h2,
        tls.port_mtls, mtls[0] ? ", " : "", mtls);

    ck_assert_int_lt(n, (int)sizeof(cfg));
    free(tmpdir_write(e2e_dir, "stepq.json", cfg, strlen(cfg)));
    e2e_init();
}

#define CA       "\"ca_file\": \"ca.pem\""
#define OTHER_CA "\"ca_file\": \"other-ca.pem\""
#define CLIENT                                                                 \
    CA ", \"client_cert\": \"client.pem\", \"client_key\": \"client.key\""

static void
drain(const char *concurrency)
{
    struct run_result r;

    ck_assert_msg(
        RUN(&r, NULL, "work", "--drain", "--concurrency", concurrency) == 0,
        "work exited %d: %s", r.status, r.err);
    run_result_free(&r);
}

/* Job id shown, as text for messages and checks. */
static char *
attempt_text(int id)
{
    cJSON *shown = e2e_show(id);
    char *s = cJSON_PrintUnformatted(shown);

    cJSON_Delete(shown);
    return s;
}

/* The connections nginx logged (access.log), those that resumed a TLS
 * session, and the requests. */
static void
nginx_counts(int *conns, int *resumed, int *requests)
{
    char *text = NULL, *line, *save = NULL;
    size_t len = 0;
    long seen[1024];
    int n = 0;

    *resumed = *requests = 0;
    ck_assert_int_eq(file_read_all("access.log", 1 << 26, &text, &len), 0);
    for (line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        long conn = strtol(line, NULL, 10);
        int k = 0;

        (*requests)++;
        while (k < n && seen[k] != conn)
            k++;
        if (k < n)
            continue; /* each connection counted at its first request */
        ck_assert_int_lt(n, 1024);
        seen[n++] = conn;
        if (strstr(line, " r ") != NULL)
            (*resumed)++;
    }
    *conns = n;
    free(text);
}

START_TEST(test_jobs_succeed_over_http1_and_http2_listeners)
{
    int conns, resumed, requests;

    config(CA, CA, "");
    e2e_enqueue_many(100, TIER("h1"));
    e2e_enqueue_many(100, TIER("h2"));
    drain("16");
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 200);
    nginx_counts(&conns, &resumed, &requests);
    ck_assert_int_eq(requests, 200);
    /* 10 answers a connection: at least 20 connections; kept alive and
     * reused otherwise (at most one more per job slot and tier). */
    ck_assert_msg(conns >= 20 && conns <= 20 + 2 * 16, "%d connections", conns);
    /* Reconnects resume the TLS session the client kept (shared by all
     * of its calls; each call's own cache would die with it): all but
     * the first connections, made at once before any session existed. */
    ck_assert_msg(resumed >= 1 && resumed >= (conns - 32) / 2,
                  "%d of %d connections resumed", resumed, conns);
}
END_TEST

/* A certificate the tier's CAs do not trust is a wall, met once and not
 * retried: nothing the endpoint does will change it. Fixing the tier's
 * CA lifts it. */
START_TEST(test_wrong_ca_fails_with_a_certificate_error)
{
    cJSON *job, *t;
    char *a;

    config(OTHER_CA, "", "");
    e2e_enqueue_many(1, TIER("h1"));
    drain("4"); /* ends: the step is not retried */
    ck_assert_int_eq(e2e_count(NULL, "failed"), 1);
    a = attempt_text(1);
    ck_assert_msg(strstr(a, "\"outcome\":\"hard_quota\"") != NULL &&
                      strstr(a, "\"reason\":\"tls_certificate\"") != NULL &&
                      strstr(a, "certificate") != NULL,
                  "%s", a);
    free(a);
    job = e2e_show(1);
    ck_assert_int_eq(
        cJSON_GetArraySize(cJSON_GetObjectItem(e2e_step_of(job, 0), "history")),
        1);
    cJSON_Delete(job);
    t = e2e_tier("h1");
    ck_assert_str_eq(e2e_str(t, "exhausted_reason"), "tls_certificate");
    cJSON_Delete(t);
    config(CA, "", ""); /* the right CA: the wall is lifted */
    e2e_enqueue_many(1, TIER("h1"));
    drain("4");
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 1);
}
END_TEST

START_TEST(test_system_cas_do_not_trust_a_private_ca)
{
    char *a;

    config("", "", ""); /* verification is on by default */
    e2e_enqueue_many(1, TIER("h1"));
    drain("4");
    ck_assert_int_eq(e2e_count(NULL, "failed"), 1);
    a = attempt_text(1);
    ck_assert_msg(strstr(a, "certificate") != NULL, "%s", a);
    free(a);
    ck_assert_int_eq(e2e_sent_to(NULL, "/"), 0);
}
END_TEST

START_TEST(test_client_certificate_is_sent_when_configured)
{
    config(CA, "", CLIENT);
    e2e_enqueue_many(20, TIER("mtls"));
    drain("4");
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 20);
}
END_TEST

START_TEST(test_missing_client_certificate_fails_clearly)
{
    char *a;

    config(CA, "", CA);
    e2e_enqueue_many(1, TIER("mtls"));
    drain("4");
    ck_assert_int_eq(e2e_count(NULL, "failed"), 1);
    a = attempt_text(1);
    ck_assert_msg(strstr(a, "No required SSL certificate") != NULL, "%s", a);
    free(a);
    ck_assert_int_eq(e2e_sent_to(NULL, "/"), 0);
}
END_TEST

/* Many new TLS connections at once, through the admission queue: all of
 * them succeed, none is failed by a connect timeout of our making. */
START_TEST(test_burst_of_new_connections_succeeds)
{
    config(CA, "", "");
    e2e_enqueue_many(600, TIER("h1"));
    drain("600");
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 600);
}
END_TEST

START_TEST(test_tiers_check_reaches_through_tls)
{
    struct run_result r;
    cJSON *arr;

    config(CA, CA, OTHER_CA);
    ck_assert_int_eq(RUN(&r, NULL, "tiers", "--check", "--json"), 1);
    arr = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(arr);
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 0), "result"),
                     "reachable");
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 1), "result"),
                     "reachable");
    ck_assert_str_eq(e2e_str(cJSON_GetArrayItem(arr, 2), "result"),
                     "certificate_refused");
    ck_assert_msg(strstr(e2e_str(cJSON_GetArrayItem(arr, 2), "error"),
                         "certificate") != NULL,
                  "%s", r.out);
    cJSON_Delete(arr);
    run_result_free(&r);
}
END_TEST

START_TEST(test_dry_run_names_the_tls_files)
{
    struct run_result r;
    cJSON *arr;
    const cJSON *files;

    config(CA, "", CLIENT);
    ck_assert_int_eq(RUN(&r, NULL, "tiers", "--dry-run", "--json"), 0);
    arr = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(arr);
    ck_assert(
        cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "tls")));
    files = cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 2), "tls");
    ck_assert_ptr_nonnull(strstr(e2e_str(files, "client_key"), "client.key"));
    ck_assert_ptr_null(cJSON_GetObjectItem(files, "ca_path"));
    cJSON_Delete(arr);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "tiers", "--dry-run"), 0);
    ck_assert_msg(strstr(r.out, "# tls client_cert: ") != NULL, "%s", r.out);
    run_result_free(&r);
}
END_TEST

/* A path that is not there is refused when the config is read, naming
 * the field (exit 2). */
START_TEST(test_config_refuses_unreadable_tls_files)
{
    static const struct {
        const char *fields, *want;
    } rows[] = {
        {"\"ca_file\": \"nope.pem\"", "tiers[0].ca_file: cannot read"},
        {"\"ca_path\": \"ca.pem\"", "tiers[0].ca_path: cannot read"},
        {"\"ca_file\": \".\"", "tiers[0].ca_file: cannot read"},
        {"\"client_cert\": \"nope.pem\"", "tiers[0].client_cert: cannot read"},
        {"\"client_key\": \"client.key\"",
         "tiers[0].client_key: needs client_cert"},
    };
    struct run_result r;
    char cfg[512];

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        snprintf(cfg, sizeof(cfg),
                 "{\"tiers\": [{\"name\": \"a\", \"base_url\": "
                 "\"https://127.0.0.1:1/v1\", \"model\": \"m\", %s}]}",
                 rows[i].fields);
        free(tmpdir_write(e2e_dir, "stepq.json", cfg, strlen(cfg)));
        ck_assert_int_eq(RUN(&r, NULL, "tiers", "--check"), 2);
        ck_assert_msg(strstr(r.err, rows[i].want) != NULL, "%s", r.err);
        run_result_free(&r);
    }
}
END_TEST

/* ---- stepq serve and TLS ------------------------------------------------ */

static void
serve_tls_setup(void)
{
    e2e_setup();
    e2e_init();
    tlsenv_certs(e2e_dir);
}

/* curl_status runs curl with args and returns the HTTP status it got
 * (0: no answer, such as a failed handshake); *out gets its output. */
static int
curl_status(const char *args, char **out)
{
    char cmd[1024];
    int status = 0;

    snprintf(cmd, sizeof(cmd),
             "curl -sS -o body.out -w '%%{http_code}' --max-time 10 %s; "
             "echo; cat body.out 2>/dev/null",
             args);
    (void)run_sh(cmd, out);
    (void)sscanf(*out, "%d", &status);
    return status;
}

START_TEST(test_serve_answers_https_with_its_certificate)
{
    const char *args[] = {"--tls-cert", "server.pem", "--tls-key", "server.key",
                          NULL};
    struct server s;
    char cmd[512], *out = NULL;

    ck_assert_int_eq(serve_start(&s, TOKEN, args), -1);
    /* a real handshake, the server's certificate checked against the CA */
    snprintf(cmd, sizeof(cmd),
             "--cacert ca.pem -H 'Authorization: Bearer " TOKEN
             "' https://127.0.0.1:%d/v1/me",
             s.port);
    ck_assert_int_eq(curl_status(cmd, &out), 200);
    ck_assert_ptr_nonnull(strstr(out, "\"mode\":\"token\""));
    free(out);
    /* a CA that signed nothing here: the handshake fails */
    snprintf(cmd, sizeof(cmd), "--cacert other-ca.pem https://127.0.0.1:%d/",
             s.port);
    ck_assert_int_eq(curl_status(cmd, &out), 0);
    free(out);
    /* plain HTTP on the TLS port gets no answer */
    snprintf(cmd, sizeof(cmd), "http://127.0.0.1:%d/healthz", s.port);
    ck_assert_int_ne(curl_status(cmd, &out), 200);
    free(out);
    serve_stop(&s);
}
END_TEST

START_TEST(test_serve_refuses_bad_tls_options)
{
    const char *only_cert[] = {"--tls-cert", "server.pem", NULL};
    const char *missing[] = {"--tls-cert", "nope.pem", "--tls-key",
                             "server.key", NULL};
    const char *not_pem[] = {"--tls-cert", "plain.txt", "--tls-key",
                             "server.key", NULL};
    const char *wrong_key[] = {"--tls-cert", "server.pem", "--tls-key",
                               "client.key", NULL};
    struct server s;

    free(tmpdir_write(e2e_dir, "plain.txt", "hello\n", 6));
    ck_assert_int_eq(serve_start(&s, TOKEN, only_cert), 2);
    ck_assert_int_eq(serve_start(&s, TOKEN, missing), 2);
    ck_assert_int_eq(serve_start(&s, TOKEN, not_pem), 2);
    ck_assert_int_eq(serve_start(&s, TOKEN, wrong_key), 1);
}
END_TEST

/* The reverse-proxy recipe of docs/reference.md ("TLS in front of
 * serve"): nginx terminates TLS and passes Host on, so a page's write
 * through it passes the same-origin check. */
START_TEST(test_serve_behind_nginx_recipe)
{
    static const char recipe[] = "  proxy_set_header Host $http_host;\n";
    struct tlsenv t = {0};
    struct server s;
    char cmd[768], *out = NULL;

    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    tlsenv_start_with(&t, e2e_dir, s.port, 100, recipe);
    snprintf(cmd, sizeof(cmd),
             "--cacert ca.pem -H 'Authorization: Bearer " TOKEN "'"
             " -H 'Origin: https://127.0.0.1:%d' -H 'Sec-Fetch-Site: "
             "same-origin' --data-binary @job.json"
             " https://127.0.0.1:%d/v1/jobs",
             t.port_h1, t.port_h1);
    free(tmpdir_write(e2e_dir, "job.json", JOB("p"), strlen(JOB("p"))));
    ck_assert_int_eq(curl_status(cmd, &out), 201);
    free(out);
    snprintf(cmd, sizeof(cmd),
             "--cacert ca.pem -H 'Authorization: Bearer " TOKEN "'"
             " https://127.0.0.1:%d/v1/audit",
             t.port_h1);
    ck_assert_int_eq(curl_status(cmd, &out), 200);
    ck_assert_ptr_nonnull(strstr(out, "\"action\":\"enqueue\""));
    free(out);
    tlsenv_stop(&t);
    serve_stop(&s);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("nginx");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_jobs_succeed_over_http1_and_http2_listeners);
    tcase_add_test(tc, test_wrong_ca_fails_with_a_certificate_error);
    tcase_add_test(tc, test_system_cas_do_not_trust_a_private_ca);
    tcase_add_test(tc, test_client_certificate_is_sent_when_configured);
    tcase_add_test(tc, test_missing_client_certificate_fails_clearly);
    tcase_add_test(tc, test_burst_of_new_connections_succeeds);
    tcase_add_test(tc, test_tiers_check_reaches_through_tls);
    tcase_add_test(tc, test_config_refuses_unreadable_tls_files);
    tcase_add_test(tc, test_dry_run_names_the_tls_files);
    suite_add_tcase(s, tc);
    tc = tcase_create("serve");
    tcase_add_checked_fixture(tc, serve_tls_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_serve_answers_https_with_its_certificate);
    tcase_add_test(tc, test_serve_refuses_bad_tls_options);
    tcase_add_test(tc, test_serve_behind_nginx_recipe);
    suite_add_tcase(s, tc);
    return s;
}

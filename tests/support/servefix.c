/* servefix.c: `stepq serve` started and called as the suites need it
 * (servefix.h). */
#include "tests/support/servefix.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/e2e.h"
#include "tests/support/httpcl.h"
#include "tests/support/support.h"

/* Starts `stepq serve --listen 127.0.0.1:0 ARGS` on e2e_db with $STEPQ_TOKEN
 * set to token (NULL: unset) and reads its "listening" line. Returns the
 * exit code instead when it exits first (port 0 then). */
int
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
void
serve_stop(struct server *s)
{
    ck_assert_int_eq(kill(s->pid, SIGTERM), 0);
    ck_assert_int_eq(e2e_wait_exit(s->pid), 0);
}

/* One request; its parsed body (NULL unless JSON) and *status. */
cJSON *
serve_call(const struct server *s, const char *method, const char *path,
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
void
serve_same_as_cli(const struct server *s, const char *path,
                  const char *const *argv)
{
    int st = 0;
    cJSON *api = serve_call(s, "GET", path, NULL, &st), *cli = cli_json(argv);
    char *a = cJSON_PrintUnformatted(api), *b = cJSON_PrintUnformatted(cli);

    ck_assert_int_eq(st, 200);
    ck_assert_msg(cJSON_Compare(api, cli, true), "GET %s\n api %s\n cli %s",
                  path, a, b);
    free(a);
    free(b);
    cJSON_Delete(api);
    cJSON_Delete(cli);
}

const char *
serve_error_code(const cJSON *o)
{
    return cJSON_GetStringValue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "code"));
}

void
serve_operator_add(const char *name, const char *role, char *tok, size_t len)
{
    struct run_result r;
    cJSON *o;

    ck_assert_int_eq(
        RUN_ARGS(&r, "operators", "add", name, "--role", role, "--json"), 0);
    o = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(o);
    ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(o, "name")),
                     name);
    snprintf(tok, len, "%s",
             cJSON_GetStringValue(cJSON_GetObjectItem(o, "token")));
    ck_assert_uint_eq(strlen(tok), 70); /* "stepq_" and 64 hex digits */
    cJSON_Delete(o);
    run_result_free(&r);
}

void
serve_enqueue_post(void)
{
    char job[1024];

    snprintf(job, sizeof(job),
             "{\"name\":\"p\",\"steps\":[{\"name\":\"post\",\"kind\":\"http\","
             "\"http\":{\"url\":\"http://127.0.0.1:%d/comments\",\"body\":"
             "{\"t\":\"x\"}}}]}",
             e2e_mock.port);
    e2e_enqueue(job);
}

/* Every test has the mock and a config with its tiers (the park test's
 * script: a daily wall once, then 200). */
void
serve_setup(void)
{
    e2e_setup();
    e2e_start_file("comments-daily-wall-once.json", "");
}

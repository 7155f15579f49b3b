/* servefix.h: `stepq serve` as the test suites start it (test_serve.c,
 * test_serve_ops.c): the server process on e2e_db with a token, one
 * request with its parsed answer, and the CLI's --json to compare with. */
#ifndef STEPQ_TESTS_SERVEFIX_H
#define STEPQ_TESTS_SERVEFIX_H

#include <stddef.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#define TOKEN "test-token-0123456789abcdef"
#define AUTH  "Authorization: Bearer " TOKEN "\r\n"

/* A one-step chat job with dedupe key key (a string literal). */
#define JOB(key)                                                               \
    "{\"name\":\"n\",\"key\":\"" key "\",\"steps\":[{\"name\":\"s\","          \
    "\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}}]}"

struct server {
    pid_t pid;
    int port;
};

/* serve_start starts `stepq serve --listen 127.0.0.1:0 ARGS` on e2e_db
 * with $STEPQ_TOKEN set to token (NULL: unset) and reads its "listening"
 * line: -1 once it listens, or its exit code when it exits first. */
int serve_start(struct server *s, const char *token, const char *const *args);
/* serve_stop sends SIGTERM and fails the test unless it exits 0. */
void serve_stop(struct server *s);
/* serve_call sends one request with the test token; returns the parsed
 * body (NULL unless JSON; caller deletes it) and sets *status. */
cJSON *serve_call(const struct server *s, const char *method, const char *path,
                  const char *body, int *status);
/* serve_same_as_cli fails the test unless GET path answers 200 with what
 * `stepq ARGV` prints (argv NULL-terminated, --json among them). */
void serve_same_as_cli(const struct server *s, const char *path,
                       const char *const *argv);
/* serve_error_code is the "code" of an error answer, or NULL. */
const char *serve_error_code(const cJSON *o);
/* serve_operator_add makes operator name with role through the CLI
 * (`operators add --json`) and copies its token (printed once) into tok
 * (len bytes). */
void serve_operator_add(const char *name, const char *role, char *tok,
                        size_t len);
/* serve_enqueue_post enqueues a one-step job named "p" whose http step
 * posts to the mock's /comments (which meets a daily wall once, with
 * serve_setup's script: a worker run then parks it). */
void serve_enqueue_post(void);
/* serve_setup: e2e_setup, then the mock with a script whose /comments
 * meets a daily wall once (the config has tiers "free" and "local"). */
void serve_setup(void);

#endif

/* httpenv.h: a libuv loop with an http_client (and an in-process mock) for
 * the suites of http/http.h (test_http*.c).
 *
 * env_start starts the mock in process on the test's loop (mock_start),
 * env_start_proc talks to the running `stepq mock` of the mockproc fixture.
 * env_stop closes the client, the mock and the guard timer and checks
 * uv_loop_close() == 0. Waits are bounded by the guard timer, never by
 * sleeping.
 */
#ifndef STEPQ_TESTS_HTTPENV_H
#define STEPQ_TESTS_HTTPENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "http/http.h"
#include "mock/mock.h"

#define REQ_JSON                                                               \
    "{\"model\":\"from-job\",\"messages\":[{\"role\":\"user\","                \
    "\"content\":\"Summarize: hello world\"}],\"max_tokens\":200}"
#define KEY_ENV   "STEPQ_TEST_HTTP_KEY"
#define KEY_VALUE "sk-test-Secret-4242"

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
    bool stream; /* the response's: its request asked for events */
};

/* on_done is the http_done_cb of the suites: it fills the struct result at
 * arg (once) and moves the body and headers out of the response. */
void on_done(http_call *call, struct http_response *res, void *arg);
/* result_free frees what on_done moved into r and clears it. */
void result_free(struct result *r);
/* result_header returns the value of header name (lower case) in r, or
 * NULL. Borrowed from r. */
const char *result_header(const struct result *r, const char *name);
/* on_flag sets the bool at arg (a close or stop callback). */
void on_flag(void *arg);
/* run_until runs e's loop until *flag is set; fails the test after ms. */
void run_until(struct env *e, const bool *flag, int ms);
/* env_init sets e's port and base URL, its guard timer and a client with
 * opts o (may be NULL) on e's loop, which must be initialised. */
void env_init(struct env *e, int port, const struct http_client_opts *o);
/* env_start: e's loop, an in-process mock on script (NULL: defaults; JSON
 * text or a tests/data/mock/ name, see mockproc_script) logging to log (may
 * be NULL), and a client with opts o. */
void env_start(struct env *e, const char *script, const char *log,
               const struct http_client_opts *o);
/* env_start_proc: e's loop and a client against mockproc_mp, which runs. */
void env_start_proc(struct env *e);
/* env_stop closes client, mock and guard, and checks the loop is empty. */
void env_stop(struct env *e);
/* chat_req builds REQ_JSON as a chat request to base+prefix with model
 * "tier-model" and the key in $KEY_ENV. Cleanup with http_request_cleanup. */
void chat_req(const struct env *e, const char *prefix, int64_t timeout_ms,
              struct http_request *r);
/* fetch sends r and runs the loop until it ends (10 s at most). */
void fetch(struct env *e, const struct http_request *r, struct result *res);
/* chat sends one chat completion under prefix and waits for its end. */
void chat(struct env *e, const char *prefix, int64_t timeout_ms,
          struct result *res);
/* json_at returns the string at o.path1 (or o.path1.path2 when path2 is not
 * NULL), or NULL when there is none. Borrowed from o. */
const char *json_at(const cJSON *o, const char *path1, const char *path2);

#endif

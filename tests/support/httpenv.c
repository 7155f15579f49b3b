/* httpenv.c: the loop, client and in-process mock of the http suites. */
#include "tests/support/httpenv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tests/support/mockproc.h"
#include "tests/support/support.h"

void
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
    r->stream = res->stream;
    res->body = NULL;
    res->headers = NULL;
    res->nheaders = 0;
}

void
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

const char *
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
void
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

void
env_init(struct env *e, int port, const struct http_client_opts *o)
{
    e->port = port;
    snprintf(e->base, sizeof(e->base), "http://127.0.0.1:%d", port);
    ck_assert_int_eq(uv_timer_init(&e->loop, &e->guard), 0);
    ck_assert_int_eq(http_client_new(&e->loop, o, &e->c), 0);
}

/* env_start: loop, in-process mock running script, client with opts o. */
void
env_start(struct env *e, const char *script, const char *log,
          const struct http_client_opts *o)
{
    int port = 0;

    char *text = script != NULL ? mockproc_script(script) : NULL;

    memset(e, 0, sizeof(*e));
    ck_assert_int_eq(uv_loop_init(&e->loop), 0);
    ck_assert_int_eq(mock_start(&e->loop, text, log, &e->m, &port), 0);
    free(text);
    env_init(e, port, o);
}

/* env_start_proc: loop and client against the running mock process. */
void
env_start_proc(struct env *e)
{
    memset(e, 0, sizeof(*e));
    ck_assert_int_eq(uv_loop_init(&e->loop), 0);
    env_init(e, mockproc_mp.port, NULL);
}

void
on_flag(void *arg)
{
    *(bool *)arg = true;
}

/* env_stop closes client, mock and guard, and checks the loop is empty. */
void
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
void
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
void
fetch(struct env *e, const struct http_request *r, struct result *res)
{
    memset(res, 0, sizeof(*res));
    ck_assert_int_eq(http_send(e->c, r, on_done, res, NULL), 0);
    run_until(e, &res->done, 10000);
}

/* chat sends one chat completion under prefix. */
void
chat(struct env *e, const char *prefix, int64_t timeout_ms, struct result *res)
{
    struct http_request r;

    chat_req(e, prefix, timeout_ms, &r);
    fetch(e, &r, res);
    http_request_cleanup(&r);
}

const char *
json_at(const cJSON *o, const char *path1, const char *path2)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, path1);

    if (path2 != NULL)
        v = cJSON_GetObjectItemCaseSensitive(v, path2);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

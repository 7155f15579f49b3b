/* request.c: parsing a connection's requests with libhttp-parser, handing
 * each one to the engine (answer.c) and writing the request log line.
 */
#include "mock/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>
#include <http_parser.h>

#include "common/clock.h"
#include "common/httptext.h"
#include "common/json.h"
#include "common/xalloc.h"

#define MAX_BODY     (16u << 20) /* request bodies above this get 413 */
#define MAX_LOG_BODY (1u << 20)  /* larger bodies are logged as null */

void
mock__request_reset(struct conn *c)
{
    free(c->url);
    free(c->field);
    free(c->value);
    free(c->idem);
    free(c->auth_scheme);
    free(c->body);
    cJSON_Delete(c->headers);
    cJSON_Delete(c->all_headers);
    c->all_headers = NULL;
    c->url = c->field = c->value = c->idem = c->auth_scheme = c->body = NULL;
    c->headers = NULL;
    c->url_len = c->field_len = c->value_len = 0;
    c->body_len = c->body_cap = 0;
    c->in_value = c->auth = c->expect = c->too_large = false;
}

/* json_add_masked_query logs the query string with the value of every
 * parameter whose name may carry a credential replaced by "***". */
static void
json_add_masked_query(cJSON *o, const char *q)
{
    char *out = xmalloc(strlen(q) * 2 + 8), *w = out;

    while (*q != '\0') {
        size_t n = strcspn(q, "&"), k = strcspn(q, "=&");
        memcpy(w, q, k);
        w += k;
        if (q[k] == '=' && httptext_is_credential_name(q, k)) {
            memcpy(w, "=***", 4);
            w += 4;
        } else {
            memcpy(w, q + k, n - k);
            w += n - k;
        }
        q += n;
        if (*q == '&')
            *w++ = *q++;
    }
    *w = '\0';
    if (json_utf8_valid(out, strlen(out)))
        cJSON_AddStringToObject(o, "query", out);
    else
        cJSON_AddNullToObject(o, "query");
    free(out);
}

static void
log_request(struct mock *m, struct conn *c, const struct mock_request *rq,
            const struct mock_reply *rep)
{
    cJSON *o;
    char *line;
    const char *fault = mock_fault_name(rep->fault);
    bool answered =
        rep->fault != MOCK_FAULT_HANG && rep->fault != MOCK_FAULT_CLOSE;

    if (m->log == NULL && !m->log_stderr)
        return;
    o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "seq", (double)m->engine.seq);
    cJSON_AddNumberToObject(o, "ts_ms", (double)clock_now_ms());
    cJSON_AddNumberToObject(o, "t_ms", (double)(uv_now(m->loop) - m->t0));
    cJSON_AddStringToObject(o, "method", rq->method);
    cJSON_AddStringToObject(o, "path", rq->path);
    json_add_masked_query(o, rq->query ? rq->query : "");
    cJSON_AddStringToObject(o, "route", rep->route);
    cJSON_AddStringToObject(o, "kind", rep->kind);
    if (answered)
        cJSON_AddNumberToObject(o, "status", rep->status);
    else
        cJSON_AddNullToObject(o, "status");
    if (fault != NULL)
        cJSON_AddStringToObject(o, "fault", fault);
    else
        cJSON_AddNullToObject(o, "fault");
    cJSON_AddNumberToObject(o, "delay_ms", (double)rep->delay_ms);
    if (rq->idempotency_key != NULL)
        cJSON_AddStringToObject(o, "idempotency_key", rq->idempotency_key);
    else
        cJSON_AddNullToObject(o, "idempotency_key");
    cJSON_AddBoolToObject(o, "authorization", c->auth);
    if (c->auth_scheme != NULL)
        cJSON_AddStringToObject(o, "auth_scheme", c->auth_scheme);
    cJSON_AddItemToObject(o, "headers",
                          c->headers ? c->headers : cJSON_CreateObject());
    c->headers = NULL;
    if (rep->batch_log != NULL)
        cJSON_AddItemToObject(o, "batch", cJSON_Duplicate(rep->batch_log, 1));
    cJSON_AddNumberToObject(o, "body_bytes", (double)rq->body_len);
    if (rep->request_json != NULL)
        cJSON_AddItemToObject(o, "body", cJSON_Duplicate(rep->request_json, 1));
    else if (rq->body_len > 0 && rq->body_len <= MAX_LOG_BODY &&
             memchr(rq->body, '\0', rq->body_len) == NULL &&
             json_utf8_valid(rq->body, rq->body_len))
        cJSON_AddStringToObject(o, "body", rq->body);
    else
        cJSON_AddNullToObject(o, "body");
    line = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (line == NULL)
        return;
    if (m->log != NULL) {
        fprintf(m->log, "%s\n", line);
        fflush(m->log);
    }
    if (m->log_stderr) {
        fprintf(stderr, "%s\n", line);
        fflush(stderr);
    }
    cJSON_free(line);
}

/* request_query returns what follows the first '?' of the URL, owned ("",
 * when none). */
static char *
request_query(const char *url, size_t len)
{
    const char *q = memchr(url, '?', len);

    return q != NULL ? xstrndup(q + 1, len - (size_t)(q + 1 - url))
                     : xstrdup("");
}

/* request_path strips the query string and an absolute-form prefix
 * ("http://host/path"). Returns an owned copy. */
static char *
request_path(const char *url, size_t len)
{
    const char *p = url, *end = url + len, *q;

    if (len > 7 && (strncasecmp(url, "http://", 7) == 0 ||
                    strncasecmp(url, "https://", 8) == 0)) {
        p = memchr(url + 8, '/', len - 8);
        if (p == NULL)
            return xstrdup("/");
    }
    q = memchr(p, '?', (size_t)(end - p));
    if (q != NULL)
        end = q;
    if (end == p)
        return xstrdup("/");
    return xstrndup(p, (size_t)(end - p));
}

static void
handle_request(struct conn *c)
{
    struct mock *m = c->m;
    struct mock_request rq = {0};
    struct mock_reply rep;
    char *path = request_path(c->url ? c->url : "/", c->url_len);
    char *query = request_query(c->url ? c->url : "", c->url_len);
    bool keep = http_should_keep_alive(&c->parser) != 0;
    bool close_after;

    rq.method = http_method_str((enum http_method)c->parser.method);
    rq.path = path;
    rq.body = c->body ? c->body : "";
    rq.body_len = c->body_len;
    rq.idempotency_key = c->idem;
    rq.query = query;
    rq.headers = c->all_headers;
    mock_engine_answer(&m->engine, &rq, (int64_t)uv_now(m->loop), keep, &rep);
    log_request(m, c, &rq, &rep);
    close_after = !keep;
    if (!keep || rep.fault == MOCK_FAULT_HANG ||
        rep.fault == MOCK_FAULT_CLOSE || rep.fault == MOCK_FAULT_CLOSE_MID_BODY)
        c->done = true;
    mock__conn_enqueue(c, &rep, close_after);
    mock_reply_cleanup(&rep);
    free(path);
    free(query);
}

static void
bad_request(struct conn *c)
{
    struct mock_reply rep;

    mock_engine_bad_request(&c->m->engine, c->too_large, &rep);
    c->done = true;
    mock__conn_enqueue(c, &rep, true);
    mock_reply_cleanup(&rep);
}

static void
append(char **buf, size_t *len, const char *at, size_t n)
{
    *buf = xrealloc(*buf, *len + n + 1);
    memcpy(*buf + *len, at, n);
    *len += n;
    (*buf)[*len] = '\0';
}

static bool
logged_header(const char *name)
{
    static const char *const names[] = {"content-type", "content-length",
                                        "user-agent", "accept",
                                        "idempotency-key"};

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(names); i++) {
        if (strcmp(name, names[i]) == 0)
            return true;
    }
    /* A credential is never logged, whatever header carries it. */
    if (httptext_is_credential_name(name, strlen(name)))
        return false;
    return strncmp(name, "x-", 2) == 0;
}

static void
finish_header(struct conn *c)
{
    const char *v = c->value ? c->value : "";

    if (c->field == NULL)
        return;
    for (char *p = c->field; *p; p++) {
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    }
    if (strcmp(c->field, "idempotency-key") == 0) {
        free(c->idem);
        c->idem = xstrdup(v);
    } else if (strcmp(c->field, "authorization") == 0) {
        size_t n = strcspn(v, " ");
        c->auth = true;
        free(c->auth_scheme);
        c->auth_scheme = v[n] == ' ' && n <= 16 ? xstrndup(v, n) : NULL;
    } else if (strcmp(c->field, "expect") == 0 &&
               strcasecmp(v, "100-continue") == 0) {
        c->expect = true;
    }
    if (c->all_headers == NULL)
        c->all_headers = cJSON_CreateObject();
    if (!cJSON_HasObjectItem(c->all_headers, c->field) &&
        json_utf8_valid(v, strlen(v)))
        cJSON_AddStringToObject(c->all_headers, c->field, v);
    if (logged_header(c->field)) {
        if (c->headers == NULL)
            c->headers = cJSON_CreateObject();
        if (json_utf8_valid(v, strlen(v)))
            cJSON_AddStringToObject(c->headers, c->field, v);
    }
    free(c->field);
    free(c->value);
    c->field = c->value = NULL;
    c->field_len = c->value_len = 0;
}

static int
on_message_begin(http_parser *p)
{
    mock__request_reset(p->data);
    return 0;
}

static int
on_url(http_parser *p, const char *at, size_t n)
{
    struct conn *c = p->data;

    append(&c->url, &c->url_len, at, n);
    return 0;
}

static int
on_header_field(http_parser *p, const char *at, size_t n)
{
    struct conn *c = p->data;

    if (c->in_value) {
        finish_header(c);
        c->in_value = false;
    }
    append(&c->field, &c->field_len, at, n);
    return 0;
}

static int
on_header_value(http_parser *p, const char *at, size_t n)
{
    struct conn *c = p->data;

    c->in_value = true;
    append(&c->value, &c->value_len, at, n);
    return 0;
}

static int
on_headers_complete(http_parser *p)
{
    struct conn *c = p->data;

    finish_header(c);
    c->in_value = false;
    if (p->content_length != UINT64_MAX && p->content_length > MAX_BODY) {
        c->too_large = true;
        return -1;
    }
    /* curl waits a second for "100 Continue" before sending a large body;
     * say it at once unless earlier replies are still queued. */
    if (c->expect && c->head == NULL) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        mock__conn_write(c, NULL, cont, sizeof(cont) - 1);
    }
    return 0;
}

static int
on_body(http_parser *p, const char *at, size_t n)
{
    struct conn *c = p->data;
    char *nb;

    if (c->body_len + n > MAX_BODY) {
        c->too_large = true;
        return -1;
    }
    if (c->body_len + n + 1 > c->body_cap) {
        size_t cap = (c->body_len + n + 1) * 2;
        if (cap > MAX_BODY + 1)
            cap = MAX_BODY + 1;
        nb = realloc(c->body, cap);
        if (nb == NULL) {
            c->too_large = true;
            return -1;
        }
        c->body = nb;
        c->body_cap = cap;
    }
    memcpy(c->body + c->body_len, at, n);
    c->body_len += n;
    c->body[c->body_len] = '\0';
    return 0;
}

static int
on_message_complete(http_parser *p)
{
    struct conn *c = p->data;

    handle_request(c);
    if (c->done || mock__conn_is_full(c))
        http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* hold keeps the bytes after a paused request until c has room again, and
 * stops reading. data may point into the held bytes of an earlier pause:
 * the copy is made before the caller frees those. */
static void
hold(struct conn *c, const char *data, size_t len)
{
    c->rest = len > 0 ? xmalloc(len) : NULL;
    if (len > 0)
        memcpy(c->rest, data, len);
    c->rest_len = len;
    c->read_paused = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
}

void
mock__conn_parse(struct conn *c, const char *data, size_t len)
{
    size_t n = http_parser_execute(&c->parser, &settings, data, len);

    if (c->closing || c->done)
        return;
    if (c->parser.upgrade) {
        /* The request was answered as a plain one (a server may ignore
         * Upgrade); what follows it is not HTTP/1.1, so read no more and
         * close once the answers are out, as after the client's EOF. */
        c->done = c->eof = true;
        uv_read_stop((uv_stream_t *)&c->tcp);
        mock__conn_flush(c);
        return;
    }
    if (HTTP_PARSER_ERRNO(&c->parser) == HPE_PAUSED) {
        hold(c, data + n, len - n);
        return;
    }
    if (HTTP_PARSER_ERRNO(&c->parser) != HPE_OK)
        bad_request(c);
}

void
mock__conn_resume(struct conn *c)
{
    char *rest = c->rest;
    size_t len = c->rest_len;

    if (!c->read_paused || c->closing || c->done || mock__conn_is_full(c))
        return;
    c->read_paused = false;
    c->rest = NULL;
    c->rest_len = 0;
    http_parser_pause(&c->parser, 0);
    if (len > 0)
        mock__conn_parse(c, rest, len);
    free(rest);
    if (!c->read_paused && !c->closing && !c->done && !c->eof)
        mock__conn_read_start(c);
}

/* mock.c: the HTTP/1.1 server of the mock on a libuv loop.
 *
 * Requests are parsed with libhttp-parser; answer.c decides each reply.
 * Replies go out in request order (HTTP/1.1 pipelining): each one waits in
 * its connection's queue until its delay timer fires and every reply before
 * it has been written. A hung reply therefore blocks its connection, exactly
 * like a model server that never answers.
 *
 * Lifetimes: a connection owns its tcp handle and the timers of its queued
 * replies; it counts them in refs and is freed when the last close callback
 * has run. The mock counts its connections and frees itself, then calls the
 * stop callback, once the listener and every connection are closed.
 */
#include "mock/mock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <http_parser.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "mock/internal.h"

#define MAX_BODY     (16u << 20) /* request bodies above this get 413 */
#define MAX_LOG_BODY (1u << 20)  /* larger bodies are logged as null */

struct conn;

/* One reply waiting in a connection's queue. */
struct resp {
    struct resp *next;
    struct conn *c;
    uv_timer_t timer; /* used when timer_on; data = this */
    bool timer_on;
    bool ready;
    enum mock_fault fault;
    bool close_after;
    char *buf; /* owned: head and body */
    size_t len;
    size_t sent;     /* drip: bytes written so far */
    size_t head_len; /* drip: the head, written at once */
};

struct conn {
    struct conn *prev, *next; /* in mock->conns */
    struct mock *m;
    uv_tcp_t tcp; /* data = this */
    http_parser parser;
    int refs;     /* tcp handle + running timers */
    bool closing; /* uv_close called on tcp */
    bool done;    /* no more requests are read */
    bool eof;     /* the client finished sending */
    struct resp *head, *tail;

    /* The request being parsed; reset in on_message_begin. */
    char *url;
    size_t url_len;
    char *field, *value;
    size_t field_len, value_len;
    bool in_value;
    char *idem;        /* owned */
    char *auth_scheme; /* owned: "Bearer", never the credentials */
    bool auth;
    bool expect;
    cJSON *headers; /* owned: the headers we log */
    char *body;
    size_t body_len, body_cap;
    bool too_large;
};

struct mock {
    uv_loop_t *loop;
    uv_tcp_t server; /* data = this */
    int port;
    struct mock_engine engine;
    struct mock_stats stats;
    FILE *log; /* owned; NULL: no log file */
    bool log_stderr;
    int64_t t0;
    struct conn *conns;
    size_t nconns;
    bool stopping, server_closed;
    mock_stop_cb stop_cb;
    void *stop_arg;
    char rbuf[65536]; /* every read lands here and is parsed at once */
};

struct wreq {
    uv_write_t req;
    char *buf; /* owned; NULL for static data */
};

static http_parser_settings settings;

static void flush(struct conn *c);
static void start_drip(struct conn *c, struct resp *r);

static void
maybe_done(struct mock *m)
{
    mock_stop_cb cb;
    void *arg;

    if (!m->stopping || !m->server_closed || m->nconns > 0)
        return;
    cb = m->stop_cb;
    arg = m->stop_arg;
    mock_engine_cleanup(&m->engine);
    if (m->log != NULL)
        fclose(m->log);
    free(m);
    if (cb != NULL)
        cb(arg);
}

static void
reset_request(struct conn *c)
{
    free(c->url);
    free(c->field);
    free(c->value);
    free(c->idem);
    free(c->auth_scheme);
    free(c->body);
    cJSON_Delete(c->headers);
    c->url = c->field = c->value = c->idem = c->auth_scheme = c->body = NULL;
    c->headers = NULL;
    c->url_len = c->field_len = c->value_len = 0;
    c->body_len = c->body_cap = 0;
    c->in_value = c->auth = c->expect = c->too_large = false;
}

static void
conn_unref(struct conn *c)
{
    struct mock *m = c->m;

    if (--c->refs > 0)
        return;
    reset_request(c);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        m->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    m->nconns--;
    free(c);
    maybe_done(m);
}

static void
on_timer_closed(uv_handle_t *h)
{
    struct resp *r = h->data;
    struct conn *c = r->c;

    free(r->buf);
    free(r);
    conn_unref(c);
}

static void
resp_free(struct resp *r)
{
    if (r->timer_on) {
        uv_close((uv_handle_t *)&r->timer, on_timer_closed);
        return;
    }
    free(r->buf);
    free(r);
}

static void
on_tcp_closed(uv_handle_t *h)
{
    conn_unref(h->data);
}

static void
conn_close(struct conn *c)
{
    struct resp *r, *next;

    if (c->closing)
        return;
    c->closing = true;
    c->done = true;
    uv_close((uv_handle_t *)&c->tcp, on_tcp_closed);
    for (r = c->head; r != NULL; r = next) {
        next = r->next;
        resp_free(r);
    }
    c->head = c->tail = NULL;
}

static void
on_write(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    struct conn *c = req->data;

    free(w->buf);
    free(w);
    /* A cancelled write means the connection is already closing. */
    if (status < 0 && status != UV_ECANCELED)
        conn_close(c);
}

static void
write_buf(struct conn *c, char *owned, const char *data, size_t len)
{
    struct wreq *w = xcalloc(1, sizeof(*w));
    uv_buf_t b = uv_buf_init((char *)(owned ? owned : data), (unsigned)len);
    int rc;

    w->buf = owned;
    w->req.data = c;
    rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc < 0) {
        free(w->buf);
        free(w);
        conn_close(c);
    }
}

static void
on_shutdown(uv_shutdown_t *req, int status)
{
    struct conn *c = req->data;

    (void)status;
    free(req);
    conn_close(c);
}

/* finish_conn sends FIN after the queued writes, then closes: a plain close
 * could reset the connection and lose the bytes still in flight. */
static void
finish_conn(struct conn *c)
{
    uv_shutdown_t *s = xcalloc(1, sizeof(*s));

    c->done = true;
    s->data = c;
    if (uv_shutdown(s, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
        free(s);
        conn_close(c);
    }
}

/* The drip fault: the head at once, then the body one byte a second, so
 * a client sees a live but endless answer and must time out. */
static void
on_drip(uv_timer_t *t)
{
    struct resp *r = t->data;
    struct conn *c = r->c;

    if (c->closing)
        return;
    if (r->sent < r->len) {
        write_buf(c, NULL, r->buf + r->sent, 1);
        r->sent++;
        return;
    }
    uv_timer_stop(t);
    c->head = r->next;
    if (c->head == NULL)
        c->tail = NULL;
    resp_free(r);
    flush(c);
}

static void
start_drip(struct conn *c, struct resp *r)
{
    if (r->sent > 0)
        return; /* already dripping */
    write_buf(c, NULL, r->buf, r->head_len);
    r->sent = r->head_len;
    if (c->closing)
        return;
    if (!r->timer_on) {
        uv_timer_init(c->m->loop, &r->timer);
        r->timer.data = r;
        r->timer_on = true;
        c->refs++;
    }
    uv_timer_start(&r->timer, on_drip, 1000, 1000);
}

static void
flush(struct conn *c)
{
    while (!c->closing && c->head != NULL && c->head->ready) {
        struct resp *r = c->head;
        bool stop = false;

        if (r->fault == MOCK_FAULT_DRIP) {
            start_drip(c, r); /* stays at the head until all is sent */
            return;
        }
        c->head = r->next;
        if (c->head == NULL)
            c->tail = NULL;
        if (r->fault == MOCK_FAULT_CLOSE) {
            resp_free(r);
            conn_close(c);
            return;
        }
        write_buf(c, r->buf, NULL, r->len);
        r->buf = NULL;
        stop = r->fault == MOCK_FAULT_CLOSE_MID_BODY ||
               r->fault == MOCK_FAULT_BAD_CHUNKED || r->close_after;
        resp_free(r);
        if (c->closing)
            return;
        if (stop) {
            finish_conn(c);
            return;
        }
    }
    if (c->closing || !c->eof)
        return;
    if (c->head == NULL)
        finish_conn(c);
    else if (c->head->fault == MOCK_FAULT_HANG)
        conn_close(c); /* nothing will ever be sent: free it now */
}

static void
on_resp_timer(uv_timer_t *t)
{
    struct resp *r = t->data;

    r->ready = true;
    flush(r->c);
}

static void
enqueue(struct conn *c, struct mock_reply *rep, bool close_after)
{
    struct resp *r = xcalloc(1, sizeof(*r));
    size_t body = rep->body_len;

    r->c = c;
    r->fault = rep->fault;
    r->close_after = close_after;
    if (r->fault == MOCK_FAULT_CLOSE_MID_BODY)
        body /= 2;
    if (r->fault == MOCK_FAULT_BAD_CHUNKED) {
        /* A chunk size that is not hex: no client can read past it. */
        static const char head[] = "HTTP/1.1 200 OK\r\n"
                                   "Content-Type: application/json\r\n"
                                   "Transfer-Encoding: chunked\r\n\r\n"
                                   "zz\r\n";
        r->len = sizeof(head) - 1 + body;
        r->buf = xmalloc(r->len);
        memcpy(r->buf, head, sizeof(head) - 1);
        memcpy(r->buf + sizeof(head) - 1, rep->body, body);
    } else if (r->fault == MOCK_FAULT_HUGE_HEADERS) {
        /* The status line, then a 1 MiB header, then the real ones. */
        static const char pad[] = "X-Pad: ";
        const char *eol = memchr(rep->head, '\n', rep->head_len);
        size_t first = eol ? (size_t)(eol - rep->head) + 1 : 0;
        size_t huge = 1024 * 1024;
        r->len = rep->head_len + sizeof(pad) - 1 + huge + 2 + body;
        r->buf = xmalloc(r->len);
        memcpy(r->buf, rep->head, first);
        memcpy(r->buf + first, pad, sizeof(pad) - 1);
        memset(r->buf + first + sizeof(pad) - 1, 'x', huge);
        memcpy(r->buf + first + sizeof(pad) - 1 + huge, "\r\n", 2);
        memcpy(r->buf + first + sizeof(pad) + 1 + huge, rep->head + first,
               rep->head_len - first);
        memcpy(r->buf + rep->head_len + sizeof(pad) + 1 + huge, rep->body,
               body);
    } else if (r->fault != MOCK_FAULT_CLOSE && r->fault != MOCK_FAULT_HANG) {
        r->len = rep->head_len + body;
        r->buf = xmalloc(r->len);
        r->head_len = rep->head_len;
        memcpy(r->buf, rep->head, rep->head_len);
        memcpy(r->buf + rep->head_len, rep->body, body);
    }
    if (c->tail != NULL)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    if (r->fault == MOCK_FAULT_HANG)
        return;
    if (rep->delay_ms <= 0) {
        r->ready = true;
        flush(c);
        return;
    }
    uv_timer_init(c->m->loop, &r->timer);
    r->timer.data = r;
    r->timer_on = true;
    c->refs++;
    uv_timer_start(&r->timer, on_resp_timer, (uint64_t)rep->delay_ms, 0);
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
    bool keep = http_should_keep_alive(&c->parser) != 0;
    bool close_after;

    rq.method = http_method_str((enum http_method)c->parser.method);
    rq.path = path;
    rq.body = c->body ? c->body : "";
    rq.body_len = c->body_len;
    rq.idempotency_key = c->idem;
    mock_engine_answer(&m->engine, &rq, (int64_t)uv_now(m->loop), keep, &rep);
    log_request(m, c, &rq, &rep);
    close_after = !keep;
    if (!keep || rep.fault == MOCK_FAULT_HANG ||
        rep.fault == MOCK_FAULT_CLOSE || rep.fault == MOCK_FAULT_CLOSE_MID_BODY)
        c->done = true;
    enqueue(c, &rep, close_after);
    mock_reply_cleanup(&rep);
    free(path);
}

static void
bad_request(struct conn *c)
{
    struct mock_reply rep;

    mock_engine_bad_request(&c->m->engine, c->too_large, &rep);
    c->done = true;
    enqueue(c, &rep, true);
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
    return strncmp(name, "x-", 2) == 0 && strcmp(name, "x-api-key") != 0;
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
    reset_request(p->data);
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
        write_buf(c, NULL, cont, sizeof(cont) - 1);
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
    if (c->done)
        http_parser_pause(p, 1);
    return 0;
}

static void
on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = h->data;

    (void)suggested;
    *buf = uv_buf_init(c->m->rbuf, sizeof(c->m->rbuf));
}

static void
on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = s->data;

    if (nread == 0 || c->closing)
        return;
    if (nread < 0) {
        if (nread != UV_EOF) {
            conn_close(c);
            return;
        }
        c->eof = true;
        uv_read_stop(s);
        flush(c);
        return;
    }
    if (c->done)
        return;
    http_parser_execute(&c->parser, &settings, buf->base, (size_t)nread);
    if (c->closing || c->done)
        return;
    if (HTTP_PARSER_ERRNO(&c->parser) != HPE_OK || c->parser.upgrade)
        bad_request(c);
}

static void
on_connection(uv_stream_t *server, int status)
{
    struct mock *m = server->data;
    struct conn *c;

    if (status < 0 || m->stopping)
        return;
    c = xcalloc(1, sizeof(*c));
    c->m = m;
    c->refs = 1;
    c->next = m->conns;
    if (m->conns != NULL)
        m->conns->prev = c;
    m->conns = c;
    m->nconns++;
    uv_tcp_init(m->loop, &c->tcp);
    c->tcp.data = c;
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    m->stats.connections++;
    uv_tcp_nodelay(&c->tcp, 1);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
        conn_close(c);
}

/* listen_socket binds and listens before anything touches the loop, so a
 * busy port fails cleanly. Returns the fd or a negative errno. */
static int
listen_socket(const char *host, int port, int *bound, char *err, size_t len)
{
    struct sockaddr_in sa = {0};
    socklen_t sl = sizeof(sa);
    int fd, one = 1, e;

    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return json_fail(err, len, "host", "not an IPv4 address: %s", host);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        e = errno;
        snprintf(err, len, "socket: %s", strerror(e));
        return -e;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(fd, 511) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        e = errno;
        snprintf(err, len, "bind %s:%d: %s", host, port, strerror(e));
        close(fd);
        return -e;
    }
    *bound = ntohs(sa.sin_port);
    return fd;
}

static void
on_server_closed(uv_handle_t *h)
{
    struct mock *m = h->data;

    m->server_closed = true;
    maybe_done(m);
}

int
mock_start_with(uv_loop_t *loop, const struct mock_options *opts, mock **out,
                int *port, char *err, size_t len)
{
    const char *host = opts->host ? opts->host : "127.0.0.1";
    struct mock_script *script = NULL;
    struct mock *m;
    FILE *log = NULL;
    int fd = -1, bound = 0, rc;

    if (opts->port < 0 || opts->port > 65535)
        return json_fail(err, len, "port", "must be between 0 and 65535");
    if ((rc = mock_script_parse(opts->script, &script, err, len)) != 0)
        return rc;
    if (opts->log_path != NULL) {
        log = fopen(opts->log_path, "a");
        if (log == NULL) {
            rc = -errno;
            snprintf(err, len, "log %s: %s", opts->log_path, strerror(-rc));
            mock_script_free(script);
            return rc;
        }
    }
    fd = listen_socket(host, opts->port, &bound, err, len);
    if (fd < 0) {
        mock_script_free(script);
        if (log != NULL)
            fclose(log);
        return fd;
    }
    if (settings.on_message_complete == NULL) {
        settings.on_message_begin = on_message_begin;
        settings.on_url = on_url;
        settings.on_header_field = on_header_field;
        settings.on_header_value = on_header_value;
        settings.on_headers_complete = on_headers_complete;
        settings.on_body = on_body;
        settings.on_message_complete = on_message_complete;
    }
    m = xcalloc(1, sizeof(*m));
    m->loop = loop;
    m->port = bound;
    m->log = log;
    m->log_stderr = opts->log_stderr;
    m->engine.script = script;
    m->engine.rng = script->seed;
    m->engine.stats = &m->stats;
    m->t0 = (int64_t)uv_now(loop);
    /* Fixed windows align to the epoch and Anthropic's resets are clock
     * times: wall time is the loop's time plus this offset, so the two
     * never disagree within a run. */
    m->engine.wall_offset = clock_now_ms() - m->t0;
    uv_tcp_init(loop, &m->server);
    m->server.data = m;
    if ((rc = uv_tcp_open(&m->server, fd)) != 0)
        close(fd);
    else
        rc = uv_listen((uv_stream_t *)&m->server, 511, on_connection);
    if (rc != 0) {
        /* Only reachable when libuv itself fails: the handle is on the loop
         * now, so it is released by a close callback (run the loop once). */
        snprintf(err, len, "listen: %s", uv_strerror(rc));
        m->stopping = true;
        uv_close((uv_handle_t *)&m->server, on_server_closed);
        return rc;
    }
    *out = m;
    *port = bound;
    return 0;
}

int
mock_start(uv_loop_t *loop, const char *script, const char *log_path,
           mock **out, int *port)
{
    struct mock_options o = {.script = script, .log_path = log_path};
    char err[512];
    int rc = mock_start_with(loop, &o, out, port, err, sizeof(err));

    if (rc != 0)
        log_error("mock: %s", err);
    return rc;
}

void
mock_stop(mock *m, mock_stop_cb cb, void *arg)
{
    if (m == NULL)
        return;
    m->stopping = true;
    m->stop_cb = cb;
    m->stop_arg = arg;
    uv_close((uv_handle_t *)&m->server, on_server_closed);
    for (struct conn *c = m->conns; c != NULL; c = c->next)
        conn_close(c);
}

void
mock_get_stats(const mock *m, struct mock_stats *out)
{
    *out = m->stats;
}

int
mock_port(const mock *m)
{
    return m->port;
}

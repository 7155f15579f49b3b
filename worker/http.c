/* http.c: libcurl's multi interface driven by a libuv loop.
 *
 * curl tells us which sockets to watch (socket_cb) and when to wake it up
 * (timer_cb); we watch them with one uv_poll_t per socket and one uv_timer_t
 * per client, and hand every event back with curl_multi_socket_action. After
 * each of those calls check_multi_info collects finished transfers: this is
 * the only place, besides http_cancel and http_client_close, where user
 * callbacks run, and it is never inside a curl callback, so callbacks may
 * call back into the client (CONVENTIONS §10).
 */
#include "worker/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <uv.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

/* One socket curl asked us to watch. The poll handle is embedded and the
 * struct is freed in its close callback (CONVENTIONS §5). */
struct sock {
    uv_poll_t poll;
    http_client *c;
    curl_socket_t fd;
    struct sock *prev, *next; /* in c->socks while not closing */
};

struct http_call {
    http_client *c;
    CURL *easy;
    struct curl_slist *hdrs; /* owned; wiped before free */
    char *body;              /* owned copy of the request body */
    size_t body_len;
    http_done_cb cb;
    void *arg;
    struct http_response res; /* built while the answer arrives */
    size_t body_cap;          /* allocated bytes of res.body */
    size_t header_bytes;      /* bytes of kept response headers */
    int64_t content_length;   /* from the current head; -1 unknown */
    int64_t start_ms;
    bool too_large;  /* the write callback refused the answer */
    bool oom;        /* the body buffer could not grow */
    bool delivering; /* its callback is running */
    char errbuf[CURL_ERROR_SIZE];
    struct http_call *prev, *next; /* in c->calls */
};

struct http_client {
    uv_loop_t *loop; /* borrowed */
    CURLM *multi;    /* owned; NULL once cleaned up */
    uv_timer_t timer;
    struct sock *socks;      /* sockets being watched */
    struct http_call *calls; /* requests in flight */
    size_t inflight;
    size_t open_handles; /* timer + sockets not yet closed */
    size_t max_response;
    size_t max_headers;
    size_t max_header_bytes;
    long connect_timeout_ms;
    char *user_agent; /* owned */
    int dispatching;  /* > 0 while user callbacks may run */
    bool closing;     /* http_client_close was called */
    bool cleaned;     /* curl_multi_cleanup done, handles closing */
    http_close_cb close_cb;
    void *close_arg;
};

static uv_once_t global_once = UV_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void
global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* wipe clears memory that may have held a secret; the volatile store keeps
 * the compiler from dropping it as a dead store before free(). */
static void
wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;

    while (n-- > 0)
        *v++ = 0;
}

static void
headers_free(struct http_header *h, size_t n)
{
    if (h == NULL)
        return; /* moved out by the callback */
    for (size_t i = 0; i < n; i++) {
        free(h[i].name);
        free(h[i].value);
    }
    free(h);
}

static void
response_cleanup(struct http_response *res)
{
    headers_free(res->headers, res->nheaders);
    free(res->body);
    memset(res, 0, sizeof(*res));
}

/* ---- libuv side ------------------------------------------------------- */

static void check_multi_info(http_client *c);
static void finish_close(http_client *c);

/* enter/leave bracket code that runs user callbacks. A close requested from
 * inside a callback is finished by the outermost leave, so curl's multi
 * handle is never cleaned up while we are still reading its messages. */
static void
enter(http_client *c)
{
    c->dispatching++;
}

static void
leave(http_client *c)
{
    c->dispatching--;
    if (c->dispatching == 0 && c->closing && !c->cleaned)
        finish_close(c);
}

/* handle_closed runs after the timer or a socket's poll handle closed. The
 * client is freed with its last handle, once curl is cleaned up. */
static void
handle_closed(http_client *c)
{
    http_close_cb cb;
    void *arg;

    c->open_handles--;
    if (!c->cleaned || c->open_handles > 0)
        return;
    cb = c->close_cb;
    arg = c->close_arg;
    free(c->user_agent);
    free(c);
    if (cb != NULL)
        cb(arg);
}

static void
on_poll_close(uv_handle_t *h)
{
    struct sock *s = h->data;
    http_client *c = s->c;

    free(s);
    handle_closed(c);
}

static void
on_timer_close(uv_handle_t *h)
{
    handle_closed(h->data);
}

static void
sock_unlink(http_client *c, struct sock *s)
{
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        c->socks = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

static void
on_poll(uv_poll_t *h, int status, int events)
{
    struct sock *s = h->data;
    http_client *c = s->c;
    int flags = 0, running = 0;
    CURLMcode rc;

    if (c->cleaned)
        return;
    if (status < 0) {
        flags = CURL_CSELECT_ERR;
    } else {
        if (events & UV_READABLE)
            flags |= CURL_CSELECT_IN;
        if (events & UV_WRITABLE)
            flags |= CURL_CSELECT_OUT;
    }
    /* s may be closed (not freed) by socket_cb inside this call. */
    rc = curl_multi_socket_action(c->multi, s->fd, flags, &running);
    if (rc != CURLM_OK)
        log_error("curl_multi_socket_action: %s", curl_multi_strerror(rc));
    check_multi_info(c);
}

static void
on_timer(uv_timer_t *t)
{
    http_client *c = t->data;
    int running = 0;
    CURLMcode rc;

    if (c->cleaned)
        return;
    rc = curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    if (rc != CURLM_OK)
        log_error("curl_multi_socket_action: %s", curl_multi_strerror(rc));
    /* Always, whatever running says: a timeout may have finished some. */
    check_multi_info(c);
}

/* ---- curl side: callbacks (no curl calls in here but curl_multi_assign,
 * which curl documents as allowed from its multi callbacks) -------------- */

static int
socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    http_client *c = userp;
    struct sock *s = socketp;
    int events = 0;

    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        /* curl forgets the association itself. Close now and never reuse
         * the handle: curl may hand us the same fd number again. */
        if (s != NULL) {
            sock_unlink(c, s);
            uv_close((uv_handle_t *)&s->poll, on_poll_close);
        }
        return 0;
    }
    if (c->cleaned)
        return 0;
    if (s == NULL) {
        s = xcalloc(1, sizeof(*s));
        s->c = c;
        s->fd = fd;
        if (uv_poll_init_socket(c->loop, &s->poll, fd) != 0) {
            log_error("uv_poll_init_socket(%d) failed", (int)fd);
            free(s);
            return -1;
        }
        s->poll.data = s;
        c->open_handles++;
        s->next = c->socks;
        if (c->socks != NULL)
            c->socks->prev = s;
        c->socks = s;
        curl_multi_assign(c->multi, fd, s);
    }
    if (what & CURL_POLL_IN)
        events |= UV_READABLE;
    if (what & CURL_POLL_OUT)
        events |= UV_WRITABLE;
    if (uv_poll_start(&s->poll, events, on_poll) != 0) {
        log_error("uv_poll_start(%d) failed", (int)fd);
        return -1;
    }
    return 0;
}

static int
timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    http_client *c = userp;

    (void)multi;
    if (c->cleaned)
        return 0;
    if (timeout_ms < 0) {
        uv_timer_stop(&c->timer);
        return 0;
    }
    /* libuv 1.44 busy-loops on a 0 ms timer started from the loop. */
    uv_timer_start(&c->timer, on_timer, timeout_ms == 0 ? 1 : timeout_ms, 0);
    return 0;
}

static size_t
write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct http_call *call = userdata;
    size_t max = call->c->max_response;
    size_t n = size * nmemb, len = call->res.body_len;

    /* The cap is checked before any byte is kept: memory stays bounded by
     * max_response + 1 whatever the server sends. Returning less than n
     * aborts the transfer (CURLE_WRITE_ERROR). */
    if (n > max - len) {
        call->too_large = true;
        return 0;
    }
    if (len + n + 1 > call->body_cap) {
        size_t cap = call->body_cap ? call->body_cap * 2 : 16384;
        char *p;

        if (call->body_cap == 0 && call->content_length > 0 &&
            (uint64_t)call->content_length <= max)
            cap = (size_t)call->content_length + 1;
        if (cap < len + n + 1)
            cap = len + n + 1;
        if (cap > max + 1)
            cap = max + 1;
        p = realloc(call->res.body, cap);
        if (p == NULL) {
            call->oom = true;
            return 0;
        }
        call->res.body = p;
        call->body_cap = cap;
    }
    memcpy(call->res.body + len, ptr, n);
    call->res.body_len = len + n;
    call->res.body[len + n] = '\0';
    return n;
}

static bool
is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

static size_t
header_cb(char *buf, size_t size, size_t nitems, void *userdata)
{
    struct http_call *call = userdata;
    struct http_client *c = call->c;
    struct http_response *res = &call->res;
    size_t len = size * nitems, nl, vb, ve;
    const char *colon;
    struct http_header h;

    if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
        /* A new head (after 100 Continue, say): keep only the last. */
        headers_free(res->headers, res->nheaders);
        res->headers = NULL;
        res->nheaders = 0;
        res->headers_truncated = false;
        call->header_bytes = 0;
        call->content_length = -1;
        return len;
    }
    colon = memchr(buf, ':', len);
    if (colon == NULL || colon == buf || is_blank(buf[0]))
        return len; /* the blank line ending the head, or an obs-fold */
    nl = (size_t)(colon - buf);
    while (nl > 0 && is_blank(buf[nl - 1]))
        nl--;
    for (vb = (size_t)(colon - buf) + 1; vb < len && is_blank(buf[vb]); vb++)
        ;
    ve = len;
    while (ve > vb && is_blank(buf[ve - 1]))
        ve--;
    if (res->nheaders >= c->max_headers ||
        call->header_bytes + nl + (ve - vb) + 2 > c->max_header_bytes) {
        res->headers_truncated = true;
        return len;
    }
    h.name = xstrndup(buf, nl);
    for (char *p = h.name; *p != '\0'; p++) {
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    }
    h.value = xstrndup(buf + vb, ve - vb);
    res->headers =
        xrealloc(res->headers, (res->nheaders + 1) * sizeof(*res->headers));
    res->headers[res->nheaders++] = h;
    call->header_bytes += nl + (ve - vb) + 2;
    if (strcmp(h.name, "content-length") == 0) {
        char *end = NULL;
        long long v = strtoll(h.value, &end, 10);
        if (end != h.value && *end == '\0' && v >= 0)
            call->content_length = v;
    }
    return len;
}

/* ---- finishing -------------------------------------------------------- */

static enum http_error
map_error(const struct http_call *call, CURLcode rc)
{
    if (call->too_large)
        return HTTP_ERR_TOO_LARGE;
    switch (rc) {
    case CURLE_OK:
        return HTTP_ERR_NONE;
    case CURLE_OPERATION_TIMEDOUT:
        return HTTP_ERR_TIMEOUT;
    case CURLE_COULDNT_CONNECT:
        return HTTP_ERR_REFUSED;
    case CURLE_FILESIZE_EXCEEDED:
        return HTTP_ERR_TOO_LARGE;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        return HTTP_ERR_RESET;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_USE_SSL_FAILED:
        return HTTP_ERR_TLS;
    default:
        return HTTP_ERR_OTHER;
    }
}

static void
call_unlink(http_client *c, struct http_call *call)
{
    if (call->prev != NULL)
        call->prev->next = call->next;
    else
        c->calls = call->next;
    if (call->next != NULL)
        call->next->prev = call->prev;
    call->prev = call->next = NULL;
    c->inflight--;
}

static void
slist_free_wiped(struct curl_slist *l)
{
    for (struct curl_slist *p = l; p != NULL; p = p->next)
        wipe(p->data, strlen(p->data));
    curl_slist_free_all(l);
}

/* deliver runs the callback of a call already removed from the multi handle
 * and frees it. Called with the client entered. */
static void
deliver(struct http_call *call)
{
    http_client *c = call->c;

    call_unlink(c, call);
    curl_easy_cleanup(call->easy);
    call->easy = NULL;
    slist_free_wiped(call->hdrs);
    call->hdrs = NULL;
    free(call->body);
    call->body = NULL;
    if (call->res.body == NULL)
        call->res.body = xcalloc(1, 1);
    call->res.latency_ms = clock_mono_ms() - call->start_ms;
    call->delivering = true;
    call->cb(call, &call->res, call->arg);
    response_cleanup(&call->res);
    free(call);
}

static void
finish(http_client *c, struct http_call *call, CURLcode rc)
{
    struct http_response *res = &call->res;
    long status = 0, nconn = 0;

    curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(call->easy, CURLINFO_NUM_CONNECTS, &nconn);
    res->status = (int)status;
    res->new_connections = nconn;
    res->error = map_error(call, rc);
    if (call->too_large)
        snprintf(res->error_text, sizeof(res->error_text),
                 "response larger than %zu bytes", c->max_response);
    else if (call->oom)
        snprintf(res->error_text, sizeof(res->error_text),
                 "out of memory for the response body");
    else if (rc != CURLE_OK)
        snprintf(res->error_text, sizeof(res->error_text), "%s",
                 call->errbuf[0] ? call->errbuf : curl_easy_strerror(rc));
    curl_multi_remove_handle(c->multi, call->easy);
    deliver(call);
}

static void
check_multi_info(http_client *c)
{
    CURLMsg *msg;
    int pending = 0;

    enter(c);
    while (!c->closing && (msg = curl_multi_info_read(c->multi, &pending))) {
        char *priv = NULL;
        CURL *easy;
        CURLcode rc;

        if (msg->msg != CURLMSG_DONE)
            continue;
        /* msg is invalid after remove_handle: copy what we need first. */
        easy = msg->easy_handle;
        rc = msg->data.result;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
        finish(c, (struct http_call *)priv, rc);
    }
    leave(c);
}

/* ---- client ----------------------------------------------------------- */

int
http_client_new(uv_loop_t *loop, const struct http_client_opts *opts,
                http_client **out)
{
    static const struct http_client_opts defaults = {0};
    http_client *c;

    if (opts == NULL)
        opts = &defaults;
    if (loop == NULL || out == NULL || opts->max_host_connections < 0 ||
        opts->max_total_connections < 0 || opts->connect_timeout_ms < 0)
        return -EINVAL;
    uv_once(&global_once, global_init);
    if (global_rc != CURLE_OK) {
        log_error("curl_global_init: %s", curl_easy_strerror(global_rc));
        return -EIO;
    }
    c = xcalloc(1, sizeof(*c));
    c->loop = loop;
    c->max_response = opts->max_response_bytes
                          ? opts->max_response_bytes
                          : (size_t)HTTP_DEFAULT_MAX_RESPONSE;
    c->max_headers =
        opts->max_headers ? opts->max_headers : HTTP_DEFAULT_MAX_HEADERS;
    c->max_header_bytes = opts->max_header_bytes ? opts->max_header_bytes
                                                 : HTTP_DEFAULT_HEADER_BYTES;
    c->connect_timeout_ms =
        opts->connect_timeout_ms ? opts->connect_timeout_ms : 10000;
    c->user_agent = xstrdup(opts->user_agent ? opts->user_agent : "stepq/0.1");
    c->multi = curl_multi_init();
    if (c->multi == NULL) {
        log_error("curl_multi_init failed");
        free(c->user_agent);
        free(c);
        return -EIO;
    }
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                      opts->max_host_connections);
    curl_multi_setopt(c->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
                      opts->max_total_connections);
    /* uv_timer_init cannot fail on a live loop (it only links the handle). */
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    c->open_handles = 1;
    *out = c;
    return 0;
}

/* finish_close runs the shutdown order of CONVENTIONS §10: every easy
 * handle is already removed, so clean up the multi handle (curl closes its
 * cached connections and may report their sockets removed), then close the
 * sockets it did not report and the timer. */
static void
finish_close(http_client *c)
{
    c->cleaned = true;
    curl_multi_cleanup(c->multi);
    c->multi = NULL;
    while (c->socks != NULL) {
        struct sock *s = c->socks;
        sock_unlink(c, s);
        uv_close((uv_handle_t *)&s->poll, on_poll_close);
    }
    uv_close((uv_handle_t *)&c->timer, on_timer_close);
}

static void
cancel_one(struct http_call *call)
{
    http_client *c = call->c;

    curl_multi_remove_handle(c->multi, call->easy);
    call->res.error = HTTP_ERR_CANCELLED;
    snprintf(call->res.error_text, sizeof(call->res.error_text), "cancelled");
    deliver(call);
}

void
http_client_close(http_client *c, http_close_cb cb, void *arg)
{
    if (c == NULL)
        return;
    if (c->closing) {
        log_error("http_client_close called twice");
        return;
    }
    c->closing = true;
    c->close_cb = cb;
    c->close_arg = arg;
    enter(c);
    /* Skip the call whose callback is running (it is being delivered). */
    for (;;) {
        struct http_call *call = c->calls;
        while (call != NULL && call->delivering)
            call = call->next;
        if (call == NULL)
            break;
        cancel_one(call);
    }
    leave(c);
}

size_t
http_client_inflight(const http_client *c)
{
    return c->inflight;
}

int
http_cancel(http_call *call)
{
    http_client *c = call->c;

    if (call->delivering)
        return -EALREADY;
    enter(c);
    cancel_one(call);
    leave(c);
    return 0;
}

const char *
http_error_name(enum http_error e)
{
    static const char *const names[HTTP_ERR_COUNT] = {
        "none",      "timeout", "refused", "reset",
        "too_large", "tls",     "other",   "cancelled"};

    if ((unsigned)e >= HTTP_ERR_COUNT)
        return "other";
    return names[e];
}

const char *
http_response_header(const struct http_response *res, const char *name)
{
    for (size_t i = 0; i < res->nheaders; i++) {
        if (strcasecmp(res->headers[i].name, name) == 0)
            return res->headers[i].value;
    }
    return NULL;
}

/* ---- sending ---------------------------------------------------------- */

static bool
has_prefix_ci(const char *s, const char *prefix)
{
    return strncasecmp(s, prefix, strlen(prefix)) == 0;
}

/* slist_add appends a copy of line. curl_slist_append returns NULL on OOM
 * and leaves the list alone; we abort instead (xalloc policy). */
static struct curl_slist *
slist_add(struct curl_slist *l, const char *line)
{
    struct curl_slist *r = curl_slist_append(l, line);

    if (r == NULL) {
        fprintf(stderr, "stepq: out of memory\n");
        abort();
    }
    return r;
}

/* add_header appends "name: value" to l. An empty value needs curl's
 * "name;" form, since "name:" means "remove this header". */
static struct curl_slist *
add_header(struct curl_slist *l, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    char *line = xmalloc(nl + vl + 3);
    struct curl_slist *r;

    if (vl == 0) {
        snprintf(line, nl + 2, "%s;", name);
    } else {
        memcpy(line, name, nl);
        memcpy(line + nl, ": ", 2);
        memcpy(line + nl + 2, value, vl + 1);
    }
    r = slist_add(l, line);
    wipe(line, nl + vl + 3);
    free(line);
    return r;
}

static bool
req_valid(const struct http_request *req)
{
    if (req->url == NULL || !(has_prefix_ci(req->url, "http://") ||
                              has_prefix_ci(req->url, "https://")))
        return false;
    if (strpbrk(req->url, "\r\n ") != NULL)
        return false;
    if (req->method != NULL &&
        (req->method[0] == '\0' || strpbrk(req->method, "\r\n :") != NULL))
        return false;
    for (size_t i = 0; i < req->nheaders; i++) {
        const struct http_header *h = &req->headers[i];
        if (h->name == NULL || h->value == NULL || h->name[0] == '\0' ||
            strpbrk(h->name, "\r\n :;") != NULL ||
            strpbrk(h->value, "\r\n") != NULL)
            return false;
    }
    return true;
}

static bool
req_has_header(const struct http_request *req, const char *name)
{
    for (size_t i = 0; i < req->nheaders; i++) {
        if (strcasecmp(req->headers[i].name, name) == 0)
            return true;
    }
    return false;
}

/* set_method picks curl's way of sending method with or without a body. */
static void
set_method(struct http_call *call, const struct http_request *req)
{
    CURL *e = call->easy;
    bool body = req->body != NULL;
    const char *m = req->method ? req->method : (body ? "POST" : "GET");

    if (strcmp(m, "HEAD") == 0) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (body || strcmp(m, "POST") == 0 || strcmp(m, "PUT") == 0 ||
               strcmp(m, "PATCH") == 0) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)call->body_len);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, call->body ? call->body : "");
        if (strcmp(m, "POST") != 0)
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m);
    } else if (strcmp(m, "GET") != 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m);
    } else {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
}

int
http_send(http_client *c, const struct http_request *req, http_done_cb cb,
          void *arg, http_call **out)
{
    struct http_call *call;
    int64_t timeout;
    long connect_timeout = c->connect_timeout_ms;
    CURL *e;
    CURLMcode mrc;

    if (c->closing)
        return -ESHUTDOWN;
    if (req == NULL || cb == NULL || !req_valid(req))
        return -EINVAL;
    timeout = req->timeout_ms > 0 ? req->timeout_ms : HTTP_DEFAULT_TIMEOUT_MS;
    e = curl_easy_init();
    if (e == NULL) {
        log_error("curl_easy_init failed");
        return -EIO;
    }
    call = xcalloc(1, sizeof(*call));
    call->c = c;
    call->easy = e;
    call->cb = cb;
    call->arg = arg;
    call->content_length = -1;
    if (req->body != NULL) {
        call->body = xmalloc(req->body_len + 1);
        memcpy(call->body, req->body, req->body_len);
        call->body[req->body_len] = '\0';
        call->body_len = req->body_len;
    }
    for (size_t i = 0; i < req->nheaders; i++)
        call->hdrs =
            add_header(call->hdrs, req->headers[i].name, req->headers[i].value);
    /* curl would add "Expect: 100-continue" to large bodies (a round trip
     * lost) and a form Content-Type to any body; "Name:" removes them. */
    if (!req_has_header(req, "expect"))
        call->hdrs = slist_add(call->hdrs, "Expect:");
    if (req->body != NULL && !req_has_header(req, "content-type"))
        call->hdrs = slist_add(call->hdrs, "Content-Type:");
    if (connect_timeout > timeout)
        connect_timeout = (long)timeout;

    curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)call);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, call->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)c->max_response);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, call);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, call);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, call->hdrs);
    set_method(call, req);
    if (curl_easy_setopt(e, CURLOPT_URL, req->url) != CURLE_OK) {
        curl_easy_cleanup(e);
        slist_free_wiped(call->hdrs);
        free(call->body);
        free(call);
        return -EINVAL;
    }

    call->start_ms = clock_mono_ms();
    call->next = c->calls;
    if (c->calls != NULL)
        c->calls->prev = call;
    c->calls = call;
    c->inflight++;
    mrc = curl_multi_add_handle(c->multi, e);
    if (mrc != CURLM_OK) {
        log_error("curl_multi_add_handle: %s", curl_multi_strerror(mrc));
        call_unlink(c, call);
        curl_easy_cleanup(e);
        slist_free_wiped(call->hdrs);
        free(call->body);
        free(call);
        return -EIO;
    }
    if (out != NULL)
        *out = call;
    return 0;
}

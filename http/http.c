/* http.c: libcurl's multi interface driven by a libuv loop (the glue of
 * the stepq_http client: sockets, the timer, collecting finished transfers,
 * the client's life; one call's setup and capture are in call.c).
 *
 * curl tells us which sockets to watch (socket_cb) and when to wake it up
 * (timer_cb); we watch them with one uv_poll_t per socket and one uv_timer_t
 * per client, and hand every event back with curl_multi_socket_action. After
 * each of those calls check_multi_info collects finished transfers: this is
 * the only place, besides http_cancel and http_client_close, where user
 * callbacks run, and it is never inside a curl callback, so callbacks may
 * call back into the client (CONVENTIONS §10).
 */
#include "http/http.h"

#include <errno.h>
#include <stdlib.h>

#include <curl/curl.h>
#include <uv.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "http/internal.h"

static uv_once_t global_once = UV_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void
global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- libuv side ------------------------------------------------------- */

static void check_multi_info(struct http_shard *sh);
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

/* handle_closed runs after the timer, the due handle or a socket's poll
 * handle closed. The client is freed with its last handle, once curl is
 * cleaned up. */
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
    free(c->shards);
    free(c->user_agent);
    free(c);
    if (cb != NULL)
        cb(arg);
}

static void
on_poll_close(uv_handle_t *h)
{
    struct sock *s = h->data;
    http_client *c = s->sh->c;

    free(s);
    handle_closed(c);
}

static void
on_timer_close(uv_handle_t *h)
{
    struct http_shard *sh = h->data;

    handle_closed(sh->c);
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
    struct http_shard *sh = s->sh;
    int flags = 0, running = 0;
    CURLMcode rc;

    if (sh->c->cleaned)
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
    rc = curl_multi_socket_action(sh->multi, s->fd, flags, &running);
    if (rc != CURLM_OK)
        log_error("curl_multi_socket_action: %s", curl_multi_strerror(rc));
    check_multi_info(sh);
}

static void
timeout_action(struct http_shard *sh)
{
    int running = 0;
    CURLMcode rc;

    if (sh->c->cleaned)
        return;
    rc = curl_multi_socket_action(sh->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    if (rc != CURLM_OK)
        log_error("curl_multi_socket_action: %s", curl_multi_strerror(rc));
    /* Always, whatever running says: a timeout may have finished some. */
    check_multi_info(sh);
}

static void
on_timer(uv_timer_t *t)
{
    timeout_action(t->data);
}

/* A timeout of 0 ms (curl asks for one whenever a transfer is added) runs
 * from the idle phase of the next loop iteration, before its poll, instead
 * of a 1 ms timer: that timer put a millisecond into every request and held
 * one-at-a-time work near 600 steps/s (CONVENTIONS 10.2). Stopped first:
 * curl may ask for 0 again from inside the call, which starts it again. */
static void
on_due(uv_idle_t *h)
{
    uv_idle_stop(h);
    timeout_action(h->data);
}

/* ---- curl side: callbacks (no curl calls in here but curl_multi_assign,
 * which curl documents as allowed from its multi callbacks) -------------- */

static int
socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct http_shard *sh = userp;
    http_client *c = sh->c;
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
        s->sh = sh;
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
        curl_multi_assign(sh->multi, fd, s);
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
    struct http_shard *sh = userp;

    (void)multi;
    if (sh->c->cleaned)
        return 0;
    if (timeout_ms < 0) {
        uv_timer_stop(&sh->timer);
        uv_idle_stop(&sh->due);
        return 0;
    }
    if (timeout_ms == 0) {
        /* Never a 0 ms uv timer: libuv 1.44 runs one started from a timer
         * callback again in the same timer phase (on_due). */
        uv_timer_stop(&sh->timer);
        uv_idle_start(&sh->due, on_due);
        return 0;
    }
    uv_idle_stop(&sh->due);
    uv_timer_start(&sh->timer, on_timer, (uint64_t)timeout_ms, 0);
    return 0;
}

static void
check_multi_info(struct http_shard *sh)
{
    http_client *c = sh->c;
    CURLMsg *msg;
    int pending = 0;

    enter(c);
    while (!c->closing && (msg = curl_multi_info_read(sh->multi, &pending))) {
        char *priv = NULL;
        CURL *easy;
        CURLcode rc;

        if (msg->msg != CURLMSG_DONE)
            continue;
        /* msg is invalid after remove_handle: copy what we need first. */
        easy = msg->easy_handle;
        rc = msg->data.result;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
        http__finish(c, (struct http_call *)priv, rc);
    }
    /* Connections made or calls ended in that action free places for
     * the queued calls. */
    if (!c->closing)
        http__admit(c);
    leave(c);
}

/* ---- client ----------------------------------------------------------- */

/* The multi handle of shard sh; its uv handles are set up by the caller
 * once every shard has one. */
static int
shard_init(http_client *c, struct http_shard *sh,
           const struct http_client_opts *opts)
{
    sh->c = c;
    if ((sh->multi = curl_multi_init()) == NULL) {
        log_error("curl_multi_init failed");
        return -EIO;
    }
    curl_multi_setopt(sh->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(sh->multi, CURLMOPT_SOCKETDATA, sh);
    curl_multi_setopt(sh->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(sh->multi, CURLMOPT_TIMERDATA, sh);
    curl_multi_setopt(sh->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                      opts->max_host_connections);
    curl_multi_setopt(sh->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
                      opts->max_total_connections);
    /* libcurl sizes its connection cache to the transfers in flight, so
     * a burst of finished transfers closes connections the next burst
     * opens again (1,178 connects for 20,000 requests at concurrency
     * 256 in bench/worker.py, 201 with the cache held at 256). */
    if (opts->max_idle_connections > 0)
        curl_multi_setopt(
            sh->multi, CURLMOPT_MAXCONNECTS,
            ((long)opts->max_idle_connections + (long)c->nshards - 1) /
                (long)c->nshards);
    return 0;
}

int
http_client_new(uv_loop_t *loop, const struct http_client_opts *opts,
                http_client **out)
{
    static const struct http_client_opts defaults = {0};
    http_client *c;

    if (opts == NULL)
        opts = &defaults;
    if (loop == NULL || out == NULL || opts->max_host_connections < 0 ||
        opts->max_total_connections < 0 || opts->max_idle_connections < 0 ||
        opts->connect_timeout_ms < 0 || opts->max_connecting < 0)
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
    c->max_connecting = opts->max_connecting > 0 ? (size_t)opts->max_connecting
                                                 : HTTP_DEFAULT_MAX_CONNECTING;
    c->user_agent = xstrdup(opts->user_agent ? opts->user_agent : "stepq/0.1");
    c->limited =
        opts->max_host_connections > 0 || opts->max_total_connections > 0;
    /* A connection limit is the multi handle's: then one shard holds all. */
    c->nshards = 1;
    if (!c->limited && opts->max_idle_connections > HTTP_SHARD_CONNECTIONS)
        c->nshards =
            ((size_t)opts->max_idle_connections + HTTP_SHARD_CONNECTIONS - 1) /
            HTTP_SHARD_CONNECTIONS;
    if (c->nshards > HTTP_SHARDS_MAX)
        c->nshards = HTTP_SHARDS_MAX;
    c->shards = xcalloc(c->nshards, sizeof(*c->shards));
    /* TLS sessions are shared by every call of the client, whatever its
     * shard: each call has its own easy handle, whose own session cache
     * would die with it, so without the share no connection would resume
     * a session (a full handshake each time). Connections are not shared:
     * the shards exist to keep each connection cache small. */
    if ((c->share = curl_share_init()) == NULL ||
        curl_share_setopt(c->share, CURLSHOPT_SHARE,
                          CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK) {
        log_error("curl_share_init failed");
        curl_share_cleanup(c->share);
        free(c->shards);
        free(c->user_agent);
        free(c);
        return -EIO;
    }
    for (size_t i = 0; i < c->nshards; i++) {
        if (shard_init(c, &c->shards[i], opts) != 0) {
            while (i-- > 0)
                curl_multi_cleanup(c->shards[i].multi);
            curl_share_cleanup(c->share);
            free(c->shards);
            free(c->user_agent);
            free(c);
            return -EIO;
        }
    }
    /* uv_timer_init cannot fail on a live loop (it only links the handle). */
    for (size_t i = 0; i < c->nshards; i++) {
        struct http_shard *sh = &c->shards[i];
        uv_timer_init(loop, &sh->timer);
        sh->timer.data = sh;
        uv_idle_init(loop, &sh->due);
        sh->due.data = sh;
    }
    c->open_handles = 2 * c->nshards;
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
    for (size_t i = 0; i < c->nshards; i++) {
        curl_multi_cleanup(c->shards[i].multi);
        c->shards[i].multi = NULL;
    }
    /* Every easy handle using it is cleaned up (deliver). */
    curl_share_cleanup(c->share);
    c->share = NULL;
    while (c->socks != NULL) {
        struct sock *s = c->socks;
        sock_unlink(c, s);
        uv_close((uv_handle_t *)&s->poll, on_poll_close);
    }
    for (size_t i = 0; i < c->nshards; i++) {
        uv_close((uv_handle_t *)&c->shards[i].timer, on_timer_close);
        uv_close((uv_handle_t *)&c->shards[i].due, on_timer_close);
    }
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
        http__cancel_one(call);
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
    http__cancel_one(call);
    if (!c->closing)
        http__admit(c);
    leave(c);
    return 0;
}

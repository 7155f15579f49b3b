/* server.c: the listening socket, libmicrohttpd on the libuv loop, the
 * checks every request passes before its route (token, origin, size), and
 * the graceful stop. */
#include "serve/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "common/log.h"
#include "common/xalloc.h"

/* The answer to an address slowed after failed logins. */
#define SLOWED                                                                 \
    "{\"error\":{\"code\":\"too_many_failures\",\"message\":\"too many "       \
    "failed logins from this address: wait for Retry-After seconds\"}}"

/* How long a stop waits for requests under way. */
#define STOP_WAIT_MS 5000
/* How often the store's clock offset is measured again (as workers do). */
#define CLOCK_SYNC_MS 60000
/* Descriptors kept for the store, logs and the loop beside connections. */
#define SPARE_FDS 64

/* One TCP connection: when it began waiting for a request's headers (at
 * its start, and again after each answer), and whether they came. A
 * connection still without headers --timeout after that is closed, so a
 * client sending a byte now and then cannot hold it (libmicrohttpd's own
 * timeout counts idle time only). */
struct serve_conn {
    struct serve_conn *prev, *next;
    struct MHD_Connection *c;
    struct serve_waits *waits; /* the server's, for serve_waits_of */
    int64_t waiting_since;     /* loop time; 0: a request is under way */
};

struct serve {
    const struct serve_opts *o;
    struct serve_conn *conns; /* every open connection */
    struct MHD_Daemon *d;
    uv_loop_t loop;
    uv_poll_t poll;
    uv_timer_t timer, clock, deadline;
    uv_signal_t sigint, sigterm;
    int active;             /* requests begun and not completed */
    bool stopping;          /* a signal came: no new connections */
    int64_t stop_by;        /* loop time after which the stop waits no more */
    struct serve_gate gate; /* failed logins per address */
    struct serve_waits *waits; /* GET /v1/jobs/ID?wait= (wait.c) */
};

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
    char buf[512];

    (void)cls;
    vsnprintf(buf, sizeof(buf), fmt, ap);
    buf[strcspn(buf, "\n")] = '\0';
    log_warn("serve: %s", buf);
}

static void pump(struct serve *s);

/* The connection of c: waiting for headers (since now) or not. */
static void
mark_waiting(struct serve *s, struct MHD_Connection *c, bool waiting)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct serve_conn *sc = ci != NULL ? ci->socket_context : NULL;

    if (sc != NULL)
        sc->waiting_since = waiting ? (int64_t)uv_now(&s->loop) : 0;
}

static void
on_connection(void *cls, struct MHD_Connection *c, void **ctx,
              enum MHD_ConnectionNotificationCode toe)
{
    struct serve *s = cls;
    struct serve_conn *sc = *ctx;

    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        sc = xcalloc(1, sizeof(*sc));
        sc->c = c;
        sc->waits = s->waits;
        sc->waiting_since = (int64_t)uv_now(&s->loop);
        sc->next = s->conns;
        if (s->conns != NULL)
            s->conns->prev = sc;
        s->conns = sc;
        *ctx = sc;
        return;
    }
    if (sc == NULL)
        return;
    if (sc->prev != NULL)
        sc->prev->next = sc->next;
    else
        s->conns = sc->next;
    if (sc->next != NULL)
        sc->next->prev = sc->prev;
    free(sc);
    *ctx = NULL;
}

/* Closes the connections whose headers have not come within --timeout:
 * shutdown() makes libmicrohttpd see the end and clean up as usual. */
static void
on_deadline(uv_timer_t *t)
{
    struct serve *s = t->data;
    int64_t now = (int64_t)uv_now(&s->loop),
            limit = (int64_t)s->o->timeout_s * 1000;

    for (struct serve_conn *sc = s->conns; sc != NULL; sc = sc->next) {
        const union MHD_ConnectionInfo *ci;
        if (sc->waiting_since == 0 || now - sc->waiting_since < limit)
            continue;
        ci = MHD_get_connection_info(sc->c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci != NULL) {
            log_info("serve: no request within %us: connection closed",
                     s->o->timeout_s);
            (void)shutdown(ci->connect_fd, SHUT_RDWR);
            sc->waiting_since = 0; /* once */
        }
    }
    pump(s);
}

/* Answers a request whose caller is not let in: 401 for a missing or
 * wrong token, 429 with Retry-After for an address that failed too often,
 * 503 when the store could not be read. */
static enum MHD_Result
refuse(struct MHD_Connection *c, int rc, unsigned retry_s)
{
    static const char body[] =
        "{\"error\":{\"code\":\"unauthorized\",\"message\":\"this server "
        "wants Authorization: Bearer TOKEN (a named operator's token once "
        "the database has operators)\"}}";
    struct MHD_Response *resp;
    enum MHD_Result ok;
    char after[16];

    if (rc == -EAGAIN) {
        log_warn("serve: too many failed logins: refusing for %us", retry_s);
        snprintf(after, sizeof(after), "%u", retry_s);
        resp = MHD_create_response_from_buffer(
            sizeof(SLOWED) - 1, (void *)SLOWED, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                "application/json");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, after);
        ok = MHD_queue_response(c, MHD_HTTP_TOO_MANY_REQUESTS, resp);
        MHD_destroy_response(resp);
        return ok;
    }
    if (rc != -EACCES)
        return serve_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable",
                                 "cannot read the operators: the database is "
                                 "busy or away; try again");
    resp = MHD_create_response_from_buffer(sizeof(body) - 1, (void *)body,
                                           MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "application/json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    ok = MHD_queue_response(c, MHD_HTTP_UNAUTHORIZED, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* The first call of a request: its headers are in. Answers at once when
 * the request cannot go on (401, 403, 413); otherwise keeps its state.
 * The web view's files are served without a token: they hold no data. */
static enum MHD_Result
begin(struct serve *s, struct MHD_Connection *c, const char *method,
      const char *url, void **state)
{
    const char *cl;
    struct serve_req *r;
    unsigned retry_s = 0;
    int rc;
    bool page = (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) &&
                serve_asset_find(url) != NULL;

    s->active++;
    *state = r = xcalloc(1, sizeof(*r));
    mark_waiting(s, c, false);
    if (!page &&
        (rc = serve_identify(s->o, &s->gate, c, (int64_t)uv_now(&s->loop),
                             &r->who, &retry_s)) != 0)
        return refuse(c, rc, retry_s);
    /* A page's request has no caller (SERVE_OPEN): checked as before. */
    if (s->o->no_auth && r->who.mode == SERVE_OPEN && !serve_host_is_local(c))
        return serve_reply_error(c, MHD_HTTP_FORBIDDEN, "cross_site",
                                 "without a token, only requests for "
                                 "127.0.0.1, localhost or [::1] are served");
    if (serve_cross_site(c, method))
        return serve_reply_error(c, MHD_HTTP_FORBIDDEN, "cross_site",
                                 "a write from another site's page is "
                                 "refused");
    cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
    /* The pages are answered without a token, so they read no body: a
     * client without one must not make the server hold --max-body. */
    if (page && ((cl != NULL && strtoull(cl, NULL, 10) > 0) ||
                 MHD_lookup_connection_value(
                     c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING)))
        return serve_reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "too_large",
                                 "a page request takes no body");
    if (cl != NULL && strtoull(cl, NULL, 10) > s->o->max_body)
        return serve_reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "too_large",
                                 "the body is larger than %zu bytes",
                                 s->o->max_body);
    return MHD_YES;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url,
           const char *method, const char *version, const char *upload,
           size_t *upload_size, void **state)
{
    struct serve *s = cls;
    struct serve_req *r = *state;

    (void)version;
    if (r == NULL)
        return begin(s, c, method, url, state);
    if (*upload_size > 0) {
        if (r->dropped > 0 || r->len + *upload_size > s->o->max_body) {
            /* No length was announced (chunked), and libmicrohttpd 0.9.75
             * cannot answer in the middle of a body: the rest is read and
             * dropped, and its end answered with a 413. Past as much
             * again, the connection is closed rather than read on. */
            r->dropped += *upload_size;
            *upload_size = 0;
            if (r->dropped > s->o->max_body) {
                log_warn("serve: a body without a length went on past "
                         "twice --max-body (%zu bytes): connection closed",
                         s->o->max_body);
                return MHD_NO;
            }
            return MHD_YES;
        }
        if (r->len + *upload_size + 1 > r->cap) {
            r->cap = (r->len + *upload_size + 1) * 2;
            if (r->cap > s->o->max_body + 1)
                r->cap = s->o->max_body + 1;
            r->body = xrealloc(r->body, r->cap);
        }
        memcpy(r->body + r->len, upload, *upload_size);
        r->len += *upload_size;
        r->body[r->len] = '\0';
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->dropped > 0)
        return serve_reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "too_large",
                                 "the body is larger than %zu bytes",
                                 s->o->max_body);
    return serve_route(s->o, &r->who, c, method, url, r->body, r->len);
}

static void
on_completed(void *cls, struct MHD_Connection *c, void **state,
             enum MHD_RequestTerminationCode why)
{
    struct serve *s = cls;
    struct serve_req *r = *state;

    (void)why;
    if (r == NULL)
        return;
    serve_waits_forget(s->waits, c);
    free(r->body);
    free(r);
    *state = NULL;
    s->active--;
    mark_waiting(s, c, true); /* kept alive: the next request's turn */
}

static void on_timer(uv_timer_t *t);

/* Runs what libmicrohttpd has to do now and arms the timer for what it
 * has to do next; during a stop, ends the loop once no request is under
 * way (or the wait is over). */
static void
pump(struct serve *s)
{
    MHD_UNSIGNED_LONG_LONG ms = 0;
    uint64_t wait;

    MHD_run(s->d);
    if (s->stopping &&
        (s->active == 0 || (int64_t)uv_now(&s->loop) >= s->stop_by)) {
        uv_stop(&s->loop);
        return;
    }
    wait = MHD_get_timeout(s->d, &ms) == MHD_YES ? (uint64_t)ms : 1000;
    if (s->stopping && wait > 50)
        wait = 50;
    uv_timer_start(&s->timer, on_timer, wait, 0);
}

static void
on_timer(uv_timer_t *t)
{
    pump(t->data);
}

/* Runs the daemon after waiters were resumed (wait.c). */
static void
kick(void *arg)
{
    pump(arg);
}

static void
on_poll(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    pump(p->data);
}

static void
on_signal(uv_signal_t *h, int signum)
{
    struct serve *s = h->data;
    MHD_socket fd;

    if (s->stopping)
        return;
    log_info("serve: signal %d: stopping (no new connections)", signum);
    s->stopping = true;
    s->stop_by = (int64_t)uv_now(&s->loop) + STOP_WAIT_MS;
    serve_waits_stop(s->waits); /* each answered with its job as it is */
    fd = MHD_quiesce_daemon(s->d);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
    pump(s);
}

/* The store's clock, measured again: times written and the metrics use
 * the store's clock, and a host's drifts. */
static void
on_clock(uv_timer_t *t)
{
    struct serve *s = t->data;

    if (q_clock_sync(s->o->db) != 0)
        log_warn("serve: cannot measure the database's clock again; the "
                 "last offset stays");
}

static void
close_cb(uv_handle_t *h)
{
    (void)h;
}

static void
start_loop(struct serve *s, int epoll_fd)
{
    uv_poll_init(&s->loop, &s->poll, epoll_fd);
    uv_timer_init(&s->loop, &s->timer);
    uv_timer_init(&s->loop, &s->clock);
    uv_timer_init(&s->loop, &s->deadline);
    uv_signal_init(&s->loop, &s->sigint);
    uv_signal_init(&s->loop, &s->sigterm);
    s->waits = serve_waits_new(&s->loop, s->o, kick, s);
    s->poll.data = s->timer.data = s->clock.data = s->deadline.data = s;
    uv_timer_start(&s->deadline, on_deadline, 250, 250);
    s->sigint.data = s->sigterm.data = s;
    uv_timer_start(&s->clock, on_clock, CLOCK_SYNC_MS, CLOCK_SYNC_MS);
    uv_poll_start(&s->poll, UV_READABLE, on_poll);
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    pump(s);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&s->poll, close_cb);
    uv_close((uv_handle_t *)&s->timer, close_cb);
    uv_close((uv_handle_t *)&s->clock, close_cb);
    uv_close((uv_handle_t *)&s->deadline, close_cb);
    uv_close((uv_handle_t *)&s->sigint, close_cb);
    uv_close((uv_handle_t *)&s->sigterm, close_cb);
    serve_waits_stop(s->waits); /* none may stay suspended at the stop */
    serve_waits_close(s->waits);
    s->waits = NULL; /* requests the daemon's stop completes forget none */
    uv_run(&s->loop, UV_RUN_DEFAULT);
}

/* How many connections may be open at once: the asked number, with the
 * soft limit on open files raised towards the hard one to hold them (a
 * soft limit of 1,024 is common, and would refuse the 1,000th client);
 * where even the hard limit is too low, as many as it allows. */
static unsigned
connection_limit(unsigned want)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)want + SPARE_FDS;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return want;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        rlim_t cur = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need
                          ? need
                          : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            rl.rlim_cur = cur;
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        unsigned n = rl.rlim_cur > 2 * SPARE_FDS
                         ? (unsigned)(rl.rlim_cur - SPARE_FDS)
                         : SPARE_FDS;
        log_warn("serve: open files are limited to %llu: at most %u "
                 "connections at once",
                 (unsigned long long)rl.rlim_cur, n);
        return n;
    }
    return want;
}

struct serve_waits *
serve_waits_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return ((struct serve_conn *)ci->socket_context)->waits;
}

bool
serve_tls_supported(void)
{
    return MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES;
}

int
serve_run(const struct serve_opts *o, char *err, size_t len)
{
    struct serve s = {.o = o};
    const union MHD_DaemonInfo *info;
    char addr[INET6_ADDRSTRLEN + 16];
    int fd = -1, rc;

    if ((rc =
             serve_open_listener(o->listen, &fd, addr, sizeof(addr), err, len)))
        return rc;
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)o->tls_key},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)o->tls_cert},
        {MHD_OPTION_END, 0, NULL}};
    bool https = o->tls_cert != NULL && o->tls_key != NULL;

    s.d = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME |
            (https ? MHD_USE_TLS : 0),
        0, NULL, NULL, on_request, &s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, &s,
        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT,
        o->timeout_s, MHD_OPTION_CONNECTION_LIMIT,
        connection_limit(o->max_conns ? o->max_conns : SERVE_MAX_CONNS_DEFAULT),
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, &s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, &s, MHD_OPTION_ARRAY,
        https ? tls : tls + 2, MHD_OPTION_END);
    info = s.d ? MHD_get_daemon_info(s.d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    if (info == NULL || uv_loop_init(&s.loop) != 0) {
        snprintf(err, len, "cannot start the HTTP server on %s%s", addr,
                 https ? " (is --tls-key the key of --tls-cert, both PEM?)"
                       : "");
        if (s.d != NULL)
            MHD_stop_daemon(s.d); /* closes fd */
        else
            close(fd);
        return -EIO;
    }
    if (o->ready != NULL)
        o->ready(addr, o->arg);
    start_loop(&s, info->epoll_fd);
    MHD_stop_daemon(s.d); /* closes fd unless a stop closed it already */
    (void)uv_loop_close(&s.loop);
    return 0;
}

/* mock.c: the listener of the mock on a libuv loop: binding, accepting
 * connections, reading from them, and starting and stopping the mock.
 *
 * conn.c queues and writes the replies of a connection (and plays the wire
 * faults), request.c parses the requests with libhttp-parser and logs them,
 * answer.c and body.c decide what each reply says.
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
#include <sys/socket.h>
#include <unistd.h>

#include <http_parser.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "mock/internal.h"

void
mock__maybe_done(struct mock *m)
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
            mock__conn_close(c);
            return;
        }
        c->eof = true;
        uv_read_stop(s);
        mock__conn_flush(c);
        return;
    }
    if (c->done)
        return;
    mock__conn_parse(c, buf->base, (size_t)nread);
}

void
mock__conn_read_start(struct conn *c)
{
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
        mock__conn_close(c);
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
        mock__conn_close(c);
        return;
    }
    m->stats.connections++;
    uv_tcp_nodelay(&c->tcp, 1);
    mock__conn_read_start(c);
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
    mock__maybe_done(m);
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
        mock__conn_close(c);
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

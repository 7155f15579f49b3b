/* conn.c: the reply queue of one connection and the wire faults.
 *
 * Replies go out in request order (HTTP/1.1 pipelining): each one waits in
 * its connection's queue until its delay timer fires and every reply before
 * it has been written. A hung reply therefore blocks its connection, exactly
 * like a model server that never answers. The faults that act on the wire
 * (close, close_mid_body, drip, bad_chunked, huge_headers) are played here.
 */
#include "mock/internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

/* How many answers, and how many bytes not yet taken by the client, one
 * connection may hold before it stops reading requests. No HTTP client we
 * know pipelines more than a few; curl does not pipeline at all. */
#define MOCK_CONN_MAX_QUEUED 64
#define MOCK_CONN_MAX_WRITE  (1u << 20)

struct wreq {
    uv_write_t req;
    char *buf; /* owned; NULL for static data */
};

static void start_drip(struct conn *c, struct resp *r);

static void
conn_unref(struct conn *c)
{
    struct mock *m = c->m;

    if (--c->refs > 0)
        return;
    mock__request_reset(c);
    free(c->rest);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        m->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    m->nconns--;
    free(c);
    mock__maybe_done(m);
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

void
mock__conn_close(struct conn *c)
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
    c->nqueued = 0;
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
        mock__conn_close(c);
    else if (status == 0)
        mock__conn_resume(c);
}

bool
mock__conn_is_full(const struct conn *c)
{
    return c->nqueued >= MOCK_CONN_MAX_QUEUED ||
           c->tcp.write_queue_size >= MOCK_CONN_MAX_WRITE;
}

/* pop_head takes the answer at the head of c's queue off it. */
static struct resp *
pop_head(struct conn *c)
{
    struct resp *r = c->head;

    c->head = r->next;
    if (c->head == NULL)
        c->tail = NULL;
    c->nqueued--;
    return r;
}

void
mock__conn_write(struct conn *c, char *owned, const char *data, size_t len)
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
        mock__conn_close(c);
    }
}

static void
on_shutdown(uv_shutdown_t *req, int status)
{
    struct conn *c = req->data;

    (void)status;
    free(req);
    mock__conn_close(c);
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
        mock__conn_close(c);
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
        mock__conn_write(c, NULL, r->buf + r->sent, 1);
        r->sent++;
        return;
    }
    uv_timer_stop(t);
    resp_free(pop_head(c));
    mock__conn_flush(c);
}

static void
start_drip(struct conn *c, struct resp *r)
{
    if (r->sent > 0)
        return; /* already dripping */
    mock__conn_write(c, NULL, r->buf, r->head_len);
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

void
mock__conn_flush(struct conn *c)
{
    /* After a stall nothing more is sent; the client's close ends it. */
    if (c->stalled) {
        if (c->eof && !c->closing)
            mock__conn_close(c);
        return;
    }
    while (!c->closing && c->head != NULL && c->head->ready) {
        struct resp *r = c->head;
        bool stop = false;

        if (r->fault == MOCK_FAULT_DRIP) {
            start_drip(c, r); /* stays at the head until all is sent */
            return;
        }
        pop_head(c);
        if (r->fault == MOCK_FAULT_CLOSE) {
            resp_free(r);
            mock__conn_close(c);
            return;
        }
        mock__conn_write(c, r->buf, NULL, r->len);
        r->buf = NULL;
        if (r->fault == MOCK_FAULT_STALL) {
            c->stalled = true;
            resp_free(r);
            return;
        }
        stop = r->fault == MOCK_FAULT_CLOSE_MID_BODY ||
               r->fault == MOCK_FAULT_BAD_CHUNKED ||
               r->fault == MOCK_FAULT_BAD_STATUS || r->close_after;
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
        mock__conn_close(c); /* nothing will ever be sent: free it now */
}

static void
on_resp_timer(uv_timer_t *t)
{
    struct resp *r = t->data;

    r->ready = true;
    mock__conn_flush(r->c);
}

void
mock__conn_enqueue(struct conn *c, struct mock_reply *rep, bool close_after)
{
    struct resp *r = xcalloc(1, sizeof(*r));
    size_t body = rep->body_len;

    r->c = c;
    r->fault = rep->fault;
    r->close_after = close_after;
    if (r->fault == MOCK_FAULT_CLOSE_MID_BODY || r->fault == MOCK_FAULT_STALL)
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
    } else if (r->fault == MOCK_FAULT_BAD_STATUS) {
        /* Not HTTP: a status that is not a number, then the close. */
        static const char head[] = "HTTP/1.1 abc\r\n\r\n";
        r->len = sizeof(head) - 1;
        r->buf = xmalloc(r->len);
        memcpy(r->buf, head, r->len);
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
    c->nqueued++;
    if (r->fault == MOCK_FAULT_HANG)
        return;
    if (rep->delay_ms <= 0) {
        r->ready = true;
        mock__conn_flush(c);
        return;
    }
    uv_timer_init(c->m->loop, &r->timer);
    r->timer.data = r;
    r->timer_on = true;
    c->refs++;
    uv_timer_start(&r->timer, on_resp_timer, (uint64_t)rep->delay_ms, 0);
}

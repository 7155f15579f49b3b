/* admit.c: how many calls of the client connect at once.
 *
 * A burst of new calls (5,000 at once) would otherwise all start their
 * TCP connect and TLS handshake together: each handshake costs the loop
 * CPU, so all of them finish late, and libcurl counts that wait toward
 * each one's connect timeout. A connect timeout caused by our own
 * queueing would then be blamed on the endpoint (its breaker opens, jobs
 * fail). Instead at most max_connecting calls wait for a connection (a
 * new one or one from the cache); the others wait in the client's queue,
 * oldest first, and are put on a shard's multi handle as places free up:
 * when curl says a call's connection is ready (prereq_cb) or a call ends.
 * A call's connect timeout starts when it leaves the queue; its whole
 * timeout counts from http_send.
 *
 * HTTP/2: an https:// call that may multiplex goes to the shard its host
 * hashes to, so the calls of one host share that shard's connections
 * (spread over the least busy shards, each shard would open its own).
 * With PIPEWAIT a burst waits for the first connection's handshake and
 * then takes streams on it; such a call counts as connecting until curl
 * says its stream may go (prereq_cb), like a call waiting for its own
 * handshake, and its connect timeout covers that same wait. A call
 * capped by max_connections waits in our queue, not in curl's pending
 * list: there the connect timeout would run while it waits for a stream
 * of a full connection, and a slow answer would time out calls that
 * never got to the wire.
 *
 * PIPEWAIT covers a host's first connection only: libcurl 7.88 does not
 * give a call a stream of a connection still being made once the
 * host's first one is full (its MAX_CONCURRENT_STREAMS, ours or the
 * server's), so every call of a burst beyond it opened a connection of
 * its own (73 for 200 in flight against nginx's 128 streams, measured
 * with libcurl alone; 28 for 256 in flight in bench/worker.py). So the
 * calls of a host that may multiplex grow its connections one at a time:
 * once its calls on the wire fill the connections it is known to have
 * (HTTP_H2_STREAMS each), one call is let through to open the next and
 * the others wait in our queue until curl says that call's connection
 * is ready (prereq_cb). An answer over HTTP/1.x ends this for the host.
 */
#include "http/http.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "http/internal.h"

/* queue_remove takes call out of c's queue. */
static void
queue_remove(http_client *c, struct http_call *call)
{
    if (call->qprev != NULL)
        call->qprev->qnext = call->qnext;
    else
        c->qhead = call->qnext;
    if (call->qnext != NULL)
        call->qnext->qprev = call->qprev;
    else
        c->qtail = call->qprev;
    call->qprev = call->qnext = NULL;
}

/* http__settle takes call out of the queue or the connecting count, as its
 * state says, when it ends. */
void
http__settle(http_client *c, struct http_call *call)
{
    if (call->state == HTTP_CALL_QUEUED) {
        queue_remove(c, call);
    } else if (call->state == HTTP_CALL_CONNECTING) {
        assert(c->connecting > 0);
        c->connecting--;
    }
    call->state = HTTP_CALL_CONNECTED;
}

/* pool_note_conn counts the connection of local port port in p's
 * connections when it is one not seen since p was last idle. */
static void
pool_note_conn(struct http_pool *p, int port)
{
    size_t known = p->conns < HTTP_POOL_PORTS ? p->conns : HTTP_POOL_PORTS;

    for (size_t i = 0; i < known; i++) {
        if (p->ports[i] == port)
            return;
    }
    if (known < HTTP_POOL_PORTS)
        p->ports[known] = port;
    p->conns++;
}

/* curl calls this once the call's connection is ready (made, with its
 * TLS handshake, or reused), before the request goes: its place among
 * the connecting is free for a queued call (http__admit, after the
 * socket action). */
static int
prereq_cb(void *arg, char *conn_primary_ip, char *conn_local_ip,
          int conn_primary_port, int conn_local_port)
{
    struct http_call *call = arg;

    (void)conn_primary_ip;
    (void)conn_local_ip;
    (void)conn_primary_port;
    (void)conn_local_port;
    if (call->state == HTTP_CALL_CONNECTING) {
        assert(call->c->connecting > 0);
        call->c->connecting--;
        call->state = HTTP_CALL_CONNECTED;
    }
    if (call->opener) {
        assert(call->pool->opening > 0);
        call->pool->opening--;
        call->opener = false;
    }
    /* A connection not seen before is ready: HTTP_H2_STREAMS more may go.
     * The opener's call may have taken a stream that came free on one
     * already known instead: counting that as new would let a burst
     * through that curl meets with a connection for each call. */
    if (call->pool != NULL && call->multiplex)
        pool_note_conn(call->pool, conn_local_port);
    return CURL_PREREQFUNC_OK;
}

/* The length of url's "scheme://host:port" (what a connection serves). */
static size_t
origin_len(const char *url)
{
    const char *p = strstr(url, "://");

    p = p != NULL ? p + 3 : url;
    return (size_t)(p - url) + strcspn(p, "/?#");
}

/* FNV-1a of n bytes, case-folded (hosts are). */
static uint32_t
hash_ci(const char *s, size_t n)
{
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 'A' && ch <= 'Z')
            ch = (unsigned char)(ch - 'A' + 'a');
        h = (h ^ ch) * 16777619u;
    }
    return h;
}

void
http__route(http_client *c, struct http_call *call,
            const struct http_request *req)
{
    size_t n = origin_len(req->url);
    struct http_pool *p;

    call->multiplex =
        !req->http1_only && strncasecmp(req->url, "https://", 8) == 0;
    call->host_hash = hash_ci(req->url, n);
    if (req->max_connections <= 0 && !call->multiplex)
        return;
    for (p = c->pools; p != NULL; p = p->next) {
        if (p->cap == (req->max_connections > 0 ? req->max_connections : 0) &&
            strlen(p->key) == n && strncasecmp(p->key, req->url, n) == 0)
            break;
    }
    if (p == NULL) {
        p = xcalloc(1, sizeof(*p));
        p->key = xstrndup(req->url, n);
        p->cap = req->max_connections > 0 ? req->max_connections : 0;
        p->next = c->pools;
        c->pools = p;
    }
    call->pool = p;
}

void
http__pools_free(http_client *c)
{
    while (c->pools != NULL) {
        struct http_pool *p = c->pools;
        c->pools = p->next;
        free(p->key);
        free(p);
    }
}

/* Whether call, put on the wire, would need one more HTTP/2 connection
 * of its pool than its calls are known to fill. */
static bool
needs_new_h2(const struct http_call *call)
{
    const struct http_pool *p = call->pool;

    return p != NULL && call->multiplex && !p->h1 &&
           p->wire >= p->conns * HTTP_H2_STREAMS;
}

bool
http__pool_full(const struct http_call *call)
{
    const struct http_pool *p = call->pool;

    if (p == NULL)
        return false;
    if (p->cap > 0 &&
        p->wire >=
            (size_t)p->cap * (p->h2 && call->multiplex ? HTTP_H2_STREAMS : 1))
        return true;
    /* One new connection at a time (see the top of this file). */
    return needs_new_h2(call) && p->opening > 0;
}

void
http__pool_leave(struct http_call *call)
{
    struct http_pool *p = call->pool;

    assert(p->wire > 0);
    p->wire--;
    if (call->opener) {
        assert(p->opening > 0);
        p->opening--;
        call->opener = false;
    }
    /* Idle, its connections may close: known again as calls come. */
    if (p->wire == 0)
        p->conns = 0;
}

/* The shard for a new request: its host's when it may multiplex, else
 * the one with the fewest in flight (the first of them, so one at a time
 * keeps to one connection). */
static struct http_shard *
pick_shard(http_client *c, const struct http_call *call)
{
    struct http_shard *best = &c->shards[0];

    if (call->multiplex)
        return &c->shards[call->host_hash % c->nshards];
    for (size_t i = 1; i < c->nshards && best->inflight > 0; i++) {
        if (c->shards[i].inflight < best->inflight)
            best = &c->shards[i];
    }
    return best;
}

/* http__admit_one puts call on a shard's multi handle. Its timeout is what is
 * left of the request's after its time in the queue (at least 1 ms: one
 * that has waited it all out ends as a timeout, from curl). Returns 0, or
 * -EIO when curl refuses it (logged); call is then still the caller's. */
int
http__admit_one(http_client *c, struct http_call *call)
{
    CURL *e = call->easy;
    int64_t left = call->timeout_ms - (clock_mono_ms() - call->start_ms);
    long connect_timeout = c->connect_timeout_ms;
    CURLMcode mrc;

    if (left < 1)
        left = 1;
    if (connect_timeout > left)
        connect_timeout = (long)left;
    call->sh = pick_shard(c, call);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)left);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout);
    curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, prereq_cb);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, call);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, call->sh);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, call->sh);
    /* When every open connection has a request in flight, none is free
     * for this one: say so, and curl skips its search of the connection
     * cache, which walks every connection to the host (at 5,000 in flight
     * that search was most of the client's time). Not with a connection
     * limit, where a request may wait for one to be free, nor for one
     * that may take a stream of a busy HTTP/2 connection. */
    curl_easy_setopt(e, CURLOPT_FRESH_CONNECT,
                     !c->limited && !call->multiplex &&
                             call->sh->inflight >= call->sh->open_sockets
                         ? 1L
                         : 0L);
    call->sh->inflight++;
    if (needs_new_h2(call)) {
        call->opener = true;
        call->pool->opening++;
    }
    if (call->pool != NULL)
        call->pool->wire++;
    call->state = HTTP_CALL_CONNECTING;
    c->connecting++;
    mrc = curl_multi_add_handle(call->sh->multi, e);
    if (mrc != CURLM_OK) {
        log_error("curl_multi_add_handle: %s", curl_multi_strerror(mrc));
        c->connecting--;
        call->sh->inflight--;
        if (call->pool != NULL)
            http__pool_leave(call);
        call->sh = NULL;
        call->state = HTTP_CALL_QUEUED;
        return -EIO;
    }
    return 0;
}

void
http__admit(http_client *c)
{
    struct http_call *call = c->qhead, *next;

    /* Oldest first; a call whose pool is full stays, later ones of other
     * hosts may pass it. */
    for (; call != NULL && c->connecting < c->max_connecting; call = next) {
        next = call->qnext;
        if (http__pool_full(call))
            continue;
        queue_remove(c, call);
        if (http__admit_one(c, call) != 0) {
            call->state = HTTP_CALL_CONNECTED; /* out of the queue */
            call->res.error = HTTP_ERR_OTHER;
            snprintf(call->res.error_text, sizeof(call->res.error_text),
                     "curl refused the request");
            http__deliver(call);
        }
    }
}

/* Counts call in c's calls in flight and starts it, or queues it behind
 * the others (http__admit starts it when a place is free). Returns 0, or
 * -EIO when it could not be started (it is then in no list). */
int
http__enter(http_client *c, struct http_call *call)
{
    call->start_ms = clock_mono_ms();
    call->next = c->calls;
    if (c->calls != NULL)
        c->calls->prev = call;
    c->calls = call;
    c->inflight++;
    if (c->qhead == NULL && c->connecting < c->max_connecting &&
        !http__pool_full(call)) {
        if (http__admit_one(c, call) != 0) {
            http__call_unlink(c, call);
            return -EIO;
        }
        return 0;
    }
    call->qprev = c->qtail;
    if (c->qtail != NULL)
        c->qtail->qnext = call;
    else
        c->qhead = call;
    c->qtail = call;
    return 0;
}

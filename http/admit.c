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
 */
#include "http/http.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>

#include <curl/curl.h>

#include "common/clock.h"
#include "common/log.h"
#include "http/internal.h"

/* http__settle takes call out of the queue or the connecting count, as its
 * state says, when it ends. */
void
http__settle(http_client *c, struct http_call *call)
{
    if (call->state == HTTP_CALL_QUEUED) {
        if (call->qprev != NULL)
            call->qprev->qnext = call->qnext;
        else
            c->qhead = call->qnext;
        if (call->qnext != NULL)
            call->qnext->qprev = call->qprev;
        else
            c->qtail = call->qprev;
        call->qprev = call->qnext = NULL;
    } else if (call->state == HTTP_CALL_CONNECTING) {
        assert(c->connecting > 0);
        c->connecting--;
    }
    call->state = HTTP_CALL_CONNECTED;
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
    return CURL_PREREQFUNC_OK;
}

/* The shard for a new request: the one with the fewest in flight (the
 * first of them, so one at a time keeps to one connection). */
static struct http_shard *
pick_shard(http_client *c)
{
    struct http_shard *best = &c->shards[0];

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
    call->sh = pick_shard(c);
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
     * limit, where a request may wait for one to be free. */
    curl_easy_setopt(
        e, CURLOPT_FRESH_CONNECT,
        !c->limited && call->sh->inflight >= call->sh->open_sockets ? 1L : 0L);
    call->sh->inflight++;
    call->state = HTTP_CALL_CONNECTING;
    c->connecting++;
    mrc = curl_multi_add_handle(call->sh->multi, e);
    if (mrc != CURLM_OK) {
        log_error("curl_multi_add_handle: %s", curl_multi_strerror(mrc));
        c->connecting--;
        call->sh->inflight--;
        call->sh = NULL;
        call->state = HTTP_CALL_QUEUED;
        return -EIO;
    }
    return 0;
}

void
http__admit(http_client *c)
{
    while (c->qhead != NULL && c->connecting < c->max_connecting) {
        struct http_call *call = c->qhead;

        c->qhead = call->qnext;
        if (c->qhead != NULL)
            c->qhead->qprev = NULL;
        else
            c->qtail = NULL;
        call->qnext = NULL;
        if (http__admit_one(c, call) != 0) {
            call->state = HTTP_CALL_CONNECTED; /* out of the queue */
            call->res.error = HTTP_ERR_OTHER;
            snprintf(call->res.error_text, sizeof(call->res.error_text),
                     "curl refused the request");
            http__deliver(call);
        }
    }
}

/* call.c: one HTTP call of the client (declared in http/http.h).
 *
 * Setting up the easy handle (method, headers, body, timeouts, caps),
 * capturing the answer in curl's write and header callbacks with the
 * response caps checked before anything is kept, and finishing a call:
 * mapping curl's result to an http_error and running the user callback.
 * The loop glue that drives the transfers is in http.c.
 */
#include "http/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "http/internal.h"

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

void
http_response_cleanup(struct http_response *res)
{
    if (res == NULL)
        return;
    headers_free(res->headers, res->nheaders);
    free(res->body);
    if (res->raw != NULL)
        http__wipe(res->raw, res->raw_len);
    free(res->raw);
    http__secrets_free(res->secrets, res->nsecrets);
    memset(res, 0, sizeof(*res));
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
        /* An answer over HTTP/2 lets its pool put many calls on one
         * connection (admit.c). */
        if (call->pool != NULL && len >= 7 && buf[5] == '2' && buf[6] == ' ')
            call->pool->h2 = true;
        else if (call->pool != NULL && len >= 7 && buf[5] == '1')
            call->pool->h1 = true;
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
    if (call->stalled)
        return HTTP_ERR_TIMEOUT;
    switch (rc) {
    case CURLE_OK:
        return HTTP_ERR_NONE;
    case CURLE_OPERATION_TIMEDOUT:
        return HTTP_ERR_TIMEOUT;
    case CURLE_COULDNT_CONNECT:
        return HTTP_ERR_REFUSED;
    case CURLE_FILESIZE_EXCEEDED:
        return HTTP_ERR_TOO_LARGE;
    /* curl says "Unsupported HTTP version in response" (or response
     * code) with this one: the URL's scheme was checked before the send. */
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return HTTP_ERR_BAD_RESPONSE;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        return HTTP_ERR_RESET;
    /* A certificate refused is the config's to fix (the tier's CAs or
     * its client certificate), not a storm to retry. */
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        return HTTP_ERR_TLS_CERTIFICATE;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_USE_SSL_FAILED:
        return HTTP_ERR_TLS;
    default:
        return HTTP_ERR_OTHER;
    }
}

void
http__call_unlink(http_client *c, struct http_call *call)
{
    if (call->prev != NULL)
        call->prev->next = call->next;
    else
        c->calls = call->next;
    if (call->next != NULL)
        call->next->prev = call->prev;
    call->prev = call->next = NULL;
    c->inflight--;
    if (call->sh != NULL)
        call->sh->inflight--;
    if (call->sh != NULL && call->pool != NULL)
        http__pool_leave(call);
}

static void
slist_free_wiped(struct curl_slist *l)
{
    for (struct curl_slist *p = l; p != NULL; p = p->next)
        http__wipe(p->data, strlen(p->data));
    curl_slist_free_all(l);
}

/* The sockets of the client's connections, opened and closed here only to
 * count them (http_send). */
static curl_socket_t
open_cb(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
    struct http_shard *sh = arg;
    curl_socket_t fd = socket(a->family, a->socktype, a->protocol);

    (void)purpose;
    if (fd != CURL_SOCKET_BAD)
        sh->open_sockets++;
    return fd;
}

static int
close_cb(void *arg, curl_socket_t fd)
{
    struct http_shard *sh = arg;

    if (sh->open_sockets > 0)
        sh->open_sockets--;
    return close(fd);
}

void
http__deliver(struct http_call *call)
{
    http_client *c = call->c;

    http__call_unlink(c, call);
    curl_easy_cleanup(call->easy);
    call->easy = NULL;
    slist_free_wiped(call->hdrs);
    call->hdrs = NULL;
    free(call->body);
    call->body = NULL;
    if (call->res.body == NULL)
        call->res.body = xcalloc(1, 1);
    call->res.latency_ms = clock_mono_ms() - call->start_ms;
    http__scrub(&call->res, &call->secrets, &call->nsecrets);
    http__secrets_free(call->secrets, call->nsecrets);
    call->secrets = NULL;
    call->delivering = true;
    call->cb(call, &call->res, call->arg);
    http_response_cleanup(&call->res);
    free(call);
}

void
http__finish(http_client *c, struct http_call *call, CURLcode rc)
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
    else if (rc == CURLE_FILESIZE_EXCEEDED && call->content_length >= 0)
        /* Refused on its Content-Length, before any of the body came:
         * there is none to keep (libcurl says "Maximum file size
         * exceeded"). */
        snprintf(res->error_text, sizeof(res->error_text),
                 "response of %lld bytes (its Content-Length) is larger "
                 "than %zu bytes; none of it was read",
                 (long long)call->content_length, c->max_response);
    else if (call->oom)
        snprintf(res->error_text, sizeof(res->error_text),
                 "out of memory for the response body");
    else if (call->stalled && call->last_byte_ms > 0)
        snprintf(res->error_text, sizeof(res->error_text),
                 "stalled: no byte for %lld ms (idle_timeout_s)",
                 (long long)call->idle_ms);
    else if (call->stalled)
        snprintf(res->error_text, sizeof(res->error_text),
                 "stalled: no first byte in %lld ms (first_byte_timeout_s)",
                 (long long)call->first_byte_ms);
    else if (rc == CURLE_OUT_OF_MEMORY && !call->errbuf[0])
        /* libcurl 7.88 says "Out of memory" when an answer's header
         * passes its 100 KB limit (a buffer's cap, not the heap: ours
         * aborts on OOM, CONVENTIONS 4). */
        snprintf(res->error_text, sizeof(res->error_text),
                 "the answer's headers are larger than libcurl accepts "
                 "(100 KB)");
    else if (rc != CURLE_OK)
        snprintf(res->error_text, sizeof(res->error_text), "%s",
                 call->errbuf[0] ? call->errbuf : curl_easy_strerror(rc));
    http__settle(c, call);
    curl_multi_remove_handle(call->sh->multi, call->easy);
    http__deliver(call);
}

void
http__cancel_one(struct http_call *call)
{
    if (call->state != HTTP_CALL_QUEUED)
        curl_multi_remove_handle(call->sh->multi, call->easy);
    http__settle(call->c, call);
    call->res.error = HTTP_ERR_CANCELLED;
    snprintf(call->res.error_text, sizeof(call->res.error_text), "cancelled");
    http__deliver(call);
}

const char *
http_error_name(enum http_error e)
{
    static const char *const names[HTTP_ERR_COUNT] = {
        "none", "timeout",      "refused", "reset",     "too_large",
        "tls",  "bad_response", "other",   "cancelled", "tls_certificate"};

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
    http__wipe(line, nl + vl + 3);
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

/* set_tls sets the call's CAs and client certificate. Without a CA of
 * its own, the call keeps libcurl's CA bundle but not its CA folder
 * (Debian's libcurl sets both): libcurl caches a parsed CA store in the
 * multi handle only when a bundle alone is used, and without that cache
 * every new connection parsed the whole bundle on the loop (32-37 ms of
 * CPU each). A tier's ca_file is cached the same way; a ca_path is read
 * by OpenSSL a certificate at a time, as the handshake needs them. */
static void
set_tls(CURL *e, const struct http_request *req)
{
    if (req->ca_file != NULL || req->ca_path != NULL) {
        curl_easy_setopt(e, CURLOPT_CAINFO, req->ca_file);
        curl_easy_setopt(e, CURLOPT_CAPATH, req->ca_path);
    } else {
        curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
    }
    if (req->client_cert != NULL) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, req->client_cert);
        curl_easy_setopt(e, CURLOPT_SSLKEY, req->client_key);
    }
}

/* A new call of c on easy handle e for req: its copy of the body and its
 * header list ("Expect:" and "Content-Type:" unset unless req sets them:
 * curl would add "Expect: 100-continue" to large bodies, a round trip
 * lost, and a form Content-Type to any body). Aborts on OOM. */
static struct http_call *
new_call(http_client *c, CURL *e, const struct http_request *req,
         http_done_cb cb, void *arg)
{
    struct http_call *call = xcalloc(1, sizeof(*call));

    call->c = c;
    call->easy = e;
    call->cb = cb;
    call->arg = arg;
    call->content_length = -1;
    call->state = HTTP_CALL_QUEUED;
    call->res.stream = req->stream; /* what its reader assembles */
    call->timeout_ms =
        req->timeout_ms > 0 ? req->timeout_ms : HTTP_DEFAULT_TIMEOUT_MS;
    if (req->body != NULL) {
        call->body = xmalloc(req->body_len + 1);
        memcpy(call->body, req->body, req->body_len);
        call->body[req->body_len] = '\0';
        call->body_len = req->body_len;
    }
    for (size_t i = 0; i < req->nheaders; i++)
        call->hdrs =
            add_header(call->hdrs, req->headers[i].name, req->headers[i].value);
    if (!req_has_header(req, "expect"))
        call->hdrs = slist_add(call->hdrs, "Expect:");
    if (req->body != NULL && !req_has_header(req, "content-type"))
        call->hdrs = slist_add(call->hdrs, "Content-Type:");
    return call;
}

int
http_send(http_client *c, const struct http_request *req, http_done_cb cb,
          void *arg, http_call **out)
{
    struct http_call *call;
    CURL *e;

    if (c->closing)
        return -ESHUTDOWN;
    if (req == NULL || cb == NULL || !req_valid(req))
        return -EINVAL;
    e = curl_easy_init();
    if (e == NULL) {
        log_error("curl_easy_init failed");
        return -EIO;
    }
    call = new_call(c, e, req, cb, arg);
    curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)call);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, call->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    http__route(c, call, req);
    /* HTTP/2 where an https:// server offers it (ALPN), and then a call
     * waits for a connection being made to its host rather than opening
     * one of its own (PIPEWAIT). http:// stays HTTP/1.1 (no h2c). */
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                     call->multiplex ? (long)CURL_HTTP_VERSION_2TLS
                                     : (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, call->multiplex ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)c->max_response);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, call);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, call);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, call->hdrs);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_cb);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, close_cb);
    curl_easy_setopt(e, CURLOPT_SHARE, c->share);
    set_tls(e, req);
    set_method(call, req);
    http__watch_stall(call, req);
    if (curl_easy_setopt(e, CURLOPT_URL, req->url) != CURLE_OK) {
        curl_easy_cleanup(e);
        slist_free_wiped(call->hdrs);
        free(call->body);
        free(call);
        return -EINVAL;
    }

    if (http__enter(c, call) != 0) {
        curl_easy_cleanup(e);
        slist_free_wiped(call->hdrs);
        free(call->body);
        free(call);
        return -EIO;
    }
    http__secrets_copy(req, &call->secrets, &call->nsecrets);
    if (out != NULL)
        *out = call;
    return 0;
}

/* internal.h: what the sources of stepq_http share (private to it).
 *
 * http.c drives curl's multi handle from the libuv loop; call.c sets up
 * one easy handle, captures its answer and delivers it; build.c builds
 * requests. worker/internal.h is the stepq_worker library's, not this one's.
 */
#ifndef STEPQ_HTTP_INTERNAL_H
#define STEPQ_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <uv.h>

#include "http/http.h"
#include "http/tools.h"

/* One of the client's curl multi handles, with its own connection cache,
 * timer and sockets. libcurl 7.88 walks every connection of a cache when
 * a transfer ends (curl_multi_remove_handle), so the client spreads its
 * transfers over one shard per HTTP_SHARD_CONNECTIONS connections it
 * keeps. The timer and due handle are embedded and closed with the
 * client (CONVENTIONS §5). */
struct http_shard {
    http_client *c;
    CURLM *multi;        /* owned; NULL once cleaned up */
    uv_timer_t timer;    /* curl's timeout */
    uv_idle_t due;       /* curl's timeout of 0 ms: run at the next iteration */
    size_t inflight;     /* its requests in flight */
    size_t open_sockets; /* sockets its curl opened and has not closed */
};

#define HTTP_SHARDS_MAX 64

/* One socket curl asked us to watch. The poll handle is embedded and the
 * struct is freed in its close callback (CONVENTIONS §5). */
struct sock {
    uv_poll_t poll;
    struct http_shard *sh;
    curl_socket_t fd;
    struct sock *prev, *next; /* in c->socks while not closing */
};

/* Where a call is: in the client's queue (no curl multi handle has it
 * yet), waiting for its connection, or sending on one. */
enum http_call_state {
    HTTP_CALL_QUEUED,
    HTTP_CALL_CONNECTING,
    HTTP_CALL_CONNECTED,
};

/* The requests of one host with one max_connections (0: none) (admit.c):
 * how many are on a multi handle, and whether an answer came over HTTP/2
 * (then HTTP_H2_STREAMS of them share a connection) or HTTP/1.x. Calls
 * that may multiplex grow their HTTP/2 connections one at a time: conns
 * is how many the pool's calls are known to fill, opening whether a call
 * is making one more. Owned by the client's list, freed with it. */
/* The connections of a pool told apart by their local port, while it
 * has calls on the wire: at most this many (more are counted, not told
 * apart). */
#define HTTP_POOL_PORTS 128

struct http_pool {
    char *key; /* owned; "scheme://host:port" of the URL */
    long cap;  /* max_connections */
    size_t wire;
    bool h2;
    bool h1;
    size_t conns; /* connections seen ready since the pool was idle */
    size_t opening;
    int ports[HTTP_POOL_PORTS]; /* their local ports (conns of them, at
                                   most HTTP_POOL_PORTS) */
    struct http_pool *next;
};

/* Requests connecting at once when http_client_opts.max_connecting is 0. */
#define HTTP_DEFAULT_MAX_CONNECTING 128

struct http_call {
    http_client *c;
    enum http_call_state state;
    struct http_call *qprev, *qnext; /* in c's queue while QUEUED */
    int64_t timeout_ms;              /* the request's, whole */
    struct http_shard *sh;           /* whose multi handle runs it */
    struct http_pool *pool;          /* borrowed; NULL: no cap */
    bool multiplex;                  /* may go over HTTP/2 */
    bool opener; /* admitted to open its pool's next connection (admit.c) */
    uint32_t host_hash; /* of the URL's scheme, host, port */
    CURL *easy;
    struct curl_slist *hdrs; /* owned; wiped before free */
    char *body;              /* owned copy of the request body */
    size_t body_len;
    char **secrets; /* owned copies of the request's (http__scrub) */
    size_t nsecrets;
    http_done_cb cb;
    void *arg;
    struct http_response res; /* built while the answer arrives */
    size_t body_cap;          /* allocated bytes of res.body */
    size_t header_bytes;      /* bytes of kept response headers */
    int64_t content_length;   /* from the current head; -1 unknown */
    int64_t start_ms;
    int64_t first_byte_ms; /* the request's stall watch (stream.c) */
    int64_t idle_ms;
    int64_t last_byte_ms; /* when the answer last grew; 0: not begun */
    int64_t seen_bytes;   /* of the answer, at last_byte_ms */
    bool stalled;         /* the stall watch ended it */
    bool too_large;       /* the write callback refused the answer */
    bool oom;             /* the body buffer could not grow */
    bool delivering;      /* its callback is running */
    char errbuf[CURL_ERROR_SIZE];
    struct http_call *prev, *next; /* in c->calls */
};

struct http_client {
    uv_loop_t *loop;           /* borrowed */
    struct http_shard *shards; /* owned array of nshards */
    size_t nshards;
    struct sock *socks;      /* sockets being watched */
    struct http_call *calls; /* requests in flight, queued ones too */
    size_t inflight;
    CURLSH *share;                   /* owned; the TLS session cache */
    struct http_call *qhead, *qtail; /* QUEUED calls, oldest first */
    size_t connecting;               /* calls CONNECTING */
    size_t max_connecting;
    bool limited;            /* a connection limit is set */
    struct http_pool *pools; /* owned list */
    size_t open_handles;     /* timers, dues + sockets not yet closed */
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

/* http__wipe clears n bytes that may have held a secret; the volatile
 * store keeps the compiler from dropping it before free() (build.c). */
void http__wipe(void *p, size_t n);

/* http__free_secret wipes and frees s; NULL is a no-op (build.c). */
void http__free_secret(char *s);
/* http__secrets_copy gives a call its own copies of r's secrets (*out,
 * *n; free with http__secrets_free, which wipes them; NULL is a no-op). */
void http__secrets_copy(const struct http_request *r, char ***out, size_t *n);
void http__secrets_free(char **v, size_t n);
/* http__scrub replaces each of the *n secrets by "***" in res's header
 * values and error text, and in a copy of its body when the body holds
 * one: the body as it came is then res->raw, and the secrets move from
 * *secrets to res->secrets (*secrets NULL, *n 0) (secret.c). */
void http__scrub(struct http_response *res, char ***secrets, size_t *n);
/* http__is_http_url: an http:// or https:// URL without blanks or
 * control characters (build.c). */
bool http__is_http_url(const char *s);
/* http__fail writes the message into err (len bytes, may be 0) and
 * returns rc (build.c). */
int http__fail(char *err, size_t len, int rc, const char *fmt, ...)
    STEPQ_PRINTF(4, 5);
/* http__resolve_value sets *out to the value to send for a configured
 * one: itself, or for "env:NAME" that variable's value (borrowed from the
 * environment). what names the value in err ("http.headers.X"), which
 * never quotes a value. Returns 0; -ENOENT when the variable is not set;
 * -EINVAL when the value holds control characters (build.c). */
STEPQ_MUST_CHECK int http__resolve_value(const char *what, const char *value,
                                         const char **out, char *err,
                                         size_t errlen);
/* http__watch_stall sets call's stall watch from req (its first-byte and
 * idle timeouts), when req has one (stream.c). */
void http__watch_stall(struct http_call *call, const struct http_request *req);

/* ---- the native protocols (native.c, anthropic.c, gemini.c) -------- */

/* A message of the job's OpenAI-shaped request, read once for mapping:
 * role and text borrowed from the request, or owned (joined parts). */
struct http__msg {
    const char *role;
    char *text;          /* owned: the content string, or its text parts
                            joined */
    bool cache;          /* the message's "cache": true (prompt caching) */
    int index;           /* in request.messages, for errors */
    const cJSON *calls;  /* an assistant's tool_calls (non-empty), or NULL */
    const char *call_id; /* a tool message's tool_call_id, or NULL */
};

/* http__native_msgs refuses what the request holds that api (its name,
 * for the error) cannot carry: a member the native protocols do not map
 * (native.c's list), another role, a tool message without a call before
 * it or an id, content parts that are not text. Fills msgs (owned array,
 * http__msgs_free) with every message. Returns 0, or -EINVAL with err
 * naming the member ("request.n: not mapped to the anthropic api"). */
STEPQ_MUST_CHECK int http__native_msgs(const cJSON *request, const char *api,
                                       struct http__msg **msgs, size_t *n,
                                       char *err, size_t errlen);
void http__msgs_free(struct http__msg *msgs, size_t n);
/* http__native_max_tokens is the output cap to send: the request's
 * max_completion_tokens or max_tokens, else the tier's max_tokens, else
 * dflt (0: none). */
int64_t http__native_max_tokens(const cJSON *request,
                                const struct config_tier *t, int64_t dflt);
/* http__native_stop returns the request's "stop" as a new array of
 * strings (a string becomes one), or NULL when it has none. Caller owns. */
cJSON *http__native_stop(const cJSON *request);
/* http__native_copy copies member key of request (when there) into body
 * as name. */
void http__native_copy(const cJSON *request, const char *key, cJSON *body,
                       const char *name);

/* http__anthropic_body / http__gemini_body map the job's request (borrowed)
 * to the protocol's body for tier t; *out is owned by the caller. Return
 * 0 or -EINVAL with err naming what cannot be mapped. */
STEPQ_MUST_CHECK int http__anthropic_body(const cJSON *request,
                                          const struct config_tier *t,
                                          cJSON **out, char *err,
                                          size_t errlen);
STEPQ_MUST_CHECK int http__gemini_body(const cJSON *request,
                                       const struct config_tier *t, cJSON **out,
                                       char *err, size_t errlen);
/* http__gemini_model_ok: a model name that can stand in Gemini's URL
 * path as is. */
bool http__gemini_model_ok(const char *model);
/* http__anthropic_read / http__gemini_read fill *a from an answer of that
 * protocol (root borrowed), finish reasons as their OpenAI twins; -EINVAL
 * when root is not of that shape (*a untouched). */
int http__anthropic_read(const cJSON *root, struct http_chat_answer *a);
int http__gemini_read(const cJSON *root, struct http_chat_answer *a);
/* http__finish_twin returns the OpenAI finish reason of a native one
 * (table: pairs of native, openai; NULL-terminated), or a copy of it as
 * is. Caller frees. */
char *http__finish_twin(const char *native, const char *const *table);

/* http__native_tools adds to body (the protocol's, of format f) what
 * the request's "tools", "tool_choice" and "parallel_tool_calls" say
 * there (native_tools.c): Anthropic's tools (the last one cached when
 * cache is set) and tool_choice; Gemini's functionDeclarations and
 * toolConfig. Returns 0, or -EINVAL with err naming the member. */
STEPQ_MUST_CHECK int http__native_tools(const cJSON *request,
                                        enum http_tool_format f, bool cache,
                                        cJSON *body, char *err, size_t errlen);
/* http__native_turn maps the tool turn at msgs[*i] (an assistant message
 * with calls) and the tool messages after it, which must answer each
 * call once, to format f: appends the protocol's assistant (model)
 * message and its message of results to out, and sets *i to the last
 * message used. Returns 0, or -EINVAL with err naming the message. */
STEPQ_MUST_CHECK int http__native_turn(const struct http__msg *msgs, size_t n,
                                       size_t *i, enum http_tool_format f,
                                       cJSON *out, char *err, size_t errlen);

/* http__set_body_json serializes item (borrowed) as r's body. */
void http__set_body_json(struct http_request *r, const cJSON *item);

/* http__finish records how call ended (curl result rc, status, connection
 * count, error text), removes it from its shard's multi handle and delivers it:
 * the user callback runs and call is freed. Called with c entered, never
 * from inside a curl callback (call.c). */
void http__finish(http_client *c, struct http_call *call, CURLcode rc);
/* http__admit_one puts call (QUEUED, not in the queue) on the least busy
 * shard's multi handle, CONNECTING. Returns 0, or -EIO when curl refuses
 * it (logged; call is left as it was) (admit.c). */
int http__admit_one(http_client *c, struct http_call *call);
/* http__settle takes an ending call out of the queue, or out of the
 * connecting count (admit.c). */
void http__settle(http_client *c, struct http_call *call);
/* http__call_unlink takes call out of c's calls (call.c). */
void http__call_unlink(http_client *c, struct http_call *call);
/* http__deliver runs the callback of a call no multi handle has (removed,
 * or never added) and frees it. Called with the client entered
 * (call.c). */
void http__deliver(struct http_call *call);
/* http__admit moves queued calls onto a shard's multi handle while fewer
 * than max_connecting are connecting; one that curl refuses is delivered
 * as HTTP_ERR_OTHER. Called with the client entered, never from inside
 * a curl callback, not while closing (call.c). */
void http__admit(http_client *c);
/* http__route sets how call goes, from req: whether it may multiplex
 * (an https:// URL, not http1_only), its host's hash (its shard when it
 * may) and its pool when req caps connections (created on first use)
 * (admit.c). */
void http__route(http_client *c, struct http_call *call,
                 const struct http_request *req);
/* http__pool_leave counts call off its pool's wire, and out of the
 * connection it was opening (admit.c). */
void http__pool_leave(struct http_call *call);
/* http__pool_full: call's pool has as many calls on the wire as its cap
 * allows; call then stays queued (admit.c). */
bool http__pool_full(const struct http_call *call);
/* http__pools_free frees c's pools (admit.c). */
void http__pools_free(http_client *c);
/* http__cancel_one removes call from the multi handle and delivers it as
 * HTTP_ERR_CANCELLED (call is freed). Called with the client entered. */
void http__cancel_one(struct http_call *call);

/* http__enter counts call in c's calls in flight and starts it, or
 * queues it behind the others (admit.c). Returns 0, or -EIO when it could
 * not be started (it is then in no list). */
int http__enter(http_client *c, struct http_call *call);

#endif

/* http.h: the HTTP client of the worker: libcurl's multi interface driven by
 * a libuv loop, plus the builders and parsers for chat and http steps.
 *
 * One http_client lives on one uv loop and sends any number of requests at
 * once from that loop's thread; the loop never blocks on the network (curl
 * sockets are watched with uv_poll_t, curl's timer is a uv_timer_t, names
 * are resolved by curl's threaded resolver). Connections are kept alive and
 * reused between requests to the same host. HTTP/1.1 is used for http://;
 * https:// works too (TLS through libcurl; certificates verified).
 *
 * Every request ends in exactly one call of its http_done_cb: with an HTTP
 * response, with a transport error (timeout, refused, reset, too large,
 * TLS, other), or cancelled (http_cancel, http_client_close). Answers are
 * capped (max_response_bytes, default 4 MiB): a larger answer aborts the
 * transfer as HTTP_ERR_TOO_LARGE, so memory per request stays bounded.
 *
 * Not thread-safe: call everything from the loop's thread. The caller
 * should ignore SIGPIPE, as with any libuv program that writes to sockets.
 * curl_global_init is done once by http_client_new (thread-unsafe in old
 * libcurl builds, so create the first client before starting threads).
 *
 * Secrets: request header values may hold API keys. The client never logs
 * them, and wipes its own copies (and curl's header list) before freeing.
 */
#ifndef STEPQ_HTTP_HTTP_H
#define STEPQ_HTTP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "common/config.h"
#include "common/defs.h"
#include "common/price.h"

#define HTTP_DEFAULT_MAX_RESPONSE (4 * 1024 * 1024)
#define HTTP_DEFAULT_MAX_HEADERS  64
#define HTTP_DEFAULT_HEADER_BYTES (64 * 1024)
#define HTTP_DEFAULT_TIMEOUT_MS   60000
#define HTTP_ERROR_TEXT           256

typedef struct http_client http_client;
typedef struct http_call http_call;

/* Why a request got no (complete) HTTP response. */
enum http_error {
    HTTP_ERR_NONE = 0,        /* a whole response arrived (any status) */
    HTTP_ERR_TIMEOUT,         /* the request's timeout_ms passed */
    HTTP_ERR_REFUSED,         /* could not connect (refused, unreachable) */
    HTTP_ERR_RESET,           /* connection reset or closed before the end */
    HTTP_ERR_TOO_LARGE,       /* the answer is above max_response_bytes */
    HTTP_ERR_TLS,             /* TLS handshake or certificate failure */
    HTTP_ERR_BAD_RESPONSE,    /* an answer that is not HTTP (a status line,
                                 a header or a length no client can read) */
    HTTP_ERR_OTHER,           /* anything else: DNS, bad URL */
    HTTP_ERR_CANCELLED,       /* http_cancel or http_client_close */
    HTTP_ERR_TLS_CERTIFICATE, /* a certificate refused: the endpoint's (not
                                 trusted by the tier's CAs) or the tier's
                                 own (unreadable, wrong key) */
    HTTP_ERR_COUNT
};

/* One header. In a struct http_request or http_response both strings are
 * owned by that struct. In responses the name is lower-case and the value
 * has no leading or trailing blanks. Same layout as struct policy_header. */
struct http_header {
    char *name;
    char *value;
};

/* Connections one multi handle of the client keeps for reuse, at most: a
 * client told to keep more idle connections splits them over several
 * handles, whose pools are apart (http.c). */
#define HTTP_SHARD_CONNECTIONS 256

/* Requests one HTTP/2 connection carries at once, at most (curl's
 * default; the server may allow fewer, nginx allows 128). */
#define HTTP_H2_STREAMS 100

/* Client options; zero fields take the defaults. */
struct http_client_opts {
    size_t max_response_bytes;  /* body cap; 0: 4 MiB */
    size_t max_headers;         /* response headers kept; 0: 64 */
    size_t max_header_bytes;    /* bytes of kept headers; 0: 64 KiB */
    long max_host_connections;  /* per host; 0: unlimited */
    long max_total_connections; /* 0: unlimited */
    long max_idle_connections;  /* open connections kept for reuse; 0:
                                   libcurl's default (4 per transfer in
                                   flight, shrinking as they finish) */
    long connect_timeout_ms;    /* 0: 10 s (never above the request's) */
    long max_connecting;        /* requests waiting for a connection
                                   (TCP connect and TLS handshake, or a
                                   reused one) at once; the others wait
                                   in the client's queue, which does not
                                   count toward connect_timeout_ms (it
                                   does toward timeout_ms); 0: 128 */
    const char *user_agent;     /* borrowed for the call; NULL: "stepq/0.1" */
};

/* A request. Every pointer is owned by the struct: fill it with the
 * http_request_* functions or the builders below, and release it with
 * http_request_cleanup. */
struct http_request {
    char *method;                /* owned; NULL: GET, or POST with a body */
    char *url;                   /* owned; http:// or https:// */
    struct http_header *headers; /* owned array of nheaders */
    size_t nheaders;
    char *body; /* owned; NULL: no body. body_len bytes, may hold NULs */
    size_t body_len;
    int64_t timeout_ms; /* whole request; 0: HTTP_DEFAULT_TIMEOUT_MS */
    /* A stall ends the request as HTTP_ERR_TIMEOUT within about a second
     * of these (stream.c): no byte of the answer for first_byte_ms after
     * the send, or none for idle_ms once it has begun. 0: not watched */
    int64_t first_byte_ms;
    int64_t idle_ms;
    /* The answer is asked for as server-sent events (http_tier_request's
     * stream); the response carries it back, for its reader to assemble
     * (http_stream_assemble). */
    bool stream;
    /* owned: values the request carries that are secrets (the builders
     * add them; http_request_add_secret): each is replaced by "***" in
     * the answer's body, headers and error text before the callback sees
     * them; the body as it came stays in the response's raw */
    char **secrets;
    size_t nsecrets;
    /* owned; TLS of an https:// URL (http_request_set_tls). NULL: the
     * system's CA bundle (parsed once per client, not per connection) and
     * no client certificate */
    char *ca_file;     /* PEM bundle of the CAs to trust instead */
    char *ca_path;     /* folder of hashed CA certificates to trust */
    char *client_cert; /* PEM client certificate (may hold its key) */
    char *client_key;  /* PEM key of client_cert; NULL: in client_cert */
    /* Connections (admit.c). An https:// request is offered HTTP/2 (ALPN)
     * unless http1_only; an h2 connection carries many requests at once,
     * and a request waits for the one being made rather than opening
     * another (PIPEWAIT). max_connections > 0 caps the connections of
     * the requests with the same host and cap: at most that many of them
     * are on the wire over HTTP/1.1, that many times HTTP_H2_STREAMS once
     * an answer came over HTTP/2; the others wait in the client's queue,
     * where no connect timeout runs. */
    bool http1_only;
    long max_connections;
};

/* What came back. Every pointer is owned by the struct (and so by the
 * client): it is valid during the http_done_cb call only. To keep the body
 * or the headers, move them out (copy the pointer and set the field to
 * NULL); the client frees whatever is left after the callback returns. */
struct http_response {
    int status;            /* HTTP status; 0 when no status line arrived */
    enum http_error error; /* HTTP_ERR_NONE when the response is whole */
    char error_text[HTTP_ERROR_TEXT]; /* curl's message; "" when none */
    struct http_header *headers;      /* owned; of the last response head */
    size_t nheaders;
    bool headers_truncated; /* some headers were dropped by the caps */
    char *body;             /* owned; never NULL, NUL-terminated (the body
                               itself may hold NULs). On a transport error:
                               whatever arrived */
    size_t body_len;
    int64_t latency_ms;   /* from http_send to completion */
    long new_connections; /* connections opened for it (0: reused one) */
    bool stream;          /* its request's stream: events were asked for */
    /* owned: the body as it came, when masking a secret changed it (else
     * NULL; raw_len bytes, NUL-terminated). For checks only (is it a
     * completion, does its output parse): what is kept of it goes
     * through http_response_mask first. */
    char *raw;
    size_t raw_len;
    char **secrets; /* owned: what was masked in body (with raw only) */
    size_t nsecrets;
};

/* http_response_mask returns an owned copy of text (NUL-terminated) with
 * every secret that res's body had masked replaced by "***": what a
 * caller keeps of res->raw. Caller frees with free(). */
char *http_response_mask(const struct http_response *res, const char *text);

/* http_response_move gives dst what src owns (body, headers, raw and
 * secrets) with src's other fields, and leaves src owning nothing. */
void http_response_move(struct http_response *dst, struct http_response *src);

/* http_response_cleanup frees what res owns (raw and secrets wiped) and
 * zeroes it. NULL is a no-op. */
void http_response_cleanup(struct http_response *res);

/* Called once per request, on the loop thread. call is valid until this
 * callback returns. The callback may send new requests, cancel others or
 * close the client. */
typedef void (*http_done_cb)(http_call *call, struct http_response *res,
                             void *arg);

/* Called when http_client_close has finished and the client is freed. */
typedef void (*http_close_cb)(void *arg);

/* ---- client -------------------------------------------------------------
 */

/* http_client_new creates a client on loop (borrowed: it must outlive the
 * client). opts may be NULL for the defaults. Returns 0 with *out set (the
 * caller owns it: end it with http_client_close), -EINVAL for bad options,
 * or -EIO when libcurl cannot be set up (logged). *out is untouched on
 * failure and the loop is left as it was. */
STEPQ_MUST_CHECK int http_client_new(uv_loop_t *loop,
                                     const struct http_client_opts *opts,
                                     http_client **out);

/* http_client_close cancels every request in flight (their callbacks run,
 * with HTTP_ERR_CANCELLED, before this returns), then cleans up curl and
 * closes the client's uv handles; when called from a request callback, that
 * cleanup waits until the callback returns. Run the loop to let the handles
 * close: the client is freed in the last close callback, which then calls
 * cb(arg) (cb may be NULL). NULL is a no-op; closing twice is not allowed.
 * Until the client is freed, http_send fails with -ESHUTDOWN. */
void http_client_close(http_client *c, http_close_cb cb, void *arg);

/* http_client_inflight returns the number of requests sent and not yet
 * completed. */
size_t http_client_inflight(const http_client *c);

/* http_send starts req (borrowed: it is copied; the caller may clean it up
 * right away). cb(call, res, arg) runs once when it ends, always from the
 * loop, never from inside http_send. *out (may be NULL) gets a handle for
 * http_cancel, valid until cb returns. Returns 0; -EINVAL for a bad request
 * (no URL, a URL that is not http(s), a method or header with CR/LF or
 * other bad characters); -ESHUTDOWN after http_client_close; -EIO when curl
 * refuses it (logged). On failure cb is never called. */
STEPQ_MUST_CHECK int http_send(http_client *c, const struct http_request *req,
                               http_done_cb cb, void *arg, http_call **out);

/* http_cancel stops an in-flight request: its callback runs before this
 * returns, with HTTP_ERR_CANCELLED. Returns 0, or -EALREADY when call is
 * the one whose callback is running. */
int http_cancel(http_call *call);

/* http_error_name returns "none", "timeout", "refused", "reset",
 * "too_large", "tls", "other" or "cancelled" (the names of the reference's
 * transport_error where they exist). Static string. */
const char *http_error_name(enum http_error e);

/* http_response_header finds a response header by name (any case).
 * Returns the borrowed value, or NULL. */
const char *http_response_header(const struct http_response *res,
                                 const char *name);

/* ---- requests -----------------------------------------------------------
 */

/* http_request_init zeroes r. */
void http_request_init(struct http_request *r);

/* http_request_cleanup frees what r owns (header values are wiped first:
 * they may hold secrets) and zeroes it. NULL is a no-op. */
void http_request_cleanup(struct http_request *r);

/* http_request_set sets method (may be NULL) and url, copying both.
 * Returns 0 or -EINVAL when method is not an HTTP token or url is NULL. */
STEPQ_MUST_CHECK int http_request_set(struct http_request *r,
                                      const char *method, const char *url);

/* http_request_add_header appends a copy of name: value. A header of the
 * same name (any case) is replaced. Returns 0, or -EINVAL when the name is
 * not an HTTP token or the value holds CR, LF or NUL. */
STEPQ_MUST_CHECK int http_request_add_header(struct http_request *r,
                                             const char *name,
                                             const char *value);

/* http_request_add_secret remembers a copy of value as a secret of r, to
 * be scrubbed from its answer (http_request.secrets). NULL and values of
 * fewer than 4 bytes are ignored. */
void http_request_add_secret(struct http_request *r, const char *value);

/* http_request_set_tls copies the TLS settings of a request (each may be
 * NULL: see struct http_request), replacing any. */
void http_request_set_tls(struct http_request *r, const char *ca_file,
                          const char *ca_path, const char *client_cert,
                          const char *client_key);

/* http_request_set_body copies len bytes of body (replacing any). */
void http_request_set_body(struct http_request *r, const char *body,
                           size_t len);

/* http_request_header finds a request header by name (any case). Returns
 * the borrowed value, or NULL. */
const char *http_request_header(const struct http_request *r, const char *name);

/* http_chat_request builds an OpenAI-compatible chat completion:
 * POST {base_url}/chat/completions (one slash between them) whose body is
 * the step's request object (borrowed; not modified) serialized with
 * "model" set to model, Content-Type and Accept application/json, and
 * "Authorization: Bearer KEY" where KEY is read now from the environment
 * variable named api_key_env (NULL, unset or empty: no Authorization
 * header). The key goes into that header value only. On success *out (a
 * struct the caller has NOT initialised; the caller cleans it up) is
 * filled. Returns 0, or -EINVAL (err says why, never quoting the key) when
 * request is not an object, base_url is not http(s), or the key holds CR,
 * LF or other control characters. *out is untouched on failure. */
STEPQ_MUST_CHECK int
http_chat_request(const cJSON *request, const char *base_url, const char *model,
                  const char *api_key_env, int64_t timeout_ms,
                  struct http_request *out, char *err, size_t errlen);

/* http_tier_request builds the chat completion of tier t (borrowed) as
 * http_chat_request does, and also: the URL gets t's query parameters
 * (after any query base_url has, percent-encoded, in config order), the
 * request gets t's headers, and the key goes where t's auth says
 * ("Authorization: Bearer KEY", "NAME: KEY" or nowhere). stream (not t's
 * "stream", which the caller weighs with the step's) asks for the answer
 * as server-sent events in t's api's way and sets out->stream, which the
 * response carries back. Values "env:NAME" and the key are read now.
 * Returns 0 with *out filled (caller cleans it up; untouched on failure);
 * -ENOENT when an env: variable, or the key of an explicit "bearer" or
 * "header:NAME" auth, is not set; -EINVAL for a request that is not an
 * object or a value with control characters. err names the tier, the
 * field and the variable ("tier free: headers.X-Title: environment
 * variable TITLE is not set"), never a value. */
STEPQ_MUST_CHECK int http_tier_request(const cJSON *request,
                                       const struct config_tier *t, bool stream,
                                       int64_t timeout_ms,
                                       struct http_request *out, char *err,
                                       size_t errlen);

/* http_tier_url writes the URL tier t's chat requests go to: base_url's
 * path with "/chat/completions" and the query (base_url's, then t's
 * parameters, percent-encoded). reveal false shows each env: value, and
 * the value of a parameter named like a credential (httptext.h), as "***"
 * without reading it, for printing; true reads it (send time).
 * Returns 0 with *out set (caller frees); -ENOENT/-EINVAL as
 * http_tier_request. */
STEPQ_MUST_CHECK int http_tier_url(const struct config_tier *t, bool reveal,
                                   char **out, char *err, size_t errlen);

/* http_step_request builds the request of a kind "http" step from its
 * "http" object (borrowed): {"method", "url", "headers", "body"}. method
 * defaults to GET without a body and POST with one. A header value
 * "env:NAME" is read now from the environment. body: a string is sent as
 * is (Content-Type text/plain; charset=utf-8 unless the headers set one),
 * any other JSON value serialized (application/json unless set).
 * idempotency_key (NULL: none) is sent as Idempotency-Key, replacing a
 * header of that name. Returns 0 with *out filled (caller cleans it up;
 * untouched on failure); -EINVAL for a bad object (err names the field:
 * "http.headers.X: must be a string"); -ENOENT when an env: variable is
 * not set (err names the variable, never a value). */
STEPQ_MUST_CHECK int http_step_request(const cJSON *http,
                                       const char *idempotency_key,
                                       int64_t timeout_ms,
                                       struct http_request *out, char *err,
                                       size_t errlen);

/* ---- answers ------------------------------------------------------------
 */

/* What a chat completion answer says. Strings are owned. */
struct http_chat_answer {
    char *content;         /* choices[0].message.content when a string */
    bool has_tool_calls;   /* message.tool_calls non-empty, or function_call */
    char *finish_reason;   /* choices[0].finish_reason when a string */
    int64_t prompt_tokens; /* usage.*; -1 when absent or not a count */
    int64_t completion_tokens;
    int64_t total_tokens;     /* usage.total_tokens, else input + output */
    struct price_usage usage; /* http_usage_read's, with the cached parts */
};

/* http_usage_read reads the usage an answer (root, borrowed; NULL or not
 * an object: none) reports, in any of the shapes providers use, into *out
 * (PRICE_USAGE_NONE when it reports none, parts not said -1):
 *  - OpenAI chat: usage.prompt_tokens (cached included), completion_tokens
 *    (reasoning included), prompt_tokens_details.cached_tokens; DeepSeek's
 *    usage.prompt_cache_hit_tokens when there are no details;
 *  - OpenAI responses: usage.input_tokens (cached included), output_tokens,
 *    input_tokens_details.cached_tokens;
 *  - Anthropic: usage.input_tokens (cache excluded), output_tokens,
 *    cache_read_input_tokens, cache_creation_input_tokens: input is their
 *    sum;
 *  - Gemini: usageMetadata.promptTokenCount (cached included) plus
 *    toolUsePromptTokenCount, candidatesTokenCount plus thoughtsTokenCount
 *    (billed as output), cachedContentTokenCount.
 * A usage object with input_tokens and a cache_*_input_tokens member is
 * Anthropic's; one with input_tokens and neither is read as OpenAI's
 * responses (the same numbers when nothing was cached). */
void http_usage_read(const cJSON *root, struct price_usage *out);

/* http_chat_parse reads a chat completion body (len bytes, need not be
 * NUL-terminated, any content). Returns 0 when it is a JSON object with
 * choices[0].message an object, or a native answer (an Anthropic message,
 * a Gemini candidate or blocked prompt: finish reasons as their OpenAI
 * twins, text parts joined), filling *out (caller frees it with
 * http_chat_answer_cleanup; absent parts are NULL/false/-1); -EINVAL
 * otherwise, *out untouched. Usage counts are read even when the message
 * has no content. */
STEPQ_MUST_CHECK int http_chat_parse(const char *body, size_t len,
                                     struct http_chat_answer *out);
/* http_chat_read is http_chat_parse on a body already parsed (root,
 * borrowed; NULL reads as not an object). */
STEPQ_MUST_CHECK int http_chat_read(const cJSON *root,
                                    struct http_chat_answer *out);

/* A chat answer's text is choices[0].message.content: a string, or an
 * array of parts, which OpenAI-compatible servers and Anthropic's
 * compatibility layer send ([{"type": "text", "text": "..."}]); then the
 * text is that of its parts of type "text", joined, and parts of other
 * types (images, refusals, reasoning) are no text. */
struct http_chat_text {
    const char *text; /* the string or joined; NULL: no text at all */
    char *joined;     /* owned: the parts' text joined, or NULL */
    bool parts;       /* the content is an array of parts */
    bool bad;         /* not UTF-8, or cut at a NUL: no text to commit */
};

/* http_chat_text reads the text of a chat answer: ans (http_chat_read
 * of root) and body, the len bytes root was parsed from. Free t with
 * http_chat_text_cleanup (chat_text.c). */
void http_chat_text(const cJSON *root, const struct http_chat_answer *ans,
                    const char *body, size_t len, struct http_chat_text *t);
void http_chat_text_cleanup(struct http_chat_text *t);
/* http_as_text is body as text a JSON view and a C string can hold:
 * NULL when it is (UTF-8 without NUL), else an owned copy with bad bytes
 * and NULs as '?'. Free with free(). */
char *http_as_text(const char *body, size_t len);

/* http_stream_assemble reads a streamed answer of protocol api (len bytes
 * of server-sent events: OpenAI chat.completion.chunk lines, Anthropic
 * message events, Gemini response chunks; a cut stream too, as far as it
 * came) and writes the answer the protocol would have sent unstreamed
 * (JSON text: a chat completion, a message, a response) into *out: text
 * deltas joined, the last finish reason, the usage of the final events;
 * an error event becomes the error object. Returns 0 with *out owned
 * (free()), or -EINVAL when body holds no event of the protocol. */
STEPQ_MUST_CHECK int http_stream_assemble(enum config_api api, const char *body,
                                          size_t len, char **out);

/* http_chat_answer_cleanup frees what a owns and zeroes it (counts -1).
 * NULL is a no-op. */
void http_chat_answer_cleanup(struct http_chat_answer *a);

/* http_tier_call builds a request of tier t (borrowed) to path under its
 * base_url (one slash between them; t's query appended), with t's headers,
 * key and TLS as http_tier_request sets them, Accept application/json,
 * ctype as Content-Type (NULL: none) and len bytes of body (NULL: none).
 * Returns 0 with *out filled (caller cleans it up; untouched on failure),
 * or the errors of http_tier_request. */
STEPQ_MUST_CHECK int http_tier_call(const struct config_tier *t,
                                    const char *method, const char *path,
                                    const char *ctype, const char *body,
                                    size_t len, int64_t timeout_ms,
                                    struct http_request *out, char *err,
                                    size_t errlen);

/* ---- batch APIs (batch.c) -----------------------------------------------
 * The bodies of OpenAI's Batch API and Anthropic's Message Batches, built
 * and read: the worker's batch tier mode (worker/batch*.c) sends them with
 * http_tier_call. */

/* One item of a batch: its custom_id and the chat request (an
 * OpenAI-shaped chat body, its model set), both borrowed. */
struct http_batch_item {
    const char *custom_id;
    const cJSON *request;
};

/* The metadata member that names a batch at the provider (OpenAI). */
#define HTTP_BATCH_META_KEY "stepq_batch"

/* http_batch_openai_upload builds the multipart/form-data body of POST
 * /files (purpose "batch", file "stepq-KEY.jsonl": one JSONL line a
 * item, to /v1/chat/completions). Caller frees *body (*len bytes) and
 * *ctype. */
void http_batch_openai_upload(const struct http_batch_item *items, size_t n,
                              const char *key, char **body, size_t *len,
                              char **ctype);
/* http_batch_openai_create is the body of POST /batches for the uploaded
 * file_id, completion window "24h", metadata {stepq_batch: key}. Caller
 * frees. */
char *http_batch_openai_create(const char *file_id, const char *key);
/* http_batch_anthropic_create is the body of POST /messages/batches: each
 * item's chat request as Anthropic's params (model, max_tokens: the
 * request's or 1024, messages, system: the system messages' text joined,
 * temperature, top_p, stop as stop_sequences). Caller frees. */
char *http_batch_anthropic_create(const struct http_batch_item *items,
                                  size_t n);

/* Where a batch stands, read from a batch object of either API. */
struct http_batch_status {
    char *id;             /* owned */
    bool ended;           /* no item will change any more */
    bool failed;          /* ended without running (OpenAI: failed) */
    char *output_file_id; /* owned; OpenAI, or NULL */
    char *error_file_id;  /* owned; OpenAI, or NULL */
    char *key;            /* owned; metadata.stepq_batch, or NULL */
    int64_t created_at;   /* ms since the epoch, or 0 */
    int64_t total;        /* its items, or -1 */
};
/* http_batch_status_read reads a batch object (root, borrowed) of api
 * (enum config_batch_api) into *out. Returns 0, or -EINVAL when it is no
 * batch object (no id). Clean with http_batch_status_cleanup. */
STEPQ_MUST_CHECK int http_batch_status_read(int api, const cJSON *root,
                                            struct http_batch_status *out);
void http_batch_status_cleanup(struct http_batch_status *s);

/* What happened to one item. */
enum http_batch_kind {
    HTTP_BATCH_SUCCEEDED,
    HTTP_BATCH_ERRORED,
    HTTP_BATCH_EXPIRED,
    HTTP_BATCH_CANCELLED,
};
struct http_batch_result {
    char *custom_id; /* owned */
    enum http_batch_kind kind;
    int status; /* SUCCEEDED 200; ERRORED the item's status; else 0 */
    char *body; /* owned: SUCCEEDED an OpenAI-shaped chat completion (an
                   Anthropic message turned into one, its usage kept),
                   ERRORED the error as the provider sent it; else NULL */
};
/* http_batch_results_read appends the JSONL results in body (len bytes)
 * of api to *out (*n of them, *cap allocated); lines that are not a
 * result are skipped (logged). Free with http_batch_results_free. */
void http_batch_results_read(int api, const char *body, size_t len,
                             struct http_batch_result **out, size_t *n,
                             size_t *cap);
void http_batch_results_free(struct http_batch_result *r, size_t n);

#endif

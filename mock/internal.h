/* internal.h: what the mock/ sources share (private to mock/).
 *
 * script.c turns script JSON into struct mock_script and limit.c runs its
 * rate limiters; answer.c decides the answer to one request from the script
 * and its state, body.c builds the bodies (no I/O in any of these). The
 * libuv server is mock.c (listener, reads, start and stop), conn.c (a
 * connection's reply queue, writes and wire faults) and request.c (parsing
 * with libhttp-parser, the request log).
 */
#ifndef STEPQ_MOCK_INTERNAL_H
#define STEPQ_MOCK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <http_parser.h>
#include <uv.h>

#include "common/defs.h"
#include "mock/mock.h"

enum mock_fault {
    MOCK_FAULT_NONE = 0,
    MOCK_FAULT_HANG,
    MOCK_FAULT_CLOSE,
    MOCK_FAULT_CLOSE_MID_BODY,
    MOCK_FAULT_TRUNCATE,
    MOCK_FAULT_INVALID_JSON,
    MOCK_FAULT_EMPTY,
    MOCK_FAULT_DRIP,         /* the body one byte a second */
    MOCK_FAULT_BAD_CHUNKED,  /* "Transfer-Encoding: chunked" with garbage */
    MOCK_FAULT_HUGE_HEADERS, /* a 1 MiB header before the others */
    MOCK_FAULT_BAD_STATUS,   /* a status line no client can read */
    MOCK_FAULT_STALL,        /* the head and half the body, then nothing
                                (the connection stays open) */
};

/* mock_fault_name returns "hang", ... or NULL for MOCK_FAULT_NONE. */
const char *mock_fault_name(enum mock_fault f);

struct mock_header {
    char *name;  /* owned */
    char *value; /* owned */
};

/* One scripted answer. -1 means "not set" for the int64 fields. */
struct mock_answer {
    int status;                  /* 0: default */
    struct mock_header *headers; /* owned array */
    size_t nheaders;
    char *body;          /* owned; NULL: generated */
    char *content;       /* owned; NULL: the route's */
    char *finish_reason; /* owned; NULL: the route's */
    enum mock_fault fault;
    int64_t delay_ms;
    int64_t oversize;
    int64_t completion_tokens;
    int64_t count;     /* >= 1 */
    cJSON *tool_calls; /* owned: the scripted calls (tools.c), or NULL */
};

/* Rate limiters (limit.c). */
enum mock_shape {
    MOCK_SHAPE_NONE = 0,
    MOCK_SHAPE_TOKEN_BUCKET,
    MOCK_SHAPE_FIXED_WINDOW,
    MOCK_SHAPE_SLIDING_WINDOW,
};

/* Which provider's rate-limit headers and 429 body a limit answers with. */
enum mock_hstyle {
    MOCK_HDR_OPENAI = 0,
    MOCK_HDR_ANTHROPIC,
    MOCK_HDR_NONE,
};

struct mock_slot {
    int64_t t;    /* monotonic ms the units were taken */
    int64_t cost; /* units taken */
};

/* One metered quantity (requests or tokens) of a limit. */
struct mock_meter {
    int64_t limit; /* per minute (bucket) or per window; 0: not metered */
    int64_t burst; /* token bucket capacity in units */
    double tat;    /* token bucket: theoretical arrival time, ms */
    int64_t win_idx, used; /* fixed window: wall / window_ms, units used */
    struct mock_slot *log; /* owned: sliding window ring */
    size_t head, n, cap;
    int64_t sum; /* sliding window: units inside the window */
};

struct mock_limit {
    enum mock_shape shape; /* NONE: the route is not limited */
    enum mock_hstyle headers;
    bool legacy; /* route-level "rpm": the old headers, on 429s only */
    int64_t window_ms;
    struct mock_meter req, tok;
};

/* What mock_limit_admit found. */
struct mock_limit_result {
    bool admitted;
    bool by_tokens;   /* refused: the token meter refused, not requests */
    bool too_large;   /* refused: the request costs more than the capacity */
    int64_t retry_ms; /* refused: wait until it would pass */
    int64_t tokens;   /* the request's estimated tokens */
};

/* A header the engine adds (Retry-After, x-ratelimit-* ...). */
struct mock_extra {
    const char *name; /* static */
    char value[64];
};

/* mock_limit_parse reads the optional "limit" member of a route object at
 * path into *l (left untouched when absent). Returns 0 or -EINVAL with
 * "PATH.limit...: problem" in err. */
STEPQ_MUST_CHECK int mock_limit_parse(const cJSON *route, const char *path,
                                      struct mock_limit *l, char *err,
                                      size_t len);
/* mock_limit_legacy sets *l to the route-level "rpm" sliding window. */
void mock_limit_legacy(struct mock_limit *l, int64_t rpm, int64_t window_ms);
/* mock_limit_cleanup frees the limit's logs. */
void mock_limit_cleanup(struct mock_limit *l);
/* mock_limit_admit decides one request costing tokens (estimated) at
 * monotonic now and wall-clock wall (ms); an admitted request is taken from
 * every meter. Returns res->admitted. */
bool mock_limit_admit(struct mock_limit *l, int64_t now, int64_t wall,
                      int64_t tokens, struct mock_limit_result *res);
/* mock_limit_headers writes up to max rate-limit headers of the limit's
 * style for an answer after res into x; returns how many. */
int mock_limit_headers(const struct mock_limit *l,
                       const struct mock_limit_result *res, int64_t now,
                       int64_t wall, struct mock_extra *x, int max);
/* mock_limit_message returns the message of a 429 after res. Caller frees. */
char *mock_limit_message(const struct mock_limit *l,
                         const struct mock_limit_result *res, int64_t now,
                         int64_t wall, const char *model);
/* mock_go_duration writes ms the way Go prints a time.Duration ("120ms",
 * "1.5s", "6m0s"), as OpenAI's x-ratelimit-reset-* headers do. */
void mock_go_duration(int64_t ms, char *buf, size_t len);

/* A route's "batch" object (batch.c): how its batches run. Times are ms
 * of the mock's loop clock from the batch's creation; -1 means "not set". */
struct mock_batch_conf {
    int64_t delay_ms;     /* creation (after validation) to the last item */
    int64_t validate_ms;  /* OpenAI: "validating" this long first */
    int64_t finalize_ms;  /* OpenAI: "finalizing" this long after the items */
    int64_t cancel_ms;    /* "cancelling" this long after a cancel */
    int64_t expire_ms;    /* -1: never; else items not done by then expire */
    int64_t error_every;  /* 0: none; else every Nth item (1-based) errors */
    int64_t expire_every; /* 0: none; every Nth item is never processed */
    char **error_ids;     /* owned: custom_ids that error */
    size_t nerror_ids;
    char **expire_ids; /* owned: custom_ids never processed (they expire) */
    size_t nexpire_ids;
    int error_status;     /* the errored items' status, default 500 */
    bool fail_validation; /* OpenAI: the batch fails validation */
    bool honor_cancel;    /* false: a cancel is taken, items still finish */
    int64_t max_batches;  /* live batches of the mock, from this route */
    int64_t max_items;    /* items in one batch */
};

/* Which protocol a route speaks (its "api"). */
enum mock_api {
    MOCK_API_OPENAI = 0, /* chat completions, OpenAI's errors */
    MOCK_API_ANTHROPIC,  /* the Messages API (anthropic.c) */
    MOCK_API_GEMINI,     /* generateContent (gemini.c) */
};

struct mock_route {
    char *path;                /* owned; "" for the catch-all route */
    enum mock_api api;         /* "api"; OpenAI when absent */
    char *model;               /* owned; NULL: "mock-model" */
    char *content;             /* owned; NULL: generated summary */
    char *finish_reason;       /* owned; NULL: "stop" */
    int64_t completion_tokens; /* -1: estimated */
    int64_t latency_ms, jitter_ms;
    struct mock_limit limit;  /* "limit", or the legacy "rpm" */
    int64_t allowance_tokens; /* 0: none */
    int64_t context_tokens;   /* 0: none */
    int storm_status;         /* 0: no storm */
    int64_t storm_requests;   /* 0: unbounded by count */
    int64_t storm_ms;         /* 0: unbounded by time */
    int64_t storm_after;
    struct mock_answer *answers; /* owned array */
    size_t nanswers;
    bool loop;
    bool exact; /* the request path must be path itself, not below it */
    struct mock_header *req_headers; /* owned: required, exact value; the
                                        name in any case */
    size_t nreq_headers;
    struct mock_header *req_query; /* owned: required query parameters */
    size_t nreq_query;
    struct mock_answer *unauthorized; /* owned; NULL: OpenAI's 401 */
    struct mock_batch_conf batch;     /* the batch endpoints' behaviour */
    cJSON *tool_turns;      /* owned: "tool_turns" (tools.c), or NULL */
    bool echo_tool_results; /* the final answer lists the results */

    /* State, changed by answer.c. */
    uint64_t requests;
    size_t next;       /* index into answers */
    int64_t next_used; /* uses of answers[next] so far */
    int64_t tokens_used;
    int64_t storm_start; /* -1: not started */
    int64_t storm_served;
    bool storm_over;
};

struct mock_script {
    uint64_t seed;
    struct mock_route *routes; /* owned; the last one is the catch-all */
    size_t nroutes;
};

/* mock_script_parse validates and converts script text (NULL: defaults).
 * Returns 0 with *out owned by the caller (mock_script_free), or -EINVAL
 * with "PATH: problem" in err. */
STEPQ_MUST_CHECK int mock_script_parse(const char *text,
                                       struct mock_script **out, char *err,
                                       size_t len);
/* mock_script_free releases a script; NULL is a no-op. */
void mock_script_free(struct mock_script *s);

/* A parsed request, borrowed by mock_answer for the call. */
struct mock_request {
    const char *method; /* "POST" */
    const char *path;   /* without the query string */
    const char *body;   /* may contain NULs; NUL-terminated */
    size_t body_len;
    const char *idempotency_key; /* NULL when absent */
    const char *query;           /* after '?', raw; "" when none */
    const cJSON *headers;        /* every header, names lower-case; may be
                                    NULL (none) */
};

/* What to send back. */
struct mock_reply {
    int status;
    char *head; /* owned: status line and headers, ending "\r\n\r\n" */
    size_t head_len;
    char *body; /* owned */
    size_t body_len;
    enum mock_fault fault; /* HANG, CLOSE, CLOSE_MID_BODY and the wire
                              faults (DRIP, BAD_CHUNKED, HUGE_HEADERS) act
                              here */
    int64_t delay_ms;
    const char *route;   /* borrowed from the script */
    const char *kind;    /* static: "chat", "generic", "rate_limit", ... */
    cJSON *request_json; /* owned: the parsed request body, or NULL */
    cJSON *batch_log;    /* owned: the log line's "batch" member, or NULL */
};

/* The state answer.c needs besides the script. */
struct mock_engine {
    struct mock_script *script; /* owned */
    uint64_t rng;
    uint64_t seq;                /* answers built so far */
    struct mock_stats *stats;    /* borrowed from the mock */
    struct mock_idem *idem;      /* owned list of remembered keys */
    int64_t wall_offset;         /* wall-clock ms minus the loop's ms */
    struct mock_bstore *batches; /* owned: files and batches; NULL: none */
};

/* mock_engine_answer decides and builds the reply to rq at time now_ms
 * (monotonic); keep_alive goes into the Connection header. The caller owns
 * the reply's buffers (mock_reply_cleanup). Never fails. */
void mock_engine_answer(struct mock_engine *e, const struct mock_request *rq,
                        int64_t now_ms, bool keep_alive,
                        struct mock_reply *out);
/* mock_engine_bad_request builds a 400 (or 413 when too_large) reply whose
 * connection closes afterwards. */
void mock_engine_bad_request(struct mock_engine *e, bool too_large,
                             struct mock_reply *out);
/* mock_engine_cleanup frees the script and the remembered keys. */
void mock_engine_cleanup(struct mock_engine *e);
/* mock_reply_cleanup frees the reply's buffers. */
void mock_reply_cleanup(struct mock_reply *r);

/* mock__error_body returns an OpenAI-style {"error": {...}} body; code may
 * be NULL (sent as null). Caller frees. */
char *mock__error_body(const char *message, const char *type, const char *code);
/* mock__status_error_body is the error body of a bare status (5xx: a
 * server_error). Caller frees. */
char *mock__status_error_body(int status);
/* mock__status_text returns the reason phrase of status ("Status" when it
 * has none). Static. */
const char *mock__status_text(int status);
/* mock__request_max_tokens returns the request's max_completion_tokens or
 * max_tokens, 0 when it asks for neither. */
int64_t mock__request_max_tokens(const cJSON *req);
/* mock__chat_body builds the chat completion of route r (answer a may be
 * NULL) for request req (borrowed; may be NULL) with prompt tokens, applies
 * the content faults and oversize_bytes, and sets *tokens to the tokens it
 * served. Caller frees. */
char *mock__chat_body(struct mock_engine *e, struct mock_route *r,
                      const struct mock_answer *a, const cJSON *req,
                      int64_t prompt, int64_t *tokens);
/* mock__generic_body builds the generic endpoint's answer to rq, padded to
 * oversize bytes when oversize > 0. Caller frees. */
char *mock__generic_body(struct mock_engine *e, const struct mock_request *rq,
                         int64_t oversize);
/* mock__limit_body is the 429 body of route r's limit after res, in the
 * limit's provider style. Caller frees. */
char *mock__limit_body(struct mock_engine *e, struct mock_route *r,
                       const struct mock_limit_result *res, const cJSON *req,
                       int64_t now);

/* ---- tool calls (tools.c) ---------------------------------------------- */

/* mock__tools_parse reads an answer's "tool_calls" (route false) or a
 * route's "tool_turns" (route true) of obj at path into *calls (a copy,
 * owned by the caller; untouched when absent). Returns 0 or -EINVAL with
 * "PATH.tool_calls[i].name: ..." in err. */
STEPQ_MUST_CHECK int mock__tools_parse(const cJSON *obj, const char *path,
                                       bool route, cJSON **calls, char *err,
                                       size_t len);
/* mock__tool_calls_for returns the tool_calls of the chat answer to req
 * (borrowed; may be NULL) by answer a (may be NULL) of route r, or NULL
 * when it has none; *content is then set (owned) when the answer's text
 * is the tool results the route echoes, else NULL. Caller owns both. */
cJSON *mock__tool_calls_for(const struct mock_engine *e,
                            const struct mock_route *r,
                            const struct mock_answer *a, const cJSON *req,
                            char **content);
/* mock__tool_messages_ok checks a chat request's messages as OpenAI does:
 * each assistant message's tool_calls answered by tool messages after it,
 * each tool message after such calls. False with OpenAI's message in msg
 * otherwise. */
bool mock__tool_messages_ok(const cJSON *req, char *msg, size_t len);
/* mock__anthropic_tool_use turns the tool_calls of msg (a chat answer's
 * message, borrowed) into Anthropic's tool_use blocks at the end of
 * content (whose first block, the text, goes when msg has no text). Returns
 * whether there were calls: the message then stops with "tool_use". */
bool mock__anthropic_tool_use(const cJSON *msg, cJSON *content);
/* mock__anthropic_tools_ok / mock__gemini_tools_ok check a native chat
 * request's tools and tool turns as the provider does (tools_native.c).
 * False with the provider's message in msg. */
bool mock__anthropic_tools_ok(const cJSON *req, char *msg, size_t len);
bool mock__gemini_tools_ok(const cJSON *req, char *msg, size_t len);

/* ---- the protocols (body.c dispatches; anthropic.c, gemini.c) ------ */

/* mock__is_chat: whether rq is a chat request of route r's api. */
bool mock__is_chat(const struct mock_route *r, const struct mock_request *rq);
/* mock__api_request_ok checks a chat request of api as its provider does
 * first; false with the provider's message in msg and, for OpenAI, its
 * code in *code. */
bool mock__api_request_ok(enum mock_api api, const cJSON *req, char *msg,
                          size_t len, const char **code);
/* mock__api_error is the error body of status in api's shape (message
 * NULL: the provider's usual one for the status); type and code are
 * OpenAI's (code may be NULL). Caller frees. */
char *mock__api_error(enum mock_api api, int status, const char *message,
                      const char *type, const char *code);
/* mock__wants_stream: whether rq asks for a streamed answer (OpenAI and
 * Anthropic: "stream": true in req; Gemini: :streamGenerateContent). */
bool mock__wants_stream(const struct mock_route *r,
                        const struct mock_request *rq, const cJSON *req);
/* mock__sse turns the 2xx answer body of route r's api (JSON text, as the
 * non-streamed answer) into the protocol's server-sent events, the text
 * in deltas of a few characters; OpenAI's usage chunk only when req asks
 * for it (stream_options.include_usage). Caller frees (stream.c). */
char *mock__sse(enum mock_api api, const char *body, const cJSON *req);
/* mock__finish_twin returns the twin of OpenAI finish reason finish in
 * twins (pairs of OpenAI's and the protocol's, NULL-terminated), or finish
 * itself. Borrowed. */
const char *mock__finish_twin(const char *finish, const char *const *twins);
/* mock__quota_body is the answer of a route whose allowance_tokens ran
 * out (Anthropic: a 400 about the credit balance; Gemini: a per-day 429
 * with a short retryDelay; OpenAI: insufficient_quota); mock__context_body
 * that of a prompt above context_tokens. Caller frees. */
char *mock__quota_body(enum mock_api api);
char *mock__context_body(enum mock_api api, int64_t prompt, int64_t max);
/* mock__anthropic_* and mock__gemini_*: a protocol's chat request test,
 * first checks, error body and answer (callers free the bodies). A Gemini
 * error with quota_id carries QuotaFailure, and RetryInfo when retry_ms is
 * not negative. */
bool mock__anthropic_is_chat(const struct mock_request *rq);
bool mock__anthropic_request_ok(const cJSON *req, char *msg, size_t len);
char *mock__anthropic_status_error(int status, const char *message);
char *mock__anthropic_chat(struct mock_engine *e, const char *model,
                           const char *content, const char *finish,
                           int64_t prompt, int64_t completion,
                           const cJSON *calls);
bool mock__gemini_is_chat(const struct mock_request *rq);
bool mock__gemini_request_ok(const cJSON *req, char *msg, size_t len);
char *mock__gemini_error(int status, const char *message, const char *quota_id,
                         int64_t retry_ms);
char *mock__gemini_chat(struct mock_engine *e, const char *model,
                        const char *content, const char *finish, int64_t prompt,
                        int64_t completion, const cJSON *calls);

/* mock__anthropic_error returns Anthropic's error body. Caller frees. */
char *mock__anthropic_error(const char *type, const char *message);
/* mock__anthropic_type is Anthropic's error type for an HTTP status. */
const char *mock__anthropic_type(int status);
/* mock__query_value finds parameter name in the raw query q (names and
 * values percent-decoded) and writes its value into buf (len bytes). False
 * when absent (answer.c). */
bool mock__query_value(const char *q, const char *name, char *buf, size_t len);

/* ---- the server (mock.c, conn.c, request.c) ----------------------------- */

struct conn;

/* One reply waiting in a connection's queue. */
struct resp {
    struct resp *next;
    struct conn *c;
    uv_timer_t timer; /* used when timer_on; data = this */
    bool timer_on;
    bool ready;
    enum mock_fault fault;
    bool close_after;
    char *buf; /* owned: head and body */
    size_t len;
    size_t sent;     /* drip: bytes written so far */
    size_t head_len; /* drip: the head, written at once */
};

struct conn {
    struct conn *prev, *next; /* in mock->conns */
    struct mock *m;
    uv_tcp_t tcp; /* data = this */
    http_parser parser;
    int refs;     /* tcp handle + running timers */
    bool closing; /* uv_close called on tcp */
    bool done;    /* no more requests are read */
    bool eof;     /* the client finished sending */
    bool stalled; /* a stall fault was sent: nothing more is */
    struct resp *head, *tail;
    size_t nqueued; /* replies in head..tail */

    /* Backpressure: a client that pipelines requests and never reads its
     * answers would make us hold every answer. Past MOCK_CONN_MAX_QUEUED
     * replies or MOCK_CONN_MAX_WRITE bytes not yet written, the parser is
     * paused and reading stops; the bytes read but not parsed wait here
     * (at most one read) until the client has taken its answers. */
    bool read_paused;
    char *rest; /* owned */
    size_t rest_len;

    /* The request being parsed; reset in on_message_begin. */
    char *url;
    size_t url_len;
    char *field, *value;
    size_t field_len, value_len;
    bool in_value;
    char *idem;        /* owned */
    char *auth_scheme; /* owned: "Bearer", never the credentials */
    bool auth;
    bool expect;
    cJSON *headers;     /* owned: the headers we log */
    cJSON *all_headers; /* owned: every header, for a route's require_* */
    char *body;
    size_t body_len, body_cap;
    bool too_large;
};

struct mock {
    uv_loop_t *loop;
    uv_tcp_t server; /* data = this */
    int port;
    struct mock_engine engine;
    struct mock_stats stats;
    FILE *log; /* owned; NULL: no log file */
    bool log_stderr;
    int64_t t0;
    struct conn *conns;
    size_t nconns;
    bool stopping, server_closed;
    mock_stop_cb stop_cb;
    void *stop_arg;
    char rbuf[65536]; /* every read lands here and is parsed at once */
};

/* mock__maybe_done frees a stopping mock once the listener and every
 * connection are closed, then calls its stop callback (mock.c). */
void mock__maybe_done(struct mock *m);

/* mock__conn_close closes c's tcp handle and frees its queued replies; c is
 * freed in the last close callback. A second call is a no-op (conn.c). */
void mock__conn_close(struct conn *c);
/* mock__conn_write writes len bytes: owned (freed after the write) or, when
 * owned is NULL, data, which must stay valid (static). A failed write
 * closes c. */
void mock__conn_write(struct conn *c, char *owned, const char *data,
                      size_t len);
/* mock__conn_flush writes the ready replies at the head of c's queue, plays
 * their wire faults, and finishes c after the client's EOF. */
void mock__conn_flush(struct conn *c);
/* mock__conn_enqueue copies rep's head and body (borrowed) into c's queue
 * and sends it after its delay; close_after ends c once it is written. */
void mock__conn_enqueue(struct conn *c, struct mock_reply *rep,
                        bool close_after);

/* mock__conn_is_full says whether c holds as many unsent answers as it may:
 * then no further request of c is read until some are written. */
bool mock__conn_is_full(const struct conn *c);
/* mock__conn_resume parses what c held back and starts reading again, once
 * c is no longer full; a no-op otherwise (request.c). */
void mock__conn_resume(struct conn *c);
/* mock__conn_read_start starts reading c; a failure closes c (mock.c). */
void mock__conn_read_start(struct conn *c);

/* mock__request_reset frees the request being parsed on c (request.c). */
void mock__request_reset(struct conn *c);
/* mock__conn_parse feeds len bytes read from c to its parser; complete
 * requests are answered and logged, a malformed one gets a 400 (413 for a
 * body above the cap) and ends c. */
void mock__conn_parse(struct conn *c, const char *data, size_t len);

#endif

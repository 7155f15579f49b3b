/* internal.h: what the mock/ sources share (private to mock/).
 *
 * script.c turns script JSON into struct mock_script; answer.c decides the
 * answer to one request from the script and its state (no I/O); mock.c is
 * the libuv server, the connections and the request log.
 */
#ifndef STEPQ_MOCK_INTERNAL_H
#define STEPQ_MOCK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

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
    int64_t count; /* >= 1 */
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

struct mock_route {
    char *path;                /* owned; "" for the catch-all route */
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
};

/* The state answer.c needs besides the script. */
struct mock_engine {
    struct mock_script *script; /* owned */
    uint64_t rng;
    uint64_t seq;             /* answers built so far */
    struct mock_stats *stats; /* borrowed from the mock */
    struct mock_idem *idem;   /* owned list of remembered keys */
    int64_t wall_offset;      /* wall-clock ms minus the loop's ms */
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

#endif

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

struct mock_route {
    char *path;                /* owned; "" for the catch-all route */
    char *model;               /* owned; NULL: "mock-model" */
    char *content;             /* owned; NULL: generated summary */
    char *finish_reason;       /* owned; NULL: "stop" */
    int64_t completion_tokens; /* -1: estimated */
    int64_t latency_ms, jitter_ms;
    int64_t rpm, rpm_window_ms; /* rpm 0: no limit */
    int64_t allowance_tokens;   /* 0: none */
    int64_t context_tokens;     /* 0: none */
    int storm_status;           /* 0: no storm */
    int64_t storm_requests;     /* 0: unbounded by count */
    int64_t storm_ms;           /* 0: unbounded by time */
    int64_t storm_after;
    struct mock_answer *answers; /* owned array */
    size_t nanswers;
    bool loop;

    /* State, changed by answer.c. */
    uint64_t requests;
    size_t next;       /* index into answers */
    int64_t next_used; /* uses of answers[next] so far */
    int64_t *ring;     /* owned: times of admitted requests, rpm slots */
    size_t ring_head, ring_n;
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

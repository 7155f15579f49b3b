/* mock.h: the scripted OpenAI-compatible endpoint behind `stepq mock`.
 *
 * mock/ owns that endpoint and nothing else: the HTTP/1.1 server on a libuv
 * loop (mock.c, conn.c, request.c), the script and its validation
 * (script.c), the provider-shaped rate limiters (limit.c), the answers
 * and their bodies (answer.c, body.c), and the batch APIs (batch.c,
 * batch_files.c, batch_openai.c, batch_anthropic.c). This is its one public
 * header; mock/internal.h is private to the folder.
 *
 * A small HTTP/1.1 server (keep-alive, pipelining, requests parsed with
 * libhttp-parser) that runs on a caller's libuv loop. POST .../chat/completions
 * under any base path answers in the OpenAI chat-completions shape;
 * .../v1/files and .../v1/batches are OpenAI's Files and Batch APIs and
 * .../v1/messages/batches Anthropic's Message Batches, kept in memory and
 * run on the loop's clock (docs/mock.md, "Batches"); every other method and
 * path is the generic endpoint for http steps, which answers
 * 200 with a small JSON body and remembers Idempotency-Key (a repeated key
 * replays the first answer with "Idempotent-Replayed: true"). A JSON script
 * makes it fail on cue. Every request is logged as one JSON line.
 *
 * Script format (all fields optional; unknown fields are refused, errors name
 * the JSON path such as "routes[0].answers[1].fault: must be one of ..."):
 *
 *   {
 *     "seed": 7,                  jitter PRNG seed (default 1: reproducible)
 *     ...route fields...          the catch-all route: paths no route matches
 *     "routes": [                 most specific (longest) path prefix wins
 *       {"path": "/free", ...route fields...}
 *     ]
 *   }
 *
 * Route fields (each route keeps its own counters; routes do not inherit):
 *   path               prefix on a segment boundary: "/free" matches
 *                      "/free/v1/chat/completions"; required inside routes
 *   model              model echoed when the request names none ("mock-model")
 *   content            default chat content: a string, or any JSON value
 *                      (sent serialized). Default {"summary": "..."}
 *   finish_reason      default "stop"
 *   completion_tokens  reported completion tokens (default content bytes/4)
 *   latency_ms, jitter_ms   every answer waits latency + uniform[0, jitter]
 *   rpm, rpm_window_ms sliding window (default 60000 ms): beyond rpm requests
 *                      in a window, 429 + Retry-After, code rate_limit_exceeded
 *                      (headers on 429s only; kept for old scripts)
 *   limit              {"shape": "token_bucket"|"fixed_window"|
 *                       "sliding_window", "rpm": N, "tpm": T, "burst": B,
 *                       "burst_tokens": BT, "window_ms": W, "headers":
 *                       "openai"|"anthropic"|"none"}: a provider-shaped
 *                      limiter (limit.c, docs/mock.md) whose rate-limit
 *                      headers go on every answer, successes too
 *   allowance_tokens   once this many tokens (prompt + completion) have been
 *                      served, chat answers 429 insufficient_quota for good
 *   context_tokens     a prompt above it answers 400 context_length_exceeded
 *   storm              {"status": 503, "requests": N, "seconds": T,
 *                       "after": K}: after K requests, answer status (default
 *                      503) to N requests or for T seconds, whichever ends
 *                      first (one of requests/seconds is required)
 *   answers            a sequence consumed one per request that passed the
 *                      limits above; then defaults resume ("loop": true
 *                      starts the sequence again)
 *   loop               see answers
 *   exact              true: the route takes its path alone, not the paths
 *                      below it (routes only)
 *   require_headers    {"api-key": "VALUE"}: each header must be there with
 *                      exactly that value (name in any case), else 401 with
 *                      OpenAI's invalid_api_key body (or "unauthorized")
 *   require_query      {"api-version": "2024-10-21"}: each parameter must be
 *                      there with that value (percent-decoded), else 404
 *   unauthorized       the answer (fields as below, status 401 by default)
 *                      to a request that lacks a required header
 *   batch              {"delay_ms", "validate_ms", "finalize_ms",
 *                       "cancel_ms", "expire_ms", "error_every",
 *                       "error_ids", "error_status", "expire_every",
 *                       "expire_ids", "fail_validation", "honor_cancel",
 *                       "max_batches", "max_items"}: how the route's
 *                      batches run (batch.c, docs/mock.md)
 *
 * Answer fields (one element of "answers"):
 *   status             HTTP status (default 200)
 *   headers            {"Name": "value"} added to the answer
 *   body               raw body: a string (sent as is) or a JSON value;
 *                      replaces the generated body
 *   content, finish_reason, completion_tokens   override the route's
 *   delay_ms           extra wait before answering
 *   fault              "hang" (never answer), "close" (close without an
 *                      answer), "close_mid_body" (send the head and half the
 *                      body, then close), "truncate" (content cut in half,
 *                      finish_reason "length"), "invalid_json" (content that
 *                      does not parse), "empty" (empty content), "drip"
 *                      (the body one byte a second), "bad_chunked" (a chunk
 *                      size that is not hex), "huge_headers" (a 1 MiB
 *                      header first), "bad_status" (a status line that
 *                      is not HTTP's, then close)
 *   oversize_bytes     pad the body to exactly this many bytes
 *   count              use this answer N times in a row (default 1)
 *
 * Order for each request: route match, required headers and query,
 * storm, a batch endpoint's answer, rpm or limit, allowance, context, then the
 * sequence, then the defaults. Limits are checked before the sequence, like a
 * gateway in front of a model. See docs/mock.md.
 *
 * Log line (one JSON object per request, written when the answer is decided):
 *   {"seq", "ts_ms", "t_ms", "method", "path", "route", "kind", "status",
 *    "fault", "delay_ms", "idempotency_key", "authorization" (true/false: the
 *    value is never logged), "query" (values of parameters named like a
 *    credential as "***"), "headers" (content-type, user-agent, accept,
 *    and x-* except names with key, auth, token, secret, sig, password or
 *    cookie), "body_bytes", "body" (JSON value when it parses, else a
 *    string), "batch" (batch endpoints: {"api", "op", "id", "status",
 *    "items"})}
 *
 * The caller must ignore SIGPIPE (signal(SIGPIPE, SIG_IGN)), as with any
 * libuv program that writes to sockets.
 */
#ifndef STEPQ_MOCK_MOCK_H
#define STEPQ_MOCK_MOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/defs.h"

typedef struct mock mock;

/* Options for mock_start_with. Strings are borrowed for the call only. */
struct mock_options {
    const char *host;     /* IPv4 literal; NULL means "127.0.0.1" */
    int port;             /* 0 picks a free port */
    const char *script;   /* JSON text of a script; NULL means defaults */
    const char *log_path; /* append request lines here; NULL: no file */
    bool log_stderr;      /* also write request lines to stderr */
};

/* Request counters since start. */
struct mock_stats {
    uint64_t requests;     /* requests parsed, all paths */
    uint64_t chat;         /* chat-completion requests */
    uint64_t generic;      /* generic-endpoint requests */
    uint64_t ok;           /* answers with a 2xx status */
    uint64_t rate_limited; /* 429 from the rpm limit */
    uint64_t quota;        /* 429 insufficient_quota from the allowance */
    uint64_t storm;        /* answers from a 5xx storm */
    uint64_t scripted;     /* answers taken from an "answers" sequence */
    uint64_t faults;       /* hang, close, close_mid_body and wire faults */
    uint64_t replays;      /* generic answers replayed for a known key */
    uint64_t tokens;       /* tokens served by chat answers */
    uint64_t connections;  /* connections accepted */
    uint64_t bad_requests; /* requests that did not parse (answered 400) */
    uint64_t batch;        /* batch and files endpoints (in generic too) */
};

/* Called once the mock is fully closed and freed. */
typedef void (*mock_stop_cb)(void *arg);

/* mock_start_with validates opts->script, binds opts->host:opts->port and
 * starts serving on loop. On success *out is the mock (owned by the caller:
 * end it with mock_stop) and *port the bound port. Returns -EINVAL for a bad
 * script (err gets "PATH: problem"), or a negative errno from socket/bind
 * (-EADDRINUSE ...; err says so). The out-params stay untouched on failure.
 * Script, log and bind errors happen before the loop is touched; only a
 * failure inside libuv after that leaves a closing handle (run the loop). */
STEPQ_MUST_CHECK int mock_start_with(uv_loop_t *loop,
                                     const struct mock_options *opts,
                                     mock **out, int *port, char *err,
                                     size_t len);

/* mock_start is mock_start_with on 127.0.0.1 with port 0 and no stderr log;
 * script and log_path may be NULL. Errors are logged with log_error. */
STEPQ_MUST_CHECK int mock_start(uv_loop_t *loop, const char *script,
                                const char *log_path, mock **out, int *port);

/* mock_stop closes the listener and every connection (hung ones too). The
 * mock is freed in the last close callback, which then calls cb(arg) (cb may
 * be NULL). Run the loop to let it finish. mock_stop(NULL, ...) is a no-op;
 * calling it twice is not allowed. */
void mock_stop(mock *m, mock_stop_cb cb, void *arg);

/* mock_get_stats copies the counters into *out. */
void mock_get_stats(const mock *m, struct mock_stats *out);

/* mock_port returns the bound port. */
int mock_port(const mock *m);

/* mock_script_check validates script JSON text without starting anything.
 * Returns 0, or -EINVAL with "PATH: problem" in err. */
STEPQ_MUST_CHECK int mock_script_check(const char *script, char *err,
                                       size_t len);

#endif

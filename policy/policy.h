/* policy.h: the one public header of policy/. policy/ owns what an answer
 * means and what to do about it (docs/reference.md "Outcomes and
 * decisions"): classify what an endpoint answered, decide what to do next,
 * the header and error-text parsers behind both, the user classify rules of
 * the config, and the names of its enums as the reference prints them.
 *
 * Files: names.c (enum <-> name), rules.c (config numbers, user rules:
 * compile, match), classify.c (status, headers, body -> outcome, reason,
 * waits), bodies.c (2xx bodies), gateway.c (a gateway's own failures),
 * decide.c (the decide table), parse.c (header and text parsers).
 * policy/internal.h is shared by them only.
 *
 * The module is pure: no I/O, no clock reads, no logging, no hidden state,
 * and nothing of worker/. Time (now_ms), jitter seed, configuration and the
 * per-tier throttle streak all come in as arguments, so every branch is
 * testable from a table.
 *
 *   policy_classify(input, config, streak) -> outcome, reason, waits learned
 *   policy_decide(class, step, config)     -> decision, wait, reason
 *
 * Reason strings are static, or borrowed from the policy_rules a user rule
 * came from (valid until policy_rules_free).  Nothing returned is owned by
 * the caller except a policy_rules object.
 */
#ifndef STEPQ_POLICY_POLICY_H
#define STEPQ_POLICY_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "common/defs.h"

struct cJSON; /* <cjson/cJSON.h>: a body the caller parsed */

/* Outcomes of classify, in the reference's order; names are snake_case as
 * printed. */
enum policy_outcome {
    POLICY_OK,
    POLICY_SOFT_THROTTLE,
    POLICY_HARD_QUOTA,
    POLICY_TRUNCATED,
    POLICY_SCHEMA_INVALID,
    POLICY_REFUSED,
    POLICY_SERVER_ERROR,
    POLICY_TIMEOUT,
    POLICY_UNKNOWN,
    POLICY_OUTCOME_COUNT
};

/* Decisions of decide ("commit", "backoff_retry", ...). */
enum policy_action {
    POLICY_COMMIT,
    POLICY_BACKOFF_RETRY,
    POLICY_SWITCH_TIER_REPLAY,
    POLICY_DEGRADE_THEN_RETRY,
    POLICY_PARK_FOR_HUMAN,
    POLICY_FAIL_LOUD,
    POLICY_ACTION_COUNT
};

/* A failure below HTTP: there is no status. */
enum policy_transport {
    POLICY_TRANSPORT_NONE,      /* an HTTP response arrived */
    POLICY_TRANSPORT_TIMEOUT,   /* client timeout ("timeout") */
    POLICY_TRANSPORT_REFUSED,   /* connection refused ("refused") */
    POLICY_TRANSPORT_RESET,     /* connection reset or lost ("reset") */
    POLICY_TRANSPORT_TLS,       /* TLS handshake or certificate ("tls") */
    POLICY_TRANSPORT_TOO_LARGE, /* answer above max_response_bytes */
    /* an answer that is not HTTP ("bad_response"): the server got the
     * request and said something no client can read */
    POLICY_TRANSPORT_BAD_RESPONSE,
    /* a certificate refused ("tls_certificate"): the endpoint's is not
     * trusted by the tier's CAs, or the tier's own is bad */
    POLICY_TRANSPORT_TLS_CERTIFICATE,
    POLICY_TRANSPORT_COUNT
};

/* Whether the output parsed and held the step's expect_json keys. */
enum policy_parsed {
    POLICY_PARSED_DERIVE, /* unknown: derived from the body (content) */
    POLICY_PARSED_YES,
    POLICY_PARSED_NO
};

/* Circuit breaker state of the tier the attempt went to. */
enum policy_breaker {
    POLICY_BREAKER_CLOSED,
    POLICY_BREAKER_OPEN,
    POLICY_BREAKER_HALF_OPEN,
    POLICY_BREAKER_COUNT
};

/* Reasons: why classify gave its outcome ("rpm", "daily_cap", ...) and why
 * decide chose its action ("in_doubt", "throttle_wait", ...). The code
 * branches on the enum; the names, which docs/reference.md "Outcomes and
 * decisions" lists and which attempts, logs and JSON carry, are this one
 * table's and stay as they are (they are the contract). X(ID, name). */
#define POLICY_REASON_LIST(X)                                                  \
    X(NONE, "none") /* an ok answer: no reason (policy_class.reason NULL) */   \
    /* classify: the body's words, the status, the transport */                \
    X(RPM, "rpm")                                                              \
    X(TPM, "tpm")                                                              \
    X(RATE_LIMIT, "rate_limit")                                                \
    X(DAILY_CAP, "daily_cap")                                                  \
    X(MONTHLY_CAP, "monthly_cap")                                              \
    X(INSUFFICIENT_QUOTA, "insufficient_quota")                                \
    X(SPEND_LIMIT, "spend_limit")                                              \
    X(AUTH, "auth")                                                            \
    X(TOO_LARGE, "too_large")                                                  \
    X(CONTEXT_OVERFLOW, "context_overflow")                                    \
    X(RESPONSE_TOO_LARGE, "response_too_large")                                \
    X(CONTENT_FILTER, "content_filter")                                        \
    X(OVERLOADED, "overloaded")                                                \
    X(LOADING, "loading")                                                      \
    X(HTML_ERROR, "html_error")                                                \
    X(EMPTY_OUTPUT, "empty_output")                                            \
    X(LENGTH, "length")                                                        \
    X(INVALID_OUTPUT, "invalid_output")                                        \
    X(NOT_A_COMPLETION, "not_a_completion")                                    \
    X(ERROR_BODY, "error_body")                                                \
    X(BAD_REQUEST, "bad_request")                                              \
    X(NOT_FOUND, "not_found")                                                  \
    X(SERVER, "server")                                                        \
    X(STATUS, "status")                                                        \
    X(GATEWAY_CONFIG, "gateway_config")                                        \
    X(GATEWAY_ERROR, "gateway_error")                                          \
    X(RESET, "reset")                                                          \
    X(TLS, "tls")                                                              \
    X(TLS_CERTIFICATE, "tls_certificate")                                      \
    X(BAD_RESPONSE, "bad_response")                                            \
    X(TRANSPORT, "transport")                                                  \
    X(LONG_WAIT, "long_wait")                                                  \
    X(ESCALATED, "escalated")                                                  \
    X(RULE, "rule") /* a user rule; its own name is policy_class.reason */     \
    /* decide; park_for_human and fail_loud give the outcome's name */         \
    X(OK, "ok")                                                                \
    X(IN_DOUBT, "in_doubt")                                                    \
    X(THROTTLE_WAIT, "throttle_wait")                                          \
    X(THROTTLE_SWITCH, "throttle_switch")                                      \
    X(DEGRADE, "degrade")                                                      \
    X(SCHEMA_RETRY, "schema_retry")                                            \
    X(TOO_LARGE_SWITCH, "too_large_switch")                                    \
    X(REFUSED_SWITCH, "refused_switch")                                        \
    X(WALL_SWITCH, "wall_switch")                                              \
    X(WALL_RESET, "wall_reset")                                                \
    X(BACKOFF, "backoff")                                                      \
    X(FAILURE_SWITCH, "failure_switch")                                        \
    /* outcomes' names (refused and timeout are also classify's reasons) */    \
    X(SOFT_THROTTLE, "soft_throttle")                                          \
    X(HARD_QUOTA, "hard_quota")                                                \
    X(TRUNCATED, "truncated")                                                  \
    X(SCHEMA_INVALID, "schema_invalid")                                        \
    X(REFUSED, "refused")                                                      \
    X(SERVER_ERROR, "server_error")                                            \
    X(TIMEOUT, "timeout")                                                      \
    X(UNKNOWN, "unknown")

#define POLICY__REASON_ENUM(id, name) POLICY_REASON_##id,
enum policy_reason {
    POLICY_REASON_LIST(POLICY__REASON_ENUM) POLICY_REASON_COUNT
};
#undef POLICY__REASON_ENUM

/* One response header. Both strings are borrowed and NUL-terminated; names
 * are compared case-insensitively. */
struct policy_header {
    const char *name;
    const char *value;
};

/* Compiled user classify rules (config "classify"). Opaque. */
typedef struct policy_rules policy_rules;

/* The numbers of config "policy", in milliseconds, plus the user rules. */
struct policy_config {
    int64_t switch_wait_ms;    /* a longer server wait is a wall; 60 s */
    int64_t escalate_after_ms; /* soft throttles in a row -> wall; 300 s */
    int max_throttle_waits;    /* backoff waits on soft throttles; 20 */
    int64_t backoff_base_ms;   /* 1 s */
    int64_t backoff_cap_ms;    /* 20 s */
    const policy_rules *rules; /* borrowed; NULL: defaults only */
};

/* Input of classify: one answer (or transport failure) of one attempt. */
struct policy_input {
    int status;                          /* HTTP status; ignored on transport */
    enum policy_transport transport;     /* NONE when a response arrived */
    const struct policy_header *headers; /* borrowed array of nheaders */
    size_t nheaders;
    const char *body; /* borrowed bytes, NOT NUL-terminated; any */
    size_t body_len;  /* content, size or encoding */
    /* Borrowed: body already parsed as JSON by the caller (exactly those
     * bytes), or NULL: classify parses it when it needs to. */
    const struct cJSON *json;
    const char *finish_reason; /* borrowed; NULL: read from the body */
    enum policy_parsed parsed; /* the output met expect_json */
    bool http_step;            /* kind "http": a 2xx needs no completion */
    int64_t now_ms;            /* wall clock, ms since the epoch */
};

/* What classify learned. Times are ms since the epoch, -1 when unknown;
 * counts are -1 when the headers did not say. */
struct policy_class {
    enum policy_outcome outcome;
    /* The reason's name, for the edges (attempt rows, logs, JSON): static,
     * or a user rule's own name borrowed from the policy_rules; NULL for
     * ok. Code branches on why. */
    const char *reason;
    enum policy_reason why; /* a user rule named by a known name has it */
    int rule;               /* index of the user rule that matched, or -1 */
    int64_t wait_ms;        /* the wait the endpoint asked for, or -1 */
    int64_t reset_at_ms;    /* hard_quota: when the wall lifts, or -1. The
                               worker may fill it from its tier knowledge
                               before calling policy_decide */
    int64_t remaining_requests;
    int64_t remaining_tokens;
    int64_t requests_reset_at_ms; /* when the request window refills */
    int64_t tokens_reset_at_ms;   /* when the token window refills */
};

/* Per-tier memory for the escalation of repeated soft throttles. The caller
 * keeps one per tier (zero-initialised) and passes it to every classify of
 * an answer from that tier. */
struct policy_streak {
    int64_t first_ms; /* time of the first soft throttle in the streak */
    int count;        /* soft throttles since the last success */
};

/* Input of decide: the step's context at the moment of deciding. */
struct policy_step {
    int attempts_left;    /* sends left on this tier (max_attempts - used) */
    int attempts_used;    /* sends so far on this tier (backoff exponent) */
    int64_t input_tokens; /* estimate for the request about to be sent */
    int64_t token_budget; /* the size one request is planned to fit
                             (input + output, docs/reference.md token_budget):
                             the 60% rule's yardstick; 0: never degrades */
    int tiers_left;       /* other tiers that admit now or within slack */
    bool replayable;
    bool side_effects;
    bool idempotency_key;         /* present */
    bool write_may_have_happened; /* see policy_write_may_have_happened */
    bool degraded;                /* degrade_then_retry already used */
    bool schema_retried; /* the one schema_invalid retry already used */
    int throttle_waits_used;
    enum policy_breaker breaker; /* current tier, this failure counted */
    int64_t slack_ms; /* deadline - now - expected cost of one attempt */
    int64_t now_ms;
    uint64_t seed; /* jitter; any value, e.g. random per decision */
};

/* Output of decide. */
struct policy_decision {
    enum policy_action action;
    int64_t wait_ms;    /* backoff_retry: delay before the retry; else 0 */
    const char *reason; /* static: the name of why, for the edges */
    enum policy_reason why;
};

/* policy_config_init fills cfg from the config "policy" numbers (NULL: the
 * the defaults of docs/reference.md) and borrows rules (may be NULL). Never
 * fails. */
void policy_config_init(struct policy_config *cfg,
                        const struct config_policy *numbers,
                        const policy_rules *rules);

/* policy_rules_new compiles the user classify rules (POSIX extended regular
 * expressions, case-insensitive). Returns 0 with *out owned by the caller
 * (free with policy_rules_free), or -EINVAL with the rule named in err
 * ("classify[2].body: ...") for a bad expression or an unknown outcome.
 * *out is untouched on failure. */
STEPQ_MUST_CHECK int policy_rules_new(const struct config_rule *rules, size_t n,
                                      policy_rules **out, char *err,
                                      size_t errlen);

/* policy_rules_free releases rules; NULL is a no-op. */
void policy_rules_free(policy_rules *rules);

/* policy_classify classifies one answer: user rules first, then the reference's
 * default rules (body discriminators, then status, then the length of the
 * wait). Any body is safe: it is read only within body_len. streak may be
 * NULL (no escalation); otherwise it is updated in place. Never fails. */
void policy_classify(const struct policy_input *in,
                     const struct policy_config *cfg,
                     struct policy_streak *streak, struct policy_class *out);

/* policy_class_init sets c to outcome o with reason why (its name as the
 * reason text, NULL for POLICY_REASON_NONE), no rule, and every time, wait
 * and count unknown (-1): a class for an answer no classify read (a
 * request lost in a crash). Never fails. */
void policy_class_init(struct policy_class *c, enum policy_outcome o,
                       enum policy_reason why);

/* policy_decide walks the reference's ordered decide table for the classified
 * answer c and the step s. Never fails; out->reason is static. */
void policy_decide(const struct policy_class *c, const struct policy_step *s,
                   const struct policy_config *cfg,
                   struct policy_decision *out);

/* policy_may_resend tells whether a step whose last request may have
 * reached the endpoint may be sent again without a human: it is
 * replayable or has an idempotency key, and it is not a write without a
 * key (decide's in-doubt row). Never fails. */
bool policy_may_resend(bool replayable, bool side_effects, bool keyed);

/* policy_write_may_have_happened tells whether the endpoint may have acted
 * on the request (a 2xx, a 5xx, a timeout, a connection lost after
 * sending), for policy_step.write_may_have_happened. */
bool policy_write_may_have_happened(const struct policy_input *in);

/* policy_is_config_wall reports whether a hard_quota reason is a wall only
 * a change of the tier's config lifts: auth (a key refused) and
 * tls_certificate (a certificate refused). policy_reason_is_config_wall
 * asks the same of a reason's name (a tier's stored wall); NULL: false. */
bool policy_is_config_wall(enum policy_reason r);
bool policy_reason_is_config_wall(const char *reason);

/* policy_counts_for_breaker: only server_error and timeout count. */
bool policy_counts_for_breaker(enum policy_outcome o);

/* policy_backoff_ms returns the capped exponential backoff with full jitter
 * for the n-th retry (n >= 0): uniform in [0, min(cap, base * 2^n)], drawn
 * from seed. */
int64_t policy_backoff_ms(const struct policy_config *cfg, int n,
                          uint64_t seed);

/* Names as docs/reference.md prints them. *_name returns a static string ("?"
 * for an out-of-range value); *_from_name returns 0 or -EINVAL (out untouched).
 */
const char *policy_outcome_name(enum policy_outcome o);
STEPQ_MUST_CHECK int policy_outcome_from_name(const char *name,
                                              enum policy_outcome *out);
const char *policy_action_name(enum policy_action a);
STEPQ_MUST_CHECK int policy_action_from_name(const char *name,
                                             enum policy_action *out);
const char *policy_transport_name(enum policy_transport t);
STEPQ_MUST_CHECK int policy_transport_from_name(const char *name,
                                                enum policy_transport *out);
const char *policy_breaker_name(enum policy_breaker b);
const char *policy_reason_name(enum policy_reason r);
/* policy_reason_from_name: a name not in the table is -EINVAL (a user
 * rule's own name is POLICY_REASON_RULE). */
STEPQ_MUST_CHECK int policy_reason_from_name(const char *name,
                                             enum policy_reason *out);
STEPQ_MUST_CHECK int policy_breaker_from_name(const char *name,
                                              enum policy_breaker *out);

/* Header value parsers (also used by classify). Each takes a NUL-terminated
 * string, returns 0 or -EINVAL for anything malformed (negative, garbage,
 * missing units, overflow) and leaves *out untouched on failure. Results are
 * clamped to POLICY_MAX_WAIT_MS. */
#define POLICY_MAX_WAIT_MS ((int64_t)400 * 24 * 3600 * 1000)

/* POLICY_HEADER_WAIT_MAX_MS bounds what a header may ask for: a wait
 * (retry-after in seconds or as an HTTP date, retry-after-ms) or a reset
 * (x-ratelimit-reset*, anthropic-ratelimit-*-reset) more than a day away is
 * bogus (docs/reference.md, "Learning from headers") and is ignored as if
 * the header were absent; exactly a day is still believed. The one
 * definition of the bound: the worker's tier state should use it too. */
#define POLICY_HEADER_WAIT_MAX_MS ((int64_t)24 * 3600 * 1000)

/* POLICY_TEXT_WAIT_MAX_MS bounds a wait an error's text asks for ("try
 * again in 99999999999s", a retryDelay of thousands of years): past it the
 * text is bogus and counts as naming no wait. Longer than a header's bound,
 * as a text may name a monthly quota's reset; no quota waits longer. */
#define POLICY_TEXT_WAIT_MAX_MS ((int64_t)31 * 24 * 3600 * 1000)

/* policy_parse_duration: Go-style "6m0s", "1.5s", "20ms", "1h2m", "0". */
STEPQ_MUST_CHECK int policy_parse_duration(const char *s, int64_t *ms);
/* policy_parse_http_date: IMF-fixdate, RFC 850 or asctime -> ms since the
 * epoch. */
STEPQ_MUST_CHECK int policy_parse_http_date(const char *s, int64_t *at_ms);
/* policy_parse_retry_after: delay-seconds (decimals allowed) or an HTTP
 * date; the wait from now_ms (0 when the date is past). */
STEPQ_MUST_CHECK int policy_parse_retry_after(const char *s, int64_t now_ms,
                                              int64_t *wait_ms);
/* policy_parse_count: a non-negative whole number ("4999"), surrounding
 * blanks allowed; saturates at INT64_MAX (limit and remaining headers). */
STEPQ_MUST_CHECK int policy_parse_count(const char *s, int64_t *out);

#endif

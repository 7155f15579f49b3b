/* classify.c: policy_classify, what one answer was (docs/reference.md
 * "Outcomes and decisions").
 *
 * classify never decides on the status alone. The order is: user rules
 * (rules.c); then body discriminators (context, size, content policy, wall
 * words, auth, overload, throttle words); then the status; then the length
 * of the wait the endpoint asked for (a long wait makes a throttle a wall);
 * then the escalation of a streak of soft throttles. Error bodies are
 * searched as lower-cased text rather than as JSON, because real error
 * bodies arrive truncated, as Python reprs, as HTML, or wrapped in arrays;
 * only a 2xx body is parsed (bodies.c), to tell a completion from an error
 * object. The waits and windows an answer tells of are learned here too.
 */
#include "policy/policy.h"

#include <assert.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "policy/internal.h"

/* Error texts are read from their first 64 KiB: every provider puts the
 * message first, and this bounds the work per answer. */
#define SCAN_BYTES ((size_t)64 * 1024)

void
policy__set(struct policy_class *out, enum policy_outcome o,
            enum policy_reason why)
{
    assert((unsigned)o < POLICY_OUTCOME_COUNT);
    assert((unsigned)why < POLICY_REASON_COUNT);
    out->outcome = o;
    out->why = why;
    out->reason = why == POLICY_REASON_NONE ? NULL : policy_reason_name(why);
}

void
policy_class_init(struct policy_class *c, enum policy_outcome o,
                  enum policy_reason why)
{
    *c = (struct policy_class){.rule = -1,
                               .wait_ms = -1,
                               .reset_at_ms = -1,
                               .remaining_requests = -1,
                               .remaining_tokens = -1,
                               .requests_reset_at_ms = -1,
                               .tokens_reset_at_ms = -1};
    policy__set(c, o, why);
}

/* text_init makes the lower-cased copy of struct policy__text: NUL bytes
 * become blanks so that a binary body cannot hide the text after them. */
static void
text_init(struct policy__text *t, const char *body, size_t len, size_t cap)
{
    size_t n = len < cap ? len : cap;

    t->s = xmalloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)body[i];
        t->s[i] = c == '\0' ? ' ' : (char)tolower(c);
    }
    t->s[n] = '\0';
    t->len = n;
}

static bool
has(const struct policy__text *t, const char *needle)
{
    return strstr(t->s, needle) != NULL;
}

static bool
has_any(const struct policy__text *t, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (has(t, list[i]))
            return true;
    }
    return false;
}

/* has_word finds w with no letter or digit on either side, so "rpd" in
 * "limit_rpd/" counts but not inside a random organisation id. */
static bool
has_word(const struct policy__text *t, const char *w)
{
    size_t n = strlen(w);

    for (const char *p = strstr(t->s, w); p != NULL; p = strstr(p + 1, w)) {
        bool before = p == t->s || !isalnum((unsigned char)p[-1]);
        if (before && !isalnum((unsigned char)p[n]))
            return true;
    }
    return false;
}

#define ANY(t, list) has_any(t, list, STEPQ_ARRAY_LEN(list))

/* ---- what the answer tells about waits and windows ---- */

struct learned {
    int64_t explicit_ms; /* the wait asked for in a header, or -1 */
    int64_t req_reset_ms, tok_reset_ms, any_reset_ms; /* from now; -1 */
    int64_t rem_req, rem_tok;                         /* -1 */
};

static void
keep_max(int64_t *slot, int64_t v)
{
    if (v > *slot)
        *slot = v;
}

static void
keep_min(int64_t *slot, int64_t v)
{
    if (*slot < 0 || v < *slot)
        *slot = v;
}

static int64_t
until(int64_t at, int64_t now)
{
    int64_t d = at - now;

    if (d < 0)
        return 0;
    return d > POLICY_MAX_WAIT_MS ? POLICY_MAX_WAIT_MS : d;
}

/* believed tells whether a wait or reset a header names (ms from now) is
 * one to act on. The parsers already refuse negative, NaN and garbage
 * values and saturate overflowing ones at POLICY_MAX_WAIT_MS; anything past
 * POLICY_HEADER_WAIT_MAX_MS (a retry-after of 99999999999, a date in 2099)
 * is a header bug, not a wall, so it counts as absent and the body and
 * status decide. */
static bool
believed(int64_t ms)
{
    return ms >= 0 && ms <= POLICY_HEADER_WAIT_MAX_MS;
}

static void
learn_header(const struct policy_header *h, int64_t now, struct learned *l,
             int64_t *ra_ms, int64_t *ra)
{
    int64_t v;
    const char *val = h->value;

    if (val == NULL)
        return;
    if (policy__header_is(h, "retry-after-ms")) {
        if (policy__parse_ms(val, &v) == 0 && believed(v))
            *ra_ms = v;
    } else if (policy__header_is(h, "retry-after")) {
        if (policy_parse_retry_after(val, now, &v) == 0 && believed(v))
            *ra = v;
    } else if (policy__header_is(h, "x-ratelimit-reset-requests")) {
        if (policy_parse_duration(val, &v) == 0 && believed(v))
            keep_max(&l->req_reset_ms, v);
    } else if (policy__header_is(h, "x-ratelimit-reset-tokens")) {
        if (policy_parse_duration(val, &v) == 0 && believed(v))
            keep_max(&l->tok_reset_ms, v);
    } else if (policy__header_is(h, "x-ratelimit-remaining-requests") ||
               policy__header_is(h, "anthropic-ratelimit-requests-remaining")) {
        if (policy_parse_count(val, &v) == 0)
            keep_min(&l->rem_req, v);
    } else if (policy__header_is(h, "x-ratelimit-remaining-tokens") ||
               policy__header_is(h, "anthropic-ratelimit-tokens-remaining") ||
               policy__header_is(
                   h, "anthropic-ratelimit-input-tokens-remaining") ||
               policy__header_is(
                   h, "anthropic-ratelimit-output-tokens-remaining")) {
        if (policy_parse_count(val, &v) == 0)
            keep_min(&l->rem_tok, v);
    } else if (policy__header_is(h, "anthropic-ratelimit-requests-reset")) {
        if (policy__parse_rfc3339(val, &v) == 0 && believed(until(v, now)))
            keep_max(&l->req_reset_ms, until(v, now));
    } else if (policy__header_is(h, "anthropic-ratelimit-tokens-reset") ||
               policy__header_is(h, "anthropic-ratelimit-input-tokens-reset") ||
               policy__header_is(h,
                                 "anthropic-ratelimit-output-tokens-reset")) {
        if (policy__parse_rfc3339(val, &v) == 0 && believed(until(v, now)))
            keep_max(&l->tok_reset_ms, until(v, now));
    } else if (policy__header_is(h, "x-ratelimit-reset")) {
        /* Unsuffixed, providers disagree: epoch ms, epoch s or seconds. */
        if (policy_parse_count(val, &v) == 0) {
            if (v >= 100000000000LL)
                v = until(v, now);
            else if (v >= 1000000000LL)
                v = until(v * 1000, now);
            else
                v *= 1000;
            if (believed(v))
                keep_max(&l->any_reset_ms, v);
        }
    }
}

/* learn reads the headers; a wait written in the body is looked for only
 * once the body is known to be an error (policy_classify). */
static void
learn(const struct policy_input *in, struct learned *l)
{
    int64_t ra_ms = -1, ra = -1;

    *l = (struct learned){.explicit_ms = -1,
                          .req_reset_ms = -1,
                          .tok_reset_ms = -1,
                          .any_reset_ms = -1,
                          .rem_req = -1,
                          .rem_tok = -1};
    for (size_t i = 0; i < in->nheaders && in->headers != NULL; i++)
        learn_header(&in->headers[i], in->now_ms, l, &ra_ms, &ra);
    /* The endpoint's own wait, most precise first. */
    l->explicit_ms = ra_ms >= 0 ? ra_ms : ra;
}

/* throttle_wait picks the wait for a throttle or wall: what the endpoint
 * asked for, else the reset of the exhausted window, else of the window
 * the reason names, else the nearest known reset. A long reset of a window
 * that is not exhausted (Groq's daily request window) is not a wait. */
static int64_t
throttle_wait(const struct learned *l, enum policy_reason why)
{
    int64_t w = -1;

    if (l->explicit_ms >= 0)
        return l->explicit_ms;
    if (l->rem_req == 0 && l->req_reset_ms >= 0)
        keep_max(&w, l->req_reset_ms);
    if (l->rem_tok == 0 && l->tok_reset_ms >= 0)
        keep_max(&w, l->tok_reset_ms);
    if (w >= 0)
        return w;
    if (why == POLICY_REASON_TPM && l->tok_reset_ms >= 0)
        return l->tok_reset_ms;
    if (why == POLICY_REASON_RPM && l->req_reset_ms >= 0)
        return l->req_reset_ms;
    if (l->any_reset_ms >= 0)
        return l->any_reset_ms;
    if (l->req_reset_ms >= 0)
        keep_min(&w, l->req_reset_ms);
    if (l->tok_reset_ms >= 0)
        keep_min(&w, l->tok_reset_ms);
    return w;
}

/* ---- default rules ---- */

static const char *const context_words[] = {
    "context length",
    "context_length",
    "context window",
    "context_window",
    "context size",
    "maximum context",
    "exceed_context",
    "prompt is too long",
    "input is too long",
    "the input token count",
    "reduce the length of the messages",
    /* vLLM derives max_tokens = context - input; a negative one means the
     * input alone overflows the context. */
    "max_tokens must be at least",
};

static const char *const too_large_words[] = {
    "request too large",
    "request_too_large",
    "payload too large",
    "entity too large",
};

static const char *const content_words[] = {
    "content_filter", "content filter", "content management policy",
    "content policy", "content_policy", "responsibleaipolicyviolation",
    "safety system",
};

static const char *const spend_words[] = {
    "spend_limit",     "spend limit",     "spending limit", "hard_limit",
    "budget_exceeded", "budget exceeded", "usage limits",
};

/* Not the bare word "billing": Groq puts a billing URL in every throttle
 * message, and Gemini's per-minute quota message asks to "check your plan
 * and billing details". */
static const char *const funds_words[] = {
    "insufficient_quota",  "insufficient quota",   "insufficient credit",
    "insufficient_credit", "insufficient balance", "insufficient_balance",
    "credit balance",      "out of credits",       "more credits",
    "billing_error",       "billing_not_active",   "payment required",
    "payment_required",
};

static const char *const day_words[] = {
    "per day", "per-day", "perday", "per_day", "daily",
};

static const char *const month_words[] = {
    "per month",
    "per-month",
    "permonth",
    "monthly",
};

static const char *const auth_words[] = {
    "invalid_api_key",     "invalid api key",   "incorrect api key",
    "api key not valid",   "invalid x-api-key", "authentication_error",
    "permission_error",    "permission_denied", "unauthorized",
    "no auth credentials",
};

static const char *const overload_words[] = {
    "overloaded",
    "over capacity",
    "server is busy",
    "server busy",
};

static const char *const loading_words[] = {
    "loading model",
    "model is loading",
    "model is currently loading",
};

static const char *const throttle_words[] = {
    "rate limit",         "rate_limit",        "ratelimit",
    "rate-limit",         "too many requests", "resource_exhausted",
    "resource exhausted", "throttl",           "quota",
};

static const char *const tpm_words[] = {
    "tokens per min",
    "tokens_per_min",
    "tokenspermin",
    "token rate limit",
};

static const char *const rpm_words[] = {
    "requests per min",
    "requests_per_min",
    "requestspermin",
    "request limit per minute",
};

static enum policy_reason
rate_reason(const struct policy__text *t)
{
    if (ANY(t, tpm_words) || has_word(t, "tpm"))
        return POLICY_REASON_TPM;
    if (ANY(t, rpm_words) || has_word(t, "rpm"))
        return POLICY_REASON_RPM;
    return POLICY_REASON_RATE_LIMIT;
}

/* by_words applies the body discriminators; false when none matched. */
static bool
by_words(const struct policy__text *t, struct policy_class *out)
{
    if (ANY(t, context_words))
        policy__set(out, POLICY_TRUNCATED, POLICY_REASON_CONTEXT_OVERFLOW);
    else if (ANY(t, too_large_words))
        policy__set(out, POLICY_TRUNCATED, POLICY_REASON_TOO_LARGE);
    else if (ANY(t, content_words))
        policy__set(out, POLICY_REFUSED, POLICY_REASON_CONTENT_FILTER);
    else if (ANY(t, spend_words))
        policy__set(out, POLICY_HARD_QUOTA, POLICY_REASON_SPEND_LIMIT);
    else if (ANY(t, funds_words))
        policy__set(out, POLICY_HARD_QUOTA, POLICY_REASON_INSUFFICIENT_QUOTA);
    else if (ANY(t, day_words) || has_word(t, "rpd") || has_word(t, "tpd"))
        policy__set(out, POLICY_HARD_QUOTA, POLICY_REASON_DAILY_CAP);
    else if (ANY(t, month_words))
        policy__set(out, POLICY_HARD_QUOTA, POLICY_REASON_MONTHLY_CAP);
    else if (ANY(t, auth_words))
        policy__set(out, POLICY_HARD_QUOTA, POLICY_REASON_AUTH);
    else if (ANY(t, overload_words))
        policy__set(out, POLICY_SERVER_ERROR, POLICY_REASON_OVERLOADED);
    else if (ANY(t, loading_words))
        policy__set(out, POLICY_SERVER_ERROR, POLICY_REASON_LOADING);
    else if (ANY(t, throttle_words))
        policy__set(out, POLICY_SOFT_THROTTLE, rate_reason(t));
    else
        return false;
    return true;
}

static void
by_status(int status, const struct policy__text *t, struct policy_class *out)
{
    switch (status) {
    case 401:
    case 403:
        policy__set(out, POLICY_HARD_QUOTA, POLICY_REASON_AUTH);
        return;
    case 402:
        policy__set(out, POLICY_HARD_QUOTA, POLICY_REASON_INSUFFICIENT_QUOTA);
        return;
    case 413:
        policy__set(out, POLICY_TRUNCATED, POLICY_REASON_TOO_LARGE);
        return;
    case 408:
    case 504:
    case 524:
        policy__set(out, POLICY_TIMEOUT, POLICY_REASON_TIMEOUT);
        return;
    case 429:
        policy__set(out, POLICY_SOFT_THROTTLE, rate_reason(t));
        return;
    case 529:
        policy__set(out, POLICY_SERVER_ERROR, POLICY_REASON_OVERLOADED);
        return;
    case 400:
        policy__set(out, POLICY_UNKNOWN, POLICY_REASON_BAD_REQUEST);
        return;
    case 404:
        policy__set(out, POLICY_UNKNOWN, POLICY_REASON_NOT_FOUND);
        return;
    case 0:
        policy__set(out, POLICY_UNKNOWN, POLICY_REASON_ERROR_BODY);
        return;
    default:
        break;
    }
    if (status >= 500 && status <= 599)
        policy__set(out, POLICY_SERVER_ERROR,
                    policy__is_html(t) ? POLICY_REASON_HTML_ERROR
                                       : POLICY_REASON_SERVER);
    else
        policy__set(out, POLICY_UNKNOWN, POLICY_REASON_STATUS);
}

static void
by_transport(enum policy_transport tr, struct policy_class *out)
{
    switch (tr) {
    case POLICY_TRANSPORT_TIMEOUT:
        policy__set(out, POLICY_TIMEOUT, POLICY_REASON_TIMEOUT);
        break;
    case POLICY_TRANSPORT_REFUSED:
        policy__set(out, POLICY_SERVER_ERROR, POLICY_REASON_REFUSED);
        break;
    case POLICY_TRANSPORT_RESET:
        policy__set(out, POLICY_SERVER_ERROR, POLICY_REASON_RESET);
        break;
    case POLICY_TRANSPORT_TLS:
        policy__set(out, POLICY_SERVER_ERROR, POLICY_REASON_TLS);
        break;
    case POLICY_TRANSPORT_TLS_CERTIFICATE:
        /* Nothing the endpoint does will change it: a wall until the
         * tier's config does, as a refused key is. */
        policy__set(out, POLICY_HARD_QUOTA, POLICY_REASON_TLS_CERTIFICATE);
        break;
    case POLICY_TRANSPORT_BAD_RESPONSE:
        /* A server that answers garbage is broken as one that answers 5xx
         * is: retried, counted by the breaker. */
        policy__set(out, POLICY_SERVER_ERROR, POLICY_REASON_BAD_RESPONSE);
        break;
    case POLICY_TRANSPORT_TOO_LARGE:
        /* The answer ran past max_response_bytes and was cut off. */
        policy__set(out, POLICY_TRUNCATED, POLICY_REASON_RESPONSE_TOO_LARGE);
        break;
    default:
        policy__set(out, POLICY_UNKNOWN, POLICY_REASON_TRANSPORT);
        break;
    }
}

/* by_default applies the reference's default rules. Returns whether the body
 * was an error (and not a completion, whose text proves nothing). */
static bool
by_default(const struct policy_input *in, const struct policy__text *t,
           struct policy_class *out)
{
    int status = in->status;

    if (status >= 200 && status <= 299) {
        status = policy__body_2xx(in, t, out);
        if (status < 0)
            return false;
    }
    if (!by_words(t, out) && !policy__gateway(in, status, t, out))
        by_status(status, t, out);
    return true;
}

static void
escalate(struct policy_streak *st, const struct policy_config *cfg, int64_t now,
         struct policy_class *out)
{
    if (out->outcome == POLICY_OK || out->outcome == POLICY_HARD_QUOTA) {
        *st = (struct policy_streak){0, 0};
        return;
    }
    if (out->outcome != POLICY_SOFT_THROTTLE)
        return;
    if (st->count == 0 || now < st->first_ms)
        st->first_ms = now;
    st->count++;
    if (st->count >= 2 && now - st->first_ms >= cfg->escalate_after_ms) {
        policy__set(out, POLICY_HARD_QUOTA, POLICY_REASON_ESCALATED);
        out->reset_at_ms = -1;
        *st = (struct policy_streak){0, 0};
    }
}

void
policy_classify(const struct policy_input *in, const struct policy_config *cfg,
                struct policy_streak *streak, struct policy_class *out)
{
    struct policy_config dflt;
    struct policy__text t;
    struct learned l;
    int64_t text_ms = -1;
    int rule = -1;
    bool error_body = true;

    if (cfg == NULL) {
        policy_config_init(&dflt, NULL, NULL);
        cfg = &dflt;
    }
    policy_class_init(out, POLICY_UNKNOWN, POLICY_REASON_NONE);
    text_init(&t, in->body != NULL ? in->body : "",
              in->body != NULL ? in->body_len : 0, SCAN_BYTES);
    learn(in, &l);
    out->remaining_requests = l.rem_req;
    out->remaining_tokens = l.rem_tok;
    if (l.req_reset_ms >= 0)
        out->requests_reset_at_ms = in->now_ms + l.req_reset_ms;
    if (l.tok_reset_ms >= 0)
        out->tokens_reset_at_ms = in->now_ms + l.tok_reset_ms;

    if (in->transport != POLICY_TRANSPORT_NONE) {
        by_transport(in->transport, out);
        error_body = false;
    } else if ((rule = policy__rules_match(cfg->rules, in, out)) < 0) {
        error_body = by_default(in, &t, out);
    }
    /* A wait written in an error message counts; one in a completion's
     * content is the model talking (and the text is not searched). */
    if (l.explicit_ms < 0 && error_body &&
        policy__text_wait(t.s, &text_ms) == 0 &&
        text_ms <= POLICY_TEXT_WAIT_MAX_MS)
        l.explicit_ms = text_ms;
    out->wait_ms = l.explicit_ms;
    if (out->outcome == POLICY_SOFT_THROTTLE ||
        out->outcome == POLICY_HARD_QUOTA)
        out->wait_ms = throttle_wait(&l, out->why);
    /* The length of the wait comes last: a throttle that asks for more
     * than switch_wait is a wall until now + wait, whatever it says. */
    if (rule < 0 && out->outcome == POLICY_SOFT_THROTTLE &&
        out->wait_ms > cfg->switch_wait_ms)
        policy__set(out, POLICY_HARD_QUOTA, POLICY_REASON_LONG_WAIT);
    if (out->outcome == POLICY_HARD_QUOTA && out->wait_ms >= 0 &&
        !policy_is_config_wall(out->why))
        out->reset_at_ms = in->now_ms + out->wait_ms;
    if (streak != NULL)
        escalate(streak, cfg, in->now_ms, out);
    free(t.s);
}

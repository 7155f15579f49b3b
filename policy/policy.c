/* policy.c: classify and decide (docs/reference.md "Outcomes and decisions").
 *
 * classify never decides on the status alone. The order is: user rules;
 * then body discriminators (context, size, content policy, wall words,
 * auth, overload, throttle words); then the status; then the length of the
 * wait the endpoint asked for (a long wait makes a throttle a wall); then
 * the escalation of a streak of soft throttles. Error bodies are searched as
 * lower-cased text rather than as JSON, because real error bodies arrive
 * truncated, as Python reprs, as HTML, or wrapped in arrays; only a 2xx body
 * is parsed, to tell a completion from an error object.
 *
 * decide is the reference's table read top to bottom: the first row whose
 * condition holds wins, so the order of the if statements below is the policy.
 */
#include "policy/policy.h"

#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/xalloc.h"
#include "policy/internal.h"

/* Error texts are read from their first 64 KiB: every provider puts the
 * message first, and this bounds the work per answer. */
#define SCAN_BYTES ((size_t)64 * 1024)
/* User rules see up to 4 MiB of the body (the default max_response_bytes),
 * 2xx bodies larger than that are not parsed as JSON. */
#define RULE_BYTES ((size_t)4 * 1024 * 1024)

/* ---- names ---- */

static const char *const outcome_names[POLICY_OUTCOME_COUNT] = {
    "ok",      "soft_throttle", "hard_quota", "truncated", "schema_invalid",
    "refused", "server_error",  "timeout",    "unknown"};

static const char *const action_names[POLICY_ACTION_COUNT] = {
    "commit",
    "backoff_retry",
    "switch_tier_replay",
    "degrade_then_retry",
    "park_for_human",
    "fail_loud"};

static const char *const transport_names[POLICY_TRANSPORT_COUNT] = {
    "none", "timeout", "refused", "reset", "tls", "too_large"};

static const char *const breaker_names[POLICY_BREAKER_COUNT] = {
    "closed", "open", "half_open"};

static int
from_name(const char *const *names, int n, const char *name, int *out)
{
    if (name == NULL)
        return -EINVAL;
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i], name) == 0) {
            *out = i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *
policy_outcome_name(enum policy_outcome o)
{
    return (unsigned)o < POLICY_OUTCOME_COUNT ? outcome_names[o] : "?";
}

int
policy_outcome_from_name(const char *name, enum policy_outcome *out)
{
    int i, rc = from_name(outcome_names, POLICY_OUTCOME_COUNT, name, &i);

    if (rc == 0)
        *out = (enum policy_outcome)i;
    return rc;
}

const char *
policy_action_name(enum policy_action a)
{
    return (unsigned)a < POLICY_ACTION_COUNT ? action_names[a] : "?";
}

int
policy_action_from_name(const char *name, enum policy_action *out)
{
    int i, rc = from_name(action_names, POLICY_ACTION_COUNT, name, &i);

    if (rc == 0)
        *out = (enum policy_action)i;
    return rc;
}

const char *
policy_transport_name(enum policy_transport t)
{
    return (unsigned)t < POLICY_TRANSPORT_COUNT ? transport_names[t] : "?";
}

int
policy_transport_from_name(const char *name, enum policy_transport *out)
{
    int i, rc = from_name(transport_names, POLICY_TRANSPORT_COUNT, name, &i);

    if (rc == 0)
        *out = (enum policy_transport)i;
    return rc;
}

const char *
policy_breaker_name(enum policy_breaker b)
{
    return (unsigned)b < POLICY_BREAKER_COUNT ? breaker_names[b] : "?";
}

int
policy_breaker_from_name(const char *name, enum policy_breaker *out)
{
    int i, rc = from_name(breaker_names, POLICY_BREAKER_COUNT, name, &i);

    if (rc == 0)
        *out = (enum policy_breaker)i;
    return rc;
}

/* ---- config and rules ---- */

static int64_t
secs_to_ms(double s, int64_t dflt)
{
    if (!(s >= 0))
        return dflt;
    if (s > (double)POLICY_MAX_WAIT_MS / 1000)
        return POLICY_MAX_WAIT_MS;
    return (int64_t)(s * 1000 + 0.5);
}

void
policy_config_init(struct policy_config *cfg,
                   const struct config_policy *numbers,
                   const policy_rules *rules)
{
    cfg->switch_wait_ms = 60000;
    cfg->escalate_after_ms = 300000;
    cfg->max_throttle_waits = 20;
    cfg->backoff_base_ms = 1000;
    cfg->backoff_cap_ms = 20000;
    cfg->rules = rules;
    if (numbers == NULL)
        return;
    cfg->switch_wait_ms = secs_to_ms(numbers->switch_wait_s, 60000);
    cfg->escalate_after_ms = secs_to_ms(numbers->escalate_after_s, 300000);
    cfg->max_throttle_waits =
        numbers->max_throttle_waits >= 0 ? numbers->max_throttle_waits : 20;
    cfg->backoff_base_ms = secs_to_ms(numbers->backoff_base_s, 1000);
    cfg->backoff_cap_ms = secs_to_ms(numbers->backoff_cap_s, 20000);
}

struct prule {
    int status;
    bool has_body, has_header;
    regex_t body;
    regex_t header_value;
    char *header_name; /* owned */
    char *reason;      /* owned */
    enum policy_outcome outcome;
};

struct policy_rules {
    struct prule *r; /* owned array of n */
    size_t n;
};

void
policy_rules_free(policy_rules *rules)
{
    if (rules == NULL)
        return;
    for (size_t i = 0; i < rules->n; i++) {
        struct prule *p = &rules->r[i];
        if (p->has_body)
            regfree(&p->body);
        if (p->has_header)
            regfree(&p->header_value);
        free(p->header_name);
        free(p->reason);
    }
    free(rules->r);
    free(rules);
}

/* glibc's regcomp copies the subexpression of every "+" and "{n,m}" (X+
 * is XX*), so stacked repetitions grow the compiled expression
 * exponentially: "a++++++++++++++++++++" takes 1.3 GB. A classify rule is
 * a few words; refuse what would cost more than a few thousand copies. */
#define RULE_MAX_LEN    1024
#define RULE_MAX_COPIES 4096

static const char *
too_costly(const char *src)
{
    double copies = 1;
    bool after_rep = false;

    if (strlen(src) > RULE_MAX_LEN)
        return "longer than 1024 characters";
    for (const char *p = src; *p; p++) {
        double times = 0;
        if (*p == '\\' && p[1] != '\0') {
            p++;
            after_rep = false;
            continue;
        }
        if (*p == '[') { /* a bracket expression: no operators inside */
            const char *q = p + 1;
            if (*q == '^')
                q++;
            if (*q == ']')
                q++;
            while (*q && *q != ']')
                q++;
            p = *q ? q : q - 1;
            after_rep = false;
            continue;
        }
        if (*p == '+') {
            times = 2;
        } else if (*p == '{' && p[1] >= '0' && p[1] <= '9') {
            char *end;
            const char *close = strchr(p, '}');
            long lo = strtol(p + 1, &end, 10), hi = lo;
            /* Checked before any arithmetic: strtol saturates at LONG_MAX
             * (found by fuzz_config). */
            if (lo > 255)
                return "a repetition bound above 255";
            if (*end == ',')
                hi = end[1] == '}' ? lo + 1 : strtol(end + 1, &end, 10);
            if (hi > 255)
                return "a repetition bound above 255";
            times = hi > 1 ? (double)hi : 1;
            if (close != NULL)
                p = close; /* the bound's digits are not atoms */
        } else if (*p == '*' || *p == '?') {
            times = 1;
        } else {
            after_rep = false;
            continue;
        }
        if (after_rep)
            return "a repetition of a repetition (such as ++ or *{2})";
        after_rep = true;
        copies *= times;
        if (copies > RULE_MAX_COPIES)
            return "too many repetitions (+ and {n,m} multiply its size)";
    }
    return NULL;
}

static int
compile(regex_t *re, const char *src, size_t idx, const char *field, char *err,
        size_t errlen)
{
    char msg[256];
    const char *why = too_costly(src);
    int rc;

    if (why != NULL) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "classify[%zu].%s: refused: %s", idx, field,
                     why);
        return -EINVAL;
    }
    rc = regcomp(re, src, REG_EXTENDED | REG_ICASE | REG_NOSUB);
    if (rc == 0)
        return 0;
    regerror(rc, re, msg, sizeof(msg));
    if (err != NULL && errlen > 0)
        snprintf(err, errlen,
                 "classify[%zu].%s: bad regular expression "
                 "\"%s\": %s",
                 idx, field, src, msg);
    return -EINVAL;
}

int
policy_rules_new(const struct config_rule *rules, size_t n, policy_rules **out,
                 char *err, size_t errlen)
{
    policy_rules *pr = xcalloc(1, sizeof(*pr));
    int rc = 0;

    pr->r = xcalloc(n + 1, sizeof(*pr->r));
    for (size_t i = 0; i < n; i++) {
        const struct config_rule *c = &rules[i];
        struct prule *p = &pr->r[i];

        pr->n = i + 1;
        if (c->outcome == NULL ||
            policy_outcome_from_name(c->outcome, &p->outcome) != 0) {
            if (err != NULL && errlen > 0)
                snprintf(err, errlen,
                         "classify[%zu].outcome: unknown outcome \"%s\" "
                         "(ok, soft_throttle, hard_quota, truncated, "
                         "schema_invalid, refused, server_error, timeout "
                         "or unknown)",
                         i, c->outcome ? c->outcome : "");
            rc = -EINVAL;
            goto fail;
        }
        p->status = c->status;
        if (c->body != NULL) {
            if ((rc = compile(&p->body, c->body, i, "body", err, errlen)))
                goto fail;
            p->has_body = true;
        }
        if (c->header_name != NULL) {
            if ((rc = compile(&p->header_value,
                              c->header_value ? c->header_value : "", i,
                              "header_value", err, errlen)))
                goto fail;
            p->has_header = true;
            p->header_name = xstrdup(c->header_name);
        }
        p->reason = xstrdup(c->reason ? c->reason : "rule");
    }
    *out = pr;
    return 0;
fail:
    policy_rules_free(pr);
    return rc;
}

/* ---- text helpers ---- */

/* A lower-cased, NUL-terminated copy of the start of a body: NUL bytes
 * become blanks so that a binary body cannot hide the text after them. */
struct text {
    char *s; /* owned */
    size_t len;
};

static void
text_init(struct text *t, const char *body, size_t len, size_t cap)
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
has(const struct text *t, const char *needle)
{
    return strstr(t->s, needle) != NULL;
}

static bool
has_any(const struct text *t, const char *const *list, size_t n)
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
has_word(const struct text *t, const char *w)
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

static bool
is_html(const struct text *t)
{
    const char *p = t->s;

    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    return strncmp(p, "<!doctype html", 14) == 0 || strncmp(p, "<html", 5) == 0;
}

static bool
header_is(const struct policy_header *h, const char *name)
{
    const char *a = h->name;

    if (a == NULL)
        return false;
    while (*a != '\0' && *name != '\0' &&
           tolower((unsigned char)*a) == (unsigned char)*name) {
        a++;
        name++;
    }
    return *a == '\0' && *name == '\0';
}

/* ---- what the answer tells about waits and windows ---- */

struct learned {
    int64_t explicit_ms; /* the wait asked for in a header, or -1 */
    int64_t text_ms;     /* the wait asked for in an error text, or -1 */
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

static void
learn_header(const struct policy_header *h, int64_t now, struct learned *l,
             int64_t *ra_ms, int64_t *ra)
{
    int64_t v;
    const char *val = h->value;

    if (val == NULL)
        return;
    if (header_is(h, "retry-after-ms")) {
        if (policy__parse_ms(val, &v) == 0)
            *ra_ms = v;
    } else if (header_is(h, "retry-after")) {
        if (policy_parse_retry_after(val, now, &v) == 0)
            *ra = v;
    } else if (header_is(h, "x-ratelimit-reset-requests")) {
        if (policy_parse_duration(val, &v) == 0)
            keep_max(&l->req_reset_ms, v);
    } else if (header_is(h, "x-ratelimit-reset-tokens")) {
        if (policy_parse_duration(val, &v) == 0)
            keep_max(&l->tok_reset_ms, v);
    } else if (header_is(h, "x-ratelimit-remaining-requests") ||
               header_is(h, "anthropic-ratelimit-requests-remaining")) {
        if (policy_parse_count(val, &v) == 0)
            keep_min(&l->rem_req, v);
    } else if (header_is(h, "x-ratelimit-remaining-tokens") ||
               header_is(h, "anthropic-ratelimit-tokens-remaining") ||
               header_is(h, "anthropic-ratelimit-input-tokens-remaining") ||
               header_is(h, "anthropic-ratelimit-output-tokens-remaining")) {
        if (policy_parse_count(val, &v) == 0)
            keep_min(&l->rem_tok, v);
    } else if (header_is(h, "anthropic-ratelimit-requests-reset")) {
        if (policy__parse_rfc3339(val, &v) == 0)
            keep_max(&l->req_reset_ms, until(v, now));
    } else if (header_is(h, "anthropic-ratelimit-tokens-reset") ||
               header_is(h, "anthropic-ratelimit-input-tokens-reset") ||
               header_is(h, "anthropic-ratelimit-output-tokens-reset")) {
        if (policy__parse_rfc3339(val, &v) == 0)
            keep_max(&l->tok_reset_ms, until(v, now));
    } else if (header_is(h, "x-ratelimit-reset")) {
        /* Unsuffixed, providers disagree: epoch ms, epoch s or seconds. */
        if (policy_parse_count(val, &v) == 0) {
            if (v >= 100000000000LL)
                keep_max(&l->any_reset_ms, until(v, now));
            else if (v >= 1000000000LL)
                keep_max(&l->any_reset_ms, until(v * 1000, now));
            else
                keep_max(&l->any_reset_ms, v * 1000);
        }
    }
}

static void
learn(const struct policy_input *in, const struct text *t, struct learned *l)
{
    int64_t ra_ms = -1, ra = -1, body = -1;

    *l = (struct learned){-1, -1, -1, -1, -1, -1, -1};
    for (size_t i = 0; i < in->nheaders && in->headers != NULL; i++)
        learn_header(&in->headers[i], in->now_ms, l, &ra_ms, &ra);
    if (policy__text_wait(t->s, &body) == 0)
        l->text_ms = body;
    /* The endpoint's own wait, most precise first. */
    l->explicit_ms = ra_ms >= 0 ? ra_ms : ra;
}

/* throttle_wait picks the wait for a throttle or wall: what the endpoint
 * asked for, else the reset of the exhausted window, else of the window
 * the reason names, else the nearest known reset. A long reset of a window
 * that is not exhausted (Groq's daily request window) is not a wait. */
static int64_t
throttle_wait(const struct learned *l, const char *reason)
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
    if (reason != NULL && strcmp(reason, "tpm") == 0 && l->tok_reset_ms >= 0)
        return l->tok_reset_ms;
    if (reason != NULL && strcmp(reason, "rpm") == 0 && l->req_reset_ms >= 0)
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

static const char *
rate_reason(const struct text *t)
{
    if (ANY(t, tpm_words) || has_word(t, "tpm"))
        return "tpm";
    if (ANY(t, rpm_words) || has_word(t, "rpm"))
        return "rpm";
    return "rate_limit";
}

static void
set(struct policy_class *out, enum policy_outcome o, const char *reason)
{
    out->outcome = o;
    out->reason = reason;
}

/* by_words applies the body discriminators; false when none matched. */
static bool
by_words(const struct text *t, struct policy_class *out)
{
    if (ANY(t, context_words))
        set(out, POLICY_TRUNCATED, "context_overflow");
    else if (ANY(t, too_large_words))
        set(out, POLICY_TRUNCATED, "too_large");
    else if (ANY(t, content_words))
        set(out, POLICY_REFUSED, "content_filter");
    else if (ANY(t, spend_words))
        set(out, POLICY_HARD_QUOTA, "spend_limit");
    else if (ANY(t, funds_words))
        set(out, POLICY_HARD_QUOTA, "insufficient_quota");
    else if (ANY(t, day_words) || has_word(t, "rpd") || has_word(t, "tpd"))
        set(out, POLICY_HARD_QUOTA, "daily_cap");
    else if (ANY(t, month_words))
        set(out, POLICY_HARD_QUOTA, "monthly_cap");
    else if (ANY(t, auth_words))
        set(out, POLICY_HARD_QUOTA, "auth");
    else if (ANY(t, overload_words))
        set(out, POLICY_SERVER_ERROR, "overloaded");
    else if (ANY(t, loading_words))
        set(out, POLICY_SERVER_ERROR, "loading");
    else if (ANY(t, throttle_words))
        set(out, POLICY_SOFT_THROTTLE, rate_reason(t));
    else
        return false;
    return true;
}

static void
by_status(int status, const struct text *t, struct policy_class *out)
{
    switch (status) {
    case 401:
    case 403:
        set(out, POLICY_HARD_QUOTA, "auth");
        return;
    case 402:
        set(out, POLICY_HARD_QUOTA, "insufficient_quota");
        return;
    case 413:
        set(out, POLICY_TRUNCATED, "too_large");
        return;
    case 408:
    case 504:
    case 524:
        set(out, POLICY_TIMEOUT, "timeout");
        return;
    case 429:
        set(out, POLICY_SOFT_THROTTLE, rate_reason(t));
        return;
    case 529:
        set(out, POLICY_SERVER_ERROR, "overloaded");
        return;
    case 400:
        set(out, POLICY_UNKNOWN, "bad_request");
        return;
    case 404:
        set(out, POLICY_UNKNOWN, "not_found");
        return;
    case 0:
        set(out, POLICY_UNKNOWN, "error_body");
        return;
    default:
        break;
    }
    if (status >= 500 && status <= 599)
        set(out, POLICY_SERVER_ERROR, is_html(t) ? "html_error" : "server");
    else
        set(out, POLICY_UNKNOWN, "status");
}

/* ---- 2xx bodies ---- */

struct completion {
    bool shape;         /* the body looks like a completion */
    bool tool_calls;    /* the answer calls a tool */
    bool refusal;       /* message.refusal is set */
    size_t content;     /* bytes of text content */
    const char *finish; /* borrowed from the tree; NULL */
};

static const cJSON *
first_item(const cJSON *arr)
{
    return cJSON_IsArray(arr) ? cJSON_GetArrayItem(arr, 0) : NULL;
}

static size_t
text_len(const cJSON *v)
{
    size_t n = 0;
    const cJSON *part;

    if (cJSON_IsString(v))
        return strlen(v->valuestring);
    if (!cJSON_IsArray(v))
        return 0;
    cJSON_ArrayForEach(part, v)
    {
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (cJSON_IsString(tx))
            n += strlen(tx->valuestring);
    }
    return n;
}

static bool
nonempty_array(const cJSON *v)
{
    return cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0;
}

static const char *
str_item(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* read_completion understands the OpenAI chat completion, and the native
 * Anthropic message and Gemini candidate shapes. */
static void
read_completion(const cJSON *root, struct completion *c)
{
    const cJSON *choice =
        first_item(cJSON_GetObjectItemCaseSensitive(root, "choices"));
    const cJSON *cand =
        first_item(cJSON_GetObjectItemCaseSensitive(root, "candidates"));
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    const cJSON *part;

    memset(c, 0, sizeof(*c));
    if (cJSON_IsObject(choice)) {
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(choice, "message");
        c->shape = true;
        c->finish = str_item(choice, "finish_reason");
        c->content = text_len(cJSON_GetObjectItemCaseSensitive(msg, "content"));
        c->tool_calls =
            nonempty_array(
                cJSON_GetObjectItemCaseSensitive(msg, "tool_calls")) ||
            cJSON_IsObject(
                cJSON_GetObjectItemCaseSensitive(msg, "function_call"));
        c->refusal = str_item(msg, "refusal") != NULL &&
                     str_item(msg, "refusal")[0] != '\0';
    } else if (cJSON_IsObject(cand)) {
        const char *fr = str_item(cand, "finishReason");
        content = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cand, "content"), "parts");
        c->shape = true;
        c->content = text_len(content);
        if (!cJSON_IsArray(content))
            content = NULL;
        cJSON_ArrayForEach(part, content)
        {
            if (cJSON_GetObjectItemCaseSensitive(part, "functionCall"))
                c->tool_calls = true;
        }
        if (fr != NULL && strcmp(fr, "MAX_TOKENS") == 0)
            c->finish = "length";
        else if (fr != NULL &&
                 (strcmp(fr, "SAFETY") == 0 ||
                  strcmp(fr, "PROHIBITED_CONTENT") == 0 ||
                  strcmp(fr, "BLOCKLIST") == 0 || strcmp(fr, "SPII") == 0))
            c->finish = "content_filter";
    } else if (cJSON_IsArray(content)) {
        const char *sr = str_item(root, "stop_reason");
        c->shape = true;
        c->content = text_len(content);
        cJSON_ArrayForEach(part, content)
        {
            const char *ty = str_item(part, "type");
            if (ty != NULL && strcmp(ty, "tool_use") == 0)
                c->tool_calls = true;
        }
        if (sr != NULL && strcmp(sr, "max_tokens") == 0)
            c->finish = "length";
        else if (sr != NULL && strcmp(sr, "refusal") == 0)
            c->finish = "content_filter";
    } else if (cJSON_IsObject(
                   cJSON_GetObjectItemCaseSensitive(root, "promptFeedback"))) {
        c->shape = true;
        c->finish = "content_filter";
    }
}

/* error_status returns the status an error object carries (OpenRouter's
 * {"error": {"code": 502}}), 0 when it names none, or -1 when root is not
 * an error object at all. */
static int
error_status(const cJSON *root)
{
    const cJSON *err, *code;
    const char *ty;

    if (cJSON_IsArray(root))
        root = cJSON_GetArrayItem(root, 0);
    if (!cJSON_IsObject(root) ||
        cJSON_GetObjectItemCaseSensitive(root, "choices") != NULL)
        return -1;
    err = cJSON_GetObjectItemCaseSensitive(root, "error");
    ty = str_item(root, "object");
    if (ty == NULL)
        ty = str_item(root, "type");
    if ((err == NULL || cJSON_IsNull(err)) &&
        (ty == NULL || strcmp(ty, "error") != 0))
        return -1;
    code = cJSON_IsObject(err) ? cJSON_GetObjectItemCaseSensitive(err, "code")
                               : NULL;
    if (code == NULL)
        code = cJSON_GetObjectItemCaseSensitive(root, "code");
    if (cJSON_IsNumber(code) && code->valuedouble >= 100 &&
        code->valuedouble <= 599)
        return (int)code->valuedouble;
    if (cJSON_IsString(code) && strlen(code->valuestring) == 3 &&
        isdigit((unsigned char)code->valuestring[0]) &&
        isdigit((unsigned char)code->valuestring[1]) &&
        isdigit((unsigned char)code->valuestring[2]) &&
        code->valuestring[0] >= '1' && code->valuestring[0] <= '5')
        return atoi(code->valuestring);
    return 0;
}

static bool
ieq(const char *a, const char *b)
{
    while (*a != '\0' && tolower((unsigned char)*a) == *b) {
        a++;
        b++;
    }
    return *a == '\0' && *b == '\0';
}

/* success classifies a 2xx that is not an error object. */
static void
success(const struct policy_input *in, const cJSON *root, const struct text *t,
        struct policy_class *out)
{
    struct completion c;
    const char *fr;

    if (in->http_step) {
        set(out, POLICY_OK, NULL);
        return;
    }
    if (is_html(t)) {
        set(out, POLICY_SERVER_ERROR, "html_error");
        return;
    }
    read_completion(root, &c);
    fr = in->finish_reason != NULL ? in->finish_reason : c.finish;
    if (c.refusal || (fr != NULL && ieq(fr, "content_filter")))
        set(out, POLICY_REFUSED, "content_filter");
    else if (fr != NULL && (ieq(fr, "length") || ieq(fr, "max_tokens")))
        set(out, POLICY_TRUNCATED, "length");
    else if (c.shape && c.content == 0 && !c.tool_calls)
        set(out, POLICY_SCHEMA_INVALID, "empty_output");
    else if (in->parsed == POLICY_PARSED_NO)
        set(out, POLICY_SCHEMA_INVALID, "invalid_output");
    else if (!c.shape && in->parsed != POLICY_PARSED_YES)
        set(out, POLICY_SCHEMA_INVALID, "not_a_completion");
    else
        set(out, POLICY_OK, NULL);
}

static bool
rule_matches(const struct prule *r, const struct policy_input *in,
             const char *body)
{
    if (r->status != 0 && r->status != in->status)
        return false;
    if (r->has_body && regexec(&r->body, body, 0, NULL, 0) != 0)
        return false;
    if (r->has_header) {
        bool hit = false;
        for (size_t i = 0; i < in->nheaders && !hit; i++) {
            const struct policy_header *h = &in->headers[i];
            hit = h->value != NULL && header_is(h, r->header_name) &&
                  regexec(&r->header_value, h->value, 0, NULL, 0) == 0;
        }
        if (!hit)
            return false;
    }
    return true;
}

/* by_rules tries the user rules in order; returns the index or -1. The
 * body is copied once, NUL-terminated, for regexec. */
static int
by_rules(const policy_rules *rules, const struct policy_input *in)
{
    char *body = NULL;
    int hit = -1;

    if (rules == NULL || rules->n == 0)
        return -1;
    for (size_t i = 0; i < rules->n && hit < 0; i++) {
        if (rules->r[i].has_body && body == NULL) {
            size_t n = in->body == NULL            ? 0
                       : in->body_len < RULE_BYTES ? in->body_len
                                                   : RULE_BYTES;
            body = xmalloc(n + 1);
            for (size_t k = 0; k < n; k++)
                body[k] = in->body[k] == '\0' ? ' ' : in->body[k];
            body[n] = '\0';
        }
        if (rule_matches(&rules->r[i], in, body))
            hit = (int)i;
    }
    free(body);
    return hit;
}

static void
by_transport(enum policy_transport tr, struct policy_class *out)
{
    switch (tr) {
    case POLICY_TRANSPORT_TIMEOUT:
        set(out, POLICY_TIMEOUT, "timeout");
        break;
    case POLICY_TRANSPORT_REFUSED:
        set(out, POLICY_SERVER_ERROR, "refused");
        break;
    case POLICY_TRANSPORT_RESET:
        set(out, POLICY_SERVER_ERROR, "reset");
        break;
    case POLICY_TRANSPORT_TLS:
        set(out, POLICY_SERVER_ERROR, "tls");
        break;
    case POLICY_TRANSPORT_TOO_LARGE:
        /* The answer ran past max_response_bytes and was cut off. */
        set(out, POLICY_TRUNCATED, "response_too_large");
        break;
    default:
        set(out, POLICY_UNKNOWN, "transport");
        break;
    }
}

/* by_default applies the reference's default rules. Returns whether the body
 * was an error (and not a completion, whose text proves nothing). */
static bool
by_default(const struct policy_input *in, const struct text *t,
           struct policy_class *out)
{
    int status = in->status;

    if (status >= 200 && status <= 299) {
        cJSON *root = NULL;
        int inner = -1;
        if (in->body_len > 0 && in->body_len <= RULE_BYTES)
            root = cJSON_ParseWithLength(in->body, in->body_len);
        if (root != NULL)
            inner = error_status(root);
        else if (strncmp(t->s, "{\"error\"", 8) == 0)
            inner = 0; /* a truncated error object */
        if (inner < 0) {
            success(in, root, t, out);
            cJSON_Delete(root);
            return false;
        }
        cJSON_Delete(root);
        status = inner;
    }
    if (!by_words(t, out))
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
        set(out, POLICY_HARD_QUOTA, "escalated");
        out->reset_at_ms = -1;
        *st = (struct policy_streak){0, 0};
    }
}

void
policy_classify(const struct policy_input *in, const struct policy_config *cfg,
                struct policy_streak *streak, struct policy_class *out)
{
    struct policy_config dflt;
    struct text t;
    struct learned l;
    int rule = -1;
    bool error_body = true;

    if (cfg == NULL) {
        policy_config_init(&dflt, NULL, NULL);
        cfg = &dflt;
    }
    *out =
        (struct policy_class){POLICY_UNKNOWN, NULL, -1, -1, -1, -1, -1, -1, -1};
    text_init(&t, in->body != NULL ? in->body : "",
              in->body != NULL ? in->body_len : 0, SCAN_BYTES);
    learn(in, &t, &l);
    out->remaining_requests = l.rem_req;
    out->remaining_tokens = l.rem_tok;
    if (l.req_reset_ms >= 0)
        out->requests_reset_at_ms = in->now_ms + l.req_reset_ms;
    if (l.tok_reset_ms >= 0)
        out->tokens_reset_at_ms = in->now_ms + l.tok_reset_ms;

    if (in->transport != POLICY_TRANSPORT_NONE) {
        by_transport(in->transport, out);
        error_body = false;
    } else if ((rule = by_rules(cfg->rules, in)) >= 0) {
        const struct prule *r = &cfg->rules->r[rule];
        set(out, r->outcome, r->reason);
        out->rule = rule;
    } else {
        error_body = by_default(in, &t, out);
    }
    /* A wait written in an error message counts; one in a completion's
     * content is the model talking. */
    if (l.explicit_ms < 0 && error_body)
        l.explicit_ms = l.text_ms;
    out->wait_ms = l.explicit_ms;
    if (out->outcome == POLICY_SOFT_THROTTLE ||
        out->outcome == POLICY_HARD_QUOTA)
        out->wait_ms = throttle_wait(&l, out->reason);
    /* The length of the wait comes last: a throttle that asks for more
     * than switch_wait is a wall until now + wait, whatever it says. */
    if (rule < 0 && out->outcome == POLICY_SOFT_THROTTLE &&
        out->wait_ms > cfg->switch_wait_ms)
        set(out, POLICY_HARD_QUOTA, "long_wait");
    if (out->outcome == POLICY_HARD_QUOTA && out->wait_ms >= 0 &&
        (out->reason == NULL || strcmp(out->reason, "auth") != 0))
        out->reset_at_ms = in->now_ms + out->wait_ms;
    if (streak != NULL)
        escalate(streak, cfg, in->now_ms, out);
    free(t.s);
}

/* ---- decide ---- */

static uint64_t
splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

int64_t
policy_backoff_ms(const struct policy_config *cfg, int n, uint64_t seed)
{
    int64_t base = cfg->backoff_base_ms > 0 ? cfg->backoff_base_ms : 0;
    int64_t cap = cfg->backoff_cap_ms > 0 ? cfg->backoff_cap_ms : 0;
    int64_t window = base;
    double u;

    for (int i = 0; i < n && window < cap; i++)
        window *= 2;
    if (window > cap)
        window = cap;
    u = (double)(splitmix64(seed ^ ((uint64_t)n << 32)) >> 11) *
        (1.0 / 9007199254740992.0);
    return (int64_t)(u * (double)(window + 1));
}

static int64_t
max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static void
decided(struct policy_decision *out, enum policy_action a, int64_t wait,
        const char *reason)
{
    out->action = a;
    out->wait_ms = wait;
    out->reason = reason;
}

static bool
reason_is(const struct policy_class *c, const char *r)
{
    return c->reason != NULL && strcmp(c->reason, r) == 0;
}

void
policy_decide(const struct policy_class *c, const struct policy_step *s,
              const struct policy_config *cfg, struct policy_decision *out)
{
    struct policy_config dflt;
    enum policy_outcome o = c->outcome;
    bool replay = s->replayable || s->idempotency_key;
    bool admits = s->tiers_left > 0;
    bool unkeyed_write = s->side_effects && !s->idempotency_key;
    bool wall_or_refused = o == POLICY_HARD_QUOTA || o == POLICY_REFUSED;
    bool failure = o == POLICY_SERVER_ERROR || o == POLICY_TIMEOUT;
    bool bad_output = o == POLICY_TRUNCATED || o == POLICY_SCHEMA_INVALID;
    /* Refused before it ran: the endpoint did not act on the request,
     * whatever the status (llama.cpp says context overflow with a 500). */
    bool not_run = o == POLICY_TRUNCATED && (reason_is(c, "too_large") ||
                                             reason_is(c, "context_overflow"));
    /* An answer past max_response_bytes: the input is not the problem, so
     * a smaller input would not help. */
    bool input_fault = bad_output && !(o == POLICY_TRUNCATED &&
                                       reason_is(c, "response_too_large"));
    int64_t w;

    if (cfg == NULL) {
        policy_config_init(&dflt, NULL, NULL);
        cfg = &dflt;
    }
    if (o == POLICY_OK) {
        decided(out, POLICY_COMMIT, 0, "ok");
        return;
    }
    if ((bad_output || failure || o == POLICY_UNKNOWN) && unkeyed_write &&
        s->write_may_have_happened && !not_run) {
        decided(out, POLICY_PARK_FOR_HUMAN, 0, "in_doubt");
        return;
    }
    if (o == POLICY_SOFT_THROTTLE) {
        w = max64(c->wait_ms,
                  policy_backoff_ms(cfg, s->throttle_waits_used, s->seed));
        if (s->slack_ms > w &&
            s->throttle_waits_used < cfg->max_throttle_waits) {
            decided(out, POLICY_BACKOFF_RETRY, w, "throttle_wait");
            return;
        }
        if (replay && admits) {
            decided(out, POLICY_SWITCH_TIER_REPLAY, 0, "throttle_switch");
            return;
        }
    }
    if (input_fault && s->token_budget > 0 &&
        s->input_tokens * 10 > s->token_budget * 6 && s->attempts_left > 0 &&
        !s->degraded) {
        decided(out, POLICY_DEGRADE_THEN_RETRY, 0, "degrade");
        return;
    }
    if (o == POLICY_SCHEMA_INVALID && s->attempts_left > 0 &&
        !s->schema_retried) {
        decided(out, POLICY_BACKOFF_RETRY, 0, "schema_retry");
        return;
    }
    if (not_run && replay && admits) {
        decided(out, POLICY_SWITCH_TIER_REPLAY, 0, "too_large_switch");
        return;
    }
    if (wall_or_refused && unkeyed_write) {
        decided(out, POLICY_PARK_FOR_HUMAN, 0, policy_outcome_name(o));
        return;
    }
    if (wall_or_refused && replay && admits) {
        decided(out, POLICY_SWITCH_TIER_REPLAY, 0,
                o == POLICY_REFUSED ? "refused_switch" : "wall_switch");
        return;
    }
    if (o == POLICY_HARD_QUOTA && c->reset_at_ms >= 0 &&
        c->reset_at_ms - s->now_ms <= s->slack_ms) {
        decided(out, POLICY_BACKOFF_RETRY, max64(0, c->reset_at_ms - s->now_ms),
                "wall_reset");
        return;
    }
    if (failure) {
        int n = s->attempts_used > 0 ? s->attempts_used - 1 : 0;
        w = max64(c->wait_ms, policy_backoff_ms(cfg, n, s->seed));
        if (s->attempts_left > 0 && s->slack_ms > w &&
            s->breaker == POLICY_BREAKER_CLOSED) {
            decided(out, POLICY_BACKOFF_RETRY, w, "backoff");
            return;
        }
        if (replay && admits) {
            decided(out, POLICY_SWITCH_TIER_REPLAY, 0, "failure_switch");
            return;
        }
    }
    decided(out, POLICY_FAIL_LOUD, 0, policy_outcome_name(o));
}

bool
policy_write_may_have_happened(const struct policy_input *in)
{
    switch (in->transport) {
    case POLICY_TRANSPORT_NONE:
        break;
    case POLICY_TRANSPORT_TIMEOUT:
    case POLICY_TRANSPORT_RESET:
    case POLICY_TRANSPORT_TOO_LARGE:
        return true;
    default:
        return false;
    }
    return (in->status >= 200 && in->status <= 299) ||
           (in->status >= 500 && in->status <= 599) || in->status == 408;
}

bool
policy_counts_for_breaker(enum policy_outcome o)
{
    return o == POLICY_SERVER_ERROR || o == POLICY_TIMEOUT;
}

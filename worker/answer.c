/* answer.c: an answer to an attempt: classified, the tier settled with
 * what it taught, the step's context built for decide, and the decision
 * carried out (commit the step, wait, degrade, switch tier, park, fail).
 */
#include "worker/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "worker/tier.h"

#define HOUR_MS (3600 * 1000)

/* ---- helpers --------------------------------------------------------- */

static uint64_t
next_rand(struct worker *w)
{
    /* xorshift64*: jitter only, not security. */
    w->rng ^= w->rng >> 12;
    w->rng ^= w->rng << 25;
    w->rng ^= w->rng >> 27;
    return w->rng * 2685821657736338717ULL;
}

/* "step NAME: HTTP 429 hard_quota (daily_cap): <body>" */
static char *
error_text(const struct run *r, const struct http_response *res,
           const struct policy_class *c)
{
    size_t blen =
        res->body_len < ERROR_BODY_MAX ? res->body_len : ERROR_BODY_MAX;
    size_t n = blen + 512;
    char *s = xmalloc(n);
    int k;

    if (res->error != HTTP_ERR_NONE)
        k = snprintf(s, n, "step %s: %s (%s, %s): %s", cur_spec(r)->name,
                     http_error_name(res->error),
                     policy_outcome_name(c->outcome),
                     c->reason ? c->reason : "-", res->error_text);
    else
        k = snprintf(s, n, "step %s: HTTP %d %s (%s): ", cur_spec(r)->name,
                     res->status, policy_outcome_name(c->outcome),
                     c->reason ? c->reason : "-");
    if (res->error == HTTP_ERR_NONE && k > 0 && (size_t)k < n) {
        memcpy(s + k, res->body, blen);
        s[(size_t)k + blen] = '\0';
        json_utf8_scrub(s + k, blen);
    }
    return s;
}

/* ---- classifying and settling the tier ------------------------------- */

enum policy_transport
worker__transport_of(enum http_error e)
{
    switch (e) {
    case HTTP_ERR_NONE:
        return POLICY_TRANSPORT_NONE;
    case HTTP_ERR_TIMEOUT:
        return POLICY_TRANSPORT_TIMEOUT;
    case HTTP_ERR_REFUSED:
        return POLICY_TRANSPORT_REFUSED;
    case HTTP_ERR_TOO_LARGE:
        return POLICY_TRANSPORT_TOO_LARGE;
    case HTTP_ERR_TLS:
        return POLICY_TRANSPORT_TLS;
    case HTTP_ERR_TLS_CERTIFICATE:
        return POLICY_TRANSPORT_TLS_CERTIFICATE;
    case HTTP_ERR_BAD_RESPONSE:
        return POLICY_TRANSPORT_BAD_RESPONSE;
    default:
        return POLICY_TRANSPORT_RESET;
    }
}

static enum policy_breaker
breaker_of(const struct run *r, int64_t now)
{
    struct q_tier_state st;

    if (cur_tier(r) == NULL ||
        tier_snapshot(r->w->db, cur_tier(r), now, false, &st) != 0)
        return POLICY_BREAKER_CLOSED;
    switch (st.breaker) {
    case Q_BREAKER_OPEN:
        return POLICY_BREAKER_OPEN;
    case Q_BREAKER_HALF_OPEN:
        return POLICY_BREAKER_HALF_OPEN;
    default:
        return POLICY_BREAKER_CLOSED;
    }
}

/* Tells the tier what the answer taught: usage, breaker, doubt, walls,
 * cooldown, pace and the limits its headers name. */
static void
settle_tier(struct run *r, const struct policy_class *c, int64_t tokens,
            const struct policy_input *in, int64_t now,
            struct policy_class *for_decide)
{
    const struct config_tier *t = cur_tier(r);
    struct tier_outcome o;
    bool reopened = false;

    if (t == NULL || r->send_id == 0)
        return;
    tier_outcome_init(&o);
    o.tokens = tokens;
    o.charged = r->send_est;
    o.sent_at = r->sent_at;
    if (c->outcome == POLICY_SOFT_THROTTLE) {
        /* The whole tier waits what the endpoint asked for, and a 429 in
         * spite of pacing lowers the pace. */
        o.uncounted = true;
        o.throttle_ms = c->wait_ms > 0 ? c->wait_ms : 0;
        o.paced_down = true;
    }
    if (c->outcome == POLICY_OK)
        o.result = TIER_RESULT_OK;
    else if (policy_counts_for_breaker(c->outcome))
        o.result = TIER_RESULT_FAILURE;
    if (c->outcome == POLICY_HARD_QUOTA) {
        /* A daily cap that says "retry in 48s" (Gemini sends a retryDelay
         * with PerDay quotas too) will not lift in 48 s: believe the
         * allowance window, not the short wait, or the worker would send
         * into the same wall every minute all night. */
        bool daily = c->reason != NULL && strcmp(c->reason, "daily_cap") == 0;
        bool short_reset =
            c->reset_at_ms > now && c->reset_at_ms < now + HOUR_MS;
        if (policy_reason_is_config_wall(c->reason))
            o.exhausted_until = INT64_MAX / 4; /* until the config changes */
        else if (c->reset_at_ms > now && !(daily && short_reset))
            o.exhausted_until = c->reset_at_ms;
        else
            o.exhausted_until = tier_wall_until(t, now);
        o.exhausted_reason = c->reason;
        if (for_decide->reset_at_ms < 0 || (daily && short_reset))
            for_decide->reset_at_ms = o.exhausted_until;
    }
    o.remaining_requests = c->remaining_requests;
    o.requests_reset_at = c->requests_reset_at_ms;
    o.remaining_tokens = c->remaining_tokens;
    o.tokens_reset_at = c->tokens_reset_at_ms;
    tier_limits_from_headers(in->headers, in->nheaders, &o.limit_rpm,
                             &o.limit_tpm);
    if (tier_settle(r->w->db, t, r->send_id, now, &o, &reopened) != 0)
        log_warn("job %lld: cannot record tier state for %s",
                 (long long)r->job.id, t->name);
    r->send_id = 0;
    if (reopened)
        worker__wake_waiting(r->w, now);
}

/* ---- deciding and acting --------------------------------------------- */

/* The step's context for decide, at now. wrote: the endpoint may have
 * acted on the request. */
void
worker__step_context(struct run *r, int64_t now, bool wrote,
                     struct policy_step *ps)
{
    const struct spec_step *s = cur_spec(r);

    memset(ps, 0, sizeof(*ps));
    ps->attempts_used = *sends_on(r, r->cur_tier);
    ps->attempts_left = s->max_attempts - ps->attempts_used;
    ps->input_tokens = r->input_tokens;
    ps->token_budget = s->token_budget;
    ps->slack_ms = r->job.deadline_at - now -
                   (r->last_latency > 0 ? r->last_latency : 1000);
    ps->tiers_left =
        s->kind == SPEC_STEP_CHAT
            ? worker__tiers_left(r, r->input_tokens, now, ps->slack_ms)
            : 0;
    ps->replayable = s->replayable;
    ps->side_effects = s->side_effects;
    ps->idempotency_key = s->idempotency_key != NULL;
    ps->write_may_have_happened = wrote;
    ps->degraded = r->degraded;
    ps->schema_retried = r->schema_retried;
    ps->throttle_waits_used = r->throttle_waits;
    ps->breaker = breaker_of(r, now);
    ps->now_ms = now;
    ps->seed = next_rand(r->w);
}

/* Commits the step's output, adding add_tokens to its count (the
 * correction of its last attempt's estimate, when worker__answer left it to
 * this write). */
static void
commit_step(struct run *r, const char *output, int64_t add_tokens)
{
    struct worker *w = r->w;
    const struct config_tier *t = cur_tier(r);

    if (q_step_set(w->db, r->job.id, w->id, r->step, Q_STEP_SUCCEEDED,
                   t ? t->name : NULL, output, add_tokens) != 0) {
        worker__give_back(r, worker__now(r->w) + 1000);
        return;
    }
    free(r->outputs[r->step]);
    r->outputs[r->step] = xstrdup(output);
    r->step++;
    worker__step_enter(r);
}

static void
act(struct run *r, const struct policy_decision *d,
    const struct policy_class *c, struct http_response *res, const char *output,
    int64_t add_tokens)
{
    char *err;

    switch (d->action) {
    case POLICY_COMMIT:
        commit_step(r, output, add_tokens);
        return;
    case POLICY_BACKOFF_RETRY:
        if (c->outcome == POLICY_SOFT_THROTTLE) {
            /* The tier cools down as a whole (settle_tier): the run waits
             * in line for it, or for another tier, instead of on a timer
             * of its own that would bring every throttled run back at
             * once. */
            r->throttle_waits++;
            (*sends_on(r, r->cur_tier))--; /* a wait, not an attempt */
            r->admit_since = worker__now(r->w);
            r->wait_tier = r->cur_tier;
            worker__wait_then_attempt(r, 0);
            return;
        }
        if (c->outcome == POLICY_SCHEMA_INVALID)
            r->schema_retried = true;
        worker__wait_then_attempt(r, d->wait_ms);
        return;
    case POLICY_DEGRADE_THEN_RETRY:
        r->degraded = true;
        worker__attempt(r);
        return;
    case POLICY_SWITCH_TIER_REPLAY:
        worker__switch_tier(r);
        return;
    case POLICY_PARK_FOR_HUMAN:
        err = error_text(r, res, c);
        worker__park(r,
                     d->reason && strcmp(d->reason, "in_doubt") == 0
                         ? "in_doubt"
                         : policy_outcome_name(c->outcome),
                     err);
        free(err);
        return;
    default:
        err = error_text(r, res, c);
        worker__fail_job(r, err);
        free(err);
        return;
    }
}

/* ---- the answer's text ------------------------------------------------ */

/* A chat answer's text is choices[0].message.content: a string, or an
 * array of parts, which OpenAI-compatible servers and Anthropic's
 * compatibility layer send ([{"type": "text", "text": "..."}]); then the
 * text is that of its parts of type "text", joined, and parts of other
 * types (images, refusals, reasoning) are no text. */
struct chat_text {
    const char *text; /* the string or joined; NULL: no text at all */
    char *joined;     /* owned: the parts' text joined, or NULL */
    bool parts;       /* the content is an array of parts */
    bool bad;         /* not UTF-8, or cut at a NUL: no text to commit */
};

/* The text of a part of type "text", or NULL. Borrowed from part. */
static const char *
part_text(const cJSON *part)
{
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(part, "type");
    const cJSON *tx = cJSON_GetObjectItemCaseSensitive(part, "text");

    if (!cJSON_IsObject(part) || !cJSON_IsString(ty) ||
        strcmp(ty->valuestring, "text") != 0 || !cJSON_IsString(tx))
        return NULL;
    return tx->valuestring;
}

/* The text parts of content (an array) joined, or NULL when it has none.
 * Caller owns the result; free with free(). Its size is bounded by the
 * body's, which the HTTP client capped. */
static char *
join_parts(const cJSON *content)
{
    const cJSON *part;
    size_t n = 0, k = 0;
    bool any = false;
    char *out;

    cJSON_ArrayForEach(part, content)
    {
        const char *t = part_text(part);
        if (t != NULL) {
            n += strlen(t);
            any = true;
        }
    }
    if (!any)
        return NULL;
    out = xmalloc(n + 1);
    cJSON_ArrayForEach(part, content)
    {
        const char *t = part_text(part);
        if (t != NULL) {
            memcpy(out + k, t, strlen(t));
            k += strlen(t);
        }
    }
    out[k] = '\0';
    return out;
}

/* cJSON decodes an escaped NUL ("\u0000") into its C string, which ends
 * there: the text after it would be lost without a word. An answer whose
 * strings hold one (or a raw control character) anywhere is not taken as
 * text: a NUL elsewhere than in the content costs a schema_invalid, which
 * no provider has been seen to send. */
static bool
nul_cut(const char *body, size_t len)
{
    char err[128];

    return json_text_check(body, len, err, sizeof(err)) != 0;
}

/* Reads the text of a chat answer: ans (http_chat_read of root) and body,
 * the bytes root was parsed from. Text that is not UTF-8, or that a NUL
 * would cut, is marked bad: it must not become the step's output (nor
 * must the body, the output of an answer without text). Free t with
 * text_cleanup. */
static void
read_text(const cJSON *root, const struct http_chat_answer *ans,
          const char *body, size_t len, struct chat_text *t)
{
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(choices, 0), "message");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");

    memset(t, 0, sizeof(*t));
    if (cJSON_IsArray(content)) {
        t->parts = true;
        t->joined = join_parts(content);
        t->text = t->joined;
    } else {
        t->text = ans->content;
    }
    if (t->text != NULL)
        t->bad =
            !json_utf8_valid(t->text, strlen(t->text)) || nul_cut(body, len);
    else /* the output is the body (a tool call) */
        t->bad = !json_utf8_valid(body, len);
}

/* body as text a JSON view and a C string can hold: NULL when it is
 * (UTF-8 without NUL), else an owned copy with bad bytes and NULs as '?'.
 * Free with free(). */
static char *
as_text(const char *body, size_t len)
{
    char *t;

    if (body == NULL ||
        (json_utf8_valid(body, len) && memchr(body, '\0', len) == NULL))
        return NULL;
    t = xmalloc(len + 1);
    memcpy(t, body, len);
    t[len] = '\0';
    json_utf8_scrub(t, len);
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '\0')
            t[i] = '?';
    }
    return t;
}

static void
text_cleanup(struct chat_text *t)
{
    free(t->joined);
    memset(t, 0, sizeof(*t));
}

/* spent_tokens is what an answer cost: the usage it reports, else an
 * estimate. An error answer (a status outside 2xx) was not billed and
 * completed nothing: 0, or its HTML page would count as output. A
 * transport error after the request went out (a timeout while
 * generating, a reset, an answer too large) may have been billed for all
 * it asked for: the estimate the send was charged stays, as it does for
 * an attempt in doubt (send_est: it survives a store outage, where
 * attempt_est does not). One that never reached the endpoint (refused,
 * TLS, ...) cost nothing. A 2xx without usage: request and answer,
 * bytes / 4. */
static int64_t
spent_tokens(const struct run *r, const struct http_response *res,
             int64_t reported)
{
    if (reported >= 0)
        return reported;
    if (res->error == HTTP_ERR_TIMEOUT || res->error == HTTP_ERR_RESET ||
        res->error == HTTP_ERR_TOO_LARGE)
        return r->send_est > 0 ? r->send_est : 0;
    if (res->error != HTTP_ERR_NONE)
        return 0;
    if (res->status < 200 || res->status > 299)
        return 0;
    return (int64_t)(r->body_len + res->body_len) / 4;
}

void
worker__answer(struct run *r)
{
    struct worker *w = r->w;
    const struct spec_step *s = cur_spec(r);
    struct http_response *res = &r->held->res;
    struct policy_header *hdrs = NULL;
    struct http_chat_answer ans = {0};
    struct chat_text txt = {0};
    struct policy_input in;
    struct policy_class c, dc;
    struct policy_step ps;
    struct policy_decision d;
    struct q_attempt_result ar;
    struct attempt_log line;
    int64_t now = worker__now(r->w), tokens = 0;
    const char *output = NULL;
    char *kept = NULL;   /* owned: the body as text, when it is not */
    char *masked = NULL; /* owned: the output with its secrets masked */
    /* What the endpoint sent: the checks of what it is (a completion whose
     * output parses) read it as it came, whatever masking changed. */
    const char *seen = res->raw ? res->raw : res->body;
    size_t seen_len = res->raw ? res->raw_len : res->body_len;
    cJSON *root = NULL;
    bool parsed_chat = false;
    const struct price_usage no_usage = PRICE_USAGE_NONE;
    int ti = r->cur_tier;

    r->last_latency = res->latency_ms;
    if (ti >= 0 && res->status > 0) {
        int64_t *lat = &w->latency_ms[ti];
        *lat = *lat > 0 ? (*lat * 7 + res->latency_ms) / 8 : res->latency_ms;
    }
    hdrs = xcalloc(res->nheaders + 1, sizeof(*hdrs));
    for (size_t i = 0; i < res->nheaders; i++) {
        hdrs[i].name = res->headers[i].name;
        hdrs[i].value = res->headers[i].value;
    }
    memset(&in, 0, sizeof(in));
    in.status = res->status;
    in.transport = worker__transport_of(res->error);
    in.headers = hdrs;
    in.nheaders = res->nheaders;
    in.body = seen;
    in.body_len = seen_len;
    in.parsed = POLICY_PARSED_DERIVE;
    in.http_step = s->kind == SPEC_STEP_HTTP;
    in.now_ms = now;
    /* Parsed once, read here and by classify. */
    if (s->kind == SPEC_STEP_CHAT && res->error == HTTP_ERR_NONE &&
        res->status >= 200 && res->status < 300 && seen != NULL)
        root = json_parse_exact(seen, seen_len);
    in.json = root;
    if (http_chat_read(root, &ans) == 0) {
        parsed_chat = true;
        read_text(root, &ans, seen, seen_len, &txt);
        /* Text that is not UTF-8 or that a NUL cuts, and parts without a
         * text part or a tool call (empty content, SPEC), are an output
         * that does not parse as text: schema_invalid, never committed. */
        if (txt.bad || (txt.parts && txt.text == NULL && !ans.has_tool_calls))
            in.parsed = POLICY_PARSED_NO;
        else if (s->expect_json != NULL)
            in.parsed =
                worker__has_keys(txt.text, txt.text ? strlen(txt.text) : 0,
                                 s->expect_json)
                    ? POLICY_PARSED_YES
                    : POLICY_PARSED_NO;
    }
    policy_classify(&in, &w->pcfg, ti >= 0 ? &w->streaks[ti] : NULL, &c);
    if (s->kind == SPEC_STEP_CHAT)
        tokens = spent_tokens(r, res, parsed_chat ? ans.total_tokens : -1);
    dc = c;
    settle_tier(r, &c, s->kind == SPEC_STEP_CHAT ? tokens : -1, &in, now, &dc);
    worker__step_context(r, now, policy_write_may_have_happened(&in), &ps);
    policy_decide(&dc, &ps, &w->pcfg, &d);
    if (d.action == POLICY_BACKOFF_RETRY && c.outcome == POLICY_SOFT_THROTTLE)
        d.wait_ms = c.wait_ms > 0 ? c.wait_ms : 1000; /* the tier's cooldown */

    /* A failed attempt's body and an http step's output are shown as JSON
     * text (jobs show --json) and read as C strings: bad bytes and NULs are
     * kept as '?'. */
    if (c.outcome != POLICY_OK || s->kind == SPEC_STEP_HTTP)
        kept = as_text(res->body, res->body_len);
    ar = (struct q_attempt_result){
        .status = res->status,
        .outcome = policy_outcome_name(c.outcome),
        .reason = c.reason,
        .decision = policy_action_name(d.action),
        .delay_ms = d.wait_ms,
        .latency_ms = res->latency_ms,
        .tokens = tokens,
        .body = c.outcome == POLICY_OK ? NULL
                : kept                 ? kept
                                       : res->body,
        .body_len = c.outcome == POLICY_OK ? 0 : res->body_len,
        .finished_at = now,
        .masked = res->raw != NULL,
        /* A commit writes the step's row anyway: the estimate's correction
         * rides in that write instead of one of its own. */
        .caller_corrects = d.action == POLICY_COMMIT && r->attempt_est >= 0,
    };
    if (s->kind == SPEC_STEP_CHAT)
        worker__cost_answer(
            cur_tier(r), res, parsed_chat ? &ans.usage : &no_usage,
            (int64_t)r->body_len, r->input_tokens, r->send_est, &ar);
    worker__budget_settle(r, ar.priced ? ar.cost_nusd : -1, now);
    if (q_attempt_finish(w->db, r->attempt_id, &ar) != 0)
        log_warn("job %lld: cannot record the attempt's result",
                 (long long)r->job.id);
    line = (struct attempt_log){
        .job = r->job.id,
        .step = s->name,
        .attempt = r->attempt_no,
        .tier = cur_tier(r) ? cur_tier(r)->name : NULL,
        .status = res->status,
        .outcome = ar.outcome,
        .reason = c.reason,
        .decision = ar.decision,
        .delay_ms = d.wait_ms,
        .latency_ms = res->latency_ms,
        .error =
            res->error != HTTP_ERR_NONE ? http_error_name(res->error) : NULL,
        .body = c.outcome == POLICY_OK ? NULL
                : kept                 ? kept
                                       : res->body,
        .body_len = res->body_len,
    };
    if (r->logged_attempt != r->attempt_id) {
        log_attempt(&line);
        r->logged_attempt = r->attempt_id;
    }
    /* What is kept is masked: an endpoint that echoed a secret into the
     * completion gets it back as "***" (the attempt says so). */
    if (s->kind == SPEC_STEP_CHAT && txt.text != NULL && res->raw != NULL)
        output = masked = http_response_mask(res, txt.text);
    else if (s->kind == SPEC_STEP_CHAT)
        output = txt.text ? txt.text : res->body;
    else
        output = kept ? kept : res->body;
    act(r, &d, &c, res, output,
        ar.caller_corrects ? tokens - r->attempt_est : 0);
    text_cleanup(&txt);
    http_chat_answer_cleanup(&ans);
    cJSON_Delete(root);
    free(kept);
    free(masked);
    free(hdrs);
}

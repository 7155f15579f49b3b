/* answer.c: an answer to an attempt: classified, the tier settled with
 * what it taught, the step's context built for decide, and the decision
 * carried out (commit the step, wait, degrade, switch tier, park, fail).
 */
#include "worker/internal.h"
#include "worker/money.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "queue/tiers.h"
#include "tier/tier.h"
#include "worker/batch.h"
#include "worker/foreach.h"

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
        bool daily = c->why == POLICY_REASON_DAILY_CAP;
        bool short_reset =
            c->reset_at_ms > now && c->reset_at_ms < now + HOUR_MS;
        if (policy_is_config_wall(c->why))
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

/* An http step's host that answered a wall (not one of its config: a
 * job's own key is its own) is walled for every later send there. */
static void
settle_host(struct run *r, const struct policy_class *c, int64_t now)
{
    const cJSON *url =
        cJSON_GetObjectItemCaseSensitive(cur_spec(r)->http, "url");
    char key[300];

    if (c->outcome != POLICY_HARD_QUOTA || policy_is_config_wall(c->why) ||
        !cJSON_IsString(url) ||
        tier_host_key(url->valuestring, key, sizeof(key)) != 0)
        return;
    if (tier_host_wall_set(r->w->db, key, tier_host_wall_until(c, now),
                           c->reason) != 0)
        log_warn("job %lld: cannot record the wall of %s", (long long)r->job.id,
                 key + strlen(TIER_HOST_PREFIX));
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
void
worker__commit_step(struct run *r, const char *output, int64_t add_tokens)
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
        worker__commit_step(r, output, add_tokens);
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
                     d->why == POLICY_REASON_IN_DOUBT
                         ? "in_doubt"
                         : policy_outcome_name(c->outcome),
                     err);
        free(err);
        return;
    default:
        err = worker__agent_overflow_text(r, c, error_text(r, res, c));
        worker__fail_job(r, err);
        free(err);
        return;
    }
}

/* ---- the answer's text ------------------------------------------------ */

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

/* What an answer is, read once: the input classify reads (the body as it
 * came, whatever masking changed), the completion parsed, its text. */
struct reading {
    struct policy_header *hdrs; /* owned; borrowing res's headers */
    struct policy_input in;
    struct http_chat_answer ans;
    struct http_chat_text txt;
    cJSON *root; /* owned */
    bool chat;   /* read as a chat completion */
};

static void
read_answer(const struct run *r, const struct http_response *res, int64_t now,
            struct reading *rd)
{
    const struct spec_step *s = cur_spec(r);
    const char *seen = res->raw ? res->raw : res->body;
    size_t seen_len = res->raw ? res->raw_len : res->body_len;
    struct policy_input *in = &rd->in;

    memset(rd, 0, sizeof(*rd));
    rd->hdrs = xcalloc(res->nheaders + 1, sizeof(*rd->hdrs));
    for (size_t i = 0; i < res->nheaders; i++) {
        rd->hdrs[i].name = res->headers[i].name;
        rd->hdrs[i].value = res->headers[i].value;
    }
    in->status = res->status;
    in->transport = worker__transport_of(res->error);
    in->headers = rd->hdrs;
    in->nheaders = res->nheaders;
    in->body = seen;
    in->body_len = seen_len;
    in->parsed = POLICY_PARSED_DERIVE;
    in->http_step = s->kind == SPEC_STEP_HTTP;
    in->now_ms = now;
    /* Parsed once, read here and by classify. */
    if (s->kind == SPEC_STEP_CHAT && res->error == HTTP_ERR_NONE &&
        res->status >= 200 && res->status < 300 && seen != NULL)
        rd->root = json_parse_exact(seen, seen_len);
    in->json = rd->root;
    if (http_chat_read(rd->root, &rd->ans) != 0)
        return;
    rd->chat = true;
    http_chat_text(rd->root, &rd->ans, seen, seen_len, &rd->txt);
    /* Text that is not UTF-8 or that a NUL cuts, and parts without a text
     * part or a tool call (empty content, SPEC), are an output that does
     * not parse as text: schema_invalid, never committed. */
    if (rd->txt.bad ||
        (rd->txt.parts && rd->txt.text == NULL && !rd->ans.has_tool_calls))
        in->parsed = POLICY_PARSED_NO;
    else if (s->expect_json != NULL &&
             !(s->tools != NULL && rd->ans.has_tool_calls))
        /* An agent's turn with calls is checked when it answers in text. */
        in->parsed = worker__has_keys(rd->txt.text,
                                      rd->txt.text ? strlen(rd->txt.text) : 0,
                                      s->expect_json)
                         ? POLICY_PARSED_YES
                         : POLICY_PARSED_NO;
}

static void
reading_cleanup(struct reading *rd)
{
    http_chat_text_cleanup(&rd->txt);
    http_chat_answer_cleanup(&rd->ans);
    cJSON_Delete(rd->root);
    free(rd->hdrs);
}

/* The latency of the tier's recent answers, a moving average (what a
 * step weighing a wait for a preferred tier expects the rest to take). */
static void
note_latency(struct run *r, const struct http_response *res)
{
    int64_t *lat;

    r->last_latency = res->latency_ms;
    if (r->cur_tier < 0 || res->status <= 0)
        return;
    lat = &r->w->latency_ms[r->cur_tier];
    *lat = *lat > 0 ? (*lat * 7 + res->latency_ms) / 8 : res->latency_ms;
}

/* Records the attempt's result (*ar) with its cost, settles the budgets
 * its send reserved, and writes its log line once. kept: the body as
 * text, when it is not. */
static void
record(struct run *r, const struct http_response *res, const struct reading *rd,
       const struct policy_class *c, const struct policy_decision *d,
       int64_t tokens, const char *kept, int64_t now,
       struct q_attempt_result *ar)
{
    const struct spec_step *s = cur_spec(r);
    const struct price_usage no_usage = PRICE_USAGE_NONE;
    const char *body = r->turn_body              ? r->turn_body
                       : c->outcome == POLICY_OK ? NULL
                       : kept                    ? kept
                                                 : res->body;
    struct attempt_log line;

    *ar = (struct q_attempt_result){
        .status = res->status,
        .outcome = policy_outcome_name(c->outcome),
        .reason = c->reason,
        .decision = r->turn_body ? "tool_calls" : policy_action_name(d->action),
        .delay_ms = d->wait_ms,
        .latency_ms = res->latency_ms,
        .tokens = tokens,
        .body = body,
        .body_len = r->turn_body              ? strlen(r->turn_body)
                    : c->outcome == POLICY_OK ? 0
                                              : res->body_len,
        .finished_at = now,
        .masked = res->raw != NULL,
        /* A commit writes the step's row anyway: the estimate's correction
         * rides in that write instead of one of its own. */
        .caller_corrects = d->action == POLICY_COMMIT && r->attempt_est >= 0 &&
                           r->turn_body == NULL,
    };
    if (s->kind == SPEC_STEP_CHAT)
        worker__cost_answer(
            cur_tier(r), res, rd->chat ? &rd->ans.usage : &no_usage,
            (int64_t)r->body_len, r->input_tokens, r->send_est, ar);
    else
        worker__cost_http(worker__http_price_tier(r), res, ar);
    if (r->from_batch)
        worker__batch_priced(r, rd->chat ? &rd->ans.usage : &no_usage, ar);
    worker__budget_settle(r, ar->priced ? ar->cost_nusd : -1, now);
    if (q_attempt_finish(r->w->db, r->attempt_id, ar) != 0)
        log_warn("job %lld: cannot record the attempt's result",
                 (long long)r->job.id);
    line = (struct attempt_log){
        .job = r->job.id,
        .step = s->name,
        .attempt = r->attempt_no,
        .tier = cur_tier(r) ? cur_tier(r)->name : NULL,
        .status = res->status,
        .outcome = ar->outcome,
        .reason = c->reason,
        .decision = ar->decision,
        .delay_ms = d->wait_ms,
        .latency_ms = res->latency_ms,
        .error =
            res->error != HTTP_ERR_NONE ? http_error_name(res->error) : NULL,
        .body = body,
        .body_len = res->body_len,
    };
    if (r->logged_attempt != r->attempt_id) {
        log_attempt(&line);
        r->logged_attempt = r->attempt_id;
    }
}

void
worker__answer(struct run *r)
{
    struct worker *w = r->w;
    const struct spec_step *s = cur_spec(r);
    struct http_response *res = &r->held->res;
    struct reading rd;
    struct policy_class c, dc;
    struct policy_step ps;
    struct policy_decision d;
    struct q_attempt_result ar;
    int64_t now = worker__now(r->w), tokens = 0;
    const char *output = NULL;
    char *kept = NULL;      /* owned: the body as text, when it is not */
    char *masked = NULL;    /* owned: the output with its secrets masked */
    char *turn_body = NULL; /* owned: a tool turn's calls (agent.c) */
    int ti = r->cur_tier;

    if (s->kind == SPEC_STEP_CHAT)
        worker__unstream(cur_tier(r), res);
    /* A batch's hours are not the tier's latency (rest_ms, choose.c). */
    if (!r->from_batch)
        note_latency(r, res);
    read_answer(r, res, now, &rd);
    policy_classify(&rd.in, &w->pcfg, ti >= 0 ? &w->streaks[ti] : NULL, &c);
    if (s->kind == SPEC_STEP_CHAT)
        tokens = spent_tokens(r, res, rd.chat ? rd.ans.total_tokens : -1);
    dc = c;
    settle_tier(r, &c, s->kind == SPEC_STEP_CHAT ? tokens : -1, &rd.in, now,
                &dc);
    if (s->kind == SPEC_STEP_HTTP)
        settle_host(r, &c, now);
    worker__step_context(r, now, policy_write_may_have_happened(&rd.in), &ps);
    policy_decide(&dc, &ps, &w->pcfg, &d);
    worker__agent_overflow(r, &c, &d); /* trims once, then fails (trim.c) */
    if (d.action == POLICY_BACKOFF_RETRY && c.outcome == POLICY_SOFT_THROTTLE)
        d.wait_ms = c.wait_ms > 0 ? c.wait_ms : 1000; /* the tier's cooldown */

    /* A failed attempt's body and an http step's output are shown as JSON
     * text (jobs show --json) and read as C strings: bad bytes and NULs are
     * kept as '?'. */
    if (c.outcome != POLICY_OK || s->kind == SPEC_STEP_HTTP)
        kept = http_as_text(res->body, res->body_len);
    /* A model turn of a step with tools that answers with calls runs them
     * (agent.c) instead of committing. */
    if (d.action == POLICY_COMMIT && r->agent != NULL)
        turn_body = worker__agent_turn_body(r, rd.root);
    r->turn_body = turn_body;
    record(r, res, &rd, &c, &d, tokens, kept, now, &ar);
    r->turn_body = NULL;
    if (turn_body != NULL) {
        free(turn_body);
        reading_cleanup(&rd);
        free(kept);
        worker__agent_turn(r);
        return;
    }
    /* What is kept is masked: an endpoint that echoed a secret into the
     * completion gets it back as "***" (the attempt says so). */
    if (s->kind == SPEC_STEP_CHAT && rd.txt.text != NULL && res->raw != NULL)
        output = masked = http_response_mask(res, rd.txt.text);
    else if (s->kind == SPEC_STEP_CHAT)
        output = rd.txt.text ? rd.txt.text : res->body;
    else
        output = kept ? kept : res->body;
    act(r, &d, &c, res, output,
        ar.caller_corrects ? tokens - r->attempt_est : 0);
    reading_cleanup(&rd);
    free(kept);
    free(masked);
}

/* decide.c: policy_decide, the reference's decide table read top to bottom
 * (docs/reference.md "Outcomes and decisions"): the first row whose
 * condition holds wins, so the order of the if statements below is the
 * policy. Also the jittered backoff, and the two facts about an answer the
 * worker asks for besides (did the write maybe happen, does it count for
 * the breaker).
 */
#include "policy/policy.h"

#include <string.h>

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

bool
policy_may_resend(bool replayable, bool side_effects, bool keyed)
{
    return (replayable || keyed) && !(side_effects && !keyed);
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
    case POLICY_TRANSPORT_BAD_RESPONSE:
        return true;
    default:
        return false;
    }
    return (in->status >= 200 && in->status <= 299) ||
           (in->status >= 500 && in->status <= 599) || in->status == 408;
}

bool
policy_reason_is_config_wall(const char *reason)
{
    return reason != NULL && (strcmp(reason, "auth") == 0 ||
                              strcmp(reason, "tls_certificate") == 0);
}

bool
policy_counts_for_breaker(enum policy_outcome o)
{
    return o == POLICY_SERVER_ERROR || o == POLICY_TIMEOUT;
}

/* decide.c: policy_decide, the reference's decide table read top to bottom
 * (docs/reference.md "Outcomes and decisions"): the first row whose
 * condition holds wins, so the order of the if statements below is the
 * policy. Also the jittered backoff, and the two facts about an answer the
 * worker asks for besides (did the write maybe happen, does it count for
 * the breaker).
 */
#include "policy/policy.h"

#include <assert.h>

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
    assert(u >= 0.0 && u < 1.0 && window <= cap);
    return (int64_t)(u * (double)(window + 1));
}

static int64_t
max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* decided fills out and returns true, so that a row reads
 * "return cond && decided(...)". */
static bool
decided(struct policy_decision *out, enum policy_action a, int64_t wait,
        enum policy_reason why)
{
    out->action = a;
    out->wait_ms = wait;
    out->why = why;
    out->reason = policy_reason_name(why);
    return true;
}

/* The reason named after an outcome: park_for_human and fail_loud give
 * the outcome itself as their reason. Indexed by enum policy_outcome. */
static const enum policy_reason outcome_reasons[POLICY_OUTCOME_COUNT] = {
    POLICY_REASON_OK,
    POLICY_REASON_SOFT_THROTTLE,
    POLICY_REASON_HARD_QUOTA,
    POLICY_REASON_TRUNCATED,
    POLICY_REASON_SCHEMA_INVALID,
    POLICY_REASON_REFUSED,
    POLICY_REASON_SERVER_ERROR,
    POLICY_REASON_TIMEOUT,
    POLICY_REASON_UNKNOWN};

bool
policy_may_resend(bool replayable, bool side_effects, bool keyed)
{
    return (replayable || keyed) && !(side_effects && !keyed);
}

/* What the rows of the table read of the answer and the step. */
struct facts {
    enum policy_outcome o;
    bool replay;          /* replayable or keyed */
    bool admits;          /* another tier admits */
    bool unkeyed_write;   /* side effects and no idempotency key */
    bool wall_or_refused; /* hard_quota, refused */
    bool failure;         /* server_error, timeout */
    bool bad_output;      /* truncated, schema_invalid */
    /* Refused before it ran: the endpoint did not act on the request,
     * whatever the status (llama.cpp says context overflow with a 500). */
    bool not_run;
    /* Bad output a smaller input may cure: not an answer past
     * max_response_bytes, where the input is not the problem. */
    bool input_fault;
};

static void
facts_init(struct facts *f, const struct policy_class *c,
           const struct policy_step *s)
{
    enum policy_outcome o = c->outcome;

    f->o = o;
    f->replay = s->replayable || s->idempotency_key;
    f->admits = s->tiers_left > 0;
    f->unkeyed_write = s->side_effects && !s->idempotency_key;
    f->wall_or_refused = o == POLICY_HARD_QUOTA || o == POLICY_REFUSED;
    f->failure = o == POLICY_SERVER_ERROR || o == POLICY_TIMEOUT;
    f->bad_output = o == POLICY_TRUNCATED || o == POLICY_SCHEMA_INVALID;
    f->not_run =
        o == POLICY_TRUNCATED && (c->why == POLICY_REASON_TOO_LARGE ||
                                  c->why == POLICY_REASON_CONTEXT_OVERFLOW);
    f->input_fault =
        f->bad_output &&
        !(o == POLICY_TRUNCATED && c->why == POLICY_REASON_RESPONSE_TOO_LARGE);
}

/* Row 2: a write that may have happened is not sent again. */
static bool
in_doubt(const struct facts *f, const struct policy_step *s,
         struct policy_decision *out)
{
    bool may_have_acted = f->bad_output || f->failure || f->o == POLICY_UNKNOWN;

    return may_have_acted && f->unkeyed_write && s->write_may_have_happened &&
           !f->not_run &&
           decided(out, POLICY_PARK_FOR_HUMAN, 0, POLICY_REASON_IN_DOUBT);
}

/* Rows 3 and 4: a soft throttle waits while it may, else switches. */
static bool
throttled(const struct facts *f, const struct policy_class *c,
          const struct policy_step *s, const struct policy_config *cfg,
          struct policy_decision *out)
{
    int64_t w;

    if (f->o != POLICY_SOFT_THROTTLE)
        return false;
    w = max64(c->wait_ms,
              policy_backoff_ms(cfg, s->throttle_waits_used, s->seed));
    if (s->slack_ms > w && s->throttle_waits_used < cfg->max_throttle_waits)
        return decided(out, POLICY_BACKOFF_RETRY, w,
                       POLICY_REASON_THROTTLE_WAIT);
    return f->replay && f->admits &&
           decided(out, POLICY_SWITCH_TIER_REPLAY, 0,
                   POLICY_REASON_THROTTLE_SWITCH);
}

/* Rows 5 to 7: bad output degrades once, a schema miss retries once, a
 * request too large for this tier goes to another. */
static bool
bad_output(const struct facts *f, const struct policy_step *s,
           struct policy_decision *out)
{
    if (f->input_fault && s->token_budget > 0 &&
        s->input_tokens * 10 > s->token_budget * 6 && s->attempts_left > 0 &&
        !s->degraded)
        return decided(out, POLICY_DEGRADE_THEN_RETRY, 0,
                       POLICY_REASON_DEGRADE);
    if (f->o == POLICY_SCHEMA_INVALID && s->attempts_left > 0 &&
        !s->schema_retried)
        return decided(out, POLICY_BACKOFF_RETRY, 0,
                       POLICY_REASON_SCHEMA_RETRY);
    return f->not_run && f->replay && f->admits &&
           decided(out, POLICY_SWITCH_TIER_REPLAY, 0,
                   POLICY_REASON_TOO_LARGE_SWITCH);
}

/* Rows 8 to 10: a wall or a refusal parks an unkeyed write, else
 * switches, else waits for a wall's reset within the slack. */
static bool
walled(const struct facts *f, const struct policy_class *c,
       const struct policy_step *s, struct policy_decision *out)
{
    if (f->wall_or_refused && f->unkeyed_write)
        return decided(out, POLICY_PARK_FOR_HUMAN, 0, outcome_reasons[f->o]);
    if (f->wall_or_refused && f->replay && f->admits)
        return decided(out, POLICY_SWITCH_TIER_REPLAY, 0,
                       f->o == POLICY_REFUSED ? POLICY_REASON_REFUSED_SWITCH
                                              : POLICY_REASON_WALL_SWITCH);
    return f->o == POLICY_HARD_QUOTA && c->reset_at_ms >= 0 &&
           c->reset_at_ms - s->now_ms <= s->slack_ms &&
           decided(out, POLICY_BACKOFF_RETRY,
                   max64(0, c->reset_at_ms - s->now_ms),
                   POLICY_REASON_WALL_RESET);
}

/* Rows 11 and 12: a failure backs off while the breaker lets it, else
 * switches. */
static bool
failed(const struct facts *f, const struct policy_class *c,
       const struct policy_step *s, const struct policy_config *cfg,
       struct policy_decision *out)
{
    int n = s->attempts_used > 0 ? s->attempts_used - 1 : 0;
    int64_t w;

    if (!f->failure)
        return false;
    w = max64(c->wait_ms, policy_backoff_ms(cfg, n, s->seed));
    if (s->attempts_left > 0 && s->slack_ms > w &&
        s->breaker == POLICY_BREAKER_CLOSED)
        return decided(out, POLICY_BACKOFF_RETRY, w, POLICY_REASON_BACKOFF);
    return f->replay && f->admits &&
           decided(out, POLICY_SWITCH_TIER_REPLAY, 0,
                   POLICY_REASON_FAILURE_SWITCH);
}

void
policy_decide(const struct policy_class *c, const struct policy_step *s,
              const struct policy_config *cfg, struct policy_decision *out)
{
    struct policy_config dflt;
    struct facts f;

    if (cfg == NULL) {
        policy_config_init(&dflt, NULL, NULL);
        cfg = &dflt;
    }
    assert((unsigned)c->outcome < POLICY_OUTCOME_COUNT);
    facts_init(&f, c, s);
    /* The table's rows in its order; the first that holds decides. */
    if (f.o == POLICY_OK) {
        decided(out, POLICY_COMMIT, 0, POLICY_REASON_OK);
        return;
    }
    if (in_doubt(&f, s, out) || throttled(&f, c, s, cfg, out) ||
        bad_output(&f, s, out) || walled(&f, c, s, out) ||
        failed(&f, c, s, cfg, out))
        return;
    decided(out, POLICY_FAIL_LOUD, 0, outcome_reasons[f.o]);
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
policy_is_config_wall(enum policy_reason r)
{
    return r == POLICY_REASON_AUTH || r == POLICY_REASON_TLS_CERTIFICATE;
}

bool
policy_reason_is_config_wall(const char *reason)
{
    enum policy_reason r;

    return policy_reason_from_name(reason, &r) == 0 && policy_is_config_wall(r);
}

bool
policy_counts_for_breaker(enum policy_outcome o)
{
    return o == POLICY_SERVER_ERROR || o == POLICY_TIMEOUT;
}

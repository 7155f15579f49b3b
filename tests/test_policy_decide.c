/* test_policy_decide.c: policy_decide, every branch of the reference's table
 * as one row, the jittered backoff, and when a write may have happened. */
#include "tests/support/support.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "tests/test_policy_support.h"

/* ---- decide: every branch of the table ---- */

/* W(lo, hi) is the range wait_ms must fall in; ANYW checks no wait. */
#define W(lo, hi) lo, hi
#define ANYW      NOCHECK, NOCHECK

struct drow {
    const char *name;
    enum policy_outcome outcome;
    const char *reason;
    int64_t wait_ms;  /* server's wait, -1 none */
    int64_t reset_in; /* wall reset from now, -1 unknown */
    const char *mods; /* changes to the default step, see apply_mods */
    enum policy_action want;
    const char *want_reason;
    int64_t wait_min, wait_max;
};

/* apply_mods edits the reference default step: "al=0 tiers=0 side idem write
 * !replayable degraded schema_retried in=5000 budget=8000 slack=2000 tw=20
 * au=3 breaker=open|half". */
static void
apply_mods(struct policy_step *s, const char *mods)
{
    char buf[256], *tok, *save = NULL;

    *s = (struct policy_step){.attempts_left = 2,
                              .attempts_used = 1,
                              .input_tokens = 1200,
                              .token_budget = 8000,
                              .tiers_left = 1,
                              .replayable = true,
                              .slack_ms = 90000,
                              .now_ms = NOW,
                              .seed = 42};
    snprintf(buf, sizeof(buf), "%s", mods);
    for (tok = strtok_r(buf, " ", &save); tok != NULL;
         tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        long long v = eq ? atoll(eq + 1) : 0;
        if (eq != NULL)
            *eq = '\0';
        if (strcmp(tok, "al") == 0)
            s->attempts_left = (int)v;
        else if (strcmp(tok, "au") == 0)
            s->attempts_used = (int)v;
        else if (strcmp(tok, "in") == 0)
            s->input_tokens = v;
        else if (strcmp(tok, "budget") == 0)
            s->token_budget = v;
        else if (strcmp(tok, "tiers") == 0)
            s->tiers_left = (int)v;
        else if (strcmp(tok, "slack") == 0)
            s->slack_ms = v;
        else if (strcmp(tok, "tw") == 0)
            s->throttle_waits_used = (int)v;
        else if (strcmp(tok, "side") == 0)
            s->side_effects = true;
        else if (strcmp(tok, "idem") == 0)
            s->idempotency_key = true;
        else if (strcmp(tok, "write") == 0)
            s->write_may_have_happened = true;
        else if (strcmp(tok, "!replayable") == 0)
            s->replayable = false;
        else if (strcmp(tok, "degraded") == 0)
            s->degraded = true;
        else if (strcmp(tok, "schema_retried") == 0)
            s->schema_retried = true;
        else if (strcmp(tok, "breaker") == 0)
            s->breaker = strcmp(eq + 1, "open") == 0 ? POLICY_BREAKER_OPEN
                                                     : POLICY_BREAKER_HALF_OPEN;
        else
            ck_abort_msg("bad mod %s", tok);
    }
}

#define T  POLICY_TRUNCATED
#define SI POLICY_SCHEMA_INVALID
#define SE POLICY_SERVER_ERROR
#define TO POLICY_TIMEOUT
#define HQ POLICY_HARD_QUOTA
#define RF POLICY_REFUSED
#define ST POLICY_SOFT_THROTTLE

static const struct drow drows[] = {
    /* 1 */
    {"ok commits", POLICY_OK, NULL, -1, -1, "side write", POLICY_COMMIT, "ok",
     W(0, 0)},
    /* 2: in doubt */
    {"truncated in doubt", T, "length", -1, -1, "side write",
     POLICY_PARK_FOR_HUMAN, "in_doubt", ANYW},
    {"schema in doubt", SI, "empty_output", -1, -1, "side write",
     POLICY_PARK_FOR_HUMAN, "in_doubt", ANYW},
    {"server_error in doubt", SE, "server", -1, -1, "side write",
     POLICY_PARK_FOR_HUMAN, "in_doubt", ANYW},
    {"timeout in doubt", TO, "timeout", -1, -1, "side write",
     POLICY_PARK_FOR_HUMAN, "in_doubt", ANYW},
    {"unknown in doubt", POLICY_UNKNOWN, "status", -1, -1, "side write",
     POLICY_PARK_FOR_HUMAN, "in_doubt", ANYW},
    {"no write, no doubt", SE, "server", -1, -1, "side", POLICY_BACKOFF_RETRY,
     "backoff", W(0, 1000)},
    {"idempotency key, no doubt", SE, "server", -1, -1, "side idem write",
     POLICY_BACKOFF_RETRY, "backoff", W(0, 1000)},
    {"hard_quota is never in doubt", HQ, "daily_cap", -1, -1,
     "side write !replayable", POLICY_PARK_FOR_HUMAN, "hard_quota", ANYW},
    /* a request refused before it ran (the reference, as amended) is not in
     * doubt, even on a 5xx (llama.cpp says context overflow with 500) */
    {"context_overflow is not in doubt", T, "context_overflow", -1, -1,
     "side write !replayable", POLICY_FAIL_LOUD, "truncated", ANYW},
    {"too_large is not in doubt", T, "too_large", -1, -1,
     "side write !replayable", POLICY_FAIL_LOUD, "truncated", ANYW},
    {"context_overflow with side effects switches", T, "context_overflow", -1,
     -1, "side write", POLICY_SWITCH_TIER_REPLAY, "too_large_switch", ANYW},
    {"response_too_large is in doubt", T, "response_too_large", -1, -1,
     "side write !replayable in=5000", POLICY_PARK_FOR_HUMAN, "in_doubt", ANYW},
    /* 3: throttle waits */
    {"throttle waits the server's wait", ST, "rpm", 3000, -1, "",
     POLICY_BACKOFF_RETRY, "throttle_wait", W(3000, 3000)},
    {"throttle jitter without a server wait", ST, "rpm", -1, -1, "tw=2",
     POLICY_BACKOFF_RETRY, "throttle_wait", W(0, 4000)},
    {"throttle jitter is capped", ST, "rpm", -1, -1, "tw=19",
     POLICY_BACKOFF_RETRY, "throttle_wait", W(0, 20000)},
    {"throttle waits do not use attempts", ST, "rpm", 3000, -1, "al=0",
     POLICY_BACKOFF_RETRY, "throttle_wait", W(3000, 3000)},
    /* 4: throttle switches */
    {"throttle wait beyond slack switches", ST, "tpm", 9816, -1, "slack=2000",
     POLICY_SWITCH_TIER_REPLAY, "throttle_switch", W(0, 0)},
    {"throttle wait equal to slack switches", ST, "tpm", 5000, -1, "slack=5000",
     POLICY_SWITCH_TIER_REPLAY, "throttle_switch", ANYW},
    {"throttle waits used up switch", ST, "rpm", 1000, -1, "tw=20",
     POLICY_SWITCH_TIER_REPLAY, "throttle_switch", ANYW},
    {"throttle idempotent switch", ST, "rpm", 9000, -1,
     "slack=1000 !replayable idem side", POLICY_SWITCH_TIER_REPLAY,
     "throttle_switch", ANYW},
    {"throttle not replayable fails", ST, "rpm", 9000, -1,
     "slack=1000 !replayable", POLICY_FAIL_LOUD, "soft_throttle", ANYW},
    {"throttle no tier fails", ST, "rpm", 9000, -1, "slack=1000 tiers=0",
     POLICY_FAIL_LOUD, "soft_throttle", ANYW},
    /* 5: degrade */
    {"truncated big input degrades", T, "length", -1, -1, "in=5000",
     POLICY_DEGRADE_THEN_RETRY, "degrade", W(0, 0)},
    {"schema big input degrades", SI, "invalid_output", -1, -1, "in=5000",
     POLICY_DEGRADE_THEN_RETRY, "degrade", ANYW},
    {"60% exactly does not degrade", T, "length", -1, -1, "in=4800",
     POLICY_FAIL_LOUD, "truncated", ANYW},
    {"degrade only once", T, "length", -1, -1, "in=5000 degraded",
     POLICY_FAIL_LOUD, "truncated", ANYW},
    {"degrade needs attempts", T, "length", -1, -1, "in=5000 al=0",
     POLICY_FAIL_LOUD, "truncated", ANYW},
    {"no budget, no degrade", T, "length", -1, -1, "in=5000 budget=0",
     POLICY_FAIL_LOUD, "truncated", ANYW},
    /* an answer past max_response_bytes: the input is not the problem */
    {"response_too_large does not degrade", T, "response_too_large", -1, -1,
     "in=5000", POLICY_FAIL_LOUD, "truncated", ANYW},
    /* the seed scenario of the reference: one request planned to fit 4000 */
    {"seed: 2770 of 4000 degrades", T, "length", -1, -1, "in=2770 budget=4000",
     POLICY_DEGRADE_THEN_RETRY, "degrade", W(0, 0)},
    /* 6: schema retry */
    {"schema retries once without wait", SI, "empty_output", 5000, -1, "",
     POLICY_BACKOFF_RETRY, "schema_retry", W(0, 0)},
    {"schema retried already", SI, "empty_output", -1, -1, "schema_retried",
     POLICY_FAIL_LOUD, "schema_invalid", ANYW},
    {"schema without attempts", SI, "empty_output", -1, -1, "al=0",
     POLICY_FAIL_LOUD, "schema_invalid", ANYW},
    /* 7: too large switches */
    {"too_large switches", T, "too_large", -1, -1, "side",
     POLICY_SWITCH_TIER_REPLAY, "too_large_switch", ANYW},
    {"context_overflow switches", T, "context_overflow", -1, -1, "",
     POLICY_SWITCH_TIER_REPLAY, "too_large_switch", ANYW},
    {"length does not switch", T, "length", -1, -1, "", POLICY_FAIL_LOUD,
     "truncated", ANYW},
    {"too_large without tier", T, "too_large", -1, -1, "tiers=0",
     POLICY_FAIL_LOUD, "truncated", ANYW},
    {"too_large not replayable", T, "too_large", -1, -1, "!replayable",
     POLICY_FAIL_LOUD, "truncated", ANYW},
    /* 8: park walls and refusals with side effects */
    {"hard_quota side effects parks", HQ, "daily_cap", -1, -1, "side",
     POLICY_PARK_FOR_HUMAN, "hard_quota", ANYW},
    {"refused side effects parks", RF, "content_filter", -1, -1, "side",
     POLICY_PARK_FOR_HUMAN, "refused", ANYW},
    /* 9: switch */
    {"hard_quota switches", HQ, "daily_cap", -1, -1, "",
     POLICY_SWITCH_TIER_REPLAY, "wall_switch", ANYW},
    {"hard_quota keyed side effects switch", HQ, "daily_cap", -1, -1,
     "side idem", POLICY_SWITCH_TIER_REPLAY, "wall_switch", ANYW},
    {"refused switches", RF, "content_filter", -1, -1, "",
     POLICY_SWITCH_TIER_REPLAY, "refused_switch", ANYW},
    {"hard_quota not replayable fails", HQ, "daily_cap", -1, -1, "!replayable",
     POLICY_FAIL_LOUD, "hard_quota", ANYW},
    {"refused without tier fails", RF, "content_filter", -1, -1, "tiers=0",
     POLICY_FAIL_LOUD, "refused", ANYW},
    /* 10: wait for the wall */
    {"wall resets within slack", HQ, "daily_cap", 578016, 578016,
     "tiers=0 slack=700000", POLICY_BACKOFF_RETRY, "wall_reset",
     W(578016, 578016)},
    {"wall resets at slack", HQ, "daily_cap", -1, 700000,
     "tiers=0 slack=700000", POLICY_BACKOFF_RETRY, "wall_reset",
     W(700000, 700000)},
    {"wall past reset retries now", HQ, "daily_cap", -1, -5000, "tiers=0",
     POLICY_BACKOFF_RETRY, "wall_reset", W(0, 0)},
    {"wall beyond slack fails", HQ, "daily_cap", -1, 578016, "tiers=0",
     POLICY_FAIL_LOUD, "hard_quota", ANYW},
    {"wall without reset fails", HQ, "auth", -1, -1, "tiers=0",
     POLICY_FAIL_LOUD, "hard_quota", ANYW},
    /* 11: server error backoff */
    {"server_error backs off", SE, "server", -1, -1, "au=3",
     POLICY_BACKOFF_RETRY, "backoff", W(0, 4000)},
    {"first attempt not counted yet", SE, "server", -1, -1, "au=0",
     POLICY_BACKOFF_RETRY, "backoff", W(0, 1000)},
    {"timeout backs off", TO, "timeout", -1, -1, "", POLICY_BACKOFF_RETRY,
     "backoff", W(0, 1000)},
    {"server wait is honoured", SE, "server", 7000, -1, "",
     POLICY_BACKOFF_RETRY, "backoff", W(7000, 7000)},
    /* 12: server error switch */
    {"server wait beyond slack switches", SE, "server", 7000, -1, "slack=5000",
     POLICY_SWITCH_TIER_REPLAY, "failure_switch", ANYW},
    {"no attempts switches", SE, "overloaded", -1, -1, "al=0",
     POLICY_SWITCH_TIER_REPLAY, "failure_switch", ANYW},
    {"open breaker switches", SE, "server", -1, -1, "breaker=open",
     POLICY_SWITCH_TIER_REPLAY, "failure_switch", ANYW},
    {"half-open breaker switches", TO, "timeout", -1, -1, "breaker=half",
     POLICY_SWITCH_TIER_REPLAY, "failure_switch", ANYW},
    {"negative slack switches", TO, "timeout", -1, -1, "slack=-1",
     POLICY_SWITCH_TIER_REPLAY, "failure_switch", ANYW},
    /* 13: fail loud */
    {"server error with nowhere to go", SE, "server", -1, -1, "al=0 tiers=0",
     POLICY_FAIL_LOUD, "server_error", ANYW},
    {"server error not replayable", SE, "server", -1, -1, "al=0 !replayable",
     POLICY_FAIL_LOUD, "server_error", ANYW},
    {"unknown fails", POLICY_UNKNOWN, "not_found", -1, -1, "", POLICY_FAIL_LOUD,
     "unknown", W(0, 0)},
};

START_TEST(test_decide_row)
{
    const struct drow *r = &drows[_i];
    struct policy_class c = {.outcome = r->outcome,
                             .reason = r->reason,
                             .rule = -1,
                             .wait_ms = r->wait_ms,
                             .reset_at_ms =
                                 r->reset_in == -1 ? -1 : NOW + r->reset_in,
                             .remaining_requests = -1,
                             .remaining_tokens = -1,
                             .requests_reset_at_ms = -1,
                             .tokens_reset_at_ms = -1};
    struct policy_step s;
    struct policy_decision d;

    if (r->reason != NULL && policy_reason_from_name(r->reason, &c.why) != 0)
        ck_abort_msg("%s: reason %s is not in the table", r->name, r->reason);
    apply_mods(&s, r->mods);
    policy_decide(&c, &s, NULL, &d);
    ck_assert_str_eq(d.reason, policy_reason_name(d.why));
    ck_assert_msg(d.action == r->want, "%s: got %s", r->name,
                  policy_action_name(d.action));
    ck_assert_msg(strcmp(d.reason, r->want_reason) == 0, "%s: reason %s",
                  r->name, d.reason);
    if (r->wait_min != NOCHECK)
        ck_assert_msg(d.wait_ms >= r->wait_min && d.wait_ms <= r->wait_max,
                      "%s: wait %lld", r->name, (long long)d.wait_ms);
}
END_TEST

START_TEST(test_backoff_jitter)
{
    struct policy_config cfg;
    int64_t lo = INT64_MAX, hi = 0;

    policy_config_init(&cfg, NULL, NULL);
    for (uint64_t seed = 0; seed < 2000; seed++) {
        int64_t w = policy_backoff_ms(&cfg, 3, seed);
        ck_assert_int_eq(w, policy_backoff_ms(&cfg, 3, seed));
        lo = w < lo ? w : lo;
        hi = w > hi ? w : hi;
    }
    /* full jitter over [0, 8 s]: the draws spread over the window */
    ck_assert_int_lt(lo, 500);
    ck_assert_int_gt(hi, 7500);
    ck_assert_int_le(hi, 8000);
    ck_assert_int_le(policy_backoff_ms(&cfg, 1000, 7), 20000);
    cfg.backoff_base_ms = -5;
    ck_assert_int_eq(policy_backoff_ms(&cfg, 3, 7), 0);
}
END_TEST

START_TEST(test_write_may_have_happened)
{
    static const struct {
        int status;
        enum policy_transport tr;
        bool want;
    } rows[] = {
        {200, 0, true},
        {204, 0, true},
        {500, 0, true},
        {529, 0, true},
        {524, 0, true},
        {408, 0, true},
        {429, 0, false},
        {400, 0, false},
        {302, 0, false},
        {0, POLICY_TRANSPORT_TIMEOUT, true},
        {0, POLICY_TRANSPORT_RESET, true},
        {0, POLICY_TRANSPORT_TOO_LARGE, true},
        {0, POLICY_TRANSPORT_BAD_RESPONSE, true},
        {0, POLICY_TRANSPORT_REFUSED, false},
        {0, POLICY_TRANSPORT_TLS, false},
        {0, POLICY_TRANSPORT_TLS_CERTIFICATE, false},
    };

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct policy_input in = {.status = rows[i].status,
                                  .transport = rows[i].tr};
        ck_assert_msg(policy_write_may_have_happened(&in) == rows[i].want,
                      "row %zu", i);
    }
    ck_assert(policy_counts_for_breaker(POLICY_SERVER_ERROR));
    ck_assert(policy_counts_for_breaker(POLICY_TIMEOUT));
    ck_assert(!policy_counts_for_breaker(POLICY_TRUNCATED));
    ck_assert(!policy_counts_for_breaker(POLICY_HARD_QUOTA));
    ck_assert(policy_reason_is_config_wall("auth"));
    ck_assert(policy_reason_is_config_wall("tls_certificate"));
    ck_assert(!policy_reason_is_config_wall("daily_cap"));
    ck_assert(!policy_reason_is_config_wall(NULL));
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("policy_decide");
    TCase *tc;

    tc = tcase_create("decide");
    tcase_add_loop_test(tc, test_decide_row, 0,
                        (int)(sizeof(drows) / sizeof(drows[0])));
    tcase_add_test(tc, test_backoff_jitter);
    tcase_add_test(tc, test_write_may_have_happened);
    suite_add_tcase(s, tc);
    return s;
}

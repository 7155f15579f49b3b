/* test_policy_rules.c: the names of policy's enums both ways, and the user
 * classify rules of the config: compiled, matched before the defaults, and
 * refused with the rule named when bad or too costly. */
#include "tests/support/support.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "policy/policy.h"
#include "tests/test_policy_support.h"

/* ---- names ---- */

START_TEST(test_outcome_names_round_trip)
{
    enum policy_outcome o = POLICY_UNKNOWN;
    const char *name = policy_outcome_name((enum policy_outcome)_i);

    ck_assert_int_eq(policy_outcome_from_name(name, &o), 0);
    ck_assert_int_eq(o, _i);
}
END_TEST

START_TEST(test_action_names_round_trip)
{
    enum policy_action a = POLICY_FAIL_LOUD;
    const char *name = policy_action_name((enum policy_action)_i);

    ck_assert_int_eq(policy_action_from_name(name, &a), 0);
    ck_assert_int_eq(a, _i);
}
END_TEST

START_TEST(test_names_as_spec_prints)
{
    enum policy_outcome o = POLICY_OK;
    enum policy_action a = POLICY_COMMIT;
    enum policy_transport t = POLICY_TRANSPORT_NONE;
    enum policy_breaker b = POLICY_BREAKER_CLOSED;

    ck_assert_str_eq(policy_outcome_name(POLICY_SOFT_THROTTLE),
                     "soft_throttle");
    ck_assert_str_eq(policy_action_name(POLICY_SWITCH_TIER_REPLAY),
                     "switch_tier_replay");
    ck_assert_str_eq(policy_outcome_name(POLICY_OUTCOME_COUNT), "?");
    ck_assert_str_eq(policy_action_name(POLICY_ACTION_COUNT), "?");
    ck_assert_str_eq(policy_transport_name(POLICY_TRANSPORT_COUNT), "?");
    ck_assert_str_eq(policy_breaker_name(POLICY_BREAKER_COUNT), "?");
    ck_assert_int_eq(policy_outcome_from_name("Soft_Throttle", &o), -EINVAL);
    ck_assert_int_eq(policy_outcome_from_name(NULL, &o), -EINVAL);
    ck_assert_int_eq(o, POLICY_OK);
    ck_assert_int_eq(policy_action_from_name("retry", &a), -EINVAL);
    ck_assert_int_eq(policy_transport_from_name("reset", &t), 0);
    ck_assert_str_eq(policy_transport_name(t), "reset");
    ck_assert_int_eq(policy_breaker_from_name("half_open", &b), 0);
    ck_assert_str_eq(policy_breaker_name(b), "half_open");
    ck_assert_int_eq(policy_breaker_from_name("ajar", &b), -EINVAL);
}
END_TEST

START_TEST(test_reason_names_round_trip)
{
    enum policy_reason r = POLICY_REASON_NONE;
    const char *name = policy_reason_name((enum policy_reason)_i);

    ck_assert_int_eq(policy_reason_from_name(name, &r), 0);
    ck_assert_int_eq(r, _i);
}
END_TEST

/* The reasons docs/reference.md "Outcomes and decisions" names are the
 * table's, spelled as it spells them (the contract). */
START_TEST(test_reference_reasons_in_table)
{
    static const char *const names[] = {"rpm",
                                        "tpm",
                                        "daily_cap",
                                        "monthly_cap",
                                        "insufficient_quota",
                                        "spend_limit",
                                        "auth",
                                        "too_large",
                                        "context_overflow",
                                        "response_too_large",
                                        "content_filter",
                                        "refused",
                                        "overloaded",
                                        "loading",
                                        "html_error",
                                        "empty_output",
                                        "length",
                                        "invalid_output",
                                        "error_body",
                                        "bad_request",
                                        "gateway_config",
                                        "gateway_error",
                                        "reset",
                                        "bad_response",
                                        "long_wait",
                                        "escalated",
                                        "rule",
                                        "in_doubt",
                                        "tls_certificate"};
    enum policy_reason r;

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(names); i++) {
        ck_assert_msg(policy_reason_from_name(names[i], &r) == 0, "%s",
                      names[i]);
        ck_assert_str_eq(policy_reason_name(r), names[i]);
    }
    ck_assert_str_eq(policy_reason_name(POLICY_REASON_COUNT), "?");
    ck_assert_int_eq(policy_reason_from_name("Daily_Cap", &r), -EINVAL);
    ck_assert_int_eq(policy_reason_from_name(NULL, &r), -EINVAL);
}
END_TEST

/* A step with nothing left fails loud, its reason the outcome's name. */
START_TEST(test_fail_loud_names_the_outcome)
{
    struct policy_class c = {.outcome = (enum policy_outcome)_i,
                             .rule = -1,
                             .wait_ms = -1,
                             .reset_at_ms = -1};
    struct policy_step s = {.replayable = true};
    struct policy_decision d;

    policy_decide(&c, &s, NULL, &d);
    if (c.outcome == POLICY_OK) {
        ck_assert_int_eq(d.action, POLICY_COMMIT);
        return;
    }
    ck_assert_int_eq(d.action, POLICY_FAIL_LOUD);
    ck_assert_str_eq(d.reason, policy_outcome_name(c.outcome));
    ck_assert_str_eq(policy_reason_name(d.why), d.reason);
}
END_TEST

/* ---- user rules ---- */

/* Who may be sent again after a request that may have reached the
 * endpoint: replayable or keyed, never a write without a key. */
static const struct {
    bool replayable, side_effects, keyed, want;
} resend_rows[] = {
    {true, false, false, true}, {false, false, false, false},
    {true, true, false, false}, {true, true, true, true},
    {false, true, true, true},  {false, true, false, false},
};

START_TEST(test_may_resend)
{
    ck_assert_int_eq(policy_may_resend(resend_rows[_i].replayable,
                                       resend_rows[_i].side_effects,
                                       resend_rows[_i].keyed),
                     resend_rows[_i].want);
}
END_TEST

START_TEST(test_user_rule_overrides_default)
{
    struct config_rule r[] = {
        {429, "daily|insufficient_quota", NULL, NULL, "hard_quota", NULL},
        {500, "context", NULL, NULL, "server_error", "llama_hiccup"},
    };
    policy_rules *rules = rules_of(r, 2);
    struct policy_config cfg;
    struct policy_class c;

    policy_config_init(&cfg, NULL, rules);
    classify_one(429, NULL, 0, "rate limit, DAILY bucket", &cfg, &c);
    ck_assert_int_eq(c.outcome, POLICY_HARD_QUOTA);
    ck_assert_str_eq(c.reason, "rule");
    ck_assert_int_eq(c.rule, 0);
    classify_one(500, NULL, 0, "Context size has been exceeded", &cfg, &c);
    ck_assert_int_eq(c.outcome, POLICY_SERVER_ERROR);
    ck_assert_str_eq(c.reason, "llama_hiccup");
    ck_assert_int_eq(c.why, POLICY_REASON_RULE);
    ck_assert_int_eq(c.rule, 1);
    /* status must match: the default rules decide */
    classify_one(400, NULL, 0, "context length exceeded", &cfg, &c);
    ck_assert_int_eq(c.outcome, POLICY_TRUNCATED);
    ck_assert_int_eq(c.rule, -1);
    policy_rules_free(rules);
}
END_TEST

/* A rule that names a known reason acts as it: "auth" is a wall only a
 * config change lifts, so a wait the answer names sets no reset. */
START_TEST(test_user_rule_known_reason)
{
    struct config_rule r[] = {
        {0, "key revoked", NULL, NULL, "hard_quota", "auth"},
    };
    policy_rules *rules = rules_of(r, 1);
    struct policy_header ra = {"retry-after", "30"};
    struct policy_config cfg;
    struct policy_class c;

    policy_config_init(&cfg, NULL, rules);
    classify_one(418, &ra, 1, "your key revoked", &cfg, &c);
    ck_assert_int_eq(c.outcome, POLICY_HARD_QUOTA);
    ck_assert_int_eq(c.why, POLICY_REASON_AUTH);
    ck_assert_str_eq(c.reason, "auth");
    ck_assert_int_eq(c.reset_at_ms, -1);
    policy_rules_free(rules);
}
END_TEST

START_TEST(test_user_rule_header_and_order)
{
    struct config_rule r[] = {
        {0, NULL, "x-provider", "^groq$", "refused", "groq_rule"},
        {0, "quota", NULL, NULL, "soft_throttle", "first"},
        {0, "quota", NULL, NULL, "hard_quota", "second"},
    };
    policy_rules *rules = rules_of(r, 3);
    struct policy_header groq = {"X-Provider", "GROQ"};
    struct policy_header other = {"x-provider", "groqq"};
    struct policy_header ra = {"retry-after", "3600"};
    struct policy_config cfg;
    struct policy_class c;

    policy_config_init(&cfg, NULL, rules);
    classify_one(200, &groq, 1, completion_ok, &cfg, &c);
    ck_assert_str_eq(c.reason, "groq_rule");
    classify_one(200, &other, 1, completion_ok, &cfg, &c);
    ck_assert_int_eq(c.outcome, POLICY_OK);
    /* first match wins; a rule's throttle stays soft despite the wait */
    classify_one(429, &ra, 1, "daily quota", &cfg, &c);
    ck_assert_int_eq(c.outcome, POLICY_SOFT_THROTTLE);
    ck_assert_str_eq(c.reason, "first");
    ck_assert_int_eq(c.wait_ms, 3600000);
    policy_rules_free(rules);
}
END_TEST

START_TEST(test_user_rule_sees_past_nul)
{
    struct config_rule r[] = {{0, "tier_gone", NULL, NULL, "hard_quota", NULL}};
    policy_rules *rules = rules_of(r, 1);
    struct policy_input in = {.status = 418};
    struct policy_config cfg;
    struct policy_class c;
    static const char body[] = "\0\0binary\0tier_gone";

    policy_config_init(&cfg, NULL, rules);
    classify_raw(&in, body, sizeof(body) - 1, &cfg, NULL, &c);
    ck_assert_int_eq(c.outcome, POLICY_HARD_QUOTA);
    policy_rules_free(NULL);
    policy_rules_free(rules);
}
END_TEST

#define A16       "aaaaaaaaaaaaaaaa"
#define A256      A16 A16 A16 A16 A16 A16 A16 A16 A16 A16 A16 A16 A16 A16 A16 A16
#define LONG_RULE A256 A256 A256 A256 "a"

struct badrule {
    struct config_rule r[3];
    size_t n;
    const char *prefix;
};

static const struct badrule badrules[] = {
    {{{0, "ok", NULL, NULL, "ok", NULL},
      {429, "(unclosed", NULL, NULL, "hard_quota", NULL}},
     2,
     "classify[1].body: "},
    {{{0, NULL, "x-a", "[z-a]", "hard_quota", NULL}},
     1,
     "classify[0].header_value: "},
    {{{0, NULL, NULL, NULL, "ok", NULL},
      {0, NULL, NULL, NULL, "ok", NULL},
      {0, "x", NULL, NULL, "backoff", NULL}},
     3,
     "classify[2].outcome: "},
    {{{0, NULL, NULL, NULL, NULL, NULL}}, 1, "classify[0].outcome: "},
    /* Regular expressions that would make glibc's regcomp take gigabytes
     * (found by fuzz/fuzz_config) are refused before compiling. */
    {{{0, "a++++++++++++++++++++", NULL, NULL, "ok", NULL}},
     1,
     "classify[0].body: refused: a repetition of a repetition"},
    {{{0, "a{2}{2}", NULL, NULL, "ok", NULL}},
     1,
     "classify[0].body: refused: a repetition of a repetition"},
    {{{0, "x{256}", NULL, NULL, "ok", NULL}},
     1,
     "classify[0].body: refused: a repetition bound above 255"},
    /* fuzz/regressions/config-bound-overflow.json: a bound strtol
     * saturates, then "+ 1" overflowed */
    {{{0, "{95555555555555555555555555555,}", NULL, NULL, "refused", NULL}},
     1,
     "classify[0].body: refused: a repetition bound above 255"},
    {{{0, "a+b+c+d+e+f+g+h+i+j+k+l+m+", NULL, NULL, "ok", NULL}},
     1,
     "classify[0].body: refused: too many repetitions"},
    {{{0, NULL, "x-a", "(((((((((((((a+)+)+)+)+)+)+)+)+)+)+)+)+)+", "ok",
       NULL}},
     1,
     "classify[0].header_value: refused: too many repetitions"},
    {{{0, ".{2,300}", NULL, NULL, "ok", NULL}},
     1,
     "classify[0].body: refused: a repetition bound above 255"},
    {{{0, LONG_RULE, NULL, NULL, "ok", NULL}},
     1,
     "classify[0].body: refused: longer than 1024 characters"},
};

/* Rules that look like stacked repetitions but are not: escaped
 * operators, operators inside brackets, open bounds, optional parts. */
START_TEST(test_cheap_rules_compile)
{
    static const char *const ok[] = {"\\+\\+\\+\\+", "[+*]{2}", "[]+]+",
                                     "[^]+]+x",      "a{2,}b",  "x*y?z",
                                     "a{,2}",        "per.?day"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct config_rule r = {0, (char *)ok[i], NULL, NULL, "ok", NULL};
        policy_rules *rules = NULL;
        char err[256] = "";
        ck_assert_msg(policy_rules_new(&r, 1, &rules, err, sizeof(err)) == 0,
                      "%s: %s", ok[i], err);
        policy_rules_free(rules);
    }
}
END_TEST

START_TEST(test_bad_rule_is_named)
{
    const struct badrule *b = &badrules[_i];
    policy_rules *rules = (policy_rules *)&rules;
    policy_rules *before = rules;
    char err[256] = "";

    ck_assert_int_eq(policy_rules_new(b->r, b->n, &rules, err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_eq(rules, before);
    ck_assert_msg(strncmp(err, b->prefix, strlen(b->prefix)) == 0, "err: %s",
                  err);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("policy_rules");
    TCase *tc;

    tc = tcase_create("names");
    tcase_add_loop_test(tc, test_outcome_names_round_trip, 0,
                        POLICY_OUTCOME_COUNT);
    tcase_add_loop_test(tc, test_action_names_round_trip, 0,
                        POLICY_ACTION_COUNT);
    tcase_add_test(tc, test_names_as_spec_prints);
    tcase_add_loop_test(tc, test_reason_names_round_trip, 0,
                        POLICY_REASON_COUNT);
    tcase_add_test(tc, test_reference_reasons_in_table);
    tcase_add_loop_test(tc, test_fail_loud_names_the_outcome, 0,
                        POLICY_OUTCOME_COUNT);
    tcase_add_loop_test(tc, test_may_resend, 0, STEPQ_ARRAY_LEN(resend_rows));
    suite_add_tcase(s, tc);

    tc = tcase_create("user_rules");
    tcase_add_test(tc, test_user_rule_overrides_default);
    tcase_add_test(tc, test_user_rule_known_reason);
    tcase_add_test(tc, test_user_rule_header_and_order);
    tcase_add_test(tc, test_user_rule_sees_past_nul);
    tcase_add_loop_test(tc, test_bad_rule_is_named, 0,
                        (int)(sizeof(badrules) / sizeof(badrules[0])));
    tcase_add_test(tc, test_cheap_rules_compile);
    suite_add_tcase(s, tc);
    return s;
}

/* test_policy_support.h: the clock and classify helpers the policy suites
 * (tests/test_policy_*.c) share. */
#ifndef STEPQ_TESTS_TEST_POLICY_SUPPORT_H
#define STEPQ_TESTS_TEST_POLICY_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

/* 2026-11-30T03:40:00Z */
#define NOW     ((int64_t)1796010000000)
#define NOCHECK INT64_MIN

/* completion_ok is an OpenAI chat completion that meets expect_json. */
extern const char completion_ok[];

/* classify_raw classifies a body copied into a buffer of exactly len
 * bytes, so that ASan catches any read past it. tmpl gives every other
 * input; cfg and streak are passed on to policy_classify. */
void classify_raw(const struct policy_input *tmpl, const char *body, size_t len,
                  const struct policy_config *cfg, struct policy_streak *streak,
                  struct policy_class *out);

/* classify_one classifies status, headers h[0..nh) and the NUL-terminated
 * body with cfg and no streak. */
void classify_one(int status, const struct policy_header *h, size_t nh,
                  const char *body, const struct policy_config *cfg,
                  struct policy_class *out);

/* rules_of compiles n user rules, failing the test (with the error) when
 * policy_rules_new refuses them. Caller owns the result: policy_rules_free. */
policy_rules *rules_of(const struct config_rule *r, size_t n);

#endif

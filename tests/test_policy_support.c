/* test_policy_support.c: what the policy suites share (see
 * test_policy_support.h). */
#include "tests/test_policy_support.h"

#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "tests/support/support.h"

const char completion_ok[] =
    "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":"
    "\"{\\\"summary\\\": \\\"ok\\\"}\"},\"finish_reason\":\"stop\"}]}";

/* classify_raw classifies a body copied into a buffer of exactly len
 * bytes, so that ASan catches any read past it. */
void
classify_raw(const struct policy_input *tmpl, const char *body, size_t len,
             const struct policy_config *cfg, struct policy_streak *streak,
             struct policy_class *out)
{
    struct policy_input in = *tmpl;
    char *copy = xmalloc(len > 0 ? len : 1);

    memcpy(copy, body, len);
    in.body = copy;
    in.body_len = len;
    if (in.now_ms == 0)
        in.now_ms = NOW;
    policy_classify(&in, cfg, streak, out);
    free(copy);
}

void
classify_one(int status, const struct policy_header *h, size_t nh,
             const char *body, const struct policy_config *cfg,
             struct policy_class *out)
{
    struct policy_input in = {.status = status, .headers = h, .nheaders = nh};

    classify_raw(&in, body, strlen(body), cfg, NULL, out);
}

policy_rules *
rules_of(const struct config_rule *r, size_t n)
{
    policy_rules *rules = NULL;
    char err[256] = "";

    ck_assert_msg(policy_rules_new(r, n, &rules, err, sizeof(err)) == 0, "%s",
                  err);
    return rules;
}

/* test_policy_support.c: what the policy suites share (see
 * test_policy_support.h). */
#include "tests/test_policy_support.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/xalloc.h"
#include "tests/support/support.h"

const char completion_ok[] =
    "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":"
    "\"{\\\"summary\\\": \\\"ok\\\"}\"},\"finish_reason\":\"stop\"}]}";

/* classify_raw classifies a body copied into a buffer of exactly len
 * bytes, so that ASan catches any read past it; and once more with the
 * body parsed by the caller (as the worker passes it), which must not
 * change what classify learns. */
void
classify_raw(const struct policy_input *tmpl, const char *body, size_t len,
             const struct policy_config *cfg, struct policy_streak *streak,
             struct policy_class *out)
{
    struct policy_input in = *tmpl;
    struct policy_streak again = streak ? *streak : (struct policy_streak){0};
    struct policy_class c2;
    char *copy = xmalloc(len > 0 ? len : 1);
    cJSON *root;

    memcpy(copy, body, len);
    in.body = copy;
    in.body_len = len;
    if (in.now_ms == 0)
        in.now_ms = NOW;
    root = cJSON_ParseWithLength(copy, len);
    in.json = root;
    policy_classify(&in, cfg, streak ? &again : NULL, &c2);
    in.json = NULL;
    policy_classify(&in, cfg, streak, out);
    ck_assert_int_eq(c2.outcome, out->outcome);
    ck_assert_str_eq(c2.reason ? c2.reason : "-",
                     out->reason ? out->reason : "-");
    ck_assert_int_eq(c2.wait_ms, out->wait_ms);
    ck_assert_int_eq(c2.reset_at_ms, out->reset_at_ms);
    cJSON_Delete(root);
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

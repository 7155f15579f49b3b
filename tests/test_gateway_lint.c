/* test_gateway_lint.c: worker_gateway_warnings, what `stepq tiers --check`
 * warns of in a tier that goes through a gateway (worker/gateway_lint.c):
 * one row per tier, the warnings it must give (by the words each holds)
 * and the number of them. */
#include "tests/support/support.h"

#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/config.h"
#include "worker/worker.h"

#define PK_URL "\"http://127.0.0.1:8787/v1\""
#define FWD    "\"x-portkey-forward-headers\": "
#define PROV   "\"x-portkey-provider\": \"openai\""
#define KEYW   "Portkey drops Idempotency-Key"
#define RETRYW "asks the gateway to retry"

struct lrow {
    const char *name;
    const char *base_url; /* a JSON string */
    const char *headers;  /* the members of "headers" */
    int count;            /* warnings given */
    const char *want[2];  /* words each warning holds, in order */
};

static const struct lrow rows[] = {
    {"direct openai: none", "\"https://api.openai.com/v1\"", "", 0, {0}},
    {"an x- header of no gateway",
     "\"https://api.openai.com/v1\"",
     "\"x-title\": \"nightly\"",
     0,
     {0}},
    {"portkey by header, no forward", PK_URL, PROV, 1, {KEYW}},
    {"portkey by host alone", "\"https://api.portkey.ai/v1\"", "", 1, {KEYW}},
    {"portkey host in any case",
     "\"https://Portkey-GW.internal:8787/v1\"",
     "",
     1,
     {KEYW}},
    {"portkey in the path is not a host",
     "\"http://10.0.0.1/portkey/v1\"",
     "",
     0,
     {0}},
    {"forwarded", PK_URL, PROV ", " FWD "\"idempotency-key\"", 0, {0}},
    {"forwarded among others, any case",
     PK_URL,
     PROV ", " FWD "\"authorization , Idempotency-Key\"",
     0,
     {0}},
    {"forwarding another header only",
     PK_URL,
     PROV ", " FWD "\"idempotency-keys, x-trace\"",
     1,
     {KEYW}},
    {"forward list from env: is not judged",
     PK_URL,
     PROV ", " FWD "\"env:PK_FWD\"",
     0,
     {0}},
    {"inline config forwards",
     PK_URL,
     "\"x-portkey-config\": \"{\\\"provider\\\": \\\"openai\\\", "
     "\\\"forward_headers\\\": [\\\"idempotency-key\\\"]}\"",
     0,
     {0}},
    {"the header's list overrides the config's",
     PK_URL,
     FWD "\"x-trace\", \"x-portkey-config\": \"{\\\"forward_headers\\\": "
         "[\\\"idempotency-key\\\"]}\"",
     1,
     {KEYW}},
    {"inline config retries, no forward",
     PK_URL,
     "\"x-portkey-config\": \"{\\\"retry\\\": {\\\"attempts\\\": 3}}\"",
     2,
     {KEYW, "retry.attempts 3"}},
    {"retry in a target",
     PK_URL,
     FWD "\"idempotency-key\", \"x-portkey-config\": \"{\\\"targets\\\": "
         "[{\\\"provider\\\": \\\"openai\\\", \\\"retry\\\": "
         "{\\\"attempts\\\": 5}}]}\"",
     1,
     {"retry.attempts 5"}},
    {"retry attempts 0 is no retry",
     PK_URL,
     FWD "\"idempotency-key\", \"x-portkey-config\": \"{\\\"retry\\\": "
         "{\\\"attempts\\\": 0}}\"",
     0,
     {0}},
    {"a saved config id is not read",
     "\"https://api.portkey.ai/v1\"",
     FWD "\"idempotency-key\", \"x-portkey-config\": \"pc-nightly-0a1b2c\"",
     0,
     {0}},
    {"config from env: is not judged",
     PK_URL,
     "\"x-portkey-config\": \"env:PK_CONFIG\"",
     0,
     {0}},
    {"litellm by header: keys never reach",
     "\"http://127.0.0.1:4000/v1\"",
     "\"x-litellm-tags\": \"nightly\"",
     1,
     {"LiteLLM proxy forwards no"}},
    {"litellm retries",
     "\"http://litellm.internal:4000/v1\"",
     "\"x-litellm-num-retries\": \"2\"",
     2,
     {"LiteLLM", "x-litellm-num-retries asks"}},
    {"litellm no retries",
     "\"http://litellm.internal:4000/v1\"",
     "\"x-litellm-num-retries\": \"0\"",
     1,
     {"LiteLLM"}},
    {"cloudflare retries",
     "\"https://gateway.ai.cloudflare.com/v1/a/g/openai\"",
     "\"cf-aig-max-attempts\": \"3\"",
     1,
     {"cf-aig-max-attempts asks"}},
    {"cloudflare one attempt",
     "\"https://gateway.ai.cloudflare.com/v1/a/g/openai\"",
     "\"cf-aig-max-attempts\": \"1\"",
     0,
     {0}},
    {"cloudflare by host, nothing asked",
     "\"https://gateway.ai.cloudflare.com/v1/a/g/openai\"",
     "",
     0,
     {0}},
};

START_TEST(test_gateway_warnings)
{
    const struct lrow *r = &rows[_i];
    struct config *cfg = NULL;
    char text[2048], err[256];
    cJSON *w = cJSON_CreateArray();

    snprintf(text, sizeof(text),
             "{\"tiers\": [{\"name\": \"gw\", \"base_url\": %s, \"model\": "
             "\"m\", \"headers\": {%s}}]}",
             r->base_url, r->headers);
    ck_assert_msg(
        config_parse(text, strlen(text), NULL, &cfg, err, sizeof(err)) == 0,
        "%s: %s", r->name, err);
    worker_gateway_warnings(&cfg->tiers[0], w);
    ck_assert_msg(cJSON_GetArraySize(w) == r->count, "%s: %d warnings: %s",
                  r->name, cJSON_GetArraySize(w), cJSON_PrintUnformatted(w));
    for (int i = 0; i < r->count && i < 2 && r->want[i] != NULL; i++) {
        const char *s = cJSON_GetStringValue(cJSON_GetArrayItem(w, i));
        ck_assert_msg(strstr(s, r->want[i]) != NULL, "%s: %s", r->name, s);
        ck_assert_msg(strncmp(s, "tier gw: ", 9) == 0, "%s: %s", r->name, s);
    }
    cJSON_Delete(w);
    config_free(cfg);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("gateway_lint");
    TCase *tc = tcase_create("warnings");

    tcase_add_loop_test(tc, test_gateway_warnings, 0,
                        (int)(sizeof(rows) / sizeof(rows[0])));
    suite_add_tcase(s, tc);
    return s;
}

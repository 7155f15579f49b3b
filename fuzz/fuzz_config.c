/* fuzz_config.c: libFuzzer target for the config parser (config_parse),
 * followed by compiling its classify rules (policy_rules_new) when it
 * parsed, as the worker does at start-up. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct config *cfg = NULL;
    policy_rules *rules = NULL;
    char err[256];
    char *copy = malloc(size > 0 ? size : 1);

    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    err[0] = '\0';
    if (config_parse(copy, size, "/nonexistent", &cfg, err, sizeof(err)) == 0) {
        for (size_t i = 0; i < cfg->ntiers; i++) {
            if (cfg->tiers[i].name == NULL || cfg->tiers[i].base_url == NULL ||
                cfg->tiers[i].model == NULL)
                abort();
        }
        if (policy_rules_new(cfg->rules, cfg->nrules, &rules, err,
                             sizeof(err)) == 0)
            policy_rules_free(rules);
        config_free(cfg);
    } else if (err[0] == '\0') {
        abort(); /* a refusal must say why */
    }
    free(copy);
    return 0;
}

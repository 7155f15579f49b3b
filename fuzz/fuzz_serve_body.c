/* fuzz_serve_body.c: libFuzzer target for the bodies `stepq serve` reads
 * into an operator's decision (serve_read_decision): one item's and the
 * bulk form (the first byte's low bit picks), against a config with one
 * tier. Any input must be read or refused with a reason, never crash or
 * leak, and a decision read must pass park/'s check again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "queue/park.h"
#include "serve/internal.h"

static struct config *cfg;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char text[] = "{\"tiers\": [{\"name\": \"free\", "
                               "\"base_url\": \"http://127.0.0.1:9/v1\", "
                               "\"model\": \"m\"}]}";
    struct park_decision d = {0};
    struct q_park_filter f = {0};
    cJSON *doc = NULL;
    char err[256], check[256];
    bool bulk;
    char *body;

    if (cfg == NULL && config_parse(text, sizeof(text) - 1, "/nonexistent",
                                    &cfg, err, sizeof(err)) != 0)
        abort();
    if (size == 0)
        return 0;
    bulk = data[0] & 1;
    body = malloc(size);
    memcpy(body, data + 1, size - 1);
    body[size - 1] = '\0';
    if (serve_read_decision(cfg, body, size - 1, bulk, &doc, &d, &f, err,
                            sizeof(err)) == 0) {
        if (park_decision_check(&d, bulk, cfg, check, sizeof(check)) != 0)
            abort();
        cJSON_Delete(doc);
    } else if (doc != NULL || err[0] == '\0') {
        abort();
    }
    free(body);
    return 0;
}

/* config_batch.c: a tier's batch mode (docs/reference.md "Batches"):
 * "mode", the "batch" object and "realtime_price", each field checked
 * with its JSON path named. */
#include "common/internal.h"

#include <errno.h>
#include <string.h>

#include "common/json.h"

#define DAY_MS (INT64_C(86400) * 1000)

/* What one batch may hold: OpenAI's cap is 50,000 requests, Anthropic's
 * 100,000. */
static int64_t
max_items_of(enum config_batch_api api)
{
    return api == CONFIG_BATCH_OPENAI ? 50000 : 100000;
}

static int
parse_api(const cJSON *b, const char *path, struct config_batch *out, char *err,
          size_t len)
{
    const char *api = NULL;
    char p[256];
    int rc;

    if ((rc = json_get_string(b, "api", true, path, &api, err, len)) != 0)
        return rc;
    if (strcmp(api, "openai") == 0)
        out->api = CONFIG_BATCH_OPENAI;
    else if (strcmp(api, "anthropic") == 0)
        out->api = CONFIG_BATCH_ANTHROPIC;
    else
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "api"),
                         "must be \"openai\" or \"anthropic\" (got \"%s\")",
                         api);
    return 0;
}

/* The "batch" object of a tier in batch mode. */
static int
parse_object(const cJSON *b, const char *path, struct config_batch *out,
             char *err, size_t len)
{
    static const char *const keys[] = {
        "api",      "max_items",         "gather_s", "poll_s",
        "expect_s", "completion_window", NULL};
    const char *window = NULL;
    double gather = 60, poll = 60, expect = -1;
    char p[256];
    int rc;

    if (!cJSON_IsObject(b))
        return json_fail(err, len, path, "must be an object with \"api\"");
    if ((rc = json_check_object(b, path, keys, err, len)) != 0 ||
        (rc = parse_api(b, path, out, err, len)) != 0)
        return rc;
    out->max_items = 1000;
    if ((rc = json_get_int(b, "max_items", 1, max_items_of(out->api), path,
                           &out->max_items, err, len)) != 0 ||
        (rc = json_get_number(b, "gather_s", 0, 86400, path, &gather, err,
                              len)) != 0 ||
        (rc = json_get_number(b, "poll_s", 0.01, 86400, path, &poll, err,
                              len)) != 0 ||
        (rc = json_get_number(b, "expect_s", 0.01, 86400, path, &expect, err,
                              len)) != 0 ||
        (rc = json_get_string(b, "completion_window", false, path, &window, err,
                              len)) != 0)
        return rc;
    /* Both providers complete a batch within 24 hours, and OpenAI takes
     * no other window. */
    if (window != NULL && strcmp(window, "24h") != 0)
        return json_fail(
            err, len, json_path_key(p, sizeof(p), path, "completion_window"),
            "must be \"24h\" (the only window both providers offer)");
    out->window_ms = DAY_MS;
    out->gather_ms = (int64_t)(gather * 1000);
    out->poll_ms = (int64_t)(poll * 1000);
    out->expect_ms = expect > 0 ? (int64_t)(expect * 1000) : out->window_ms;
    return 0;
}

/* Twice the batch price: both providers bill a batch at half their
 * realtime price. */
static struct price
doubled(const struct price *p)
{
    return (struct price){.set = p->set,
                          .input = p->input * 2,
                          .output = p->output * 2,
                          .cache_read = p->cache_read * 2,
                          .cache_write = p->cache_write * 2,
                          .per_request = p->per_request * 2};
}

int
config__parse_batch(const cJSON *o, const char *path, struct config_tier *t,
                    char *err, size_t len)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "batch");
    const char *mode = NULL;
    char p[256];
    int rc;

    if ((rc = json_get_string(o, "mode", false, path, &mode, err, len)) != 0)
        return rc;
    json_path_key(p, sizeof(p), path, "mode");
    if (mode != NULL && strcmp(mode, "batch") != 0 &&
        strcmp(mode, "realtime") != 0)
        return json_fail(err, len, p,
                         "must be \"realtime\" or \"batch\" (got \"%s\")",
                         mode);
    t->batch_mode = mode != NULL && strcmp(mode, "batch") == 0;
    if (!t->batch_mode) {
        if (b != NULL)
            return json_fail(err, len,
                             json_path_key(p, sizeof(p), path, "batch"),
                             "only a tier with \"mode\": \"batch\" takes it");
        if (cJSON_GetObjectItemCaseSensitive(o, "realtime_price") != NULL)
            return json_fail(
                err, len, json_path_key(p, sizeof(p), path, "realtime_price"),
                "only a tier with \"mode\": \"batch\" takes it");
        return 0;
    }
    if (b == NULL)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "batch"),
                         "a tier in batch mode needs it, with \"api\": "
                         "\"openai\" or \"anthropic\"");
    json_path_key(p, sizeof(p), path, "batch");
    if ((rc = parse_object(b, p, &t->batch, err, len)) != 0)
        return rc;
    t->realtime_price = doubled(&t->price);
    if ((rc = config__parse_price(o, path, "realtime_price", &t->realtime_price,
                                  err, len)) != 0)
        return rc;
    if (t->realtime_price.set && !t->price.set)
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "realtime_price"),
                         "needs the tier's \"price\" (the batch price) too");
    return 0;
}

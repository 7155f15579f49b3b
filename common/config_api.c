/* config_api.c: a tier's protocol ("api") and the fields that go with it
 * ("max_tokens"; "stream" and its stall timeouts), kept in one block of the
 * tier (config.h) so that other tier fields merge around them.
 */
#include "common/internal.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "common/json.h"

static const char *const api_names[] = {
    [CONFIG_API_OPENAI] = "openai",
    [CONFIG_API_ANTHROPIC] = "anthropic",
    [CONFIG_API_GEMINI] = "gemini",
};

const char *
config_api_name(enum config_api a)
{
    if ((size_t)a >= STEPQ_ARRAY_LEN(api_names))
        return "openai";
    return api_names[a];
}

/* A Gemini model goes in the URL's path as is. */
static bool
url_safe(const cJSON *model)
{
    if (!cJSON_IsString(model) || model->valuestring[0] == '\0')
        return false;
    for (const char *s = model->valuestring; *s != '\0'; s++) {
        if (!isalnum((unsigned char)*s) && strchr("-._/", *s) == NULL)
            return false;
    }
    return true;
}

int
config__parse_api(const cJSON *o, const char *path, struct config_tier *t,
                  char *err, size_t len)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model");
    const char *api = NULL;
    char p[256];
    int rc;

    if ((rc = json_get_string(o, "api", false, path, &api, err, len)) != 0 ||
        (rc = json_get_int(o, "max_tokens", 1, 100000000, path, &t->max_tokens,
                           err, len)) != 0 ||
        (rc = json_get_bool(o, "stream", path, &t->stream, err, len)) != 0 ||
        (rc = json_get_number(o, "first_byte_timeout_s", 0.1, 86400, path,
                              &t->first_byte_timeout_s, err, len)) != 0 ||
        (rc = json_get_number(o, "idle_timeout_s", 0.1, 86400, path,
                              &t->idle_timeout_s, err, len)) != 0)
        return rc;
    t->api = CONFIG_API_OPENAI;
    if (api == NULL)
        return 0;
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(api_names); i++) {
        if (strcmp(api, api_names[i]) == 0)
            t->api = (enum config_api)i;
    }
    if (strcmp(api, config_api_name(t->api)) != 0)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "api"),
                         "must be openai, anthropic or gemini");
    if (t->api == CONFIG_API_GEMINI && !url_safe(model))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "model"),
                         "the gemini api puts the model in the URL: letters, "
                         "digits, '-', '.', '_' and '/' only");
    return 0;
}

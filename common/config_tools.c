/* config_tools.c: the config's "tools": tool definitions shared by every
 * job, which a chat step names in its own "tools" (docs/reference.md
 * "Tools").
 *
 * common/ knows what a tool is only as far as its name: an object with a
 * unique "name" of the form a step can name. The rest of a definition is
 * spec/'s to check (spec_tools_check_config, run when a command loads the
 * config; read again when a step that names it runs), so the definition is
 * kept here as a copy of the JSON it was given. */
#include "common/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

/* The longest tool name, as OpenAI and Anthropic accept them. */
#define NAME_MAX_BYTES 64

bool
config_is_tool_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > NAME_MAX_BYTES)
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_-") == n;
}

int
config__parse_tools(const cJSON *v, struct config_tools *out, char *err,
                    size_t len)
{
    const cJSON *it;
    char p[64], q[96];
    int i = 0;

    if (!cJSON_IsArray(v))
        return json_fail(err, len, "tools", "must be an array of tools");
    out->v = xcalloc((size_t)cJSON_GetArraySize(v) + 1, sizeof(*out->v));
    cJSON_ArrayForEach(it, v)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        json_path_index(p, sizeof(p), "tools", i++);
        json_path_key(q, sizeof(q), p, "name");
        if (!cJSON_IsObject(it))
            return json_fail(err, len, p, "must be an object");
        if (name == NULL)
            return json_fail(err, len, q, "missing");
        if (!cJSON_IsString(name) || !config_is_tool_name(name->valuestring))
            return json_fail(err, len, q,
                             "must be 1 to 64 letters, digits, '_' or '-'");
        if (config_find_tool(out, name->valuestring) != NULL)
            return json_fail(err, len, q, "duplicate tool name %s",
                             name->valuestring);
        out->v[out->n].name = xstrdup(name->valuestring);
        out->v[out->n].def = cJSON_Duplicate(it, true);
        if (out->v[out->n].def == NULL)
            abort(); /* out of memory: the OOM policy of xalloc.h */
        out->n++;
    }
    return 0;
}

const struct config_tool *
config_find_tool(const struct config_tools *tools, const char *name)
{
    for (size_t i = 0; tools != NULL && i < tools->n; i++) {
        if (strcmp(tools->v[i].name, name) == 0)
            return &tools->v[i];
    }
    return NULL;
}

void
config__tools_free(struct config_tools *tools)
{
    for (size_t i = 0; i < tools->n; i++) {
        free(tools->v[i].name);
        cJSON_Delete(tools->v[i].def);
    }
    free(tools->v);
    tools->v = NULL;
    tools->n = 0;
}

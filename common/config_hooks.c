/* config_hooks.c: the config's "hooks": named commands that a job names
 * in its own "on_done" or "on_fail" (docs/reference.md "Hooks"). A job
 * cannot carry a command of its own, since anyone who may enqueue (the
 * API) could then run one on the workers' hosts: it names one of these. */
#include "common/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

int
config__parse_hooks(const cJSON *v, struct config_hooks *out, char *err,
                    size_t len)
{
    const cJSON *it;
    char p[128];

    if (!cJSON_IsObject(v))
        return json_fail(err, len, "hooks",
                         "must be an object of named commands, such as "
                         "{\"notify\": \"/usr/local/bin/notify\"}");
    out->v = xcalloc((size_t)cJSON_GetArraySize(v) + 1, sizeof(*out->v));
    cJSON_ArrayForEach(it, v)
    {
        json_path_key(p, sizeof(p), "hooks", it->string);
        /* A hook's name has a tool name's form: no quoting needed in a
         * job file, a log line or a path. */
        if (!config_is_tool_name(it->string))
            return json_fail(err, len, p,
                             "a hook's name must be 1 to 64 letters, "
                             "digits, '_' or '-'");
        if (config_find_hook(out, it->string) != NULL)
            return json_fail(err, len, p, "duplicate hook name");
        if (!cJSON_IsString(it) || it->valuestring[0] == '\0')
            return json_fail(err, len, p, "must be a command (a string)");
        out->v[out->n].name = xstrdup(it->string);
        out->v[out->n++].cmd = xstrdup(it->valuestring);
    }
    return 0;
}

const struct config_hook *
config_find_hook(const struct config_hooks *hooks, const char *name)
{
    for (size_t i = 0; hooks != NULL && i < hooks->n; i++) {
        if (strcmp(hooks->v[i].name, name) == 0)
            return &hooks->v[i];
    }
    return NULL;
}

void
config__hooks_free(struct config_hooks *hooks)
{
    for (size_t i = 0; i < hooks->n; i++) {
        free(hooks->v[i].name);
        free(hooks->v[i].cmd);
    }
    free(hooks->v);
    memset(hooks, 0, sizeof(*hooks));
}

/* tools.c: a chat step's tools (docs/reference.md "Tools"): one tool
 * definition checked (name, description, parameters, action, flags,
 * approval), a step's "tools" array resolved against the config's shared
 * definitions, and the step's loop bounds. validate.c calls
 * spec__step_tools for every step; the worker resolves a stored step's
 * tools again with its own config (spec_toolset_build).
 *
 * The arguments a model sends reach an action only through "{{args.PATH}}"
 * templates, so each of them is checked here against the tool's declared
 * properties: a misspelt argument is refused at enqueue, not sent as
 * written in the night (tool_args.c fills them).
 */
#include "spec/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/httptext.h"
#include "common/json.h"
#include "common/xalloc.h"

static const char *const tool_keys[] = {
    "name",         "description",     "parameters",     "action", "replayable",
    "side_effects", "idempotency_key", "needs_approval", NULL};
static const char *const action_keys[] = {"http", "ask", NULL};
static const char *const http_keys[] = {"method", "url", "headers", "body",
                                        NULL};

/* check_args_in checks every "{{args.PATH}}" of s (at path): written
 * without spaces, a path of names and [indexes], its first name a
 * property of params. */
static int
check_args_in(const char *s, const char *path, const cJSON *params, char *err,
              size_t len)
{
    for (const char *p = strstr(s, "{{"); p != NULL; p = strstr(p + 2, "{{")) {
        const char *q = p + 2 + strspn(p + 2, " \t"), *end;
        size_t n;
        if (q != p + 2 && strncmp(q, "args.", 5) == 0)
            return json_fail(err, len, path,
                             "bad template near \"%.40s\": write "
                             "{{args.NAME}}, without spaces",
                             p);
        if (strncmp(p, "{{args.", 7) != 0)
            continue;
        end = strstr(p + 7, "}}");
        if (end == NULL || !spec__arg_path_ok(p + 7, (size_t)(end - p - 7)))
            return json_fail(err, len, path,
                             "bad template near \"%.40s\": write "
                             "{{args.NAME}}, {{args.NAME.KEY}} or "
                             "{{args.NAME[0]}}",
                             p);
        n = strcspn(p + 7, ".[}");
        if (!spec__arg_known(params, p + 7, n))
            return json_fail(err, len, path,
                             "template {{args.%.*s}} names no property of "
                             "the tool's parameters",
                             (int)n, p + 7);
    }
    return 0;
}

/* check_args walks every string under item (at path). */
static int
check_args(const cJSON *item, const char *path, const cJSON *params, char *err,
           size_t len)
{
    char p[PATH_LEN];
    int rc, i = 0;

    if (cJSON_IsString(item))
        return check_args_in(item->valuestring, path, params, err, len);
    for (const cJSON *c = item->child; c != NULL; c = c->next, i++) {
        if (cJSON_IsObject(item))
            json_path_key(p, sizeof(p), path, c->string);
        else
            json_path_index(p, sizeof(p), path, i);
        if ((rc = check_args(c, p, params, err, len)) != 0)
            return rc;
    }
    return 0;
}

/* check_url checks an action's url as an http step's, an argument
 * standing where a step's output may: "{{args." is read as "{{steps." so
 * that http_step.c's rules (the path and query only) apply to it. */
static int
check_url(const char *url, const char *path, char *err, size_t len)
{
    char *u = xmalloc(strlen(url) * 2 + 1), *o = u;
    int rc;

    for (const char *s = url; *s != '\0';) {
        if (strncmp(s, "{{args.", 7) == 0) {
            memcpy(o, "{{steps.", 8);
            o += 8;
            s += 7;
        } else {
            *o++ = *s++;
        }
    }
    *o = '\0';
    rc = spec__check_http_url(u, path, err, len);
    free(u);
    return rc;
}

static int
check_action_http(const cJSON *h, const char *path, const cJSON *params,
                  char *err, size_t len)
{
    static const char *const methods[] = {"GET",   "POST",   "PUT",
                                          "PATCH", "DELETE", NULL};
    const char *method = "POST", *url = NULL;
    const cJSON *headers = cJSON_GetObjectItemCaseSensitive(h, "headers");
    const char *const *m;
    char p[PATH_LEN];
    int rc;

    if ((rc = json_check_object(h, path, http_keys, err, len)) ||
        (rc = json_get_string(h, "method", false, path, &method, err, len)) ||
        (rc = json_get_string(h, "url", true, path, &url, err, len)))
        return rc;
    for (m = methods; *m != NULL && strcmp(*m, method) != 0; m++)
        ;
    if (*m == NULL)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "method"),
                         "must be GET, POST, PUT, PATCH or DELETE");
    if ((rc = check_url(url, path, err, len)) != 0 ||
        (headers != NULL &&
         (rc = spec__check_http_headers(headers, path, err, len)) != 0))
        return rc;
    return check_args(h, path, params, err, len);
}

static int
parse_action(const cJSON *a, const char *path, struct spec_tool *t, char *err,
             size_t len)
{
    char p[PATH_LEN];
    int rc;

    if ((rc = json_check_object(a, path, action_keys, err, len)) != 0)
        return rc;
    t->http = cJSON_GetObjectItemCaseSensitive(a, "http");
    if ((rc = json_get_string(a, "ask", false, path, &t->ask, err, len)) != 0)
        return rc;
    if ((t->http == NULL) == (t->ask == NULL))
        return json_fail(err, len, path, "needs one of \"http\" or \"ask\"");
    if (t->ask != NULL) {
        t->kind = SPEC_TOOL_ASK;
        if (t->ask[0] == '\0' || !json_plain_text(t->ask, true))
            return json_fail(err, len, json_path_key(p, sizeof(p), path, "ask"),
                             "must be a question: text without control "
                             "characters");
        return check_args_in(t->ask, json_path_key(p, sizeof(p), path, "ask"),
                             t->parameters, err, len);
    }
    t->kind = SPEC_TOOL_HTTP;
    return check_action_http(t->http, json_path_key(p, sizeof(p), path, "http"),
                             t->parameters, err, len);
}

static int
parse_flags(const cJSON *o, const char *path, struct spec_tool *t, char *err,
            size_t len)
{
    char p[PATH_LEN];
    int rc;

    t->replayable = t->kind == SPEC_TOOL_ASK;
    t->side_effects = t->kind == SPEC_TOOL_HTTP;
    if ((rc = json_get_bool(o, "replayable", path, &t->replayable, err, len)) ||
        (rc = json_get_bool(o, "side_effects", path, &t->side_effects, err,
                            len)) ||
        (rc = json_get_string(o, "idempotency_key", false, path,
                              &t->idempotency_key, err, len)))
        return rc;
    if (t->idempotency_key == NULL)
        return 0;
    json_path_key(p, sizeof(p), path, "idempotency_key");
    if (t->kind != SPEC_TOOL_HTTP)
        return json_fail(err, len, p, "only for an \"http\" action");
    if (t->idempotency_key[0] == '\0' ||
        !httptext_is_field_value(t->idempotency_key))
        return json_fail(err, len, p,
                         "must be printable text (it is sent as the "
                         "Idempotency-Key header)");
    return check_args_in(t->idempotency_key, p, t->parameters, err, len);
}

int
spec_tool_parse(const cJSON *o, const char *path, struct spec_tool *out,
                char *err, size_t len)
{
    struct spec_tool t = {0};
    const cJSON *params, *action, *type;
    char p[PATH_LEN];
    int rc;

    if ((rc = json_check_object(o, path, tool_keys, err, len)) != 0 ||
        (rc = json_get_string(o, "name", true, path, &t.name, err, len)) != 0 ||
        (rc = json_get_string(o, "description", false, path, &t.description,
                              err, len)) != 0)
        return rc;
    if (!config_is_tool_name(t.name))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "name"),
                         "must be 1 to 64 letters, digits, '_' or '-'");
    if (t.description == NULL)
        t.description = "";
    json_path_key(p, sizeof(p), path, "parameters");
    if ((params = cJSON_GetObjectItemCaseSensitive(o, "parameters")) == NULL)
        return json_fail(err, len, p, "missing");
    if ((rc = spec_schema_check(params, p, err, len)) != 0)
        return rc;
    type = cJSON_GetObjectItemCaseSensitive(params, "type");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "object") != 0)
        return json_fail(err, len, p,
                         "must have \"type\": \"object\" (the arguments are "
                         "an object)");
    t.parameters = params;
    json_path_key(p, sizeof(p), path, "action");
    if ((action = cJSON_GetObjectItemCaseSensitive(o, "action")) == NULL)
        return json_fail(err, len, p, "missing");
    if ((rc = parse_action(action, p, &t, err, len)) != 0 ||
        (rc = parse_flags(o, path, &t, err, len)) != 0 ||
        (rc = spec__parse_approval(o, path, &t, err, len)) != 0)
        return rc;
    *out = t;
    return 0;
}

/* How far a step's tools are taken: names checked as names (a stored
 * job, parsed again without the config), names found in the config (at
 * enqueue: the config's definitions were checked whole when it was
 * loaded, spec_tools_check_config, and are not again for every job), or
 * every definition read (spec_toolset_build, when the step runs). */
enum depth { NAMES, FOUND, READ };

/* resolve takes element c of a step's "tools" (at path): a shared
 * tool's name, looked up in shared as far as depth says, or an inline
 * definition. *t is filled, but for a shared tool's name only unless
 * depth is READ. */
static int
resolve(const cJSON *c, const char *path, const struct config_tools *shared,
        enum depth depth, struct spec_tool *t, char *err, size_t len)
{
    const struct config_tool *ct;
    char p[PATH_LEN];
    int rc;

    if (!cJSON_IsString(c))
        return spec_tool_parse(c, path, t, err, len);
    if (!config_is_tool_name(c->valuestring))
        return json_fail(err, len, path,
                         "must name a tool of the config (1 to 64 letters, "
                         "digits, '_' or '-') or be a tool object");
    memset(t, 0, sizeof(*t));
    t->name = c->valuestring;
    t->shared = true;
    if (depth == NAMES)
        return 0;
    if ((ct = config_find_tool(shared, c->valuestring)) == NULL)
        return json_fail(err, len, path, "no tool named %s in the config",
                         c->valuestring);
    if (depth == FOUND)
        return 0;
    if (snprintf(p, sizeof(p), "%s (config tool %s)", path, ct->name) < 0)
        p[0] = '\0'; /* only error texts read p: a cut one will do */
    if ((rc = spec_tool_parse(ct->def, p, t, err, len)) != 0)
        return rc;
    t->shared = true;
    return 0;
}

/* build is spec_toolset_build, as far as depth says. */
static int
build(const cJSON *tools, const char *path, const struct config_tools *shared,
      enum depth depth, struct spec_toolset *out, char *err, size_t len)
{
    struct spec_toolset ts = {0};
    const cJSON *c;
    char p[PATH_LEN];
    int n = cJSON_GetArraySize(tools), rc = 0;

    if (!cJSON_IsArray(tools) || n == 0)
        return json_fail(err, len, path,
                         "must be a non-empty array of tool names and tool "
                         "objects");
    if (n > SPEC_TOOLS_MAX)
        return json_fail(err, len, path, "more than %d tools", SPEC_TOOLS_MAX);
    ts.tools = xcalloc((size_t)n, sizeof(*ts.tools));
    cJSON_ArrayForEach(c, tools)
    {
        json_path_index(p, sizeof(p), path, (int)ts.n);
        if ((rc = resolve(c, p, shared, depth, &ts.tools[ts.n], err, len)))
            break;
        if (spec_toolset_find(&ts, ts.tools[ts.n].name) != NULL) {
            rc = json_fail(err, len, p, "tool %s offered twice",
                           ts.tools[ts.n].name);
            break;
        }
        ts.n++;
    }
    if (rc != 0) {
        spec_toolset_cleanup(&ts);
        return rc;
    }
    *out = ts;
    return 0;
}

int
spec_toolset_build(const cJSON *tools, const char *path,
                   const struct config_tools *shared, struct spec_toolset *out,
                   char *err, size_t len)
{
    return build(tools, path, shared, READ, out, err, len);
}

void
spec_toolset_cleanup(struct spec_toolset *ts)
{
    free(ts->tools);
    ts->tools = NULL;
    ts->n = 0;
}

const struct spec_tool *
spec_toolset_find(const struct spec_toolset *ts, const char *name)
{
    for (size_t i = 0; i < ts->n; i++) {
        if (strcmp(ts->tools[i].name, name) == 0)
            return &ts->tools[i];
    }
    return NULL;
}

int
spec_tools_check_config(const struct config *cfg, char *err, size_t len)
{
    struct spec_tool t;
    char p[64];
    int rc;

    for (size_t i = 0; i < cfg->tools.n; i++) {
        json_path_index(p, sizeof(p), "tools", (int)i);
        if ((rc = spec_tool_parse(cfg->tools.v[i].def, p, &t, err, len)) != 0)
            return rc;
    }
    return 0;
}

/* The loop bounds, in the order of SPEC_TOOL_STEP_KEYS after "tools". */
static const struct {
    const char *key;
    int64_t min, max, def;
} bounds[] = {{"max_turns", 1, 1000, 10},
              {"max_tool_calls_per_turn", 1, 128, 16},
              {"tool_parallelism", 1, 64, 4},
              {"max_tool_errors", 0, 1000, 5}};

static void
set_bound(struct spec_step *s, size_t i, int v)
{
    int *f[] = {&s->max_turns, &s->max_tool_calls_per_turn,
                &s->tool_parallelism, &s->max_tool_errors};
    *f[i] = v;
}

int
spec__step_tools(const cJSON *o, unsigned has, const char *path,
                 struct spec_step *s, const struct spec_opts *opts, char *err,
                 size_t len)
{
    const struct config_tools *shared = opts ? opts->tools : NULL;
    struct spec_toolset ts;
    cJSON *fe;
    char p[PATH_LEN];
    int rc;

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(bounds); i++) {
        int64_t v = bounds[i].def;
        if ((has & (2u << i)) != 0 &&
            (rc = json_get_int(o, bounds[i].key, bounds[i].min, bounds[i].max,
                               path, &v, err, len)) != 0)
            return rc;
        if ((has & (2u << i)) != 0 && (has & 1u) == 0)
            return json_fail(err, len,
                             json_path_key(p, sizeof(p), path, bounds[i].key),
                             "only for a step with \"tools\"");
        set_bound(s, i, (int)v);
    }
    if ((has & 1u) == 0)
        return 0;
    json_path_key(p, sizeof(p), path, "tools");
    if (s->kind != SPEC_STEP_CHAT)
        return json_fail(err, len, p, "only for steps of kind \"chat\"");
    if (cJSON_GetObjectItemCaseSensitive(s->request, "tools") != NULL)
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "request.tools"),
                         "a step with \"tools\" sends its tools itself");
    s->tools = cJSON_GetObjectItemCaseSensitive(o, "tools");
    /* A foreach step's tools may read its element in their urls. */
    fe = spec__foreach_tools(o, s->tools);
    rc = build(fe ? fe : s->tools, p, shared, shared != NULL ? FOUND : NAMES,
               &ts, err, len);
    cJSON_Delete(fe);
    if (rc != 0)
        return rc;
    spec_toolset_cleanup(&ts);
    return 0;
}

/* The http action of tool c of a step's "tools" (inline, or shared and
 * found in shared), or NULL; *name gets a shared tool's name. */
static const cJSON *
action_http(const cJSON *c, const struct config_tools *shared,
            const char **name)
{
    const struct config_tool *ct = NULL;

    *name = NULL;
    if (cJSON_IsString(c)) {
        if (shared == NULL ||
            (ct = config_find_tool(shared, c->valuestring)) == NULL)
            return NULL;
        *name = ct->name;
        c = ct->def;
    }
    return cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(c, "action"), "http");
}

int
spec__tool_templates(const struct spec_job *j, size_t self,
                     const struct spec_opts *opts, char *err, size_t len)
{
    const struct spec_step *s = &j->steps[self];
    struct spec_seg top = {NULL, "steps", 0}, step = {&top, NULL, (int)self};
    struct spec_seg tools = {&step, "tools", 0};
    const cJSON *c;
    const char *name;
    char why[1024];
    bool templated = false;
    int i = 0, rc;

    cJSON_ArrayForEach(c, s->tools)
    {
        struct spec_seg tool = {&tools, NULL, i++};
        struct spec_seg action = {&tool, "action", 0};
        struct spec_seg http = {&action, "http", 0};
        const cJSON *h = action_http(c, opts ? opts->tools : NULL, &name);
        if (h == NULL ||
            (rc = spec__check_sent(h, &http, j, self, opts, &templated, why,
                                   sizeof(why))) == 0)
            continue;
        if (name != NULL)
            snprintf(err, len, "%s (config tool %s)", why, name);
        else
            snprintf(err, len, "%s", why);
        return rc;
    }
    return 0;
}

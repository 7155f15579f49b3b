/* foreach.c: a step run once per element of an array (docs/reference.md
 * "Foreach"): its "foreach" field read and checked, the array read when
 * the step runs, and each element made a job of its own, the step with
 * every template filled from the element, which the worker enqueues and
 * reads back (worker/foreach.c).
 */
#include "spec/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

static const char *const reserved_names[] = {"steps", "input", "schedule",
                                             "env",   "args",  NULL};

/* An element name: a letter, then letters, digits or _, at most 64 bytes,
 * none of the namespaces templates already have. */
static bool
name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 64 ||
        !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    for (size_t i = 0; reserved_names[i] != NULL; i++) {
        if (strcmp(s, reserved_names[i]) == 0)
            return false;
    }
    return true;
}

/* The "foreach" of an element's step: {"element": K}, in a job stepq
 * made (its key is a foreach's). */
static int
parse_element(const cJSON *fe, const char *at, const char *key,
              struct spec_step *s, char *err, size_t len)
{
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(fe, "element");

    if (key == NULL || strncmp(key, SPEC_FOREACH_KEY_PREFIX,
                               strlen(SPEC_FOREACH_KEY_PREFIX)) != 0)
        return json_fail(err, len, at,
                         "\"element\" is for the jobs stepq makes of a "
                         "foreach step's elements");
    if (!cJSON_IsNumber(k) || k->valuedouble < 0 ||
        k->valuedouble >= SPEC_FOREACH_MAX || k->next != NULL || k->prev != k)
        return json_fail(err, len, at, "must be {\"element\": INDEX}");
    s->element = k->valueint;
    return 0;
}

int
spec__step_foreach(const cJSON *o, const char *path, const char *key,
                   struct spec_step *s, char *err, size_t len)
{
    static const char *const keys[] = {"in", "as", "parallelism", NULL};
    const cJSON *fe = cJSON_GetObjectItemCaseSensitive(o, "foreach"), *c;
    int64_t par = 4;
    char at[PATH_LEN];
    int rc;

    s->element = -1;
    if (fe == NULL)
        return 0;
    json_path_key(at, sizeof(at), path, "foreach");
    if (!cJSON_IsObject(fe))
        return json_fail(err, len, at,
                         "must be an object: {\"in\": \"{{input.PATH}}\", "
                         "\"as\": \"item\", \"parallelism\": 4}");
    if (cJSON_GetObjectItemCaseSensitive(fe, "element") != NULL)
        return parse_element(fe, at, key, s, err, len);
    for (c = fe->child; c != NULL; c = c->next) {
        size_t i = 0;
        while (keys[i] != NULL && strcmp(keys[i], c->string) != 0)
            i++;
        if (keys[i] == NULL)
            return json_fail(err, len, at, "%s: unknown field", c->string);
    }
    s->foreach_as = "item";
    if ((rc = json_get_string(fe, "in", true, at, &s->foreach_in, err, len)) ||
        (cJSON_GetObjectItemCaseSensitive(fe, "as") != NULL &&
         (rc =
              json_get_string(fe, "as", true, at, &s->foreach_as, err, len))) ||
        (cJSON_GetObjectItemCaseSensitive(fe, "parallelism") != NULL &&
         (rc = json_get_int(fe, "parallelism", 1, SPEC_FOREACH_PARALLEL_MAX, at,
                            &par, err, len))))
        return rc;
    if (!name_ok(s->foreach_as))
        return json_fail(err, len, at,
                         "as: \"%s\" is not an element name: a letter, then "
                         "letters, digits or _ (at most 64), not steps, "
                         "input, schedule, env or args",
                         s->foreach_as);
    s->foreach_parallelism = (int)par;
    return 0;
}

/* A copy of url with the templates of step object step's element written
 * as {{input...}} ones, for the checks of an http url, which step over
 * templates of known names only; NULL when the step has no foreach or url
 * none of them. Caller frees. */
static char *
foreach_url(const cJSON *step, const char *url)
{
    const cJSON *fe = cJSON_GetObjectItemCaseSensitive(step, "foreach");
    const cJSON *as = cJSON_GetObjectItemCaseSensitive(fe, "as");
    const char *name = cJSON_IsString(as) ? as->valuestring : "item";
    size_t n = strlen(name);
    struct xbuf b = {0};
    bool any = false;

    if (!cJSON_IsObject(fe) || n == 0)
        return NULL;
    for (const char *s = url; *s != '\0';) {
        if (strncmp(s, "{{", 2) == 0 && strncmp(s + 2, name, n) == 0 &&
            (s[2 + n] == '.' || s[2 + n] == '}')) {
            xbuf_put(&b, "{{input", 7);
            s += 2 + n;
            any = true;
        } else {
            xbuf_put(&b, s++, 1);
        }
    }
    xbuf_put(&b, "", 1);
    if (!any) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

int
spec__check_step_url(const cJSON *step, const char *url, const char *path,
                     char *err, size_t len)
{
    char *u = foreach_url(step, url);
    int rc = spec__check_http_url(u ? u : url, path, err, len);

    free(u);
    return rc;
}

cJSON *
spec__foreach_tools(const cJSON *step, const cJSON *tools)
{
    cJSON *copy, *t;

    if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(step, "foreach")))
        return NULL;
    if ((copy = cJSON_Duplicate(tools, true)) == NULL)
        abort(); /* out of memory: the xalloc policy */
    cJSON_ArrayForEach(t, copy)
    {
        cJSON *action = cJSON_GetObjectItemCaseSensitive(t, "action");
        cJSON *http = cJSON_GetObjectItemCaseSensitive(action, "http");
        cJSON *url = cJSON_GetObjectItemCaseSensitive(http, "url");
        char *u =
            cJSON_IsString(url) ? foreach_url(step, url->valuestring) : NULL;
        if (u != NULL)
            cJSON_ReplaceItemInObjectCaseSensitive(http, "url",
                                                   cJSON_CreateString(u));
        free(u);
    }
    return copy;
}

/* Reads the one template whole of step i's "in" into *t. */
static int
source(const struct spec_job *j, size_t i, const struct spec_opts *opts,
       const char *at, struct spec_tpl *t, char *err, size_t len)
{
    const char *in = j->steps[i].foreach_in, *pos = in;
    int rc = spec__tpl_next(&pos, j, i, opts, at, t, err, len);

    if (rc < 0)
        return rc;
    if (rc == 0 || t->at != in || *pos != '\0')
        return json_fail(err, len, at,
                         "must be one template whole: \"{{input.PATH}}\" or "
                         "\"{{steps.NAME.output.PATH}}\"");
    if (t->item)
        return json_fail(err, len, at,
                         "%s: the array cannot be read from its own element",
                         in);
    return 0;
}

/* Checks that v, read by the template at in, is an array of at most
 * SPEC_FOREACH_MAX elements. */
static int
check_array(const cJSON *v, const char *in, const char *at, char *err,
            size_t len)
{
    static const char *const kinds[] = {"a boolean", "a boolean", "null",
                                        "a number",  "a string",  "an array",
                                        "an object"};
    int type = v->type & 0xff, k = 0;

    if (!cJSON_IsArray(v)) {
        while (k < 6 && type != (1 << k))
            k++;
        return json_fail(err, len, at, "%s is %s, not an array", in, kinds[k]);
    }
    if (cJSON_GetArraySize(v) > SPEC_FOREACH_MAX)
        return json_fail(err, len, at,
                         "%s holds %d elements, more than the %d a foreach "
                         "step may run over",
                         in, cJSON_GetArraySize(v), SPEC_FOREACH_MAX);
    return 0;
}

int
spec__check_foreach(const struct spec_job *j, size_t i,
                    const struct spec_opts *opts, char *err, size_t len)
{
    struct spec_vars v = {.input = j->input};
    char p[PATH_LEN], at[PATH_LEN], why[512];
    struct spec_tpl t;
    cJSON *val = NULL;
    int rc;

    snprintf(p, sizeof(p), "steps[%zu].foreach", i);
    json_path_key(at, sizeof(at), p, "in");
    if ((rc = source(j, i, opts, at, &t, err, len)) != 0)
        return rc;
    if (!t.input) {
        /* An output read whole is text, unless its step is a foreach's
         * (then it is an array); a path into it is known when it runs. */
        if (t.path == NULL && j->steps[t.step].foreach_in == NULL)
            return json_fail(err, len, at,
                             "%s is text, not an array: read a path into "
                             "the output, such as {{steps.%s.output.items}}",
                             j->steps[i].foreach_in, j->steps[t.step].name);
        return 0;
    }
    if (opts != NULL && opts->stored)
        return 0;
    if (spec__tpl_value(&t, j, &v, &val, why, sizeof(why)) != 0)
        return json_fail(err, len, at, "%s", why);
    rc = check_array(val, j->steps[i].foreach_in, at, err, len);
    cJSON_Delete(val);
    return rc;
}

int
spec_foreach_items(const struct spec_job *j, size_t i,
                   const struct spec_vars *v, cJSON **out, char *err,
                   size_t len)
{
    const char *in = j->steps[i].foreach_in;
    char why[512];
    struct spec_tpl t;
    cJSON *val = NULL;
    int rc;

    if ((rc = source(j, i, NULL, "foreach", &t, err, len)) != 0)
        return rc;
    if (spec__tpl_value(&t, j, v, &val, why, sizeof(why)) != 0)
        return json_fail(err, len, "foreach", "%s", why);
    if ((rc = check_array(val, in, "foreach", err, len)) != 0) {
        cJSON_Delete(val);
        return rc;
    }
    *out = val;
    return 0;
}

/* Whether a string under c holds a template of step i's element. */
static bool
reads_item(const cJSON *c, const struct spec_job *j, size_t i)
{
    if (cJSON_IsString(c)) {
        const char *pos = c->valuestring;
        struct spec_tpl t;
        char err[8];
        while (spec__tpl_next(&pos, j, i, NULL, "", &t, err, sizeof(err)) ==
               1) {
            if (t.item)
                return true;
        }
        return false;
    }
    for (c = c->child; c != NULL; c = c->next) {
        if (reads_item(c, j, i))
            return true;
    }
    return false;
}

bool
spec_foreach_when_per_element(const struct spec_job *j, size_t i)
{
    const struct spec_step *s = &j->steps[i];

    return s->foreach_in != NULL && s->when != NULL &&
           reads_item(s->when, j, i);
}

/* Fills the templates of a tool object of an element's step: its http
 * action as an http step's (its {{args.*}} stay for the call), its ask
 * and its idempotency key as text. */
static int
fill_tool(cJSON *tool, const struct spec_job *j, size_t i,
          const struct spec_vars *v, char *err, size_t len)
{
    cJSON *action = cJSON_GetObjectItemCaseSensitive(tool, "action");
    cJSON *http = cJSON_GetObjectItemCaseSensitive(action, "http");
    cJSON *ask = cJSON_GetObjectItemCaseSensitive(action, "ask");
    cJSON *key = cJSON_GetObjectItemCaseSensitive(tool, "idempotency_key");
    int rc = 0;

    if (!cJSON_IsObject(tool))
        return 0; /* the name of a shared tool */
    if (cJSON_IsObject(http))
        rc = spec_http_fill(j, i, v, http, err, len);
    if (rc == 0 && cJSON_IsString(ask))
        rc = spec__fill(ask, false, j, i, v, err, len);
    if (rc == 0 && cJSON_IsString(key))
        rc = spec__fill(key, false, j, i, v, err, len);
    return rc;
}

/* The step of element e: step i's object with its templates filled from
 * v, its "when" out, and "foreach" {"element": K}. */
static int
element_step(const struct spec_job *j, size_t i, const struct spec_vars *v,
             int k, cJSON **out, char *err, size_t len)
{
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(j->root, "steps");
    cJSON *s = cJSON_Duplicate(cJSON_GetArrayItem(steps, (int)i), true);
    cJSON *req, *http, *key, *tools, *tool, *fe;
    int rc = 0;

    if (s == NULL)
        abort(); /* out of memory: the xalloc policy */
    cJSON_DeleteItemFromObjectCaseSensitive(s, "when");
    cJSON_DeleteItemFromObjectCaseSensitive(s, "foreach");
    fe = cJSON_AddObjectToObject(s, "foreach");
    cJSON_AddNumberToObject(fe, "element", k);
    req = cJSON_GetObjectItemCaseSensitive(s, "request");
    http = cJSON_GetObjectItemCaseSensitive(s, "http");
    key = cJSON_GetObjectItemCaseSensitive(s, "idempotency_key");
    tools = cJSON_GetObjectItemCaseSensitive(s, "tools");
    if (req != NULL)
        rc = spec__fill(req, true, j, i, v, err, len);
    if (rc == 0 && http != NULL)
        rc = spec_http_fill(j, i, v, http, err, len);
    if (rc == 0 && cJSON_IsString(key))
        rc = spec__fill(key, false, j, i, v, err, len);
    cJSON_ArrayForEach(tool, tools)
    {
        if (rc == 0)
            rc = fill_tool(tool, j, i, v, err, len);
    }
    if (rc != 0) {
        cJSON_Delete(s);
        return rc;
    }
    *out = s;
    return 0;
}

int
spec_foreach_element(const struct spec_job *j, size_t i,
                     const struct spec_vars *v, const struct spec_element *e,
                     char **text, char **key, char *err, size_t len)
{
    const cJSON *cost =
        cJSON_GetObjectItemCaseSensitive(j->root, "max_cost_usd");
    int64_t left = (e->deadline_at - e->now + 999) / 1000;
    cJSON *job, *step = NULL;
    char buf[128], *name;
    int rc;

    if ((rc = element_step(j, i, v, e->k, &step, err, len)) != 0)
        return rc;
    snprintf(buf, sizeof(buf), SPEC_FOREACH_KEY_PREFIX "%lld:%zu:%d",
             (long long)e->job_id, i, e->k);
    name = xmalloc(strlen(j->name) + strlen(j->steps[i].name) + 32);
    sprintf(name, "%s.%s[%d]", j->name, j->steps[i].name, e->k);
    job = cJSON_CreateObject();
    cJSON_AddStringToObject(job, "name", name);
    cJSON_AddStringToObject(job, "key", buf);
    cJSON_AddNumberToObject(job, "priority", (double)j->priority);
    cJSON_AddNumberToObject(job, "deadline_s", (double)(left > 1 ? left : 1));
    if (cJSON_IsNumber(cost))
        cJSON_AddNumberToObject(job, "max_cost_usd", cost->valuedouble);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(job, "steps"), step);
    *text = json_print(job);
    *key = xstrdup(buf);
    cJSON_Delete(job);
    free(name);
    return 0;
}

cJSON *
spec_foreach_value(const char *text)
{
    cJSON *v;

    if (text == NULL)
        return cJSON_CreateNull();
    if ((v = spec_output_json(text, strlen(text))) != NULL)
        return v;
    return cJSON_CreateString(text);
}

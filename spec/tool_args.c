/* tool_args.c: what a tool does with a call's arguments: the paths that
 * read into them ("labels", "repo.owner", "items[0]"), the condition of
 * "needs_approval", and an http action filled from them.
 *
 * needs_approval is "never", "always", or a condition on the arguments,
 * one of (docs/reference.md "Tools"):
 *   {"arg": PATH, "equals": V}      {"arg": PATH, "not_equals": V}
 *   {"arg": PATH, "in": [V, ...]}   {"arg": PATH, "exists": true|false}
 *   {"arg": PATH, "gt"|"gte"|"lt"|"lte": NUMBER}
 *   {"any": [COND, ...]}            {"all": [COND, ...]}
 * An argument that is absent compares unequal to everything and is in no
 * list and in no range: "not_equals" holds for it, the others do not.
 */
#include "spec/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/httptext.h"
#include "common/json.h"
#include "common/xalloc.h"

#define COND_MAX_DEPTH 8

static bool
name_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '-';
}

bool
spec__arg_path_ok(const char *p, size_t n)
{
    size_t i = 0, start;

    while (i < n) {
        if (i > 0 && p[i] == '[') {
            start = ++i;
            while (i < n && p[i] >= '0' && p[i] <= '9')
                i++;
            if (i == start || i - start > 9 || i >= n || p[i++] != ']')
                return false;
            continue;
        }
        if (i > 0 && p[i++] != '.')
            return false;
        start = i;
        while (i < n && name_byte(p[i]))
            i++;
        if (i == start)
            return false;
    }
    return n > 0;
}

bool
spec__arg_known(const cJSON *params, const char *name, size_t n)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    const cJSON *extra =
        cJSON_GetObjectItemCaseSensitive(params, "additionalProperties");

    if (cJSON_IsTrue(extra) || cJSON_IsObject(extra))
        return true;
    for (const cJSON *c = props ? props->child : NULL; c != NULL; c = c->next) {
        if (strlen(c->string) == n && strncmp(c->string, name, n) == 0)
            return true;
    }
    return false;
}

/* arg_at returns the value at path (n bytes, spec__arg_path_ok) in args,
 * or NULL. Borrowed. */
static const cJSON *
arg_at(const cJSON *args, const char *p, size_t n)
{
    const cJSON *v = args;
    size_t i = 0;

    while (i < n && v != NULL) {
        if (p[i] == '[') {
            v = cJSON_IsArray(v) ? cJSON_GetArrayItem(v, atoi(p + i + 1))
                                 : NULL;
            i += strcspn(p + i, "]") + 1;
            continue;
        }
        if (p[i] == '.')
            i++;
        size_t k = strcspn(p + i, ".[");
        if (k > n - i)
            k = n - i;
        const cJSON *c = NULL;
        for (c = cJSON_IsObject(v) ? v->child : NULL; c != NULL; c = c->next) {
            if (strlen(c->string) == k && strncmp(c->string, p + i, k) == 0)
                break;
        }
        v = c;
        i += k;
    }
    return v;
}

/* ---- needs_approval ------------------------------------------------------ */

static const char *const ops[] = {"equals", "not_equals", "in",     "gt", "gte",
                                  "lt",     "lte",        "exists", NULL};
enum { OP_EQ, OP_NE, OP_IN, OP_GT, OP_GE, OP_LT, OP_LE, OP_EXISTS };

/* cond_op returns the index in ops of o's operator member, or -1. */
static int
cond_op(const cJSON *o, const cJSON **val)
{
    for (const cJSON *c = o->child; c != NULL; c = c->next) {
        for (int i = 0; ops[i] != NULL; i++) {
            if (strcmp(ops[i], c->string) == 0) {
                *val = c;
                return i;
            }
        }
    }
    return -1;
}

static int
check_cond(const cJSON *o, const char *path, const cJSON *params, int depth,
           char *err, size_t len)
{
    const cJSON *arg = cJSON_GetObjectItemCaseSensitive(o, "arg");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "any"), *v = NULL;
    char p[PATH_LEN], q[PATH_LEN];
    int op, i = 0, rc;

    if (!cJSON_IsObject(o) || depth >= COND_MAX_DEPTH)
        return json_fail(err, len, path,
                         depth >= COND_MAX_DEPTH
                             ? "conditions nested too deep"
                             : "must be \"never\", \"always\" or a "
                               "condition object");
    if (list == NULL)
        list = cJSON_GetObjectItemCaseSensitive(o, "all");
    if (list != NULL) {
        if (cJSON_GetArraySize(o) != 1 || !cJSON_IsArray(list) ||
            list->child == NULL)
            return json_fail(err, len, path,
                             "\"any\" and \"all\" take a non-empty array of "
                             "conditions and nothing else");
        for (const cJSON *c = list->child; c != NULL; c = c->next, i++) {
            json_path_index(q, sizeof(q),
                            json_path_key(p, sizeof(p), path, list->string), i);
            if ((rc = check_cond(c, q, params, depth + 1, err, len)) != 0)
                return rc;
        }
        return 0;
    }
    op = cond_op(o, &v);
    if (!cJSON_IsString(arg) || op < 0 || cJSON_GetArraySize(o) != 2)
        return json_fail(err, len, path,
                         "a condition is {\"arg\": PATH, OP: VALUE} with one "
                         "OP of equals, not_equals, in, gt, gte, lt, lte, "
                         "exists; or {\"any\"|\"all\": [...]}");
    json_path_key(p, sizeof(p), path, "arg");
    if (!spec__arg_path_ok(arg->valuestring, strlen(arg->valuestring)))
        return json_fail(err, len, p,
                         "must be an argument path such as "
                         "labels, repo.owner or items[0]");
    if (!spec__arg_known(params, arg->valuestring,
                         strcspn(arg->valuestring, ".[")))
        return json_fail(err, len, p,
                         "%s names no property of the tool's parameters",
                         arg->valuestring);
    json_path_key(p, sizeof(p), path, v->string);
    if (op == OP_IN && !cJSON_IsArray(v))
        return json_fail(err, len, p, "must be an array");
    if (op >= OP_GT && op <= OP_LE && !cJSON_IsNumber(v))
        return json_fail(err, len, p, "must be a number");
    if (op == OP_EXISTS && !cJSON_IsBool(v))
        return json_fail(err, len, p, "must be true or false");
    return 0;
}

int
spec__parse_approval(const cJSON *o, const char *path, struct spec_tool *t,
                     char *err, size_t len)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "needs_approval");
    char p[PATH_LEN];

    t->approval = SPEC_APPROVAL_NEVER;
    if (a == NULL)
        return 0;
    json_path_key(p, sizeof(p), path, "needs_approval");
    if (cJSON_IsString(a) && strcmp(a->valuestring, "never") == 0)
        return 0;
    if (cJSON_IsString(a) && strcmp(a->valuestring, "always") == 0) {
        t->approval = SPEC_APPROVAL_ALWAYS;
        return 0;
    }
    t->approval = SPEC_APPROVAL_IF;
    t->approval_if = a;
    return check_cond(a, p, t->parameters, 0, err, len);
}

static bool
eval(const cJSON *o, const cJSON *args)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "any");
    const cJSON *arg, *got, *v = NULL;
    bool any = list != NULL;
    int op;

    if (list == NULL)
        list = cJSON_GetObjectItemCaseSensitive(o, "all");
    if (list != NULL) {
        for (const cJSON *c = list->child; c != NULL; c = c->next) {
            if (eval(c, args) == any)
                return any;
        }
        return !any;
    }
    arg = cJSON_GetObjectItemCaseSensitive(o, "arg");
    op = cond_op(o, &v);
    got = arg_at(args, arg->valuestring, strlen(arg->valuestring));
    switch (op) {
    case OP_EXISTS:
        return (got != NULL) == cJSON_IsTrue(v);
    case OP_EQ:
        return got != NULL && cJSON_Compare(got, v, true);
    case OP_NE:
        return got == NULL || !cJSON_Compare(got, v, true);
    case OP_IN:
        for (const cJSON *c = v->child; got != NULL && c != NULL; c = c->next) {
            if (cJSON_Compare(got, c, true))
                return true;
        }
        return false;
    default:
        if (!cJSON_IsNumber(got))
            return false;
        return op == OP_GT   ? got->valuedouble > v->valuedouble
               : op == OP_GE ? got->valuedouble >= v->valuedouble
               : op == OP_LT ? got->valuedouble < v->valuedouble
                             : got->valuedouble <= v->valuedouble;
    }
}

bool
spec_tool_needs_approval(const struct spec_tool *t, const cJSON *args)
{
    if (t->approval == SPEC_APPROVAL_IF)
        return eval(t->approval_if, args);
    return t->approval == SPEC_APPROVAL_ALWAYS;
}

/* ---- an http action filled from the arguments ---------------------------- */

enum fill_mode { FILL_TEXT, FILL_URL, FILL_HEADER, FILL_BODY };

/* fill fills the templates of string s (at path) into a new string, or,
 * in FILL_BODY mode when s is one whole template, into the value itself
 * with its JSON type. Returns 0 with *out (caller cJSON_Deletes it) or
 * -EINVAL. */
static int
fill(const char *s, enum fill_mode mode, const cJSON *args, const char *path,
     cJSON **out, char *err, size_t len)
{
    struct xbuf b = {0};
    const char *p = s, *t;

    while ((t = strstr(p, "{{args.")) != NULL) {
        const char *end = strstr(t + 7, "}}");
        const cJSON *v = NULL;
        char *txt;
        if (end != NULL && spec__arg_path_ok(t + 7, (size_t)(end - t - 7)))
            v = arg_at(args, t + 7, (size_t)(end - t - 7));
        if (v == NULL) {
            free(b.p);
            return json_fail(err, len, path,
                             "%.*s: the call's arguments have no such value",
                             end ? (int)(end + 2 - t) : 40, t);
        }
        if (mode == FILL_BODY && t == s && end[2] == '\0') {
            *out = cJSON_Duplicate(v, true);
            return 0;
        }
        xbuf_put(&b, p, (size_t)(t - p));
        txt = cJSON_IsString(v) ? xstrdup(v->valuestring) : json_print(v);
        if (mode == FILL_URL)
            httptext_query_escape(&b, txt);
        else
            xbuf_put(&b, txt, strlen(txt));
        free(txt);
        p = end + 2;
    }
    xbuf_put(&b, p, strlen(p));
    if (mode == FILL_HEADER && b.p != NULL && !httptext_is_field_value(b.p)) {
        free(b.p);
        return json_fail(err, len, path,
                         "the filled value holds a line break or another "
                         "control character");
    }
    *out = cJSON_CreateString(b.p != NULL ? b.p : "");
    free(b.p);
    return 0;
}

/* fill_value fills the strings of item (a member of parent, at path):
 * the item itself when it is a string, else every string under it, in
 * place. A filled value is not read again: an argument that holds
 * "{{args.x}}" is sent as written. */
static int
fill_value(cJSON *parent, cJSON *item, enum fill_mode mode, const cJSON *args,
           const char *path, char *err, size_t len)
{
    char p[PATH_LEN];
    cJSON *v = NULL;
    int rc, i = 0;

    if (cJSON_IsString(item)) {
        if (strstr(item->valuestring, "{{args.") == NULL)
            return 0;
        if ((rc = fill(item->valuestring, mode, args, path, &v, err, len)))
            return rc;
        /* By name in an object: ReplaceItemViaPointer would drop the
         * member's name (a job refuses duplicate members, so the name
         * finds this one). */
        if (cJSON_IsObject(parent))
            cJSON_ReplaceItemInObjectCaseSensitive(parent, item->string, v);
        else
            cJSON_ReplaceItemViaPointer(parent, item, v);
        return 0;
    }
    for (cJSON *c = item->child, *next; c != NULL; c = next, i++) {
        next = c->next;
        if (cJSON_IsObject(item))
            json_path_key(p, sizeof(p), path, c->string);
        else
            json_path_index(p, sizeof(p), path, i);
        if ((rc = fill_value(item, c, mode, args, p, err, len)) != 0)
            return rc;
    }
    return 0;
}

int
spec_tool_request(const struct spec_tool *t, const cJSON *args, cJSON **http,
                  char **key, char *err, size_t len)
{
    static const struct {
        const char *name;
        enum fill_mode mode;
    } parts[] = {
        {"url", FILL_URL}, {"headers", FILL_HEADER}, {"body", FILL_BODY}};
    cJSON *h = NULL, *k = NULL;
    int rc;

    if (t->kind != SPEC_TOOL_HTTP)
        return json_fail(err, len, t->name, "has no http action");
    h = cJSON_Duplicate(t->http, true);
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(parts); i++) {
        cJSON *m = cJSON_GetObjectItemCaseSensitive(h, parts[i].name);
        if (m != NULL && (rc = fill_value(h, m, parts[i].mode, args,
                                          parts[i].name, err, len)) != 0) {
            cJSON_Delete(h);
            return rc;
        }
    }
    if (t->idempotency_key != NULL &&
        (rc = fill(t->idempotency_key, FILL_HEADER, args, "idempotency_key", &k,
                   err, len)) != 0) {
        cJSON_Delete(h);
        return rc;
    }
    *key = t->idempotency_key == NULL
               ? NULL
               : xstrdup(k != NULL ? k->valuestring : t->idempotency_key);
    cJSON_Delete(k);
    *http = h;
    return 0;
}

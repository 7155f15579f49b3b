/* when.c: a step's condition, "when" (docs/reference.md "Conditions"):
 * one JSON object of one operator, no language to parse.
 *
 *   {"eq": [A, B]}  "ne", "lt", "le", "gt", "ge" likewise
 *   {"in": [A, LIST]}         LIST: an array, or one template of one
 *   {"exists": "{{...}}"}     the template reads a value that is there
 *   {"all": [C, ...]}  {"any": [C, ...]}  {"not": C}
 *
 * A value is any JSON value; a string that is one template whole
 * ("{{steps.triage.output.kind}}", "{{input.labels}}") is the value it
 * reads, with its JSON type. A template that reads nothing (a missing
 * path, an output that is not JSON, a step skipped) is absent: "exists"
 * is false, and every comparison with it is false ("ne" too; "not"
 * turns that around).
 */
#include "spec/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"

/* Conditions nest at most this deep. */
#define WHEN_DEPTH 16

enum op {
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_LE,
    OP_GT,
    OP_GE,
    OP_IN,
    OP_EXISTS,
    OP_ALL,
    OP_ANY,
    OP_NOT,
    OP_NONE
};
static const char *const op_names[] = {"eq",  "ne",  "lt",  "le",
                                       "gt",  "ge",  "in",  "exists",
                                       "all", "any", "not", NULL};

static enum op
op_of(const cJSON *c)
{
    enum op o = OP_NONE;

    if (!cJSON_IsObject(c) || c->child == NULL || c->child->next != NULL)
        return OP_NONE;
    for (int i = 0; op_names[i] != NULL; i++) {
        if (strcmp(op_names[i], c->child->string) == 0)
            o = (enum op)i;
    }
    return o;
}

/* ---- checking, at enqueue ------------------------------------------ */

/* A value: a string holding a template must be one template whole. */
static int
check_value(const cJSON *v, const char *at, const struct spec_job *j,
            size_t self, const struct spec_opts *opts, bool want_tpl, char *err,
            size_t len)
{
    const char *pos;
    struct spec_tpl t;
    int rc;

    if (!cJSON_IsString(v)) {
        if (want_tpl)
            return json_fail(err, len, at,
                             "must be one template, such as "
                             "\"{{steps.NAME.output.PATH}}\"");
        return 0;
    }
    pos = v->valuestring;
    if ((rc = spec__tpl_next(&pos, j, self, opts, at, &t, err, len)) < 0)
        return rc;
    if (rc == 1 && !spec__tpl_whole(v->valuestring, j, self, opts, &t))
        return json_fail(err, len, at,
                         "a template in a condition must be the whole "
                         "string (\"%.40s\")",
                         v->valuestring);
    if (rc == 0 && want_tpl)
        return json_fail(err, len, at,
                         "must be one template, such as "
                         "\"{{steps.NAME.output.PATH}}\"");
    return 0;
}

static int check(const cJSON *c, const char *at, int depth,
                 const struct spec_job *j, size_t self,
                 const struct spec_opts *opts, char *err, size_t len);

/* The operands of a comparison or of "in": an array of two values. */
static int
check_pair(const cJSON *a, enum op o, const char *at, const struct spec_job *j,
           size_t self, const struct spec_opts *opts, char *err, size_t len)
{
    char p[PATH_LEN];
    int rc;

    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 2)
        return json_fail(err, len, at, "must be an array of two values");
    if ((rc = check_value(a->child, json_path_index(p, sizeof(p), at, 0), j,
                          self, opts, false, err, len)) != 0)
        return rc;
    json_path_index(p, sizeof(p), at, 1);
    if (o == OP_IN && !cJSON_IsArray(a->child->next))
        return check_value(a->child->next, p, j, self, opts, true, err, len);
    return check_value(a->child->next, p, j, self, opts, false, err, len);
}

static int
check(const cJSON *c, const char *at, int depth, const struct spec_job *j,
      size_t self, const struct spec_opts *opts, char *err, size_t len)
{
    enum op o = op_of(c);
    const cJSON *arg;
    char p[PATH_LEN], q[PATH_LEN];
    int rc, i = 0;

    if (o == OP_NONE)
        return json_fail(err, len, at,
                         "must be an object of one operator: eq, ne, lt, le, "
                         "gt, ge, in, exists, all, any or not");
    if (depth >= WHEN_DEPTH)
        return json_fail(err, len, at, "conditions nest more than %d deep",
                         WHEN_DEPTH);
    arg = c->child;
    json_path_key(p, sizeof(p), at, arg->string);
    switch (o) {
    case OP_EXISTS:
        return check_value(arg, p, j, self, opts, true, err, len);
    case OP_NOT:
        return check(arg, p, depth + 1, j, self, opts, err, len);
    case OP_ALL:
    case OP_ANY:
        if (!cJSON_IsArray(arg) || arg->child == NULL)
            return json_fail(err, len, p,
                             "must be a non-empty array of conditions");
        for (const cJSON *k = arg->child; k != NULL; k = k->next, i++) {
            if ((rc = check(k, json_path_index(q, sizeof(q), p, i), depth + 1,
                            j, self, opts, err, len)) != 0)
                return rc;
        }
        return 0;
    default:
        return check_pair(arg, o, p, j, self, opts, err, len);
    }
}

int
spec__check_when(const cJSON *when, const char *at, const struct spec_job *j,
                 size_t self, const struct spec_opts *opts, char *err,
                 size_t len)
{
    return check(when, at, 0, j, self, opts, err, len);
}

/* ---- evaluating, when the step is entered -------------------------- */

/* The value v stands for: a copy (caller deletes), or NULL when absent.
 * why (may be NULL) gets the reason it is absent. */
static cJSON *
value_of(const cJSON *v, const struct spec_job *j, size_t self,
         const struct spec_vars *vars, char *why, size_t len)
{
    struct spec_tpl t;
    cJSON *out = NULL;
    char tmp[256];

    if (!cJSON_IsString(v) ||
        !spec__tpl_whole(v->valuestring, j, self, NULL, &t))
        return cJSON_Duplicate(v, true);
    if (spec__tpl_value(&t, j, vars, &out, why ? why : tmp,
                        why ? len : sizeof(tmp)) != 0)
        return NULL;
    return out;
}

/* Compares two values of one kind (numbers, strings); false otherwise. */
static bool
order(const cJSON *a, const cJSON *b, enum op o)
{
    int c;

    if (cJSON_IsNumber(a) && cJSON_IsNumber(b))
        c = a->valuedouble < b->valuedouble   ? -1
            : a->valuedouble > b->valuedouble ? 1
                                              : 0;
    else if (cJSON_IsString(a) && cJSON_IsString(b))
        c = strcmp(a->valuestring, b->valuestring);
    else
        return false;
    return o == OP_LT   ? c < 0
           : o == OP_LE ? c <= 0
           : o == OP_GT ? c > 0
                        : c >= 0;
}

static bool
pair_holds(const cJSON *arg, enum op o, const struct spec_job *j, size_t self,
           const struct spec_vars *v)
{
    cJSON *a = value_of(arg->child, j, self, v, NULL, 0);
    cJSON *b = value_of(arg->child->next, j, self, v, NULL, 0);
    bool r = false;

    if (a != NULL && b != NULL) {
        switch (o) {
        case OP_EQ:
            r = cJSON_Compare(a, b, true);
            break;
        case OP_NE:
            r = !cJSON_Compare(a, b, true);
            break;
        case OP_IN:
            for (const cJSON *e = cJSON_IsArray(b) ? b->child : NULL;
                 e != NULL && !r; e = e->next)
                r = cJSON_Compare(a, e, true);
            break;
        default:
            r = order(a, b, o);
            break;
        }
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    return r;
}

static bool
holds(const cJSON *c, const struct spec_job *j, size_t self,
      const struct spec_vars *v)
{
    enum op o = op_of(c);
    const cJSON *arg = c->child;
    cJSON *val;

    switch (o) {
    case OP_EXISTS:
        val = value_of(arg, j, self, v, NULL, 0);
        cJSON_Delete(val);
        return val != NULL;
    case OP_NOT:
        return !holds(arg, j, self, v);
    case OP_ALL:
        for (const cJSON *k = arg->child; k != NULL; k = k->next) {
            if (!holds(k, j, self, v))
                return false;
        }
        return true;
    case OP_ANY:
        for (const cJSON *k = arg->child; k != NULL; k = k->next) {
            if (holds(k, j, self, v))
                return true;
        }
        return false;
    case OP_NONE:
        return false; /* refused at enqueue */
    default:
        return pair_holds(arg, o, j, self, v);
    }
}

/* Replaces, in the copy c, each template by what it read, or by
 * "(absent: why)". */
static void
fill_reason(cJSON *c, const struct spec_job *j, size_t self,
            const struct spec_vars *v)
{
    for (cJSON *k = c->child; k != NULL; k = k->next) {
        if (!cJSON_IsString(k)) {
            fill_reason(k, j, self, v);
            continue;
        }
        char why[300], msg[320];
        cJSON *val = value_of(k, j, self, v, why, sizeof(why));
        if (val == NULL) {
            snprintf(msg, sizeof(msg), "(absent: %s)", why);
            val = cJSON_CreateString(msg);
        }
        spec__take(k, val);
    }
}

void
spec_when_holds(const struct spec_job *j, size_t i, const struct spec_vars *v,
                bool *ok, char *why, size_t len)
{
    const cJSON *when = j->steps[i].when;
    cJSON *copy;
    char *text;

    *ok = when == NULL || holds(when, j, i, v);
    if (*ok || len == 0)
        return;
    copy = cJSON_Duplicate(when, true);
    fill_reason(copy, j, i, v);
    text = json_print(copy);
    snprintf(why, len, "when was false: %s", text);
    free(text);
    cJSON_Delete(copy);
}

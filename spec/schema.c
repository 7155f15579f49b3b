/* schema.c: the JSON Schema subset of tool parameters, checked twice: the
 * schema itself when a job or the config declares it (spec_schema_check),
 * and a model's arguments against it before a call runs
 * (spec_schema_validate).
 *
 * The subset is what models are given and providers document for
 * function parameters: type (one name or an array of names, "null"
 * among them for a nullable value), properties, required,
 * additionalProperties, enum, const, items, minItems/maxItems,
 * minLength/maxLength, minimum/maximum, OpenAPI's nullable, and anyOf.
 * A keyword outside it that would constrain a value (pattern, oneOf,
 * $ref, ...) is refused at enqueue rather than ignored at run time: a
 * schema stepq cannot enforce would let through arguments the user meant
 * to refuse. Annotations (description, title, default, examples, format)
 * are accepted and not enforced.
 */
#include "spec/spec.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"

#define PATH_LEN  256
#define MAX_DEPTH 32 /* nesting of schemas inside schemas */

static const char *const type_names[] = {
    "string", "number", "integer", "boolean", "object", "array", "null", NULL};

static const char *const keywords[] = {
    "type",     "properties", "required",  "additionalProperties",
    "enum",     "const",      "items",     "minItems",
    "maxItems", "minLength",  "maxLength", "minimum",
    "maximum",  "nullable",   "anyOf",     "description",
    "title",    "default",    "examples",  "format",
    NULL};

static bool
is_type_name(const char *s)
{
    for (const char *const *t = type_names; *t != NULL; t++) {
        if (strcmp(*t, s) == 0)
            return true;
    }
    return false;
}

static int
check_type(const cJSON *t, const char *path, char *err, size_t len)
{
    if (cJSON_IsString(t) && is_type_name(t->valuestring))
        return 0;
    if (cJSON_IsArray(t) && t->child != NULL) {
        const cJSON *c;
        cJSON_ArrayForEach(c, t)
        {
            if (!cJSON_IsString(c) || !is_type_name(c->valuestring))
                break;
        }
        if (c == NULL)
            return 0;
    }
    return json_fail(err, len, path,
                     "must be one of string, number, integer, boolean, "
                     "object, array, null, or a non-empty array of them");
}

static int
check_count(const cJSON *v, const char *path, char *err, size_t len)
{
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 1e9 &&
        v->valuedouble == floor(v->valuedouble))
        return 0;
    return json_fail(err, len, path, "must be a whole number >= 0");
}

static int check_at(const cJSON *s, const char *path, int depth, char *err,
                    size_t len);

/* check_keyword checks one keyword k of a schema at path. */
static int
check_keyword(const cJSON *k, const char *path, int depth, char *err,
              size_t len)
{
    const char *n = k->string;
    const cJSON *c;
    char p[PATH_LEN];
    int rc, i = 0;

    if (strcmp(n, "type") == 0)
        return check_type(k, path, err, len);
    if (strcmp(n, "properties") == 0) {
        if (!cJSON_IsObject(k))
            return json_fail(err, len, path, "must be an object of schemas");
        cJSON_ArrayForEach(c, k)
        {
            json_path_key(p, sizeof(p), path, c->string);
            if ((rc = check_at(c, p, depth + 1, err, len)) != 0)
                return rc;
        }
        return 0;
    }
    if (strcmp(n, "required") == 0) {
        if (!cJSON_IsArray(k))
            return json_fail(err, len, path, "must be an array of names");
        cJSON_ArrayForEach(c, k)
        {
            if (!cJSON_IsString(c))
                return json_fail(err, len,
                                 json_path_index(p, sizeof(p), path, i),
                                 "must be a property name");
            i++;
        }
        return 0;
    }
    if (strcmp(n, "additionalProperties") == 0)
        return cJSON_IsBool(k) ? 0 : check_at(k, path, depth + 1, err, len);
    if (strcmp(n, "items") == 0)
        return check_at(k, path, depth + 1, err, len);
    if (strcmp(n, "anyOf") == 0) {
        if (!cJSON_IsArray(k) || k->child == NULL)
            return json_fail(err, len, path,
                             "must be a non-empty array of schemas");
        cJSON_ArrayForEach(c, k)
        {
            if ((rc = check_at(c, json_path_index(p, sizeof(p), path, i++),
                               depth + 1, err, len)) != 0)
                return rc;
        }
        return 0;
    }
    if (strcmp(n, "enum") == 0)
        return cJSON_IsArray(k) && k->child != NULL
                   ? 0
                   : json_fail(err, len, path, "must be a non-empty array");
    if (strcmp(n, "minItems") == 0 || strcmp(n, "maxItems") == 0 ||
        strcmp(n, "minLength") == 0 || strcmp(n, "maxLength") == 0)
        return check_count(k, path, err, len);
    if (strcmp(n, "minimum") == 0 || strcmp(n, "maximum") == 0)
        return cJSON_IsNumber(k)
                   ? 0
                   : json_fail(err, len, path, "must be a number");
    if (strcmp(n, "nullable") == 0)
        return cJSON_IsBool(k) ? 0
                               : json_fail(err, len, path, "must be a boolean");
    if (strcmp(n, "description") == 0 || strcmp(n, "title") == 0 ||
        strcmp(n, "format") == 0)
        return cJSON_IsString(k)
                   ? 0
                   : json_fail(err, len, path, "must be a string");
    return 0; /* const, default, examples: any value */
}

static int
check_at(const cJSON *s, const char *path, int depth, char *err, size_t len)
{
    char p[PATH_LEN];
    const char *const *kw;
    int rc;

    if (depth > MAX_DEPTH)
        return json_fail(err, len, path, "schemas nested deeper than %d",
                         MAX_DEPTH);
    if (!cJSON_IsObject(s))
        return json_fail(err, len, path, "must be a JSON Schema object");
    for (const cJSON *k = s->child; k != NULL; k = k->next) {
        json_path_key(p, sizeof(p), path, k->string);
        for (kw = keywords; *kw != NULL && strcmp(*kw, k->string) != 0; kw++)
            ;
        if (*kw == NULL)
            return json_fail(err, len, p,
                             "keyword not supported by stepq's checker (it "
                             "knows type, properties, required, "
                             "additionalProperties, enum, const, items, "
                             "minItems, maxItems, minLength, maxLength, "
                             "minimum, maximum, nullable, anyOf)");
        if ((rc = check_keyword(k, p, depth, err, len)) != 0)
            return rc;
    }
    if (json_first_duplicate(s) != NULL)
        return json_fail(err, len, path, "%s: duplicate field",
                         json_first_duplicate(s));
    return 0;
}

int
spec_schema_check(const cJSON *schema, const char *path, char *err, size_t len)
{
    return check_at(schema, path, 0, err, len);
}

/* ---- validating a value ------------------------------------------------ */

static const char *
type_of(const cJSON *v)
{
    if (cJSON_IsString(v))
        return "string";
    if (cJSON_IsNumber(v))
        return v->valuedouble == floor(v->valuedouble) ? "integer" : "number";
    if (cJSON_IsBool(v))
        return "boolean";
    if (cJSON_IsObject(v))
        return "object";
    if (cJSON_IsArray(v))
        return "array";
    return "null";
}

static bool
has_type(const cJSON *v, const char *t)
{
    const char *is = type_of(v);

    return strcmp(is, t) == 0 ||
           (strcmp(t, "number") == 0 && strcmp(is, "integer") == 0);
}

/* type_ok checks v against the schema's "type" and "nullable". */
static int
type_ok(const cJSON *s, const cJSON *v, const char *path, char *err, size_t len)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type"), *c;
    const cJSON *nullable = cJSON_GetObjectItemCaseSensitive(s, "nullable");
    char want[128] = "";

    if (t == NULL || (cJSON_IsNull(v) && cJSON_IsTrue(nullable)))
        return 0;
    if (cJSON_IsString(t)) {
        if (has_type(v, t->valuestring))
            return 0;
        snprintf(want, sizeof(want), "%s", t->valuestring);
    } else {
        cJSON_ArrayForEach(c, t)
        {
            if (has_type(v, c->valuestring))
                return 0;
            snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%s",
                     want[0] ? " or " : "", c->valuestring);
        }
    }
    return json_fail(err, len, path, "expected %s, got %s", want, type_of(v));
}

static int validate_at(const cJSON *s, const cJSON *v, const char *path,
                       char *err, size_t len);

static int
object_ok(const cJSON *s, const cJSON *v, const char *path, char *err,
          size_t len)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *extra =
        cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    const cJSON *c;
    char p[PATH_LEN];
    int rc;

    cJSON_ArrayForEach(c, req)
    {
        if (cJSON_GetObjectItemCaseSensitive(v, c->valuestring) == NULL)
            return json_fail(err, len,
                             json_path_key(p, sizeof(p), path, c->valuestring),
                             "missing (required)");
    }
    if (json_first_duplicate(v) != NULL)
        return json_fail(
            err, len,
            json_path_key(p, sizeof(p), path, json_first_duplicate(v)),
            "duplicate field");
    cJSON_ArrayForEach(c, v)
    {
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, c->string);
        json_path_key(p, sizeof(p), path, c->string);
        if (ps == NULL && cJSON_IsFalse(extra))
            return json_fail(err, len, p, "unknown property");
        if (ps == NULL && cJSON_IsObject(extra))
            ps = extra;
        if (ps != NULL && (rc = validate_at(ps, c, p, err, len)) != 0)
            return rc;
    }
    return 0;
}

/* count_ok checks a count n of what (items, characters) against the
 * schema's lower and upper bounds (keywords lo and hi of s). */
static int
count_ok(const cJSON *s, const char *lo, const char *hi, size_t n,
         const char *what, const char *path, char *err, size_t len)
{
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, lo);
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, hi);

    if (mn != NULL && (double)n < mn->valuedouble)
        return json_fail(err, len, path, "expected at least %.0f %s, got %zu",
                         mn->valuedouble, what, n);
    if (mx != NULL && (double)n > mx->valuedouble)
        return json_fail(err, len, path, "expected at most %.0f %s, got %zu",
                         mx->valuedouble, what, n);
    return 0;
}

static int
array_ok(const cJSON *s, const cJSON *v, const char *path, char *err,
         size_t len)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    int i = 0, rc;
    const cJSON *c;
    char p[PATH_LEN];

    if ((rc = count_ok(s, "minItems", "maxItems", (size_t)cJSON_GetArraySize(v),
                       "items", path, err, len)) != 0)
        return rc;
    cJSON_ArrayForEach(c, v)
    {
        json_path_index(p, sizeof(p), path, i++);
        if (items != NULL && (rc = validate_at(items, c, p, err, len)) != 0)
            return rc;
    }
    return 0;
}

/* utf8_chars counts the characters of s, as JSON Schema's lengths do. */
static size_t
utf8_chars(const char *s)
{
    size_t n = 0;

    for (; *s != '\0'; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int
scalar_ok(const cJSON *s, const cJSON *v, const char *path, char *err,
          size_t len)
{
    const cJSON *lo = cJSON_GetObjectItemCaseSensitive(s, "minimum");
    const cJSON *hi = cJSON_GetObjectItemCaseSensitive(s, "maximum");

    int rc;

    if (cJSON_IsString(v) &&
        (rc = count_ok(s, "minLength", "maxLength", utf8_chars(v->valuestring),
                       "characters", path, err, len)) != 0)
        return rc;
    if (cJSON_IsNumber(v)) {
        if (lo != NULL && v->valuedouble < lo->valuedouble)
            return json_fail(err, len, path, "expected a number >= %g, got %g",
                             lo->valuedouble, v->valuedouble);
        if (hi != NULL && v->valuedouble > hi->valuedouble)
            return json_fail(err, len, path, "expected a number <= %g, got %g",
                             hi->valuedouble, v->valuedouble);
    }
    return 0;
}

static int
validate_at(const cJSON *s, const cJSON *v, const char *path, char *err,
            size_t len)
{
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf"), *c;
    int rc;

    if ((rc = type_ok(s, v, path, err, len)) != 0)
        return rc;
    if (cn != NULL && !cJSON_Compare(cn, v, true))
        return json_fail(err, len, path, "expected the constant value");
    if (en != NULL) {
        cJSON_ArrayForEach(c, en)
        {
            if (cJSON_Compare(c, v, true))
                break;
        }
        if (c == NULL)
            return json_fail(err, len, path, "not one of the allowed values");
    }
    if (any != NULL) {
        cJSON_ArrayForEach(c, any)
        {
            if (validate_at(c, v, path, err, len) == 0)
                break;
        }
        /* err holds the last alternative's problem. */
        if (c == NULL)
            return -EINVAL;
    }
    if (cJSON_IsObject(v))
        return object_ok(s, v, path, err, len);
    if (cJSON_IsArray(v))
        return array_ok(s, v, path, err, len);
    return scalar_ok(s, v, path, err, len);
}

int
spec_schema_validate(const cJSON *schema, const cJSON *value, const char *path,
                     char *err, size_t len)
{
    return validate_at(schema, value, path, err, len);
}

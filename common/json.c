/* json.c: cJSON helpers: validation with the JSON path of the first problem,
 * UTF-8 checks, printing, and the one rule for times in JSON output. */
#include "common/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/price.h"
#include "common/xalloc.h"

int
json_fail(char *err, size_t len, const char *path, const char *fmt, ...)
{
    va_list ap;
    int n = 0;

    if (err == NULL || len == 0)
        return -EINVAL;
    if (path != NULL && path[0] != '\0')
        n = snprintf(err, len, "%s: ", path);
    if (n < 0 || (size_t)n >= len)
        return -EINVAL;
    va_start(ap, fmt);
    vsnprintf(err + n, len - (size_t)n, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

const char *
json_path_key(char *buf, size_t len, const char *path, const char *key)
{
    if (path == NULL || path[0] == '\0')
        snprintf(buf, len, "%s", key);
    else
        snprintf(buf, len, "%s.%s", path, key);
    return buf;
}

const char *
json_path_index(char *buf, size_t len, const char *path, int i)
{
    snprintf(buf, len, "%s[%d]", path ? path : "", i);
    return buf;
}

int
json_check_object(const cJSON *obj, const char *path,
                  const char *const *allowed, char *err, size_t len)
{
    char p[512];

    if (!cJSON_IsObject(obj))
        return json_fail(err, len, path, "must be an object");
    for (const cJSON *it = obj->child; it != NULL; it = it->next) {
        bool ok = false;
        for (const char *const *a = allowed; *a != NULL; a++) {
            if (strcmp(*a, it->string) == 0) {
                ok = true;
                break;
            }
        }
        if (!ok)
            return json_fail(err, len,
                             json_path_key(p, sizeof(p), path, it->string),
                             "unknown field");
        /* cJSON keeps duplicate keys; a second copy would be silently
         * ignored by lookups, so refuse it. */
        for (const cJSON *o = it->next; o != NULL; o = o->next) {
            if (strcmp(o->string, it->string) == 0)
                return json_fail(err, len,
                                 json_path_key(p, sizeof(p), path, it->string),
                                 "duplicate field");
        }
    }
    return 0;
}

int
json_get_string(const cJSON *obj, const char *key, bool required,
                const char *path, const char **out, char *err, size_t len)
{
    char p[512];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    if (v == NULL) {
        if (required)
            return json_fail(err, len, json_path_key(p, sizeof(p), path, key),
                             "missing");
        return 0;
    }
    if (!cJSON_IsString(v) || v->valuestring == NULL)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, key),
                         "must be a string");
    *out = v->valuestring;
    return 0;
}

int
json_get_bool(const cJSON *obj, const char *key, const char *path, bool *out,
              char *err, size_t len)
{
    char p[512];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    if (v == NULL)
        return 0;
    if (!cJSON_IsBool(v))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, key),
                         "must be true or false");
    *out = cJSON_IsTrue(v);
    return 0;
}

int
json_get_number(const cJSON *obj, const char *key, double min, double max,
                const char *path, double *out, char *err, size_t len)
{
    char p[512];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    if (v == NULL)
        return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, key),
                         "must be a number");
    if (v->valuedouble < min || v->valuedouble > max)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, key),
                         "must be between %.15g and %.15g", min, max);
    *out = v->valuedouble;
    return 0;
}

int
json_get_int(const cJSON *obj, const char *key, int64_t min, int64_t max,
             const char *path, int64_t *out, char *err, size_t len)
{
    char p[512];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    double d;

    if (v == NULL)
        return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) ||
        floor(v->valuedouble) != v->valuedouble)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, key),
                         "must be a whole number");
    d = v->valuedouble;
    if (d < (double)min || d > (double)max)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, key),
                         "must be between %lld and %lld", (long long)min,
                         (long long)max);
    *out = (int64_t)d;
    return 0;
}

/* Length of the well-formed UTF-8 sequence at s[0..len), 0 if there is
 * none (a bad lead byte, a cut sequence, an overlong form, a surrogate or
 * a code point above U+10FFFF). */
static size_t
utf8_seq(const unsigned char *s, size_t len)
{
    unsigned c = s[0], cp;
    size_t n;

    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0) {
        n = 1;
        cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        n = 2;
        cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        n = 3;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n >= len)
        return 0;
    for (size_t k = 1; k <= n; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) ||
        (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n + 1;
}

bool
json_utf8_valid(const char *buf, size_t len)
{
    const unsigned char *s = (const unsigned char *)buf;
    size_t i = 0;

    while (i < len) {
        size_t n = utf8_seq(s + i, len - i);
        if (n == 0)
            return false;
        i += n;
    }
    return true;
}

void
json_utf8_scrub(char *buf, size_t len)
{
    unsigned char *s = (unsigned char *)buf;
    size_t i = 0;

    while (i < len) {
        size_t n = utf8_seq(s + i, len - i);
        if (n == 0) {
            s[i] = '?';
            n = 1;
        }
        i += n;
    }
}

bool
json_plain_text(const char *s, bool lines)
{
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if ((*p < 0x20 || *p == 0x7f) && !(lines && (*p == '\n' || *p == '\t')))
            return false;
    }
    return json_utf8_valid(s, strlen(s));
}

/* The bytes json_text_check stops at: 1, a control character JSON text
 * never holds raw (all below 0x20 but tab, newline and carriage return,
 * NUL included); 2, a backslash, which may start the escape of a NUL. */
static const unsigned char text_stop[256] = {
    [0] = 1,  [1] = 1,  [2] = 1,  [3] = 1,  [4] = 1,  [5] = 1,
    [6] = 1,  [7] = 1,  [8] = 1,  [11] = 1, [12] = 1, [14] = 1,
    [15] = 1, [16] = 1, [17] = 1, [18] = 1, [19] = 1, [20] = 1,
    [21] = 1, [22] = 1, [23] = 1, [24] = 1, [25] = 1, [26] = 1,
    [27] = 1, [28] = 1, [29] = 1, [30] = 1, [31] = 1, ['\\'] = 2};

/* Whether the 8 bytes of w hold one below 0x20 or a backslash (the
 * classic "has a byte less than" and "has a zero byte" word tricks: exact
 * as to whether, not as to where). */
static bool
word_stops(uint64_t w)
{
    const uint64_t ones = UINT64_C(0x0101010101010101);
    const uint64_t high = UINT64_C(0x8080808080808080);
    uint64_t bs = w ^ (ones * '\\');

    return (((w - ones * 0x20) & ~w) | ((bs - ones) & ~bs)) & high;
}

int
json_text_check(const char *text, size_t n, char *err, size_t len)
{
    const unsigned char *t = (const unsigned char *)text;

    /* This runs on every job enqueued: eight bytes at a time while none
     * can matter, then one table look-up a byte. */
    for (size_t i = 0; i < n; i++) {
        uint64_t w;

        while (i + 8 <= n) {
            memcpy(&w, t + i, 8);
            if (word_stops(w))
                break;
            i += 8;
        }
        if (i >= n)
            break;
        if (text_stop[t[i]] == 0)
            continue;
        if (t[i] == '\0')
            return json_fail(err, len, "",
                             "not valid JSON: a NUL byte at byte %zu", i);
        if (t[i] != '\\')
            return json_fail(err, len, "",
                             "not valid JSON: a control character (0x%02x) "
                             "at byte %zu",
                             t[i], i);
        /* A backslash outside a string is not JSON (the parser says so);
         * inside one it escapes the next character, which is skipped, so
         * "\\\\u0000" (a backslash, then "u0000") is no NUL. */
        if (i + 6 <= n && memcmp(text + i, "\\u0000", 6) == 0)
            return json_fail(err, len, "",
                             "a NUL character (\\u0000) at byte %zu (not "
                             "allowed)",
                             i);
        i++;
    }
    return 0;
}

char *
json_print(const cJSON *item)
{
    char *s = cJSON_PrintUnformatted(item);
    if (s == NULL) {
        fprintf(stderr, "stepq: out of memory printing JSON\n");
        abort();
    }
    return s;
}

void
json_add_string(cJSON *o, const char *name, const char *v)
{
    if (v != NULL)
        cJSON_AddStringToObject(o, name, v);
    else
        cJSON_AddNullToObject(o, name);
}

void
json_add_cost(cJSON *o, bool priced, int64_t nusd)
{
    if (priced)
        cJSON_AddNumberToObject(o, "cost_usd", price_usd(nusd));
    else
        cJSON_AddNullToObject(o, "cost_usd");
}

void
json_add_time(cJSON *o, const char *name, int64_t ms)
{
    /* 9999-12-31T23:59:59.999Z: past it RFC 3339 has no form (a wall
     * "until the config changes" is stored as a time that far away). */
    static const int64_t last_ms = INT64_C(253402300799999);
    char buf[32];

    if (ms != 0 && ms <= last_ms)
        cJSON_AddStringToObject(o, name,
                                clock_format_utc(ms, buf, sizeof(buf)));
    else
        cJSON_AddNullToObject(o, name);
}

/* The offset of the first byte after the value that ends at end (cJSON's
 * parse end) that is not white space; len when there is none. */
static size_t
after_value(const char *text, size_t len, const char *end)
{
    size_t at = (size_t)(end - text);

    while (at < len && strchr(" \t\r\n", text[at]) != NULL && text[at] != '\0')
        at++;
    return at;
}

int
json_parse_whole(const char *text, size_t len, const char *what, cJSON **out,
                 char *err, size_t errlen)
{
    const char *end = NULL;
    cJSON *root = NULL;
    size_t at;
    int rc = json_text_check(text, len, err, errlen);

    if (rc != 0)
        return rc;
    if ((root = cJSON_ParseWithLengthOpts(text, len, &end, false)) == NULL) {
        at = end && end >= text ? (size_t)(end - text) : 0;
        return json_fail(err, errlen, "", "%snot valid JSON (near byte %zu)",
                         what, at);
    }
    /* Trailing bytes after the value other than white space are refused:
     * "{...} {...}" must not pass as its first half. */
    if (end != NULL && (at = after_value(text, len, end)) < len) {
        cJSON_Delete(root);
        return json_fail(err, errlen, "",
                         "%snot valid JSON (extra text at byte %zu)", what, at);
    }
    *out = root;
    return 0;
}

cJSON *
json_parse_exact(const char *text, size_t len)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);

    if (root != NULL && end != NULL && after_value(text, len, end) < len) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static int
by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char *
json_first_duplicate(const cJSON *o)
{
    const char **names, *twice = NULL;
    size_t n = 0, i = 0;
    const cJSON *c;

    for (c = o->child; c != NULL; c = c->next)
        n++;
    if (n < 2)
        return NULL;
    /* Most objects of a request are small ({"role", "content"}): compared
     * pairwise, without an allocation. */
    if (n <= 8) {
        for (c = o->child; c != NULL; c = c->next) {
            for (const cJSON *d = c->next; d != NULL; d = d->next) {
                if (c->string != NULL && d->string != NULL &&
                    strcmp(c->string, d->string) == 0)
                    return d->string;
            }
        }
        return NULL;
    }
    names = xcalloc(n, sizeof(*names));
    for (c = o->child; c != NULL; c = c->next)
        names[i++] = c->string != NULL ? c->string : "";
    qsort(names, n, sizeof(*names), by_name);
    for (i = 1; i < n && twice == NULL; i++) {
        if (strcmp(names[i - 1], names[i]) == 0)
            twice = names[i];
    }
    free(names);
    return twice;
}

/* redact.c: a database location as messages show it (q_location_redact,
 * declared in queue/queue.h): the password of a URL's userinfo, and the
 * values of libpq keywords that hold a secret, replaced by "***". Pure
 * text work: no backend is asked. */
#include "queue/queue.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/location.h"

/* A bounded writer: what does not fit is dropped, and the text always
 * stays terminated. */
struct out {
    char *buf;
    size_t size, len;
};

static void
put(struct out *o, const char *s, size_t n)
{
    while (n-- > 0 && o->len + 1 < o->size)
        o->buf[o->len++] = *s++;
    o->buf[o->len] = '\0';
}

static bool
blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
           c == '\v';
}

/* keyword_value_end skips one value of libpq's keyword form: quoted
 * ('...', with backslash escapes) or up to the next blank. */
static const char *
keyword_value_end(const char *v)
{
    bool quoted = *v == '\'';

    if (quoted)
        v++;
    while (*v != '\0' && (quoted ? *v != '\'' : !blank(*v))) {
        if (*v == '\\' && v[1] != '\0')
            v++;
        v++;
    }
    return quoted && *v == '\'' ? v + 1 : v;
}

static int
hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Whether a key (the n bytes at k, up to its '=') may hold a secret once
 * its %XX escapes are decoded, as libpq decodes them ("%70assword=" is a
 * password too): "password" and any key that, in any case, holds "pass",
 * "pwd", "secret" or "token". libpq refuses the misspelt ones
 * ("PASSWORD=", "passwd=") and the error names the location: its value
 * must not be shown either. */
static bool
key_is_secret(const char *k, size_t n)
{
    static const char *const words[] = {"pass", "pwd", "secret", "token"};
    char key[64];
    size_t got = 0;

    for (size_t i = 0; i < n && got < sizeof(key) - 1; i++) {
        char c = k[i];
        if (c == '%' && i + 2 < n && hex_digit(k[i + 1]) >= 0 &&
            hex_digit(k[i + 2]) >= 0) {
            c = (char)(hex_digit(k[i + 1]) * 16 + hex_digit(k[i + 2]));
            i += 2;
        }
        key[got++] = (char)tolower((unsigned char)c);
    }
    key[got] = '\0';
    for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
        if (strstr(key, words[w]) != NULL)
            return true;
    }
    return n >= sizeof(key) - 1; /* too long to read: masked */
}

/* Keyword form: "key = value" pairs; a secret's value becomes ***. Text
 * that does not parse is copied as it is (libpq refuses it anyway). */
static void
redact_keywords(struct out *o, const char *p)
{
    while (*p != '\0') {
        const char *k = p, *q, *e;

        while (blank(*p))
            p++;
        put(o, k, (size_t)(p - k));
        for (k = p; *p != '\0' && *p != '=' && !blank(*p);)
            p++;
        for (q = p; blank(*q);)
            q++;
        if (*q != '=') {
            put(o, k, strlen(k));
            return;
        }
        for (q++; blank(*q);)
            q++;
        e = keyword_value_end(q);
        if (key_is_secret(k, (size_t)(p - k))) {
            put(o, k, (size_t)(p - k));
            put(o, "=***", 4);
        } else
            put(o, k, (size_t)(e - k));
        p = e;
    }
}

/* URI: the password of "scheme://user:password@host" and the value of a
 * "password=" query parameter become ***. The user information ends at
 * the last '@' before the query, even past a '/' (a password with an
 * unencoded '/' is a mistyped URL libpq refuses, and the refusal is
 * logged): masking a little more than libpq reads as the password is
 * safe, less is not. */
static void
redact_uri(struct out *o, const char *loc)
{
    const char *s = strstr(loc, "://") + 3, *p = loc, *at = NULL, *c;

    for (c = s; *c != '\0' && *c != '?'; c++) {
        if (*c == '@')
            at = c;
    }
    if (at != NULL && (c = memchr(s, ':', (size_t)(at - s))) != NULL) {
        put(o, loc, (size_t)(c + 1 - loc));
        put(o, "***", 3);
        p = at;
    }
    if ((c = strchr(p, '?')) == NULL) {
        put(o, p, strlen(p));
        return;
    }
    put(o, p, (size_t)(c + 1 - p));
    for (p = c + 1; *p != '\0';) {
        size_t n = strcspn(p, "&"), k = strcspn(p, "=&");

        if (p[k] == '=' && key_is_secret(p, k)) {
            put(o, p, k + 1);
            put(o, "***", 3);
        } else {
            put(o, p, n);
        }
        p += n;
        if (*p == '&')
            put(o, p++, 1);
    }
}

char *
q_location_redact(const char *location, char *buf, size_t size)
{
    struct out o = {buf, size, 0};

    if (size == 0)
        return buf;
    buf[0] = '\0';
    if (location == NULL)
        return buf;
    /* Keywords first: a keyword value may itself hold "://". */
    if (location_is_keywords(location))
        redact_keywords(&o, location);
    else if (strstr(location, "://") != NULL)
        redact_uri(&o, location);
    else
        put(&o, location, strlen(location));
    return buf;
}

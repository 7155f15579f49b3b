/* httptext.c: HTTP token and field-value checks, query escaping. */
#include "common/httptext.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/defs.h"
#include "common/xalloc.h"

bool
httptext_is_token(const char *s)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";

    if (s == NULL || *s == '\0')
        return false;
    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || strchr(extra, ch) != NULL))
            return false;
    }
    return true;
}

bool
httptext_is_field_value(const char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return false;
    }
    return true;
}

/* Segments that carry a credential wherever they stand in a name. */
static const char *const cred_words[] = {
    "authorization", "auth",        "token",       "secret",    "password",
    "passwd",        "apikey",      "signature",   "sig",       "cookie",
    "credential",    "credentials", "accesstoken", "privatekey"};

/* Segments before "key" that make it a credential ("x-api-key"), where
 * "idempotency-key" or "cache-key" are not. */
static const char *const key_words[] = {
    "api",    "access",  "secret", "private", "subscription", "auth",
    "client", "account", "master", "virtual", "session",      "signing"};

static bool
word_in(const char *seg, size_t n, const char *const *words, size_t nwords)
{
    for (size_t i = 0; i < nwords; i++) {
        if (strlen(words[i]) == n && strncasecmp(seg, words[i], n) == 0)
            return true;
    }
    return false;
}

/* The length of the segment at name (n bytes): up to a byte that is not a
 * letter or digit, or to an upper-case letter after a lower-case one
 * ("apiKey" is "api" and "Key"). */
static size_t
segment_len(const char *name, size_t n)
{
    size_t k = 0;

    while (k < n && isalnum((unsigned char)name[k])) {
        if (k > 0 && isupper((unsigned char)name[k]) &&
            islower((unsigned char)name[k - 1]))
            break;
        k++;
    }
    return k;
}

bool
httptext_is_credential_name(const char *name, size_t n)
{
    const char *prev = NULL;
    size_t prevn = 0;

    for (size_t i = 0; i < n;) {
        size_t k = segment_len(name + i, n - i);
        if (k == 0) {
            i++;
            continue;
        }
        if (word_in(name + i, k, cred_words, STEPQ_ARRAY_LEN(cred_words)))
            return true;
        if (k == 3 && strncasecmp(name + i, "key", 3) == 0 &&
            ((prev == NULL && i + k == n) ||
             word_in(prev, prevn, key_words, STEPQ_ARRAY_LEN(key_words))))
            return true;
        prev = name + i;
        prevn = k;
        i += k;
    }
    return false;
}

void
httptext_query_escape(struct xbuf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
            (ch >= '0' && ch <= '9') || strchr("-._~", ch) != NULL) {
            xbuf_put(b, (const char *)&ch, 1);
        } else {
            char esc[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            xbuf_put(b, esc, 3);
        }
    }
}

const char *
httptext_framing_header(const char *name)
{
    static const char *const names[] = {"Content-Length", "Transfer-Encoding",
                                        "Connection"};

    for (size_t i = 0; name != NULL && i < STEPQ_ARRAY_LEN(names); i++) {
        if (strcasecmp(name, names[i]) == 0)
            return names[i];
    }
    return NULL;
}

bool
httptext_is_env_name(const char *s)
{
    if (*s == '\0' || (*s >= '0' && *s <= '9'))
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_") == strlen(s);
}

const char *
httptext_authority_problem(const char *rest, const char *end)
{
    const char *host = rest, *s;
    size_t n;

    for (s = rest; s < end; s++) {
        if (*s == '@')
            host = s + 1; /* a userinfo ends at its last '@' */
    }
    if (host < end && *host == '[') {
        s = memchr(host, ']', (size_t)(end - host));
        if (s == NULL || s == host + 1 ||
            strspn(host + 1, "0123456789abcdefABCDEF:.") !=
                (size_t)(s - host - 1))
            return "bad IPv6 address in the host";
        s++;
    } else {
        s = host;
        while (s < end && *s != ':')
            s++;
        if (memchr(host, '[', (size_t)(s - host)) != NULL ||
            memchr(host, ']', (size_t)(s - host)) != NULL)
            return "'[' or ']' in the host";
    }
    if (s == host)
        return "needs a host (http://HOST/...)";
    if (s < end && *s != ':')
        return "unexpected text after the host";
    if (s < end) {
        long port = 0;
        s++;
        n = (size_t)(end - s);
        if (n > 0 && n <= 5 && strspn(s, "0123456789") >= n)
            port = strtol(s, NULL, 10);
        if (port < 1 || port > 65535)
            return "port must be 1 to 65535";
    }
    return NULL;
}

/* Appends the query q (after '?', to its end or '#') with the values of
 * credential parameters masked. */
static void
mask_query(struct xbuf *b, const char *q)
{
    while (*q != '\0') {
        size_t n = strcspn(q, "&#"), name = strcspn(q, "=&#");
        if (name < n && httptext_is_credential_name(q, name)) {
            xbuf_put(b, q, name + 1);
            xbuf_lit(b, "***");
        } else {
            xbuf_put(b, q, n);
        }
        q += n;
        if (*q == '#') {
            xbuf_put(b, q, strlen(q));
            return;
        }
        if (*q == '&')
            xbuf_put(b, q++, 1);
    }
}

char *
httptext_url_masked(const char *url)
{
    struct xbuf b = {0};
    const char *auth = strstr(url, "://"), *end, *at, *colon, *q;

    if (auth != NULL) {
        auth += 3;
        end = auth + strcspn(auth, "/?#");
        at = memchr(auth, '@', (size_t)(end - auth));
        colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
        if (colon != NULL) {
            xbuf_put(&b, url, (size_t)(colon - url) + 1);
            xbuf_lit(&b, "***");
            url = at;
        }
    }
    q = strchr(url, '?');
    if (q == NULL || (strchr(url, '#') && strchr(url, '#') < q)) {
        xbuf_put(&b, url, strlen(url));
    } else {
        xbuf_put(&b, url, (size_t)(q - url) + 1);
        mask_query(&b, q + 1);
    }
    return b.p != NULL ? b.p : xstrdup("");
}

/* httptext.c: HTTP token and field-value checks, query escaping. */
#include "common/httptext.h"

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

bool
httptext_is_credential_name(const char *name, size_t n)
{
    static const char *const words[] = {"key",      "auth", "token", "secret",
                                        "password", "sig",  "cookie"};

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        size_t w = strlen(words[i]);
        for (size_t k = 0; k + w <= n; k++) {
            if (strncasecmp(name + k, words[i], w) == 0)
                return true;
        }
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

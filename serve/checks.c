/* checks.c: what every request is checked for before its route: the
 * bearer token (compared in constant time), a Host of this machine when
 * no token is asked, and writes from another site's page. */
#include "serve/internal.h"

#include <string.h>
#include <strings.h>

bool
serve_token_equal(const char *given, size_t given_len, const char *expected)
{
    size_t n = strlen(expected);
    unsigned char diff = given_len != n;

    /* Every byte of the expected token is looked at, whatever matched. */
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(expected[i] ^
                                (i < given_len ? given[i] : expected[i] ^ 1));
    return diff == 0;
}

/* The token check: "Authorization: Bearer TOKEN". */
bool
serve_authorized(const struct serve_opts *o, struct MHD_Connection *c)
{
    const char *h;
    size_t n;

    if (o->token == NULL)
        return true;
    h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                    MHD_HTTP_HEADER_AUTHORIZATION);
    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    h += 7;
    while (*h == ' ')
        h++;
    n = strlen(h);
    while (n > 0 && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    return serve_token_equal(h, n, o->token);
}

/* Without a token, the Host a browser sends must be this machine's:
 * a page on a name that resolves to 127.0.0.1 (DNS rebinding) sends its
 * own name, and would pass the origin check with it. */
bool
serve_host_is_local(struct MHD_Connection *c)
{
    static const char *const names[] = {"127.0.0.1", "localhost", "[::1]",
                                        NULL};
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");

    if (host == NULL)
        return true; /* HTTP/1.0 programs; browsers always send one */
    for (int i = 0; names[i] != NULL; i++) {
        size_t n = strlen(names[i]);
        if (strncasecmp(host, names[i], n) == 0 &&
            (host[n] == '\0' || host[n] == ':'))
            return true;
    }
    return false;
}

/* A write from a page of another site (a form posted by a browser to a
 * loopback port): refused. Browsers send Origin on such a POST, and
 * Sec-Fetch-Site; programs send neither. */
bool
serve_cross_site(struct MHD_Connection *c, const char *method)
{
    const char *origin, *host, *site, *rest;

    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
        return false;
    site = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-Fetch-Site");
    if (site != NULL && strcmp(site, "same-origin") != 0 &&
        strcmp(site, "none") != 0)
        return true;
    origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (origin == NULL)
        return false;
    host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    /* https: the page served through a proxy that adds TLS and passes
     * Host on. */
    rest = strncmp(origin, "http://", 7) == 0    ? origin + 7
           : strncmp(origin, "https://", 8) == 0 ? origin + 8
                                                 : NULL;
    return host == NULL || rest == NULL || strcmp(rest, host) != 0;
}

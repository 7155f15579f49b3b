/* checks.c: what every request is checked for before its route: who it
 * is (a named operator's token, else the shared one, each compared in
 * constant time), failed logins slowed per address, what its role
 * allows, a Host of this machine when no token is asked, and writes from
 * another site's page. */
#include "serve/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

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

/* The token of "Authorization: Bearer TOKEN" (*n bytes), or NULL. */
static const char *
bearer(struct MHD_Connection *c, size_t *n)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                MHD_HTTP_HEADER_AUTHORIZATION);

    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
        return NULL;
    h += 7;
    while (*h == ' ')
        h++;
    *n = strlen(h);
    while (*n > 0 && (h[*n - 1] == ' ' || h[*n - 1] == '\t'))
        (*n)--;
    return h;
}

/* The client's address as text ("127.0.0.1", "::1"), or "?". */
static void
client_addr(struct MHD_Connection *c, char *buf, size_t len)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;

    snprintf(buf, len, "?");
    if (sa != NULL && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf,
                  (socklen_t)len);
    else if (sa != NULL && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf,
                  (socklen_t)len);
}

/* The gate's slot of addr: its own, else a free one, else the one whose
 * window began first (an attacker with many addresses can only push
 * out the oldest entries, each of which was slowed already). */
static size_t
gate_slot(struct serve_gate *g, const char *addr)
{
    size_t pick = 0;

    for (size_t i = 0; i < SERVE_GATE_SLOTS; i++) {
        if (strcmp(g->slot[i].addr, addr) == 0)
            return i;
        if (g->slot[i].addr[0] == '\0' ||
            (g->slot[pick].addr[0] != '\0' &&
             g->slot[i].first < g->slot[pick].first))
            pick = i;
    }
    snprintf(g->slot[pick].addr, sizeof(g->slot[pick].addr), "%s", addr);
    g->slot[pick].fails = 0;
    g->slot[pick].first = 0;
    return pick;
}

/* How long addr must still wait (ms), 0 when it may try. */
static int64_t
gate_wait(struct serve_gate *g, const char *addr, int64_t now)
{
    for (size_t i = 0; i < SERVE_GATE_SLOTS; i++) {
        if (strcmp(g->slot[i].addr, addr) != 0)
            continue;
        if (g->slot[i].fails < SERVE_GATE_FAILS)
            return 0;
        return g->slot[i].first + SERVE_GATE_WINDOW_MS > now
                   ? g->slot[i].first + SERVE_GATE_WINDOW_MS - now
                   : 0;
    }
    return 0;
}

static void
gate_fail(struct serve_gate *g, const char *addr, int64_t now)
{
    size_t i = gate_slot(g, addr);

    if (g->slot[i].fails == 0 ||
        now - g->slot[i].first >= SERVE_GATE_WINDOW_MS) {
        g->slot[i].first = now;
        g->slot[i].fails = 0;
    }
    g->slot[i].fails++;
}

/* Who a presented token (or none) is, by the store's operators first. */
static int
identify(const struct serve_opts *o, const char *tok, size_t n,
         struct serve_caller *who)
{
    size_t nops = 0;
    int rc =
        park_operator_find(o->db, tok ? tok : "", tok ? n : 0, &who->op, &nops);

    if (rc == 0 && tok != NULL) {
        who->mode = SERVE_NAMED;
        return 0;
    }
    if (rc != 0 && rc != -ENOENT)
        return rc;
    /* No operator matched. Once the store has one, only they get in: the
     * shared token (or --no-auth) is for a store without operators. */
    if (nops > 0)
        return -EACCES;
    who->op.role = PARK_ROLE_ADMIN;
    who->op.name[0] = '\0';
    if (o->no_auth) {
        who->mode = SERVE_OPEN;
        return 0;
    }
    /* A server started for named operators only, whose last operator
     * was removed, lets nobody in: not everybody. */
    who->mode = SERVE_SHARED;
    return tok != NULL && o->token != NULL &&
                   serve_token_equal(tok, n, o->token)
               ? 0
               : -EACCES;
}

int
serve_identify(const struct serve_opts *o, struct serve_gate *g,
               struct MHD_Connection *c, int64_t now, struct serve_caller *who,
               unsigned *retry_s)
{
    size_t n = 0;
    const char *tok = bearer(c, &n);
    int64_t wait;
    int rc;

    client_addr(c, who->addr, sizeof(who->addr));
    /* A slowed address gets 429 whatever it presents, so that its
     * guesses teach it nothing until the window ends. */
    if ((wait = gate_wait(g, who->addr, now)) > 0) {
        *retry_s = (unsigned)((wait + 999) / 1000);
        return -EAGAIN;
    }
    rc = identify(o, tok, n, who);
    if (rc == -EACCES)
        gate_fail(g, who->addr, now);
    return rc;
}

bool
serve_role_allows(const struct serve_caller *who, enum serve_route_id r,
                  const char *method)
{
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
        return true;
    /* The writes a resolver makes. */
    if (r == R_PARK_RESOLVE || r == R_PARK_RESOLVE_ALL || r == R_JOB_CANCEL ||
        r == R_JOB_RETRY)
        return who->op.role >= PARK_ROLE_RESOLVER;
    return who->op.role >= PARK_ROLE_ADMIN;
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

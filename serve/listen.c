/* listen.c: the listening socket of `stepq serve`: --listen read as
 * HOST:PORT or [V6]:PORT (numeric only), whether it is loopback, and the
 * socket bound with the address it took. */
#include "serve/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Splits "HOST:PORT" or "[V6]:PORT" into host and port (copies). */
static int
split_listen(const char *listen, char *host, size_t hlen, char *port,
             size_t plen, char *err, size_t len)
{
    const char *colon = strrchr(listen, ':'), *h = listen;
    size_t n;

    if (colon == NULL || colon[1] == '\0') {
        snprintf(err, len, "--listen %s: give HOST:PORT, such as %s", listen,
                 SERVE_LISTEN_DEFAULT);
        return -EINVAL;
    }
    n = (size_t)(colon - listen);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    if (n == 0 || n >= hlen || strlen(colon + 1) >= plen) {
        snprintf(err, len, "--listen %s: give HOST:PORT, such as %s", listen,
                 SERVE_LISTEN_DEFAULT);
        return -EINVAL;
    }
    memcpy(host, h, n);
    host[n] = '\0';
    strcpy(port, colon + 1);
    for (const char *p = port; *p; p++) {
        if (*p < '0' || *p > '9' || p - port > 4) {
            snprintf(err, len, "--listen %s: the port must be 0 to 65535",
                     listen);
            return -EINVAL;
        }
    }
    if (atoi(port) > 65535) {
        snprintf(err, len, "--listen %s: the port must be 0 to 65535", listen);
        return -EINVAL;
    }
    return 0;
}

static int
resolve_listen(const char *listen, struct addrinfo **out, char *err, size_t len)
{
    char host[256], port[8];
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags =
                                 AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE};
    int rc =
        split_listen(listen, host, sizeof(host), port, sizeof(port), err, len);

    if (rc != 0)
        return rc;
    if (getaddrinfo(host, port, &hints, out) != 0) {
        snprintf(err, len,
                 "--listen %s: %s is not a numeric address (such as "
                 "127.0.0.1 or [::1])",
                 listen, host);
        return -EINVAL;
    }
    return 0;
}

static bool
is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >>
                24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(
            &((const struct sockaddr_in6 *)sa)->sin6_addr);
    return false;
}

int
serve_listen_check(const char *listen, bool *loopback, char *err, size_t len)
{
    struct addrinfo *ai = NULL;
    int rc = resolve_listen(listen, &ai, err, len);

    if (rc != 0)
        return rc;
    *loopback = is_loopback(ai->ai_addr);
    freeaddrinfo(ai);
    return 0;
}

int
serve_open_listener(const char *where, int *fd, char *addr, size_t alen,
                    char *err, size_t len)
{
    struct addrinfo *ai = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    int one = 1, s, rc = resolve_listen(where, &ai, err, len);

    if (rc != 0)
        return rc;
    /* A backlog of SOMAXCONN (the kernel caps it at net.core.somaxconn):
     * with 128, a burst of 1,000 connects overflowed the accept queue and
     * the dropped clients came back only after a second's SYN retry. */
    s = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        bind(s, ai->ai_addr, ai->ai_addrlen) != 0 ||
        listen(s, SOMAXCONN) != 0 ||
        getsockname(s, (struct sockaddr *)&ss, &sl) != 0) {
        rc = -errno;
        snprintf(err, len, "cannot listen on %s: %s", where, strerror(errno));
        if (s >= 0)
            close(s);
        freeaddrinfo(ai);
        return rc;
    }
    freeaddrinfo(ai);
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a6->sin6_addr, host, sizeof(host));
        snprintf(addr, alen, "[%s]:%u", host, ntohs(a6->sin6_port));
    } else {
        const struct sockaddr_in *a4 = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a4->sin_addr, host, sizeof(host));
        snprintf(addr, alen, "%s:%u", host, ntohs(a4->sin_port));
    }
    *fd = s;
    return 0;
}

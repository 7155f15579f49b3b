/* serve.h: serve/ owns `stepq serve`: an HTTP server (libmicrohttpd
 * driven from a libuv loop) that answers the JSON API over one open
 * store: jobs (enqueue, list, show, cancel), park items (list, show,
 * resolve, resolve all matching), tiers, status and a health check.
 * Every answer has the shape of the CLI's --json (view/), and every
 * resolution goes through park/'s rules.
 *
 * The server runs on the calling thread until SIGINT or SIGTERM, one
 * request at a time: the store is one handle, used by nothing else. A
 * long-poll (GET /v1/jobs/ID?wait=) waits suspended, not under way.
 */
#ifndef STEPQ_SERVE_SERVE_H
#define STEPQ_SERVE_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "common/defs.h"
#include "queue/queue.h"

/* Defaults of `stepq serve`. */
#define SERVE_LISTEN_DEFAULT    "127.0.0.1:8377"
#define SERVE_MAX_BODY_DEFAULT  ((size_t)32 << 20) /* 32 MiB */
#define SERVE_TIMEOUT_S_DEFAULT 30
#define SERVE_MAX_CONNS_DEFAULT 2048

struct serve_opts {
    q_db *db;                 /* borrowed: the store every request uses */
    const struct config *cfg; /* borrowed: tiers, for validation and views */
    const char *listen;       /* "HOST:PORT" or "[V6]:PORT"; port 0: any */
    const char *token;        /* the shared bearer token, while the store has
                                 no named operator; NULL: none */
    bool no_auth;             /* while it has none, let anyone in (loopback
                                 only); without it and a token, nobody */
    const char *tls_cert;     /* PEM text of the certificate chain, and */
    const char *tls_key;      /* of its key: HTTPS; NULL: plain HTTP */
    size_t max_body;          /* larger request bodies get 413 */
    unsigned timeout_s;       /* a connection idle this long is closed */
    unsigned max_conns;       /* connections at once (0: the default) */
    /* Called once the socket is bound, with the address it took
     * ("127.0.0.1:40117"); may be NULL. */
    void (*ready)(const char *addr, void *arg);
    void *arg;
};

/* serve_listen_check parses listen and tells whether it is a loopback
 * address (127.0.0.0/8 or ::1). Returns 0, or -EINVAL with the reason
 * in err (len bytes). */
STEPQ_MUST_CHECK int serve_listen_check(const char *listen, bool *loopback,
                                        char *err, size_t len);

/* serve_run binds o->listen and answers requests until SIGINT or SIGTERM;
 * then it stops taking connections, lets the open ones finish their
 * answers (up to 5 seconds) and returns 0. Returns a negative errno when
 * it cannot start (-EADDRINUSE, -EACCES, -EINVAL bad address), with the
 * reason in err. */
STEPQ_MUST_CHECK int serve_run(const struct serve_opts *o, char *err,
                               size_t len);

/* serve_tls_supported tells whether this libmicrohttpd can serve HTTPS
 * (MHD_FEATURE_TLS: built with GnuTLS, as Debian builds it). */
bool serve_tls_supported(void);

/* serve_token_equal compares a presented token with the expected one in
 * time that depends only on the expected token's length. */
bool serve_token_equal(const char *given, size_t given_len,
                       const char *expected);

#endif

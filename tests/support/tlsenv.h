/* tlsenv.h: TLS with real parts in tests (tests/support/tlsenv.c): a
 * throwaway CA, server and client certificates made with the openssl CLI,
 * and Debian's nginx terminating TLS 1.3 in front of the mock.
 *
 * nginx runs as a child process (daemon off, one worker process) on its
 * own config file in the test's folder, with its pid file, logs and temp
 * folders there. Its listening sockets are bound to 127.0.0.1 port 0 by
 * the test and handed to it (nginx's NGINX variable, as its binary
 * upgrade does): no fixed port, no race for one, and a connection made
 * before nginx is up waits in the backlog instead of being refused. The
 * child stays in the test's process group, so Check's killpg reaps it.
 * Every helper fails the test on error.
 */
#ifndef STEPQ_TESTS_TLSENV_H
#define STEPQ_TESTS_TLSENV_H

#include <sys/types.h>

struct tlsenv {
    pid_t pid;     /* nginx; 0 when not running */
    int port_h1;   /* TLS 1.3, HTTP/1.1 */
    int port_h2;   /* TLS 1.3, `listen ... ssl http2` (ALPN h2, http/1.1) */
    int port_mtls; /* TLS 1.3, HTTP/1.1, ssl_verify_client on (ca.pem) */
    int life_fd;   /* EOF once nginx has exited */
};

/* tlsenv_certs writes into dir, with the openssl CLI: ca.pem (and
 * ca.key), server.pem and server.key for 127.0.0.1 and localhost signed
 * by it, client.pem and client.key (clientAuth) signed by it, and
 * other-ca.pem, a CA that signed nothing here. ECDSA P-256 keys. */
void tlsenv_certs(const char *dir);

/* tlsenv_start writes dir/nginx.conf and starts nginx on it, proxying
 * every request to 127.0.0.1:upstream_port over kept-alive HTTP/1.1; a
 * client connection is closed after keepalive_requests answers (nginx's
 * keepalive_requests), so tests can make a client reconnect. nginx logs
 * each request to dir/access.log as "CONNECTION SESSION_REUSED PORT
 * STATUS" ($connection, $ssl_session_reused: "r" or "."). Needs
 * tlsenv_certs(dir) first. */
void tlsenv_start(struct tlsenv *t, const char *dir, int upstream_port,
                  int keepalive_requests);

/* tlsenv_start_with is tlsenv_start with extra (nginx directives, each
 * line ending in "\n") added to the http block: what a recipe needs. */
void tlsenv_start_with(struct tlsenv *t, const char *dir, int upstream_port,
                       int keepalive_requests, const char *extra);

/* tlsenv_stop sends SIGTERM to nginx and waits for it (SIGKILL after
 * 10 s). A stopped or never started tlsenv is a no-op. */
void tlsenv_stop(struct tlsenv *t);

#endif

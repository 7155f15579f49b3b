/* tlsenv.c: a throwaway CA and Debian's nginx terminating TLS in front of
 * the mock, for tests; see tlsenv.h. */
#include "tests/support/tlsenv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/xalloc.h"
#include "tests/support/support.h"

void
tlsenv_certs(const char *dir)
{
    char *script = source_path("scripts/tls-certs.sh"), *out = NULL;
    size_t len = strlen(script) + strlen(dir) + 16;
    char *cmd = xmalloc(len);
    int rc;

    snprintf(cmd, len, "%s '%s'", script, dir);
    rc = run_sh(cmd, &out);
    ck_assert_msg(rc == 0, "%s exited %d:\n%s", cmd, rc, out);
    free(out);
    free(cmd);
    free(script);
}

/* A listening socket on 127.0.0.1, a free port; its number in *port. */
static int
listener(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t alen = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    ck_assert_int_ge(fd, 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(fd, 4096), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* nginx.conf: three TLS 1.3 servers (HTTP/1.1, HTTP/2, client
 * certificates required), everything it writes under dir. */
static void
write_conf(const struct tlsenv *t, const char *dir, int upstream_port,
           int keepalive_requests, const char *extra)
{
    char *conf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&conf, &len);

    ck_assert_ptr_nonnull(f);
    /* A master process: nginx 1.22 without one closes the sockets it
     * inherits. Its worker runs as root when the test does, so it can
     * reach the test's private folder. */
    if (geteuid() == 0)
        fputs("user root;\n", f);
    fprintf(f,
            "daemon off;\nworker_processes 1;\npid %s/nginx.pid;\n"
            "error_log %s/nginx-error.log warn;\n"
            "events { worker_connections 4096; }\n"
            "http {\n"
            "  log_format conn '$connection $ssl_session_reused "
            "$server_port $status';\n"
            "  access_log %s/access.log conn;\n"
            "  client_body_temp_path %s/tmp-body;\n"
            "  proxy_temp_path %s/tmp-proxy;\n"
            "  fastcgi_temp_path %s/tmp-fastcgi;\n"
            "  uwsgi_temp_path %s/tmp-uwsgi;\n"
            "  scgi_temp_path %s/tmp-scgi;\n"
            "  keepalive_requests %d;\n"
            "  ssl_protocols TLSv1.3;\n"
            "  ssl_certificate %s/server.pem;\n"
            "  ssl_certificate_key %s/server.key;\n"
            "  upstream mock { server 127.0.0.1:%d; keepalive 64; }\n"
            "  proxy_http_version 1.1;\n"
            "  proxy_set_header Connection \"\";\n%s",
            dir, dir, dir, dir, dir, dir, dir, dir, keepalive_requests, dir,
            dir, upstream_port, extra);
    fprintf(f,
            "  server {\n"
            "    listen 127.0.0.1:%d ssl;\n"
            "    listen 127.0.0.1:%d ssl http2;\n"
            "    location / { proxy_pass http://mock; }\n"
            "  }\n"
            "  server {\n"
            "    listen 127.0.0.1:%d ssl;\n"
            "    ssl_verify_client on;\n"
            "    ssl_client_certificate %s/ca.pem;\n"
            "    location / { proxy_pass http://mock; }\n"
            "  }\n"
            "}\n",
            t->port_h1, t->port_h2, t->port_mtls, dir);
    fclose(f);
    free(tmpdir_write(dir, "nginx.conf", conf, len));
    free(conf);
}

void
tlsenv_start(struct tlsenv *t, const char *dir, int upstream_port,
             int keepalive_requests)
{
    tlsenv_start_with(t, dir, upstream_port, keepalive_requests, "");
}

void
tlsenv_start_with(struct tlsenv *t, const char *dir, int upstream_port,
                  int keepalive_requests, const char *extra)
{
    int fds[3], life[2];
    char env[64], *conf = tmpdir_join(dir, "nginx.conf");
    char *elog = tmpdir_join(dir, "nginx-error.log"), *out = NULL, cmd[4096];
    int rc;

    memset(t, 0, sizeof(*t));
    fds[0] = listener(&t->port_h1);
    fds[1] = listener(&t->port_h2);
    fds[2] = listener(&t->port_mtls);
    write_conf(t, dir, upstream_port, keepalive_requests, extra);
    /* A config nginx refuses fails here, with its message. */
    snprintf(cmd, sizeof(cmd), "nginx -t -q -p '%s' -c '%s' -e '%s'", dir, conf,
             elog);
    rc = run_sh(cmd, &out);
    ck_assert_msg(rc == 0, "%s exited %d:\n%s", cmd, rc, out);
    free(out);
    snprintf(env, sizeof(env), "%d;%d;%d;", fds[0], fds[1], fds[2]);
    /* nginx inherits the write end and never writes it: the read end
     * sees EOF when nginx is gone (tlsenv_stop waits on that). */
    ck_assert_int_eq(pipe(life), 0);
    fcntl(life[0], F_SETFD, FD_CLOEXEC);
    t->pid = fork();
    ck_assert_int_ge(t->pid, 0);
    if (t->pid == 0) {
        setenv("NGINX", env, 1);
        execlp("nginx", "nginx", "-p", dir, "-c", conf, "-e", elog,
               (char *)NULL);
        fprintf(stderr, "exec nginx: %s\n", strerror(errno));
        _exit(127);
    }
    /* nginx holds the sockets now; connections wait in their backlog. */
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    close(life[1]);
    t->life_fd = life[0];
    free(conf);
    free(elog);
}

void
tlsenv_stop(struct tlsenv *t)
{
    int64_t deadline = clock_mono_ms() + 10000;
    char buf[64];
    int st;

    if (t->pid <= 0)
        return;
    kill(t->pid, SIGTERM);
    for (;;) {
        struct pollfd p = {t->life_fd, POLLIN, 0};
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0) {
            kill(t->pid, SIGKILL);
            break;
        }
        if (poll(&p, 1, (int)left) > 0 &&
            read(t->life_fd, buf, sizeof(buf)) <= 0)
            break;
    }
    close(t->life_fd);
    waitpid(t->pid, &st, 0);
    t->pid = 0;
}

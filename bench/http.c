/* bench/http.c: the HTTP client against `stepq mock`, run on demand (never
 * in tests).
 *
 *   build/http-rel/bench/bench_http [--runs 5] [--requests 20000]
 *       [--parallel 64] [--inflight 5000] [--latency-ms 1000] [--bin STEPQ]
 *
 * Two measurements, each the median of --runs runs, every run in a fresh
 * child process (so ru_maxrss is that run's peak) against a fresh
 * `stepq mock` process (so the client's CPU and memory are measured alone):
 *
 *  1. throughput: --requests chat completions with zero latency, --parallel
 *     at a time over keep-alive connections (also with 1 at a time):
 *     requests/s and client CPU time per request;
 *  2. in flight: --inflight requests sent at once to a mock that answers
 *     after --latency-ms: peak RSS above the idle client per in-flight
 *     request, client CPU per request, and the wall time of the batch.
 *     Measured twice: the first wave, which opens a connection for every
 *     request (socket, handshake, first touch of each transfer's memory),
 *     and the next wave of the same size over the connections the first
 *     one left open, as a worker running that many at once sees after its
 *     first turn.
 *
 * With --tls, every measurement runs again over TLS: Debian's nginx (one
 * worker process, TLS 1.3, ECDSA P-256 certificates of a throwaway CA made
 * by scripts/tls-certs.sh) in front of each run's mock, the client trusting
 * that CA and the system's (a bundle of both, 145 certificates) through the
 * request's ca_file, as a tier's does. nginx's CPU is
 * not counted: only the client's, as for the mock.
 *
 * The file-descriptor limit is raised to its hard limit first (each request
 * in flight holds a socket, and the mock child inherits the limit).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "common/clock.h"
#include "http/http.h"

#ifndef STEPQ_BIN_DEFAULT
#define STEPQ_BIN_DEFAULT "stepq"
#endif
#ifndef STEPQ_SRC_DIR
#define STEPQ_SRC_DIR "."
#endif

#define REQ_JSON                                                               \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"Summarize the merged "    \
    "pull requests of the night as JSON.\"}],\"max_tokens\":800}"

static const char *bin = STEPQ_BIN_DEFAULT;
static char tls_dir[64]; /* certificates and nginx files; "" without TLS */
/* --ca-path: a CA folder beside the bundle, as Debian's libcurl sets by
 * default; libcurl then caches no CA store (the cost before tiers kept
 * the folder out: a bundle parse for every new connection) */
static const char *ca_path;

/* ---- the mock process --------------------------------------------------- */

struct mockp {
    pid_t pid;
    int port;
    int out;
};

static int
mock_spawn(struct mockp *m, const char *script)
{
    char path[] = "/tmp/bench-http-XXXXXX";
    char line[128];
    size_t n = 0;
    int fd = mkstemp(path), p[2];

    if (fd < 0 || write(fd, script, strlen(script)) < 0 || pipe(p) != 0)
        return -1;
    close(fd);
    m->pid = fork();
    if (m->pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execl(bin, bin, "mock", "--port", "0", "--script", path, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    m->out = p[0];
    while (n + 1 < sizeof(line)) {
        struct pollfd pf = {p[0], POLLIN, 0};
        if (poll(&pf, 1, 5000) <= 0 || read(p[0], line + n, 1) != 1)
            break;
        if (line[n] == '\n')
            break;
        n++;
    }
    line[n] = '\0';
    unlink(path);
    if (sscanf(line, "listening 127.0.0.1:%d", &m->port) != 1) {
        fprintf(stderr, "bench_http: %s mock did not start\n", bin);
        kill(m->pid, SIGKILL);
        waitpid(m->pid, NULL, 0);
        return -1;
    }
    return 0;
}

static void
mock_end(struct mockp *m)
{
    kill(m->pid, SIGTERM);
    waitpid(m->pid, NULL, 0);
    close(m->out);
}

/* ---- nginx in front of the mock (--tls) -------------------------------- */

/* nginx_spawn starts nginx proxying 127.0.0.1:upstream over TLS on a port
 * of its own, bound here (port 0) and handed to nginx through its NGINX
 * variable: connections made before it is up wait in the backlog. */
static int
nginx_spawn(pid_t *pid, int upstream, int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t alen = sizeof(a);
    char conf[2048], path[128], env[32];
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    FILE *f;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(fd, 8192) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) != 0)
        return -1;
    *port = ntohs(a.sin_port);
    snprintf(
        conf, sizeof(conf),
        "%sdaemon off;\nworker_processes 1;\nworker_rlimit_nofile 40000;\n"
        "pid %s/nginx.pid;\nerror_log %s/nginx-error.log error;\n"
        "events { worker_connections 16000; }\n"
        "http {\n  access_log off;\n  client_body_temp_path %s/t-body;\n"
        "  proxy_temp_path %s/t-proxy;\n  fastcgi_temp_path %s/t-fcgi;\n"
        "  uwsgi_temp_path %s/t-uwsgi;\n  scgi_temp_path %s/t-scgi;\n"
        "  keepalive_requests 1000000;\n  ssl_protocols TLSv1.3;\n"
        "  ssl_certificate %s/server.pem;\n"
        "  ssl_certificate_key %s/server.key;\n"
        "  upstream mock { server 127.0.0.1:%d; keepalive 1024; }\n"
        "  server {\n    listen 127.0.0.1:%d ssl backlog=8192;\n"
        "    location / { proxy_pass http://mock; proxy_http_version 1.1;\n"
        "      proxy_set_header Connection \"\"; }\n  }\n}\n",
        geteuid() == 0 ? "user root;\n" : "", tls_dir, tls_dir, tls_dir,
        tls_dir, tls_dir, tls_dir, tls_dir, tls_dir, tls_dir, upstream, *port);
    snprintf(path, sizeof(path), "%s/nginx.conf", tls_dir);
    if ((f = fopen(path, "w")) == NULL || fputs(conf, f) < 0 || fclose(f) != 0)
        return -1;
    snprintf(env, sizeof(env), "%d;", fd);
    *pid = fork();
    if (*pid == 0) {
        char elog[128];
        snprintf(elog, sizeof(elog), "%s/nginx-error.log", tls_dir);
        setenv("NGINX", env, 1);
        execlp("nginx", "nginx", "-p", tls_dir, "-c", path, "-e", elog,
               (char *)NULL);
        _exit(127);
    }
    close(fd);
    return *pid > 0 ? 0 : -1;
}

/* tls_setup makes the throwaway CA and certificates in a fresh folder. */
static int
tls_setup(void)
{
    char cmd[512];

    snprintf(tls_dir, sizeof(tls_dir), "/tmp/bench-tls-XXXXXX");
    if (mkdtemp(tls_dir) == NULL)
        return -1;
    /* The client trusts bundle.pem: the system's CAs and the throwaway
     * one, so each parse of it costs what a parse of the system's does. */
    snprintf(cmd, sizeof(cmd),
             "sh %s/scripts/tls-certs.sh %s && cat "
             "/etc/ssl/certs/ca-certificates.crt %s/ca.pem >%s/bundle.pem",
             STEPQ_SRC_DIR, tls_dir, tls_dir, tls_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- one run, in a child ------------------------------------------------ */

struct run {
    uv_loop_t loop;
    http_client *c;
    struct http_request req;
    long total, sent, done, failed, parallel;
};

struct result {
    double rps;        /* requests per second (wall) */
    double cpu_us;     /* client CPU per request */
    double rss_per_kb; /* peak RSS above idle per in-flight request */
    double wall_s;
    long failed;
};

static double
cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static long
rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;

    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void
on_done(http_call *call, struct http_response *res, void *arg)
{
    struct run *r = arg;

    (void)call;
    r->done++;
    if (res->error != HTTP_ERR_NONE || res->status != 200) {
        if (r->failed++ == 0)
            fprintf(stderr, "bench_http: %s %d %s\n",
                    http_error_name(res->error), res->status, res->error_text);
    }
    if (r->sent < r->total) {
        r->sent++;
        if (http_send(r->c, &r->req, on_done, r, NULL) != 0)
            abort();
    }
}

static void
on_closed(void *arg)
{
    (void)arg;
}

/* wave sends total requests, parallel at a time, and runs the loop until
 * every one is answered. */
static void
wave(struct run *r, long total, long parallel)
{
    r->total = total;
    r->parallel = parallel;
    r->sent = r->done = 0;
    for (; r->sent < parallel && r->sent < total; r->sent++) {
        if (http_send(r->c, &r->req, on_done, r, NULL) != 0)
            abort();
    }
    while (r->done < total)
        uv_run(&r->loop, UV_RUN_ONCE);
}

/* run_child measures one wave; with warm, a wave of the same size runs
 * first, unmeasured, so the measured one reuses its connections. */
static struct result
run_child(int port, long total, long parallel, bool warm)
{
    /* As the worker sets it: its concurrency, here the requests at once. */
    struct http_client_opts o = {.max_idle_connections = parallel};
    struct result res = {0};
    struct run r = {0};
    cJSON *req = cJSON_Parse(REQ_JSON);
    char base[64], err[256];
    double t0, c0;
    long rss0;
    struct rusage ru;

    snprintf(base, sizeof(base), "%s://127.0.0.1:%d/v1",
             tls_dir[0] ? "https" : "http", port);
    uv_loop_init(&r.loop);
    if (http_client_new(&r.loop, &o, &r.c) != 0 ||
        http_chat_request(req, base, "bench-model", NULL, 60000, &r.req, err,
                          sizeof(err)) != 0)
        abort();
    if (tls_dir[0]) {
        char ca[128];
        snprintf(ca, sizeof(ca), "%s/bundle.pem", tls_dir);
        http_request_set_tls(&r.req, ca, ca_path, NULL, NULL);
    }
    cJSON_Delete(req);
    rss0 = rss_kb();
    if (warm)
        wave(&r, total, parallel);
    t0 = (double)clock_mono_ms() / 1e3;
    c0 = cpu_s();
    wave(&r, total, parallel);
    res.wall_s = (double)clock_mono_ms() / 1e3 - t0;
    res.cpu_us = (cpu_s() - c0) * 1e6 / (double)total;
    res.rps = (double)total / res.wall_s;
    res.failed = r.failed;
    getrusage(RUSAGE_SELF, &ru);
    res.rss_per_kb = (double)(ru.ru_maxrss - rss0) / (double)parallel;
    http_request_cleanup(&r.req);
    http_client_close(r.c, on_closed, NULL);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&r.loop) != 0)
        abort();
    return res;
}

/* run_once runs one measurement in a fresh child against a fresh mock. */
static int
run_once(const char *script, long total, long parallel, bool warm,
         struct result *out)
{
    struct mockp m;
    int p[2], st = 0, port;
    pid_t pid, ngx = 0;

    if (mock_spawn(&m, script) != 0 || pipe(p) != 0)
        return -1;
    port = m.port;
    if (tls_dir[0] && nginx_spawn(&ngx, m.port, &port) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        struct result r = run_child(port, total, parallel, warm);
        if (write(p[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    if (read(p[0], out, sizeof(*out)) != (ssize_t)sizeof(*out))
        st = -1;
    close(p[0]);
    waitpid(pid, NULL, 0);
    if (ngx > 0) {
        kill(ngx, SIGTERM);
        waitpid(ngx, NULL, 0);
    }
    mock_end(&m);
    return st;
}

static int
cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double
median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void
measure(const char *label, const char *script, int runs, long total,
        long parallel, bool memory, bool warm)
{
    double rps[32], cpu[32], rss[32], wall[32];
    long failed = 0;

    for (int i = 0; i < runs; i++) {
        struct result r;
        if (run_once(script, total, parallel, warm, &r) != 0) {
            fprintf(stderr, "bench_http: run failed\n");
            exit(1);
        }
        rps[i] = r.rps;
        cpu[i] = r.cpu_us;
        rss[i] = r.rss_per_kb;
        wall[i] = r.wall_s;
        failed += r.failed;
    }
    printf("%-39s %9.0f req/s  %7.1f us CPU/req", label, median(rps, runs),
           median(cpu, runs));
    if (memory)
        printf("  %6.1f KiB/in-flight  %5.2f s wall", median(rss, runs),
               median(wall, runs));
    printf("  (median of %d, %ld failed)\n", runs, failed);
}

int
main(int argc, char **argv)
{
    long requests = 20000, parallel = 64, inflight = 5000, latency = 1000;
    int runs = 5;
    bool tls = false;
    struct rlimit rl;
    char script[128], label[64];

    if (getenv("STEPQ_BIN") != NULL)
        bin = getenv("STEPQ_BIN");
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--tls") == 0) {
            tls = true;
            i--;
            continue;
        }
        if (strcmp(argv[i], "--help") == 0) {
            puts("usage: bench_http [--runs N] [--requests N] [--parallel N]\n"
                 "                  [--inflight N] [--latency-ms N] [--bin "
                 "STEPQ] [--tls] [--ca-path DIR]");
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_http: %s needs a value\n", argv[i]);
            return 2;
        }
        if (strcmp(argv[i], "--runs") == 0)
            runs = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--requests") == 0)
            requests = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--parallel") == 0)
            parallel = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--inflight") == 0)
            inflight = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--latency-ms") == 0)
            latency = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--bin") == 0)
            bin = argv[i + 1];
        else if (strcmp(argv[i], "--ca-path") == 0)
            ca_path = argv[i + 1];
        else {
            fprintf(stderr, "bench_http: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (runs < 1 || runs > 32 || requests < 1 || parallel < 1 || inflight < 1) {
        fprintf(stderr, "bench_http: bad numbers\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    if ((long)rl.rlim_cur < inflight + 64)
        fprintf(stderr, "bench_http: fd limit %ld is below %ld in flight\n",
                (long)rl.rlim_cur, inflight);
    printf("stepq mock: %s; fd limit %ld; nproc %ld\n", bin, (long)rl.rlim_cur,
           sysconf(_SC_NPROCESSORS_ONLN));

    for (int pass = 0; pass < (tls ? 2 : 1); pass++) {
        const char *how = pass ? "TLS, " : "";

        if (pass == 1 && tls_setup() != 0) {
            fprintf(stderr, "bench_http: cannot make certificates\n");
            return 1;
        }
        snprintf(label, sizeof(label), "%szero latency, %ld at a time", how,
                 parallel);
        measure(label, "{}", runs, requests, parallel, false, false);
        snprintf(label, sizeof(label), "%szero latency, 1 at a time", how);
        measure(label, "{}", runs, requests / 4, 1, false, false);
        snprintf(script, sizeof(script), "{\"latency_ms\": %ld}", latency);
        snprintf(label, sizeof(label), "%s%ld in flight, %ld ms latency", how,
                 inflight, latency);
        measure(label, script, runs, inflight, inflight, true, false);
        snprintf(label, sizeof(label), "%s%ld in flight, kept connections", how,
                 inflight);
        measure(label, script, runs, inflight, inflight, true, true);
    }
    return 0;
}

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
 * The file-descriptor limit is raised to its hard limit first (each request
 * in flight holds a socket, and the mock child inherits the limit).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "common/clock.h"
#include "worker/http.h"

#ifndef STEPQ_BIN_DEFAULT
#define STEPQ_BIN_DEFAULT "stepq"
#endif

#define REQ_JSON                                                               \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"Summarize the merged "    \
    "pull requests of the night as JSON.\"}],\"max_tokens\":800}"

static const char *bin = STEPQ_BIN_DEFAULT;

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

    snprintf(base, sizeof(base), "http://127.0.0.1:%d/v1", port);
    uv_loop_init(&r.loop);
    if (http_client_new(&r.loop, &o, &r.c) != 0 ||
        http_chat_request(req, base, "bench-model", NULL, 60000, &r.req, err,
                          sizeof(err)) != 0)
        abort();
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
    int p[2], st = 0;
    pid_t pid;

    if (mock_spawn(&m, script) != 0 || pipe(p) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        struct result r = run_child(m.port, total, parallel, warm);
        if (write(p[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    if (read(p[0], out, sizeof(*out)) != (ssize_t)sizeof(*out))
        st = -1;
    close(p[0]);
    waitpid(pid, NULL, 0);
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
    printf("%-34s %9.0f req/s  %7.1f us CPU/req", label, median(rps, runs),
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
    struct rlimit rl;
    char script[128], label[64];

    if (getenv("STEPQ_BIN") != NULL)
        bin = getenv("STEPQ_BIN");
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--help") == 0) {
            puts("usage: bench_http [--runs N] [--requests N] [--parallel N]\n"
                 "                  [--inflight N] [--latency-ms N] [--bin "
                 "STEPQ]");
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

    snprintf(label, sizeof(label), "zero latency, %ld at a time", parallel);
    measure(label, "{}", runs, requests, parallel, false, false);
    measure("zero latency, 1 at a time", "{}", runs, requests / 4, 1, false,
            false);
    snprintf(script, sizeof(script), "{\"latency_ms\": %ld}", latency);
    snprintf(label, sizeof(label), "%ld in flight, %ld ms latency", inflight,
             latency);
    measure(label, script, runs, inflight, inflight, true, false);
    snprintf(label, sizeof(label), "%ld in flight, kept connections", inflight);
    measure(label, script, runs, inflight, inflight, true, true);
    return 0;
}

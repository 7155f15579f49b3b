/* test_serve_load.c: `stepq serve` holding what its connection limit
 * promises, 1,000 keep-alive clients at once. The server starts with a
 * soft limit of 1,024 open files, the common default: it must raise its
 * own to hold 1,000 clients beside its own files (without that it takes
 * 960 and leaves the others waiting). Every client asks for the status,
 * then enqueues a job of its own on the same connection. Runs on SQLite
 * and (test_serve_load_pg) PostgreSQL. */
#include "tests/support/support.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/xalloc.h"
#include "serve/serve.h"
#include "tests/support/e2e.h"
#include "tests/support/servefix.h"

#define CLIENTS    1000
#define CHILD_SOFT 1024 /* the soft limit the server is started with */
/* The hard limit the server needs to raise its soft one to hold all of its
 * connections: SERVE_MAX_CONNS_DEFAULT and the 64 descriptors it keeps
 * spare (SPARE_FDS in serve/server.c). */
#define HARD_NEEDED (SERVE_MAX_CONNS_DEFAULT + 64)
#define TEST_SOFT   (CLIENTS + 256) /* the test's own: clients, the rest */
/* Each phase's deadline. Connecting may take a second or more: the
 * server listens with a backlog of 128, so in a burst of 1,000 connects
 * the kernel drops some SYNs, and those clients retry after 1 s (then 3 s,
 * 7 s, 15 s). */
#define PHASE_MS   20000
#define ANSWER_MAX 4096 /* one answer, headers and body */

/* One client: its socket, the request it is sending and the answer. */
struct client {
    int fd;
    char req[768];
    size_t req_len, sent;
    char in[ANSWER_MAX];
    size_t got;
    int status;
    size_t body_at, body_len;
    bool done, closing; /* answered; the answer said Connection: close */
};

/* Fails the test unless the hard limit lets the server hold them all. */
static void
need_hard_limit(void)
{
    struct rlimit rl;

    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    ck_assert_msg(rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= HARD_NEEDED,
                  "the hard limit on open files is %llu (ulimit -Hn): this "
                  "test needs at least %d, for the server's %d connections",
                  (unsigned long long)rl.rlim_max, HARD_NEEDED,
                  SERVE_MAX_CONNS_DEFAULT);
}

/* Sets the test process's soft limit on open files (children forked from
 * now on inherit it). */
static void
set_soft_limit(rlim_t soft)
{
    struct rlimit rl;

    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rl.rlim_cur = soft;
    ck_assert_msg(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit %llu: %s",
                  (unsigned long long)soft, strerror(errno));
}

/* The number after key on its line of /proc/PID/NAME, or -1. */
static long
proc_number(pid_t pid, const char *name, const char *key)
{
    char path[64], line[256];
    long v = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%ld/%s", (long)pid, name);
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    while (v < 0 && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, strlen(key)) == 0)
            v = strtol(line + strlen(key), NULL, 10);
    }
    fclose(f);
    return v;
}

/* How many descriptors pid has open. */
static int
open_fds(pid_t pid)
{
    char path[64];
    struct dirent *e;
    int n = 0;
    DIR *d;

    snprintf(path, sizeof(path), "/proc/%ld/fd", (long)pid);
    d = opendir(path);
    ck_assert_msg(d != NULL, "%s: %s", path, strerror(errno));
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* poll() on the CLIENTS entries of p (fd -1: skipped) until deadline;
 * past it, fails the test: left clients are still "what". */
static void
poll_by(struct pollfd *p, int64_t deadline, int left, const char *what)
{
    int64_t wait = deadline - clock_mono_ms();

    ck_assert_msg(wait > 0, "%d of %d clients %s after %d ms", left, CLIENTS,
                  what, PHASE_MS);
    ck_assert_msg(poll(p, CLIENTS, (int)wait) >= 0 || errno == EINTR,
                  "poll: %s", strerror(errno));
}

/* Fails the test unless client i's connect on fd succeeded. */
static void
expect_connected(int fd, int i)
{
    int err = 0;
    socklen_t len = sizeof(err);

    ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
    ck_assert_msg(err == 0, "client %d: connect: %s", i, strerror(err));
}

/* Starts a non-blocking connect for every client. */
static void
connect_start(struct client *c, int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    int rc;

    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < CLIENTS; i++) {
        c[i].fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        ck_assert_msg(c[i].fd >= 0, "client %d: socket: %s", i,
                      strerror(errno));
        rc = connect(c[i].fd, (struct sockaddr *)&sa, sizeof(sa));
        ck_assert_msg(rc == 0 || errno == EINPROGRESS, "client %d: connect: %s",
                      i, strerror(errno));
    }
}

/* Connects every client at once and waits until all are connected;
 * returns how long that took (ms). */
static int64_t
connect_all(struct client *c, int port)
{
    struct pollfd *p = xcalloc(CLIENTS, sizeof(*p));
    int64_t t0 = clock_mono_ms(), deadline = t0 + PHASE_MS;
    int left = CLIENTS;

    connect_start(c, port);
    for (int i = 0; i < CLIENTS; i++)
        p[i] = (struct pollfd){.fd = c[i].fd, .events = POLLOUT};
    while (left > 0) {
        poll_by(p, deadline, left, "not connected");
        for (int i = 0; i < CLIENTS; i++) {
            if (p[i].fd < 0 || p[i].revents == 0)
                continue;
            expect_connected(p[i].fd, i);
            p[i].fd = -1; /* poll() skips it from now on */
            left--;
        }
    }
    free(p);
    return clock_mono_ms() - t0;
}

/* Parses what came of c's answer; true once all of it is in. */
static bool
answer_complete(struct client *c)
{
    char *end = strstr(c->in, "\r\n\r\n"), *line;
    long len = -1;

    if (end == NULL)
        return false;
    ck_assert_msg(sscanf(c->in, "HTTP/1.1 %d ", &c->status) == 1,
                  "not an HTTP/1.1 answer: %.80s", c->in);
    for (line = strstr(c->in, "\r\n") + 2; line < end;
         line = strstr(line, "\r\n") + 2) {
        if (strncasecmp(line, "Content-Length:", 15) == 0)
            len = strtol(line + 15, NULL, 10);
        if (strncasecmp(line, "Connection: close", 17) == 0)
            c->closing = true;
    }
    ck_assert_msg(len >= 0, "an answer without Content-Length: %.200s", c->in);
    c->body_at = (size_t)(end + 4 - c->in);
    c->body_len = (size_t)len;
    return c->got >= c->body_at + c->body_len;
}

/* Does what poll() says c can do now: write the rest of its request,
 * or read more of its answer. */
static void
step(struct client *c, int i)
{
    ssize_t n;

    if (c->sent < c->req_len) {
        /* MSG_NOSIGNAL: a reset connection fails here, not by SIGPIPE */
        n = send(c->fd, c->req + c->sent, c->req_len - c->sent, MSG_NOSIGNAL);
        ck_assert_msg(n > 0 || errno == EAGAIN, "client %d: send: %s", i,
                      strerror(errno));
        c->sent += n > 0 ? (size_t)n : 0;
        return;
    }
    n = read(c->fd, c->in + c->got, sizeof(c->in) - 1 - c->got);
    ck_assert_msg(n != 0, "client %d: closed by the server after %zu bytes", i,
                  c->got);
    ck_assert_msg(n > 0 || errno == EAGAIN, "client %d: read: %s", i,
                  strerror(errno));
    c->got += n > 0 ? (size_t)n : 0;
    c->in[c->got] = '\0';
    ck_assert_msg(c->got < sizeof(c->in) - 1, "client %d: answer too long", i);
    c->done = answer_complete(c);
}

/* Sends every client's request at once and reads every answer, each
 * client with its own socket, all in one poll() loop with a deadline. */
static void
exchange(struct client *c)
{
    struct pollfd *p = xcalloc(CLIENTS, sizeof(*p));
    int64_t deadline = clock_mono_ms() + PHASE_MS;
    int left = CLIENTS;

    while (left > 0) {
        for (int i = 0; i < CLIENTS; i++) {
            short ev = c[i].sent < c[i].req_len ? POLLOUT : POLLIN;
            p[i] =
                (struct pollfd){.fd = c[i].done ? -1 : c[i].fd, .events = ev};
        }
        poll_by(p, deadline, left, "unanswered");
        for (int i = 0; i < CLIENTS; i++) {
            if (p[i].fd < 0 || p[i].revents == 0)
                continue;
            step(&c[i], i);
            left -= c[i].done;
        }
    }
    free(p);
}

/* Client i's next request: the status (enqueue false), or a job of its
 * own (key "load-I"). */
static void
ask(struct client *c, int i, bool enqueue)
{
    char body[256];
    int n;

    snprintf(body, sizeof(body),
             "{\"name\":\"n\",\"key\":\"load-%d\",\"steps\":[{\"name\":\"s\","
             "\"request\":{\"messages\":[{\"role\":\"user\",\"content\":"
             "\"hi\"}]}}]}",
             i);
    /* HTTP/1.1: the connection stays open unless either side says close */
    if (enqueue)
        n = snprintf(c->req, sizeof(c->req),
                     "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n" AUTH
                     "Content-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    else
        n = snprintf(c->req, sizeof(c->req),
                     "GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n" AUTH
                     "\r\n");
    ck_assert(n > 0 && (size_t)n < sizeof(c->req));
    c->req_len = (size_t)n;
    c->sent = c->got = c->body_at = c->body_len = 0;
    c->status = 0;
    c->done = c->closing = false;
}

/* Every client was answered status with a JSON object and kept alive;
 * *ids (unless NULL) gets its "id" member. */
static void
expect_all(struct client *c, int status, int *ids)
{
    for (int i = 0; i < CLIENTS; i++) {
        cJSON *o = cJSON_ParseWithLength(c[i].in + c[i].body_at, c[i].body_len);
        ck_assert_msg(c[i].status == status, "client %d: %d, not %d: %s", i,
                      c[i].status, status, c[i].in + c[i].body_at);
        ck_assert_msg(cJSON_IsObject(o), "client %d: not JSON: %s", i,
                      c[i].in + c[i].body_at);
        ck_assert_msg(!c[i].closing, "client %d: told Connection: close", i);
        if (ids != NULL)
            ids[i] = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "id"));
        cJSON_Delete(o);
    }
}

/* One round: every client asks at once, and all must be answered. */
static int64_t
round_trip(struct client *c, bool enqueue, int status, int *ids)
{
    int64_t t0 = clock_mono_ms();

    for (int i = 0; i < CLIENTS; i++)
        ask(&c[i], i, enqueue);
    exchange(c);
    expect_all(c, status, ids);
    return clock_mono_ms() - t0;
}

/* The ids of the enqueued jobs are 1..CLIENTS, each once. */
static void
expect_distinct(const int *ids)
{
    bool *seen = xcalloc(CLIENTS + 1, sizeof(*seen));

    for (int i = 0; i < CLIENTS; i++) {
        ck_assert_msg(ids[i] >= 1 && ids[i] <= CLIENTS && !seen[ids[i]],
                      "client %d: job id %d", i, ids[i]);
        seen[ids[i]] = true;
    }
    free(seen);
}

/* What the server says is queued, asked on a new connection. */
static int
queued_jobs(const struct server *s)
{
    int st = 0;
    cJSON *o = serve_call(s, "GET", "/v1/status", NULL, &st);
    const cJSON *n =
        cJSON_GetObjectItem(cJSON_GetObjectItem(o, "jobs"), "queued");
    int v = cJSON_IsNumber(n) ? n->valueint : -1;

    ck_assert_int_eq(st, 200);
    cJSON_Delete(o);
    return v;
}

/* Starts the server with the soft limit of CHILD_SOFT, which the fork in
 * serve_start passes on; then gives the test room for its clients. */
static void
start_at_common_limit(struct server *s)
{
    /* --timeout 60: a slow (sanitizer) run must not see idle clients
     * closed between the rounds; the default is 30 s */
    const char *args[] = {"--timeout", "60", NULL};

    need_hard_limit();
    set_soft_limit(CHILD_SOFT);
    ck_assert_int_eq(serve_start(s, TOKEN, args), -1);
    set_soft_limit(TEST_SOFT);
    /* it raised its own limit to hold all its connections */
    ck_assert_int_ge(proc_number(s->pid, "limits", "Max open files"),
                     SERVE_MAX_CONNS_DEFAULT);
}

/* Says how long each phase took and what the server held (stderr). */
static void
note(const struct server *s, const int64_t ms[3], int held)
{
    fprintf(stderr,
            "serve_load: connect %lld ms, status %lld ms, enqueue %lld ms; "
            "server: %d descriptors open, peak RSS %ld kB\n",
            (long long)ms[0], (long long)ms[1], (long long)ms[2], held,
            proc_number(s->pid, "status", "VmHWM:"));
}

/* 1,000 clients connect at once and are all answered the status; on the
 * same 1,000 connections, which the server holds open all at once, each
 * enqueues a job, and all 1,000 are queued. */
START_TEST(test_a_thousand_keep_alive_clients)
{
    struct client *c = xcalloc(CLIENTS, sizeof(*c));
    int *ids = xcalloc(CLIENTS, sizeof(*ids));
    int64_t ms[3];
    struct server s;
    int held;

    start_at_common_limit(&s);
    ms[0] = connect_all(c, s.port);
    ms[1] = round_trip(c, false, 200, NULL);
    held = open_fds(s.pid);
    ck_assert_int_ge(held, CLIENTS);
    ms[2] = round_trip(c, true, 201, ids);
    expect_distinct(ids);
    note(&s, ms, held);
    for (int i = 0; i < CLIENTS; i++)
        close(c[i].fd);
    ck_assert_int_eq(queued_jobs(&s), CLIENTS);
    serve_stop(&s);
    free(ids);
    free(c);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("serve: load");
    TCase *tc = tcase_create("load");

    tcase_add_checked_fixture(tc, serve_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_a_thousand_keep_alive_clients);
    suite_add_tcase(s, tc);
    return s;
}

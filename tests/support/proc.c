/* proc.c: running the stepq binary to completion (run_stepq and its
 * wrappers), its path, and paths into the source tree. */
#include "tests/support/support.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/xalloc.h"

const char *
stepq_bin(void)
{
    /* STEPQ_TEST_BIN overrides what CTest sets: scripts/valgrind.sh points
     * it at a wrapper that runs stepq under valgrind. */
    const char *b = getenv("STEPQ_TEST_BIN");

    if (b != NULL && b[0] != '\0')
        return b;
    b = getenv("STEPQ_BIN");
    ck_assert_msg(b != NULL && b[0] != '\0', "STEPQ_BIN is not set");
    return b;
}

char *
source_path(const char *rel)
{
    const char *src = getenv("STEPQ_SRC");
    ck_assert_msg(src != NULL && src[0] != '\0', "STEPQ_SRC is not set");
    return tmpdir_join(src, rel);
}

struct sink {
    int fd;
    char *buf;
    size_t len, cap;
};

static void
sink_read(struct sink *s)
{
    char tmp[65536];
    ssize_t n = read(s->fd, tmp, sizeof(tmp));

    if (n <= 0) {
        close(s->fd);
        s->fd = -1;
        return;
    }
    if (s->len + (size_t)n + 1 > s->cap) {
        s->cap = (s->len + (size_t)n + 1) * 2;
        s->buf = xrealloc(s->buf, s->cap);
    }
    memcpy(s->buf + s->len, tmp, (size_t)n);
    s->len += (size_t)n;
    s->buf[s->len] = '\0';
}

const char *run_db;

const char **
run_argv(const char *first, const char *const *argv)
{
    size_t argc = 0, n = 0;
    const char **args;

    while (argv[argc] != NULL)
        argc++;
    args = xcalloc(argc + 5, sizeof(*args));
    args[n++] = stepq_bin();
    if (run_db != NULL) {
        args[n++] = "--db";
        args[n++] = run_db;
    }
    if (first != NULL)
        args[n++] = first;
    memcpy(args + n, argv, argc * sizeof(*args));
    return args;
}

void
run_stepq(const char *const *argv, const char *input, struct run_result *res)
{
    int in[2], out[2], err[2], st;
    size_t in_len = input ? strlen(input) : 0, in_off = 0;
    const char **args = run_argv(NULL, argv);
    struct sink sinks[2];
    int64_t deadline = clock_mono_ms() + 60000;
    pid_t pid;

    ck_assert_int_eq(pipe(in), 0);
    ck_assert_int_eq(pipe(out), 0);
    ck_assert_int_eq(pipe(err), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        close(in[1]);
        close(out[0]);
        close(err[0]);
        execv(args[0], (char *const *)args);
        _exit(127);
    }
    free(args);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    signal(SIGPIPE, SIG_IGN);
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    if (in_len == 0) {
        close(in[1]);
        in[1] = -1;
    }
    sinks[0] = (struct sink){out[0], xcalloc(1, 1), 0, 1};
    sinks[1] = (struct sink){err[0], xcalloc(1, 1), 0, 1};
    while (sinks[0].fd >= 0 || sinks[1].fd >= 0) {
        struct pollfd p[3] = {{sinks[0].fd, POLLIN, 0},
                              {sinks[1].fd, POLLIN, 0},
                              {in[1], POLLOUT, 0}};
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0) {
            kill(pid, SIGKILL);
            ck_abort_msg("stepq %s ran longer than 60 s", argv[0]);
        }
        if (poll(p, 3, (int)left) < 0 && errno != EINTR)
            ck_abort_msg("poll: %s", strerror(errno));
        for (int i = 0; i < 2; i++) {
            if (p[i].revents)
                sink_read(&sinks[i]);
        }
        if (in[1] >= 0 && p[2].revents) {
            ssize_t n = write(in[1], input + in_off, in_len - in_off);
            if (n > 0)
                in_off += (size_t)n;
            if (n < 0 || in_off == in_len) {
                close(in[1]);
                in[1] = -1;
            }
        }
    }
    if (in[1] >= 0)
        close(in[1]);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    res->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    res->out = sinks[0].buf;
    res->err = sinks[1].buf;
}

void
run_result_free(struct run_result *res)
{
    free(res->out);
    free(res->err);
    res->out = res->err = NULL;
}

int
run_cmd(struct run_result *res, const char *input, const char *const *argv)
{
    run_stepq(argv, input, res);
    return res->status;
}

int
run_args(struct run_result *res, const char *const *argv)
{
    return run_cmd(res, NULL, argv);
}

int
run_job_count(const char *db)
{
    struct run_result r;
    int total = 0;
    cJSON *o, *it;

    ck_assert_int_eq(RUN(&r, NULL, "status", "--json", "--db", db), 0);
    o = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(o);
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(o, "jobs"))
    {
        total += it->valueint;
    }
    cJSON_Delete(o);
    run_result_free(&r);
    return total;
}

char *
job_lines(int count, int bad_line)
{
    size_t cap = (size_t)count * 160 + 1, len = 0;
    char *t = xmalloc(cap);

    for (int i = 0; i < count; i++)
        len += (size_t)snprintf(
            t + len, cap - len,
            i + 1 == bad_line
                ? "{\"name\":\"n\",\"key\":\"s%d\"}\n"
                : "{\"name\":\"n\",\"key\":\"s%d\",\"steps\":[{\"name\":"
                  "\"a\",\"request\":{\"messages\":[{\"role\":\"user\","
                  "\"content\":\"hi\"}]}}]}\n",
            i);
    return t;
}

int
run_sh(const char *cmd, char **out)
{
    char *full, buf[4096], *acc = xcalloc(1, 1);
    size_t len = 0, n, flen = strlen(cmd) + 16;
    FILE *p;
    int st;

    full = xmalloc(flen);
    snprintf(full, flen, "(%s) 2>&1", cmd);
    p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) {
        acc = xrealloc(acc, len + n + 1);
        memcpy(acc + len, buf, n);
        len += n;
        acc[len] = '\0';
    }
    st = pclose(p);
    free(full);
    *out = acc;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

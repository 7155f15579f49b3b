/* mockproc.c: the real `stepq mock` as a child process of a test, and the
 * fixture, script and log helpers the mock suites share.
 */
#include "tests/support/mockproc.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "tests/support/support.h"

/* read_line reads one line from fd within timeout_ms; returns its length,
 * or -1 on EOF or timeout. */
static int
read_line(int fd, char *buf, size_t cap, int timeout_ms)
{
    int64_t deadline = clock_mono_ms() + timeout_ms;
    size_t n = 0;

    while (n + 1 < cap) {
        struct pollfd p = {fd, POLLIN, 0};
        int64_t left = deadline - clock_mono_ms();
        ssize_t r;

        if (left <= 0)
            return -1;
        if (poll(&p, 1, (int)left) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (p.revents == 0)
            continue;
        r = read(fd, buf + n, 1);
        if (r <= 0)
            return -1;
        if (buf[n] == '\n') {
            buf[n] = '\0';
            return (int)n;
        }
        n++;
    }
    return -1;
}

void
mockproc_spawn(struct mockproc *mp, const char *const *argv, int timeout_ms)
{
    char line[256];
    int out[2], port = 0;
    pid_t pid;

    ck_assert_int_eq(pipe(out), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    mp->pid = pid;
    mp->out_fd = out[0];
    if (read_line(out[0], line, sizeof(line), timeout_ms) < 0 ||
        sscanf(line, "listening 127.0.0.1:%d", &port) != 1 || port <= 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(out[0]);
        mp->pid = 0;
        mp->out_fd = -1;
        ck_abort_msg("%s did not print its listening line in %d ms", argv[0],
                     timeout_ms);
    }
    mp->port = port;
}

void
mockproc_start(struct mockproc *mp, const char *const *args)
{
    const char *bin = stepq_bin();
    const char **argv;
    size_t n = 0;

    while (args != NULL && args[n] != NULL)
        n++;
    argv = xcalloc(n + 5, sizeof(*argv));
    argv[0] = bin;
    argv[1] = "mock";
    argv[2] = "--port";
    argv[3] = "0";
    for (size_t i = 0; i < n; i++)
        argv[4 + i] = args[i];
    mockproc_spawn(mp, argv, 5000);
    free(argv);
}

int
mockproc_stop(struct mockproc *mp)
{
    int64_t deadline = clock_mono_ms() + 10000;
    char buf[256];
    int st = 0;

    if (mp->pid <= 0)
        return -1;
    kill(mp->pid, SIGTERM);
    /* The stdout pipe reaches EOF when the child exits: wait on that. */
    for (;;) {
        struct pollfd p = {mp->out_fd, POLLIN, 0};
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0) {
            kill(mp->pid, SIGKILL);
            break;
        }
        if (poll(&p, 1, (int)left) > 0 &&
            read(mp->out_fd, buf, sizeof(buf)) <= 0)
            break;
    }
    close(mp->out_fd);
    waitpid(mp->pid, &st, 0);
    mp->pid = 0;
    mp->out_fd = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

char *
mockproc_script(const char *text_or_name)
{
    char rel[256], *path, *text = NULL;
    size_t len = 0;

    if (text_or_name[0] == '{')
        return xstrdup(text_or_name);
    snprintf(rel, sizeof(rel), "tests/data/mock/%s", text_or_name);
    path = source_path(rel);
    ck_assert_msg(file_read_all(path, 1 << 20, &text, &len) == 0,
                  "cannot read %s", path);
    free(path);
    return text;
}

int
mockproc_start_script(struct mockproc *mp, const char *dir,
                      const char *text_or_name)
{
    char *script = mockproc_script(text_or_name);
    char *sp = tmpdir_write(dir, "script.json", script, strlen(script));
    char *lp = tmpdir_join(dir, "log.jsonl");
    const char *args[] = {"--script", sp, "--log", lp, NULL};

    mockproc_start(mp, args);
    free(script);
    free(sp);
    free(lp);
    return mp->port;
}

cJSON *
mockproc_read_log(const char *dir, int want)
{
    char *path = tmpdir_join(dir, "log.jsonl");
    int64_t deadline = clock_mono_ms() + 5000;
    cJSON *arr;

    for (;;) {
        char *text = NULL, *save = NULL;
        size_t len = 0;
        arr = cJSON_CreateArray();
        if (file_read_all(path, 1 << 24, &text, &len) == 0) {
            for (char *l = strtok_r(text, "\n", &save); l != NULL;
                 l = strtok_r(NULL, "\n", &save)) {
                cJSON *j = cJSON_Parse(l);
                ck_assert_msg(j != NULL, "log line is not JSON: %s", l);
                cJSON_AddItemToArray(arr, j);
            }
            free(text);
        }
        if (cJSON_GetArraySize(arr) >= want || clock_mono_ms() > deadline)
            break;
        cJSON_Delete(arr);
        poll(NULL, 0, 10);
    }
    free(path);
    return arr;
}

char *mockproc_dir;
struct mockproc mockproc_mp;

void
mockproc_setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    mockproc_dir = tmpdir_new();
    memset(&mockproc_mp, 0, sizeof(mockproc_mp));
}

void
mockproc_teardown(void)
{
    mockproc_stop(&mockproc_mp);
    tmpdir_remove(mockproc_dir);
    mockproc_dir = NULL;
}

int
mockproc_fixture_start(const char *text_or_name)
{
    return mockproc_start_script(&mockproc_mp, mockproc_dir, text_or_name);
}

/* pgfix.c: the test run's PostgreSQL cluster (its URL from
 * $STEPQ_TEST_PG_DIR/url) and a fresh schema per store, made by running
 * psql (see pgfix.h). */
#include "tests/support/pgfix.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "common/xalloc.h"

static char url_cache[1024];

static int
url_path(char *buf, size_t size)
{
    const char *dir = getenv("STEPQ_TEST_PG_DIR");
    int n;

    if (dir == NULL || dir[0] == '\0')
        return -ENOENT;
    n = snprintf(buf, size, "%s/url", dir);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

bool
pgfix_available(void)
{
    char path[1024];

    return url_path(path, sizeof(path)) == 0 && access(path, R_OK) == 0;
}

const char *
pgfix_url(void)
{
    char path[1024];
    FILE *f;
    size_t len;

    if (url_cache[0] != '\0')
        return url_cache;
    if (url_path(path, sizeof(path)) != 0 || (f = fopen(path, "r")) == NULL)
        return NULL;
    if (fgets(url_cache, sizeof(url_cache), f) == NULL)
        url_cache[0] = '\0';
    fclose(f);
    len = strcspn(url_cache, "\r\n");
    url_cache[len] = '\0';
    return len > 0 ? url_cache : NULL;
}

/* Runs `psql -X -q -A -t -v ON_ERROR_STOP=1 URL -c SQL` (stdin from
 * /dev/null, stderr shared) and waits for it; with out NULL its output is
 * discarded. */
int
pgfix_query(const char *url, const char *sql, char **out)
{
    int fds[2] = {-1, -1}, st, rc = 0;
    char *acc = NULL;
    size_t len = 0;
    pid_t pid;

    if (out != NULL && pipe(fds) != 0)
        return -errno;
    pid = fork();
    if (pid < 0) {
        rc = -errno;
        goto out;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, STDIN_FILENO);
        dup2(out != NULL ? fds[1] : null, STDOUT_FILENO);
        execlp("psql", "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
               url, "-c", sql, (char *)NULL);
        _exit(127);
    }
    if (out != NULL) {
        char buf[4096];
        ssize_t n;

        close(fds[1]);
        fds[1] = -1;
        acc = xcalloc(1, 1);
        while ((n = read(fds[0], buf, sizeof(buf))) > 0 ||
               (n < 0 && errno == EINTR)) {
            if (n < 0)
                continue;
            acc = xrealloc(acc, len + (size_t)n + 1);
            memcpy(acc + len, buf, (size_t)n);
            len += (size_t)n;
            acc[len] = '\0';
        }
    }
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            rc = -errno;
            goto out;
        }
    }
    rc = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
out:
    if (fds[0] >= 0)
        close(fds[0]);
    if (fds[1] >= 0)
        close(fds[1]);
    if (rc == 0 && out != NULL)
        *out = acc;
    else
        free(acc);
    return rc;
}

int
pgfix_location(char *buf, size_t size)
{
    static unsigned calls;
    const char *url = pgfix_url();
    char schema[64], sql[128];
    int n, rc;

    if (size > 0)
        buf[0] = '\0';
    if (url == NULL)
        return -ENOENT;
    snprintf(schema, sizeof(schema), "t%ld_%ld_%u", (long)getpid(),
             (long)time(NULL), calls++);
    n = snprintf(buf, size, "%s%soptions=-csearch_path%%3D%s", url,
                 strchr(url, '?') != NULL ? "&" : "?", schema);
    if (n < 0 || (size_t)n >= size)
        return -ENOSPC;
    snprintf(sql, sizeof(sql), "CREATE SCHEMA %s", schema);
    rc = pgfix_query(url, sql, NULL);
    return rc;
}

bool
pgfix_backend_is_pg(void)
{
    const char *b = getenv("STEPQ_TEST_BACKEND");

    return b != NULL && strcmp(b, "pg") == 0;
}

char *
pgfix_db_new(const char *dir, const char *name, bool scheme)
{
    char buf[1200];
    int rc;

    if (pgfix_backend_is_pg()) {
        rc = pgfix_location(buf, sizeof(buf));
        ck_assert_msg(rc == 0, "no PostgreSQL store (STEPQ_TEST_PG_DIR=%s): %s",
                      getenv("STEPQ_TEST_PG_DIR"), strerror(-rc));
    } else {
        snprintf(buf, sizeof(buf), "%s%s%s%s", scheme ? "sqlite:" : "",
                 dir ? dir : "", dir ? "/" : "", name);
    }
    return xstrdup(buf);
}

/* libstepq_host.c: a program that links libstepq and has its own xmalloc
 * and log_write, as a host program may. test_examples builds it against
 * the installed library, statically and dynamically.
 *
 *   libstepq_host DB NEWER_DB
 *
 * DB holds a stepq database, NEWER_DB one from a newer stepq (so that the
 * library logs). Had libstepq called the host's functions, the host's
 * xmalloc would have returned NULL (the library would crash) and the
 * count would not be 0. Prints "host calls 0" and exits 0 when all is
 * well. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "stepq.h"

static int host_calls;

/* The host's own helpers, with the same names as libstepq's internals. */
void *xmalloc(size_t n);
void log_write(int level, const char *fmt, ...);

void *
xmalloc(size_t n)
{
    (void)n;
    host_calls++;
    return NULL;
}

void
log_write(int level, const char *fmt, ...)
{
    (void)level;
    (void)fmt;
    host_calls++;
}

int
main(int argc, char **argv)
{
    const char *job = "{\"name\":\"host\",\"key\":\"host-1\",\"steps\":["
                      "{\"name\":\"a\",\"request\":{\"messages\":[{\"role\":"
                      "\"user\",\"content\":\"hi\"}]}}]}";
    char err[256], state[32];
    stepq *q = NULL;
    int64_t id = 0;
    bool dup = false;
    int rc;

    if (argc != 3) {
        fprintf(stderr, "usage: %s DB NEWER_DB\n", argv[0]);
        return 2;
    }
    if ((rc = stepq_open(argv[2], &q, err, sizeof(err))) != -ENOTSUP) {
        fprintf(stderr, "open %s: %d (%s), want -ENOTSUP\n", argv[2], rc, err);
        return 1;
    }
    if ((rc = stepq_open(argv[1], &q, err, sizeof(err))) != 0) {
        fprintf(stderr, "open %s: %s\n", argv[1], err);
        return 1;
    }
    rc = stepq_enqueue(q, job, NULL, &id, &dup, err, sizeof(err));
    if (rc == 0)
        rc = stepq_job_state(q, id, state, sizeof(state));
    stepq_close(q);
    if (rc != 0) {
        fprintf(stderr, "enqueue: %d %s\n", rc, err);
        return 1;
    }
    printf("job %lld %s, host calls %d\n", (long long)id, state, host_calls);
    return host_calls == 0 ? 0 : 1;
}

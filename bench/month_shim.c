/* month_shim.c: preloaded before libfaketime by bench/month.py (and by
 * the tests' e2e_spawn_faked, built by tests/CMakeLists.txt), so that
 * the waits of an event loop keep the host's time. libfaketime divides the
 * timeout of epoll_wait, poll and select by its speed (720 at a night of
 * 120 s), and libuv's waits of 100 ms or less become 0: a worker that has
 * nothing to do spins at 90% of a core instead of sleeping. The processes
 * run their timers on the host's monotonic clock
 * (FAKETIME_DONT_FAKE_MONOTONIC=1), so the host's timeouts are the right
 * ones. Each function here is libc's own, looked up past libfaketime.
 * Built by month.py: cc -shared -fPIC -O2 month_shim.c -o month_shim.so
 * -ldl. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>

/* Sets the function pointer at fn (size bytes) to libc's definition of
 * name (abort if there is none: nothing could run). Copied, as ISO C has
 * no conversion from dlsym's object pointer to a function pointer. */
static void
libc_sym(const char *name, void *fn, size_t size)
{
    static void *libc;
    void *f;

    if (libc == NULL)
        libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (libc == NULL || (f = dlsym(libc, name)) == NULL)
        abort();
    memcpy(fn, &f, size);
}

int
epoll_wait(int fd, struct epoll_event *ev, int n, int timeout)
{
    static int (*real)(int, struct epoll_event *, int, int);

    if (real == NULL)
        libc_sym("epoll_wait", &real, sizeof(real));
    return real(fd, ev, n, timeout);
}

int
epoll_pwait(int fd, struct epoll_event *ev, int n, int timeout,
            const sigset_t *mask)
{
    static int (*real)(int, struct epoll_event *, int, int, const sigset_t *);

    if (real == NULL)
        libc_sym("epoll_pwait", &real, sizeof(real));
    return real(fd, ev, n, timeout, mask);
}

int
poll(struct pollfd *fds, nfds_t n, int timeout)
{
    static int (*real)(struct pollfd *, nfds_t, int);

    if (real == NULL)
        libc_sym("poll", &real, sizeof(real));
    return real(fds, n, timeout);
}

int
select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *timeout)
{
    static int (*real)(int, fd_set *, fd_set *, fd_set *, struct timeval *);

    if (real == NULL)
        libc_sym("select", &real, sizeof(real));
    return real(n, r, w, e, timeout);
}

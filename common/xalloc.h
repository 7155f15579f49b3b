/* xalloc.h: allocation that aborts on out-of-memory (Redis policy).
 *
 * stepq treats OOM as fatal: the process prints a message and aborts; leases
 * expire and another worker picks up the jobs.  Sizes that come from input
 * (bodies, files) must NOT use these: use a capped malloc and return -E2BIG.
 */
#ifndef STEPQ_COMMON_XALLOC_H
#define STEPQ_COMMON_XALLOC_H

#include <stddef.h>

/* xmalloc allocates n bytes; never returns NULL. Caller frees with free(). */
void *xmalloc(size_t n);
/* xcalloc allocates n zeroed elements of size sz; never returns NULL. */
void *xcalloc(size_t n, size_t sz);
/* xrealloc resizes p to n bytes; never returns NULL. */
void *xrealloc(void *p, size_t n);
/* xstrdup copies s (NULL gives NULL). Caller frees with free(). */
char *xstrdup(const char *s);
/* xstrndup copies at most n bytes of s and terminates the copy. */
char *xstrndup(const char *s, size_t n);

/* xalloc_keep_freed tunes the C library's allocator for a process that
 * runs for long and frees in bursts (the worker, the mock, the server):
 * freed memory up to 64 MiB is kept for reuse instead of being handed
 * back to the system, and the heap grows 16 MiB at a time. glibc's
 * defaults hand back anything above 128 KiB at the top of the heap, and a
 * worker with hundreds of requests in flight then shrinks and regrows its
 * heap every loop turn: a system call and fresh zeroed pages each time
 * (about 15% of the worker's CPU per step at concurrency 256). Best
 * effort: a C library without these settings is left as it is, and so is
 * a program whose malloc is not the C library's (the stepq program built
 * with mimalloc, cmake/allocator.cmake). Call it once, before the process
 * starts its work. */
void xalloc_keep_freed(void);

/* A growing byte buffer: p holds len bytes and a NUL after them (p is
 * NULL until the first put). Start from {0}; free p with free(). Not for
 * sizes an input chooses without a cap (see above). */
struct xbuf {
    char *p;
    size_t len, cap;
};
/* xbuf_put appends n bytes of s to b. */
void xbuf_put(struct xbuf *b, const char *s, size_t n);
/* xbuf_lit appends a string literal. */
#define xbuf_lit(b, lit) xbuf_put((b), (lit), sizeof(lit) - 1)

#endif

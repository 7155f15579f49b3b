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

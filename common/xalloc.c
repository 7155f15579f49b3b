/* xalloc.c: allocation that prints and aborts on out of memory. */
#include "common/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

static void
oom(size_t n)
{
    fprintf(stderr, "stepq: out of memory allocating %zu bytes\n", n);
    abort();
}

void *
xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

void *
xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (p == NULL)
        oom(n * sz);
    return p;
}

void *
xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        oom(n);
    return q;
}

char *
xstrdup(const char *s)
{
    if (s == NULL)
        return NULL;
    return xstrndup(s, strlen(s));
}

char *
xstrndup(const char *s, size_t n)
{
    size_t len = 0;
    char *p;

    if (s == NULL)
        return NULL;
    while (len < n && s[len] != '\0')
        len++;
    p = xmalloc(len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

void
xbuf_put(struct xbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap)
            cap *= 2;
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void
xalloc_keep_freed(void)
{
#if defined(__GLIBC__)
    /* Setting any of these turns off glibc's own adjustment of the mmap
     * threshold, so it is set too: blocks up to 4 MiB (the default cap on
     * an answer) come from the heap and are reused, not mapped and
     * unmapped each time. mallopt only fails on a bad parameter, and a
     * failure leaves the default, which is correct, only slower. */
    (void)mallopt(M_MMAP_THRESHOLD, 4 << 20);
    (void)mallopt(M_TRIM_THRESHOLD, 64 << 20);
    (void)mallopt(M_TOP_PAD, 16 << 20);
#endif
}

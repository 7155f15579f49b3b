/* file.c: reading a whole file or standard input, capped. */
#include "common/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/xalloc.h"

int
file_read_all(const char *path, size_t max, char **out, size_t *len)
{
    FILE *f = NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    int rc = 0;

    if (strcmp(path, "-") == 0) {
        f = stdin;
    } else {
        struct stat sb;

        f = fopen(path, "rb");
        if (f == NULL) {
            if (errno == ENOENT || errno == ENOTDIR)
                return -ENOENT;
            log_error("cannot open %s: %s", path, strerror(errno));
            return -EIO;
        }
        /* A folder opens, then fails to read: name it for what it is. */
        if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
            fclose(f);
            return -EISDIR;
        }
    }
    for (;;) {
        size_t got;
        if (n == cap) {
            /* Grow geometrically, but never past max + 1: one byte beyond
             * the cap is enough to know the input is too large. */
            size_t ncap = cap ? cap * 2 : 65536;
            if (ncap > max + 1)
                ncap = max + 1;
            if (ncap <= cap) {
                rc = -E2BIG;
                goto out;
            }
            buf = xrealloc(buf, ncap + 1);
            cap = ncap;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n > max) {
            rc = -E2BIG;
            goto out;
        }
        if (got == 0) {
            if (ferror(f)) {
                log_error("cannot read %s: %s", path, strerror(errno));
                rc = -EIO;
            }
            break;
        }
    }
out:
    if (f != stdin)
        fclose(f);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    if (buf == NULL)
        buf = xmalloc(1);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

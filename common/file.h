/* file.h: whole-file reads with a size cap. */
#ifndef STEPQ_COMMON_FILE_H
#define STEPQ_COMMON_FILE_H

#include <stddef.h>

#include "common/defs.h"

/* file_read_all reads a whole file (at most max bytes) into a NUL-terminated
 * buffer; path "-" reads standard input. Returns 0, -ENOENT (no such file),
 * -EISDIR (a folder), -E2BIG (larger than max), or -EIO (errno logged). Caller
 * owns *out and frees it with free(); *len gets the length. Out-params
 * untouched on failure. */
STEPQ_MUST_CHECK int file_read_all(const char *path, size_t max, char **out,
                                   size_t *len);

#endif

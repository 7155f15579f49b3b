/* location.h: what kind of store a database location names, as far as
 * every module needs to know it (config resolves paths against its
 * folder; queue/ picks the backend). Pure string checks. */
#ifndef STEPQ_COMMON_LOCATION_H
#define STEPQ_COMMON_LOCATION_H

#include <stdbool.h>

/* location_is_keywords is true when location is in libpq's keyword form:
 * its first word (after any blanks) is an identifier followed by '='
 * (blanks allowed around it), as in "host=/tmp dbname=x". */
bool location_is_keywords(const char *location);

/* location_is_path is true when location names a file (a plain path, or
 * "sqlite:PATH"): it is neither a URL ("scheme://...") nor in libpq's
 * keyword form. */
bool location_is_path(const char *location);

#endif

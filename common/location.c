/* location.c: telling a file path from a URL or libpq's keyword form. */
#include "common/location.h"

#include <string.h>

static bool
is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
           c == '\v';
}

static bool
is_ident(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
}

bool
location_is_keywords(const char *location)
{
    const char *p = location;

    if (p == NULL)
        return false;
    while (is_blank(*p))
        p++;
    if (!is_ident(*p, true))
        return false;
    while (is_ident(*p, false))
        p++;
    while (is_blank(*p))
        p++;
    return *p == '=';
}

bool
location_is_path(const char *location)
{
    return location != NULL && strstr(location, "://") == NULL &&
           !location_is_keywords(location);
}

/* util.c: helpers shared by the SQLite files: growing result arrays,
 * copying and binding text, stepping a statement that returns no rows. */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

void *
q__grow(void *v, size_t len, size_t *cap, size_t elem)
{
    if (len == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        v = xrealloc(v, *cap * elem);
    }
    memset((char *)v + len * elem, 0, elem);
    return v;
}

char *
q__col_text(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? xstrdup((const char *)t) : NULL;
}

void
q__bind_text(sqlite3_stmt *s, int i, const char *v)
{
    if (v == NULL)
        sqlite3_bind_null(s, i);
    else
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
}

/* Steps a statement that yields no rows; -EIO/-EBUSY on failure. */
int
q__run_done(q_db *db, sqlite3_stmt *s, const char *what)
{
    if (s == NULL)
        return -EIO;
    if (sqlite3_step(s) != SQLITE_DONE)
        return q__db_err(db, what);
    return 0;
}

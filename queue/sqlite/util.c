/* util.c: helpers shared by the SQLite files: growing result arrays,
 * copying and binding text, stepping a statement that returns no rows. */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

/* Makes room for element len of an array of *cap elements of elem bytes
 * (doubling, aborting on OOM) and zeroes it; returns the array. */
static void *
grow(void *v, size_t len, size_t *cap, size_t elem)
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
q__run_done(struct q__sqlite *db, sqlite3_stmt *s, const char *what)
{
    if (s == NULL)
        return -EIO;
    if (sqlite3_step(s) != SQLITE_DONE)
        return q__db_err(db, what);
    return 0;
}

int
q__step_row(struct q__sqlite *db, sqlite3_stmt *s, const char *what)
{
    int rc = sqlite3_step(s);

    if (rc == SQLITE_ROW)
        return 0;
    if (rc == SQLITE_DONE)
        return -ENOENT;
    return q__db_err(db, what);
}

int
q__rows(struct q__sqlite *db, sqlite3_stmt *s, size_t elem, q__read_fn read,
        q__clean_fn clean, void **out, size_t *n, const char *what)
{
    char *v = NULL;
    size_t len = 0, cap = 0;
    int rc;

    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        v = grow(v, len, &cap, elem);
        read(s, v + len++ * elem);
    }
    if (rc != SQLITE_DONE) {
        q__array_free(v, len, elem, clean);
        return q__db_err(db, what);
    }
    *out = v;
    *n = len;
    return 0;
}

int
q__row_by_id(struct q__sqlite *db, enum q__stmt_id st, int64_t id,
             q__read_fn read, void *out, size_t size, const char *what)
{
    sqlite3_stmt *s = q__stmt(db, st);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    if ((rc = q__step_row(db, s, what)) != 0)
        return rc;
    memset(out, 0, size);
    read(s, out);
    sqlite3_reset(s);
    return 0;
}

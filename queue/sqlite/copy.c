/* copy.c: the SQLite side of q_copy (queue/copy.c): counting, clearing,
 * reading and writing the rows of a described table as values. The SQL
 * comes from the description (q__copy_sql: our own identifiers, values
 * bound); each statement is prepared for its call and finalized before it
 * returns, so none outlives the copy. */
#include "queue/sqlite/internal.h"

#include <errno.h>

/* A statement big enough for the widest table. */
#define SQL_MAX 1024

/* prepare prepares statement k on t; NULL after logging. */
static sqlite3_stmt *
prepare(struct q__sqlite *db, const struct q__table *t, enum q__copy_stmt k)
{
    char sql[SQL_MAX];
    sqlite3_stmt *s = NULL;

    if (q__copy_sql(t, k, '?', sql, sizeof(sql)) != 0 || q__tx_sync(db) != 0)
        return NULL;
    if (sqlite3_prepare_v2(db->h, sql, -1, &s, NULL) != SQLITE_OK) {
        q__db_err(db, "preparing a copy statement");
        return NULL;
    }
    return s;
}

int
q__sqlite_copy_count(q_db *db, const struct q__table *t, int64_t *n)
{
    sqlite3_stmt *s = prepare(q__sqlite(db), t, Q__COPY_COUNT);
    int rc;

    if (s == NULL)
        return -EIO;
    if ((rc = q__step_row(q__sqlite(db), s, "counting rows")) == 0)
        *n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return rc;
}

int
q__sqlite_copy_clear(q_db *db, const struct q__table *t)
{
    sqlite3_stmt *s = prepare(q__sqlite(db), t, Q__COPY_CLEAR);
    int rc;

    if (s == NULL)
        return -EIO;
    rc = q__run_done(q__sqlite(db), s, "clearing a table");
    sqlite3_finalize(s);
    return rc;
}

/* read_row fills vals from the current row of s, by t's column types.
 * Text is borrowed until the next step. */
static void
read_row(sqlite3_stmt *s, const struct q__table *t, struct q__value *vals)
{
    for (size_t i = 0; i < t->ncols; i++) {
        struct q__value *v = &vals[i];
        int c = (int)i;

        *v =
            (struct q__value){.null = sqlite3_column_type(s, c) == SQLITE_NULL};
        if (v->null)
            continue;
        switch (t->cols[i].type) {
        case Q__COL_INT:
            v->i = sqlite3_column_int64(s, c);
            break;
        case Q__COL_REAL:
            v->r = sqlite3_column_double(s, c);
            break;
        case Q__COL_TEXT:
            v->s = (const char *)sqlite3_column_text(s, c);
            break;
        }
    }
}

int
q__sqlite_copy_out(q_db *db, const struct q__table *t, q__row_fn fn, void *arg)
{
    struct q__value vals[32];
    sqlite3_stmt *s = NULL;
    int rc = 0, step;

    if (t->ncols > STEPQ_ARRAY_LEN(vals))
        return -EINVAL;
    if ((s = prepare(q__sqlite(db), t, Q__COPY_SELECT)) == NULL)
        return -EIO;
    /* One row at a time: nothing but the current row is in memory. */
    while (rc == 0 && (step = sqlite3_step(s)) == SQLITE_ROW) {
        read_row(s, t, vals);
        rc = fn(arg, vals);
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = q__db_err(q__sqlite(db), "reading rows to copy");
    sqlite3_finalize(s);
    return rc;
}

/* bind_value binds v as parameter i (1-based) of type type. Text is bound
 * SQLITE_STATIC: the statement is done with it before the call returns. */
static void
bind_value(sqlite3_stmt *s, int i, enum q__col_type type,
           const struct q__value *v)
{
    if (v->null) {
        sqlite3_bind_null(s, i);
        return;
    }
    switch (type) {
    case Q__COL_INT:
        sqlite3_bind_int64(s, i, v->i);
        break;
    case Q__COL_REAL:
        sqlite3_bind_double(s, i, v->r);
        break;
    case Q__COL_TEXT:
        q__bind_text(s, i, v->s);
        break;
    }
}

int
q__sqlite_copy_in(q_db *db, const struct q__table *t,
                  const struct q__value *vals)
{
    sqlite3_stmt *s = prepare(q__sqlite(db), t, Q__COPY_INSERT);
    int rc;

    if (s == NULL)
        return -EIO;
    for (size_t i = 0; i < t->ncols; i++)
        bind_value(s, (int)i + 1, t->cols[i].type, &vals[i]);
    rc = q__run_done(q__sqlite(db), s, "writing a copied row");
    sqlite3_finalize(s);
    return rc;
}

int
q__sqlite_copy_end(q_db *db, const struct q__table *t)
{
    /* An INTEGER PRIMARY KEY continues after the largest id in the table
     * (no AUTOINCREMENT here), and rows are written as they come. */
    (void)db;
    (void)t;
    return 0;
}

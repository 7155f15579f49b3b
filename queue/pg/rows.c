/* rows.c: running a statement of sql.c's table by its id, and reading
 * what it returns in one call, for the files of queue/pg/ whose calls
 * read rows: all of them into an array, the first into a struct, or a row
 * of numbers. */
#include "queue/pg/internal.h"

#include <errno.h>
#include <string.h>

int
q__pg_run(struct q__pg *db, enum q__pg_stmt_id st, const struct q__pg_params *p,
          PGresult **res, const char *what)
{
    return q__pg_run_sql(db, q__pg_stmt(st), p, res, what);
}

int
q__pg_select(struct q__pg *db, enum q__pg_stmt_id st,
             const struct q__pg_params *p, size_t elem, q__pg_read_fn read,
             void **out, size_t *n, const char *what)
{
    PGresult *res = NULL;
    int rc = q__pg_run(db, st, p, &res, what);

    if (rc != 0)
        return rc;
    q__pg_rows(res, elem, read, out, n);
    PQclear(res);
    return 0;
}

int
q__pg_select_one(struct q__pg *db, enum q__pg_stmt_id st,
                 const struct q__pg_params *p, size_t elem, q__pg_read_fn read,
                 void *out, const char *what)
{
    PGresult *res = NULL;
    int rc = q__pg_run(db, st, p, &res, what);

    if (rc != 0)
        return rc;
    if (PQntuples(res) == 0) {
        rc = -ENOENT;
    } else if (read != NULL) {
        memset(out, 0, elem);
        read(res, 0, out);
    }
    PQclear(res);
    return rc;
}

void
q__pg_read_ints(const PGresult *res, int r, void *elem)
{
    int64_t *v = elem;

    for (int c = 0; c < PQnfields(res); c++)
        v[c] = q__pg_int(res, r, c);
}

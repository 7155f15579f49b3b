/* copy.c: the PostgreSQL side of q_copy (queue/copy.c): counting,
 * clearing, reading and writing the rows of a described table as values.
 *
 * Reading streams in pages of PAGE rows by the table's key (its order_by
 * columns, the primary key): each page is one prepared statement and one
 * round trip, only one page is in memory, and the index serves every page
 * in order. (A cursor would need DECLARE and FETCH, which cannot be
 * prepared and so cannot go through q__pg_run's pipeline.) The SQL comes
 * from the description (q__copy_sql: our own identifiers; every value a
 * parameter); it is made once per process, into the static slots below,
 * because a prepared statement is known by the address of its q__pg_sql.
 * Pages are small (jobs may be 1 MiB each); round trips are cheap beside
 * the rows.
 *
 * Writing batches rows: copy_in adds a row to a JSON array, and up to
 * BATCH rows go in one INSERT ... SELECT FROM json_populate_recordset
 * (one parameter, one round trip; one row per statement made 100,000
 * jobs take 9.9 s over loopback, batches 1.9 s). copy_end writes the rest.
 */
#include "queue/pg/internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"

#define PAGE        256
#define BATCH       1000
#define BATCH_BYTES (4u << 20)
#define MAX_COLS    32
#define SQL_MAX     1536

enum kind { K_COUNT, K_CLEAR, K_FIRST, K_NEXT, K_MANY, NKINDS };

static const enum q__copy_stmt kind_stmt[NKINDS] = {[K_COUNT] = Q__COPY_COUNT,
                                                    [K_CLEAR] = Q__COPY_CLEAR,
                                                    [K_FIRST] = Q__COPY_FIRST,
                                                    [K_NEXT] = Q__COPY_NEXT};

/* make_sql writes the text of statement k on t: K_MANY inserts the rows
 * of a JSON array (one parameter), the others are q__copy_sql's. */
static int
make_sql(const struct q__table *t, enum kind k, char *buf, size_t size)
{
    int n;

    if (k != K_MANY)
        return q__copy_sql(t, kind_stmt[k], '$', buf, size);
    n = snprintf(buf, size,
                 "INSERT INTO %s SELECT * FROM json_populate_recordset("
                 "NULL::%s, $1::json)",
                 t->name, t->name);
    return n > 0 && (size_t)n < size ? 0 : -EINVAL;
}

/* One table's statements, made on first use. */
struct slot {
    const char *table; /* NULL: free */
    struct q__pg_sql sql[NKINDS];
    char name[NKINDS][48];
    char text[NKINDS][SQL_MAX];
};

static struct slot slots[16]; /* at least as many as q_copy's tables */

/* The rows of one table waiting to be written, as the text of a JSON
 * array of objects keyed by column. One per process: q_copy runs one copy
 * at a time, and copy_end writes what is left of each table. */
static struct {
    q_db *db;
    const struct q__table *t;
    char *buf; /* owned */
    size_t len, cap;
    int n;
} batch;

/* batch_drop forgets the batch (a failed copy's rows are never written). */
static void
batch_drop(void)
{
    free(batch.buf);
    memset(&batch, 0, sizeof(batch));
}

/* batch_flush writes the batched rows of db in one statement: one round
 * trip for up to BATCH rows. */
/* stmt returns the statement k of t, making the table's statements on
 * first use; NULL when there is no room (logged). */
static const struct q__pg_sql *
stmt(const struct q__table *t, enum kind k)
{
    struct slot *s = NULL;

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(slots) && s == NULL; i++) {
        if (slots[i].table == NULL || strcmp(slots[i].table, t->name) == 0)
            s = &slots[i];
    }
    if (s == NULL) {
        log_error("copy: no statement slot for table %s", t->name);
        return NULL;
    }
    if (s->table == NULL) {
        for (int i = 0; i < NKINDS; i++) {
            if (make_sql(t, (enum kind)i, s->text[i], sizeof(s->text[i])) != 0)
                return NULL;
            snprintf(s->name[i], sizeof(s->name[i]), "q_copy_%d_%s", i,
                     t->name);
            s->sql[i] = (struct q__pg_sql){s->name[i], s->text[i]};
        }
        s->table = t->name;
    }
    return &s->sql[k];
}

int
q__pg_copy_count(q_db *db, const struct q__table *t, int64_t *n)
{
    const struct q__pg_sql *sql = stmt(t, K_COUNT);
    PGresult *res = NULL;
    int rc;

    if (sql == NULL)
        return -EINVAL;
    /* The first call of a copy on its target: rows a failed copy left
     * batched are never written. */
    if (batch.db == db)
        batch_drop();
    if ((rc = q__pg_run_sql(q__pg(db), sql, NULL, &res, "counting rows")) != 0)
        return rc;
    *n = q__pg_int(res, 0, 0);
    PQclear(res);
    return 0;
}

int
q__pg_copy_clear(q_db *db, const struct q__table *t)
{
    const struct q__pg_sql *sql = stmt(t, K_CLEAR);

    if (sql == NULL)
        return -EINVAL;
    if (batch.db == db)
        batch_drop();
    q__pg_tiers_forget(q__pg(db)); /* a copy writes tier rows behind it */
    return q__pg_run_sql(q__pg(db), sql, NULL, NULL, "clearing a table");
}

/* read_row fills vals from row r of res by t's column types; text is
 * borrowed from res. */
static void
read_row(const PGresult *res, int r, const struct q__table *t,
         struct q__value *vals)
{
    for (size_t i = 0; i < t->ncols; i++) {
        struct q__value *v = &vals[i];
        int c = (int)i;

        *v = (struct q__value){.null = q__pg_null(res, r, c)};
        if (v->null)
            continue;
        switch (t->cols[i].type) {
        case Q__COL_INT:
            v->i = q__pg_int(res, r, c);
            break;
        case Q__COL_REAL:
            v->r = q__pg_real(res, r, c);
            break;
        case Q__COL_TEXT:
            v->s = PQgetvalue(res, r, c);
            break;
        }
    }
}

/* after sets p to the parameters of the page after row r of res: its key
 * columns (text copied into keep, freed by the caller), then the page
 * size. */
static void
after(const PGresult *res, int r, const struct q__table *t,
      struct q__pg_params *p, char **keep)
{
    *p = (struct q__pg_params){0};
    for (size_t i = 0; i < q__copy_nkeys(t); i++) {
        if (t->cols[i].type == Q__COL_TEXT) {
            free(keep[i]);
            keep[i] = xstrdup(PQgetvalue(res, r, (int)i));
            q__pg_p_text(p, keep[i]);
        } else {
            q__pg_p_int(p, q__pg_int(res, r, (int)i));
        }
    }
    q__pg_p_int(p, PAGE);
}

int
q__pg_copy_out(q_db *db, const struct q__table *t, q__row_fn fn, void *arg)
{
    const struct q__pg_sql *sql = stmt(t, K_FIRST), *next = stmt(t, K_NEXT);
    struct q__value vals[MAX_COLS];
    struct q__pg_params p = {0};
    char *keep[MAX_COLS] = {NULL};
    PGresult *res = NULL;
    int rc = 0, rows = PAGE;

    if (sql == NULL || next == NULL || t->ncols > MAX_COLS)
        return -EINVAL;
    q__pg_p_int(&p, PAGE);
    /* A short page is the last one. */
    while (rc == 0 && rows == PAGE) {
        rc = q__pg_run_sql(q__pg(db), sql, &p, &res, "reading rows to copy");
        if (rc != 0)
            break;
        sql = next;
        rows = PQntuples(res);
        for (int r = 0; rc == 0 && r < rows; r++) {
            read_row(res, r, t, vals);
            rc = fn(arg, vals);
        }
        if (rows > 0)
            after(res, rows - 1, t, &p, keep);
        PQclear(res);
    }
    for (size_t i = 0; i < MAX_COLS; i++)
        free(keep[i]);
    return rc;
}

/* ---- writing: rows in batches ----------------------------------------- */

static void
put(const char *s, size_t n)
{
    if (batch.len + n + 2 > batch.cap) {
        batch.cap = (batch.len + n + 2) * 2;
        batch.buf = xrealloc(batch.buf, batch.cap);
    }
    memcpy(batch.buf + batch.len, s, n);
    batch.len += n;
    batch.buf[batch.len] = '\0';
}

/* put_string writes s as a JSON string. */
static void
put_string(const char *s)
{
    char esc[8];

    put("\"", 1);
    for (const char *p = s; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            put(esc, 2);
        } else if (c < 0x20) {
            put(esc, (size_t)snprintf(esc, sizeof(esc), "\\u%04x", c));
        } else {
            put(p, 1);
        }
    }
    put("\"", 1);
}

/* put_value writes one column's value: integers as JSON numbers (their
 * exact text), reals with 17 digits (read back as the same double; the
 * non-finite ones as the strings PostgreSQL reads), text as strings. */
static void
put_value(enum q__col_type type, const struct q__value *v)
{
    char num[40];

    if (v->null) {
        put("null", 4);
    } else if (type == Q__COL_INT) {
        put(num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)v->i));
    } else if (type == Q__COL_REAL && isfinite(v->r)) {
        put(num, (size_t)snprintf(num, sizeof(num), "%.17g", v->r));
    } else if (type == Q__COL_REAL) {
        put_string(isnan(v->r) ? "NaN" : v->r > 0 ? "Infinity" : "-Infinity");
    } else {
        put_string(v->s);
    }
}

static int
batch_flush(q_db *db)
{
    const struct q__pg_sql *sql = NULL;
    struct q__pg_params p = {0};
    int rc;

    if (batch.db != db || batch.n == 0)
        return 0;
    if ((sql = stmt(batch.t, K_MANY)) == NULL)
        return -EINVAL;
    put("]", 1);
    q__pg_p_text(&p, batch.buf);
    rc = q__pg_run_sql(q__pg(db), sql, &p, NULL, "writing copied rows");
    batch.len = 0;
    batch.n = 0;
    return rc;
}

int
q__pg_copy_in(q_db *db, const struct q__table *t, const struct q__value *vals)
{
    if (batch.db != db || batch.t != t) {
        batch_drop();
        batch.db = db;
        batch.t = t;
    }
    put(batch.n == 0 ? "[" : ",", 1);
    for (size_t i = 0; i < t->ncols; i++) {
        put(i == 0 ? "{" : ",", 1);
        put_string(t->cols[i].name);
        put(":", 1);
        put_value(t->cols[i].type, &vals[i]);
    }
    put("}", 1);
    /* Big rows (bodies, specs) are sent sooner than BATCH of them. */
    if (++batch.n < BATCH && batch.len < BATCH_BYTES)
        return 0;
    return batch_flush(db);
}

int
q__pg_copy_end(q_db *db, const struct q__table *t)
{
    char sql[512];
    int rc = batch.t == t ? batch_flush(db) : 0;

    q__pg_tiers_forget(q__pg(db)); /* a copy writes tier rows behind it */
    if (batch.db == db)
        batch_drop();
    if (rc != 0 || !t->id_serial)
        return rc;
    /* ALTER TABLE ... RESTART is undone with the transaction, setval()
     * would not be: a copy that fails after this point must leave the
     * target's next id where it was. The next id is computed by the
     * server; only our own table name is in the text. */
    snprintf(sql, sizeof(sql),
             "DO $$ BEGIN EXECUTE format('ALTER TABLE %%I ALTER COLUMN id"
             " RESTART WITH %%s', '%s', (SELECT coalesce(max(id), 0) + 1"
             " FROM %s)); END $$",
             t->name, t->name);
    return q__pg_exec(q__pg(db), sql, "moving the ids past the copied ones");
}

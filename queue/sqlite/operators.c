/* operators.c: SQLite storage of named operators (table operators) and
 * the audit trail (table audit). Each call is one statement: outside a
 * transaction it commits by itself, inside one it joins it, so an audit
 * row written in the transaction of the write it records goes with it. */
#include "queue/sqlite/internal.h"

#include <errno.h>

#include "queue/audit.h"

/* Runs st's change with ?1 name, ?2 hash or role, ?3 hash or now, ?4 now
 * as given; *changed gets how many rows it changed. */
static int
change(struct q__sqlite *db, enum q__stmt_id st, const char *name,
       const char *a, const char *b, int64_t now, const char *what,
       int *changed)
{
    sqlite3_stmt *s = q__stmt(db, st);
    int rc;

    if (s == NULL)
        return -EIO;
    q__bind_text(s, 1, name);
    if (a != NULL)
        q__bind_text(s, 2, a);
    if (b != NULL) {
        q__bind_text(s, 3, b);
        sqlite3_bind_int64(s, 4, now);
    } else if (a != NULL) {
        sqlite3_bind_int64(s, 3, now);
    }
    if ((rc = q__run_done(db, s, what)) != 0)
        return rc;
    *changed = sqlite3_changes(db->h);
    return 0;
}

int
q__sqlite_operator_add(q_db *base, const char *name, const char *role,
                       const char *hash, int64_t now)
{
    int n = 0, rc = change(q__sqlite(base), ST_OPERATOR_ADD, name, role, hash,
                           now, "adding an operator", &n);

    return rc != 0 ? rc : n > 0 ? 0 : -EEXIST;
}

int
q__sqlite_operator_rotate(q_db *base, const char *name, const char *hash,
                          int64_t now)
{
    int n = 0, rc = change(q__sqlite(base), ST_OPERATOR_ROTATE, name, hash,
                           NULL, now, "rotating an operator's token", &n);

    return rc != 0 ? rc : n > 0 ? 0 : -ENOENT;
}

int
q__sqlite_operator_remove(q_db *base, const char *name)
{
    int n = 0, rc = change(q__sqlite(base), ST_OPERATOR_REMOVE, name, NULL,
                           NULL, 0, "removing an operator", &n);

    return rc != 0 ? rc : n > 0 ? 0 : -ENOENT;
}

static void
read_operator(sqlite3_stmt *s, void *elem)
{
    struct q_operator *o = elem;

    o->name = q__col_text(s, 0);
    o->role = q__col_text(s, 1);
    o->token_sha256 = q__col_text(s, 2);
    o->created_at = sqlite3_column_int64(s, 3);
    o->rotated_at = sqlite3_column_int64(s, 4);
}

int
q__sqlite_operators_list(q_db *base, struct q_operator **out, size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_OPERATORS_LIST);
    void *v = NULL;
    int rc;

    if (s == NULL)
        return -EIO;
    rc = q__rows(db, s, sizeof(struct q_operator), read_operator,
                 q__operator_clean, &v, n, "reading operators");
    if (rc == 0)
        *out = v;
    return rc;
}

int
q__sqlite_audit_add(q_db *base, const struct q_audit_new *a)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_AUDIT_ADD);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, a->at);
    q__bind_text(s, 2, a->who);
    q__bind_text(s, 3, a->action);
    sqlite3_bind_int64(s, 4, a->job_id);
    sqlite3_bind_int64(s, 5, a->park_id);
    q__bind_text(s, 6, a->source);
    q__bind_text(s, 7, a->detail);
    return q__run_done(db, s, "writing an audit row");
}

static void
read_audit(sqlite3_stmt *s, void *elem)
{
    struct q_audit *a = elem;

    a->id = sqlite3_column_int64(s, 0);
    a->at = sqlite3_column_int64(s, 1);
    a->who = q__col_text(s, 2);
    a->action = q__col_text(s, 3);
    a->job_id = sqlite3_column_int64(s, 4);
    a->park_id = sqlite3_column_int64(s, 5);
    a->source = q__col_text(s, 6);
    a->detail = q__col_text(s, 7);
}

int
q__sqlite_audit_list(q_db *base, const struct q_audit_filter *f,
                     struct q_audit **out, size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_AUDIT_LIST);
    void *v = NULL;
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, f->since);
    sqlite3_bind_int64(s, 2, f->job_id);
    sqlite3_bind_int64(s, 3, f->park_id);
    rc = q__rows(db, s, sizeof(struct q_audit), read_audit, q__audit_clean, &v,
                 n, "reading the audit trail");
    if (rc == 0)
        *out = v;
    return rc;
}

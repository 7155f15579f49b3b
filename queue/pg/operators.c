/* operators.c: PostgreSQL storage of named operators (table operators)
 * and the audit trail (table audit), with the SQLite backend's meaning
 * (queue/sqlite/operators.c). Each call is one statement run at once: a
 * token's change must count from its commit, and an audit row inside the
 * caller's transaction goes with the write it records. */
#include "queue/pg/internal.h"

#include <errno.h>

#include "queue/audit.h"

/* Runs st with p; -ENOENT (or -EEXIST for an insert) when it returned
 * no row. */
static int
run_one(q_db *db, enum q__pg_stmt_id st, const struct q__pg_params *p, int none,
        const char *what)
{
    PGresult *r = NULL;
    int rc = q__pg_run(q__pg(db), st, p, &r, what);

    if (rc == 0 && PQntuples(r) == 0)
        rc = none;
    PQclear(r);
    return rc;
}

int
q__pg_operator_add(q_db *db, const char *name, const char *role,
                   const char *hash, int64_t now)
{
    struct q__pg_params p = {0};

    q__pg_p_text(&p, name);
    q__pg_p_text(&p, role);
    q__pg_p_text(&p, hash);
    q__pg_p_int(&p, now);
    return run_one(db, ST_OPERATOR_ADD, &p, -EEXIST, "adding an operator");
}

int
q__pg_operator_rotate(q_db *db, const char *name, const char *hash, int64_t now)
{
    struct q__pg_params p = {0};

    q__pg_p_text(&p, name);
    q__pg_p_text(&p, hash);
    q__pg_p_int(&p, now);
    return run_one(db, ST_OPERATOR_ROTATE, &p, -ENOENT,
                   "rotating an operator's token");
}

int
q__pg_operator_remove(q_db *db, const char *name)
{
    struct q__pg_params p = {0};

    q__pg_p_text(&p, name);
    return run_one(db, ST_OPERATOR_REMOVE, &p, -ENOENT, "removing an operator");
}

static void
read_operator(const PGresult *res, int r, void *elem)
{
    struct q_operator *o = elem;

    o->name = q__pg_text(res, r, 0);
    o->role = q__pg_text(res, r, 1);
    o->token_sha256 = q__pg_text(res, r, 2);
    o->created_at = q__pg_int(res, r, 3);
    o->rotated_at = q__pg_int(res, r, 4);
}

int
q__pg_operators_list(q_db *db, struct q_operator **out, size_t *n)
{
    void *v = NULL;
    int rc = q__pg_select(q__pg(db), ST_OPERATORS_LIST, NULL,
                          sizeof(struct q_operator), read_operator, &v, n,
                          "listing operators");

    if (rc == 0)
        *out = v;
    return rc;
}

int
q__pg_audit_add(q_db *db, const struct q_audit_new *a)
{
    struct q__pg_params p = {0};

    q__pg_p_int(&p, a->at);
    q__pg_p_text(&p, a->who);
    q__pg_p_text(&p, a->action);
    q__pg_p_int(&p, a->job_id);
    q__pg_p_int(&p, a->park_id);
    q__pg_p_text(&p, a->source);
    q__pg_p_text(&p, a->detail);
    return q__pg_run(q__pg(db), ST_AUDIT_ADD, &p, NULL, "writing an audit row");
}

static void
read_audit(const PGresult *res, int r, void *elem)
{
    struct q_audit *a = elem;

    a->id = q__pg_int(res, r, 0);
    a->at = q__pg_int(res, r, 1);
    a->who = q__pg_text(res, r, 2);
    a->action = q__pg_text(res, r, 3);
    a->job_id = q__pg_int(res, r, 4);
    a->park_id = q__pg_int(res, r, 5);
    a->source = q__pg_text(res, r, 6);
    a->detail = q__pg_text(res, r, 7);
}

int
q__pg_audit_list(q_db *db, const struct q_audit_filter *f, struct q_audit **out,
                 size_t *n)
{
    struct q__pg_params p = {0};
    void *v = NULL;
    int rc;

    q__pg_p_int(&p, f->since);
    q__pg_p_int(&p, f->job_id);
    q__pg_p_int(&p, f->park_id);
    rc = q__pg_select(q__pg(db), ST_AUDIT_LIST, &p, sizeof(struct q_audit),
                      read_audit, &v, n, "reading the audit trail");
    if (rc == 0)
        *out = v;
    return rc;
}

/* operators.c: PostgreSQL storage of named operators (table operators)
 * and the audit trail (table audit), with the SQLite backend's meaning
 * (queue/sqlite/operators.c). Each call is one statement run at once: a
 * token's change must count from its commit, and an audit row inside the
 * caller's transaction goes with the write it records. */
#include "queue/pg/internal.h"

#include <errno.h>

#include "queue/audit.h"

static const struct q__pg_sql add_sql = {
    "q_operator_add",
    "INSERT INTO operators (name, role, token_sha256, created_at,"
    " rotated_at) VALUES ($1::text, $2::text, $3::text, $4::bigint,"
    " $4::bigint) ON CONFLICT (name) DO NOTHING RETURNING 1"};
static const struct q__pg_sql rotate_sql = {
    "q_operator_rotate",
    "UPDATE operators SET token_sha256 = $2::text, rotated_at = $3::bigint"
    " WHERE name = $1::text RETURNING 1"};
static const struct q__pg_sql remove_sql = {
    "q_operator_remove",
    "DELETE FROM operators WHERE name = $1::text RETURNING 1"};
/* Bytewise, as SQLite's BINARY orders them. */
static const struct q__pg_sql list_sql = {
    "q_operators_list",
    "SELECT name, role, token_sha256, created_at,"
    " rotated_at FROM operators ORDER BY name COLLATE \"C\""};
static const struct q__pg_sql audit_add_sql = {
    "q_audit_add",
    "INSERT INTO audit (at, who, action, job_id, park_id, source, detail)"
    " VALUES ($1::bigint, $2::text, $3::text, nullif($4::bigint, 0),"
    " nullif($5::bigint, 0), $6::text, $7::text)"};
static const struct q__pg_sql audit_list_sql = {
    "q_audit_list",
    "SELECT id, at, who, action, coalesce(job_id, 0), coalesce(park_id, 0),"
    " source, detail FROM audit WHERE at >= $1::bigint"
    " AND ($2::bigint = 0 OR job_id = $2::bigint)"
    " AND ($3::bigint = 0 OR park_id = $3::bigint) ORDER BY id"};

/* Runs sql with p; -ENOENT (or -EEXIST for an insert) when it returned
 * no row. */
static int
run_one(q_db *db, const struct q__pg_sql *sql, const struct q__pg_params *p,
        int none, const char *what)
{
    PGresult *r = NULL;
    int rc = q__pg_run(q__pg(db), sql, p, &r, what);

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
    return run_one(db, &add_sql, &p, -EEXIST, "adding an operator");
}

int
q__pg_operator_rotate(q_db *db, const char *name, const char *hash, int64_t now)
{
    struct q__pg_params p = {0};

    q__pg_p_text(&p, name);
    q__pg_p_text(&p, hash);
    q__pg_p_int(&p, now);
    return run_one(db, &rotate_sql, &p, -ENOENT,
                   "rotating an operator's token");
}

int
q__pg_operator_remove(q_db *db, const char *name)
{
    struct q__pg_params p = {0};

    q__pg_p_text(&p, name);
    return run_one(db, &remove_sql, &p, -ENOENT, "removing an operator");
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
    int rc = q__pg_select(q__pg(db), &list_sql, NULL, sizeof(struct q_operator),
                          read_operator, &v, n, "listing operators");

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
    return q__pg_run(q__pg(db), &audit_add_sql, &p, NULL,
                     "writing an audit row");
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
    rc = q__pg_select(q__pg(db), &audit_list_sql, &p, sizeof(struct q_audit),
                      read_audit, &v, n, "reading the audit trail");
    if (rc == 0)
        *out = v;
    return rc;
}

/* operators.c: the storage calls of named operators and the audit trail
 * (declared in queue/queue.h): the arguments every backend would check
 * alike, checked once here, the call passed to the open store's table,
 * and the rows freed. */
#include "queue/internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "queue/audit.h"

static bool
blank(const char *s)
{
    return s == NULL || s[0] == '\0';
}

int
q_operator_add(q_db *db, const char *name, const char *role,
               const char *token_sha256, int64_t now)
{
    if (blank(name) || blank(role) || blank(token_sha256))
        return -EINVAL;
    return db->ops->operator_add(db, name, role, token_sha256, now);
}

int
q_operator_rotate(q_db *db, const char *name, const char *token_sha256,
                  int64_t now)
{
    if (blank(name) || blank(token_sha256))
        return -EINVAL;
    return db->ops->operator_rotate(db, name, token_sha256, now);
}

int
q_operator_remove(q_db *db, const char *name)
{
    if (blank(name))
        return -ENOENT;
    return db->ops->operator_remove(db, name);
}

int
q_operators_list(q_db *db, struct q_operator **out, size_t *n)
{
    return db->ops->operators_list(db, out, n);
}

int
q_audit_add(q_db *db, const struct q_audit_new *a)
{
    if (a == NULL || blank(a->who) || blank(a->action) || blank(a->source) ||
        a->detail == NULL)
        return -EINVAL;
    return db->ops->audit_add(db, a);
}

int
q_audit_list(q_db *db, const struct q_audit_filter *f, struct q_audit **out,
             size_t *n)
{
    return db->ops->audit_list(db, f, out, n);
}

void
q__operator_clean(void *e)
{
    struct q_operator *o = e;

    free(o->name);
    free(o->role);
    free(o->token_sha256);
}

void
q_operators_free(struct q_operator *o, size_t n)
{
    q__array_free(o, n, sizeof(*o), q__operator_clean);
}

void
q__audit_clean(void *e)
{
    struct q_audit *a = e;

    free(a->who);
    free(a->action);
    free(a->source);
    free(a->detail);
}

void
q_audits_free(struct q_audit *a, size_t n)
{
    q__array_free(a, n, sizeof(*a), q__audit_clean);
}

/* util.c: the PostgreSQL backend's small helpers: statement parameters
 * (every value goes to the server as text), reading results, and ids
 * taken ahead from a sequence. */
#include "queue/pg/internal.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

/* Takes the next parameter slot; the header's limit is a programming
 * bound (our own statements), not input. */
static int
next_slot(struct q__pg_params *p)
{
    assert(p->n < Q__PG_MAX_PARAMS);
    return p->n++;
}

void
q__pg_p_int(struct q__pg_params *p, int64_t v)
{
    int i = next_slot(p);

    snprintf(p->num[i], sizeof(p->num[i]), "%lld", (long long)v);
    p->v[i] = p->num[i];
}

void
q__pg_p_real(struct q__pg_params *p, double v)
{
    int i = next_slot(p);

    /* 17 significant digits read back as the same double. */
    snprintf(p->num[i], sizeof(p->num[i]), "%.17g", v);
    p->v[i] = p->num[i];
}

void
q__pg_p_text(struct q__pg_params *p, const char *v)
{
    p->v[next_slot(p)] = v;
}

void
q__pg_p_bool(struct q__pg_params *p, bool v)
{
    p->v[next_slot(p)] = v ? "t" : "f";
}

bool
q__pg_null(const PGresult *res, int r, int c)
{
    return PQgetisnull(res, r, c) != 0;
}

int64_t
q__pg_int(const PGresult *res, int r, int c)
{
    const char *v;

    if (PQgetisnull(res, r, c))
        return 0;
    v = PQgetvalue(res, r, c);
    /* A boolean column reads as 1 or 0. */
    if (v[0] == 't' || v[0] == 'f')
        return v[0] == 't';
    return strtoll(v, NULL, 10);
}

double
q__pg_real(const PGresult *res, int r, int c)
{
    if (PQgetisnull(res, r, c))
        return 0;
    return strtod(PQgetvalue(res, r, c), NULL);
}

char *
q__pg_text(const PGresult *res, int r, int c)
{
    if (PQgetisnull(res, r, c))
        return NULL;
    return xstrdup(PQgetvalue(res, r, c));
}

int64_t
q__pg_affected(const PGresult *res)
{
    const char *t = PQcmdTuples((PGresult *)res);

    return t[0] != '\0' ? strtoll(t, NULL, 10) : 0;
}

int
q__pg_held(const PGresult *res, void *unused0, void *unused1)
{
    (void)unused0;
    (void)unused1;
    return q__pg_affected(res) == 0 ? -EBUSY : 0;
}

void
q__pg_rows(const PGresult *res, size_t elem, q__pg_read_fn read, void **out,
           size_t *n)
{
    int rows = PQntuples(res);
    char *v = NULL;

    if (rows > 0) {
        v = xcalloc((size_t)rows, elem);
        for (int r = 0; r < rows; r++)
            read(res, r, v + (size_t)r * elem);
    }
    *out = v;
    *n = (size_t)rows;
}

/* PostgreSQL text holds only well-formed UTF-8, where SQLite stores any
 * bytes. A parameter that is not (an endpoint's output, an error quoting
 * a body) goes out with its bad bytes as '?' (json_utf8_scrub) instead of
 * failing the statement, and with it the whole transaction: a worker's
 * turn would fail the same way at every retry. The copies go in owned
 * (caller frees); returns whether clean replaces p. */
bool
q__pg_scrub_params(const struct q__pg_params *p, struct q__pg_params *clean,
                   char **owned)
{
    bool any = false;

    for (int i = 0; i < p->n; i++) {
        size_t len;

        if (p->v[i] == NULL || json_utf8_valid(p->v[i], len = strlen(p->v[i])))
            continue;
        if (!any)
            *clean = *p;
        any = true;
        owned[i] = xmalloc(len + 1);
        memcpy(owned[i], p->v[i], len + 1);
        json_utf8_scrub(owned[i], len);
        clean->v[i] = owned[i];
    }
    return any;
}

int
q__pg_take_id(struct q__pg *db, const char *table, struct q__pg_ids *pool,
              int64_t *id)
{
    struct q__pg_params p = {0};
    PGresult *r = NULL;
    int rc;

    if (pool->n == 0) {
        q__pg_p_text(&p, table);
        q__pg_p_int(&p, Q__PG_IDS);
        if ((rc = q__pg_run(db, ST_IDS_TAKE, &p, &r, "numbering rows")) != 0)
            return rc;
        /* Handed out in the order the sequence gave them. */
        for (int i = PQntuples(r) - 1; i >= 0 && pool->n < Q__PG_IDS; i--)
            pool->v[pool->n++] = q__pg_int(r, i, 0);
        PQclear(r);
        if (pool->n == 0)
            return -EIO;
    }
    *id = pool->v[--pool->n];
    return 0;
}

/* enqueue.c: PostgreSQL enqueue: any number of jobs in one statement
 * (arrays unnested server-side), deduplicated by key, each job matched
 * back to its id. */
#include "queue/pg/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"

/* The jobs go as arrays (one element per job), so a batch of any size is
 * one statement (ST_JOB_INSERT). Rows come back inserted (true) or already
 * there before it (false); RETURNING order is not the input's, see
 * match_results. The arrays: name, key, priority, run_at, deadline_at,
 * spec, input. */
#define NARRAYS 7

/* Appends one element of a text[] literal: NULL, or quoted with \ and "
 * escaped. */
static void
sb_elem_text(struct xbuf *b, const char *s)
{
    if (s == NULL) {
        xbuf_put(b, "NULL", 4);
        return;
    }
    xbuf_put(b, "\"", 1);
    for (const char *c = s; *c != '\0'; c++) {
        size_t run = strcspn(c, "\\\"");
        xbuf_put(b, c, run);
        c += run;
        if (*c == '\0')
            break;
        xbuf_put(b, "\\", 1);
        xbuf_put(b, c, 1);
    }
    xbuf_put(b, "\"", 1);
}

static void
sb_elem_int(struct xbuf *b, int64_t v)
{
    char num[24];

    xbuf_put(b, num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)v));
}

/* One job id the statement returned, by key (NULL for keyless jobs). */
struct got {
    const char *key; /* borrowed from the result */
    int64_t id;
    bool inserted, used;
};

static int
got_cmp(const void *a, const void *b)
{
    const struct got *x = a, *y = b;

    if ((x->key == NULL) != (y->key == NULL))
        return x->key == NULL ? -1 : 1;
    if (x->key != NULL && strcmp(x->key, y->key) != 0)
        return strcmp(x->key, y->key);
    return (x->id > y->id) - (x->id < y->id);
}

static struct got *
got_find(struct got *g, size_t n, const char *key)
{
    size_t lo = 0, hi = n;

    while (lo < hi) { /* the first entry with this key */
        size_t mid = lo + (hi - lo) / 2;
        if (g[mid].key == NULL || strcmp(g[mid].key, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && g[lo].key != NULL && strcmp(g[lo].key, key) == 0 ? &g[lo]
                                                                      : NULL;
}

/* Gives each job its id. Keyed jobs find theirs by key: the first use of
 * an inserted key is the job that inserted it, any other a duplicate.
 * Keyless jobs were all inserted, in input order, so their ids are the
 * keyless inserted ids in ascending order (one statement numbers its rows
 * as it inserts them). Returns how many keyed jobs found nothing. */
static size_t
match_results(struct got *g, size_t ng, const struct q_job_new *jobs, size_t n,
              const struct q_enqueue_opts *o, int64_t now,
              struct q_enqueue_result *res, bool *done)
{
    size_t next_keyless = 0, missing = 0;

    qsort(g, ng, sizeof(*g), got_cmp); /* keyless first, by id */
    for (size_t i = 0; i < n; i++) {
        struct q__enqueue_row r = q__enqueue_row(&jobs[i], o, now);
        struct got *e;

        if (done[i])
            continue;
        if (r.key == NULL) {
            e = next_keyless < ng && g[next_keyless].key == NULL
                    ? &g[next_keyless++]
                    : NULL;
        } else {
            e = got_find(g, ng, r.key);
        }
        if (e == NULL) {
            missing++;
            continue;
        }
        res[i].id = e->id;
        res[i].duplicate = r.key != NULL && (!e->inserted || e->used);
        e->used = true;
        done[i] = true;
    }
    return missing;
}

/* Reads the (id, key, inserted) rows of r into *g (grown). */
static void
got_add(const PGresult *r, struct got **g, size_t *ng)
{
    int rows = PQntuples(r);

    *g = xrealloc(*g, (*ng + (size_t)rows + 1) * sizeof(**g));
    for (int i = 0; i < rows; i++) {
        struct got *e = &(*g)[(*ng)++];
        e->id = q__pg_int(r, i, 0);
        e->key = q__pg_null(r, i, 1) ? NULL : PQgetvalue(r, i, 1);
        e->inserted = q__pg_int(r, i, 2) != 0;
        e->used = false;
    }
}

/* The batch as the arrays of ST_JOB_INSERT ($1 to $7; $8 is the time). */
static void
build_arrays(struct xbuf a[NARRAYS], const struct q_job_new *jobs, size_t n,
             const struct q_enqueue_opts *o, int64_t now)
{
    for (int c = 0; c < NARRAYS; c++)
        xbuf_put(&a[c], "{", 1);
    for (size_t i = 0; i < n; i++) {
        struct q__enqueue_row r = q__enqueue_row(&jobs[i], o, now);
        if (i > 0) {
            for (int c = 0; c < NARRAYS; c++)
                xbuf_put(&a[c], ",", 1);
        }
        sb_elem_text(&a[0], jobs[i].name);
        sb_elem_text(&a[1], r.key);
        sb_elem_int(&a[2], r.prio);
        sb_elem_int(&a[3], r.run_at);
        sb_elem_int(&a[4], r.run_at + jobs[i].deadline_s * 1000);
        sb_elem_text(&a[5], jobs[i].text);
        sb_elem_text(&a[6], jobs[i].input);
    }
    for (int c = 0; c < NARRAYS; c++)
        xbuf_put(&a[c], "}", 1);
}

int
q__pg_enqueue(q_db *d, const struct q_job_new *jobs, size_t n,
              const struct q_enqueue_opts *opts, int64_t now,
              struct q_enqueue_result *res)
{
    struct q__pg *db = q__pg(d);
    struct q__pg_params p = {0};
    struct xbuf a[NARRAYS] = {{0}}, keys = {0};
    struct q_enqueue_result *tmp = NULL;
    PGresult *r = NULL, *r2 = NULL;
    struct got *g = NULL;
    size_t ng = 0;
    bool *done = NULL;
    int rc;

    if (n == 0)
        return 0;
    build_arrays(a, jobs, n, opts, now);
    for (int c = 0; c < NARRAYS; c++)
        q__pg_p_text(&p, a[c].p);
    q__pg_p_int(&p, now);
    if ((rc = q__pg_run(db, ST_JOB_INSERT, &p, &r, "enqueue")) != 0)
        goto out;
    tmp = xcalloc(n, sizeof(*tmp));
    done = xcalloc(n, sizeof(*done));
    got_add(r, &g, &ng);
    if (match_results(g, ng, jobs, n, opts, now, tmp, done) > 0) {
        /* The insert is done (one statement): reading the ids of keys a
         * concurrent enqueue won needs no transaction. */
        xbuf_put(&keys, "{", 1);
        for (size_t i = 0; i < n; i++) {
            if (!done[i]) {
                sb_elem_text(&keys, q__enqueue_row(&jobs[i], opts, now).key);
                xbuf_put(&keys, ",", 1);
            }
        }
        keys.p[keys.len - 1] = '}';
        p.n = 0;
        q__pg_p_text(&p, keys.p);
        if ((rc = q__pg_run(db, ST_JOB_BY_KEY, &p, &r2,
                            "enqueue: reading "
                            "existing jobs")) != 0)
            goto out;
        got_add(r2, &g, &ng);
        if (match_results(g, ng, jobs, n, opts, now, tmp, done) > 0) {
            log_error("%s: enqueue: a key neither inserted nor found",
                      db->where);
            rc = -EIO;
            goto out;
        }
    }
    memcpy(res, tmp, n * sizeof(*tmp));
out:
    for (int c = 0; c < NARRAYS; c++)
        free(a[c].p);
    free(keys.p);
    free(g);
    free(done);
    free(tmp);
    PQclear(r);
    PQclear(r2);
    return rc;
}

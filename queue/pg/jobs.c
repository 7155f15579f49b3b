/* jobs.c: PostgreSQL storage of jobs: enqueue with dedupe (any number of
 * jobs in one statement), reading and counting, leases (claim with SKIP
 * LOCKED, extend, release, complete, fail, park, cancel, reclaim) and when
 * the next job is due. Each call is one statement, so one round trip. */
#include "queue/pg/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"

#define JOB_COLS                                                               \
    "id, name, key, state, priority, run_at, deadline_at, created_at,"         \
    " updated_at, lease_owner, lease_until, claims"

/* ---- enqueue --------------------------------------------------------- */

/* The jobs go as arrays (one element per job), so a batch of any size is
 * one statement. Rows come back inserted (true) or already there before
 * it (false); RETURNING order is not the input's, see match_results. */
static const struct q__pg_sql enqueue_sql = {
    "q_jobs_enqueue",
    "WITH input AS (SELECT * FROM unnest($1::text[], $2::text[],"
    " $3::bigint[], $4::bigint[], $5::bigint[], $6::text[]) WITH ORDINALITY"
    " AS t (name, key, priority, run_at, deadline_at, spec, ord)),"
    " ins AS (INSERT INTO jobs (name, key, priority, run_at, deadline_at,"
    " created_at, updated_at, spec) SELECT name, key, priority, run_at,"
    " deadline_at, $7, $7, spec FROM input ORDER BY ord"
    " ON CONFLICT (key) WHERE key IS NOT NULL DO NOTHING RETURNING id, key)"
    " SELECT id, key, true FROM ins UNION ALL SELECT id, key, false FROM jobs"
    " WHERE key IN (SELECT key FROM input WHERE key IS NOT NULL)"};
/* Keys another transaction committed after the statement's snapshot. */
static const struct q__pg_sql by_keys_sql = {
    "q_jobs_by_keys",
    "SELECT id, key, false FROM jobs WHERE key = ANY ($1::text[])"};

/* A growing text buffer for array literals. */
struct sbuf {
    char *p;
    size_t len, cap;
};

static void
sb_put(struct sbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* Appends one element of a text[] literal: NULL, or quoted with \ and "
 * escaped. */
static void
sb_elem_text(struct sbuf *b, const char *s)
{
    if (s == NULL) {
        sb_put(b, "NULL", 4);
        return;
    }
    sb_put(b, "\"", 1);
    for (const char *c = s; *c != '\0'; c++) {
        size_t run = strcspn(c, "\\\"");
        sb_put(b, c, run);
        c += run;
        if (*c == '\0')
            break;
        sb_put(b, "\\", 1);
        sb_put(b, c, 1);
    }
    sb_put(b, "\"", 1);
}

static void
sb_elem_int(struct sbuf *b, int64_t v)
{
    char num[24];

    sb_put(b, num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)v));
}

/* What a job's row is stored with, opts applied. */
struct row {
    const char *key;
    int64_t prio, run_at;
};

static struct row
effective(const struct q_job_new *j, const struct q_enqueue_opts *o,
          int64_t now)
{
    struct row r = {
        .key = o && o->key ? o->key : j->key,
        .prio = o && o->has_priority ? o->priority : j->priority,
        .run_at = o && o->has_run_at ? o->run_at : j->run_at,
    };

    if (r.run_at <= 0)
        r.run_at = now;
    return r;
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
        struct row r = effective(&jobs[i], o, now);
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

/* The batch as the seven parameters of enqueue_sql. */
static void
build_arrays(struct sbuf a[6], const struct q_job_new *jobs, size_t n,
             const struct q_enqueue_opts *o, int64_t now)
{
    for (int c = 0; c < 6; c++)
        sb_put(&a[c], "{", 1);
    for (size_t i = 0; i < n; i++) {
        struct row r = effective(&jobs[i], o, now);
        if (i > 0) {
            for (int c = 0; c < 6; c++)
                sb_put(&a[c], ",", 1);
        }
        sb_elem_text(&a[0], jobs[i].name);
        sb_elem_text(&a[1], r.key);
        sb_elem_int(&a[2], r.prio);
        sb_elem_int(&a[3], r.run_at);
        sb_elem_int(&a[4], r.run_at + jobs[i].deadline_s * 1000);
        sb_elem_text(&a[5], jobs[i].text);
    }
    for (int c = 0; c < 6; c++)
        sb_put(&a[c], "}", 1);
}

int
q__pg_enqueue(q_db *d, const struct q_job_new *jobs, size_t n,
              const struct q_enqueue_opts *opts, int64_t now,
              struct q_enqueue_result *res)
{
    struct q__pg *db = q__pg(d);
    struct q__pg_params p = {0};
    struct sbuf a[6] = {{0}}, keys = {0};
    struct q_enqueue_result *tmp = NULL;
    PGresult *r = NULL, *r2 = NULL;
    struct got *g = NULL;
    size_t ng = 0;
    bool *done = NULL;
    int rc;

    if (n == 0)
        return 0;
    build_arrays(a, jobs, n, opts, now);
    for (int c = 0; c < 6; c++)
        q__pg_p_text(&p, a[c].p);
    q__pg_p_int(&p, now);
    if ((rc = q__pg_run(db, &enqueue_sql, &p, &r, "enqueue")) != 0)
        goto out;
    tmp = xcalloc(n, sizeof(*tmp));
    done = xcalloc(n, sizeof(*done));
    got_add(r, &g, &ng);
    if (match_results(g, ng, jobs, n, opts, now, tmp, done) > 0) {
        /* The insert is done (one statement): reading the ids of keys a
         * concurrent enqueue won needs no transaction. */
        sb_put(&keys, "{", 1);
        for (size_t i = 0; i < n; i++) {
            if (!done[i]) {
                sb_elem_text(&keys, effective(&jobs[i], opts, now).key);
                sb_put(&keys, ",", 1);
            }
        }
        keys.p[keys.len - 1] = '}';
        p.n = 0;
        q__pg_p_text(&p, keys.p);
        if ((rc = q__pg_run(db, &by_keys_sql, &p, &r2,
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
    for (int c = 0; c < 6; c++)
        free(a[c].p);
    free(keys.p);
    free(g);
    free(done);
    free(tmp);
    PQclear(r);
    PQclear(r2);
    return rc;
}

/* ---- reading jobs ---------------------------------------------------- */

static const struct q__pg_sql get_sql = {
    "q_jobs_get", "SELECT " JOB_COLS ", spec, error FROM jobs WHERE id = $1"};
static const struct q__pg_sql list_sql = {
    "q_jobs_list",
    "SELECT " JOB_COLS ", NULL, error FROM jobs ORDER BY id LIMIT $1"};
static const struct q__pg_sql list_state_sql = {
    "q_jobs_list_state", "SELECT " JOB_COLS ", NULL, error FROM jobs"
                         " WHERE state = $2 ORDER BY id LIMIT $1"};
static const struct q__pg_sql counts_sql = {
    "q_jobs_counts", "SELECT state, count(*) FROM jobs GROUP BY state"
                     " UNION ALL SELECT -1, count(*) FROM park"
                     " WHERE state = 'open'"};

/* Reads a row in the column order of get_sql. */
static void
read_job(const PGresult *r, int i, void *job)
{
    struct q_job *j = job;

    j->id = q__pg_int(r, i, 0);
    j->name = q__pg_text(r, i, 1);
    j->key = q__pg_text(r, i, 2);
    j->state = (enum q_job_state)q__pg_int(r, i, 3);
    j->priority = q__pg_int(r, i, 4);
    j->run_at = q__pg_int(r, i, 5);
    j->deadline_at = q__pg_int(r, i, 6);
    j->created_at = q__pg_int(r, i, 7);
    j->updated_at = q__pg_int(r, i, 8);
    j->lease_owner = q__pg_text(r, i, 9);
    j->lease_until = q__pg_int(r, i, 10);
    j->claims = (int)q__pg_int(r, i, 11);
    j->spec = q__pg_text(r, i, 12);
    j->error = q__pg_text(r, i, 13);
}

int
q__pg_job_get(q_db *d, int64_t id, struct q_job *out)
{
    struct q__pg_params p = {0};
    PGresult *r = NULL;
    int rc;

    q__pg_p_int(&p, id);
    if ((rc = q__pg_run(q__pg(d), &get_sql, &p, &r, "reading a job")) != 0)
        return rc;
    if (PQntuples(r) == 0) {
        rc = -ENOENT;
    } else {
        memset(out, 0, sizeof(*out));
        read_job(r, 0, out);
    }
    PQclear(r);
    return rc;
}

/* Runs sql and collects its job rows. */
static int
collect_jobs(struct q__pg *db, const struct q__pg_sql *sql,
             const struct q__pg_params *p, struct q_job **out, size_t *n,
             const char *what)
{
    PGresult *r = NULL;
    void *v = NULL;
    int rc = q__pg_run(db, sql, p, &r, what);

    if (rc != 0)
        return rc;
    q__pg_rows(r, sizeof(struct q_job), read_job, &v, n);
    PQclear(r);
    *out = v;
    return 0;
}

int
q__pg_jobs_list(q_db *d, int state, size_t limit, struct q_job **out, size_t *n)
{
    struct q__pg_params p = {0};

    if (limit > 0)
        q__pg_p_int(&p, (int64_t)limit);
    else
        q__pg_p_text(&p, NULL); /* LIMIT NULL: all */
    if (state >= 0)
        q__pg_p_int(&p, state);
    return collect_jobs(q__pg(d), state < 0 ? &list_sql : &list_state_sql, &p,
                        out, n, "listing jobs");
}

int
q__pg_counts(q_db *d, int64_t counts[Q_JOB_NSTATES], int64_t *park_open)
{
    int64_t c[Q_JOB_NSTATES] = {0}, park = 0;
    PGresult *r = NULL;
    int rc = q__pg_run(q__pg(d), &counts_sql, NULL, &r, "counting jobs");

    if (rc != 0)
        return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        int64_t st = q__pg_int(r, i, 0);
        if (st == -1)
            park = q__pg_int(r, i, 1);
        else if (st >= 0 && st < Q_JOB_NSTATES)
            c[st] = q__pg_int(r, i, 1);
    }
    PQclear(r);
    memcpy(counts, c, sizeof(c));
    *park_open = park;
    return 0;
}

/* ---- leases ---------------------------------------------------------- */

/* Due queued jobs and jobs whose lease expired (SQLite reclaims those
 * first; the order is the same), each side walking its partial index and
 * skipping rows another claim holds, then the best max of both. */
static const struct q__pg_sql claim_sql = {
    "q_jobs_claim",
    "WITH q AS (SELECT id, priority, run_at FROM jobs WHERE state = 0"
    " AND run_at <= $1 ORDER BY priority DESC, run_at, id LIMIT $2"
    " FOR UPDATE SKIP LOCKED),"
    " e AS (SELECT id, priority, run_at FROM jobs WHERE state = 1"
    " AND lease_until < $1 ORDER BY priority DESC, run_at, id LIMIT $2"
    " FOR UPDATE SKIP LOCKED),"
    " pick AS (SELECT id FROM (SELECT * FROM q UNION ALL SELECT * FROM e) u"
    " ORDER BY priority DESC, run_at, id LIMIT $2)"
    " UPDATE jobs j SET state = 1, lease_owner = $3, lease_until = $4,"
    " claims = claims + 1, updated_at = $1 FROM pick WHERE j.id = pick.id"
    " RETURNING j.id, j.name, j.key, j.state, j.priority, j.run_at,"
    " j.deadline_at, j.created_at, j.updated_at, j.lease_owner,"
    " j.lease_until, j.claims, j.spec, j.error"};
static const struct q__pg_sql extend_sql = {
    "q_jobs_extend", "UPDATE jobs SET lease_until = $3, updated_at = $4"
                     " WHERE id = $1 AND state = 1 AND lease_owner = $2"};
static const struct q__pg_sql set_held_sql = {
    "q_jobs_set_held",
    "UPDATE jobs SET state = $3, run_at = coalesce($4, run_at),"
    " lease_owner = NULL, lease_until = NULL, updated_at = $5"
    " WHERE id = $1 AND state = 1 AND lease_owner = $2"};
static const struct q__pg_sql fail_sql = {
    "q_jobs_fail", "UPDATE jobs SET state = 3, error = $3, lease_owner = NULL,"
                   " lease_until = NULL, updated_at = $4"
                   " WHERE id = $1 AND state = 1 AND lease_owner = $2"};
/* The count tells "no such job" from "already ended" in the same trip. */
static const struct q__pg_sql cancel_sql = {
    "q_jobs_cancel",
    "WITH c AS (UPDATE jobs SET state = 5, lease_owner = NULL,"
    " lease_until = NULL, updated_at = $2 WHERE id = $1"
    " AND state IN (0, 1, 4) RETURNING id)"
    " SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM jobs"
    " WHERE id = $1)"};
/* A running job is due when its lease would expire: if its holder died,
 * that is when another worker takes it over. */
static const struct q__pg_sql next_due_sql = {
    "q_jobs_next_due",
    "SELECT least((SELECT min(run_at) FROM jobs WHERE state = 0),"
    " (SELECT min(lease_until) FROM jobs WHERE state = 1))"};
static const struct q__pg_sql reclaim_sql = {
    "q_jobs_reclaim", "UPDATE jobs SET state = 0, lease_owner = NULL,"
                      " lease_until = NULL, updated_at = $1"
                      " WHERE state = 1 AND lease_until < $1"};

/* The contract's claim order (RETURNING keeps none). */
static int
claim_order(const void *a, const void *b)
{
    const struct q_job *x = a, *y = b;

    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    if (x->run_at != y->run_at)
        return x->run_at < y->run_at ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

int
q__pg_claim(q_db *d, const char *worker, int64_t now, int64_t lease_ms,
            size_t max, struct q_job **out, size_t *n)
{
    struct q__pg_params p = {0};
    struct q_job *v = NULL;
    size_t len = 0;
    int rc;

    if (worker == NULL || worker[0] == '\0' || max == 0 || lease_ms <= 0)
        return -EINVAL;
    if (max > 256)
        max = 256;
    q__pg_p_int(&p, now);
    q__pg_p_int(&p, (int64_t)max);
    q__pg_p_text(&p, worker);
    q__pg_p_int(&p, now + lease_ms);
    rc = collect_jobs(q__pg(d), &claim_sql, &p, &v, &len, "claiming");
    if (rc != 0)
        return rc;
    if (len == 0)
        return -ENOENT;
    qsort(v, len, sizeof(*v), claim_order);
    *out = v;
    *n = len;
    return 0;
}

/* Runs an UPDATE of a held job; -EBUSY when no row matched. */
static int
held_update(struct q__pg *db, const struct q__pg_sql *sql,
            const struct q__pg_params *p, const char *what)
{
    PGresult *r = NULL;
    int rc = q__pg_run(db, sql, p, &r, what);

    if (rc == 0 && q__pg_affected(r) == 0)
        rc = -EBUSY;
    PQclear(r);
    return rc;
}

int
q__pg_extend(q_db *d, int64_t id, const char *worker, int64_t until,
             int64_t now)
{
    struct q__pg_params p = {0};

    q__pg_p_int(&p, id);
    q__pg_p_text(&p, worker);
    q__pg_p_int(&p, until);
    q__pg_p_int(&p, now);
    return held_update(q__pg(d), &extend_sql, &p, "extending a lease");
}

static int
set_held_state(q_db *d, int64_t id, const char *worker, enum q_job_state state,
               const int64_t *run_at, int64_t now)
{
    struct q__pg_params p = {0};

    q__pg_p_int(&p, id);
    q__pg_p_text(&p, worker);
    q__pg_p_int(&p, state);
    if (run_at != NULL)
        q__pg_p_int(&p, *run_at);
    else
        q__pg_p_text(&p, NULL);
    q__pg_p_int(&p, now);
    return held_update(q__pg(d), &set_held_sql, &p, "updating a job");
}

int
q__pg_release(q_db *d, int64_t id, const char *worker, int64_t run_at,
              int64_t now)
{
    return set_held_state(d, id, worker, Q_JOB_QUEUED, &run_at, now);
}

int
q__pg_complete(q_db *d, int64_t id, const char *worker, int64_t now)
{
    return set_held_state(d, id, worker, Q_JOB_SUCCEEDED, NULL, now);
}

int
q__pg_park_job(q_db *d, int64_t id, const char *worker, int64_t now)
{
    return set_held_state(d, id, worker, Q_JOB_PARKED, NULL, now);
}

int
q__pg_fail(q_db *d, int64_t id, const char *worker, const char *error,
           int64_t now)
{
    struct q__pg_params p = {0};

    q__pg_p_int(&p, id);
    q__pg_p_text(&p, worker);
    q__pg_p_text(&p, error);
    q__pg_p_int(&p, now);
    return held_update(q__pg(d), &fail_sql, &p, "failing a job");
}

int
q__pg_cancel(q_db *d, int64_t id, int64_t now)
{
    struct q__pg_params p = {0};
    PGresult *r = NULL;
    int rc;

    q__pg_p_int(&p, id);
    q__pg_p_int(&p, now);
    if ((rc = q__pg_run(q__pg(d), &cancel_sql, &p, &r, "cancelling a job")))
        return rc;
    if (q__pg_int(r, 0, 0) == 0)
        rc = q__pg_int(r, 0, 1) > 0 ? -EALREADY : -ENOENT;
    PQclear(r);
    return rc;
}

int
q__pg_next_due(q_db *d, int64_t now, int64_t *at)
{
    PGresult *r = NULL;
    int rc = q__pg_run(q__pg(d), &next_due_sql, NULL, &r,
                       "reading the next due job");

    (void)now;
    if (rc != 0)
        return rc;
    if (q__pg_null(r, 0, 0))
        rc = -ENOENT;
    else
        *at = q__pg_int(r, 0, 0);
    PQclear(r);
    return rc;
}

int
q__pg_reclaim(q_db *d, int64_t now, int64_t *n)
{
    struct q__pg_params p = {0};
    PGresult *r = NULL;
    int rc;

    q__pg_p_int(&p, now);
    rc = q__pg_run(q__pg(d), &reclaim_sql, &p, &r, "reclaiming expired leases");
    if (rc == 0 && n != NULL)
        *n = q__pg_affected(r);
    PQclear(r);
    return rc;
}

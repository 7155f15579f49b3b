/* jobs.c: PostgreSQL storage of jobs: reading and counting, leases
 * (claim with SKIP LOCKED, extend, release, complete, fail, park, cancel,
 * reclaim) and when the next job is due (enqueue is enqueue.c). Each call
 * is one statement, so one round trip. */
#include "queue/pg/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/log.h"
#include "common/xalloc.h"

/* ---- reading jobs ---------------------------------------------------- */

void
q__pg_read_job(const PGresult *r, int i, void *job)
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
    j->input = q__pg_text(r, i, 14);
}

int
q__pg_job_get(q_db *d, int64_t id, struct q_job *out)
{
    struct q__pg_params p = {0};
    PGresult *r = NULL;
    int rc;

    q__pg_p_int(&p, id);
    if ((rc = q__pg_run(q__pg(d), ST_JOB_GET, &p, &r, "reading a job")) != 0)
        return rc;
    if (PQntuples(r) == 0) {
        rc = -ENOENT;
    } else {
        memset(out, 0, sizeof(*out));
        q__pg_read_job(r, 0, out);
    }
    PQclear(r);
    return rc;
}

/* Runs st and collects its job rows with read (q__pg_read_job's columns). */
static int
collect_jobs(struct q__pg *db, enum q__pg_stmt_id st,
             const struct q__pg_params *p, q__pg_read_fn read,
             struct q_job **out, size_t *n, const char *what)
{
    PGresult *r = NULL;
    void *v = NULL;
    int rc = q__pg_run(db, st, p, &r, what);

    if (rc != 0)
        return rc;
    q__pg_rows(r, sizeof(struct q_job), read, &v, n);
    PQclear(r);
    *out = v;
    return 0;
}

int
q__pg_jobs_list(q_db *d, int state, int64_t after, size_t limit,
                struct q_job **out, size_t *n)
{
    struct q__pg_params p = {0};

    if (limit > 0)
        q__pg_p_int(&p, (int64_t)limit);
    else
        q__pg_p_text(&p, NULL); /* LIMIT NULL: all */
    q__pg_p_int(&p, after);
    if (state >= 0)
        q__pg_p_int(&p, state);
    return collect_jobs(q__pg(d), state < 0 ? ST_JOBS_LIST : ST_JOBS_LIST_STATE,
                        &p, q__pg_read_job, out, n, "listing jobs");
}

int
q__pg_counts(q_db *d, int64_t counts[Q_JOB_NSTATES], int64_t *park_open)
{
    int64_t c[Q_JOB_NSTATES] = {0}, park = 0;
    PGresult *r = NULL;
    int rc = q__pg_run(q__pg(d), ST_COUNTS, NULL, &r, "counting jobs");

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

/* Item i of a step's JSON array as the step read would give it: a number
 * (0 when it is not one), a string (NULL when it is not one: SQL NULL). */
static int64_t
json_int(const cJSON *a, int i)
{
    const cJSON *v = cJSON_GetArrayItem(a, i);

    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
}

static char *
json_text(const cJSON *a, int i)
{
    const cJSON *v = cJSON_GetArrayItem(a, i);

    return cJSON_IsString(v) ? xstrdup(v->valuestring) : NULL;
}

/* Reads a claimed job: the row of ST_JOB_GET's columns, then its steps
 * (ST_CLAIM). */
static void
read_claimed(const PGresult *r, int i, void *job)
{
    struct q_job *j = job;
    cJSON *rows = NULL;
    size_t n = 0;

    q__pg_read_job(r, i, j);
    if (q__pg_int(r, i, 16) != 0)
        return; /* reclaimed: the worker reads the steps after the lock */
    if (!q__pg_null(r, i, 15) &&
        (rows = cJSON_Parse(PQgetvalue(r, i, 15))) == NULL)
        return; /* not read: the worker reads the steps itself */
    j->has_steps = true;
    n = (size_t)cJSON_GetArraySize(rows);
    j->steps = n > 0 ? xcalloc(n, sizeof(*j->steps)) : NULL;
    for (size_t k = 0; k < n; k++) {
        const cJSON *a = cJSON_GetArrayItem(rows, (int)k);
        struct q_step *st = &j->steps[j->nsteps++];
        st->index = (int)json_int(a, 0);
        st->state = (enum q_step_state)json_int(a, 1);
        st->tier = json_text(a, 2);
        st->attempts = (int)json_int(a, 3);
        st->tokens = json_int(a, 4);
        st->output = json_text(a, 5);
        st->reset_after = (int)json_int(a, 6);
        st->pin_tier = json_text(a, 7);
    }
    cJSON_Delete(rows);
}

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

    if ((rc = q__claim_check(worker, lease_ms, &max)) != 0)
        return rc;
    q__pg_p_int(&p, now);
    q__pg_p_int(&p, (int64_t)max);
    q__pg_p_text(&p, worker);
    q__pg_p_int(&p, now + lease_ms);
    rc = collect_jobs(q__pg(d), ST_CLAIM, &p, read_claimed, &v, &len,
                      "claiming");
    if (rc != 0)
        return rc;
    if (len == 0)
        return -ENOENT;
    qsort(v, len, sizeof(*v), claim_order);
    *out = v;
    *n = len;
    return 0;
}

/* Runs an UPDATE of held job id (defer: may ride in the transaction's
 * next round trip, queue.h). */
static int
held_update(struct q__pg *db, enum q__pg_stmt_id st,
            const struct q__pg_params *p, bool defer, int64_t id,
            const char *what)
{
    return q__pg_write(db, st, p, defer, q__pg_held, NULL, NULL, id, what);
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
    return held_update(q__pg(d), ST_EXTEND, &p, false, id, "extending a lease");
}

static int
set_held_state(q_db *d, int64_t id, const char *worker, enum q_job_state state,
               const int64_t *run_at, int64_t now, bool defer)
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
    return held_update(q__pg(d), ST_SET_STATE_HELD, &p, defer, id,
                       defer ? "completing job" : "updating a job");
}

int
q__pg_release(q_db *d, int64_t id, const char *worker, int64_t run_at,
              int64_t now)
{
    return set_held_state(d, id, worker, Q_JOB_QUEUED, &run_at, now, false);
}

/* Inside a transaction nothing waits for a completion: it rides in the
 * next round trip, and a lease found lost is logged (queue.h). */
int
q__pg_complete(q_db *d, int64_t id, const char *worker, int64_t now)
{
    return set_held_state(d, id, worker, Q_JOB_SUCCEEDED, NULL, now, true);
}

int
q__pg_park_job(q_db *d, int64_t id, const char *worker, int64_t now)
{
    return set_held_state(d, id, worker, Q_JOB_PARKED, NULL, now, false);
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
    return held_update(q__pg(d), ST_FAIL_HELD, &p, false, id, "failing a job");
}

int
q__pg_cancel(q_db *d, int64_t id, int64_t now)
{
    struct q__pg_params p = {0};
    PGresult *r = NULL;
    int rc;

    q__pg_p_int(&p, id);
    q__pg_p_int(&p, now);
    if ((rc = q__pg_run(q__pg(d), ST_CANCEL, &p, &r, "cancelling a job")))
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
    int rc =
        q__pg_run(q__pg(d), ST_NEXT_DUE, NULL, &r, "reading the next due job");

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
    rc = q__pg_run(q__pg(d), ST_RECLAIM, &p, &r, "reclaiming expired leases");
    if (rc == 0 && n != NULL)
        *n = q__pg_affected(r);
    PQclear(r);
    return rc;
}

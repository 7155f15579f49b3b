/* queue.c: jobs, leases, steps and the attempts ledger. */
#include "queue/queue.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"
#include "queue/internal.h"

static const char *const job_states[Q_JOB_NSTATES] = {
    "queued", "running", "succeeded", "failed", "parked", "cancelled"};

static const char *const step_states[Q_STEP_NSTATES] = {
    "pending", "running", "succeeded", "failed", "parked", "skipped"};

const char *
q_job_state_name(enum q_job_state s)
{
    return (unsigned)s < Q_JOB_NSTATES ? job_states[s] : "unknown";
}

int
q_job_state_from_name(const char *name, enum q_job_state *out)
{
    for (int i = 0; i < Q_JOB_NSTATES; i++) {
        if (strcmp(name, job_states[i]) == 0) {
            *out = (enum q_job_state)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *
q_step_state_name(enum q_step_state s)
{
    return (unsigned)s < Q_STEP_NSTATES ? step_states[s] : "unknown";
}

void *
grow(void *v, size_t len, size_t *cap, size_t elem)
{
    if (len == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        v = xrealloc(v, *cap * elem);
    }
    memset((char *)v + len * elem, 0, elem);
    return v;
}

char *
col_text(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? xstrdup((const char *)t) : NULL;
}

static void
bind_text(sqlite3_stmt *s, int i, const char *v)
{
    if (v == NULL)
        sqlite3_bind_null(s, i);
    else
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
}

/* Steps a statement that yields no rows; -EIO/-EBUSY on failure. */
static int
run_done(q_db *db, sqlite3_stmt *s, const char *what)
{
    if (s == NULL)
        return -EIO;
    if (sqlite3_step(s) != SQLITE_DONE)
        return db_err(db, what);
    return 0;
}

/* ---- enqueue --------------------------------------------------------- */

static int
insert_job(q_db *db, const struct q_job_new *j, const struct q_enqueue_opts *o,
           int64_t now, struct q_enqueue_result *res)
{
    const char *key = o && o->key ? o->key : j->key;
    int64_t run_at = o && o->has_run_at ? o->run_at : j->run_at;
    int64_t prio = o && o->has_priority ? o->priority : j->priority;
    sqlite3_stmt *s = stmt(db, ST_JOB_INSERT);

    if (s == NULL)
        return -EIO;
    if (run_at <= 0)
        run_at = now;
    sqlite3_bind_text(s, 1, j->name, -1, SQLITE_STATIC);
    bind_text(s, 2, key);
    sqlite3_bind_int64(s, 3, prio);
    sqlite3_bind_int64(s, 4, run_at);
    sqlite3_bind_int64(s, 5, run_at + j->deadline_s * 1000);
    sqlite3_bind_int64(s, 6, now);
    sqlite3_bind_text(s, 7, j->text, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_DONE)
        return db_err(db, "enqueue");
    if (sqlite3_changes(db->h) > 0) {
        res->id = sqlite3_last_insert_rowid(db->h);
        res->duplicate = false;
        return 0;
    }
    /* ON CONFLICT DO NOTHING inserted nothing: the key exists. */
    s = stmt(db, ST_JOB_BY_KEY);
    if (s == NULL)
        return -EIO;
    bind_text(s, 1, key);
    if (sqlite3_step(s) != SQLITE_ROW)
        return db_err(db, "enqueue: reading the existing job");
    res->id = sqlite3_column_int64(s, 0);
    res->duplicate = true;
    return 0;
}

int
q_enqueue(q_db *db, const struct q_job_new *jobs, size_t n,
          const struct q_enqueue_opts *opts, int64_t now,
          struct q_enqueue_result *res)
{
    struct q_enqueue_result *tmp;
    int rc;

    if (n == 0)
        return 0;
    tmp = xcalloc(n, sizeof(*tmp));
    if ((rc = tx_enter(db)) != 0)
        goto out;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = insert_job(db, &jobs[i], opts, now, &tmp[i]);
    rc = tx_leave(db, rc);
    if (rc == 0)
        memcpy(res, tmp, n * sizeof(*tmp));
out:
    free(tmp);
    return rc;
}

/* ---- reading jobs ---------------------------------------------------- */

/* Reads a row in the column order of ST_JOB_GET. */
static void
read_job(sqlite3_stmt *s, struct q_job *j)
{
    j->id = sqlite3_column_int64(s, 0);
    j->name = col_text(s, 1);
    j->key = col_text(s, 2);
    j->state = (enum q_job_state)sqlite3_column_int(s, 3);
    j->priority = sqlite3_column_int64(s, 4);
    j->run_at = sqlite3_column_int64(s, 5);
    j->deadline_at = sqlite3_column_int64(s, 6);
    j->created_at = sqlite3_column_int64(s, 7);
    j->updated_at = sqlite3_column_int64(s, 8);
    j->lease_owner = col_text(s, 9);
    j->lease_until = sqlite3_column_int64(s, 10);
    j->claims = sqlite3_column_int(s, 11);
    j->spec = col_text(s, 12);
    j->error = col_text(s, 13);
}

void
q_job_cleanup(struct q_job *job)
{
    if (job == NULL)
        return;
    free(job->name);
    free(job->key);
    free(job->lease_owner);
    free(job->spec);
    free(job->error);
    memset(job, 0, sizeof(*job));
}

void
q_jobs_free(struct q_job *jobs, size_t n)
{
    for (size_t i = 0; jobs != NULL && i < n; i++)
        q_job_cleanup(&jobs[i]);
    free(jobs);
}

int
q_job_get(q_db *db, int64_t id, struct q_job *out)
{
    sqlite3_stmt *s = stmt(db, ST_JOB_GET);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE)
        return -ENOENT;
    if (rc != SQLITE_ROW)
        return db_err(db, "reading a job");
    read_job(s, out);
    sqlite3_reset(s);
    return 0;
}

/* Collects the rows of s (job columns) into a growing array. */
static int
collect_jobs(q_db *db, sqlite3_stmt *s, struct q_job **out, size_t *n)
{
    struct q_job *v = NULL;
    size_t len = 0, cap = 0;
    int rc;

    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        v = grow(v, len, &cap, sizeof(*v));
        read_job(s, &v[len++]);
    }
    if (rc != SQLITE_DONE) {
        q_jobs_free(v, len);
        return db_err(db, "listing jobs");
    }
    *out = v;
    *n = len;
    return 0;
}

int
q_jobs_list(q_db *db, int state, size_t limit, struct q_job **out, size_t *n)
{
    sqlite3_stmt *s = stmt(db, state < 0 ? ST_JOBS_LIST : ST_JOBS_LIST_STATE);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, limit ? (sqlite3_int64)limit : -1);
    if (state >= 0)
        sqlite3_bind_int(s, 2, state);
    return collect_jobs(db, s, out, n);
}

int
q_counts(q_db *db, int64_t counts[Q_JOB_NSTATES], int64_t *park_open)
{
    int64_t c[Q_JOB_NSTATES] = {0};
    sqlite3_stmt *s = stmt(db, ST_COUNTS);
    int rc;

    if (s == NULL)
        return -EIO;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int st = sqlite3_column_int(s, 0);
        if (st >= 0 && st < Q_JOB_NSTATES)
            c[st] = sqlite3_column_int64(s, 1);
    }
    if (rc != SQLITE_DONE)
        return db_err(db, "counting jobs");
    s = stmt(db, ST_PARK_OPEN);
    if (s == NULL)
        return -EIO;
    if (sqlite3_step(s) != SQLITE_ROW)
        return db_err(db, "counting park items");
    *park_open = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    memcpy(counts, c, sizeof(c));
    return 0;
}

/* ---- leases ---------------------------------------------------------- */

static int
reclaim(q_db *db, int64_t now, int64_t *n)
{
    sqlite3_stmt *s = stmt(db, ST_EXPIRED);
    int rc;

    /* A read first: an UPDATE opens write cursors on the table and every
     * index even when no lease expired, which is nearly always; claims
     * are 13% faster without it. */
    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, now);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc == SQLITE_DONE) {
        if (n != NULL)
            *n = 0;
        return 0;
    }
    if (rc != SQLITE_ROW)
        return db_err(db, "looking for expired leases");
    if ((s = stmt(db, ST_RECLAIM)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, now);
    if ((rc = run_done(db, s, "reclaiming expired leases")) != 0)
        return rc;
    if (n != NULL)
        *n = sqlite3_changes64(db->h);
    return 0;
}

int
q_reclaim(q_db *db, int64_t now, int64_t *n)
{
    int64_t got = 0;
    int rc = tx_enter(db);

    if (rc != 0)
        return rc;
    rc = tx_leave(db, reclaim(db, now, &got));
    if (rc == 0 && n != NULL)
        *n = got;
    return rc;
}

static int
claim_locked(q_db *db, const char *worker, int64_t now, int64_t lease_ms,
             size_t max, struct q_job *v, size_t *len)
{
    int64_t ids[256];
    size_t nids = 0;
    sqlite3_stmt *s;
    int rc;

    if ((rc = reclaim(db, now, NULL)) != 0)
        return rc;
    if ((s = stmt(db, ST_CLAIM_PICK)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, now);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)max);
    while (nids < max && (rc = sqlite3_step(s)) == SQLITE_ROW)
        ids[nids++] = sqlite3_column_int64(s, 0);
    if (nids < max && rc != SQLITE_DONE)
        return db_err(db, "claiming");
    sqlite3_reset(s);
    for (size_t i = 0; i < nids; i++) {
        if ((s = stmt(db, ST_CLAIM_SET)) == NULL)
            return -EIO;
        sqlite3_bind_int64(s, 1, ids[i]);
        sqlite3_bind_text(s, 2, worker, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, now + lease_ms);
        sqlite3_bind_int64(s, 4, now);
        if (sqlite3_step(s) != SQLITE_ROW)
            return db_err(db, "claiming");
        memset(&v[*len], 0, sizeof(*v));
        read_job(s, &v[(*len)++]);
        sqlite3_reset(s);
    }
    return 0;
}

int
q_claim(q_db *db, const char *worker, int64_t now, int64_t lease_ms, size_t max,
        struct q_job **out, size_t *n)
{
    struct q_job *v;
    size_t len = 0;
    int rc;

    if (worker == NULL || worker[0] == '\0' || max == 0 || lease_ms <= 0)
        return -EINVAL;
    if (max > 256)
        max = 256;
    v = xcalloc(max, sizeof(*v));
    if ((rc = tx_enter(db)) == 0)
        rc =
            tx_leave(db, claim_locked(db, worker, now, lease_ms, max, v, &len));
    if (rc == 0 && len == 0)
        rc = -ENOENT;
    if (rc != 0) {
        q_jobs_free(v, len);
        return rc;
    }
    *out = v;
    *n = len;
    return 0;
}

/* Runs a held-job update (?1 id, ?2 worker); -EBUSY when no row matched. */
static int
held_update(q_db *db, sqlite3_stmt *s, const char *what)
{
    int rc = run_done(db, s, what);

    if (rc == 0 && sqlite3_changes(db->h) == 0)
        return -EBUSY;
    return rc;
}

int
q_extend(q_db *db, int64_t id, const char *worker, int64_t until, int64_t now)
{
    sqlite3_stmt *s = stmt(db, ST_EXTEND);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    bind_text(s, 2, worker);
    sqlite3_bind_int64(s, 3, until);
    sqlite3_bind_int64(s, 4, now);
    return held_update(db, s, "extending a lease");
}

static int
set_held_state(q_db *db, int64_t id, const char *worker, enum q_job_state state,
               const int64_t *run_at, int64_t now)
{
    sqlite3_stmt *s = stmt(db, ST_SET_STATE_HELD);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    bind_text(s, 2, worker);
    sqlite3_bind_int(s, 3, state);
    if (run_at != NULL)
        sqlite3_bind_int64(s, 4, *run_at);
    sqlite3_bind_int64(s, 5, now);
    return held_update(db, s, "updating a job");
}

int
q_release(q_db *db, int64_t id, const char *worker, int64_t run_at, int64_t now)
{
    return set_held_state(db, id, worker, Q_JOB_QUEUED, &run_at, now);
}

int
q_complete(q_db *db, int64_t id, const char *worker, int64_t now)
{
    return set_held_state(db, id, worker, Q_JOB_SUCCEEDED, NULL, now);
}

int
q_park_job(q_db *db, int64_t id, const char *worker, int64_t now)
{
    return set_held_state(db, id, worker, Q_JOB_PARKED, NULL, now);
}

int
q_fail(q_db *db, int64_t id, const char *worker, const char *error, int64_t now)
{
    sqlite3_stmt *s = stmt(db, ST_FAIL_HELD);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    bind_text(s, 2, worker);
    bind_text(s, 3, error);
    sqlite3_bind_int64(s, 4, now);
    return held_update(db, s, "failing a job");
}

static int
cancel_locked(q_db *db, int64_t id, int64_t now)
{
    sqlite3_stmt *s = stmt(db, ST_CANCEL);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, now);
    if ((rc = run_done(db, s, "cancelling a job")) != 0)
        return rc;
    if (sqlite3_changes(db->h) > 0)
        return 0;
    /* Nothing changed: tell "no such job" from "already ended". */
    if ((s = stmt(db, ST_JOB_STATE)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc == SQLITE_ROW)
        return -EALREADY;
    return rc == SQLITE_DONE ? -ENOENT : db_err(db, "cancelling a job");
}

int
q_cancel(q_db *db, int64_t id, int64_t now)
{
    int rc = tx_enter(db);

    if (rc != 0)
        return rc;
    return tx_leave(db, cancel_locked(db, id, now));
}

/* ---- steps ----------------------------------------------------------- */

void
q_steps_free(struct q_step *steps, size_t n)
{
    for (size_t i = 0; steps != NULL && i < n; i++) {
        free(steps[i].tier);
        free(steps[i].output);
        free(steps[i].pin_tier);
    }
    free(steps);
}

int
q_steps_get(q_db *db, int64_t job_id, struct q_step **out, size_t *n)
{
    sqlite3_stmt *s = stmt(db, ST_STEPS_GET);
    struct q_step *v = NULL;
    size_t len = 0, cap = 0;
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, job_id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        v = grow(v, len, &cap, sizeof(*v));
        v[len].index = sqlite3_column_int(s, 0);
        v[len].state = (enum q_step_state)sqlite3_column_int(s, 1);
        v[len].tier = col_text(s, 2);
        v[len].attempts = sqlite3_column_int(s, 3);
        v[len].tokens = sqlite3_column_int64(s, 4);
        v[len].output = col_text(s, 5);
        v[len].reset_after = sqlite3_column_int(s, 6);
        v[len].pin_tier = col_text(s, 7);
        len++;
    }
    if (rc != SQLITE_DONE) {
        q_steps_free(v, len);
        return db_err(db, "reading steps");
    }
    *out = v;
    *n = len;
    return 0;
}

int
q_step_set(q_db *db, int64_t job_id, int index, enum q_step_state state,
           const char *tier, const char *output, int64_t add_tokens)
{
    sqlite3_stmt *s = stmt(db, ST_STEP_SET);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, job_id);
    sqlite3_bind_int(s, 2, index);
    sqlite3_bind_int(s, 3, state);
    bind_text(s, 4, tier);
    bind_text(s, 5, output);
    sqlite3_bind_int64(s, 6, add_tokens);
    return run_done(db, s, "updating a step");
}

/* ---- attempts -------------------------------------------------------- */

static int
attempt_begin_locked(q_db *db, const struct q_attempt_start *a, int64_t *id,
                     int *attempt)
{
    sqlite3_stmt *s = stmt(db, ST_HELD);
    int num, rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, a->job_id);
    bind_text(s, 2, a->worker);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc == SQLITE_DONE)
        return -EBUSY;
    if (rc != SQLITE_ROW)
        return db_err(db, "recording an attempt");
    if ((s = stmt(db, ST_ATTEMPT_NEXT)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, a->job_id);
    sqlite3_bind_int(s, 2, a->step);
    if (sqlite3_step(s) != SQLITE_ROW)
        return db_err(db, "recording an attempt");
    num = sqlite3_column_int(s, 0);
    sqlite3_reset(s);
    if ((s = stmt(db, ST_ATTEMPT_INSERT)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, a->job_id);
    sqlite3_bind_int(s, 2, a->step);
    sqlite3_bind_int(s, 3, num);
    bind_text(s, 4, a->tier);
    bind_text(s, 5, a->worker);
    bind_text(s, 6, a->request_sha256);
    sqlite3_bind_int64(s, 7, a->est_tokens);
    sqlite3_bind_int64(s, 8, a->started_at);
    if ((rc = run_done(db, s, "recording an attempt")) != 0)
        return rc;
    *id = sqlite3_last_insert_rowid(db->h);
    if ((s = stmt(db, ST_STEP_CHARGE)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, a->job_id);
    sqlite3_bind_int(s, 2, a->step);
    bind_text(s, 3, a->tier);
    sqlite3_bind_int64(s, 4, a->est_tokens);
    if ((rc = run_done(db, s, "charging a step")) != 0)
        return rc;
    *attempt = num;
    return 0;
}

int
q_attempt_begin(q_db *db, const struct q_attempt_start *a, int64_t *id,
                int *attempt)
{
    int64_t got_id = 0;
    int got = 0, rc;

    if (a->worker == NULL || a->step < 0)
        return -EINVAL;
    if ((rc = tx_enter(db)) != 0)
        return rc;
    rc = tx_leave(db, attempt_begin_locked(db, a, &got_id, &got));
    if (rc == 0) {
        *id = got_id;
        *attempt = got;
    }
    return rc;
}

static int
attempt_finish_locked(q_db *db, int64_t id, const struct q_attempt_result *r)
{
    sqlite3_stmt *s = stmt(db, ST_ATTEMPT_GET);
    int64_t job_id, est;
    size_t keep;
    int step, rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE)
        return -ENOENT;
    if (rc != SQLITE_ROW)
        return db_err(db, "finishing an attempt");
    job_id = sqlite3_column_int64(s, 0);
    step = sqlite3_column_int(s, 1);
    est = sqlite3_column_int64(s, 2);
    rc = sqlite3_column_type(s, 3) != SQLITE_NULL;
    sqlite3_reset(s);
    if (rc)
        return -EALREADY;
    if ((s = stmt(db, ST_ATTEMPT_FINISH)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, r->finished_at);
    sqlite3_bind_int(s, 3, r->status);
    bind_text(s, 4, r->outcome);
    bind_text(s, 5, r->reason);
    bind_text(s, 6, r->decision);
    sqlite3_bind_int64(s, 7, r->delay_ms);
    sqlite3_bind_int64(s, 8, r->latency_ms);
    sqlite3_bind_int64(s, 9, r->tokens);
    keep = r->body_len;
    if ((int64_t)keep > db->keep_body_bytes) {
        keep = (size_t)db->keep_body_bytes;
        /* Cut on a character boundary so the kept text stays UTF-8. */
        while (keep > 0 && ((unsigned char)r->body[keep] & 0xC0) == 0x80)
            keep--;
    }
    if (r->body != NULL)
        sqlite3_bind_text(s, 10, r->body, (int)keep, SQLITE_STATIC);
    if ((rc = run_done(db, s, "finishing an attempt")) != 0)
        return rc;
    if ((s = stmt(db, ST_STEP_CORRECT)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, job_id);
    sqlite3_bind_int(s, 2, step);
    sqlite3_bind_int64(s, 3, r->tokens - est);
    return run_done(db, s, "correcting a step's tokens");
}

int
q_attempt_finish(q_db *db, int64_t id, const struct q_attempt_result *r)
{
    int rc = tx_enter(db);

    if (rc != 0)
        return rc;
    return tx_leave(db, attempt_finish_locked(db, id, r));
}

void
q_attempts_free(struct q_attempt *a, size_t n)
{
    for (size_t i = 0; a != NULL && i < n; i++) {
        free(a[i].tier);
        free(a[i].request_sha256);
        free(a[i].outcome);
        free(a[i].reason);
        free(a[i].decision);
        free(a[i].body);
    }
    free(a);
}

int
q_attempts_list(q_db *db, int64_t job_id, int step, struct q_attempt **out,
                size_t *n)
{
    sqlite3_stmt *s = stmt(db, step < 0 ? ST_ATTEMPTS_JOB : ST_ATTEMPTS_STEP);
    struct q_attempt *v = NULL;
    size_t len = 0, cap = 0;
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, job_id);
    if (step >= 0)
        sqlite3_bind_int(s, 2, step);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct q_attempt *a;
        v = grow(v, len, &cap, sizeof(*v));
        a = &v[len++];
        a->id = sqlite3_column_int64(s, 0);
        a->step = sqlite3_column_int(s, 1);
        a->attempt = sqlite3_column_int(s, 2);
        a->tier = col_text(s, 3);
        a->request_sha256 = col_text(s, 4);
        a->started_at = sqlite3_column_int64(s, 5);
        a->finished_at = sqlite3_column_int64(s, 6);
        a->status = sqlite3_column_int(s, 7);
        a->outcome = col_text(s, 8);
        a->reason = col_text(s, 9);
        a->decision = col_text(s, 10);
        a->delay_ms = sqlite3_column_int64(s, 11);
        a->latency_ms = sqlite3_column_int64(s, 12);
        a->tokens = sqlite3_column_int64(s, 13);
        a->body = col_text(s, 14);
    }
    if (rc != SQLITE_DONE) {
        q_attempts_free(v, len);
        return db_err(db, "reading attempts");
    }
    *out = v;
    *n = len;
    return 0;
}

/* ---- tier state ------------------------------------------------------ */

static const char *const breaker_names[] = {"closed", "open", "half_open"};

const char *
q_breaker_name(enum q_breaker b)
{
    return (unsigned)b < 3 ? breaker_names[b] : "unknown";
}

static void
copy_col(sqlite3_stmt *s, int i, char *buf, size_t len)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(buf, len, "%s", t ? (const char *)t : "");
}

int
q_tier_load(q_db *db, const char *tier, int64_t now,
            const struct q_tier_window *w, struct q_tier_state *out)
{
    struct q_tier_state st;
    sqlite3_stmt *s = stmt(db, ST_TIER_GET);
    int rc;

    memset(&st, 0, sizeof(st));
    st.pace = 1.0;
    st.doubt = true; /* a tier never used: its state is unknown */
    if (s == NULL)
        return -EIO;
    bind_text(s, 1, tier);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        const unsigned char *b = sqlite3_column_text(s, 0);
        for (int i = 0; i < 3 && b != NULL; i++) {
            if (strcmp((const char *)b, breaker_names[i]) == 0)
                st.breaker = (enum q_breaker)i;
        }
        st.failures = sqlite3_column_int(s, 1);
        st.open_until = sqlite3_column_int64(s, 2);
        st.exhausted_until = sqlite3_column_int64(s, 3);
        copy_col(s, 4, st.exhausted_reason, sizeof(st.exhausted_reason));
        st.limited_until = sqlite3_column_int64(s, 5);
        st.allowance_used = sqlite3_column_int64(s, 6);
        st.allowance_since = sqlite3_column_int64(s, 7);
        copy_col(s, 8, st.config_hash, sizeof(st.config_hash));
        st.req_tat = sqlite3_column_double(s, 9);
        st.tok_tat = sqlite3_column_double(s, 10);
        st.pace = sqlite3_column_double(s, 11);
        st.pace_down_at = sqlite3_column_int64(s, 12);
        st.pace_up_at = sqlite3_column_int64(s, 13);
        st.learned_rpm = sqlite3_column_int64(s, 14);
        st.learned_tpm = sqlite3_column_int64(s, 15);
        st.doubt = sqlite3_column_int(s, 16) != 0;
    } else if (rc != SQLITE_DONE) {
        return db_err(db, "reading tier state");
    }
    sqlite3_reset(s);
    if (w != NULL && w->requests != 0) {
        if ((s = stmt(db, ST_TIER_WINDOW)) == NULL)
            return -EIO;
        bind_text(s, 1, tier);
        sqlite3_bind_int64(s, 2, now - w->window_ms);
        sqlite3_bind_int64(s, 3, w->requests);
        if (sqlite3_step(s) != SQLITE_ROW)
            return db_err(db, "reading a tier's window");
        st.window_requests = sqlite3_column_int64(s, 0);
        st.window_oldest = sqlite3_column_int64(s, 1);
        sqlite3_reset(s);
    }
    if (w != NULL && w->tokens) {
        if ((s = stmt(db, ST_TIER_TOKENS)) == NULL)
            return -EIO;
        bind_text(s, 1, tier);
        sqlite3_bind_int64(s, 2, now - w->window_ms);
        if (sqlite3_step(s) != SQLITE_ROW)
            return db_err(db, "reading a tier's tokens");
        st.window_tokens = sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
    }
    /* While the breaker is not closed, or the tier is in doubt (or a wall
     * just ended, which puts it there), what is in flight decides. */
    if (w == NULL || w->inflight || st.breaker != Q_BREAKER_CLOSED ||
        st.doubt || (st.exhausted_until > 0 && st.exhausted_until <= now)) {
        if ((s = stmt(db, ST_TIER_INFLIGHT)) == NULL)
            return -EIO;
        bind_text(s, 1, tier);
        sqlite3_bind_int64(s, 2, now);
        if (sqlite3_step(s) != SQLITE_ROW)
            return db_err(db, "reading a tier's sends in flight");
        st.in_flight = sqlite3_column_int64(s, 0);
        st.probe_in_flight = sqlite3_column_int(s, 1) != 0;
        sqlite3_reset(s);
    }
    *out = st;
    return 0;
}

int
q_tier_store(q_db *db, const char *tier, const struct q_tier_state *st)
{
    sqlite3_stmt *s = stmt(db, ST_TIER_PUT);

    if (s == NULL)
        return -EIO;
    bind_text(s, 1, tier);
    bind_text(s, 2, q_breaker_name(st->breaker));
    sqlite3_bind_int(s, 3, st->failures);
    sqlite3_bind_int64(s, 4, st->open_until);
    sqlite3_bind_int64(s, 5, st->exhausted_until);
    bind_text(s, 6, st->exhausted_reason[0] ? st->exhausted_reason : NULL);
    sqlite3_bind_int64(s, 7, st->limited_until);
    sqlite3_bind_int64(s, 8, st->allowance_used);
    sqlite3_bind_int64(s, 9, st->allowance_since);
    bind_text(s, 10, st->config_hash[0] ? st->config_hash : NULL);
    sqlite3_bind_double(s, 11, st->req_tat);
    sqlite3_bind_double(s, 12, st->tok_tat);
    sqlite3_bind_double(s, 13, st->pace);
    sqlite3_bind_int64(s, 14, st->pace_down_at);
    sqlite3_bind_int64(s, 15, st->pace_up_at);
    sqlite3_bind_int64(s, 16, st->learned_rpm);
    sqlite3_bind_int64(s, 17, st->learned_tpm);
    sqlite3_bind_int(s, 18, st->doubt);
    return run_done(db, s, "writing tier state");
}

int
q_tier_send_add(q_db *db, const char *tier, int64_t at, int64_t tokens,
                bool probe, int64_t expires_at, int64_t *id)
{
    sqlite3_stmt *s = stmt(db, ST_TIER_SEND_ADD);
    int rc;

    if (s == NULL)
        return -EIO;
    bind_text(s, 1, tier);
    sqlite3_bind_int64(s, 2, at);
    sqlite3_bind_int64(s, 3, tokens);
    sqlite3_bind_int(s, 4, probe);
    sqlite3_bind_int64(s, 5, expires_at);
    if ((rc = run_done(db, s, "logging a tier send")) != 0)
        return rc;
    *id = sqlite3_last_insert_rowid(db->h);
    return 0;
}

int
q_tier_send_done(q_db *db, int64_t id, int64_t tokens, int64_t done_at,
                 int64_t *old_tokens)
{
    sqlite3_stmt *s = stmt(db, ST_TIER_SEND_GET);
    int64_t old;
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE)
        return -ENOENT;
    if (rc != SQLITE_ROW)
        return db_err(db, "reading a tier send");
    old = sqlite3_column_int64(s, 0);
    rc = sqlite3_column_type(s, 1) != SQLITE_NULL;
    sqlite3_reset(s);
    if (rc)
        return -EALREADY;
    if ((s = stmt(db, ST_TIER_SEND_DONE)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, tokens);
    sqlite3_bind_int64(s, 3, done_at);
    if ((rc = run_done(db, s, "finishing a tier send")) != 0)
        return rc;
    if (old_tokens != NULL)
        *old_tokens = old;
    return 0;
}

int
q_tier_send_drop(q_db *db, int64_t id, int64_t *old_tokens)
{
    sqlite3_stmt *s = stmt(db, ST_TIER_SEND_GET);
    int64_t old;
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE)
        return -ENOENT;
    if (rc != SQLITE_ROW)
        return db_err(db, "reading a tier send");
    old = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if ((s = stmt(db, ST_TIER_SEND_DROP)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    if ((rc = run_done(db, s, "dropping a tier send")) != 0)
        return rc;
    if (old_tokens != NULL)
        *old_tokens = old;
    return 0;
}

int
q_tier_prune(q_db *db, const char *tier, int64_t before)
{
    sqlite3_stmt *s = stmt(db, ST_TIER_PRUNE);

    if (s == NULL)
        return -EIO;
    bind_text(s, 1, tier);
    sqlite3_bind_int64(s, 2, before);
    return run_done(db, s, "pruning tier sends");
}

/* ---- park items ------------------------------------------------------ */

static int
park_add_locked(q_db *db, const struct q_park_new *p, int64_t *id)
{
    sqlite3_stmt *s = stmt(db, ST_PARK_ADD);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, p->job_id);
    sqlite3_bind_int(s, 2, p->step);
    bind_text(s, 3, p->step_name);
    bind_text(s, 4, p->reason);
    sqlite3_bind_int(s, 5, p->attempts);
    bind_text(s, 6, p->request_sha256);
    bind_text(s, 7, p->request);
    bind_text(s, 8, p->error);
    bind_text(s, 9, p->tier);
    sqlite3_bind_int64(s, 10, p->parked_at);
    if ((rc = run_done(db, s, "parking a step")) != 0)
        return rc;
    *id = sqlite3_last_insert_rowid(db->h);
    return q_step_set(db, p->job_id, p->step, Q_STEP_PARKED, p->tier, NULL, 0);
}

int
q_park_add(q_db *db, const struct q_park_new *p, int64_t *id)
{
    int64_t got = 0;
    int rc = tx_enter(db);

    if (rc != 0)
        return rc;
    rc = tx_leave(db, park_add_locked(db, p, &got));
    if (rc == 0)
        *id = got;
    return rc;
}

int
q_next_due(q_db *db, int64_t now, int64_t *at)
{
    sqlite3_stmt *s = stmt(db, ST_NEXT_DUE);
    int rc;

    (void)now;
    if (s == NULL)
        return -EIO;
    if (sqlite3_step(s) != SQLITE_ROW)
        return db_err(db, "reading the next due job");
    rc = sqlite3_column_type(s, 0) == SQLITE_NULL ? -ENOENT : 0;
    if (rc == 0)
        *at = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return rc;
}

static const char *const resolution_names[] = {"retry", "skip", "done", "fail"};

const char *
q_resolution_name(enum q_resolution r)
{
    return (unsigned)r < 4 ? resolution_names[r] : "unknown";
}

void
q_park_item_cleanup(struct q_park_item *it)
{
    if (it == NULL)
        return;
    free(it->step_name);
    free(it->reason);
    free(it->request_sha256);
    free(it->request);
    free(it->error);
    free(it->tier);
    free(it->resolution);
    free(it->resolved_by);
    free(it->note);
    memset(it, 0, sizeof(*it));
}

void
q_park_items_free(struct q_park_item *items, size_t n)
{
    for (size_t i = 0; items != NULL && i < n; i++)
        q_park_item_cleanup(&items[i]);
    free(items);
}

/* Reads a row in the column order of ST_PARK_GET. */
static void
read_park(sqlite3_stmt *s, struct q_park_item *p)
{
    const unsigned char *state;

    p->id = sqlite3_column_int64(s, 0);
    p->job_id = sqlite3_column_int64(s, 1);
    p->step = sqlite3_column_int(s, 2);
    p->step_name = col_text(s, 3);
    p->reason = col_text(s, 4);
    p->attempts = sqlite3_column_int(s, 5);
    p->request_sha256 = col_text(s, 6);
    p->request = col_text(s, 7);
    p->error = col_text(s, 8);
    p->tier = col_text(s, 9);
    p->parked_at = sqlite3_column_int64(s, 10);
    state = sqlite3_column_text(s, 11);
    p->open = state != NULL && strcmp((const char *)state, "open") == 0;
    p->resolution = col_text(s, 12);
    p->resolved_by = col_text(s, 13);
    p->resolved_at = sqlite3_column_int64(s, 14);
    p->note = col_text(s, 15);
}

int
q_park_get(q_db *db, int64_t id, struct q_park_item *out)
{
    sqlite3_stmt *s = stmt(db, ST_PARK_GET);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE)
        return -ENOENT;
    if (rc != SQLITE_ROW)
        return db_err(db, "reading a park item");
    memset(out, 0, sizeof(*out));
    read_park(s, out);
    sqlite3_reset(s);
    return 0;
}

int
q_park_list(q_db *db, const struct q_park_filter *f, struct q_park_item **out,
            size_t *n)
{
    sqlite3_stmt *s = stmt(db, ST_PARK_LIST);
    struct q_park_item *v = NULL;
    size_t len = 0, cap = 0;
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int(s, 1, f->all);
    bind_text(s, 2, f->reason);
    bind_text(s, 3, f->tier);
    sqlite3_bind_int64(s, 4, f->job_id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        v = grow(v, len, &cap, sizeof(*v));
        read_park(s, &v[len++]);
    }
    if (rc != SQLITE_DONE) {
        q_park_items_free(v, len);
        return db_err(db, "listing park items");
    }
    *out = v;
    *n = len;
    return 0;
}

/* The job and step part of a resolution; the item is already closed. */
static int
apply_resolution(q_db *db, const struct q_park_item *it,
                 const struct q_resolve *r)
{
    sqlite3_stmt *s;
    enum q_step_state st = Q_STEP_PENDING;
    char error[512];
    int rc;

    if (r->how == Q_RESOLVE_FAIL) {
        if ((s = stmt(db, ST_JOB_FAIL_PARKED)) == NULL)
            return -EIO;
        snprintf(error, sizeof(error),
                 "step %s: failed by %s at park item %lld%s%s", it->step_name,
                 r->by ? r->by : "an operator", (long long)it->id,
                 r->note ? ": " : "", r->note ? r->note : "");
        sqlite3_bind_int64(s, 1, it->job_id);
        bind_text(s, 2, error);
        sqlite3_bind_int64(s, 3, r->now);
        if ((rc = run_done(db, s, "failing a parked job")) != 0)
            return rc;
        if (sqlite3_changes(db->h) == 0)
            return -EALREADY;
        return q_step_set(db, it->job_id, it->step, Q_STEP_FAILED, NULL, NULL,
                          0);
    }
    if (r->how == Q_RESOLVE_SKIP)
        st = Q_STEP_SKIPPED;
    else if (r->how == Q_RESOLVE_DONE)
        st = Q_STEP_SUCCEEDED;
    if ((s = stmt(db, ST_JOB_REQUEUE)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, it->job_id);
    sqlite3_bind_int64(s, 2, r->now);
    if ((rc = run_done(db, s, "re-queueing a parked job")) != 0)
        return rc;
    if (sqlite3_changes(db->h) == 0)
        return -EALREADY; /* cancelled, or not parked any more */
    if ((s = stmt(db, ST_STEP_RESET)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, it->job_id);
    sqlite3_bind_int(s, 2, it->step);
    sqlite3_bind_int(s, 3, st);
    bind_text(s, 4, r->how == Q_RESOLVE_DONE ? r->output : NULL);
    /* A retry starts a fresh count of attempts after the ones so far. */
    sqlite3_bind_int(s, 5, r->how == Q_RESOLVE_RETRY ? it->attempts : 0);
    bind_text(s, 6, r->how == Q_RESOLVE_RETRY ? r->tier : NULL);
    return run_done(db, s, "resetting a parked step");
}

static int
resolve_locked(q_db *db, int64_t id, const struct q_resolve *r)
{
    struct q_park_item it;
    sqlite3_stmt *s = stmt(db, ST_PARK_CLOSE);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    bind_text(s, 2, q_resolution_name(r->how));
    bind_text(s, 3, r->by);
    sqlite3_bind_int64(s, 4, r->now);
    bind_text(s, 5, r->note);
    if ((rc = run_done(db, s, "resolving a park item")) != 0)
        return rc;
    if (sqlite3_changes(db->h) == 0) {
        rc = q_park_get(db, id, &it);
        if (rc == 0)
            q_park_item_cleanup(&it);
        return rc == 0 ? -EALREADY : rc;
    }
    if ((rc = q_park_get(db, id, &it)) != 0)
        return rc;
    /* The attempts of the item: the last attempt number of the step. */
    {
        struct q_attempt *a = NULL;
        size_t na = 0;
        if ((rc = q_attempts_list(db, it.job_id, it.step, &a, &na)) == 0) {
            if (na > 0)
                it.attempts = a[na - 1].attempt;
            q_attempts_free(a, na);
            rc = apply_resolution(db, &it, r);
        }
    }
    q_park_item_cleanup(&it);
    return rc;
}

int
q_park_resolve(q_db *db, int64_t id, const struct q_resolve *r)
{
    int rc = tx_enter(db);

    if (rc != 0)
        return rc;
    return tx_leave(db, resolve_locked(db, id, r));
}

int
q_park_resolve_matching(q_db *db, const struct q_park_filter *f,
                        const struct q_resolve *r, int64_t *n)
{
    struct q_park_filter open_only = *f;
    struct q_park_item *items = NULL;
    size_t count = 0;
    int64_t done = 0;
    int rc = tx_enter(db);

    if (rc != 0)
        return rc;
    open_only.all = false;
    rc = q_park_list(db, &open_only, &items, &count);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        rc = resolve_locked(db, items[i].id, r);
        /* Two items of one job: the first re-queued it; the rest of that
         * job's items are closed with the same resolution. */
        if (rc == -EALREADY)
            rc = 0;
        else if (rc == 0)
            done++;
    }
    q_park_items_free(items, count);
    rc = tx_leave(db, rc);
    if (rc == 0)
        *n = done;
    return rc;
}

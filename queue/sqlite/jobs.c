/* jobs.c: SQLite storage of jobs: enqueue with dedupe, reading and
 * counting, leases (claim, extend, release, complete, fail, park, cancel,
 * reclaim) and when the next job is due. */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "queue/report.h"

/* ---- enqueue --------------------------------------------------------- */

/* The id of the job with key, which exists. */
static int
id_by_key(struct q__sqlite *db, const char *key, int64_t *id)
{
    sqlite3_stmt *s = q__stmt(db, ST_JOB_BY_KEY);

    if (s == NULL)
        return -EIO;
    q__bind_text(s, 1, key);
    if (sqlite3_step(s) != SQLITE_ROW)
        return q__db_err(db, "enqueue: reading the existing job");
    *id = sqlite3_column_int64(s, 0);
    return 0;
}

static int
insert_job(struct q__sqlite *db, const struct q_job_new *j,
           const struct q_enqueue_opts *o, int64_t now,
           struct q_enqueue_result *res)
{
    struct q__enqueue_row r = q__enqueue_row(j, o, now);
    sqlite3_stmt *s = q__stmt(db, ST_JOB_INSERT);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_text(s, 1, j->name, -1, SQLITE_STATIC);
    q__bind_text(s, 2, r.key);
    sqlite3_bind_int64(s, 3, r.prio);
    sqlite3_bind_int64(s, 4, r.run_at);
    sqlite3_bind_int64(s, 5, r.run_at + j->deadline_s * 1000);
    sqlite3_bind_int64(s, 6, now);
    sqlite3_bind_text(s, 7, j->text, -1, SQLITE_STATIC);
    q__bind_text(s, 8, j->input);
    if (sqlite3_step(s) != SQLITE_DONE)
        return q__db_err(db, "enqueue");
    if (sqlite3_changes(db->h) > 0) {
        res->id = sqlite3_last_insert_rowid(db->h);
        res->duplicate = false;
        return 0;
    }
    /* ON CONFLICT DO NOTHING inserted nothing: the key exists. */
    res->duplicate = true;
    return id_by_key(db, r.key, &res->id);
}

/* Multi-row inserts: one statement for 64, 16 or 4 jobs instead of one
 * each. Per job, a statement's start and end (cursors opened, the
 * statement journal, reset and bindings) cost as much as the row itself
 * (perf of bench_queue, 100 per transaction).
 *
 * Which id each job got: the transaction holds the write lock and jobs
 * has no AUTOINCREMENT, so SQLite gives each new row the largest id so far
 * plus one, in the order of the VALUES. The ids after prev (the largest
 * before the statement) up to the last one inserted are therefore the
 * inserted jobs' in input order. A job with a key finds its id by key: an
 * id after prev not yet taken in this statement is its own insert, any
 * other a duplicate (of an older job, or of an earlier one in the same
 * batch); the jobs without a key take the ids left, in order. The counts
 * are checked, so an id assigned otherwise fails the enqueue (-EIO, rolled
 * back) instead of answering wrong ids. */
static const struct {
    size_t rows;
    enum q__stmt_id st;
} multi[] = {
    {64, ST_JOB_INSERT_64}, {16, ST_JOB_INSERT_16}, {4, ST_JOB_INSERT_4}};

static int
insert_many(struct q__sqlite *db, const struct q_job_new *jobs, size_t k,
            enum q__stmt_id st, const struct q_enqueue_opts *o, int64_t now,
            int64_t *prev, struct q_enqueue_result *res)
{
    sqlite3_stmt *s = q__stmt(db, st);
    bool taken[64] = {false};
    int64_t last, next;
    size_t changes, inserted = 0;
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, now);
    for (size_t i = 0; i < k; i++) {
        struct q__enqueue_row r = q__enqueue_row(&jobs[i], o, now);
        int p = 2 + 7 * (int)i;
        sqlite3_bind_text(s, p, jobs[i].name, -1, SQLITE_STATIC);
        q__bind_text(s, p + 1, r.key);
        sqlite3_bind_int64(s, p + 2, r.prio);
        sqlite3_bind_int64(s, p + 3, r.run_at);
        sqlite3_bind_int64(s, p + 4, r.run_at + jobs[i].deadline_s * 1000);
        sqlite3_bind_text(s, p + 5, jobs[i].text, -1, SQLITE_STATIC);
        q__bind_text(s, p + 6, jobs[i].input);
    }
    if (sqlite3_step(s) != SQLITE_DONE)
        return q__db_err(db, "enqueue");
    changes = (size_t)sqlite3_changes(db->h);
    last = changes > 0 ? sqlite3_last_insert_rowid(db->h) : *prev;
    if (last - *prev != (int64_t)changes)
        goto unexpected;
    for (size_t i = 0; i < k && changes < k; i++) {
        const char *key = q__enqueue_row(&jobs[i], o, now).key;
        if (key == NULL)
            continue;
        if ((rc = id_by_key(db, key, &res[i].id)) != 0)
            return rc;
        res[i].duplicate = res[i].id <= *prev || res[i].id > last ||
                           taken[res[i].id - *prev - 1];
        if (!res[i].duplicate) {
            taken[res[i].id - *prev - 1] = true;
            inserted++;
        }
    }
    next = *prev; /* the last id handed out; never past last */
    for (size_t i = 0; i < k; i++) {
        if (changes < k && q__enqueue_row(&jobs[i], o, now).key != NULL)
            continue;
        do {
            if (next >= last)
                goto unexpected;
            next++;
        } while (taken[next - *prev - 1]);
        res[i].id = next;
        res[i].duplicate = false;
        inserted++;
    }
    if (changes < k && inserted != changes)
        goto unexpected;
    *prev = last;
    return 0;
unexpected:
    log_error("%s: enqueue: new ids not in the order of the rows", db->path);
    return -EIO;
}

int
q__sqlite_enqueue(q_db *base, const struct q_job_new *jobs, size_t n,
                  const struct q_enqueue_opts *opts, int64_t now,
                  struct q_enqueue_result *res)
{
    struct q__sqlite *db = q__sqlite(base);
    struct q_enqueue_result *tmp;
    sqlite3_stmt *s;
    int64_t prev = 0;
    size_t i = 0;
    int rc;

    if (n == 0)
        return 0;
    tmp = xcalloc(n, sizeof(*tmp));
    if ((rc = q__tx_enter(db)) != 0)
        goto out;
    if (n >= multi[2].rows) {
        if ((s = q__stmt(db, ST_JOB_MAX_ID)) == NULL)
            rc = -EIO;
        else if (sqlite3_step(s) != SQLITE_ROW)
            rc = q__db_err(db, "enqueue: reading the last id");
        else
            prev = sqlite3_column_int64(s, 0);
    }
    for (size_t m = 0; m < sizeof(multi) / sizeof(multi[0]); m++) {
        for (; rc == 0 && n - i >= multi[m].rows; i += multi[m].rows)
            rc = insert_many(db, jobs + i, multi[m].rows, multi[m].st, opts,
                             now, &prev, tmp + i);
    }
    for (; i < n && rc == 0; i++)
        rc = insert_job(db, &jobs[i], opts, now, &tmp[i]);
    rc = q__tx_leave(db, rc);
    if (rc == 0)
        memcpy(res, tmp, n * sizeof(*tmp));
out:
    free(tmp);
    return rc;
}
/* ---- reading jobs ---------------------------------------------------- */

void
q__sqlite_read_job(sqlite3_stmt *s, void *job)
{
    struct q_job *j = job;

    j->id = sqlite3_column_int64(s, 0);
    j->name = q__col_text(s, 1);
    j->key = q__col_text(s, 2);
    j->state = (enum q_job_state)sqlite3_column_int(s, 3);
    j->priority = sqlite3_column_int64(s, 4);
    j->run_at = sqlite3_column_int64(s, 5);
    j->deadline_at = sqlite3_column_int64(s, 6);
    j->created_at = sqlite3_column_int64(s, 7);
    j->updated_at = sqlite3_column_int64(s, 8);
    j->lease_owner = q__col_text(s, 9);
    j->lease_until = sqlite3_column_int64(s, 10);
    j->claims = sqlite3_column_int(s, 11);
    j->spec = q__col_text(s, 12);
    j->error = q__col_text(s, 13);
    j->input = q__col_text(s, 14);
}

int
q__sqlite_job_get(q_db *base, int64_t id, struct q_job *out)
{
    struct q__sqlite *db = q__sqlite(base);

    return q__row_by_id(db, ST_JOB_GET, id, q__sqlite_read_job, out,
                        sizeof(*out), "reading a job");
}

/* Collects the rows of s (job columns). */
static int
collect_jobs(struct q__sqlite *db, sqlite3_stmt *s, struct q_job **out,
             size_t *n)
{
    void *v = NULL;
    int rc = q__rows(db, s, sizeof(struct q_job), q__sqlite_read_job,
                     q__job_clean, &v, n, "listing jobs");
    if (rc == 0)
        *out = v;
    return rc;
}

int
q__sqlite_jobs_list(q_db *base, int state, int64_t after, size_t limit,
                    struct q_job **out, size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s =
        q__stmt(db, state < 0 ? ST_JOBS_LIST : ST_JOBS_LIST_STATE);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, limit ? (sqlite3_int64)limit : -1);
    if (state >= 0)
        sqlite3_bind_int(s, 2, state);
    sqlite3_bind_int64(s, 3, after);
    return collect_jobs(db, s, out, n);
}

int
q__sqlite_counts(q_db *base, int64_t counts[Q_JOB_NSTATES], int64_t *park_open)
{
    struct q__sqlite *db = q__sqlite(base);
    int64_t c[Q_JOB_NSTATES] = {0};
    sqlite3_stmt *s = q__stmt(db, ST_COUNTS);
    int rc;

    /* The counts are what `status` and serve's /healthz read: a file
     * removed or replaced under this process is not the store any more. */
    if (s == NULL || q__file_moved(db))
        return -EIO;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int st = sqlite3_column_int(s, 0);
        if (st >= 0 && st < Q_JOB_NSTATES)
            c[st] = sqlite3_column_int64(s, 1);
    }
    if (rc != SQLITE_DONE)
        return q__db_err(db, "counting jobs");
    s = q__stmt(db, ST_PARK_OPEN);
    if (s == NULL)
        return -EIO;
    if (sqlite3_step(s) != SQLITE_ROW)
        return q__db_err(db, "counting park items");
    *park_open = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    memcpy(counts, c, sizeof(c));
    return 0;
}

/* ---- leases ---------------------------------------------------------- */

static int
reclaim(struct q__sqlite *db, int64_t now, int64_t *n)
{
    sqlite3_stmt *s = q__stmt(db, ST_EXPIRED);
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
        return q__db_err(db, "looking for expired leases");
    if ((s = q__stmt(db, ST_RECLAIM)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, now);
    if ((rc = q__run_done(db, s, "reclaiming expired leases")) != 0)
        return rc;
    if (n != NULL)
        *n = sqlite3_changes64(db->h);
    return 0;
}

int
q__sqlite_reclaim(q_db *base, int64_t now, int64_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    int64_t got = 0;
    int rc = q__tx_enter(db);

    if (rc != 0)
        return rc;
    rc = q__tx_leave(db, reclaim(db, now, &got));
    if (rc == 0 && n != NULL)
        *n = got;
    return rc;
}

static int
claim_locked(struct q__sqlite *db, const char *worker, int64_t now,
             int64_t lease_ms, size_t max, struct q_job *v, size_t *len)
{
    int64_t ids[256];
    size_t nids = 0;
    sqlite3_stmt *s;
    int rc;

    if ((rc = reclaim(db, now, NULL)) != 0)
        return rc;
    if ((s = q__stmt(db, ST_CLAIM_PICK)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, now);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)max);
    while (nids < max && (rc = sqlite3_step(s)) == SQLITE_ROW)
        ids[nids++] = sqlite3_column_int64(s, 0);
    if (nids < max && rc != SQLITE_DONE)
        return q__db_err(db, "claiming");
    sqlite3_reset(s);
    for (size_t i = 0; i < nids; i++) {
        if ((s = q__stmt(db, ST_CLAIM_SET)) == NULL)
            return -EIO;
        sqlite3_bind_int64(s, 1, ids[i]);
        sqlite3_bind_text(s, 2, worker, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, now + lease_ms);
        sqlite3_bind_int64(s, 4, now);
        /* The row is read after the UPDATE, not with a RETURNING: SQLite
         * runs a RETURNING through a table of its own made at every
         * execution, which cost more than the SELECT by id. */
        if ((rc = q__run_done(db, s, "claiming")) != 0)
            return rc;
        if (sqlite3_changes(db->h) != 1)
            return q__db_err(db, "claiming");
        if ((s = q__stmt(db, ST_JOB_GET)) == NULL)
            return -EIO;
        sqlite3_bind_int64(s, 1, ids[i]);
        if ((rc = q__step_row(db, s, "claiming")) != 0)
            return rc;
        memset(&v[*len], 0, sizeof(*v));
        q__sqlite_read_job(s, &v[(*len)++]);
        sqlite3_reset(s);
    }
    for (size_t i = 0; i < *len; i++) {
        if ((rc = q__sqlite_steps_get(&db->base, v[i].id, &v[i].steps,
                                      &v[i].nsteps)) != 0)
            return rc;
        v[i].has_steps = true;
    }
    return 0;
}

int
q__sqlite_claim(q_db *base, const char *worker, int64_t now, int64_t lease_ms,
                size_t max, struct q_job **out, size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    struct q_job *v;
    size_t len = 0;
    int rc;

    if ((rc = q__claim_check(worker, lease_ms, &max)) != 0)
        return rc;
    v = xcalloc(max, sizeof(*v));
    if ((rc = q__tx_enter(db)) == 0)
        rc = q__tx_leave(db,
                         claim_locked(db, worker, now, lease_ms, max, v, &len));
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
held_update(struct q__sqlite *db, sqlite3_stmt *s, const char *what)
{
    int rc = q__run_done(db, s, what);

    if (rc == 0 && sqlite3_changes(db->h) == 0)
        return -EBUSY;
    return rc;
}

int
q__sqlite_extend(q_db *base, int64_t id, const char *worker, int64_t until,
                 int64_t now)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_EXTEND);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    q__bind_text(s, 2, worker);
    sqlite3_bind_int64(s, 3, until);
    sqlite3_bind_int64(s, 4, now);
    return held_update(db, s, "extending a lease");
}

static int
set_held_state(struct q__sqlite *db, int64_t id, const char *worker,
               enum q_job_state state, const int64_t *run_at, int64_t now)
{
    sqlite3_stmt *s = q__stmt(db, ST_SET_STATE_HELD);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    q__bind_text(s, 2, worker);
    sqlite3_bind_int(s, 3, state);
    if (run_at != NULL)
        sqlite3_bind_int64(s, 4, *run_at);
    sqlite3_bind_int64(s, 5, now);
    return held_update(db, s, "updating a job");
}

int
q__sqlite_release(q_db *base, int64_t id, const char *worker, int64_t run_at,
                  int64_t now)
{
    struct q__sqlite *db = q__sqlite(base);

    return set_held_state(db, id, worker, Q_JOB_QUEUED, &run_at, now);
}

int
q__sqlite_complete(q_db *base, int64_t id, const char *worker, int64_t now)
{
    struct q__sqlite *db = q__sqlite(base);

    return set_held_state(db, id, worker, Q_JOB_SUCCEEDED, NULL, now);
}

int
q__sqlite_park_job(q_db *base, int64_t id, const char *worker, int64_t now)
{
    struct q__sqlite *db = q__sqlite(base);

    return set_held_state(db, id, worker, Q_JOB_PARKED, NULL, now);
}

int
q__sqlite_fail(q_db *base, int64_t id, const char *worker, const char *error,
               int64_t now)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_FAIL_HELD);

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    q__bind_text(s, 2, worker);
    q__bind_text(s, 3, error);
    sqlite3_bind_int64(s, 4, now);
    return held_update(db, s, "failing a job");
}

static int
cancel_locked(struct q__sqlite *db, int64_t id, int64_t now)
{
    sqlite3_stmt *s = q__stmt(db, ST_CANCEL);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, now);
    if ((rc = q__run_done(db, s, "cancelling a job")) != 0)
        return rc;
    if (sqlite3_changes(db->h) > 0) {
        for (int i = 0; i < 2; i++) {
            s = q__stmt(db, i == 0 ? ST_CANCEL_STEPS : ST_CANCEL_ATTEMPTS);
            if (s == NULL)
                return -EIO;
            sqlite3_bind_int64(s, 1, id);
            if (i == 1)
                sqlite3_bind_int64(s, 2, now);
            if ((rc = q__run_done(db, s, "cancelling a job's steps")) != 0)
                return rc;
        }
        return 0;
    }
    /* Nothing changed: tell "no such job" from "already ended". */
    if ((s = q__stmt(db, ST_JOB_STATE)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc == SQLITE_ROW)
        return -EALREADY;
    return rc == SQLITE_DONE ? -ENOENT : q__db_err(db, "cancelling a job");
}

int
q__sqlite_cancel(q_db *base, int64_t id, int64_t now)
{
    struct q__sqlite *db = q__sqlite(base);
    int rc = q__tx_enter(db);

    if (rc != 0)
        return rc;
    return q__tx_leave(db, cancel_locked(db, id, now));
}

int
q__sqlite_next_due(q_db *base, int64_t now, int64_t *at)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_NEXT_DUE);
    int rc;

    (void)now;
    if (s == NULL)
        return -EIO;
    if (sqlite3_step(s) != SQLITE_ROW)
        return q__db_err(db, "reading the next due job");
    rc = sqlite3_column_type(s, 0) == SQLITE_NULL ? -ENOENT : 0;
    if (rc == 0)
        *at = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return rc;
}

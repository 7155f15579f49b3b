/* ledger.c: SQLite storage of step progress and the attempts ledger:
 * an attempt is recorded (and its estimate charged to the step) before it
 * is sent, and finished (the charge corrected to reported usage) after. */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"

static void
read_step(sqlite3_stmt *s, void *elem)
{
    struct q_step *st = elem;

    st->index = sqlite3_column_int(s, 0);
    st->state = (enum q_step_state)sqlite3_column_int(s, 1);
    st->tier = q__col_text(s, 2);
    st->attempts = sqlite3_column_int(s, 3);
    st->tokens = sqlite3_column_int64(s, 4);
    st->output = q__col_text(s, 5);
    st->reset_after = sqlite3_column_int(s, 6);
    st->pin_tier = q__col_text(s, 7);
}

int
q__sqlite_steps_get(q_db *base, int64_t job_id, struct q_step **out, size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_STEPS_GET);
    void *v = NULL;
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, job_id);
    rc = q__rows(db, s, sizeof(struct q_step), read_step, q__step_clean, &v, n,
                 "reading steps");
    if (rc == 0)
        *out = v;
    return rc;
}

int
q__sqlite_step_set(q_db *base, int64_t job_id, const char *worker, int index,
                   enum q_step_state state, const char *tier,
                   const char *output, int64_t add_tokens)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_STEP_SET);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, job_id);
    sqlite3_bind_int(s, 2, index);
    sqlite3_bind_int(s, 3, state);
    q__bind_text(s, 4, tier);
    q__bind_text(s, 5, output);
    sqlite3_bind_int64(s, 6, add_tokens);
    q__bind_text(s, 7, worker);
    if ((rc = q__run_done(db, s, "updating a step")) != 0)
        return rc;
    /* The row is written only while worker holds the job (the INSERT's
     * own WHERE): a worker that lost its lease writes nothing. */
    return sqlite3_changes(db->h) == 0 ? -EBUSY : 0;
}

/* ---- attempts -------------------------------------------------------- */

/* The attempt's row is inserted only while the job is held by a->worker
 * (the INSERT's own WHERE EXISTS), so a lease lost to another worker
 * writes nothing and is -EBUSY, with no statement of its own to ask. */
static int
attempt_begin_locked(struct q__sqlite *db, const struct q_attempt_start *a,
                     int64_t *id, int *attempt)
{
    sqlite3_stmt *s = q__stmt(db, ST_ATTEMPT_NEXT);
    int num, rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, a->job_id);
    sqlite3_bind_int(s, 2, a->step);
    if (sqlite3_step(s) != SQLITE_ROW)
        return q__db_err(db, "recording an attempt");
    num = sqlite3_column_int(s, 0);
    sqlite3_reset(s);
    if ((s = q__stmt(db, ST_ATTEMPT_INSERT)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, a->job_id);
    sqlite3_bind_int(s, 2, a->step);
    sqlite3_bind_int(s, 3, num);
    q__bind_text(s, 4, a->tier);
    q__bind_text(s, 5, a->worker);
    q__bind_text(s, 6, a->request_sha256);
    sqlite3_bind_int64(s, 7, a->est_tokens);
    sqlite3_bind_int64(s, 8, a->started_at);
    q__bind_text(s, 9, a->route);
    q__bind_text(s, 10, a->kind);
    q__bind_text(s, 11, a->call_id);
    q__bind_text(s, 12, a->tool);
    q__bind_text(s, 13, a->args);
    if ((rc = q__run_done(db, s, "recording an attempt")) != 0)
        return rc;
    if (sqlite3_changes(db->h) == 0)
        return -EBUSY;
    *id = sqlite3_last_insert_rowid(db->h);
    if ((s = q__stmt(db, ST_STEP_CHARGE)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, a->job_id);
    sqlite3_bind_int(s, 2, a->step);
    q__bind_text(s, 3, a->tier);
    sqlite3_bind_int64(s, 4, a->est_tokens);
    if ((rc = q__run_done(db, s, "charging a step")) != 0)
        return rc;
    *attempt = num;
    return 0;
}

int
q__sqlite_attempt_begin(q_db *base, const struct q_attempt_start *a,
                        int64_t *id, int *attempt)
{
    struct q__sqlite *db = q__sqlite(base);
    int64_t got_id = 0;
    int got = 0, rc;

    if (a->worker == NULL || a->step < 0)
        return -EINVAL;
    if ((rc = q__tx_enter(db)) != 0)
        return rc;
    rc = q__tx_leave(db, attempt_begin_locked(db, a, &got_id, &got));
    if (rc == 0) {
        *id = got_id;
        *attempt = got;
    }
    return rc;
}

/* Reads attempt id's step and estimate: -ENOENT when there is no such
 * attempt, -EALREADY when it is finished. */
static int
attempt_open(struct q__sqlite *db, int64_t id, int64_t *job_id, int *step,
             int64_t *est)
{
    sqlite3_stmt *s = q__stmt(db, ST_ATTEMPT_GET);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    if ((rc = q__step_row(db, s, "finishing an attempt")) != 0)
        return rc;
    *job_id = sqlite3_column_int64(s, 0);
    *step = sqlite3_column_int(s, 1);
    *est = sqlite3_column_int64(s, 2);
    rc = sqlite3_column_type(s, 3) != SQLITE_NULL ? -EALREADY : 0;
    sqlite3_reset(s);
    return rc;
}

/* A caller that corrects the step itself needs nothing of the row, so the
 * UPDATE (only of an unfinished attempt) runs first, and the row is read
 * only when it changed nothing, to tell -ENOENT from -EALREADY. */
static int
attempt_finish_locked(struct q__sqlite *db, int64_t id,
                      const struct q_attempt_result *r)
{
    sqlite3_stmt *s;
    int64_t job_id = 0, est = 0;
    size_t keep;
    int step = 0, rc;

    if (!r->caller_corrects &&
        (rc = attempt_open(db, id, &job_id, &step, &est)) != 0)
        return rc;
    if ((s = q__stmt(db, ST_ATTEMPT_FINISH)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, r->finished_at);
    sqlite3_bind_int(s, 3, r->status);
    q__bind_text(s, 4, r->outcome);
    q__bind_text(s, 5, r->reason);
    q__bind_text(s, 6, r->decision);
    sqlite3_bind_int64(s, 7, r->delay_ms);
    sqlite3_bind_int64(s, 8, r->latency_ms);
    sqlite3_bind_int64(s, 9, r->tokens);
    keep = q__body_keep(r->body, r->body_len, db->keep_body_bytes);
    if (r->body != NULL)
        sqlite3_bind_text(s, 10, r->body, (int)keep, SQLITE_STATIC);
    sqlite3_bind_int(s, 11, r->masked);
    if (r->priced)
        sqlite3_bind_int64(s, 12, r->cost_nusd);
    else
        sqlite3_bind_null(s, 12);
    sqlite3_bind_int(s, 13, r->priced && r->cost_estimated);
    if ((rc = q__run_done(db, s, "finishing an attempt")) != 0)
        return rc;
    if (r->caller_corrects) {
        if (sqlite3_changes(db->h) == 1)
            return 0;
        if ((rc = attempt_open(db, id, &job_id, &step, &est)) == 0) {
            /* open, yet the UPDATE of open attempts missed it */
            log_error("%s: attempt %lld: its result was not stored", db->path,
                      (long long)id);
            rc = -EIO;
        }
        return rc;
    }
    if ((s = q__stmt(db, ST_STEP_CORRECT)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, job_id);
    sqlite3_bind_int(s, 2, step);
    sqlite3_bind_int64(s, 3, r->tokens - est);
    return q__run_done(db, s, "correcting a step's tokens");
}

int
q__sqlite_attempt_finish(q_db *base, int64_t id,
                         const struct q_attempt_result *r)
{
    struct q__sqlite *db = q__sqlite(base);
    int rc;

    /* Left to the caller, the correction is not made here, and the one
     * write left needs no level of its own: a statement that fails undoes
     * itself. */
    if (r->caller_corrects)
        return attempt_finish_locked(db, id, r);
    if ((rc = q__tx_enter(db)) != 0)
        return rc;
    return q__tx_leave(db, attempt_finish_locked(db, id, r));
}

static void
read_attempt(sqlite3_stmt *s, void *elem)
{
    struct q_attempt *a = elem;

    a->id = sqlite3_column_int64(s, 0);
    a->step = sqlite3_column_int(s, 1);
    a->attempt = sqlite3_column_int(s, 2);
    a->tier = q__col_text(s, 3);
    a->request_sha256 = q__col_text(s, 4);
    a->started_at = sqlite3_column_int64(s, 5);
    a->finished_at = sqlite3_column_int64(s, 6);
    a->status = sqlite3_column_int(s, 7);
    a->outcome = q__col_text(s, 8);
    a->reason = q__col_text(s, 9);
    a->decision = q__col_text(s, 10);
    a->delay_ms = sqlite3_column_int64(s, 11);
    a->latency_ms = sqlite3_column_int64(s, 12);
    a->tokens = sqlite3_column_int64(s, 13);
    a->body = q__col_text(s, 14);
    a->masked = sqlite3_column_int(s, 15) != 0;
    a->route = q__col_text(s, 16);
    a->priced = sqlite3_column_type(s, 17) != SQLITE_NULL;
    a->cost_nusd = sqlite3_column_int64(s, 17);
    a->cost_estimated = sqlite3_column_int(s, 18) != 0;
    a->kind = q__col_text(s, 19);
    a->call_id = q__col_text(s, 20);
    a->tool = q__col_text(s, 21);
    a->args = q__col_text(s, 22);
    a->batch_id = sqlite3_column_int64(s, 23);
    a->batch_provider_id = q__col_text(s, 24);
}

int
q__sqlite_job_cost(q_db *base, int64_t job_id, int64_t *nusd)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_JOB_COST);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, job_id);
    if ((rc = q__step_row(db, s, "summing a job's cost")) == 0)
        *nusd = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return rc;
}

int
q__sqlite_attempts_list(q_db *base, int64_t job_id, int step,
                        struct q_attempt **out, size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s =
        q__stmt(db, step < 0 ? ST_ATTEMPTS_JOB : ST_ATTEMPTS_STEP);
    void *v = NULL;
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, job_id);
    if (step >= 0)
        sqlite3_bind_int(s, 2, step);
    rc = q__rows(db, s, sizeof(struct q_attempt), read_attempt,
                 q__attempt_clean, &v, n, "reading attempts");
    if (rc == 0)
        *out = v;
    return rc;
}

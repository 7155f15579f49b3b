/* ledger.c: PostgreSQL storage of step progress and the attempts ledger:
 * an attempt is recorded (and its estimate charged to the step) before it
 * is sent, and finished (the charge corrected to reported usage) after.
 * Each call is one statement; the meaning is the SQLite backend's
 * (queue/sqlite/ledger.c). */
#include "queue/pg/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

static void
read_step(const PGresult *res, int r, void *elem)
{
    struct q_step *st = elem;

    st->index = (int)q__pg_int(res, r, 0);
    st->state = (enum q_step_state)q__pg_int(res, r, 1);
    st->tier = q__pg_text(res, r, 2);
    st->attempts = (int)q__pg_int(res, r, 3);
    st->tokens = q__pg_int(res, r, 4);
    st->output = q__pg_text(res, r, 5);
    st->reset_after = (int)q__pg_int(res, r, 6);
    st->pin_tier = q__pg_text(res, r, 7);
}

int
q__pg_steps_get(q_db *db, int64_t job_id, struct q_step **out, size_t *n)
{
    struct q__pg_params p = {0};
    void *v = NULL;
    int rc;

    q__pg_p_int(&p, job_id);
    rc = q__pg_select(q__pg(db), ST_STEPS_GET, &p, sizeof(struct q_step),
                      read_step, &v, n, "reading steps");
    if (rc == 0)
        *out = v;
    return rc;
}

int
q__pg_step_set(q_db *db, int64_t job_id, const char *worker, int index,
               enum q_step_state state, const char *tier, const char *output,
               int64_t add_tokens)
{
    struct q__pg_params p = {0};

    q__pg_p_int(&p, job_id);
    q__pg_p_int(&p, index);
    q__pg_p_int(&p, state);
    q__pg_p_text(&p, tier);
    q__pg_p_text(&p, output);
    q__pg_p_int(&p, add_tokens);
    q__pg_p_text(&p, worker);
    /* No row changed: the worker lost its lease (a job that is gone
     * fails the statement instead). */
    return q__pg_write(q__pg(db), ST_STEP_SET, &p, true, q__pg_held, NULL, NULL,
                       job_id, "updating a step");
}

/* ---- attempts -------------------------------------------------------- */

/* ST_ATTEMPT_BEGIN's answer: the record's id and number; no row: the
 * worker does not hold the job, and nothing was recorded. */
static int
begun(const PGresult *res, void *id, void *attempt)
{
    int64_t got[2] = {0, 0};

    if (PQntuples(res) == 0)
        return -EBUSY;
    q__pg_read_ints(res, 0, got);
    *(int64_t *)id = got[0];
    *(int *)attempt = (int)got[1];
    return 0;
}

/* Inside a transaction the record rides in the next round trip, its id
 * taken ahead from the sequence; *id and *attempt are written when it is
 * read (at the latest by the commit), and stay 0 if the lease was lost. */
int
q__pg_attempt_begin(q_db *db, const struct q_attempt_start *a, int64_t *id,
                    int *attempt)
{
    struct q__pg *pg = q__pg(db);
    struct q__pg_params p = {0};
    /* Deferred only at the outermost level: a savepoint rolled back after
     * its record was read would leave the caller an id that never was. */
    bool defer = pg->tx_depth == 1;
    int64_t next = 0;
    int rc;

    if (a->worker == NULL || a->step < 0)
        return -EINVAL;
    if (defer &&
        (rc = q__pg_take_id(pg, "attempts", &pg->attempt_ids, &next)) != 0)
        return rc;
    q__pg_p_int(&p, a->job_id);
    q__pg_p_int(&p, a->step);
    q__pg_p_text(&p, a->tier);
    q__pg_p_int(&p, a->est_tokens);
    q__pg_p_text(&p, a->worker);
    q__pg_p_text(&p, a->request_sha256);
    q__pg_p_int(&p, a->started_at);
    if (defer) {
        q__pg_p_int(&p, next);
        *id = 0;
        *attempt = 0;
    } else {
        q__pg_p_text(&p, NULL); /* the sequence's next id */
    }
    q__pg_p_text(&p, a->route);
    q__pg_p_text(&p, a->kind);
    q__pg_p_text(&p, a->call_id);
    q__pg_p_text(&p, a->tool);
    q__pg_p_text(&p, a->args);
    return q__pg_write(pg, ST_ATTEMPT_BEGIN, &p, defer, begun, id, attempt,
                       a->job_id, "recording an attempt for job");
}

/* The kept part of a body (keep bytes) as text PostgreSQL accepts: a text
 * value holds neither NUL nor malformed UTF-8 (SQLite stores such bytes
 * as given), so those bytes become '?'. Caller frees the result. */
static char *
body_text(const char *body, size_t keep)
{
    char *t = xmalloc(keep + 1);

    memcpy(t, body, keep);
    t[keep] = '\0';
    for (size_t i = 0; i < keep; i++) {
        if (t[i] == '\0')
            t[i] = '?';
    }
    json_utf8_scrub(t, keep);
    return t;
}

/* ST_ATTEMPT_FINISH's answer: attempts finished, whether id exists. */
static int
finished(const PGresult *res, void *unused0, void *unused1)
{
    int64_t got[2] = {0, 0};

    (void)unused0;
    (void)unused1;
    if (PQntuples(res) > 0)
        q__pg_read_ints(res, 0, got);
    if (got[0] != 0)
        return 0;
    return got[1] != 0 ? -EALREADY : -ENOENT;
}

/* Inside a transaction nothing waits for the result: it rides in the next
 * round trip, and an attempt finished twice is logged (queue.h). */
int
q__pg_attempt_finish(q_db *db, int64_t id, const struct q_attempt_result *r)
{
    struct q__pg *pg = q__pg(db);
    struct q__pg_params p = {0};
    char *body = NULL;
    int rc;

    if (r->body != NULL)
        body = body_text(
            r->body, q__body_keep(r->body, r->body_len, pg->keep_body_bytes));
    q__pg_p_int(&p, id);
    q__pg_p_int(&p, r->finished_at);
    q__pg_p_int(&p, r->status);
    q__pg_p_text(&p, r->outcome);
    q__pg_p_text(&p, r->reason);
    q__pg_p_text(&p, r->decision);
    q__pg_p_int(&p, r->delay_ms);
    q__pg_p_int(&p, r->latency_ms);
    q__pg_p_int(&p, r->tokens);
    q__pg_p_text(&p, body);
    q__pg_p_int(&p, r->masked);
    if (r->priced)
        q__pg_p_int(&p, r->cost_nusd);
    else
        q__pg_p_text(&p, NULL);
    q__pg_p_int(&p, r->priced && r->cost_estimated);
    rc = q__pg_write(
        pg, r->caller_corrects ? ST_ATTEMPT_FINISH_ONLY : ST_ATTEMPT_FINISH, &p,
        true, finished, NULL, NULL, id, "finishing attempt");
    free(body);
    return rc;
}

static void
read_attempt(const PGresult *res, int r, void *elem)
{
    struct q_attempt *a = elem;

    a->id = q__pg_int(res, r, 0);
    a->step = (int)q__pg_int(res, r, 1);
    a->attempt = (int)q__pg_int(res, r, 2);
    a->tier = q__pg_text(res, r, 3);
    a->request_sha256 = q__pg_text(res, r, 4);
    a->started_at = q__pg_int(res, r, 5);
    a->finished_at = q__pg_int(res, r, 6);
    a->status = (int)q__pg_int(res, r, 7);
    a->outcome = q__pg_text(res, r, 8);
    a->reason = q__pg_text(res, r, 9);
    a->decision = q__pg_text(res, r, 10);
    a->delay_ms = q__pg_int(res, r, 11);
    a->latency_ms = q__pg_int(res, r, 12);
    a->tokens = q__pg_int(res, r, 13);
    a->body = q__pg_text(res, r, 14);
    a->masked = q__pg_int(res, r, 15) != 0;
    a->route = q__pg_text(res, r, 16);
    a->priced = !q__pg_null(res, r, 17);
    a->cost_nusd = q__pg_int(res, r, 17);
    a->cost_estimated = q__pg_int(res, r, 18) != 0;
    a->kind = q__pg_text(res, r, 19);
    a->call_id = q__pg_text(res, r, 20);
    a->tool = q__pg_text(res, r, 21);
    a->args = q__pg_text(res, r, 22);
    a->batch_id = q__pg_int(res, r, 23); /* NULL reads 0 */
    a->batch_provider_id = q__pg_text(res, r, 24);
}

int
q__pg_job_cost(q_db *db, int64_t job_id, int64_t *nusd)
{
    struct q__pg_params p = {0};
    int64_t v[1] = {0};
    int rc;

    q__pg_p_int(&p, job_id);
    rc = q__pg_select_one(q__pg(db), ST_JOB_COST, &p, sizeof(v),
                          q__pg_read_ints, v, "summing a job's cost");
    if (rc == 0)
        *nusd = v[0];
    return rc;
}

int
q__pg_attempts_list(q_db *db, int64_t job_id, int step, struct q_attempt **out,
                    size_t *n)
{
    struct q__pg_params p = {0};
    void *v = NULL;
    int rc;

    q__pg_p_int(&p, job_id);
    q__pg_p_int(&p, step < 0 ? -1 : step);
    rc = q__pg_select(q__pg(db), ST_ATTEMPTS_LIST, &p, sizeof(struct q_attempt),
                      read_attempt, &v, n, "reading attempts");
    if (rc == 0)
        *out = v;
    return rc;
}

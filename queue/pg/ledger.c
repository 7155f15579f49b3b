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

static const struct q__pg_sql steps_get_sql = {
    "q_ledger_steps_get",
    "SELECT idx, state, tier, attempts, tokens, output, reset_after, pin_tier"
    " FROM steps WHERE job_id = $1::bigint ORDER BY idx"};

/* Every write of a job's progress (this, attempt_begin_sql and
 * attempt_finish_sql) locks the job's row first, and holds it to the
 * commit: the store's write lock is let go before the COMMIT (pipe.c),
 * and a claim of an expired lease must not take the job while a commit
 * of its progress is still on its way (it skips the locked row, or locks
 * it once the commit is done and then reads the progress afresh:
 * claim_sql, jobs.c). Here the row is written only while $7 holds the
 * job (as attempt_begin_sql checks it), unless $7 is NULL (a parked
 * job's resolution, which writes the job's row too); the lock is taken by
 * the condition (a CTE runs only when it is used), and a job that is gone
 * still fails the insert on its foreign key, as on SQLite. */
static const struct q__pg_sql step_set_sql = {
    "q_ledger_step_set",
    "WITH held AS (SELECT state = 1 AND lease_owner = $7::text AS mine"
    " FROM jobs WHERE id = $1::bigint FOR UPDATE)"
    " INSERT INTO steps (job_id, idx, state, tier, output, tokens)"
    " SELECT $1::bigint, $2::bigint, $3::bigint, $4::text, $5::text,"
    " $6::bigint WHERE (SELECT count(*) FROM held) >= 0 AND ($7::text IS NULL"
    " OR (SELECT bool_or(mine) FROM held))"
    " ON CONFLICT (job_id, idx) DO UPDATE"
    " SET state = excluded.state, tier = coalesce(excluded.tier, steps.tier),"
    " output = coalesce(excluded.output, steps.output),"
    " tokens = greatest(0, steps.tokens + excluded.tokens)"};

/* The lease check, the numbering, the ledger row and the step's charge in
 * one statement. The job row is locked while it runs, so a cancel or a
 * reclaim either comes first (and no row is made: -EBUSY) or waits. $8:
 * the id, taken ahead from the table's sequence when the record is
 * deferred; NULL: the sequence's next. */
static const struct q__pg_sql attempt_begin_sql = {
    "q_ledger_attempt_begin",
    "WITH held AS (SELECT id FROM jobs WHERE id = $1::bigint AND state = 1"
    "   AND lease_owner = $5::text FOR UPDATE),"
    " num AS (SELECT (SELECT coalesce(max(attempt), 0) + 1 FROM attempts"
    "   WHERE job_id = $1::bigint AND step = $2::bigint) AS n FROM held),"
    " ins AS (INSERT INTO attempts (id, job_id, step, attempt, tier, worker,"
    "   request_sha256, est_tokens, started_at, route, kind, call_id, tool,"
    "   args)"
    "   SELECT coalesce($8::bigint,"
    "   nextval(pg_get_serial_sequence('attempts', 'id'))), $1::bigint,"
    "   $2::bigint, n, $3::text, $5::text, $6::text, $4::bigint, $7::bigint,"
    "   $9::text, $10::text, $11::text, $12::text, $13::text"
    "   FROM num RETURNING id, attempt),"
    " charge AS (INSERT INTO steps (job_id, idx, state, tier, attempts,"
    "   tokens) SELECT $1::bigint, $2::bigint, 1, $3::text, 1, $4::bigint"
    "   FROM ins ON CONFLICT (job_id, idx) DO UPDATE SET state = 1,"
    "   tier = coalesce(excluded.tier, steps.tier),"
    "   attempts = steps.attempts + 1,"
    "   tokens = steps.tokens + excluded.tokens)"
    " SELECT id, attempt FROM ins"};

/* The result, the step's correction (estimate to reported tokens), and
 * what tells -ENOENT from -EALREADY, in one statement: the UPDATE that
 * finds finished_at NULL is the one that counts (a second finish racing
 * it waits for the row, then finds it finished). */
#define FINISH_HELD                                                            \
    "held AS (SELECT id FROM jobs WHERE id ="                                  \
    " (SELECT job_id FROM attempts WHERE id = $1::bigint) FOR UPDATE),"
#define FINISH_SET                                                             \
    "UPDATE attempts SET finished_at = $2::bigint, status = $3::bigint,"       \
    " outcome = $4::text, reason = $5::text, decision = $6::text,"             \
    " delay_ms = $7::bigint, latency_ms = $8::bigint, tokens = $9::bigint,"    \
    " body = $10::text, masked = $11::bigint, cost_nusd = $12::bigint,"        \
    " cost_estimated = $13::bigint"                                            \
    " WHERE id = $1::bigint AND finished_at IS NULL"                           \
    " AND EXISTS (SELECT 1 FROM held)"
#define FINISH_CORRECT                                                         \
    " cor AS (UPDATE steps s"                                                  \
    " SET tokens = greatest(0, s.tokens + fin.tokens - fin.est_tokens)"        \
    " FROM fin WHERE s.job_id = fin.job_id AND s.idx = fin.step)"
#define FINISH_COUNT                                                           \
    " SELECT (SELECT count(*) FROM fin),"                                      \
    " EXISTS (SELECT 1 FROM attempts WHERE id = $1::bigint)::int"
static const struct q__pg_sql attempt_finish_sql = {
    "q_ledger_attempt_finish",
    "WITH " FINISH_HELD " fin AS (" FINISH_SET
    " RETURNING job_id, step, est_tokens, tokens)," FINISH_CORRECT
        FINISH_COUNT};
/* The same without the step's correction (caller_corrects). */
static const struct q__pg_sql attempt_finish_only_sql = {
    "q_ledger_attempt_finish_only",
    "WITH " FINISH_HELD " fin AS (" FINISH_SET " RETURNING 1)" FINISH_COUNT};

static const struct q__pg_sql attempts_list_sql = {
    "q_ledger_attempts_list",
    "SELECT id, step, attempt, tier, request_sha256, started_at,"
    " finished_at, status, outcome, reason, decision, delay_ms, latency_ms,"
    " tokens, body, masked, route, cost_nusd, cost_estimated, kind, call_id,"
    " tool, args FROM attempts"
    " WHERE job_id = $1::bigint"
    " AND ($2::bigint < 0 OR step = $2::bigint) ORDER BY step, attempt"};

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
    rc = q__pg_select(q__pg(db), &steps_get_sql, &p, sizeof(struct q_step),
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
    return q__pg_write(q__pg(db), &step_set_sql, &p, true, q__pg_held, NULL,
                       NULL, job_id, "updating a step");
}

/* ---- attempts -------------------------------------------------------- */

/* attempt_begin_sql's answer: the record's id and number; no row: the
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
    return q__pg_write(pg, &attempt_begin_sql, &p, defer, begun, id, attempt,
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

/* attempt_finish_sql's answer: attempts finished, whether id exists. */
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
        pg, r->caller_corrects ? &attempt_finish_only_sql : &attempt_finish_sql,
        &p, true, finished, NULL, NULL, id, "finishing attempt");
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
}

static const struct q__pg_sql job_cost_sql = {
    "q_ledger_job_cost", "SELECT coalesce(sum(cost_nusd), 0) FROM attempts"
                         " WHERE job_id = $1::bigint"};

int
q__pg_job_cost(q_db *db, int64_t job_id, int64_t *nusd)
{
    struct q__pg_params p = {0};
    int64_t v[1] = {0};
    int rc;

    q__pg_p_int(&p, job_id);
    rc = q__pg_select_one(q__pg(db), &job_cost_sql, &p, sizeof(v),
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
    rc = q__pg_select(q__pg(db), &attempts_list_sql, &p,
                      sizeof(struct q_attempt), read_attempt, &v, n,
                      "reading attempts");
    if (rc == 0)
        *out = v;
    return rc;
}

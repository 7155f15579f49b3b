/* sql.c: the SQL of every cached statement of the SQLite backend, in one
 * table indexed by enum q__stmt_id (store.c prepares and caches them). */
#include "queue/sqlite/internal.h"

/* The multi-row inserts of jobs (jobs.c, insert_many): ?1 is the time,
 * then each row binds name, key, priority, run_at, deadline_at, spec,
 * input. */
#define JOBS_INSERT_INTO                                                       \
    "INSERT INTO jobs (created_at, updated_at, name, key, priority, run_at,"   \
    " deadline_at, spec, input) VALUES "
#define JOBS_ROW     "(?1, ?1, ?, ?, ?, ?, ?, ?, ?)"
#define JOBS_ROWS_4  JOBS_ROW "," JOBS_ROW "," JOBS_ROW "," JOBS_ROW
#define JOBS_ROWS_16 JOBS_ROWS_4 "," JOBS_ROWS_4 "," JOBS_ROWS_4 "," JOBS_ROWS_4
#define JOBS_ROWS_64                                                           \
    JOBS_ROWS_16 "," JOBS_ROWS_16 "," JOBS_ROWS_16 "," JOBS_ROWS_16
#define JOBS_ON_KEY " ON CONFLICT (key) WHERE key IS NOT NULL DO NOTHING"

/* A job's attempts (ledger.c, read_attempt), each with the batch it is
 * an item of (batch_items' key is the attempt). */
#define ATTEMPTS_SELECT                                                        \
    "SELECT a.id, a.step, a.attempt, a.tier, a.request_sha256,"                \
    " a.started_at, a.finished_at, a.status, a.outcome, a.reason,"             \
    " a.decision, a.delay_ms, a.latency_ms, a.tokens, a.body, a.masked,"       \
    " a.route, a.cost_nusd, a.cost_estimated, a.kind, a.call_id, a.tool,"      \
    " a.args, bi.batch_id, b.provider_id FROM attempts a"                      \
    " LEFT JOIN batch_items bi ON bi.attempt_id = a.id"                        \
    " LEFT JOIN batches b ON b.id = bi.batch_id"

/* The SQL of every cached statement, indexed by enum q__stmt_id. */
static const char *const sql_text[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_BEGIN_READ] = "BEGIN DEFERRED",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_SAVEPOINT] = "SAVEPOINT q",
    [ST_RELEASE] = "RELEASE q",
    [ST_ROLLBACK_TO] = "ROLLBACK TO q",
    [ST_JOB_INSERT] =
        "INSERT INTO jobs (name, key, priority, run_at, deadline_at,"
        " created_at, updated_at, spec, input)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8)"
        " ON CONFLICT (key) WHERE key IS NOT NULL DO NOTHING",
    [ST_JOB_INSERT_4] = JOBS_INSERT_INTO JOBS_ROWS_4 JOBS_ON_KEY,
    [ST_JOB_INSERT_16] = JOBS_INSERT_INTO JOBS_ROWS_16 JOBS_ON_KEY,
    [ST_JOB_INSERT_64] = JOBS_INSERT_INTO JOBS_ROWS_64 JOBS_ON_KEY,
    [ST_JOB_MAX_ID] = "SELECT coalesce(max(id), 0) FROM jobs",
    [ST_JOB_BY_KEY] = "SELECT id FROM jobs WHERE key = ?1",
    [ST_JOB_GET] =
        "SELECT id, name, key, state, priority, run_at, deadline_at,"
        " created_at, updated_at, lease_owner, lease_until, claims, spec,"
        " error, input FROM jobs WHERE id = ?1",
    [ST_JOBS_LIST] =
        "SELECT id, name, key, state, priority, run_at, deadline_at,"
        " created_at, updated_at, lease_owner, lease_until, claims, NULL,"
        " error, NULL FROM jobs WHERE id > ?3 ORDER BY id LIMIT ?1",
    [ST_JOBS_LIST_STATE] =
        "SELECT id, name, key, state, priority, run_at, deadline_at,"
        " created_at, updated_at, lease_owner, lease_until, claims, NULL,"
        " error, NULL FROM jobs WHERE state = ?2 AND id > ?3"
        " ORDER BY id LIMIT ?1",
    [ST_COUNTS] = "SELECT state, count(*) FROM jobs GROUP BY state",
    [ST_PARK_OPEN] = "SELECT count(*) FROM park WHERE state = 'open'",
    [ST_EXPIRED] = "SELECT 1 FROM jobs INDEXED BY jobs_leased"
                   " WHERE state = 1 AND lease_until < ?1 LIMIT 1",
    [ST_RECLAIM] = "UPDATE jobs SET state = 0, lease_owner = NULL,"
                   " lease_until = NULL, updated_at = ?1"
                   " WHERE state = 1 AND lease_until < ?1",
    /* Pinned to the partial index: with few rows or no statistics the
     * planner would pick jobs_state and sort the whole backlog. */
    [ST_CLAIM_PICK] = "SELECT id FROM jobs INDEXED BY jobs_ready"
                      " WHERE state = 0 AND run_at <= ?1"
                      " ORDER BY priority DESC, run_at, id LIMIT ?2",
    [ST_CLAIM_SET] =
        "UPDATE jobs SET state = 1, lease_owner = ?2, lease_until = ?3,"
        " claims = claims + 1, updated_at = ?4 WHERE id = ?1 AND state = 0",
    [ST_EXTEND] = "UPDATE jobs SET lease_until = ?3, updated_at = ?4"
                  " WHERE id = ?1 AND state = 1 AND lease_owner = ?2",
    [ST_SET_STATE_HELD] =
        "UPDATE jobs SET state = ?3, run_at = coalesce(?4, run_at),"
        " lease_owner = NULL, lease_until = NULL, updated_at = ?5"
        " WHERE id = ?1 AND state = 1 AND lease_owner = ?2",
    [ST_FAIL_HELD] =
        "UPDATE jobs SET state = 3, error = ?3, lease_owner = NULL,"
        " lease_until = NULL, updated_at = ?4"
        " WHERE id = ?1 AND state = 1 AND lease_owner = ?2",
    [ST_CANCEL] = "UPDATE jobs SET state = 5, lease_owner = NULL,"
                  " lease_until = NULL, updated_at = ?2"
                  " WHERE id = ?1 AND state IN (0, 1, 4)",
    /* A cancelled job keeps no step running and no attempt in flight: a
     * worker that held it drops its answer. */
    [ST_CANCEL_STEPS] = "UPDATE steps SET state = 0"
                        " WHERE job_id = ?1 AND state = 1",
    [ST_CANCEL_ATTEMPTS] = "UPDATE attempts SET finished_at = ?2,"
                           " outcome = 'unknown', reason = 'cancelled'"
                           " WHERE job_id = ?1 AND finished_at IS NULL",
    [ST_JOB_STATE] = "SELECT state FROM jobs WHERE id = ?1",
    [ST_STEPS_GET] = "SELECT idx, state, tier, attempts, tokens, output,"
                     " reset_after, pin_tier FROM steps WHERE job_id = ?1"
                     " ORDER BY idx",
    [ST_STEP_SET] =
        "INSERT INTO steps (job_id, idx, state, tier, output, tokens)"
        " SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE ?7 IS NULL OR EXISTS (SELECT 1"
        " FROM jobs WHERE id = ?1 AND state = 1 AND lease_owner = ?7)"
        " ON CONFLICT (job_id, idx) DO UPDATE"
        " SET state = excluded.state, tier = coalesce(excluded.tier, tier),"
        " output = coalesce(excluded.output, output),"
        " tokens = max(0, tokens + excluded.tokens)",
    [ST_ATTEMPT_NEXT] = "SELECT coalesce(max(attempt), 0) + 1 FROM attempts"
                        " WHERE job_id = ?1 AND step = ?2",
    [ST_ATTEMPT_INSERT] =
        "INSERT INTO attempts (job_id, step, attempt, tier, worker,"
        " request_sha256, est_tokens, started_at, route, kind, call_id,"
        " tool, args)"
        " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13"
        " WHERE EXISTS (SELECT 1"
        " FROM jobs WHERE id = ?1 AND state = 1 AND lease_owner = ?5)",
    [ST_STEP_CHARGE] =
        "INSERT INTO steps (job_id, idx, state, tier, attempts, tokens)"
        " VALUES (?1, ?2, 1, ?3, 1, ?4) ON CONFLICT (job_id, idx) DO UPDATE"
        " SET state = 1, tier = coalesce(excluded.tier, tier),"
        " attempts = attempts + 1, tokens = tokens + excluded.tokens",
    [ST_ATTEMPT_FINISH] =
        "UPDATE attempts SET finished_at = ?2, status = ?3, outcome = ?4,"
        " reason = ?5, decision = ?6, delay_ms = ?7, latency_ms = ?8,"
        " tokens = ?9, body = ?10, masked = ?11, cost_nusd = ?12,"
        " cost_estimated = ?13 WHERE id = ?1 AND finished_at IS NULL",
    [ST_ATTEMPT_GET] = "SELECT job_id, step, est_tokens, finished_at"
                       " FROM attempts WHERE id = ?1",
    [ST_STEP_CORRECT] = "UPDATE steps SET tokens = max(0, tokens + ?3)"
                        " WHERE job_id = ?1 AND idx = ?2",
    [ST_JOB_COST] = "SELECT coalesce(sum(cost_nusd), 0) FROM attempts"
                    " WHERE job_id = ?1",
    [ST_ATTEMPTS_JOB] =
        ATTEMPTS_SELECT " WHERE a.job_id = ?1 ORDER BY a.step, a.attempt",
    [ST_ATTEMPTS_STEP] = ATTEMPTS_SELECT
    " WHERE a.job_id = ?1 AND a.step = ?2 ORDER BY a.attempt",
    [ST_TIER_GET] =
        "SELECT breaker, failures, open_until, exhausted_until,"
        " exhausted_reason, limited_until, allowance_used, allowance_since,"
        " config_hash, req_tat, tok_tat, pace, pace_down_at, pace_up_at,"
        " learned_rpm, learned_tpm, doubt, usage, flight FROM tiers"
        " WHERE name = ?1",
    [ST_TIER_PUT] = Q__TIER_PUT_INTO
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
    " ?15, ?16, ?17, ?18, ?19, ?20)" Q__TIER_PUT_SET,
    /* A running job is due when its lease would expire: if its holder
     * died, that is when another worker takes it over. */
    [ST_NEXT_DUE] = "SELECT min(t) FROM (SELECT min(run_at) AS t FROM jobs"
                    " INDEXED BY jobs_ready WHERE state = 0 UNION ALL"
                    " SELECT min(lease_until) FROM jobs INDEXED BY jobs_leased"
                    " WHERE state = 1)",
    [ST_PARK_GET] =
        "SELECT"
        " id, job_id, step, step_name, reason, attempts, request_sha256,"
        " request, error, tier, parked_at, state, resolution, resolved_by,"
        " resolved_at, note, answer FROM park WHERE id = ?1",
    [ST_PARK_LIST] =
        "SELECT"
        " id, job_id, step, step_name, reason, attempts, request_sha256,"
        " request, error, tier, parked_at, state, resolution, resolved_by,"
        " resolved_at, note, answer FROM park"
        " WHERE (?1 OR ?5 > 0 OR state = 'open') AND (?2 IS NULL OR reason = "
        "?2)"
        " AND (?3 IS NULL OR tier = ?3) AND (?4 = 0 OR job_id = ?4)"
        " AND (?5 = 0 OR (state = 'resolved' AND resolved_at >= ?5))"
        " ORDER BY state = 'open' DESC, id",
    /* The UPDATE that decides a race: only one resolve finds it open. */
    [ST_PARK_CLOSE] = "UPDATE park SET state = 'resolved', resolution = ?2,"
                      " resolved_by = ?3, resolved_at = ?4, note = ?5,"
                      " answer = ?6"
                      " WHERE id = ?1 AND state = 'open'",
    [ST_STEP_RESET] =
        "INSERT INTO steps (job_id, idx, state, output, reset_after,"
        " pin_tier) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        " ON CONFLICT (job_id, idx) DO UPDATE SET state = excluded.state,"
        " output = coalesce(excluded.output, output),"
        " reset_after = max(reset_after, excluded.reset_after),"
        " pin_tier = excluded.pin_tier",
    [ST_JOB_WAKE] = "UPDATE jobs SET run_at = ?2"
                    " WHERE id = ?1 AND state = 0 AND run_at > ?2",
    [ST_JOB_REQUEUE] = "UPDATE jobs SET state = 0, run_at = ?4,"
                       " deadline_at = ?3, updated_at = ?2"
                       " WHERE id = ?1 AND state = 4",
    [ST_JOB_END_PARKED] = "UPDATE jobs SET state = ?4, error = ?2,"
                          " updated_at = ?3 WHERE id = ?1 AND state = 4",
    [ST_PARK_ADD] =
        "INSERT INTO park (job_id, step, step_name, reason, attempts,"
        " request_sha256, request, error, tier, parked_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [ST_TIER_EVENT_ADD] =
        "INSERT INTO tier_events (tier, at, event) VALUES (?1, ?2, ?3)",
    [ST_SCHED_GET] = "SELECT name, paused, since, done_until, last_slot,"
                     " last_job_id, updated_at FROM schedules WHERE name = ?1",
    [ST_SCHED_LIST] = "SELECT name, paused, since, done_until, last_slot,"
                      " last_job_id, updated_at FROM schedules ORDER BY name",
    /* ?1 name, ?2 done, ?3 slot, ?4 job id, ?5 now. One statement, and
     * every column moves only forward from what the row holds when it
     * runs (max, CASE on the stored value), so workers noting the same
     * schedule at once cannot undo each other's progress. */
    [ST_SCHED_NOTE] =
        "INSERT INTO schedules (name, since, done_until, last_slot,"
        " last_job_id, updated_at) VALUES (?1, ?5, max(?5, ?2),"
        " CASE WHEN ?4 > 0 AND ?3 > 0 THEN ?3 ELSE 0 END,"
        " CASE WHEN ?4 > 0 AND ?3 > 0 THEN ?4 ELSE 0 END, ?5)"
        " ON CONFLICT (name) DO UPDATE SET done_until = max(done_until, ?2),"
        " last_job_id = CASE WHEN ?4 > 0 AND ?3 > last_slot THEN ?4"
        " ELSE last_job_id END,"
        " last_slot = CASE WHEN ?4 > 0 AND ?3 > last_slot THEN ?3"
        " ELSE last_slot END, updated_at = max(updated_at, ?5)",
    /* ?1 name, ?2 slot, ?3 now. The row is written only when it is new
     * or its done_until is before slot (the WHERE reads the stored
     * value), so sqlite3_changes() is 1 for the one claimer of a slot
     * and 0 for the others. */
    /* A new window's row is made only when the amount fits; an existing
     * one grows only when spent + reserved + amount stays within ?3. */
    [ST_BUDGET_RESERVE] =
        "INSERT INTO budgets (name, win, reserved_nusd, updated_at)"
        " SELECT ?1, ?2, ?4, ?5 WHERE ?4 <= ?3"
        " ON CONFLICT (name, win) DO UPDATE"
        " SET reserved_nusd = reserved_nusd + excluded.reserved_nusd,"
        " updated_at = max(updated_at, excluded.updated_at)"
        " WHERE spent_nusd + reserved_nusd + excluded.reserved_nusd <= ?3",
    [ST_BUDGET_SETTLE] =
        "INSERT INTO budgets (name, win, spent_nusd, updated_at)"
        " VALUES (?1, ?2, ?4, ?5) ON CONFLICT (name, win) DO UPDATE"
        " SET reserved_nusd = max(0, reserved_nusd - ?3),"
        " spent_nusd = spent_nusd + excluded.spent_nusd,"
        " updated_at = max(updated_at, excluded.updated_at)",
    [ST_BATCH_CREATE] =
        "INSERT INTO batches (tier, api, key, worker, lease_until,"
        " created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)"
        " ON CONFLICT (key) DO NOTHING",
    [ST_BATCH_ITEM_ADD] =
        "INSERT INTO batch_items (attempt_id, batch_id, job_id, step)"
        " SELECT ?2, id, ?3, ?4 FROM batches WHERE id = ?1"
        " ON CONFLICT (attempt_id) DO NOTHING",
    [ST_BATCH_COUNT_ITEM] =
        "UPDATE batches SET items = items + 1 WHERE id = ?1",
    /* ?1 id, ?2 worker, ?3 lease_until, ?4 state, ?5 provider_id, ?6 now */
    [ST_BATCH_SET] =
        "UPDATE batches SET worker = ?2, lease_until = ?3, state = ?4,"
        " provider_id = coalesce(?5, provider_id),"
        " updated_at = max(updated_at, ?6)"
        " WHERE id = ?1 AND state <= ?4 AND (worker = ?2 OR lease_until <= ?6)",
    [ST_BATCHES_OPEN] =
        "SELECT id, tier, api, key, provider_id, state, items, worker,"
        " lease_until, created_at, updated_at FROM batches"
        " WHERE tier = ?1 AND state < 3 ORDER BY id",
    [ST_BATCH_ITEMS] =
        "SELECT i.attempt_id, i.job_id, i.step, a.finished_at IS NOT NULL"
        " FROM batch_items i LEFT JOIN attempts a ON a.id = i.attempt_id"
        " WHERE i.batch_id = ?1 ORDER BY i.attempt_id",
    [ST_BATCH_ITEM_SETTLE] =
        "UPDATE batch_items SET realtime_nusd = ?2 WHERE attempt_id = ?1",
    [ST_REPORT_BATCHES] =
        "SELECT b.tier, count(*), sum(coalesce(a.cost_nusd, 0)),"
        " sum(i.realtime_nusd) FROM batch_items i"
        " JOIN batches b ON b.id = i.batch_id"
        " JOIN attempts a ON a.id = i.attempt_id"
        " WHERE i.realtime_nusd IS NOT NULL AND a.finished_at >= ?1"
        " GROUP BY b.tier ORDER BY b.tier",
    [ST_BATCH_OF_ATTEMPT] =
        "SELECT batch_id FROM batch_items WHERE attempt_id = ?1",
    [ST_BUDGETS_LIST] =
        "SELECT name, win, spent_nusd, reserved_nusd, updated_at FROM budgets"
        " WHERE updated_at >= ?1 ORDER BY name, win",
    /* A retry (retry.c): the row first, from the job as it is (its
     * state still the one the caller saw, or nothing is inserted), then
     * the job and its steps from ?2 on. */
    [ST_RETRY_ADD] =
        "INSERT INTO job_retries (job_id, from_step, retried_by, retried_at,"
        " prior_state, prior_error) SELECT id, ?2, ?3, ?4, state, error"
        " FROM jobs WHERE id = ?1 AND state = ?5",
    [ST_RETRY_JOB] = "UPDATE jobs SET state = 0, run_at = ?2,"
                     " deadline_at = ?3, error = NULL, lease_owner = NULL,"
                     " lease_until = NULL, updated_at = ?4 WHERE id = ?1",
    [ST_RETRY_STEPS] =
        "UPDATE steps SET state = 0, output = NULL, pin_tier = NULL,"
        " reset_after = max(reset_after, (SELECT coalesce(max(a.attempt), 0)"
        " FROM attempts a WHERE a.job_id = steps.job_id"
        " AND a.step = steps.idx)) WHERE job_id = ?1 AND idx >= ?2",
    /* An attempt a reset step left without result (a step parked in
     * doubt, then failed by an operator) ends now: its step starts
     * afresh, and the worker must not settle it in doubt again. */
    [ST_RETRY_ATTEMPTS] = "UPDATE attempts SET finished_at = ?3,"
                          " outcome = 'unknown', reason = 'retried'"
                          " WHERE job_id = ?1 AND step >= ?2"
                          " AND finished_at IS NULL",
    [ST_RETRIES_LIST] =
        "SELECT id, job_id, from_step, retried_by, retried_at, prior_state,"
        " prior_error FROM job_retries WHERE job_id = ?1 ORDER BY id",
    /* A taken name inserts nothing: sqlite3_changes() tells -EEXIST. */
    [ST_OPERATOR_ADD] =
        "INSERT INTO operators (name, role, token_sha256, created_at,"
        " rotated_at) VALUES (?1, ?2, ?3, ?4, ?4) ON CONFLICT (name) DO "
        "NOTHING",
    [ST_OPERATOR_ROTATE] = "UPDATE operators SET token_sha256 = ?2,"
                           " rotated_at = ?3 WHERE name = ?1",
    [ST_OPERATOR_REMOVE] = "DELETE FROM operators WHERE name = ?1",
    [ST_OPERATORS_LIST] = "SELECT name, role, token_sha256, created_at,"
                          " rotated_at FROM operators ORDER BY name",
    [ST_AUDIT_ADD] =
        "INSERT INTO audit (at, who, action, job_id, park_id, source, detail)"
        " VALUES (?1, ?2, ?3, nullif(?4, 0), nullif(?5, 0), ?6, ?7)",
    [ST_AUDIT_LIST] =
        "SELECT id, at, who, action, coalesce(job_id, 0), coalesce(park_id, 0),"
        " source, detail FROM audit WHERE at >= ?1"
        " AND (?2 = 0 OR job_id = ?2) AND (?3 = 0 OR park_id = ?3) ORDER BY id",
    [ST_SCHED_CLAIM] =
        "INSERT INTO schedules (name, since, done_until, updated_at)"
        " VALUES (?1, ?3, ?2, ?3) ON CONFLICT (name) DO UPDATE SET"
        " done_until = excluded.done_until,"
        " updated_at = max(updated_at, excluded.updated_at)"
        " WHERE schedules.done_until < excluded.done_until",
    /* ?1 name, ?2 paused (0 or 1), ?3 now. A resume moves done_until only
     * when the row was paused: the CASE reads the stored value. */
    [ST_SCHED_PAUSE] =
        "INSERT INTO schedules (name, paused, since, done_until, updated_at)"
        " VALUES (?1, ?2, ?3, ?3, ?3) ON CONFLICT (name) DO UPDATE SET"
        " done_until = CASE WHEN paused <> 0 AND ?2 = 0"
        " THEN max(done_until, ?3) ELSE done_until END,"
        " paused = ?2, updated_at = max(updated_at, ?3)",
    /* The morning report (report.c): ?1 since; ?2 a limit (-1: none). The
     * jobs, attempts and times it reads have no index of their own: a
     * report is one scan, run once in a while. */
    [ST_REPORT_JOBS] = "SELECT state, count(*) FROM jobs WHERE created_at >= ?1"
                       " GROUP BY state",
    [ST_REPORT_TIERS] =
        Q__REPORT_TIERS_SELECT("?1") " ORDER BY tier IS NULL, tier",
    /* A NULL reason sorts before any text, on PostgreSQL too. */
    [ST_REPORT_FAILURES] =
        Q__REPORT_FAILURES_SELECT("?1") " ORDER BY f.n DESC, f.outcome,"
                                        " f.reason NULLS FIRST LIMIT ?2",
    [ST_REPORT_FAILED] =
        "SELECT id, name, key, state, priority, run_at, deadline_at,"
        " created_at, updated_at, lease_owner, lease_until, claims, NULL,"
        " error FROM jobs WHERE state = 3 AND updated_at >= ?1"
        " ORDER BY updated_at DESC, id DESC LIMIT ?2",
    /* A key range (prefix up to prefix with its last byte raised) that the
     * unique index jobs_key serves. */
    [ST_REPORT_KEYED] =
        "SELECT id, name, key, state, priority, run_at, deadline_at,"
        " created_at, updated_at, lease_owner, lease_until, claims, NULL,"
        " error FROM jobs WHERE key >= ?1 AND key < ?2 AND created_at >= ?3"
        " ORDER BY created_at, id LIMIT ?4",
    [ST_REPORT_SLOWEST] =
        "SELECT id, name, key, state, priority, run_at, deadline_at,"
        " created_at, updated_at, lease_owner, lease_until, claims, NULL,"
        " error, NULL FROM jobs WHERE state IN (2, 3, 5) AND updated_at >= ?1"
        " ORDER BY updated_at - created_at DESC, id LIMIT ?2",
    [ST_REPORT_COSTLIEST] =
        Q__REPORT_COSTLIEST_SELECT("?1") " ORDER BY c.co DESC, j.id LIMIT ?2",
    /* Served by the unique index jobs_key (key = ?1 implies NOT NULL). */
    [ST_JOB_GET_BY_KEY] =
        "SELECT id, name, key, state, priority, run_at, deadline_at,"
        " created_at, updated_at, lease_owner, lease_until, claims, spec,"
        " error, input FROM jobs WHERE key = ?1",
};

const char *
q__store_sql(enum q__stmt_id id)
{
    return sql_text[id];
}

/* sql.c: the SQL of every statement of the PostgreSQL backend whose text
 * is fixed at build time, in one table indexed by enum q__pg_stmt_id
 * (internal.h), as the SQLite backend keeps its own (queue/sqlite/sql.c).
 * The files of queue/pg/ name a statement by its id (q__pg_run,
 * q__pg_select, q__pg_write...); pipe.c sends it, prepared on the
 * connection at its first use under the enum constant's name (the
 * prepared cache knows a statement by its address in this table), or,
 * for the plain ones at the top, as text. Every value is a parameter
 * ($1..$n), filters and lists too (`$2::text IS NULL OR ...`,
 * `= ANY ($1::text[])`, arrays unnested), so no statement is built for
 * them.
 *
 * What is not here is built at run time, where it is built:
 *  - schema.c: the migrations, DDL scripts of several statements (the
 *    simple protocol, which cannot prepare them), one per schema version
 *    and kept beside its "how to change this safely" note;
 *  - copy.c: `stepq copy`'s statements, made per table from the table's
 *    description (q__copy_sql: its columns and key), and the ALTER TABLE
 *    ... RESTART that moves a table's ids past the copied ones;
 *  - store.c: the session's SET lock_timeout, whose value is the store's
 *    option (SET takes no parameter);
 *  - pipe.c (q__pg_exec): the script that opens a migration's levels,
 *    joined from this table's ST_RELEASE, ST_BEGIN, ST_STORE_LOCK and
 *    ST_SAVEPOINT. */
#include "queue/pg/internal.h"

#include <assert.h>

/* The columns q__pg_read_job reads (jobs.c), then spec, error, input. */
#define JOB_COLS                                                               \
    "id, name, key, state, priority, run_at, deadline_at, created_at,"         \
    " updated_at, lease_owner, lease_until, claims"
#define PARK_COLS                                                              \
    "id, job_id, step, step_name, reason, attempts, request_sha256,"           \
    " request, error, tier, parked_at, (state = 'open')::int, resolution,"     \
    " resolved_by, resolved_at, note, answer"
#define SCHED_COLS                                                             \
    "name, paused, since, done_until, last_slot, last_job_id, updated_at"
/* The stored row, or none: the defaults of a tier never used. */
#define TIER_LOAD_TEXT                                                         \
    "SELECT breaker, failures, open_until, exhausted_until,"                   \
    " exhausted_reason, limited_until, allowance_used, allowance_since,"       \
    " config_hash, req_tat, tok_tat, pace, pace_down_at, pace_up_at,"          \
    " learned_rpm, learned_tpm, doubt, usage, flight FROM tiers"               \
    " WHERE name = $1::text"
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
/* A $n of type bigint, for the shared texts of prune (queue/sql.h). */
#define B(n) "$" #n "::bigint"

/* An entry: the statement's prepared name is its enum constant's. */
#define S(id, text) [id] = {#id, text}

static const struct q__pg_sql sql[ST_COUNT] = {
    S(ST_BEGIN, "BEGIN"),
    S(ST_COMMIT, "COMMIT"),
    S(ST_ROLLBACK, "ROLLBACK"),
    S(ST_SAVEPOINT, "SAVEPOINT q"),
    S(ST_RELEASE, "RELEASE q"),
    S(ST_ROLLBACK_TO, "ROLLBACK TO q"),
    S(ST_BEGIN_READ, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"),
    /* What lets the store's write lock (ST_STORE_LOCK) go: at a commit,
     * just before the COMMIT in the same round trip; after a rollback, just
     * after it. Every session-level advisory lock the session holds goes,
     * the store's lock taken twice too (a send that failed after a BEGIN
     * sends it again), and the key is not computed anew (a search_path that
     * changed since the lock would name another key). The session holds no
     * other: the schema's lock is a transaction's (ST_SCHEMA_LOCK). */
    S(ST_STORE_UNLOCK, "SELECT pg_advisory_unlock_all()"),
    S(ST_LISTEN, "LISTEN stepq_jobs; LISTEN stepq_tiers;"
                 " SELECT coalesce(current_schema(), '')"),
    /* The store's write lock, taken with every transaction's BEGIN (pipe.c
     * says why); prepared: it is planned once a session, not once a
     * transaction. */
    S(ST_STORE_LOCK, "SELECT pg_advisory_lock(hashtext('stepq:store:' ||"
                     " coalesce(current_schema(), '')))"),
    S(ST_JOB_INSERT,
      "WITH input AS (SELECT * FROM unnest($1::text[], $2::text[],"
      " $3::bigint[], $4::bigint[], $5::bigint[], $6::text[], $7::text[])"
      " WITH ORDINALITY AS t (name, key, priority, run_at, deadline_at, spec,"
      " input, ord)),"
      " ins AS (INSERT INTO jobs (name, key, priority, run_at, deadline_at,"
      " created_at, updated_at, spec, input) SELECT name, key, priority,"
      " run_at, deadline_at, $8, $8, spec, input FROM input ORDER BY ord"
      " ON CONFLICT (key) WHERE key IS NOT NULL DO NOTHING RETURNING id, key)"
      " SELECT id, key, true FROM ins UNION ALL SELECT id, key, false FROM jobs"
      " WHERE key IN (SELECT key FROM input WHERE key IS NOT NULL)"),
    /* Keys another transaction committed after the statement's snapshot. */
    S(ST_JOB_BY_KEY,
      "SELECT id, key, false FROM jobs WHERE key = ANY ($1::text[])"),
    S(ST_JOB_GET,
      "SELECT " JOB_COLS ", spec, error, input FROM jobs WHERE id = $1"),
    S(ST_JOBS_LIST,
      "SELECT " JOB_COLS ", NULL, error, NULL FROM jobs WHERE id > $2"
      " ORDER BY id LIMIT $1"),
    S(ST_JOBS_LIST_STATE, "SELECT " JOB_COLS ", NULL, error, NULL FROM jobs"
                          " WHERE id > $2 AND state = $3 ORDER BY id LIMIT $1"),
    S(ST_COUNTS, "SELECT state, count(*) FROM jobs GROUP BY state"
                 " UNION ALL SELECT -1, count(*) FROM park"
                 " WHERE state = 'open'"),
    S(ST_RECLAIM, "UPDATE jobs SET state = 0, lease_owner = NULL,"
                  " lease_until = NULL, updated_at = $1"
                  " WHERE state = 1 AND lease_until < $1"),
    /* Due queued jobs and jobs whose lease expired (SQLite reclaims those
     * first; the order is the same), each side walking its partial index and
     * skipping rows another claim holds, then the best max of both. A queued
     * job's step rows come along as one JSON array (the columns of
     * ST_STEPS_GET, in its order), so that it starts without a
     * round trip of its own: whatever made it queued wrote its row in the
     * same transaction, so a snapshot that sees it queued sees that
     * transaction's progress too. A job whose lease expired comes without
     * them (NULL, and a 1 in the last column): its holder may still be
     * alive, and the statement's snapshot may predate a commit of its
     * progress that ended just before this claim locked the row (the
     * store's write lock is let go before the COMMIT: pipe.c); the worker
     * reads them in a statement of its own, after the lock. */
    S(ST_CLAIM,
      "WITH q AS (SELECT id, priority, run_at FROM jobs WHERE state = 0"
      " AND run_at <= $1 ORDER BY priority DESC, run_at, id LIMIT $2"
      " FOR UPDATE SKIP LOCKED),"
      " e AS (SELECT id, priority, run_at FROM jobs WHERE state = 1"
      " AND lease_until < $1 ORDER BY priority DESC, run_at, id LIMIT $2"
      " FOR UPDATE SKIP LOCKED),"
      " pick AS (SELECT id, re FROM (SELECT *, 0 AS re FROM q UNION ALL"
      " SELECT *, 1 FROM e) u ORDER BY priority DESC, run_at, id LIMIT $2)"
      " UPDATE jobs j SET state = 1, lease_owner = $3, lease_until = $4,"
      " claims = claims + 1, updated_at = $1 FROM pick WHERE j.id = pick.id"
      " RETURNING j.id, j.name, j.key, j.state, j.priority, j.run_at,"
      " j.deadline_at, j.created_at, j.updated_at, j.lease_owner,"
      " j.lease_until, j.claims, j.spec, j.error, j.input,"
      " CASE WHEN pick.re = 0 THEN (SELECT json_agg(json_build_array(s.idx,"
      "   s.state, s.tier, s.attempts, s.tokens, s.output, s.reset_after,"
      "   s.pin_tier) ORDER BY s.idx) FROM steps s WHERE s.job_id = j.id)"
      " END, pick.re"),
    S(ST_EXTEND, "UPDATE jobs SET lease_until = $3, updated_at = $4"
                 " WHERE id = $1 AND state = 1 AND lease_owner = $2"),
    S(ST_SET_STATE_HELD,
      "UPDATE jobs SET state = $3, run_at = coalesce($4, run_at),"
      " lease_owner = NULL, lease_until = NULL, updated_at = $5"
      " WHERE id = $1 AND state = 1 AND lease_owner = $2"),
    S(ST_FAIL_HELD, "UPDATE jobs SET state = 3, error = $3, lease_owner = NULL,"
                    " lease_until = NULL, updated_at = $4"
                    " WHERE id = $1 AND state = 1 AND lease_owner = $2"),
    /* The count tells "no such job" from "already ended" in the same trip. */
    S(ST_CANCEL,
      "WITH c AS (UPDATE jobs SET state = 5, lease_owner = NULL,"
      " lease_until = NULL, updated_at = $2 WHERE id = $1"
      " AND state IN (0, 1, 4) RETURNING id),"
      /* No step left running, no attempt in flight (queue/sqlite). */
      " s AS (UPDATE steps SET state = 0 WHERE job_id IN (SELECT id FROM c)"
      " AND state = 1),"
      " a AS (UPDATE attempts SET finished_at = $2, outcome = 'unknown',"
      " reason = 'cancelled' WHERE job_id IN (SELECT id FROM c)"
      " AND finished_at IS NULL)"
      " SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM jobs"
      " WHERE id = $1)"),
    S(ST_STEPS_GET,
      "SELECT idx, state, tier, attempts, tokens, output, reset_after, pin_tier"
      " FROM steps WHERE job_id = $1::bigint ORDER BY idx"),
    /* Every write of a job's progress (this, ST_ATTEMPT_BEGIN and
     * ST_ATTEMPT_FINISH) locks the job's row first, and holds it to the
     * commit: the store's write lock is let go before the COMMIT (pipe.c),
     * and a claim of an expired lease must not take the job while a commit
     * of its progress is still on its way (it skips the locked row, or locks
     * it once the commit is done and then reads the progress afresh:
     * ST_CLAIM). Here the row is written only while $7 holds the
     * job (as ST_ATTEMPT_BEGIN checks it), unless $7 is NULL (a parked
     * job's resolution, which writes the job's row too); the lock is taken by
     * the condition (a CTE runs only when it is used), and a job that is gone
     * still fails the insert on its foreign key, as on SQLite. */
    S(ST_STEP_SET,
      "WITH held AS (SELECT state = 1 AND lease_owner = $7::text AS mine"
      " FROM jobs WHERE id = $1::bigint FOR UPDATE)"
      " INSERT INTO steps (job_id, idx, state, tier, output, tokens)"
      " SELECT $1::bigint, $2::bigint, $3::bigint, $4::text, $5::text,"
      " $6::bigint WHERE (SELECT count(*) FROM held) >= 0 AND ($7::text IS NULL"
      " OR (SELECT bool_or(mine) FROM held))"
      " ON CONFLICT (job_id, idx) DO UPDATE"
      " SET state = excluded.state, tier = coalesce(excluded.tier, steps.tier),"
      " output = coalesce(excluded.output, steps.output),"
      " tokens = greatest(0, steps.tokens + excluded.tokens)"),
    /* The lease check, the numbering, the ledger row and the step's charge in
     * one statement. The job row is locked while it runs, so a cancel or a
     * reclaim either comes first (and no row is made: -EBUSY) or waits. $8:
     * the id, taken ahead from the table's sequence when the record is
     * deferred; NULL: the sequence's next. */
    S(ST_ATTEMPT_BEGIN,
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
      " SELECT id, attempt FROM ins"),
    S(ST_ATTEMPT_FINISH,
      "WITH " FINISH_HELD " fin AS (" FINISH_SET
      " RETURNING job_id, step, est_tokens, tokens)," FINISH_CORRECT
          FINISH_COUNT),
    /* The same without the step's correction (caller_corrects). */
    S(ST_ATTEMPT_FINISH_ONLY,
      "WITH " FINISH_HELD " fin AS (" FINISH_SET " RETURNING 1)" FINISH_COUNT),
    /* each with the batch it is an item of (batch_items' key is the
     * attempt) */
    S(ST_ATTEMPTS_LIST,
      "SELECT a.id, a.step, a.attempt, a.tier, a.request_sha256,"
      " a.started_at, a.finished_at, a.status, a.outcome, a.reason,"
      " a.decision, a.delay_ms, a.latency_ms, a.tokens, a.body, a.masked,"
      " a.route, a.cost_nusd, a.cost_estimated, a.kind, a.call_id, a.tool,"
      " a.args, bi.batch_id, b.provider_id FROM attempts a"
      " LEFT JOIN batch_items bi ON bi.attempt_id = a.id"
      " LEFT JOIN batches b ON b.id = bi.batch_id"
      " WHERE a.job_id = $1::bigint"
      " AND ($2::bigint < 0 OR a.step = $2::bigint) ORDER BY a.step, "
      "a.attempt"),
    S(ST_JOB_COST, "SELECT coalesce(sum(cost_nusd), 0) FROM attempts"
                   " WHERE job_id = $1::bigint"),
    S(ST_TIER_GET, TIER_LOAD_TEXT),
    /* A load inside a transaction is the read of a read-modify-write (the
     * worker's admission: load, decide, count the send, store), so it locks
     * the row. The store's write lock (pipe.c) is let go just before a
     * commit, so another host's transaction may run while ours still
     * commits: its FOR UPDATE waits for our commit, then reads what we
     * wrote (READ COMMITTED reads the newest version of a row it waited
     * for). A tier with no row yet gets one first (ST_TIER_ROW), so that
     * there is a row to lock: two hosts using a new tier at once would
     * otherwise both start from the defaults. */
    S(ST_TIER_LOCK, TIER_LOAD_TEXT " FOR UPDATE"),
    S(ST_TIER_ROW,
      "INSERT INTO tiers (name) VALUES ($1::text) ON CONFLICT DO NOTHING"),
    S(ST_TIER_PUT, Q__TIER_PUT_INTO
      " VALUES ($1::text, $2::text, $3::bigint, $4::bigint, $5::bigint,"
      " $6::text, $7::bigint, $8::bigint, $9::bigint, $10::text,"
      " $11::double precision, $12::double precision, $13::double precision,"
      " $14::bigint, $15::bigint, $16::bigint, $17::bigint, $18::bigint,"
      " $19::text, $20::text)" Q__TIER_PUT_SET),
    /* $1 tier, $2 at, $3 event: deferred as the state it goes with. */
    S(ST_TIER_EVENT_ADD, "INSERT INTO tier_events (tier, at, event)"
                         " VALUES ($1::text, $2::bigint, $3::text)"),
    /* The item and the step's parked state in one statement. */
    S(ST_PARK_ADD,
      "WITH ins AS (INSERT INTO park (job_id, step, step_name, reason,"
      "   attempts, request_sha256, request, error, tier, parked_at)"
      "   VALUES ($1::bigint, $2::bigint, $3::text, $4::text, $5::bigint,"
      "   $6::text, $7::text, $8::text, $9::text, $10::bigint) RETURNING id),"
      " step AS (INSERT INTO steps (job_id, idx, state, tier)"
      "   SELECT $1::bigint, $2::bigint, 4, $9::text FROM ins"
      "   ON CONFLICT (job_id, idx) DO UPDATE SET state = excluded.state,"
      "   tier = coalesce(excluded.tier, steps.tier))"
      " SELECT id FROM ins"),
    /* A running job is due when its lease would expire: if its holder died,
     * that is when another worker takes it over. */
    S(ST_NEXT_DUE,
      "SELECT least((SELECT min(run_at) FROM jobs WHERE state = 0),"
      " (SELECT min(lease_until) FROM jobs WHERE state = 1))"),
    S(ST_PARK_GET, "SELECT " PARK_COLS " FROM park WHERE id = $1::bigint"),
    S(ST_PARK_LIST, "SELECT " PARK_COLS " FROM park"
                    " WHERE ($1::boolean OR $5::bigint > 0 OR state = 'open')"
                    " AND ($2::text IS NULL OR reason = $2::text)"
                    " AND ($3::text IS NULL OR tier = $3::text)"
                    " AND ($4::bigint = 0 OR job_id = $4::bigint)"
                    " AND ($5::bigint = 0 OR (state = 'resolved'"
                    " AND resolved_at >= $5::bigint))"
                    " ORDER BY state = 'open' DESC, id"),
    /* The UPDATE that decides a race: only one resolve finds it open (a
     * second waits for the row and then finds it resolved). The EXISTS tells
     * an unknown item from a resolved one. */
    S(ST_PARK_CLOSE,
      "WITH upd AS (UPDATE park SET state = 'resolved', resolution = $2::text,"
      "   resolved_by = $3::text, resolved_at = $4::bigint, note = $5::text,"
      "   answer = $6::text"
      "   WHERE id = $1::bigint AND state = 'open' RETURNING id)"
      " SELECT (SELECT count(*) FROM upd),"
      " EXISTS (SELECT 1 FROM park WHERE id = $1::bigint)::int"),
    S(ST_STEP_RESET,
      "INSERT INTO steps (job_id, idx, state, output, reset_after, pin_tier)"
      " VALUES ($1::bigint, $2::bigint, $3::bigint, $4::text, $5::bigint,"
      " $6::text) ON CONFLICT (job_id, idx) DO UPDATE SET"
      " state = excluded.state, output = coalesce(excluded.output, "
      "steps.output),"
      " reset_after = greatest(steps.reset_after, excluded.reset_after),"
      " pin_tier = excluded.pin_tier"),
    /* A parked job goes on: queued, due at $4 with its deadline at $6, or
     * failed with error $3; only a job still parked moves (else -EALREADY). */
    S(ST_JOB_LEAVE_PARKED,
      "UPDATE jobs SET state = $2::bigint,"
      " error = CASE WHEN $2::bigint = 3 THEN $3::text ELSE error END,"
      " deadline_at = coalesce($6::bigint, deadline_at),"
      " run_at = coalesce($4::bigint, run_at), updated_at = $5::bigint"
      " WHERE id = $1::bigint AND state = 4 RETURNING id"),
    S(ST_JOB_WAKE,
      "UPDATE jobs SET run_at = $2::bigint"
      " WHERE id = $1::bigint AND state = 0 AND run_at > $2::bigint"
      " RETURNING id"),
    S(ST_SCHED_GET,
      "SELECT " SCHED_COLS " FROM schedules WHERE name = $1::text"),
    /* Bytewise, as SQLite's BINARY orders them. */
    S(ST_SCHED_LIST,
      "SELECT " SCHED_COLS " FROM schedules ORDER BY name COLLATE \"C\""),
    /* $1 name, $2 done, $3 slot, $4 job id, $5 now. ON CONFLICT DO UPDATE
     * locks the row and computes the new values from its latest committed
     * version, so workers noting the same schedule at once each move it
     * forward from what the other left (greatest, CASE on the stored row). */
    S(ST_SCHED_NOTE,
      "INSERT INTO schedules AS s (name, since, done_until, last_slot,"
      " last_job_id, updated_at) VALUES ($1::text, $5::bigint,"
      " greatest($5::bigint, $2::bigint),"
      " CASE WHEN $4::bigint > 0 AND $3::bigint > 0 THEN $3::bigint ELSE 0 END,"
      " CASE WHEN $4::bigint > 0 AND $3::bigint > 0 THEN $4::bigint ELSE 0 END,"
      " $5::bigint) ON CONFLICT (name) DO UPDATE SET"
      " done_until = greatest(s.done_until, $2::bigint),"
      " last_job_id = CASE WHEN $4::bigint > 0 AND $3::bigint > s.last_slot"
      " THEN $4::bigint ELSE s.last_job_id END,"
      " last_slot = CASE WHEN $4::bigint > 0 AND $3::bigint > s.last_slot"
      " THEN $3::bigint ELSE s.last_slot END,"
      " updated_at = greatest(s.updated_at, $5::bigint)"),
    /* $1 name, $2 slot, $3 now. The conflicting row is locked and its
     * latest committed done_until read by the WHERE, so of workers claiming
     * one slot at once exactly one gets its row back; a row that was not
     * written returns none. */
    S(ST_SCHED_CLAIM,
      "INSERT INTO schedules AS s (name, since, done_until, updated_at)"
      " VALUES ($1::text, $3::bigint, $2::bigint, $3::bigint)"
      " ON CONFLICT (name) DO UPDATE SET done_until = EXCLUDED.done_until,"
      " updated_at = greatest(s.updated_at, EXCLUDED.updated_at)"
      " WHERE s.done_until < EXCLUDED.done_until RETURNING 1"),
    /* $1 name, $2 paused (0 or 1), $3 now. A resume moves done_until only
     * when the row was paused. */
    S(ST_SCHED_PAUSE,
      "INSERT INTO schedules AS s (name, paused, since, done_until,"
      " updated_at) VALUES ($1::text, $2::bigint, $3::bigint, $3::bigint,"
      " $3::bigint) ON CONFLICT (name) DO UPDATE SET"
      " done_until = CASE WHEN s.paused <> 0 AND $2::bigint = 0"
      " THEN greatest(s.done_until, $3::bigint) ELSE s.done_until END,"
      " paused = $2::bigint, updated_at = greatest(s.updated_at, $3::bigint)"),
    S(ST_REPORT_JOBS, "SELECT state, count(*) FROM jobs"
                      " WHERE created_at >= $1::bigint GROUP BY state"),
    S(ST_REPORT_TIERS,
      Q__REPORT_TIERS_SELECT(
          "$1::bigint") " ORDER BY tier COLLATE \"C\" NULLS LAST"),
    /* $2: the limit, NULL for all. */
    S(ST_REPORT_FAILURES,
      Q__REPORT_FAILURES_SELECT(
          "$1::bigint") " ORDER BY f.n DESC, f.outcome COLLATE \"C\","
                        " f.reason COLLATE \"C\" NULLS FIRST LIMIT $2::bigint"),
    S(ST_REPORT_FAILED, "SELECT " JOB_COLS ", NULL, error FROM jobs"
                        " WHERE state = 3 AND updated_at >= $1::bigint"
                        " ORDER BY updated_at DESC, id DESC LIMIT $2::bigint"),
    /* $1 the prefix (starts_with: no pattern characters to escape), $3 the
     * limit. */
    S(ST_REPORT_KEYED,
      "SELECT " JOB_COLS ", NULL, error FROM jobs"
      " WHERE starts_with(key, $1::text) AND created_at >= $2::bigint"
      " ORDER BY created_at, id LIMIT $3::bigint"),
    /* Ended: succeeded (2), failed (3) or cancelled (5). $2 as above. */
    S(ST_REPORT_SLOWEST,
      "SELECT " JOB_COLS ", NULL, error, NULL FROM jobs"
      " WHERE state IN (2, 3, 5) AND updated_at >= $1::bigint"
      " ORDER BY updated_at - created_at DESC, id LIMIT $2::bigint"),
    /* $2 as above. */
    S(ST_REPORT_COSTLIEST,
      Q__REPORT_COSTLIEST_SELECT("$1::bigint") " ORDER BY c.co DESC, j.id"
                                               " LIMIT $2::bigint"),
    /* Served by the unique index jobs_key (key = $1 implies NOT NULL). */
    S(ST_JOB_GET_BY_KEY,
      "SELECT " JOB_COLS ", spec, error, input FROM jobs WHERE key = $1::text"),
    /* $1 name, $2 window, $3 limit, $4 amount, $5 now. */
    S(ST_BUDGET_RESERVE,
      "INSERT INTO budgets AS b (name, win, reserved_nusd, updated_at)"
      " SELECT $1::text, $2::text, $4::bigint, $5::bigint"
      " WHERE $4::bigint <= $3::bigint"
      " ON CONFLICT (name, win) DO UPDATE"
      " SET reserved_nusd = b.reserved_nusd + EXCLUDED.reserved_nusd,"
      " updated_at = greatest(b.updated_at, EXCLUDED.updated_at)"
      " WHERE b.spent_nusd + b.reserved_nusd + EXCLUDED.reserved_nusd"
      " <= $3::bigint RETURNING 1"),
    /* $1 name, $2 window, $3 reserved, $4 spent, $5 now. */
    S(ST_BUDGET_SETTLE,
      "INSERT INTO budgets AS b (name, win, spent_nusd, updated_at)"
      " VALUES ($1::text, $2::text, $4::bigint, $5::bigint)"
      " ON CONFLICT (name, win) DO UPDATE"
      " SET reserved_nusd = greatest(0, b.reserved_nusd - $3::bigint),"
      " spent_nusd = b.spent_nusd + EXCLUDED.spent_nusd,"
      " updated_at = greatest(b.updated_at, EXCLUDED.updated_at)"),
    /* Bytewise, as SQLite's BINARY orders them. */
    S(ST_BUDGETS_LIST,
      "SELECT name, win, spent_nusd, reserved_nusd, updated_at FROM budgets"
      " WHERE updated_at >= $1::bigint"
      " ORDER BY name COLLATE \"C\", win COLLATE \"C\""),
    /* The job locked as it is (only in the state the caller saw: a retry
     * that waited for the row finds it moved, EvalPlanQual), then the row,
     * the job, the attempts left without result and the steps from $3 on. The
     * EXISTS tells an unknown job from one in another state. */
    S(ST_RETRY,
      "WITH old AS (SELECT id, state, error FROM jobs WHERE id = $1::bigint"
      "   AND state = $2::bigint FOR UPDATE),"
      " r AS (INSERT INTO job_retries (job_id, from_step, retried_by,"
      "   retried_at, prior_state, prior_error) SELECT id, $3::bigint,"
      "   $4::text, $5::bigint, state, error FROM old RETURNING id),"
      " j AS (UPDATE jobs SET state = 0, run_at = $7::bigint,"
      "   deadline_at = $6::bigint, error = NULL, lease_owner = NULL,"
      "   lease_until = NULL, updated_at = $5::bigint"
      "   WHERE id IN (SELECT id FROM old)),"
      " a AS (UPDATE attempts SET finished_at = $5::bigint,"
      "   outcome = 'unknown', reason = 'retried'"
      "   WHERE job_id IN (SELECT id FROM old) AND step >= $3::bigint"
      "   AND finished_at IS NULL),"
      " s AS (UPDATE steps SET state = 0, output = NULL, pin_tier = NULL,"
      "   reset_after = greatest(steps.reset_after, (SELECT"
      "   coalesce(max(a.attempt), 0) FROM attempts a"
      "   WHERE a.job_id = steps.job_id AND a.step = steps.idx))"
      "   WHERE steps.job_id IN (SELECT id FROM old) AND steps.idx >= "
      "$3::bigint)"
      " SELECT coalesce((SELECT id FROM r), 0),"
      " EXISTS (SELECT 1 FROM jobs WHERE id = $1::bigint)::int"),
    S(ST_RETRIES_LIST,
      "SELECT id, job_id, from_step, retried_by, retried_at, prior_state,"
      " prior_error FROM job_retries WHERE job_id = $1::bigint ORDER BY id"),
    S(ST_BATCH_CREATE,
      "INSERT INTO batches (tier, api, key, worker, lease_until, created_at,"
      " updated_at) VALUES ($1::text, $2::text, $3::text, $4::text,"
      " $5::bigint, $6::bigint, $6::bigint)"
      " ON CONFLICT (key) DO NOTHING RETURNING id"),
    /* The item and the batch's count in one statement. */
    S(ST_BATCH_ITEM_ADD,
      "WITH i AS (INSERT INTO batch_items (attempt_id, batch_id, job_id, step)"
      " SELECT $2::bigint, id, $3::bigint, $4::bigint FROM batches"
      " WHERE id = $1::bigint ON CONFLICT (attempt_id) DO NOTHING"
      " RETURNING batch_id)"
      " UPDATE batches SET items = items + 1 WHERE id IN (SELECT batch_id"
      " FROM i) RETURNING id"),
    /* $1 id, $2 worker, $3 lease_until, $4 state, $5 provider_id, $6 now */
    S(ST_BATCH_SET,
      "UPDATE batches SET worker = $2::text, lease_until = $3::bigint,"
      " state = $4::bigint, provider_id = coalesce($5::text, provider_id),"
      " updated_at = greatest(updated_at, $6::bigint)"
      " WHERE id = $1::bigint AND state <= $4::bigint"
      " AND (worker = $2::text OR lease_until <= $6::bigint) RETURNING id"),
    S(ST_BATCHES_OPEN,
      "SELECT id, tier, api, key, provider_id, state, items, worker,"
      " lease_until, created_at, updated_at FROM batches"
      " WHERE tier = $1::text AND state < 3 ORDER BY id"),
    S(ST_BATCH_ITEMS,
      "SELECT i.attempt_id, i.job_id, i.step,"
      " CASE WHEN a.finished_at IS NULL THEN 0 ELSE 1 END"
      " FROM batch_items i LEFT JOIN attempts a ON a.id = i.attempt_id"
      " WHERE i.batch_id = $1::bigint ORDER BY i.attempt_id"),
    S(ST_BATCH_OF_ATTEMPT,
      "SELECT batch_id FROM batch_items WHERE attempt_id = $1::bigint"),
    S(ST_BATCH_ITEM_SETTLE,
      "UPDATE batch_items SET realtime_nusd = $2::bigint"
      " WHERE attempt_id = $1::bigint RETURNING attempt_id"),
    /* Bytewise, as SQLite's BINARY orders them. */
    S(ST_REPORT_BATCHES,
      "SELECT b.tier, count(*), sum(coalesce(a.cost_nusd, 0)),"
      " sum(i.realtime_nusd) FROM batch_items i"
      " JOIN batches b ON b.id = i.batch_id"
      " JOIN attempts a ON a.id = i.attempt_id"
      " WHERE i.realtime_nusd IS NOT NULL AND a.finished_at >= $1::bigint"
      " GROUP BY b.tier ORDER BY b.tier COLLATE \"C\""),
    S(ST_OPERATOR_ADD,
      "INSERT INTO operators (name, role, token_sha256, created_at,"
      " rotated_at) VALUES ($1::text, $2::text, $3::text, $4::bigint,"
      " $4::bigint) ON CONFLICT (name) DO NOTHING RETURNING 1"),
    S(ST_OPERATOR_ROTATE,
      "UPDATE operators SET token_sha256 = $2::text, rotated_at = $3::bigint"
      " WHERE name = $1::text RETURNING 1"),
    S(ST_OPERATOR_REMOVE,
      "DELETE FROM operators WHERE name = $1::text RETURNING 1"),
    /* Bytewise, as SQLite's BINARY orders them. */
    S(ST_OPERATORS_LIST,
      "SELECT name, role, token_sha256, created_at,"
      " rotated_at FROM operators ORDER BY name COLLATE \"C\""),
    S(ST_AUDIT_ADD,
      "INSERT INTO audit (at, who, action, job_id, park_id, source, detail)"
      " VALUES ($1::bigint, $2::text, $3::text, nullif($4::bigint, 0),"
      " nullif($5::bigint, 0), $6::text, $7::text)"),
    S(ST_AUDIT_LIST,
      "SELECT id, at, who, action, coalesce(job_id, 0), coalesce(park_id, 0),"
      " source, detail FROM audit WHERE at >= $1::bigint"
      " AND ($2::bigint = 0 OR job_id = $2::bigint)"
      " AND ($3::bigint = 0 OR park_id = $3::bigint) ORDER BY id"),
    /* '' is NULL in the totals' keys: first in "C" as NULLS FIRST was. */
    S(ST_STATS_ATTEMPTS,
      Q__TOTALS_GROUPS_SELECT " ORDER BY tier = '', tier COLLATE \"C\","
                              " sum(attempts) DESC, outcome COLLATE \"C\","
                              " decision COLLATE \"C\""),
    S(ST_STATS_PARK_OPEN,
      "SELECT p.id, p.job_id, j.name, p.step_name, p.reason, p.error, p.tier,"
      " p.attempts, p.parked_at FROM park p JOIN jobs j ON j.id = p.job_id"
      " WHERE p.state = 'open' ORDER BY p.id LIMIT $1::bigint"),
    S(ST_STATS_LATENCY,
      Q__TOTALS_LATENCY_SELECT " ORDER BY tier COLLATE \"C\""),
    S(ST_STATS_WORKERS,
      Q__WORKERS_SELECT " ORDER BY lease_owner COLLATE \"C\""),
    S(ST_STATS_OLDEST_DUE, "SELECT coalesce(min(run_at), 0) FROM jobs"
                           " WHERE state = 0 AND run_at <= $1::bigint"),
    S(ST_PRUNE_COUNT, Q__PRUNE_COUNT(B(1), B(2), B(3), B(4), B(5))),
    S(ST_PRUNE_JOBS, Q__PRUNE_DELETE_JOBS(B(1), B(2))),
    S(ST_PRUNE_BODIES, Q__PRUNE_DROP_BODIES(B(1), B(2), B(3), B(4))),
    S(ST_PRUNE_EVENTS, Q__PRUNE_DELETE_EVENTS(B(1))),
    S(ST_PRUNE_BUDGETS, Q__PRUNE_DELETE_BUDGETS(B(1))),
    /* Read from pg_class itself, not with to_regclass: a name lookup may
     * answer from a cached "no such table" until the session takes a new
     * lock, and a migration waiting for another to finish must see its
     * tables (scanning pg_class locks it, which reads the invalidations). */
    S(ST_HAS_SCHEMA,
      "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c"
      " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
      " WHERE c.relname = 'stepq_schema' AND n.nspname = current_schema())"),
    S(ST_SCHEMA_VERSION, "SELECT coalesce(max(version), 0) FROM stepq_schema"),
    /* 1 when the session's search_path names no schema that exists: there
     * is nowhere to create the tables. */
    S(ST_SCHEMA_NONE, "SELECT (current_schema() IS NULL)::int"),
    /* The lock that serializes migrations of one schema (held until the
     * transaction ends). */
    S(ST_SCHEMA_LOCK, "SELECT pg_advisory_xact_lock(hashtext('stepq:' ||"
                      " coalesce(current_schema(), '')))"),
    S(ST_SCHEMA_SET_VERSION, "UPDATE stepq_schema SET version = $1"),
    S(ST_CLOCK,
      "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"),
    /* The sequence is looked up once (OFFSET 0 keeps the subquery from being
     * folded into the row loop): pg_get_serial_sequence per row read the
     * catalog 64 times, 0.28 ms a call against 0.07 ms. */
    S(ST_IDS_TAKE,
      "SELECT nextval(q.s) FROM (SELECT pg_get_serial_sequence($1::text,"
      " 'id')::regclass AS s OFFSET 0) q, generate_series(1, $2::bigint)"),
};

const struct q__pg_sql *
q__pg_stmt(enum q__pg_stmt_id st)
{
    assert((unsigned)st < ST_COUNT && sql[st].text != NULL);
    return &sql[st];
}

int
q__pg_sql_missing(void)
{
    for (int i = 0; i < ST_COUNT; i++) {
        if (sql[i].text == NULL)
            return i;
    }
    return -1;
}

/* schema.c: the database schema and its migrations.
 *
 * HOW TO CHANGE THIS SAFELY.  The schema version is PRAGMA user_version.
 * migrations[i] takes a database from version i to version i + 1; they run
 * in order, all in one transaction, so an interrupted upgrade leaves the
 * old version intact.  Never edit a migration that has shipped: a database
 * made by an older stepq has already run it and will not run it again.
 * To change the schema, append a new migration (ALTER TABLE, CREATE INDEX,
 * a table rebuild with INSERT ... SELECT) and add a test in
 * test_queue_sqlite.c that opens a database at the previous version, with
 * data in it, and checks the data after the upgrade; change PostgreSQL's
 * (queue/pg/schema.c) in the same commit, to the same version.  A stepq
 * that finds a version newer than it knows refuses to open the file
 * (-ENOTSUP) rather than guess.
 */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <stdio.h>

#include "common/log.h"

static const char *const migrations[] = {
    /* 0 -> 1: jobs, their steps and the attempts ledger. */
    "CREATE TABLE jobs ("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL,"
    "  key TEXT,"
    "  state INTEGER NOT NULL DEFAULT 0,"
    "  priority INTEGER NOT NULL DEFAULT 0,"
    "  run_at INTEGER NOT NULL,"
    "  deadline_at INTEGER NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  updated_at INTEGER NOT NULL,"
    "  lease_owner TEXT,"
    "  lease_until INTEGER,"
    "  claims INTEGER NOT NULL DEFAULT 0,"
    "  spec TEXT NOT NULL,"
    "  error TEXT);"
    /* The claim query walks this index in its exact order: no sort. */
    "CREATE INDEX jobs_ready ON jobs (priority DESC, run_at, id)"
    "  WHERE state = 0;"
    "CREATE INDEX jobs_leased ON jobs (lease_until) WHERE state = 1;"
    /* Partial: jobs without a key cost no index entry. */
    "CREATE UNIQUE INDEX jobs_key ON jobs (key) WHERE key IS NOT NULL;"
    "CREATE TABLE steps ("
    "  job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,"
    "  idx INTEGER NOT NULL,"
    "  state INTEGER NOT NULL DEFAULT 0,"
    "  tier TEXT,"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  tokens INTEGER NOT NULL DEFAULT 0,"
    "  output TEXT,"
    /* An operator's park retry: attempts up to this number came before
     * it and no longer count; pin_tier limits the retry to one tier. */
    "  reset_after INTEGER NOT NULL DEFAULT 0,"
    "  pin_tier TEXT,"
    "  PRIMARY KEY (job_id, idx)) WITHOUT ROWID;"
    "CREATE TABLE attempts ("
    "  id INTEGER PRIMARY KEY,"
    "  job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,"
    "  step INTEGER NOT NULL,"
    "  attempt INTEGER NOT NULL,"
    "  tier TEXT,"
    "  worker TEXT,"
    "  request_sha256 TEXT,"
    "  est_tokens INTEGER NOT NULL DEFAULT 0,"
    "  started_at INTEGER NOT NULL,"
    "  finished_at INTEGER,"
    "  status INTEGER,"
    "  outcome TEXT,"
    "  reason TEXT,"
    "  decision TEXT,"
    "  delay_ms INTEGER,"
    "  latency_ms INTEGER,"
    "  tokens INTEGER,"
    "  body TEXT,"
    "  UNIQUE (job_id, step, attempt));",

    /* 1 -> 2: the park table and shared tier state. */
    "CREATE TABLE park ("
    "  id INTEGER PRIMARY KEY,"
    "  job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,"
    "  step INTEGER NOT NULL,"
    "  step_name TEXT NOT NULL,"
    "  reason TEXT NOT NULL,"
    "  attempts INTEGER NOT NULL,"
    "  request_sha256 TEXT,"
    "  request TEXT,"
    "  error TEXT,"
    "  tier TEXT,"
    "  parked_at INTEGER NOT NULL,"
    "  state TEXT NOT NULL DEFAULT 'open',"
    "  resolution TEXT,"
    "  resolved_by TEXT,"
    "  resolved_at INTEGER,"
    "  note TEXT);"
    "CREATE INDEX park_state ON park (state, id);"
    "CREATE INDEX park_job ON park (job_id);"
    "CREATE TABLE tiers ("
    "  name TEXT PRIMARY KEY,"
    "  breaker TEXT NOT NULL DEFAULT 'closed',"
    "  failures INTEGER NOT NULL DEFAULT 0,"
    "  open_until INTEGER NOT NULL DEFAULT 0,"
    "  exhausted_until INTEGER NOT NULL DEFAULT 0,"
    "  exhausted_reason TEXT,"
    "  limited_until INTEGER NOT NULL DEFAULT 0,"
    "  allowance_used INTEGER NOT NULL DEFAULT 0,"
    "  allowance_since INTEGER NOT NULL DEFAULT 0,"
    "  config_hash TEXT) WITHOUT ROWID;"
    /* One row per admitted send: the request and token windows count them,
     * and one that is not done and not expired is in flight. A crashed
     * worker's sends stop counting as in flight when they expire. */
    "CREATE TABLE tier_sends ("
    "  id INTEGER PRIMARY KEY,"
    "  tier TEXT NOT NULL,"
    "  at INTEGER NOT NULL,"
    "  tokens INTEGER NOT NULL DEFAULT 0,"
    "  probe INTEGER NOT NULL DEFAULT 0,"
    "  expires_at INTEGER NOT NULL,"
    "  done_at INTEGER);"
    "CREATE INDEX tier_sends_at ON tier_sends (tier, at);"
    "CREATE INDEX tier_sends_open ON tier_sends (tier, expires_at)"
    "  WHERE done_at IS NULL;",
    /* 2 -> 3: paced admission. Each tier is a pair of token buckets kept
     * as GCRA "theoretical arrival times" (ms, fractional), a pace factor
     * lowered by 429s and raised by successes, the limits the endpoint's
     * headers taught, and whether the tier is in doubt (one request at a
     * time until one succeeds). */
    "ALTER TABLE tiers ADD COLUMN req_tat REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE tiers ADD COLUMN tok_tat REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE tiers ADD COLUMN pace REAL NOT NULL DEFAULT 1;"
    "ALTER TABLE tiers ADD COLUMN pace_down_at INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tiers ADD COLUMN pace_up_at INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tiers ADD COLUMN learned_rpm INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tiers ADD COLUMN learned_tpm INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tiers ADD COLUMN doubt INTEGER NOT NULL DEFAULT 1;",
    /* 3 -> 4: what every worker shares of each schedule of the config
     * (the expression, zone and job stay there): since when it is known,
     * the slots done, the last one fired and its job, and whether an
     * operator paused it. No reference to jobs: the job is a note. */
    "CREATE TABLE schedules ("
    "  name TEXT PRIMARY KEY,"
    "  paused INTEGER NOT NULL DEFAULT 0,"
    "  since INTEGER NOT NULL DEFAULT 0,"
    "  done_until INTEGER NOT NULL DEFAULT 0,"
    "  last_slot INTEGER NOT NULL DEFAULT 0,"
    "  last_job_id INTEGER NOT NULL DEFAULT 0,"
    "  updated_at INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;",
    /* 4 -> 5: what happened to a tier, for the morning report (today:
     * each time its breaker opened). The report reads it by time. */
    "CREATE TABLE tier_events ("
    "  id INTEGER PRIMARY KEY,"
    "  tier TEXT NOT NULL,"
    "  at INTEGER NOT NULL,"
    "  event TEXT NOT NULL);"
    "CREATE INDEX tier_events_at ON tier_events (at);",
    /* 5 -> 6: the send log holds only sends in flight (an answered send
     * is deleted, not marked done), and what a tier used in the last
     * minute is counted per second in its row (usage, queue/usage.c), so
     * that a send is one row inserted and deleted, not a row inserted,
     * updated and pruned two minutes later. Answered sends go; so do the
     * index of the windows and the column that marked them done. */
    "DELETE FROM tier_sends WHERE done_at IS NOT NULL;"
    "DROP INDEX tier_sends_at;"
    "DROP INDEX tier_sends_open;"
    "ALTER TABLE tier_sends DROP COLUMN done_at;"
    "CREATE INDEX tier_sends_open ON tier_sends (tier, expires_at);"
    "ALTER TABLE tiers ADD COLUMN usage TEXT;",
    /* 6 -> 7: a tier's sends in flight are counted in its row too (flight,
     * queue/tier_text.c: by the second they expire), so that a send
     * writes no row of its own, and the send log goes. The sends it still
     * held were those of workers stopped for the upgrade: they would have
     * expired within their timeout. */
    "DROP TABLE tier_sends;"
    "ALTER TABLE tiers ADD COLUMN flight TEXT;",
    /* 7 -> 8: an attempt whose answer held a secret of its request (kept
     * as "***", and so its output) says so. */
    "ALTER TABLE attempts ADD COLUMN masked INTEGER NOT NULL DEFAULT 0;",
    /* 8 -> 9: why an attempt went to its tier and not to an earlier one
     * of the step's list (NULL: the first choice). */
    "ALTER TABLE attempts ADD COLUMN route TEXT;",
    /* 9 -> 10: what an attempt cost, in nano-dollars (an integer: sums are
     * exact), NULL when its tier declared no price; cost_estimated: from
     * an estimate, not from a usage the answer reported. */
    "ALTER TABLE attempts ADD COLUMN cost_nusd INTEGER;"
    "ALTER TABLE attempts ADD COLUMN cost_estimated INTEGER NOT NULL"
    " DEFAULT 0;",
    /* 10 -> 11: budgets in money, one row per budget and window (a day, a
     * schedule's run), shared by every worker: what settled sends cost,
     * and the worst cases of sends still out. */
    "CREATE TABLE budgets ("
    "  name TEXT NOT NULL,"
    "  win TEXT NOT NULL,"
    "  spent_nusd INTEGER NOT NULL DEFAULT 0,"
    "  reserved_nusd INTEGER NOT NULL DEFAULT 0,"
    "  updated_at INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (name, win)) WITHOUT ROWID;",
    /* 11 -> 12: each retry of a failed, cancelled or done job (`jobs
     * retry`): who asked, when, from which step, and the state and error
     * the job had then (the job's row holds only the latest). */
    "CREATE TABLE job_retries ("
    "  id INTEGER PRIMARY KEY,"
    "  job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,"
    "  from_step INTEGER NOT NULL,"
    "  retried_by TEXT NOT NULL,"
    "  retried_at INTEGER NOT NULL,"
    "  prior_state INTEGER NOT NULL,"
    "  prior_error TEXT);"
    "CREATE INDEX job_retries_job ON job_retries (job_id, id);",
    /* 12 -> 13: batches of a tier in batch mode, recorded before they
     * are sent (provider_id NULL until the provider's answer is kept),
     * and their items: each a ledger attempt (no reference to attempts:
     * PostgreSQL writes an attempt's row later in the transaction). */
    "CREATE TABLE batches ("
    "  id INTEGER PRIMARY KEY,"
    "  tier TEXT NOT NULL,"
    "  api TEXT NOT NULL,"
    "  key TEXT NOT NULL UNIQUE,"
    "  provider_id TEXT,"
    "  state INTEGER NOT NULL DEFAULT 0,"
    "  items INTEGER NOT NULL DEFAULT 0,"
    "  worker TEXT NOT NULL,"
    "  lease_until INTEGER NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  updated_at INTEGER NOT NULL);"
    "CREATE INDEX batches_open ON batches (tier, id) WHERE state < 3;"
    "CREATE TABLE batch_items ("
    "  attempt_id INTEGER PRIMARY KEY,"
    "  batch_id INTEGER NOT NULL REFERENCES batches (id) ON DELETE CASCADE,"
    "  job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,"
    "  step INTEGER NOT NULL,"
    "  realtime_nusd INTEGER);"
    "CREATE INDEX batch_items_batch ON batch_items (batch_id, attempt_id);",
    /* 13 -> 14: named operators of `stepq serve` (a role and the SHA-256
     * of a token; never the token), and the audit trail: every write
     * made through `stepq serve` or the CLI, who made it, from where. */
    "CREATE TABLE operators ("
    "  name TEXT PRIMARY KEY,"
    "  role TEXT NOT NULL,"
    "  token_sha256 TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  rotated_at INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE audit ("
    "  id INTEGER PRIMARY KEY,"
    "  at INTEGER NOT NULL,"
    "  who TEXT NOT NULL,"
    "  action TEXT NOT NULL,"
    "  job_id INTEGER,"
    "  park_id INTEGER,"
    "  source TEXT NOT NULL,"
    "  detail TEXT NOT NULL);"
    "CREATE INDEX audit_at ON audit (at);"
    "CREATE INDEX audit_job ON audit (job_id) WHERE job_id IS NOT NULL;",
    /* 14 -> 15: a job's input (docs/reference.md "Job file"), as compact
     * JSON text apart from the job's own; NULL: none. */
    "ALTER TABLE jobs ADD COLUMN input TEXT;",
    /* 15 -> 16: the agent loop of a chat step with tools: each model turn
     * and each tool call is an attempt of its kind ('turn', 'tool'; NULL
     * for a plain attempt), a tool call with its call id, tool name and
     * arguments; and what an operator gave a park item of a tool call
     * (approved arguments, an answer). */
    "ALTER TABLE attempts ADD COLUMN kind TEXT;"
    "ALTER TABLE attempts ADD COLUMN call_id TEXT;"
    "ALTER TABLE attempts ADD COLUMN tool TEXT;"
    "ALTER TABLE attempts ADD COLUMN args TEXT;"
    "ALTER TABLE park ADD COLUMN answer TEXT;",
    /* 16 -> 17: retention finds what it prunes without reading every
     * job: finished jobs by when they last changed, and the attempts
     * that still keep a body (queue/sql.h, Q__PRUNE_*). */
    "CREATE INDEX jobs_finished ON jobs (updated_at, id)"
    " WHERE state IN (2, 3, 5);"
    "CREATE INDEX attempts_body ON attempts (job_id)"
    " WHERE body IS NOT NULL;",
    /* 17 -> 18: the ledger's running totals (queue/sql.h,
     * Q__TOTALS_*), which /metrics reads in a few rows and which a prune
     * leaves as they were; its triggers and backfill are in more[]. */
    Q__TOTALS_TABLE " WITHOUT ROWID;",
};

/* The rest of a migration too long for one string literal (C promises
 * 4,095 bytes): each part is run after migrations[from], in order. */
static const struct {
    int from;
    const char *sql;
} more[] = {
    /* The totals of ended attempts kept by triggers on attempts (none on
     * DELETE: a prune leaves them as they were), then filled from the
     * ended attempts already there. An insert fires only for a row that
     * has ended (a copy's); an update takes the old row's share away and
     * adds the new row's, each only if that row has ended. */
    /* clang-format off */
    {17, "CREATE TRIGGER attempts_total_insert AFTER INSERT ON attempts"
         " WHEN " Q__TOTALS_INSERT_WHEN " BEGIN "
         Q__TOTALS_UPSERT("0", "NEW", "") "; END;"},
    {17, "CREATE TRIGGER attempts_total_update AFTER UPDATE OF "
         Q__TOTALS_WATCHED " ON attempts WHEN " Q__TOTALS_UPDATE_WHEN
         " BEGIN "
         Q__TOTALS_UPSERT("0", "OLD", "-") "; "
         Q__TOTALS_UPSERT("0", "NEW", "") "; END;"},
    /* clang-format on */
    {17, Q__TOTALS_BACKFILL},
};

/* Runs the migration from version v to v + 1, with its parts. */
static int
migrate_one(struct q__sqlite *db, int v)
{
    int rc = q__exec_simple(db, migrations[v]);

    for (size_t i = 0; rc == 0 && i < STEPQ_ARRAY_LEN(more); i++) {
        if (more[i].from == v)
            rc = q__exec_simple(db, more[i].sql);
    }
    return rc;
}

int
q_schema_version(void)
{
    return (int)STEPQ_ARRAY_LEN(migrations);
}

static int
read_version(struct q__sqlite *db, int *out)
{
    sqlite3_stmt *s = NULL;
    int rc;

    if (sqlite3_prepare_v2(db->h, "PRAGMA user_version", -1, &s, NULL) !=
        SQLITE_OK)
        return q__db_err(db, "reading the schema version");
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? 0 : q__db_err(db, "reading the schema version");
}

int
q__sqlite_db_version(q_db *base, int *out)
{
    struct q__sqlite *db = q__sqlite(base);

    return read_version(db, out);
}

int
q__schema_migrate(struct q__sqlite *db, int target)
{
    int have = 0, rc;
    char sql[64];

    if (target <= 0 || target > q_schema_version())
        target = q_schema_version();
    /* The common case, a database already current, needs no write lock:
     * many workers opening a busy database must not queue for it. */
    if ((rc = read_version(db, &have)) != 0)
        return rc;
    if (have == target)
        return 0;
    /* Read the version again inside the write transaction, so two
     * processes opening a new file at once do not both run the
     * migrations. */
    if ((rc = q__exec_simple(db, "BEGIN IMMEDIATE")) != 0)
        return rc;
    if ((rc = read_version(db, &have)) != 0)
        goto fail;
    if (have > q_schema_version()) {
        log_error("%s: schema version %d is newer than this stepq knows "
                  "(%d); upgrade stepq",
                  db->path, have, q_schema_version());
        rc = -ENOTSUP;
        goto fail;
    }
    for (int v = have; v < target; v++) {
        if ((rc = migrate_one(db, v)) != 0) {
            log_error("%s: migration %d -> %d failed", db->path, v, v + 1);
            goto fail;
        }
    }
    if (have < target) {
        /* PRAGMA takes no bound parameters; target is our own integer. */
        snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", target);
        if ((rc = q__exec_simple(db, sql)) != 0)
            goto fail;
    }
    return q__exec_simple(db, "COMMIT");
fail:
    q__exec_simple(db, "ROLLBACK");
    return rc;
}

/* test_queue_sqlite.c: white-box tests of the SQLite backend: the file
 * (mode 0600, WAL), schema migrations and versions, the claim query's
 * plan, and how a multi-row enqueue knows its ids. Behaviour every backend
 * shares is in test_queue_contract*.c. */
#include "tests/support/support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/xalloc.h"
#include "queue/audit.h"
#include "queue/batch.h"
#include "queue/park.h"
#include "queue/queue.h"
#include "queue/report.h"
#include "queue/sched.h"
#include "queue/sqlite/internal.h"
#include "queue/tiers.h"
#include "tests/support/qfix.h"

static char *dir;
static char *path;

static void
setup(void)
{
    dir = tmpdir_new();
    path = tmpdir_join(dir, "q.db");
}

static void
teardown(void)
{
    free(path);
    tmpdir_remove(dir);
}

static q_db *
open_db(void)
{
    q_db *db = NULL;
    ck_assert_int_eq(q_open(path, NULL, &db), 0);
    return db;
}

/* ---- files and schema ---------------------------------------------- */

START_TEST(test_new_file_is_private_and_wal)
{
    q_db *db = open_db();
    struct stat st;
    sqlite3_stmt *s;

    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(sqlite3_prepare_v2(q__sqlite(db)->h, "PRAGMA journal_mode",
                                        -1, &s, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A job added to a store of an older version, with that version's
 * columns (q_enqueue writes today's); its id. */
static int64_t
add_old(q_db *db, const char *key)
{
    char sql[512];
    int64_t id = 0;

    snprintf(sql, sizeof(sql),
             "INSERT INTO jobs (name, key, priority, run_at, deadline_at,"
             " created_at, updated_at, spec) VALUES ('old', %s%s%s, 0, %lld,"
             " %lld, %lld, %lld, '{}')",
             key ? "'" : "", key ? key : "NULL", key ? "'" : "", (long long)T0,
             (long long)T0 + 3600000, (long long)T0, (long long)T0);
    ck_assert_int_eq(q__exec_simple(q__sqlite(db), sql), 0);
    id = sqlite3_last_insert_rowid(q__sqlite(db)->h);
    ck_assert_int_gt(id, 0);
    return id;
}

/* A file made at version, with a job of that version in it (*id), opened
 * again, and so migrated to today's: the job is still queued. */
static q_db *
migrated_from(int version, int64_t *id)
{
    q_db *db = NULL;

    ck_assert_int_eq(q__open_version(path, version, &db), 0);
    *id = add_old(db, NULL);
    ck_assert_int_eq(q_close(db), 0);
    db = open_db();
    ck_assert_int_eq(qfix_state(db, *id), Q_JOB_QUEUED);
    return db;
}

START_TEST(test_migrates_older_version_keeping_jobs)
{
    q_db *db = NULL;
    int64_t counts[Q_JOB_NSTATES], park = -1, id;
    int v = 0;

    ck_assert_int_eq(q__open_version(path, 1, &db), 0);
    ck_assert_int_eq(q_db_version(db, &v), 0);
    ck_assert_int_eq(v, 1);
    id = add_old(db, "k-old");
    ck_assert_int_eq(q_close(db), 0);
    /* version 2: tier state without pacing */
    ck_assert_int_eq(q__open_version(path, 2, &db), 0);
    ck_assert_int_eq(q__exec_simple(q__sqlite(db),
                                    "INSERT INTO tiers (name, breaker,"
                                    " failures, exhausted_until) VALUES"
                                    " ('free', 'open', 3, 5)"),
                     0);
    ck_assert_int_eq(q_close(db), 0);

    db = open_db();
    struct q_tier_state st;
    ck_assert_int_eq(q_tier_load(db, "free", &st), 0);
    ck_assert_int_eq(st.breaker, Q_BREAKER_OPEN); /* kept */
    ck_assert_int_eq(st.failures, 3);
    ck_assert_int_eq(st.exhausted_until, 5);
    ck_assert(st.pace == 1.0); /* v2's pacing columns, defaults */
    ck_assert(st.doubt);
    ck_assert(st.req_tat == 0);
    ck_assert_int_eq(q_db_version(db, &v), 0);
    ck_assert_int_eq(v, q_schema_version());
    ck_assert_int_eq(q_counts(db, counts, &park), 0); /* v2's park table */
    ck_assert_int_eq(park, 0);
    ck_assert_int_eq(counts[Q_JOB_QUEUED], 1);
    ck_assert_int_eq(qfix_state(db, id), Q_JOB_QUEUED);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Version 3 -> 4 adds the schedules table: the jobs of a version 3 file
 * stay, and schedules start with no row. */
START_TEST(test_migrates_v3_adding_schedules)
{
    struct q_sched *all = NULL, sc = {0};
    q_db *db = NULL;
    size_t n = 9;
    int64_t id;
    int v = 0;

    ck_assert_int_eq(q__open_version(path, 3, &db), 0);
    ck_assert_int_eq(q_db_version(db, &v), 0);
    ck_assert_int_eq(v, 3);
    id = add_old(db, "k-old");
    ck_assert_int_eq(q_close(db), 0);

    db = open_db();
    ck_assert_int_eq(q_db_version(db, &v), 0);
    ck_assert_int_eq(v, q_schema_version());
    ck_assert_int_eq(qfix_state(db, id), Q_JOB_QUEUED);
    ck_assert_int_eq(q_sched_list(db, &all, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(q_sched_note(db, "nightly", T0, T0, id, T0), 0);
    ck_assert_int_eq(q_sched_get(db, "nightly", &sc), 0);
    ck_assert_int_eq(sc.last_job_id, id);
    q_sched_cleanup(&sc);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Version 4 -> 5 adds the tier_events table: the jobs of a version 4
 * file stay, and an event recorded after the upgrade is reported. */
START_TEST(test_migrates_v4_adding_tier_events)
{
    struct q_report_tier *t = NULL;
    q_db *db = NULL;
    size_t n = 9;
    int64_t id;
    int v = 0;

    ck_assert_int_eq(q__open_version(path, 4, &db), 0);
    ck_assert_int_eq(q_db_version(db, &v), 0);
    ck_assert_int_eq(v, 4);
    id = add_old(db, "k-old");
    ck_assert_int_eq(q_close(db), 0);

    db = open_db();
    ck_assert_int_eq(q_db_version(db, &v), 0);
    ck_assert_int_eq(v, q_schema_version());
    ck_assert_int_eq(qfix_state(db, id), Q_JOB_QUEUED);
    ck_assert_int_eq(q_tier_event_add(db, "free", T0, "breaker_open"), 0);
    ck_assert_int_eq(q_report_tiers(db, T0, &t, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(t[0].tier, "free");
    ck_assert_int_eq(t[0].breaker_opened, 1);
    q_report_tiers_free(t, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Versions 5 -> 6 -> 7 take the send log away (a tier's usage and
 * sends in flight are counted in its row): the tier's row keeps its
 * state, with nothing counted. */
START_TEST(test_migrates_v5_dropping_the_send_log)
{
    struct q_tier_state st;
    sqlite3_stmt *s;
    q_db *db = NULL;
    int v = 0;

    ck_assert_int_eq(q__open_version(path, 5, &db), 0);
    ck_assert_int_eq(
        q__exec_simple(q__sqlite(db),
                       "INSERT INTO tiers (name, failures) VALUES ('free', 3);"
                       "INSERT INTO tier_sends (tier, at, tokens, expires_at,"
                       " done_at) VALUES ('free', 1800000000000, 10,"
                       " 1800000060000, 1800000000500),"
                       " ('free', 1800000000100, 20, 1800000060000, NULL)"),
        0);
    ck_assert_int_eq(q_close(db), 0);

    db = open_db();
    ck_assert_int_eq(q_db_version(db, &v), 0);
    ck_assert_int_eq(v, q_schema_version());
    ck_assert_int_eq(q_tier_load(db, "free", &st), 0);
    ck_assert_int_eq(st.failures, 3);
    ck_assert_int_eq(st.usage.last_s, 0);
    ck_assert_int_eq(st.flight.n, 0);
    ck_assert_int_eq(sqlite3_prepare_v2(q__sqlite(db)->h,
                                        "SELECT count(*) FROM sqlite_master"
                                        " WHERE name LIKE 'tier_sends%'",
                                        -1, &s, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(s, 0), 0); /* table and indexes */
    sqlite3_finalize(s);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Version 7 -> 8 adds attempts.masked: an attempt of a version 7 file
 * keeps its row, not masked. */
START_TEST(test_migrates_v7_adding_masked)
{
    struct q_attempt *a = NULL;
    size_t n = 0;
    q_db *db = NULL;
    int64_t id;

    ck_assert_int_eq(q__open_version(path, 7, &db), 0);
    id = add_old(db, NULL);
    ck_assert_int_eq(id, 1);
    ck_assert_int_eq(
        q__exec_simple(q__sqlite(db),
                       "INSERT INTO attempts (job_id, step, attempt, tier,"
                       " worker, request_sha256, est_tokens, started_at,"
                       " finished_at, status, outcome, body) VALUES (1, 0, 1,"
                       " 'free', 'w', 'ab', 5, 1, 2, 401, 'auth_error',"
                       " 'Incorrect API key provided: ***')"),
        0);
    ck_assert_int_eq(q_close(db), 0);

    db = open_db();
    ck_assert_int_eq(q_attempts_list(db, id, -1, &a, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(a[0].body, "Incorrect API key provided: ***");
    ck_assert_int_eq(a[0].status, 401);
    ck_assert(!a[0].masked);
    q_attempts_free(a, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Version 9 -> 10 adds attempts.cost_nusd and cost_estimated: an attempt
 * of a version 9 file keeps its row (its route too) and has no price
 * (cost NULL). */
START_TEST(test_migrates_v9_adding_cost)
{
    struct q_attempt *a = NULL;
    size_t n = 0;
    q_db *db = NULL;
    int64_t id;

    ck_assert_int_eq(q__open_version(path, 9, &db), 0);
    id = add_old(db, NULL);
    ck_assert_int_eq(
        q__exec_simple(q__sqlite(db),
                       "INSERT INTO attempts (job_id, step, attempt, tier,"
                       " worker, request_sha256, est_tokens, started_at,"
                       " finished_at, status, outcome, tokens, masked, route)"
                       " VALUES (1, 0, 1, 'paid', 'w', 'ab', 5, 1, 2, 200,"
                       " 'ok', 42, 1, 'free: exhausted')"),
        0);
    ck_assert_int_eq(q_close(db), 0);

    db = open_db();
    ck_assert_int_eq(q_attempts_list(db, id, -1, &a, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(a[0].tokens, 42);
    ck_assert(a[0].masked);
    ck_assert_str_eq(a[0].route, "free: exhausted");
    ck_assert(!a[0].priced && !a[0].cost_estimated);
    ck_assert_int_eq(a[0].cost_nusd, 0);
    q_attempts_free(a, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Version 10 -> 11 adds the budgets table: the jobs of a version 10 file
 * stay, and a budget can then be reserved. */
START_TEST(test_migrates_v10_adding_budgets)
{
    struct q_budget *b = NULL;
    q_db *db = NULL;
    size_t n = 9;
    int64_t id;

    db = migrated_from(10, &id);
    ck_assert_int_eq(q_budgets_list(db, 0, &b, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(q_budget_reserve(db, "paid", "d", 10, 10, T0), 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Version 11 -> 12 adds job_retries: the jobs of a version 11 file stay,
 * and a job can then be retried, the retry listed. */
START_TEST(test_migrates_v11_adding_job_retries)
{
    struct q_retry *r = NULL;
    q_db *db = NULL;
    size_t n = 9;
    int64_t id, rid = 0;

    db = migrated_from(11, &id);
    ck_assert_int_eq(q_retries_list(db, id, &r, &n), 0);
    ck_assert_uint_eq(n, 0);
    struct q_retry_new rn = {.job_id = id, .expect = Q_JOB_QUEUED, .by = "a"};
    ck_assert_int_eq(q_job_retry(db, &rn, &rid), 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Version 15 gives jobs an input: a job from before has none, and one
 * enqueued after keeps its own. */
START_TEST(test_migrates_v14_adding_input)
{
    struct q_job_new j = qfix_job("new", NULL, 0);
    struct q_enqueue_result r;
    struct q_job got = {0};
    q_db *db = NULL;
    int64_t id;

    ck_assert_int_eq(q__open_version(path, 14, &db), 0);
    id = add_old(db, "k-old");
    ck_assert_int_eq(q_close(db), 0);

    db = open_db();
    ck_assert_int_eq(q_job_get(db, id, &got), 0);
    ck_assert_ptr_null(got.input);
    ck_assert_str_eq(got.key, "k-old");
    q_job_cleanup(&got);
    j.input = "{\"issue\":7}";
    ck_assert_int_eq(q_enqueue(db, &j, 1, NULL, T0, &r), 0);
    ck_assert_int_eq(q_job_get(db, r.id, &got), 0);
    ck_assert_str_eq(got.input, "{\"issue\":7}");
    q_job_cleanup(&got);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Version 12 -> 13 adds the batches and their items: the jobs of a
 * version 12 file stay, and a batch can then be recorded. */
START_TEST(test_migrates_v12_adding_batches)
{
    struct q_batch *b = NULL;
    q_db *db = NULL;
    size_t n = 9;
    int64_t id, bid = 0;

    db = migrated_from(12, &id);
    ck_assert_int_eq(q_batches_open(db, "t", &b, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(q_batch_create(db, "t", "openai", "k", "w", T0, T0, &bid),
                     0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Version 13 -> 14 adds the operators and audit tables: the jobs of a
 * version 13 file stay, and both can then be written. */
START_TEST(test_migrates_v13_adding_operators)
{
    struct q_audit_new a = {
        .at = T0, .who = "ann", .action = "x", .source = "cli", .detail = "{}"};
    q_db *db = NULL;
    int64_t id;

    db = migrated_from(13, &id);
    ck_assert_int_eq(q_operator_add(db, "ann", "admin", "ab", T0), 0);
    ck_assert_int_eq(q_audit_add(db, &a), 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Version 16 -> 17 adds retention's indexes: the jobs of a version 16
 * file stay, and the indexes are there after. */
START_TEST(test_migrates_v16_adding_retention_indexes)
{
    q_db *db = NULL;
    int64_t id;
    sqlite3_stmt *s;
    int n = -1;

    db = migrated_from(16, &id);
    ck_assert_int_eq(
        sqlite3_prepare_v2(q__sqlite(db)->h,
                           "SELECT count(*) FROM sqlite_master WHERE type ="
                           " 'index' AND name IN ('jobs_finished',"
                           " 'attempts_body')",
                           -1, &s, NULL),
        SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Version 15 -> 16 adds an attempt's kind, call id, tool and arguments
 * (the agent loop's) and a park item's answer: the jobs of a version 15
 * file stay, and a tool call's attempt then keeps what it was given. */
START_TEST(test_migrates_v15_adding_agent_columns)
{
    struct q_job *got = NULL;
    struct q_attempt *a = NULL;
    q_db *db = NULL;
    size_t n = 0;
    int64_t id, aid = 0;
    int num = 0;
    struct q_attempt_start tool = {.worker = "w",
                                   .started_at = T0,
                                   .kind = "tool",
                                   .call_id = "call_1",
                                   .tool = "add_label",
                                   .args = "{\"label\":\"bug\"}"};

    ck_assert_int_eq(q__open_version(path, 15, &db), 0);
    id = qfix_add(db, "old", NULL, 0, T0);
    ck_assert_int_eq(q_close(db), 0);

    db = open_db();
    ck_assert_int_eq(q_claim(db, "w", T0, 60000, 1, &got, &n), 0);
    q_jobs_free(got, n);
    tool.job_id = id;
    ck_assert_int_eq(q_attempt_begin(db, &tool, &aid, &num), 0);
    ck_assert_int_eq(q_attempts_list(db, id, 0, &a, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(a[0].kind, "tool");
    ck_assert_str_eq(a[0].call_id, "call_1");
    ck_assert_str_eq(a[0].tool, "add_label");
    ck_assert_str_eq(a[0].args, "{\"label\":\"bug\"}");
    q_attempts_free(a, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A usage or flight column the backend cannot read (written by hand, or
 * by a later stepq) reads as nothing counted, and the rest of the row as
 * stored. */
static void
store_raw(q_db *db, const char *column, const char *value)
{
    char *sql = xmalloc(strlen(value) + 128);

    sprintf(sql,
            "INSERT OR REPLACE INTO tiers (name, failures, %s)"
            " VALUES ('free', 4, '%s')",
            column, value);
    ck_assert_int_eq(q__exec_simple(q__sqlite(db), sql), 0);
    free(sql);
}

START_TEST(test_unreadable_usage_or_flight_reads_as_none)
{
    const char *usage[] = {"x",
                           "1800000000 60:1:1",
                           "1800000000 1:1",
                           "1800000000 0:1:4294967296",
                           "1800000000 0:1:1 ",
                           "5 9:1:1"};
    const char *flight[] = {"x",         "-1",      "0 0:1",  "0 5:0",
                            "0 5:1 0:2", "0 5:1:2", "0 5:1 ", "0 5"};
    struct q_tier_state st;
    q_db *db = open_db();
    char many[64 * (Q_TIER_FLIGHT_MAX + 2)] = "0";

    for (size_t i = 0; i < sizeof(usage) / sizeof(usage[0]); i++) {
        store_raw(db, "usage", usage[i]);
        ck_assert_int_eq(q_tier_load(db, "free", &st), 0);
        ck_assert_int_eq(st.failures, 4);
        ck_assert_msg(st.usage.last_s == 0 && st.usage.requests[0] == 0,
                      "usage \"%s\" was read", usage[i]);
    }
    for (size_t i = 0; i < sizeof(flight) / sizeof(flight[0]); i++) {
        store_raw(db, "flight", flight[i]);
        ck_assert_int_eq(q_tier_load(db, "free", &st), 0);
        ck_assert_int_eq(st.failures, 4);
        ck_assert_msg(st.flight.n == 0 && st.flight.probe_until == 0,
                      "flight \"%s\" was read", flight[i]);
    }
    for (int i = 0; i <= Q_TIER_FLIGHT_MAX; i++) /* one too many */
        strcat(many, " 1:1");
    store_raw(db, "flight", many);
    ck_assert_int_eq(q_tier_load(db, "free", &st), 0);
    ck_assert_int_eq(st.flight.n, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

static char *
schema_text(q_db *db)
{
    sqlite3_stmt *s;
    char *out = xstrdup("");

    ck_assert_int_eq(sqlite3_prepare_v2(q__sqlite(db)->h,
                                        "SELECT group_concat(sql, ';') FROM "
                                        "(SELECT sql FROM sqlite_master "
                                        "ORDER BY name)",
                                        -1, &s, NULL),
                     SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0)) {
        free(out);
        out = xstrdup((const char *)sqlite3_column_text(s, 0));
    }
    sqlite3_finalize(s);
    return out;
}

/* A database file removed, or replaced (as a restore from a backup
 * would), under a process that has it open: its counts (status, serve's
 * /healthz) fail, and from then on it writes nothing more to it, instead
 * of enqueues that nobody will ever see or a -wal that would corrupt the
 * restored copy (a write transaction checks the file itself every 64). */
START_TEST(test_file_moved_under_an_open_store)
{
    for (int i = 0; i < 2; i++) {
        q_db *db = open_db();
        struct q_job_new j = qfix_job("b", NULL, 0);
        struct q_enqueue_result r;
        int64_t counts[Q_JOB_NSTATES], open = 0;
        char cmd[4096], *out = NULL;

        ck_assert_int_gt(qfix_add(db, "a", NULL, 0, T0), 0);
        if (i == 0) /* removed */
            snprintf(cmd, sizeof(cmd), "rm -f '%s'", path);
        else /* replaced by a copy, as a restore would */
            snprintf(cmd, sizeof(cmd), "cp '%s' '%s.new' && mv '%s.new' '%s'",
                     path, path, path, path);
        ck_assert_int_eq(run_sh(cmd, &out), 0);
        free(out);
        ck_assert_int_eq(q_counts(db, counts, &open), -EIO);
        ck_assert_int_eq(q_enqueue(db, &j, 1, NULL, T0, &r), -EIO);
        for (int k = 0; k < 64; k++) /* and it stays so */
            ck_assert_int_eq(q_enqueue(db, &j, 1, NULL, T0, &r), -EIO);
        ck_assert_int_eq(q_close(db), 0);
        remove(path);
    }
}
END_TEST

START_TEST(test_open_twice_changes_nothing)
{
    q_db *db = open_db();
    char *first = schema_text(db);
    char *second;
    int v = 0;

    ck_assert_int_eq(q_close(db), 0);
    db = open_db();
    second = schema_text(db);
    ck_assert_str_eq(first, second);
    ck_assert_int_eq(q_db_version(db, &v), 0);
    ck_assert_int_eq(v, q_schema_version());
    free(first);
    free(second);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_newer_schema_refused)
{
    q_db *db = open_db();
    q_db *again = NULL;

    ck_assert_int_eq(q__exec_simple(q__sqlite(db), "PRAGMA user_version = 99"),
                     0);
    ck_assert_int_eq(q_close(db), 0);
    ck_assert_int_eq(q_open(path, NULL, &again), -ENOTSUP);
    ck_assert_ptr_null(again);
}
END_TEST

START_TEST(test_claim_uses_index_without_sort)
{
    q_db *db = open_db();
    sqlite3_stmt *s;
    char plan[1024] = "";

    char sql[512];

    snprintf(sql, sizeof(sql), "EXPLAIN QUERY PLAN %s",
             q__store_sql(ST_CLAIM_PICK));
    ck_assert_int_eq(sqlite3_prepare_v2(q__sqlite(db)->h, sql, -1, &s, NULL),
                     SQLITE_OK);
    while (sqlite3_step(s) == SQLITE_ROW) {
        strncat(plan, (const char *)sqlite3_column_text(s, 3),
                sizeof(plan) - strlen(plan) - 2);
        strcat(plan, ";");
    }
    sqlite3_finalize(s);
    ck_assert_msg(strstr(plan, "jobs_ready") != NULL, "plan: %s", plan);
    ck_assert_msg(strstr(plan, "TEMP B-TREE") == NULL, "plan: %s", plan);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* The plan of sql, its details joined by ";". */
static void
plan_of(q_db *db, const char *sql, char *plan, size_t len)
{
    sqlite3_stmt *s;
    char *q = xmalloc(strlen(sql) + 32);

    sprintf(q, "EXPLAIN QUERY PLAN %s", sql);
    ck_assert_int_eq(sqlite3_prepare_v2(q__sqlite(db)->h, q, -1, &s, NULL),
                     SQLITE_OK);
    plan[0] = '\0';
    while (sqlite3_step(s) == SQLITE_ROW) {
        strncat(plan, (const char *)sqlite3_column_text(s, 3),
                len - strlen(plan) - 2);
        strcat(plan, ";");
    }
    sqlite3_finalize(s);
    free(q);
}

/* Retention reads only what it prunes: finished jobs oldest first and
 * attempts that keep a body, each through its index and in its order (no
 * scan of jobs, no sort): a month's store took 953 ms to count a step of
 * 500 when every job was read. */
START_TEST(test_prune_uses_its_indexes_without_sort)
{
    static const char *const sql[][2] = {
        {"SELECT count(*) FROM (" Q__PRUNE_JOBS("?1", "?4") ")",
         "jobs_finished"},
        {"SELECT count(*) FROM (" Q__PRUNE_BODIES("?1", "?2", "?4", "?5") ")",
         "attempts_body"},
        {Q__PRUNE_DELETE_JOBS("?1", "?4"), "jobs_finished"},
        {Q__PRUNE_DROP_BODIES("?1", "?2", "?4", "?5"), "attempts_body"},
    };
    q_db *db = open_db();
    char plan[2048];

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(sql); i++) {
        plan_of(db, sql[i][0], plan, sizeof(plan));
        ck_assert_msg(strstr(plan, sql[i][1]) != NULL, "%zu: %s", i, plan);
        ck_assert_msg(strstr(plan, "SCAN jobs") == NULL, "%zu: %s", i, plan);
        ck_assert_msg(strstr(plan, "TEMP B-TREE") == NULL, "%zu: %s", i, plan);
    }
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_location_names_the_same_file)
{
    q_db *db = open_db();
    char *loc = xmalloc(strlen(path) + 8);
    int64_t id = qfix_add(db, "a", NULL, 0, T0);

    ck_assert_int_eq(q_close(db), 0);
    sprintf(loc, "sqlite:%s", path);
    ck_assert_int_eq(q_open_existing(loc, NULL, &db), 0);
    ck_assert_int_eq(qfix_state(db, id), Q_JOB_QUEUED);
    ck_assert_int_eq(q_close(db), 0);
    free(loc);
}
END_TEST

START_TEST(test_open_existing_creates_nothing)
{
    q_db *db = NULL;
    struct stat st;
    char *wal = xmalloc(strlen(path) + 8);

    ck_assert_int_eq(q_open_existing(path, NULL, &db), -ENOENT);
    ck_assert_ptr_null(db);
    sprintf(wal, "%s-wal", path);
    ck_assert_int_ne(stat(path, &st), 0);
    ck_assert_int_ne(stat(wal, &st), 0);
    free(wal);
}
END_TEST

static long long
wal_bytes(void)
{
    char wal[4096];
    struct stat st;

    snprintf(wal, sizeof(wal), "%s-wal", path);
    return stat(wal, &st) == 0 ? (long long)st.st_size : -1;
}

/* A reader holding a snapshot (serve's status, a report) keeps a
 * checkpoint from folding the -wal in, and the log grows past its 32 MiB
 * mark while the writer goes on. Once the reader is done, the next writes
 * fold the log in, start it over and cut the file back to 32 MiB: the
 * -wal does not keep the largest size it ever had. */
START_TEST(test_wal_cut_back_after_a_reader_held_it)
{
    q_db *db = open_db();
    sqlite3 *reader = NULL;
    sqlite3_stmt *s = NULL;
    static char text[65536];
    struct q_job_new j = qfix_job("big", NULL, 0);
    struct q_enqueue_result r;
    int64_t counts[Q_JOB_NSTATES], park;
    long long grown;
    int n = 0;

    memset(text, 'x', sizeof(text) - 1);
    memcpy(text, "{\"x\":\"", 6);
    memcpy(text + sizeof(text) - 3, "\"}", 2);
    j.text = text;
    ck_assert_int_eq(sqlite3_open(path, &reader), SQLITE_OK);
    ck_assert_int_eq(
        sqlite3_prepare_v2(reader, "SELECT count(*) FROM jobs", -1, &s, NULL),
        SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW); /* the snapshot held */
    for (; wal_bytes() < (40LL << 20); n++)
        ck_assert_int_eq(q_enqueue(db, &j, 1, NULL, T0, &r), 0);
    grown = wal_bytes();
    sqlite3_finalize(s); /* the reader is done */
    for (int i = 0; i < 4; i++, n++)
        ck_assert_int_eq(q_enqueue(db, &j, 1, NULL, T0, &r), 0);
    ck_assert_int_gt(grown, 40LL << 20);
    ck_assert_int_le(wal_bytes(), 32LL << 20);
    ck_assert_int_eq(q_counts(db, counts, &park), 0);
    ck_assert_int_eq(counts[Q_JOB_QUEUED], n);
    ck_assert_int_eq(sqlite3_close(reader), SQLITE_OK);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A batch's ids come from the order SQLite numbers new rows in (the
 * largest id plus one). With the largest id taken SQLite picks ids at
 * random: the enqueue must then fail and write nothing, not answer ids
 * that are not the jobs'. */
START_TEST(test_batch_ids_checked)
{
    q_db *db = open_db();
    struct q_job_new v[16];
    struct q_enqueue_result r[16];
    int64_t counts[Q_JOB_NSTATES], park;

    for (int i = 0; i < 16; i++)
        v[i] = qfix_job("j", NULL, 0);
    ck_assert_int_eq(q_enqueue(db, v, 16, NULL, T0, r), 0);
    ck_assert_int_eq(r[15].id - r[0].id, 15);
    ck_assert_int_eq(sqlite3_exec(q__sqlite(db)->h,
                                  "INSERT INTO jobs (id, name, run_at,"
                                  " deadline_at, created_at, updated_at, spec)"
                                  " VALUES (9223372036854775807, 'top', 0, 0,"
                                  " 0, 0, '{}')",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(q_enqueue(db, v, 16, NULL, T0, r), -EIO);
    ck_assert_int_eq(q_counts(db, counts, &park), 0);
    ck_assert_int_eq(counts[Q_JOB_QUEUED], 17);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("queue: sqlite");
    TCase *files = tcase_create("files");
    TCase *plans = tcase_create("plans");
    TCase *enq = tcase_create("enqueue");

    tcase_add_checked_fixture(files, setup, teardown);
    tcase_add_test(files, test_new_file_is_private_and_wal);
    tcase_add_test(files, test_migrates_older_version_keeping_jobs);
    tcase_add_test(files, test_migrates_v7_adding_masked);
    tcase_add_test(files, test_migrates_v10_adding_budgets);
    tcase_add_test(files, test_migrates_v11_adding_job_retries);
    tcase_add_test(files, test_migrates_v12_adding_batches);
    tcase_add_test(files, test_migrates_v13_adding_operators);
    tcase_add_test(files, test_migrates_v14_adding_input);
    tcase_add_test(files, test_migrates_v15_adding_agent_columns);
    tcase_add_test(files, test_migrates_v16_adding_retention_indexes);
    tcase_add_test(files, test_migrates_v9_adding_cost);
    tcase_add_test(files, test_migrates_v3_adding_schedules);
    tcase_add_test(files, test_migrates_v4_adding_tier_events);
    tcase_add_test(files, test_migrates_v5_dropping_the_send_log);
    tcase_add_test(files, test_unreadable_usage_or_flight_reads_as_none);
    tcase_add_test(files, test_open_twice_changes_nothing);
    tcase_add_test(files, test_file_moved_under_an_open_store);
    tcase_add_test(files, test_newer_schema_refused);
    tcase_add_test(files, test_location_names_the_same_file);
    tcase_add_test(files, test_open_existing_creates_nothing);
    tcase_add_test(files, test_wal_cut_back_after_a_reader_held_it);
    suite_add_tcase(s, files);

    tcase_add_checked_fixture(plans, setup, teardown);
    tcase_add_test(plans, test_claim_uses_index_without_sort);
    tcase_add_test(plans, test_prune_uses_its_indexes_without_sort);
    suite_add_tcase(s, plans);

    tcase_add_checked_fixture(enq, setup, teardown);
    tcase_add_test(enq, test_batch_ids_checked);
    suite_add_tcase(s, enq);
    return s;
}

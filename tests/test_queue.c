/* test_queue.c: the SQLite queue store, on real database files, with real
 * processes for concurrency and crashes. */
#include "tests/support/support.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "queue/internal.h"
#include "queue/queue.h"
#include "spec/spec.h"

#define T0 INT64_C(1800000000000) /* a fixed "now" for tests */

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

static struct spec_job *
job(const char *name, const char *key, int prio)
{
    char json[512], err[256];
    struct spec_job *s = NULL;

    snprintf(json, sizeof(json),
             "{\"name\":\"%s\",%s%s%s\"priority\":%d,\"steps\":[{\"name\":"
             "\"a\",\"request\":{\"messages\":[{\"role\":\"user\","
             "\"content\":\"hi\"}]}}]}",
             name, key ? "\"key\":\"" : "", key ? key : "", key ? "\"," : "",
             prio);
    ck_assert_msg(spec_parse(json, strlen(json), NULL, &s, err, sizeof(err)) ==
                      0,
                  "%s", err);
    return s;
}

/* Enqueues validated jobs as the CLI does: their rows, in one call. */
static int
enq(q_db *db, struct spec_job *const *v, size_t n,
    const struct q_enqueue_opts *o, int64_t now, struct q_enqueue_result *r)
{
    struct q_job_new *rows = spec_job_rows(v, n);
    int rc = q_enqueue(db, rows, n, o, now, r);

    free(rows);
    return rc;
}

static int64_t
add(q_db *db, const char *name, const char *key, int prio, int64_t now)
{
    struct spec_job *s = job(name, key, prio);
    struct q_enqueue_result r;

    ck_assert_int_eq(enq(db, &s, 1, NULL, now, &r), 0);
    spec_job_free(s);
    return r.id;
}

static q_db *
open_db(void)
{
    q_db *db = NULL;
    ck_assert_int_eq(q_open(path, NULL, &db), 0);
    return db;
}

static enum q_job_state
state_of(q_db *db, int64_t id)
{
    struct q_job j = {0};
    enum q_job_state st;

    ck_assert_int_eq(q_job_get(db, id, &j), 0);
    st = j.state;
    q_job_cleanup(&j);
    return st;
}

/* ---- files and schema ---------------------------------------------- */

START_TEST(test_new_file_is_private_and_wal)
{
    q_db *db = open_db();
    struct stat st;
    sqlite3_stmt *s;

    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(
        sqlite3_prepare_v2(db->h, "PRAGMA journal_mode", -1, &s, NULL),
        SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

static char *
schema_text(q_db *db)
{
    sqlite3_stmt *s;
    char *out = xstrdup("");

    ck_assert_int_eq(sqlite3_prepare_v2(db->h,
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

START_TEST(test_migrates_older_version_keeping_jobs)
{
    q_db *db = NULL;
    int64_t counts[Q_JOB_NSTATES], park = -1, id;
    int v = 0;

    ck_assert_int_eq(q_open_version(path, 1, &db), 0);
    ck_assert_int_eq(q_db_version(db, &v), 0);
    ck_assert_int_eq(v, 1);
    id = add(db, "old", "k-old", 0, T0);
    ck_assert_int_eq(q_close(db), 0);
    /* version 2: tier state without pacing */
    ck_assert_int_eq(q_open_version(path, 2, &db), 0);
    ck_assert_int_eq(exec_simple(db, "INSERT INTO tiers (name, breaker,"
                                     " failures, exhausted_until) VALUES"
                                     " ('free', 'open', 3, 5)"),
                     0);
    ck_assert_int_eq(q_close(db), 0);

    db = open_db();
    struct q_tier_state st;
    ck_assert_int_eq(q_tier_load(db, "free", T0, NULL, &st), 0);
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
    ck_assert_int_eq(state_of(db, id), Q_JOB_QUEUED);
    ck_assert_int_eq(q_close(db), 0);
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

    ck_assert_int_eq(exec_simple(db, "PRAGMA user_version = 99"), 0);
    ck_assert_int_eq(q_close(db), 0);
    ck_assert_int_eq(q_open(path, NULL, &again), -ENOTSUP);
    ck_assert_ptr_null(again);
}
END_TEST

/* ---- enqueue and claim -------------------------------------------- */

START_TEST(test_dedupe_returns_first_id)
{
    q_db *db = open_db();
    struct spec_job *v[3] = {job("a", "k1", 0), job("b", "k1", 0),
                             job("c", NULL, 0)};
    struct q_enqueue_result r[3];
    int64_t again;

    ck_assert_int_eq(enq(db, v, 3, NULL, T0, r), 0);
    ck_assert(!r[0].duplicate && r[1].duplicate && !r[2].duplicate);
    ck_assert_int_eq(r[1].id, r[0].id);
    again = add(db, "d", "k1", 0, T0);
    ck_assert_int_eq(again, r[0].id);
    for (int i = 0; i < 3; i++)
        spec_job_free(v[i]);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_claim_order_priority_run_at_id)
{
    q_db *db = open_db();
    struct spec_job *late = job("late", NULL, 9);
    struct q_enqueue_opts o = {.has_run_at = true, .run_at = T0 + 60000};
    struct q_enqueue_result r;
    struct q_job *got = NULL;
    size_t n = 0;
    int64_t low = add(db, "low", NULL, -1, T0);
    int64_t a = add(db, "a", NULL, 5, T0);
    int64_t b = add(db, "b", NULL, 5, T0);

    ck_assert_int_eq(enq(db, &late, 1, &o, T0, &r), 0);
    ck_assert_int_eq(q_claim(db, "w1", T0, 1000, 10, &got, &n), 0);
    ck_assert_uint_eq(n, 3); /* "late" is not due yet */
    ck_assert_int_eq(got[0].id, a);
    ck_assert_int_eq(got[1].id, b);
    ck_assert_int_eq(got[2].id, low);
    ck_assert_str_eq(got[0].lease_owner, "w1");
    ck_assert_int_eq(got[0].claims, 1);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_claim(db, "w1", T0, 1000, 10, &got, &n), -ENOENT);
    ck_assert_int_eq(q_claim(db, "w1", T0 + 60000, 1000, 10, &got, &n), 0);
    ck_assert_int_eq(got[0].id, r.id);
    q_jobs_free(got, n);
    spec_job_free(late);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_claim_uses_index_without_sort)
{
    q_db *db = open_db();
    sqlite3_stmt *s;
    char plan[1024] = "";

    char sql[512];

    snprintf(sql, sizeof(sql), "EXPLAIN QUERY PLAN %s",
             store_sql(ST_CLAIM_PICK));
    ck_assert_int_eq(sqlite3_prepare_v2(db->h, sql, -1, &s, NULL), SQLITE_OK);
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

START_TEST(test_lease_ops_need_the_holder)
{
    q_db *db = open_db();
    struct q_job *got = NULL;
    size_t n = 0;
    int64_t id = add(db, "a", NULL, 0, T0);
    struct q_job j = {0};

    ck_assert_int_eq(q_claim(db, "w1", T0, 1000, 1, &got, &n), 0);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_extend(db, id, "w2", T0 + 5000, T0), -EBUSY);
    ck_assert_int_eq(q_complete(db, id, "w2", T0), -EBUSY);
    ck_assert_int_eq(q_extend(db, id, "w1", T0 + 5000, T0), 0);
    ck_assert_int_eq(q_release(db, id, "w1", T0 + 7000, T0), 0);
    ck_assert_int_eq(state_of(db, id), Q_JOB_QUEUED);
    ck_assert_int_eq(q_claim(db, "w2", T0 + 6999, 1000, 1, &got, &n), -ENOENT);
    ck_assert_int_eq(q_claim(db, "w2", T0 + 7000, 1000, 1, &got, &n), 0);
    ck_assert_int_eq(got[0].claims, 2);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_fail(db, id, "w2", "HTTP 500: boom", T0), 0);
    ck_assert_int_eq(q_job_get(db, id, &j), 0);
    ck_assert_int_eq(j.state, Q_JOB_FAILED);
    ck_assert_str_eq(j.error, "HTTP 500: boom");
    ck_assert_ptr_null(j.lease_owner);
    q_job_cleanup(&j);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_expired_lease_is_claimed_again)
{
    q_db *db = open_db();
    struct q_job *got = NULL;
    size_t n = 0;
    int64_t id = add(db, "a", NULL, 0, T0);

    ck_assert_int_eq(q_claim(db, "dead", T0, 1000, 1, &got, &n), 0);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_claim(db, "w2", T0 + 1000, 1000, 1, &got, &n), -ENOENT);
    ck_assert_int_eq(q_claim(db, "w2", T0 + 1001, 1000, 1, &got, &n), 0);
    ck_assert_int_eq(got[0].id, id);
    ck_assert_str_eq(got[0].lease_owner, "w2");
    q_jobs_free(got, n);
    ck_assert_int_eq(q_complete(db, id, "dead", T0 + 1002), -EBUSY);
    ck_assert_int_eq(q_complete(db, id, "w2", T0 + 1002), 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_cancel_states)
{
    q_db *db = open_db();
    struct q_job *got = NULL;
    size_t n = 0;
    int64_t a = add(db, "a", NULL, 1, T0), b = add(db, "b", NULL, 0, T0);

    ck_assert_int_eq(q_claim(db, "w", T0, 1000, 1, &got, &n), 0);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_cancel(db, a, T0), 0); /* running */
    ck_assert_int_eq(q_extend(db, a, "w", T0 + 9, T0), -EBUSY);
    ck_assert_int_eq(q_cancel(db, b, T0), 0); /* queued */
    ck_assert_int_eq(q_cancel(db, b, T0), -EALREADY);
    ck_assert_int_eq(q_cancel(db, 999, T0), -ENOENT);
    ck_assert_int_eq(state_of(db, b), Q_JOB_CANCELLED);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_group_commit_rolls_back_whole)
{
    q_db *db = open_db();
    int64_t counts[Q_JOB_NSTATES], park;

    ck_assert_int_eq(q_tx_begin(db), 0);
    add(db, "a", NULL, 0, T0);
    add(db, "b", NULL, 0, T0);
    q_tx_rollback(db);
    ck_assert_int_eq(q_counts(db, counts, &park), 0);
    ck_assert_int_eq(counts[Q_JOB_QUEUED], 0);
    ck_assert_int_eq(q_tx_begin(db), 0);
    add(db, "a", NULL, 0, T0);
    add(db, "b", NULL, 0, T0);
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_eq(q_counts(db, counts, &park), 0);
    ck_assert_int_eq(counts[Q_JOB_QUEUED], 2);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_inner_failure_keeps_outer_work)
{
    q_db *db = open_db();
    int64_t counts[Q_JOB_NSTATES], park, aid;
    int num;

    ck_assert_int_eq(q_tx_begin(db), 0);
    int64_t a = add(db, "a", NULL, 0, T0);
    struct q_attempt_start st = {a, 0, "nobody", NULL, "x", 1, T0};
    ck_assert_int_eq(q_attempt_begin(db, &st, &aid, &num), -EBUSY);
    add(db, "b", NULL, 0, T0);
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_eq(q_counts(db, counts, &park), 0);
    ck_assert_int_eq(counts[Q_JOB_QUEUED], 2);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- attempts ledger ------------------------------------------------ */

START_TEST(test_attempts_recorded_before_and_after)
{
    q_db *db = NULL;
    struct q_open_opts o = {.keep_body_bytes = 8};
    struct q_job *got = NULL;
    struct q_attempt *a = NULL;
    struct q_step *st = NULL;
    size_t n = 0, na = 0, ns = 0;
    int64_t id, aid1, aid2;
    int num = 0;

    ck_assert_int_eq(q_open(path, &o, &db), 0);
    id = add(db, "a", NULL, 0, T0);
    struct q_attempt_start s = {id, 0, "w", "free", "abc", 100, T0};
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid1, &num), -EBUSY);
    ck_assert_int_eq(q_claim(db, "w", T0, 1000, 1, &got, &n), 0);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid1, &num), 0);
    ck_assert_int_eq(num, 1);
    struct q_attempt_result r = {
        429, "hard_quota", "daily_cap", "switch_tier_replay",
        0,   41,           0,           "daily quota exceeded",
        20,  T0 + 41};
    ck_assert_int_eq(q_attempt_finish(db, aid1, &r), 0);
    ck_assert_int_eq(q_attempt_finish(db, aid1, &r), -EALREADY);
    s.tier = "local";
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid2, &num), 0);
    ck_assert_int_eq(num, 2);
    ck_assert_int_eq(q_attempts_list(db, id, -1, &a, &na), 0);
    ck_assert_uint_eq(na, 2);
    ck_assert_str_eq(a[0].body, "daily qu"); /* capped at 8 bytes */
    ck_assert_str_eq(a[0].outcome, "hard_quota");
    ck_assert_int_eq(a[1].finished_at, 0); /* no result yet: in flight */
    ck_assert_int_eq(q_steps_get(db, id, &st, &ns), 0);
    ck_assert_int_eq(st[0].attempts, 2);
    ck_assert_int_eq(st[0].tokens, 100); /* 100 est - 100 + 0 + 100 est */
    ck_assert_str_eq(st[0].tier, "local");
    q_steps_free(st, ns);
    q_attempts_free(a, na);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- real processes ------------------------------------------------- */

static void
wait_children(pid_t *pids, int n)
{
    for (int i = 0; i < n; i++) {
        int st;
        ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "child %d failed (status %d)", i, st);
    }
}

START_TEST(test_dedupe_across_processes)
{
    q_db *db = open_db(); /* create and migrate before the race */
    int64_t counts[Q_JOB_NSTATES], park;
    pid_t pids[8];
    int go[2];

    ck_assert_int_eq(q_close(db), 0);
    ck_assert_int_eq(pipe(go), 0);
    for (int i = 0; i < 8; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            char c;
            q_db *d = NULL;
            close(go[1]);
            if (read(go[0], &c, 1) != 0) /* released together at EOF */
                _exit(3);
            if (q_open(path, NULL, &d) != 0)
                _exit(1);
            struct spec_job *s = job("same", "nightly-1", 0);
            struct q_enqueue_result r;
            int rc = enq(d, &s, 1, NULL, T0, &r);
            spec_job_free(s);
            _exit(rc == 0 && q_close(d) == 0 ? 0 : 2);
        }
    }
    close(go[0]);
    close(go[1]);
    wait_children(pids, 8);
    db = open_db();
    ck_assert_int_eq(q_counts(db, counts, &park), 0);
    ck_assert_int_eq(counts[Q_JOB_QUEUED], 1);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

#define NJOBS 5000
#define NPROC 4

START_TEST(test_claim_exclusive_across_processes)
{
    q_db *db = open_db();
    struct spec_job **v = xcalloc(NJOBS, sizeof(*v));
    struct q_enqueue_result *r = xcalloc(NJOBS, sizeof(*r));
    int64_t counts[Q_JOB_NSTATES], park;
    static unsigned char seen[NJOBS + 1];
    pid_t pids[NPROC];
    int fds[NPROC][2];

    for (int i = 0; i < NJOBS; i++)
        v[i] = job("j", NULL, 0);
    ck_assert_int_eq(enq(db, v, NJOBS, NULL, T0, r), 0);
    spec_jobs_free(v, NJOBS);
    free(r);
    ck_assert_int_eq(q_close(db), 0);
    for (int p = 0; p < NPROC; p++) {
        ck_assert_int_eq(pipe(fds[p]), 0);
        pids[p] = fork();
        ck_assert_int_ge(pids[p], 0);
        if (pids[p] == 0) {
            char name[16];
            q_db *d = NULL;
            struct q_job *got;
            size_t n;
            int rc;
            close(fds[p][0]);
            snprintf(name, sizeof(name), "w%d", p);
            if (q_open(path, NULL, &d) != 0)
                _exit(1);
            /* Claim a few at a time; report each completed id. */
            while ((rc = q_claim(d, name, T0, 60000, 8, &got, &n)) == 0) {
                for (size_t i = 0; i < n; i++) {
                    if (q_complete(d, got[i].id, name, T0) != 0)
                        _exit(2);
                    if (write(fds[p][1], &got[i].id, sizeof(int64_t)) !=
                        (ssize_t)sizeof(int64_t))
                        _exit(3);
                }
                q_jobs_free(got, n);
            }
            _exit(rc == -ENOENT && q_close(d) == 0 ? 0 : 4);
        }
        close(fds[p][1]);
    }
    for (int p = 0; p < NPROC; p++) {
        int64_t id;
        while (read(fds[p][0], &id, sizeof(id)) == (ssize_t)sizeof(id)) {
            ck_assert(id >= 1 && id <= NJOBS);
            ck_assert_msg(seen[id] == 0, "job %lld completed twice",
                          (long long)id);
            seen[id] = 1;
        }
        close(fds[p][0]);
    }
    wait_children(pids, NPROC);
    db = open_db();
    ck_assert_int_eq(q_counts(db, counts, &park), 0);
    ck_assert_int_eq(counts[Q_JOB_SUCCEEDED], NJOBS);
    ck_assert_int_eq(counts[Q_JOB_QUEUED] + counts[Q_JOB_RUNNING], 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_killed_claimer_jobs_run_elsewhere)
{
    q_db *db = open_db();
    int64_t counts[Q_JOB_NSTATES], park;
    struct q_job *got = NULL;
    size_t n = 0, done = 0;
    int ready[2], st;
    char c;
    pid_t pid;

    for (int i = 0; i < 10; i++)
        add(db, "j", NULL, 0, T0);
    ck_assert_int_eq(q_close(db), 0);
    ck_assert_int_eq(pipe(ready), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        q_db *d = NULL;
        close(ready[0]);
        if (q_open(path, NULL, &d) != 0 ||
            q_claim(d, "doomed", T0, 30000, 10, &got, &n) != 0)
            _exit(1);
        if (write(ready[1], "x", 1) != 1)
            _exit(2);
        pause(); /* holds the leases until killed */
        _exit(0);
    }
    close(ready[1]);
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    close(ready[0]);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    db = open_db();
    ck_assert_int_eq(q_claim(db, "w2", T0 + 30000, 30000, 10, &got, &n),
                     -ENOENT); /* leases still valid */
    ck_assert_int_eq(q_claim(db, "w2", T0 + 30001, 30000, 10, &got, &n), 0);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(got[i].claims, 2);
        ck_assert_int_eq(q_complete(db, got[i].id, "w2", T0 + 30002), 0);
        done++;
    }
    q_jobs_free(got, n);
    ck_assert_uint_eq(done, 10);
    ck_assert_int_eq(q_counts(db, counts, &park), 0);
    ck_assert_int_eq(counts[Q_JOB_SUCCEEDED], 10);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("queue");
    TCase *files = tcase_create("files");
    TCase *jobs = tcase_create("jobs");
    TCase *ledger = tcase_create("ledger");
    TCase *procs = tcase_create("processes");

    tcase_add_checked_fixture(files, setup, teardown);
    tcase_add_test(files, test_new_file_is_private_and_wal);
    tcase_add_test(files, test_migrates_older_version_keeping_jobs);
    tcase_add_test(files, test_open_twice_changes_nothing);
    tcase_add_test(files, test_newer_schema_refused);
    suite_add_tcase(s, files);

    tcase_add_checked_fixture(jobs, setup, teardown);
    tcase_add_test(jobs, test_dedupe_returns_first_id);
    tcase_add_test(jobs, test_claim_order_priority_run_at_id);
    tcase_add_test(jobs, test_claim_uses_index_without_sort);
    tcase_add_test(jobs, test_lease_ops_need_the_holder);
    tcase_add_test(jobs, test_expired_lease_is_claimed_again);
    tcase_add_test(jobs, test_cancel_states);
    tcase_add_test(jobs, test_group_commit_rolls_back_whole);
    tcase_add_test(jobs, test_inner_failure_keeps_outer_work);
    suite_add_tcase(s, jobs);

    tcase_add_checked_fixture(ledger, setup, teardown);
    tcase_add_test(ledger, test_attempts_recorded_before_and_after);
    suite_add_tcase(s, ledger);

    tcase_add_checked_fixture(procs, setup, teardown);
    tcase_set_timeout(procs, 60);
    tcase_add_test(procs, test_dedupe_across_processes);
    tcase_add_test(procs, test_claim_exclusive_across_processes);
    tcase_add_test(procs, test_killed_claimer_jobs_run_elsewhere);
    suite_add_tcase(s, procs);
    return s;
}

/* test_queue_pg.c: the PostgreSQL backend's white box (queue/pg/), on the
 * run's cluster (tests/support/pgfix.h), a fresh schema per store: the
 * schema made by open, migrated from versions 3 and 4 and checked by
 * open_existing, racing inits, SKIP LOCKED claims, wake-ups by NOTIFY,
 * the clock offset, no password in logs, and reconnecting after the
 * server restarts (on a cluster of the test's own, so other suites keep
 * theirs). */
#include "tests/support/support.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "queue/pg/internal.h"
#include "tests/support/pgfix.h"

#define T0 1700000000000LL

static char loc[1024];

static void
setup(void)
{
    ck_assert_int_eq(pgfix_location(loc, sizeof(loc)), 0);
}

static q_db *
open_pg(bool create)
{
    q_db *db = NULL;

    ck_assert_int_eq(q__pg_open(loc, NULL, create, &db), 0);
    return db;
}

static int64_t
add_job(q_db *db, const char *name)
{
    struct q_job_new j = {.name = name, .deadline_s = 60, .text = "{}"};
    struct q_enqueue_result r;

    ck_assert_int_eq(q__pg_enqueue(db, &j, 1, NULL, T0, &r), 0);
    return r.id;
}

/* Waits up to 5 s for fd to be readable, then takes the wake bits. */
static unsigned
wait_wake(q_db *db, int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int64_t end = clock_mono_ms() + 5000;
    unsigned ev = 0;

    while (ev == 0 && clock_mono_ms() < end) {
        ck_assert_int_ge(poll(&p, 1, 100), 0);
        ck_assert_int_eq(q__pg_wake_take(db, &ev), 0);
    }
    return ev;
}

/* ---- the schema ------------------------------------------------------ */

START_TEST(test_open_creates_schema)
{
    q_db *db = open_pg(true);
    int v = 0;

    ck_assert_int_eq(q__pg_db_version(db, &v), 0);
    ck_assert_int_eq(v, q_schema_version());
    pgfix_expect(loc,
                 "SELECT string_agg(table_name, ',' ORDER BY table_name)"
                 " FROM information_schema.tables"
                 " WHERE table_schema = current_schema()",
                 "attempts,jobs,park,schedules,stepq_schema,steps,tier_events,"
                 "tier_sends,tiers");
    pgfix_expect(loc,
                 "SELECT count(*) FROM pg_indexes WHERE schemaname ="
                 " current_schema() AND indexname IN ('jobs_ready',"
                 " 'jobs_leased', 'jobs_key', 'park_state', 'park_job',"
                 " 'tier_sends_open')",
                 "6");
    ck_assert_int_eq(q__pg_close(db), 0);
}
END_TEST

START_TEST(test_open_existing_needs_the_schema)
{
    q_db *db = NULL;

    ck_assert_int_eq(q__pg_open(loc, NULL, false, &db), -ENOENT);
    db = open_pg(true);
    ck_assert_int_eq(q__pg_close(db), 0);
    pgfix_query(loc, "UPDATE stepq_schema SET version = 2", NULL);
    ck_assert_int_eq(q__pg_open(loc, NULL, false, &db), -ESTALE);
    pgfix_query(loc, "UPDATE stepq_schema SET version = 99", NULL);
    ck_assert_int_eq(q__pg_open(loc, NULL, false, &db), -ENOTSUP);
    ck_assert_int_eq(q__pg_open(loc, NULL, true, &db), -ENOTSUP);
}
END_TEST

START_TEST(test_concurrent_inits_make_one_schema)
{
    char want[32];
    pid_t pids[4];
    int st;

    for (int i = 0; i < 4; i++) {
        if ((pids[i] = fork()) == 0) {
            q_db *db = NULL;
            int rc = q__pg_open(loc, NULL, true, &db);
            _exit(rc == 0 && q__pg_close(db) == 0 ? 0 : 1);
        }
        ck_assert_int_gt(pids[i], 0);
    }
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    snprintf(want, sizeof(want), "1 %d", q_schema_version());
    pgfix_expect(
        loc, "SELECT count(*) || ' ' || max(version) FROM stepq_schema", want);
}
END_TEST

/* What turns the send log of a current store back into version 5's: a
 * done_at column with the indexes it had, and no usage in the tiers. */
#define V5_SENDS                                                               \
    "DROP INDEX tier_sends_open;"                                              \
    " ALTER TABLE tier_sends ADD COLUMN done_at bigint;"                       \
    " CREATE INDEX tier_sends_at ON tier_sends (tier, at);"                    \
    " CREATE INDEX tier_sends_open ON tier_sends"                              \
    " (tier, expires_at) WHERE done_at IS NULL;"                               \
    " ALTER TABLE tiers DROP COLUMN usage;"

/* A store at version 3 (made here by taking version 4's table away) waits
 * for init, which adds the schedules table and keeps the jobs. */
START_TEST(test_migrates_v3_adding_schedules)
{
    q_db *db = open_pg(true);
    int64_t id = add_job(db, "old");
    struct q_sched sc = {0};
    int v = 0;

    ck_assert_int_eq(q_close(db), 0);
    ck_assert_int_eq(pgfix_query(loc,
                                 V5_SENDS
                                 "DROP TABLE schedules; DROP TABLE tier_events;"
                                 " UPDATE stepq_schema SET version = 3",
                                 NULL),
                     0);
    ck_assert_int_eq(q__pg_open(loc, NULL, false, &db), -ESTALE);
    db = open_pg(true);
    ck_assert_int_eq(q__pg_db_version(db, &v), 0);
    ck_assert_int_eq(v, q_schema_version());
    pgfix_expect(loc, "SELECT string_agg(name, ',') FROM jobs", "old");
    ck_assert_int_eq(q_sched_get(db, "nightly", &sc), -ENOENT);
    ck_assert_int_eq(q_sched_note(db, "nightly", T0, T0, id, T0), 0);
    ck_assert_int_eq(q_sched_get(db, "nightly", &sc), 0);
    ck_assert_int_eq(sc.last_job_id, id);
    q_sched_cleanup(&sc);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A store at version 4 (version 5's table taken away) waits for init,
 * which adds tier_events and keeps the jobs; an event is then reported. */
START_TEST(test_migrates_v4_adding_tier_events)
{
    q_db *db = open_pg(true);
    struct q_report_tier *t = NULL;
    size_t n = 9;
    int v = 0;

    (void)add_job(db, "old");
    ck_assert_int_eq(q_close(db), 0);
    ck_assert_int_eq(pgfix_query(loc,
                                 V5_SENDS
                                 "DROP TABLE tier_events;"
                                 " UPDATE stepq_schema SET version = 4",
                                 NULL),
                     0);
    ck_assert_int_eq(q__pg_open(loc, NULL, false, &db), -ESTALE);
    db = open_pg(true);
    ck_assert_int_eq(q__pg_db_version(db, &v), 0);
    ck_assert_int_eq(v, q_schema_version());
    pgfix_expect(loc, "SELECT string_agg(name, ',') FROM jobs", "old");
    ck_assert_int_eq(q_tier_event_add(db, "free", T0, "breaker_open"), 0);
    ck_assert_int_eq(q_report_tiers(db, T0, &t, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(t[0].breaker_opened, 1);
    q_report_tiers_free(t, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A store at version 5 (the send log of answered sends put back) waits
 * for init, which keeps only the sends in flight and the tier's row. */
START_TEST(test_migrates_v5_keeping_sends_in_flight)
{
    q_db *db = open_pg(true);
    struct q_tier_state st;
    int v = 0;

    ck_assert_int_eq(q_close(db), 0);
    ck_assert_int_eq(
        pgfix_query(loc,
                    V5_SENDS
                    " INSERT INTO tiers (name, failures) VALUES ('free', 3);"
                    " INSERT INTO tier_sends (tier, at, tokens, expires_at,"
                    " done_at) VALUES ('free', 1700000000000, 10,"
                    " 1700000060000, 1700000000500), ('free', 1700000000100,"
                    " 20, 1700000060000, NULL);"
                    " UPDATE stepq_schema SET version = 5",
                    NULL),
        0);
    ck_assert_int_eq(q__pg_open(loc, NULL, false, &db), -ESTALE);
    db = open_pg(true);
    ck_assert_int_eq(q__pg_db_version(db, &v), 0);
    ck_assert_int_eq(v, q_schema_version());
    pgfix_expect(loc, "SELECT count(*) FROM tier_sends", "1");
    ck_assert_int_eq(q_tier_load(db, "free", T0 + 1000, true, &st), 0);
    ck_assert_int_eq(st.failures, 3);
    ck_assert_int_eq(st.in_flight, 1);
    ck_assert_int_eq(st.usage.last_s, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- claims and wake-ups ------------------------------------------------ */

START_TEST(test_claim_skips_locked_rows)
{
    q_db *a = open_pg(true), *b = open_pg(false);
    int64_t first = add_job(a, "first"), second = add_job(a, "second");
    struct q_job *got = NULL;
    size_t n = 0;

    ck_assert_int_eq(q__pg_tx_begin(a), 0);
    ck_assert_int_eq(q__pg_claim(a, "wa", T0, 60000, 1, &got, &n), 0);
    ck_assert_int_eq(got[0].id, first);
    q_jobs_free(got, n);
    /* a holds first's row until it commits: b takes the next one. */
    ck_assert_int_eq(q__pg_claim(b, "wb", T0, 60000, 10, &got, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(got[0].id, second);
    q_jobs_free(got, n);
    ck_assert_int_eq(q__pg_tx_commit(a), 0);
    ck_assert_int_eq(q__pg_claim(b, "wb", T0, 60000, 10, &got, &n), -ENOENT);
    ck_assert_int_eq(q__pg_close(a), 0);
    ck_assert_int_eq(q__pg_close(b), 0);
}
END_TEST

/* A turn's writes that nobody waits for are held (another session sees
 * nothing, not even the BEGIN's lock) until the commit's round trip
 * carries them; a level of only held writes goes to the server as no
 * SAVEPOINT at all: ended well, its writes are its parent's; rolled back,
 * they are dropped unsent. A completion whose lease another worker holds
 * changes nothing and the rest of the turn commits. */
START_TEST(test_writes_ride_with_the_commit)
{
    q_db *a = open_pg(true), *b = open_pg(false);
    int64_t mine = add_job(a, "mine"), theirs = add_job(a, "theirs");
    struct q_job *got = NULL;
    size_t n = 0;
    char *line, sql[160];

    ck_assert_int_eq(q_claim(a, "wa", T0, 60000, 1, &got, &n), 0);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_claim(b, "wb", T0, 60000, 1, &got, &n), 0);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_tx_begin(a), 0);
    ck_assert_int_eq(q_step_set(a, mine, 0, Q_STEP_SUCCEEDED, "t", "o", 1), 0);
    ck_assert_int_eq(q_complete(a, mine, "wa", T0 + 1), 0);
    ck_assert_int_eq(q_complete(a, theirs, "wa", T0 + 1), 0); /* logged */
    ck_assert_int_eq(q_tx_begin(a), 0);
    ck_assert_int_eq(q_step_set(a, mine, 1, Q_STEP_SUCCEEDED, "t", "p", 1), 0);
    ck_assert_int_eq(q_tx_commit(a), 0); /* kept: the parent's now */
    ck_assert_int_eq(q_tx_begin(a), 0);
    ck_assert_int_eq(q_step_set(a, mine, 2, Q_STEP_SUCCEEDED, "t", "q", 1), 0);
    q_tx_rollback(a); /* dropped */
    ck_assert_uint_eq(q__pg(a)->npending, 4);
    ck_assert_int_eq(q__pg(a)->tx_sent, 0);
    ck_assert_int_eq(q__pg(a)->tx_release, 0);
    /* nothing sent yet: not even the BEGIN with the store's lock */
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
             " AND pid = %d",
             PQbackendPID(q__pg(a)->conn));
    pgfix_expect(loc, sql, "0");
    ck_assert_int_eq(q_tx_commit(a), 0);
    ck_assert_uint_eq(q__pg(a)->nsent + q__pg(a)->npending, 0);
    line = pgfix_line(loc, "SELECT string_agg(name || ':' || state, ',' "
                           "ORDER BY id) FROM jobs");
    ck_assert_str_eq(line, "mine:2,theirs:1");
    free(line);
    line = pgfix_line(loc, "SELECT string_agg(output, ',' ORDER BY idx)"
                           " FROM steps");
    ck_assert_str_eq(line, "o,p");
    free(line);
    ck_assert_int_eq(q_close(a), 0);
    ck_assert_int_eq(q_close(b), 0);
}
END_TEST

/* The tiers a commit kept are read again with the next transaction's
 * first round trip, after its lock: a load that needs only the row then
 * costs no round trip, and it sees what another host committed between
 * the two transactions. */
static void
store_failures(q_db *db, int failures)
{
    struct q_tier_state st;

    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_tier_load(db, "free", T0, true, &st), 0);
    st.failures = failures;
    st.doubt = false;
    ck_assert_int_eq(q_tier_store(db, "free", &st), 0);
    ck_assert_int_eq(q_tx_commit(db), 0);
}

START_TEST(test_next_transaction_reads_its_tiers_ahead)
{
    q_db *a = open_pg(true), *b = open_pg(false);
    struct q_tier_state st;
    struct q_job *got = NULL;
    size_t n = 0;
    uint64_t seq;

    (void)add_job(a, "x");
    store_failures(a, 1);
    store_failures(b, 7); /* another host, between a's transactions */
    ck_assert_int_eq(q_tx_begin(a), 0);
    ck_assert_int_eq(q_claim(a, "wa", T0, 60000, 1, &got, &n), 0);
    q_jobs_free(got, n);
    seq = q__pg(a)->seq;
    ck_assert_int_eq(q_tier_load(a, "free", T0, false, &st), 0);
    ck_assert_uint_eq(q__pg(a)->seq, seq); /* nothing sent */
    ck_assert_int_eq(st.failures, 7);
    ck_assert_int_eq(q_tx_commit(a), 0);
    ck_assert_int_eq(q_close(a), 0);
    ck_assert_int_eq(q_close(b), 0);
}
END_TEST

/* A deferred write that fails is read by a later round trip, here one
 * inside another savepoint: rolling that savepoint back does not undo a
 * failure from before it (the savepoint that held it was released), so
 * the commit fails and nothing of the transaction is kept. */
START_TEST(test_failed_deferred_write_fails_the_commit)
{
    q_db *db = open_pg(true);
    int64_t id = add_job(db, "a");
    struct q_step *st = NULL;
    size_t n = 0;

    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_step_set(db, id, 0, Q_STEP_SUCCEEDED, "t", "o", 1), 0);
    ck_assert_int_eq(q_tx_begin(db), 0);
    /* no such job: fails when read */
    ck_assert_int_eq(q_step_set(db, id + 99, 0, Q_STEP_FAILED, 0, 0, 0), 0);
    ck_assert_int_eq(q_tx_commit(db), 0); /* released */
    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_ne(q_steps_get(db, id, &st, &n), 0); /* reads it */
    q_tx_rollback(db);
    ck_assert_int_ne(q_tx_commit(db), 0);
    ck_assert_int_eq(q_steps_get(db, id, &st, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Text PostgreSQL cannot hold (not UTF-8: an endpoint's output) is
 * stored with its bad bytes as '?', and the transaction it is in goes on
 * and commits (a failed statement would abort a worker's whole turn). */
START_TEST(test_text_that_is_not_utf8_is_scrubbed)
{
    q_db *db = open_pg(true);
    int64_t id = add_job(db, "bad");
    struct q_step *st = NULL;
    size_t n = 0;

    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(
        q_step_set(db, id, 0, Q_STEP_SUCCEEDED, "t", "ok\xff\xfe!", 0), 0);
    ck_assert_int_eq(q_step_set(db, id, 1, Q_STEP_RUNNING, NULL, NULL, 0), 0);
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_eq(q_steps_get(db, id, &st, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(st[0].output, "ok?"
                                   "?!"); /* not a trigraph */
    q_steps_free(st, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_enqueue_wakes_the_listener)
{
    q_db *a = open_pg(true), *b = open_pg(false);
    int fd = q__pg_wake_fd(b);
    unsigned ev = 0;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(q__pg_wake_fd(b), fd);
    ck_assert_int_eq(q__pg_wake_take(b, &ev), 0);
    ck_assert_uint_eq(ev, 0);
    add_job(a, "x");
    ck_assert_uint_eq(wait_wake(b, fd) & Q_WAKE_JOBS, Q_WAKE_JOBS);
    ck_assert_int_eq(q__pg_close(a), 0);
    ck_assert_int_eq(q__pg_close(b), 0);
}
END_TEST

START_TEST(test_release_and_tier_opening_wake)
{
    q_db *a = open_pg(true), *b = open_pg(false);
    int fd = q__pg_wake_fd(b);
    int64_t id = add_job(a, "x");
    struct q_job *got = NULL;
    size_t n = 0;

    ck_assert_int_eq(q__pg_claim(a, "w", T0, 60000, 1, &got, &n), 0);
    q_jobs_free(got, n);
    (void)wait_wake(b, fd); /* the enqueue's */
    ck_assert_int_eq(q__pg_release(a, id, "w", T0, T0), 0);
    ck_assert_uint_eq(wait_wake(b, fd), Q_WAKE_JOBS);
    pgfix_query(loc, "INSERT INTO tiers (name, open_until) VALUES ('t', 9)",
                NULL);
    pgfix_query(loc, "UPDATE tiers SET open_until = 5", NULL);
    ck_assert_uint_eq(wait_wake(b, fd), Q_WAKE_TIERS);
    ck_assert_int_eq(q__pg_close(a), 0);
    ck_assert_int_eq(q__pg_close(b), 0);
}
END_TEST

START_TEST(test_clock_offset_is_near_zero)
{
    q_db *db = open_pg(true);

    /* The cluster runs on this machine: one clock. */
    ck_assert_int_lt(llabs(q_clock_offset(db)), 20);
    db->clock_offset_ms = 12345;
    ck_assert_int_eq(q__pg_clock_sync(db), 0);
    ck_assert_int_lt(llabs(q_clock_offset(db)), 20);
    ck_assert_int_eq(q__pg_close(db), 0);
}
END_TEST

/* ---- errors and reconnecting ------------------------------------------- */

START_TEST(test_password_is_never_logged)
{
    char bad[1024], *log = NULL, *dir = tmpdir_new();
    char *path = tmpdir_join(dir, "stderr");
    const char *at = strchr(pgfix_url(), '@');
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600), saved = dup(2);
    q_db *db = NULL;
    size_t len = 0;

    snprintf(bad, sizeof(bad), "postgresql://stepq:Sekr1tPassw0rd%s", at);
    dup2(fd, 2);
    ck_assert_int_eq(q__pg_open(bad, NULL, true, &db), -EIO);
    dup2(saved, 2);
    ck_assert_int_eq(file_read_all(path, 1 << 20, &log, &len), 0);
    ck_assert_msg(strstr(log, "password authentication failed") != NULL, "%s",
                  log);
    ck_assert_ptr_null(strstr(log, "Sekr1tPassw0rd"));
    close(fd);
    free(log);
    free(path);
    tmpdir_remove(dir);
}
END_TEST

/* Runs scripts/pg-cluster.sh cmd dir; returns the cluster's URL. */
static char *
cluster(const char *cmd, const char *dir)
{
    char *sh, *script = source_path("scripts/pg-cluster.sh"), *out = NULL;
    char *path = tmpdir_join(dir, "url"), *url = NULL;
    size_t len = 0;

    sh = xcalloc(1, strlen(script) + strlen(dir) + 64);
    sprintf(sh, "bash '%s' %s '%s'", script, cmd, dir);
    ck_assert_msg(run_sh(sh, &out) == 0, "%s: %s", sh, out);
    if (strcmp(cmd, "stop") != 0) {
        ck_assert_int_eq(file_read_all(path, 4096, &url, &len), 0);
        url[strcspn(url, "\n")] = '\0';
    }
    free(out);
    free(sh);
    free(script);
    free(path);
    return url;
}

/* A cluster of the test's own (restarting the run's would fail other
 * suites) with a store in it, open on *db. */
struct own {
    char *dir, *cdir, *url;
};

static q_db *
own_start(struct own *o)
{
    q_db *db = NULL;

    o->dir = tmpdir_new();
    o->cdir = tmpdir_join(o->dir, "c");
    /* As root the cluster runs as postgres, which must reach cdir. */
    ck_assert_int_eq(chmod(o->dir, 0711), 0);
    o->url = cluster("start", o->cdir);
    ck_assert_int_eq(q__pg_open(o->url, NULL, true, &db), 0);
    return db;
}

static void
own_stop(struct own *o, q_db *db)
{
    ck_assert_int_eq(q__pg_close(db), 0);
    free(cluster("stop", o->cdir));
    free(o->url);
    free(o->cdir);
    tmpdir_remove(o->dir);
}

START_TEST(test_reconnects_after_a_restart)
{
    struct own o;
    q_db *db = own_start(&o);
    int64_t counts[Q_JOB_NSTATES], park, end;
    int rc;

    free(cluster("restart", o.cdir));
    ck_assert_int_eq(q__pg_counts(db, counts, &park), -EIO);
    end = clock_mono_ms() + 15000;
    while ((rc = q__pg_counts(db, counts, &park)) == -EIO &&
           clock_mono_ms() < end)
        poll(NULL, 0, 20);
    ck_assert_int_eq(rc, 0);
    add_job(db, "after");
    own_stop(&o, db);
}
END_TEST

START_TEST(test_wake_channel_reconnects_after_a_restart)
{
    struct own o;
    q_db *db = own_start(&o);
    struct pollfd p = {.events = POLLIN};
    int64_t end = clock_mono_ms() + 15000;
    unsigned ev = 0;
    int rc;

    ck_assert_int_ge(p.fd = q__pg_wake_fd(db), 0);
    free(cluster("restart", o.cdir));
    /* The server closed the channel: readable until it reads as lost. */
    while ((rc = q__pg_wake_take(db, &ev)) == 0 && clock_mono_ms() < end)
        ck_assert_int_ge(poll(&p, 1, 100), 0);
    ck_assert_int_eq(rc, -EIO);
    while (q__pg_wake_fd(db) < 0 && clock_mono_ms() < end)
        poll(NULL, 0, 50);
    ck_assert_int_ge(q__pg_wake_fd(db), 0);
    own_stop(&o, db);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("queue_pg");
    TCase *schema = tcase_create("schema");
    TCase *work = tcase_create("claims_and_wakeups");
    TCase *errs = tcase_create("errors");

    tcase_add_checked_fixture(schema, setup, NULL);
    tcase_set_timeout(schema, 60);
    tcase_add_test(schema, test_open_creates_schema);
    tcase_add_test(schema, test_open_existing_needs_the_schema);
    tcase_add_test(schema, test_concurrent_inits_make_one_schema);
    tcase_add_test(schema, test_migrates_v3_adding_schedules);
    tcase_add_test(schema, test_migrates_v4_adding_tier_events);
    tcase_add_test(schema, test_migrates_v5_keeping_sends_in_flight);
    suite_add_tcase(s, schema);

    tcase_add_checked_fixture(work, setup, NULL);
    tcase_set_timeout(work, 60);
    tcase_add_test(work, test_claim_skips_locked_rows);
    tcase_add_test(work, test_text_that_is_not_utf8_is_scrubbed);
    tcase_add_test(work, test_writes_ride_with_the_commit);
    tcase_add_test(work, test_failed_deferred_write_fails_the_commit);
    tcase_add_test(work, test_next_transaction_reads_its_tiers_ahead);
    tcase_add_test(work, test_enqueue_wakes_the_listener);
    tcase_add_test(work, test_release_and_tier_opening_wake);
    tcase_add_test(work, test_clock_offset_is_near_zero);
    suite_add_tcase(s, work);

    tcase_add_checked_fixture(errs, setup, NULL);
    tcase_set_timeout(errs, 120);
    tcase_add_test(errs, test_password_is_never_logged);
    tcase_add_test(errs, test_reconnects_after_a_restart);
    tcase_add_test(errs, test_wake_channel_reconnects_after_a_restart);
    suite_add_tcase(s, errs);
    return s;
}

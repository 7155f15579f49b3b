/* test_copy.c: q_copy and `stepq copy`: a whole queue (jobs in every
 * state, steps, attempts with bodies, park items open and resolved, tier
 * state, its send log and events, schedule state) taken to another store
 * with ids kept, checked row by row through the contract's read calls;
 * new rows continue after the copied ids; a target that is not empty (a
 * schedule's state alone is enough) is refused and unchanged, --force
 * replaces it; a copy that fails midway leaves the target as it was. Run
 * with STEPQ_TEST_BACKEND=pg (test_copy_pg), the same goes through
 * PostgreSQL: SQLite -> PostgreSQL -> SQLite.
 */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/defs.h"
#include "common/xalloc.h"
#include "queue/admin.h"
#include "queue/park.h"
#include "queue/queue.h"
#include "queue/sched.h"
#include "queue/tiers.h"
#include "tests/support/pgfix.h"
#include "tests/support/qfix.h"
#include "tests/test_copy_support.h"

static char *dir;
static char *loc_a, *loc_b, *loc_c; /* owned: locations of three stores */

static void
setup(void)
{
    fixture_setup();
    dir = fixture_dir;
    loc_a = xstrdup("sqlite:a.db");
    loc_b = pgfix_backend_is_pg() ? pgfix_db_new(NULL, "b.db", true)
                                  : xstrdup("sqlite:b.db");
    loc_c = xstrdup("sqlite:c.db");
}

static void
teardown(void)
{
    free(loc_a);
    free(loc_b);
    free(loc_c);
    fixture_teardown();
}

static q_db *
open_at(const char *loc)
{
    q_db *db = NULL;

    ck_assert_int_eq(q_open(loc, NULL, &db), 0);
    return db;
}

/* ---- q_copy ----------------------------------------------------------- */

START_TEST(test_copies_every_row)
{
    q_db *a = open_at(loc_a), *b = open_at(loc_b);
    struct q_copy_counts c = {0};

    copyfix_fill(a);
    ck_assert_int_eq(q_copy(a, b, false, &c), 0);
    ck_assert_int_eq(c.jobs, 6);
    ck_assert_int_eq(c.steps, 4);
    ck_assert_int_eq(c.attempts, 2);
    ck_assert_int_eq(c.park, 2);
    ck_assert_int_eq(c.tiers, 1);
    ck_assert_int_eq(c.schedules, 2);
    ck_assert_int_eq(c.tier_events, 2);
    ck_assert_int_eq(c.budgets, 1);
    ck_assert_int_eq(c.retries, 1);
    ck_assert_int_eq(c.operators, 1);
    ck_assert_int_eq(c.audit, 2);
    copyfix_assert_same(a, b);
    ck_assert_int_eq(q_close(b), 0);
    ck_assert_int_eq(q_close(a), 0);
}
END_TEST

START_TEST(test_ids_continue_after_the_copied)
{
    q_db *a = open_at(loc_a), *b = open_at(loc_b);
    struct q_park_new p = {.job_id = 6, .step_name = "s", .reason = "r"};
    int64_t id = 0;

    copyfix_fill(a);
    ck_assert_int_eq(q_copy(a, b, false, NULL), 0);
    ck_assert_int_eq(qfix_add(b, "next", NULL, 0, T0), 7);
    ck_assert_int_eq(q_park_add(b, &p, &id), 0);
    ck_assert_int_eq(id, 3);
    ck_assert_int_eq(q_close(b), 0);
    ck_assert_int_eq(q_close(a), 0);
}
END_TEST

START_TEST(test_refuses_a_target_with_rows)
{
    q_db *a = open_at(loc_a), *b = open_at(loc_b), *c = open_at(loc_c);
    struct q_copy_counts n = {.jobs = -1};
    struct q_tier_state st;

    copyfix_fill(a);
    qfix_add(b, "mine", NULL, 0, T0);
    ck_assert_int_eq(q_copy(a, b, false, &n), -EEXIST);
    ck_assert_int_eq(n.jobs, -1); /* untouched */
    ck_assert_int_eq(qfix_count(b, Q_JOB_QUEUED), 1);
    /* A tier alone makes a store not empty too. */
    ck_assert_int_eq(q_tier_load(c, "t", &st), 0);
    ck_assert_int_eq(q_tier_store(c, "t", &st), 0);
    ck_assert_int_eq(q_copy(a, c, false, NULL), -EEXIST);
    ck_assert_int_eq(q_copy(a, a, true, NULL), -EINVAL);
    ck_assert_int_eq(q_close(c), 0);
    ck_assert_int_eq(q_close(b), 0);
    ck_assert_int_eq(q_close(a), 0);
}
END_TEST

START_TEST(test_refuses_a_target_with_a_schedule)
{
    q_db *a = open_at(loc_a), *b = open_at(loc_b);
    struct q_sched sc = {0};

    copyfix_fill(a);
    ck_assert_int_eq(q_sched_pause(b, "mine", true, T0), 0);
    ck_assert_int_eq(q_copy(a, b, false, NULL), -EEXIST);
    ck_assert_int_eq(qfix_count(b, Q_JOB_CANCELLED), 0);
    ck_assert_int_eq(q_sched_get(b, "nightly", &sc), -ENOENT);
    ck_assert_int_eq(q_copy(a, b, true, NULL), 0);
    ck_assert_int_eq(q_sched_get(b, "mine", &sc), -ENOENT); /* replaced */
    copyfix_assert_same(a, b);
    ck_assert_int_eq(q_close(b), 0);
    ck_assert_int_eq(q_close(a), 0);
}
END_TEST

START_TEST(test_force_replaces_the_target)
{
    q_db *a = open_at(loc_a), *b = open_at(loc_b);
    struct q_tier_state st;

    copyfix_fill(a);
    copyfix_fill(b);
    qfix_add(b, "extra", NULL, 0, T0);
    ck_assert_int_eq(q_tier_load(b, "x", &st), 0);
    ck_assert_int_eq(q_tier_store(b, "x", &st), 0);
    ck_assert_int_eq(q_copy(a, b, true, NULL), 0);
    copyfix_assert_same(a, b);
    ck_assert_int_eq(q_close(b), 0);
    ck_assert_int_eq(q_close(a), 0);
}
END_TEST

/* The same fault in PostgreSQL, run with psql. */
static const char pg_fault[] =
    "CREATE FUNCTION no_attempts() RETURNS trigger LANGUAGE plpgsql AS"
    " $$BEGIN RAISE EXCEPTION 'injected'; END$$;\n"
    "CREATE TRIGGER no_attempts BEFORE INSERT ON attempts FOR EACH ROW"
    " EXECUTE FUNCTION no_attempts();\n";

/* fail_inserts makes the store at loc refuse every new attempt row: a
 * copy into it fails after its jobs and steps went in. */
static void
fail_inserts(const char *loc)
{
    sqlite3 *h = NULL;
    char cmd[1024], *out = NULL;

    if (strncmp(loc, "sqlite:", 7) != 0) {
        free(tmpdir_write(dir, "fault.sql", pg_fault, strlen(pg_fault)));
        snprintf(cmd, sizeof(cmd),
                 "psql -q -v ON_ERROR_STOP=1 -f fault.sql '%s'", loc);
        ck_assert_int_eq(run_sh(cmd, &out), 0);
        free(out);
        return;
    }
    ck_assert_int_eq(sqlite3_open(loc + 7, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h,
                                  "CREATE TRIGGER no_attempts BEFORE INSERT ON"
                                  " attempts BEGIN SELECT RAISE(ABORT,"
                                  " 'injected'); END",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_close(h), SQLITE_OK);
}

START_TEST(test_failed_copy_leaves_the_target)
{
    const char *to = pgfix_backend_is_pg() ? loc_b : loc_c;
    q_db *a = open_at(loc_a), *c = open_at(to);
    int64_t mine = qfix_add(c, "mine", "k", 0, T0);

    copyfix_fill(a);
    fail_inserts(to);
    ck_assert_int_ne(q_copy(a, c, true, NULL), 0);
    ck_assert_int_eq(qfix_count(c, Q_JOB_QUEUED), 1);
    ck_assert_int_eq(qfix_state(c, mine), Q_JOB_QUEUED);
    ck_assert_int_eq(qfix_count(c, Q_JOB_CANCELLED), 0);
    /* Its ids go on from its own rows, not from the copied ones. */
    ck_assert_int_eq(qfix_add(c, "next", NULL, 0, T0), mine + 1);
    /* The source was only read. */
    ck_assert_int_eq(qfix_count(a, Q_JOB_CANCELLED), 1);
    ck_assert_int_eq(q_close(c), 0);
    ck_assert_int_eq(q_close(a), 0);
}
END_TEST

/* fill_many enqueues n keyed jobs in one call and gives the first n / 4
 * two step rows each, so every table spans many of a backend's pages and
 * batches. */
static void
fill_many(q_db *db, int n)
{
    struct q_job_new *jobs = xcalloc((size_t)n, sizeof(*jobs));
    struct q_enqueue_result *res = xcalloc((size_t)n, sizeof(*res));
    char(*keys)[16] = xcalloc((size_t)n, sizeof(*keys));

    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%d", i);
        jobs[i] = qfix_job("many", keys[i], i % 7);
    }
    ck_assert_int_eq(q_enqueue(db, jobs, (size_t)n, NULL, T0, res), 0);
    ck_assert_int_eq(q_tx_begin(db), 0);
    for (int i = 0; i < n / 4 * 2; i++)
        ck_assert_int_eq(q_step_set(db, res[i / 2].id, NULL, i % 2,
                                    Q_STEP_SUCCEEDED, "free", keys[i], i),
                         0);
    ck_assert_int_eq(q_tx_commit(db), 0);
    free(keys);
    free(res);
    free(jobs);
}

START_TEST(test_copies_many_rows)
{
    q_db *a = open_at(loc_a), *b = open_at(loc_b), *c = open_at(loc_c);
    struct q_copy_counts n = {0};

    fill_many(a, 2600);
    ck_assert_int_eq(q_copy(a, b, false, &n), 0);
    ck_assert_int_eq(n.jobs, 2600);
    ck_assert_int_eq(n.steps, 1300);
    ck_assert_int_eq(q_copy(b, c, false, NULL), 0);
    ck_assert_uint_eq(copyfix_same_jobs(a, c), 2600);
    ck_assert_int_eq(qfix_add(b, "next", NULL, 0, T0), 2601);
    ck_assert_int_eq(q_close(c), 0);
    ck_assert_int_eq(q_close(b), 0);
    ck_assert_int_eq(q_close(a), 0);
}
END_TEST

/* ---- stepq copy ------------------------------------------------------- */

/* fill_at fills the store at loc (created), or with one job only. */
static void
fill_at(const char *loc, bool one)
{
    q_db *db = open_at(loc);

    if (one)
        qfix_add(db, "mine", NULL, 0, T0);
    else
        copyfix_fill(db);
    ck_assert_int_eq(q_close(db), 0);
}

/* assert_copied checks the counts of --json's "copied" for copyfix_fill. */
static void
assert_copied(const cJSON *c)
{
    static const struct {
        const char *name;
        int n;
    } want[] = {{"jobs", 6},        {"steps", 4},   {"attempts", 2},
                {"park", 2},        {"tiers", 1},   {"schedules", 2},
                {"tier_events", 2}, {"budgets", 1}, {"job_retries", 1},
                {"operators", 1},   {"audit", 2},   {"batches", 1},
                {"batch_items", 1}};

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(want); i++) {
        const cJSON *v = cJSON_GetObjectItem(c, want[i].name);
        ck_assert_msg(cJSON_IsNumber(v), "no %s", want[i].name);
        ck_assert_int_eq(v->valueint, want[i].n);
    }
}

/* assert_shown checks how the output names location loc: as given, or
 * for PostgreSQL with the cluster's password masked. */
static void
assert_shown(const char *shown, const char *loc, const char *out)
{
    const char *pw = NULL;
    char secret[128] = "";

    if (strncmp(loc, "sqlite:", 7) == 0) {
        ck_assert_str_eq(shown, loc);
        return;
    }
    pw = strchr(pgfix_url() + strlen("postgresql://"), ':') + 1;
    snprintf(secret, sizeof(secret), "%.*s", (int)strcspn(pw, "@"), pw);
    ck_assert_ptr_nonnull(strstr(shown, ":***@"));
    ck_assert_ptr_null(strstr(out, secret));
}

START_TEST(test_cli_json)
{
    struct run_result r;
    cJSON *o;

    fill_at(loc_a, false);
    ck_assert_int_eq(RUN_ARGS(&r, "copy", loc_a, loc_b, "--json"), 0);
    ck_assert_ptr_nonnull(o = cJSON_Parse(r.out));
    assert_copied(cJSON_GetObjectItem(o, "copied"));
    ck_assert(cJSON_IsString(cJSON_GetObjectItem(o, "from")));
    ck_assert(cJSON_IsString(cJSON_GetObjectItem(o, "to")));
    assert_shown(cJSON_GetObjectItem(o, "from")->valuestring, loc_a, r.out);
    assert_shown(cJSON_GetObjectItem(o, "to")->valuestring, loc_b, r.out);
    cJSON_Delete(o);
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(loc_b), 6);
}
END_TEST

START_TEST(test_cli_refuses_then_forces)
{
    struct run_result r;

    fill_at(loc_a, false);
    fill_at(loc_b, true);
    ck_assert_int_eq(RUN_ARGS(&r, "copy", loc_a, loc_b), 4);
    ck_assert_ptr_nonnull(strstr(r.err, "--force"));
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(loc_b), 1);
    ck_assert_int_eq(RUN_ARGS(&r, "copy", loc_a, loc_b, "--force"), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "jobs"));
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(loc_b), 6);
}
END_TEST

START_TEST(test_cli_errors)
{
    struct run_result r;

    ck_assert_int_eq(RUN_ARGS(&r, "copy", "missing.db", "b.db"), 3);
    ck_assert_ptr_nonnull(strstr(r.err, "missing.db"));
    run_result_free(&r);
    ck_assert(access("missing.db", F_OK) != 0);
    ck_assert_int_eq(RUN_ARGS(&r, "copy", "a.db"), 2);
    run_result_free(&r);
    ck_assert_int_eq(RUN_ARGS(&r, "copy", "a.db", "b.db", "c.db"), 2);
    run_result_free(&r);
    ck_assert_int_eq(RUN_ARGS(&r, "copy", "a.db", "sqlite:a.db"), 2);
    run_result_free(&r);
    fill_at(loc_a, true);
    ck_assert_int_eq(RUN_ARGS(&r, "copy", "a.db", "./a.db", "--force"), 2);
    run_result_free(&r);
    ck_assert_int_eq(RUN_ARGS(&r, "copy", "a.db", "b.db", "--bogus"), 2);
    run_result_free(&r);
}
END_TEST

/* ---- through PostgreSQL (test_copy_pg: loc_b is a fresh schema) ------- */

START_TEST(test_pg_round_trip)
{
    q_db *a = open_at(loc_a), *b = open_at(loc_b), *c = open_at(loc_c);

    copyfix_fill(a);
    ck_assert_int_eq(q_copy(a, b, false, NULL), 0);
    ck_assert_int_eq(q_copy(b, c, false, NULL), 0);
    copyfix_assert_same(a, b);
    copyfix_assert_same(a, c);
    ck_assert_int_eq(qfix_add(b, "next", NULL, 0, T0), 7);
    ck_assert_int_eq(q_copy(a, b, false, NULL), -EEXIST);
    ck_assert_int_eq(q_copy(a, b, true, NULL), 0);
    copyfix_assert_same(a, b);
    ck_assert_int_eq(q_close(c), 0);
    ck_assert_int_eq(q_close(b), 0);
    ck_assert_int_eq(q_close(a), 0);
}
END_TEST

START_TEST(test_pg_to_pg)
{
    char loc_d[1024];
    q_db *a = open_at(loc_a), *b = open_at(loc_b), *d = NULL;

    ck_assert_int_eq(pgfix_location(loc_d, sizeof(loc_d)), 0);
    d = open_at(loc_d);
    copyfix_fill(a);
    ck_assert_int_eq(q_copy(a, b, false, NULL), 0);
    ck_assert_int_eq(q_copy(b, d, false, NULL), 0);
    copyfix_assert_same(a, d);
    ck_assert_int_eq(q_close(d), 0);
    ck_assert_int_eq(q_close(b), 0);
    ck_assert_int_eq(q_close(a), 0);
}
END_TEST

/* The PostgreSQL cases, only in a run with the cluster (test_copy_pg). */
static void
add_pg(Suite *s)
{
    TCase *pg = tcase_create("pg");

    tcase_add_checked_fixture(pg, setup, teardown);
    tcase_set_timeout(pg, 60);
    tcase_add_test(pg, test_pg_round_trip);
    tcase_add_test(pg, test_pg_to_pg);
    suite_add_tcase(s, pg);
}

Suite *
test_suite(void)
{
    Suite *s = suite_create("copy");
    TCase *tc = tcase_create("q_copy");
    TCase *cli = tcase_create("cli");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_checked_fixture(cli, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_set_timeout(cli, 60);
    tcase_add_test(tc, test_copies_every_row);
    tcase_add_test(tc, test_ids_continue_after_the_copied);
    tcase_add_test(tc, test_refuses_a_target_with_rows);
    tcase_add_test(tc, test_refuses_a_target_with_a_schedule);
    tcase_add_test(tc, test_force_replaces_the_target);
    tcase_add_test(tc, test_failed_copy_leaves_the_target);
    tcase_add_test(tc, test_copies_many_rows);
    tcase_add_test(cli, test_cli_json);
    tcase_add_test(cli, test_cli_refuses_then_forces);
    tcase_add_test(cli, test_cli_errors);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, cli);
    if (pgfix_backend_is_pg())
        add_pg(s);
    return s;
}

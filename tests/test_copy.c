/* test_copy.c: q_copy and `stepq copy`: a whole queue (jobs in every
 * state, steps, attempts with bodies, park items open and resolved, tier
 * state and its send log) taken to another store with ids kept, checked
 * row by row through the contract's read calls; new rows continue after
 * the copied ids; a target that is not empty is refused and unchanged,
 * --force replaces it; a copy that fails midway leaves the target as it
 * was. Run with STEPQ_TEST_BACKEND=pg (test_copy_pg), the same goes
 * through PostgreSQL: SQLite -> PostgreSQL -> SQLite.
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
#include "queue/queue.h"
#include "tests/support/pgfix.h"
#include "tests/support/qfix.h"

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

/* ---- a store with something in every table ---------------------------- */

/* attempts records two attempts of job id (held by "w"): one finished
 * with a body, one in flight. */
static void
attempts(q_db *db, int64_t id)
{
    struct q_attempt_start s = {.job_id = id,
                                .worker = "w",
                                .tier = "free",
                                .request_sha256 = "ab12",
                                .est_tokens = 40,
                                .started_at = T0 + 1};
    struct q_attempt_result r = {.status = 429,
                                 .outcome = "rate_limited",
                                 .reason = "rpm",
                                 .decision = "wait",
                                 .delay_ms = 1500,
                                 .latency_ms = 12,
                                 .tokens = 7,
                                 .body =
                                     "{\"error\":\"slow d\xc3\xa9j\xc3\xa0\"}",
                                 .finished_at = T0 + 13};
    int64_t aid = 0;
    int num = 0;

    r.body_len = strlen(r.body);
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid, &num), 0);
    ck_assert_int_eq(q_attempt_finish(db, aid, &r), 0);
    s.started_at = T0 + 20;
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid, &num), 0);
}

/* park parks job id (claimed here) at step 1 and returns the item's id. */
static int64_t
park(q_db *db, int64_t id, const char *reason)
{
    struct q_park_new p = {.job_id = id,
                           .step = 1,
                           .step_name = "post",
                           .reason = reason,
                           .attempts = 2,
                           .request_sha256 = "cd34",
                           .request = "{\"x\":1}",
                           .error = "HTTP 402",
                           .tier = "free",
                           .parked_at = T0 + 5};
    int64_t pid = 0;

    qfix_claim_one(db, id, "w", T0, 60000);
    ck_assert_int_eq(q_park_add(db, &p, &pid), 0);
    ck_assert_int_eq(q_park_job(db, id, "w", T0 + 5), 0);
    return pid;
}

/* tiers stores one tier's state (fractional buckets) and three sends,
 * one of them done. */
static void
tiers(q_db *db)
{
    struct q_tier_state st = {.breaker = Q_BREAKER_HALF_OPEN,
                              .failures = 3,
                              .open_until = T0 + 30000,
                              .exhausted_until = T0 + 86400000,
                              .exhausted_reason = "daily_cap",
                              .limited_until = T0 + 60000,
                              .allowance_used = 12345,
                              .allowance_since = T0 - 1000,
                              .config_hash = "f00d",
                              .req_tat = T0 + 0.125,
                              .tok_tat = T0 + 1234.5678901234,
                              .pace = 0.3333333333333333,
                              .pace_down_at = T0 + 7,
                              .pace_up_at = T0 + 8,
                              .learned_rpm = 60,
                              .learned_tpm = 90000,
                              .doubt = true};
    int64_t a = 0, b = 0;

    ck_assert_int_eq(q_tier_store(db, "free", &st), 0);
    ck_assert_int_eq(q_tier_send_add(db, "free", T0, 100, false, T0 + 9000, &a),
                     0);
    ck_assert_int_eq(
        q_tier_send_add(db, "free", T0 + 1, 50, true, T0 + 9000, &b), 0);
    ck_assert_int_eq(q_tier_send_done(db, a, 80, T0 + 2, NULL), 0);
    ck_assert_int_eq(
        q_tier_send_add(db, "paid", T0 + 3, 9, false, T0 + 9000, &a), 0);
}

/* fill puts jobs in every state into db, with steps, attempts, park items
 * (open and resolved) and tier state. */
static void
fill(q_db *db)
{
    struct q_step_reset rs = {
        .state = Q_STEP_PENDING, .reset_after = 2, .pin_tier = "paid"};
    struct q_park_close pc = {.resolution = "skip", .by = "ann", .now = T0 + 9};
    int64_t id[6];

    for (int i = 0; i < 6; i++)
        id[i] = qfix_add(db, "nightly", i == 0 ? "day-1" : NULL, i, T0);
    /* Claims take the highest priority first: job 5 down to job 0. */
    qfix_claim_one(db, id[5], "w", T0, 60000);
    attempts(db, id[5]); /* stays running, leased to w */
    qfix_claim_one(db, id[4], "w", T0, 60000);
    ck_assert_int_eq(
        q_step_set(db, id[4], 0, Q_STEP_SUCCEEDED, "free", "summary", 321), 0);
    ck_assert_int_eq(q_complete(db, id[4], "w", T0 + 2), 0);
    qfix_claim_one(db, id[3], "w", T0, 60000);
    ck_assert_int_eq(q_fail(db, id[3], "w", "HTTP 400: bad", T0 + 3), 0);
    park(db, id[2], "in_doubt"); /* stays open */
    ck_assert_int_eq(q_park_close(db, park(db, id[1], "side_effects"), &pc), 0);
    ck_assert_int_eq(q_step_reset(db, id[1], 1, &rs), 0);
    ck_assert_int_eq(q_cancel(db, id[0], T0 + 4), 0);
    tiers(db);
}

/* ---- comparing two stores through the contract's reads ---------------- */

#define SAME_STR(a, b, f)                                                      \
    ck_assert_msg(((a)->f == NULL) == ((b)->f == NULL) &&                      \
                      ((a)->f == NULL || strcmp((a)->f, (b)->f) == 0),         \
                  #f " differs")

static void
same_job(const struct q_job *a, const struct q_job *b)
{
    ck_assert_int_eq(a->id, b->id);
    ck_assert_int_eq(a->state, b->state);
    ck_assert_int_eq(a->priority, b->priority);
    ck_assert_int_eq(a->run_at, b->run_at);
    ck_assert_int_eq(a->deadline_at, b->deadline_at);
    ck_assert_int_eq(a->created_at, b->created_at);
    ck_assert_int_eq(a->updated_at, b->updated_at);
    ck_assert_int_eq(a->lease_until, b->lease_until);
    ck_assert_int_eq(a->claims, b->claims);
    SAME_STR(a, b, name);
    SAME_STR(a, b, key);
    SAME_STR(a, b, lease_owner);
    SAME_STR(a, b, spec);
    SAME_STR(a, b, error);
}

static void
same_steps(q_db *x, q_db *y, int64_t job)
{
    struct q_step *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;

    ck_assert_int_eq(q_steps_get(x, job, &a, &na), 0);
    ck_assert_int_eq(q_steps_get(y, job, &b, &nb), 0);
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++) {
        ck_assert_int_eq(a[i].index, b[i].index);
        ck_assert_int_eq(a[i].state, b[i].state);
        ck_assert_int_eq(a[i].attempts, b[i].attempts);
        ck_assert_int_eq(a[i].tokens, b[i].tokens);
        ck_assert_int_eq(a[i].reset_after, b[i].reset_after);
        SAME_STR(&a[i], &b[i], tier);
        SAME_STR(&a[i], &b[i], output);
        SAME_STR(&a[i], &b[i], pin_tier);
    }
    q_steps_free(a, na);
    q_steps_free(b, nb);
}

static void
same_attempt(const struct q_attempt *a, const struct q_attempt *b)
{
    ck_assert_int_eq(a->id, b->id);
    ck_assert_int_eq(a->step, b->step);
    ck_assert_int_eq(a->attempt, b->attempt);
    ck_assert_int_eq(a->started_at, b->started_at);
    ck_assert_int_eq(a->finished_at, b->finished_at);
    ck_assert_int_eq(a->status, b->status);
    ck_assert_int_eq(a->delay_ms, b->delay_ms);
    ck_assert_int_eq(a->latency_ms, b->latency_ms);
    ck_assert_int_eq(a->tokens, b->tokens);
    SAME_STR(a, b, tier);
    SAME_STR(a, b, request_sha256);
    SAME_STR(a, b, outcome);
    SAME_STR(a, b, reason);
    SAME_STR(a, b, decision);
    SAME_STR(a, b, body);
}

static void
same_attempts(q_db *x, q_db *y, int64_t job)
{
    struct q_attempt *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;

    ck_assert_int_eq(q_attempts_list(x, job, -1, &a, &na), 0);
    ck_assert_int_eq(q_attempts_list(y, job, -1, &b, &nb), 0);
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++)
        same_attempt(&a[i], &b[i]);
    q_attempts_free(a, na);
    q_attempts_free(b, nb);
}

/* same_jobs compares every job (q_job_get: with its spec), its steps and
 * its attempts; returns how many jobs there are. */
static size_t
same_jobs(q_db *x, q_db *y)
{
    struct q_job *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;

    ck_assert_int_eq(q_jobs_list(x, -1, 0, &a, &na), 0);
    ck_assert_int_eq(q_jobs_list(y, -1, 0, &b, &nb), 0);
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++) {
        struct q_job ja = {0}, jb = {0};
        ck_assert_int_eq(q_job_get(x, a[i].id, &ja), 0);
        ck_assert_int_eq(q_job_get(y, a[i].id, &jb), 0);
        same_job(&ja, &jb);
        q_job_cleanup(&ja);
        q_job_cleanup(&jb);
        same_steps(x, y, a[i].id);
        same_attempts(x, y, a[i].id);
    }
    q_jobs_free(a, na);
    q_jobs_free(b, nb);
    return na;
}

static void
same_item(const struct q_park_item *a, const struct q_park_item *b)
{
    ck_assert_int_eq(a->id, b->id);
    ck_assert_int_eq(a->job_id, b->job_id);
    ck_assert_int_eq(a->step, b->step);
    ck_assert_int_eq(a->attempts, b->attempts);
    ck_assert_int_eq(a->parked_at, b->parked_at);
    ck_assert_int_eq(a->open, b->open);
    ck_assert_int_eq(a->resolved_at, b->resolved_at);
    SAME_STR(a, b, step_name);
    SAME_STR(a, b, reason);
    SAME_STR(a, b, request_sha256);
    SAME_STR(a, b, request);
    SAME_STR(a, b, error);
    SAME_STR(a, b, tier);
    SAME_STR(a, b, resolution);
    SAME_STR(a, b, resolved_by);
    SAME_STR(a, b, note);
}

static size_t
same_park(q_db *x, q_db *y)
{
    struct q_park_filter f = {.all = true};
    struct q_park_item *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;

    ck_assert_int_eq(q_park_list(x, &f, &a, &na), 0);
    ck_assert_int_eq(q_park_list(y, &f, &b, &nb), 0);
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++)
        same_item(&a[i], &b[i]);
    q_park_items_free(a, na);
    q_park_items_free(b, nb);
    return na;
}

static void
same_tier(q_db *x, q_db *y, const char *tier)
{
    struct q_tier_window w = {
        .window_ms = 60000, .requests = -1, .tokens = true, .inflight = true};
    struct q_tier_state a, b;

    ck_assert_int_eq(q_tier_load(x, tier, T0 + 10, &w, &a), 0);
    ck_assert_int_eq(q_tier_load(y, tier, T0 + 10, &w, &b), 0);
    ck_assert_int_eq(a.breaker, b.breaker);
    ck_assert_int_eq(a.failures, b.failures);
    ck_assert_int_eq(a.open_until, b.open_until);
    ck_assert_int_eq(a.exhausted_until, b.exhausted_until);
    ck_assert_str_eq(a.exhausted_reason, b.exhausted_reason);
    ck_assert_int_eq(a.limited_until, b.limited_until);
    ck_assert_int_eq(a.allowance_used, b.allowance_used);
    ck_assert_int_eq(a.allowance_since, b.allowance_since);
    ck_assert_str_eq(a.config_hash, b.config_hash);
    ck_assert_msg(a.req_tat == b.req_tat && a.tok_tat == b.tok_tat &&
                      a.pace == b.pace,
                  "buckets or pace differ");
    ck_assert_int_eq(a.pace_down_at, b.pace_down_at);
    ck_assert_int_eq(a.pace_up_at, b.pace_up_at);
    ck_assert_int_eq(a.learned_rpm, b.learned_rpm);
    ck_assert_int_eq(a.learned_tpm, b.learned_tpm);
    ck_assert_int_eq(a.doubt, b.doubt);
    ck_assert_int_eq(a.window_requests, b.window_requests);
    ck_assert_int_eq(a.window_tokens, b.window_tokens);
    ck_assert_int_eq(a.window_oldest, b.window_oldest);
    ck_assert_int_eq(a.in_flight, b.in_flight);
    ck_assert_int_eq(a.probe_in_flight, b.probe_in_flight);
}

/* assert_same checks that x and y hold the same rows (and something). */
static void
assert_same(q_db *x, q_db *y)
{
    ck_assert_uint_eq(same_jobs(x, y), 6);
    ck_assert_uint_eq(same_park(x, y), 2);
    same_tier(x, y, "free");
    same_tier(x, y, "paid");
}

/* ---- q_copy ----------------------------------------------------------- */

START_TEST(test_copies_every_row)
{
    q_db *a = open_at(loc_a), *b = open_at(loc_b);
    struct q_copy_counts c = {0};

    fill(a);
    ck_assert_int_eq(q_copy(a, b, false, &c), 0);
    ck_assert_int_eq(c.jobs, 6);
    ck_assert_int_eq(c.steps, 4);
    ck_assert_int_eq(c.attempts, 2);
    ck_assert_int_eq(c.park, 2);
    ck_assert_int_eq(c.tiers, 1);
    ck_assert_int_eq(c.tier_sends, 3);
    assert_same(a, b);
    ck_assert_int_eq(q_close(b), 0);
    ck_assert_int_eq(q_close(a), 0);
}
END_TEST

START_TEST(test_ids_continue_after_the_copied)
{
    q_db *a = open_at(loc_a), *b = open_at(loc_b);
    struct q_park_new p = {.job_id = 6, .step_name = "s", .reason = "r"};
    int64_t id = 0;

    fill(a);
    ck_assert_int_eq(q_copy(a, b, false, NULL), 0);
    ck_assert_int_eq(qfix_add(b, "next", NULL, 0, T0), 7);
    ck_assert_int_eq(q_park_add(b, &p, &id), 0);
    ck_assert_int_eq(id, 3);
    ck_assert_int_eq(q_tier_send_add(b, "free", T0, 1, false, T0, &id), 0);
    ck_assert_int_eq(id, 4);
    ck_assert_int_eq(q_close(b), 0);
    ck_assert_int_eq(q_close(a), 0);
}
END_TEST

START_TEST(test_refuses_a_target_with_rows)
{
    q_db *a = open_at(loc_a), *b = open_at(loc_b), *c = open_at(loc_c);
    struct q_copy_counts n = {.jobs = -1};
    int64_t sid = 0;

    fill(a);
    qfix_add(b, "mine", NULL, 0, T0);
    ck_assert_int_eq(q_copy(a, b, false, &n), -EEXIST);
    ck_assert_int_eq(n.jobs, -1); /* untouched */
    ck_assert_int_eq(qfix_count(b, Q_JOB_QUEUED), 1);
    /* A tier alone makes a store not empty too. */
    ck_assert_int_eq(q_tier_send_add(c, "t", T0, 1, false, T0, &sid), 0);
    ck_assert_int_eq(q_copy(a, c, false, NULL), -EEXIST);
    ck_assert_int_eq(q_copy(a, a, true, NULL), -EINVAL);
    ck_assert_int_eq(q_close(c), 0);
    ck_assert_int_eq(q_close(b), 0);
    ck_assert_int_eq(q_close(a), 0);
}
END_TEST

START_TEST(test_force_replaces_the_target)
{
    q_db *a = open_at(loc_a), *b = open_at(loc_b);

    int64_t sid = 0;

    fill(a);
    fill(b);
    qfix_add(b, "extra", NULL, 0, T0);
    ck_assert_int_eq(q_tier_send_add(b, "x", T0, 1, false, T0, &sid), 0);
    ck_assert_int_eq(q_copy(a, b, true, NULL), 0);
    assert_same(a, b);
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

    fill(a);
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

/* ---- stepq copy ------------------------------------------------------- */

/* fill_at fills the store at loc (created), or with one job only. */
static void
fill_at(const char *loc, bool one)
{
    q_db *db = open_at(loc);

    if (one)
        qfix_add(db, "mine", NULL, 0, T0);
    else
        fill(db);
    ck_assert_int_eq(q_close(db), 0);
}

/* assert_copied checks the counts of --json's "copied" for fill. */
static void
assert_copied(const cJSON *c)
{
    static const struct {
        const char *name;
        int n;
    } want[] = {{"jobs", 6}, {"steps", 4}, {"attempts", 2},
                {"park", 2}, {"tiers", 1}, {"tier_sends", 3}};

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

    fill(a);
    ck_assert_int_eq(q_copy(a, b, false, NULL), 0);
    ck_assert_int_eq(q_copy(b, c, false, NULL), 0);
    assert_same(a, b);
    assert_same(a, c);
    ck_assert_int_eq(qfix_add(b, "next", NULL, 0, T0), 7);
    ck_assert_int_eq(q_copy(a, b, false, NULL), -EEXIST);
    ck_assert_int_eq(q_copy(a, b, true, NULL), 0);
    assert_same(a, b);
    ck_assert_int_eq(q_close(c), 0);
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
    tcase_add_test(tc, test_force_replaces_the_target);
    tcase_add_test(tc, test_failed_copy_leaves_the_target);
    tcase_add_test(cli, test_cli_json);
    tcase_add_test(cli, test_cli_refuses_then_forces);
    tcase_add_test(cli, test_cli_errors);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, cli);
    if (pgfix_backend_is_pg())
        add_pg(s);
    return s;
}

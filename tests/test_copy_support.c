/* test_copy_support.c: a store with something in every table, and two
 * stores compared row by row through the contract's read calls (see
 * test_copy_support.h). */
#include "tests/test_copy_support.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "queue/audit.h"
#include "queue/batch.h"
#include "queue/park.h"
#include "queue/report.h"
#include "queue/sched.h"
#include "queue/tiers.h"
#include "tests/support/qfix.h"

/* ---- a store with something in every table ---------------------------- */

/* attempts records two attempts of job id (held by "w"): one finished
 * with a body, one in flight, whose id it returns. */
static int64_t
attempts(q_db *db, int64_t id)
{
    struct q_attempt_start s = {.job_id = id,
                                .worker = "w",
                                .tier = "free",
                                .request_sha256 = "ab12",
                                .est_tokens = 40,
                                .started_at = T0 + 1,
                                .route = "local: rpm (spill: now)"};
    struct q_attempt_result r = {.status = 429,
                                 .outcome = "rate_limited",
                                 .reason = "rpm",
                                 .decision = "wait",
                                 .delay_ms = 1500,
                                 .latency_ms = 12,
                                 .tokens = 7,
                                 .body =
                                     "{\"error\":\"slow d\xc3\xa9j\xc3\xa0\"}",
                                 .finished_at = T0 + 13,
                                 .masked = true,
                                 .priced = true,
                                 .cost_estimated = true,
                                 .cost_nusd = 1234567};
    int64_t aid = 0;
    int num = 0;

    r.body_len = strlen(r.body);
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid, &num), 0);
    ck_assert_int_eq(q_attempt_finish(db, aid, &r), 0);
    s.started_at = T0 + 20;
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid, &num), 0);
    return aid;
}

/* batch records a batch of tier "free" known to the provider, with
 * attempt aid of job id as its item (settled at a realtime price). */
static void
batch(q_db *db, int64_t id, int64_t aid)
{
    struct q_batch_set bs = {.worker = "w",
                             .lease_until = T0 + 90000,
                             .state = Q_BATCH_SUBMITTED,
                             .provider_id = "batch_abc123",
                             .now = T0 + 21};
    int64_t bid = 0;

    ck_assert_int_eq(q_batch_create(db, "free", "openai", "stepq-free-1", "w",
                                    T0 + 60000, T0 + 20, &bid),
                     0);
    ck_assert_int_eq(q_batch_item_add(db, bid, aid, id, 0), 0);
    ck_assert_int_eq(q_batch_item_settle(db, aid, 4321), 0);
    ck_assert_int_eq(q_batch_set(db, bid, &bs), 0);
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

/* tiers stores one tier's state (fractional buckets, a minute's usage,
 * sends in flight with a probe) and events of it and of a tier with no
 * state. */
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
                              .doubt = true,
                              .usage = {.last_s = T0 / 1000,
                                        .requests = {[0] = 4, [59] = 1},
                                        .tokens = {[0] = 4096, [7] = 3}},
                              .flight = {.n = 2,
                                         .probe_until = T0 + 9000,
                                         .at = {T0 / 1000 + 9, T0 / 1000 + 40},
                                         .count = {2, 1}}};

    ck_assert_int_eq(q_tier_store(db, "free", &st), 0);
    ck_assert_int_eq(q_tier_event_add(db, "free", T0 + 5, "breaker_open"), 0);
    ck_assert_int_eq(q_tier_event_add(db, "paid", T0 + 6, "breaker_open"), 0);
}

/* schedules notes schedule "nightly" (a slot fired as job job) and
 * pauses "weekly". */
static void
schedules(q_db *db, int64_t job)
{
    ck_assert_int_eq(
        q_sched_note(db, "nightly", T0 + 60000, T0 + 60000, job, T0 + 61000),
        0);
    ck_assert_int_eq(q_sched_note(db, "nightly", T0 + 90000, 0, 0, T0 + 62000),
                     0);
    ck_assert_int_eq(q_sched_pause(db, "weekly", true, T0 + 63000), 0);
    /* a budget's day: one send settled, one still reserved */
    ck_assert_int_eq(q_budget_reserve(db, "paid", "2026-12-06T00:00:00Z",
                                      1000000, 300, T0 + 64000),
                     0);
    ck_assert_int_eq(q_budget_reserve(db, "paid", "2026-12-06T00:00:00Z",
                                      1000000, 200, T0 + 64000),
                     0);
    ck_assert_int_eq(q_budget_settle(db, "paid", "2026-12-06T00:00:00Z", 300,
                                     120, T0 + 65000),
                     0);
}

/* operators adds operator "ann" and two audit rows, one of a job. */
static void
operators(q_db *db, int64_t job)
{
    struct q_audit_new a = {.at = T0 + 70000,
                            .who = "ann",
                            .action = "job.cancel",
                            .job_id = job,
                            .source = "127.0.0.1",
                            .detail = "{}"};

    ck_assert_int_eq(
        q_operator_add(db, "ann", "resolver", "aa00ff", T0 + 66000), 0);
    ck_assert_int_eq(q_audit_add(db, &a), 0);
    a.action = "operator.add";
    a.job_id = 0;
    a.source = "cli";
    a.detail = "{\"name\":\"ann\"}";
    ck_assert_int_eq(q_audit_add(db, &a), 0);
}

/* retried_and_failed_again retries failed job id (`jobs retry`) and
 * fails it again: a retry row, the job still failed. */
static void
retried_and_failed_again(q_db *db, int64_t id)
{
    struct q_retry_new rn = {.job_id = id,
                             .expect = Q_JOB_FAILED,
                             .by = "ann",
                             .now = T0 + 3,
                             .run_at = T0 + 3,
                             .deadline_at = T0 + 7200000};
    int64_t rid = 0;

    ck_assert_int_eq(q_job_retry(db, &rn, &rid), 0);
    qfix_claim_one(db, id, "w", T0 + 3, 60000);
    ck_assert_int_eq(q_fail(db, id, "w", "HTTP 400: bad again", T0 + 4), 0);
}

/* copyfix_fill puts jobs in every state into db, with steps, attempts, park
 * items (open and resolved), tier state and events, schedule state, an
 * operator and audit rows, a batch with its item. */
void
copyfix_fill(q_db *db)
{
    struct q_step_reset rs = {
        .state = Q_STEP_PENDING, .reset_after = 2, .pin_tier = "paid"};
    struct q_park_close pc = {.resolution = "skip", .by = "ann", .now = T0 + 9};
    int64_t id[6];

    for (int i = 0; i < 6; i++) {
        struct q_job_new j = qfix_job("nightly", i == 0 ? "day-1" : NULL, i);
        struct q_enqueue_result r;
        j.input = i % 2 ? "{\"issue\":7}" : NULL; /* copied with the job */
        ck_assert_int_eq(q_enqueue(db, &j, 1, NULL, T0, &r), 0);
        id[i] = r.id;
    }
    /* Claims take the highest priority first: job 5 down to job 0. */
    qfix_claim_one(db, id[5], "w", T0, 60000);
    batch(db, id[5], attempts(db, id[5])); /* stays running, leased to w */
    qfix_claim_one(db, id[4], "w", T0, 60000);
    ck_assert_int_eq(q_step_set(db, id[4], NULL, 0, Q_STEP_SUCCEEDED, "free",
                                "summary", 321),
                     0);
    ck_assert_int_eq(q_complete(db, id[4], "w", T0 + 2), 0);
    qfix_claim_one(db, id[3], "w", T0, 60000);
    ck_assert_int_eq(q_fail(db, id[3], "w", "HTTP 400: bad", T0 + 3), 0);
    retried_and_failed_again(db, id[3]);
    park(db, id[2], "in_doubt"); /* stays open */
    ck_assert_int_eq(q_park_close(db, park(db, id[1], "side_effects"), &pc), 0);
    ck_assert_int_eq(q_step_reset(db, id[1], 1, &rs), 0);
    ck_assert_int_eq(q_cancel(db, id[0], T0 + 4), 0);
    tiers(db);
    schedules(db, id[4]);
    operators(db, id[0]);
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
    SAME_STR(a, b, input);
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
    ck_assert_int_eq(a->masked, b->masked);
    ck_assert_int_eq(a->priced, b->priced);
    ck_assert_int_eq(a->cost_estimated, b->cost_estimated);
    ck_assert_int_eq(a->cost_nusd, b->cost_nusd);
    SAME_STR(a, b, tier);
    SAME_STR(a, b, request_sha256);
    SAME_STR(a, b, outcome);
    SAME_STR(a, b, reason);
    SAME_STR(a, b, decision);
    SAME_STR(a, b, body);
    SAME_STR(a, b, route);
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

/* copyfix_same_jobs compares every job (q_job_get: with its spec), its steps
 * and its attempts; returns how many jobs there are. */
size_t
copyfix_same_jobs(q_db *x, q_db *y)
{
    struct q_job *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;

    ck_assert_int_eq(q_jobs_list(x, -1, 0, 0, &a, &na), 0);
    ck_assert_int_eq(q_jobs_list(y, -1, 0, 0, &b, &nb), 0);
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
    struct q_tier_state a, b;

    ck_assert_int_eq(q_tier_load(x, tier, &a), 0);
    ck_assert_int_eq(q_tier_load(y, tier, &b), 0);
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
    ck_assert_mem_eq(&a.usage, &b.usage, sizeof(a.usage));
    qfix_same_flight(&a.flight, &b.flight);
}

static size_t
same_scheds(q_db *x, q_db *y)
{
    struct q_sched *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;

    ck_assert_int_eq(q_sched_list(x, &a, &na), 0);
    ck_assert_int_eq(q_sched_list(y, &b, &nb), 0);
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++) {
        SAME_STR(&a[i], &b[i], name);
        ck_assert_int_eq(a[i].paused, b[i].paused);
        ck_assert_int_eq(a[i].since, b[i].since);
        ck_assert_int_eq(a[i].done_until, b[i].done_until);
        ck_assert_int_eq(a[i].last_slot, b[i].last_slot);
        ck_assert_int_eq(a[i].last_job_id, b[i].last_job_id);
        ck_assert_int_eq(a[i].updated_at, b[i].updated_at);
    }
    q_scheds_free(a, na);
    q_scheds_free(b, nb);
    return na;
}

static size_t
same_budgets(q_db *x, q_db *y)
{
    struct q_budget *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;

    ck_assert_int_eq(q_budgets_list(x, 0, &a, &na), 0);
    ck_assert_int_eq(q_budgets_list(y, 0, &b, &nb), 0);
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++) {
        SAME_STR(&a[i], &b[i], name);
        SAME_STR(&a[i], &b[i], window);
        ck_assert_int_eq(a[i].spent_nusd, b[i].spent_nusd);
        ck_assert_int_eq(a[i].reserved_nusd, b[i].reserved_nusd);
        ck_assert_int_eq(a[i].updated_at, b[i].updated_at);
    }
    q_budgets_free(a, na);
    q_budgets_free(b, nb);
    return na;
}

/* same_operators compares the operators and the audit trail of x and y;
 * returns how many audit rows they hold. */
static size_t
same_operators(q_db *x, q_db *y)
{
    struct q_operator *a = NULL, *b = NULL;
    struct q_audit *u = NULL, *v = NULL;
    struct q_audit_filter f = {0};
    size_t na = 0, nb = 0, nu = 0, nv = 0;

    ck_assert_int_eq(q_operators_list(x, &a, &na), 0);
    ck_assert_int_eq(q_operators_list(y, &b, &nb), 0);
    ck_assert_uint_eq(na, 1);
    ck_assert_uint_eq(na, nb);
    SAME_STR(&a[0], &b[0], name);
    SAME_STR(&a[0], &b[0], role);
    SAME_STR(&a[0], &b[0], token_sha256);
    ck_assert_int_eq(a[0].rotated_at, b[0].rotated_at);
    q_operators_free(a, na);
    q_operators_free(b, nb);
    ck_assert_int_eq(q_audit_list(x, &f, &u, &nu), 0);
    ck_assert_int_eq(q_audit_list(y, &f, &v, &nv), 0);
    ck_assert_uint_eq(nu, nv);
    for (size_t i = 0; i < nu; i++) {
        ck_assert_int_eq(u[i].id, v[i].id);
        ck_assert_int_eq(u[i].at, v[i].at);
        ck_assert_int_eq(u[i].job_id, v[i].job_id);
        ck_assert_int_eq(u[i].park_id, v[i].park_id);
        SAME_STR(&u[i], &v[i], who);
        SAME_STR(&u[i], &v[i], action);
        SAME_STR(&u[i], &v[i], source);
        SAME_STR(&u[i], &v[i], detail);
    }
    q_audits_free(u, nu);
    q_audits_free(v, nv);
    return nu;
}

/* same_openings compares the breaker openings each store reports since
 * since, by tier; returns their sum. */
static int64_t
same_openings(q_db *x, q_db *y, int64_t since)
{
    struct q_report_tier *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int64_t sum = 0;

    ck_assert_int_eq(q_report_tiers(x, since, &a, &na), 0);
    ck_assert_int_eq(q_report_tiers(y, since, &b, &nb), 0);
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++) {
        SAME_STR(&a[i], &b[i], tier);
        ck_assert_int_eq(a[i].breaker_opened, b[i].breaker_opened);
        sum += a[i].breaker_opened;
    }
    q_report_tiers_free(a, na);
    q_report_tiers_free(b, nb);
    return sum;
}

/* same_retries compares the retries of every job; returns how many. */
static size_t
same_retries(q_db *x, q_db *y)
{
    size_t sum = 0;

    for (int64_t id = 1; id <= 6; id++) {
        struct q_retry *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        ck_assert_int_eq(q_retries_list(x, id, &a, &na), 0);
        ck_assert_int_eq(q_retries_list(y, id, &b, &nb), 0);
        ck_assert_uint_eq(na, nb);
        for (size_t i = 0; i < na; i++) {
            ck_assert_int_eq(a[i].id, b[i].id);
            ck_assert_int_eq(a[i].from, b[i].from);
            ck_assert_int_eq(a[i].at, b[i].at);
            ck_assert_int_eq(a[i].prior_state, b[i].prior_state);
            SAME_STR(&a[i], &b[i], by);
            SAME_STR(&a[i], &b[i], prior_error);
        }
        sum += na;
        q_retries_free(a, na);
        q_retries_free(b, nb);
    }
    return sum;
}

/* same_batches compares tier "free"'s open batches and their items, and
 * returns how many items. */
static size_t
same_batches(q_db *x, q_db *y)
{
    struct q_batch *a = NULL, *b = NULL;
    size_t na = 0, nb = 0, sum = 0;

    ck_assert_int_eq(q_batches_open(x, "free", &a, &na), 0);
    ck_assert_int_eq(q_batches_open(y, "free", &b, &nb), 0);
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++) {
        struct q_batch_item *ia = NULL, *ib = NULL;
        size_t ma = 0, mb = 0;
        ck_assert_int_eq(a[i].id, b[i].id);
        ck_assert_int_eq(a[i].state, b[i].state);
        ck_assert_int_eq(a[i].items, b[i].items);
        ck_assert_int_eq(a[i].lease_until, b[i].lease_until);
        ck_assert_int_eq(a[i].updated_at, b[i].updated_at);
        SAME_STR(&a[i], &b[i], api);
        SAME_STR(&a[i], &b[i], key);
        SAME_STR(&a[i], &b[i], provider_id);
        SAME_STR(&a[i], &b[i], worker);
        ck_assert_int_eq(q_batch_items(x, a[i].id, &ia, &ma), 0);
        ck_assert_int_eq(q_batch_items(y, b[i].id, &ib, &mb), 0);
        ck_assert_uint_eq(ma, mb);
        for (size_t k = 0; k < ma; k++) {
            ck_assert_int_eq(ia[k].attempt_id, ib[k].attempt_id);
            ck_assert_int_eq(ia[k].job_id, ib[k].job_id);
            ck_assert_int_eq(ia[k].step, ib[k].step);
            ck_assert(ia[k].finished == ib[k].finished);
        }
        sum += ma;
        free(ia);
        free(ib);
    }
    q_batches_free(a, na);
    q_batches_free(b, nb);
    return sum;
}

/* copyfix_assert_same checks that x and y hold the same rows (and something).
 */
void
copyfix_assert_same(q_db *x, q_db *y)
{
    ck_assert_uint_eq(copyfix_same_jobs(x, y), 6);
    ck_assert_uint_eq(same_park(x, y), 2);
    same_tier(x, y, "free");
    same_tier(x, y, "paid");
    ck_assert_uint_eq(same_scheds(x, y), 2);
    ck_assert_uint_eq(same_budgets(x, y), 1);
    ck_assert_uint_eq(same_retries(x, y), 1);
    ck_assert_uint_eq(same_operators(x, y), 2);
    ck_assert_uint_eq(same_batches(x, y), 1);
    ck_assert_int_eq(same_openings(x, y, 0), 2);
    ck_assert_int_eq(same_openings(x, y, T0 + 6), 1);
}

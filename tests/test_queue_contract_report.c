/* test_queue_contract_report.c: the storage contract (queue/queue.h) of
 * the morning report: jobs created since a time by state, attempts by
 * tier (tokens, outcomes, in flight, breaker openings; a NULL tier last,
 * names bytewise),
 * failures by outcome and reason with the latest attempt as the example,
 * the slowest jobs that ended, the jobs that cost most, and a job read by
 * its key. The data is made
 * through the contract only, at times before and after since, so every
 * backend must pass it (tests/support/qfix.h says where the store is). */
#include "tests/support/support.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "queue/queue.h"
#include "queue/report.h"
#include "queue/tiers.h"
#include "tests/support/qfix.h"

#define SINCE  T0
#define BEFORE (T0 - 1000)

/* job makes a job at now and leases it to worker "w" (at now, for an
 * hour), so that attempts can be recorded for it. */
static int64_t
job(q_db *db, const char *name, int64_t now)
{
    int64_t id = qfix_add(db, name, NULL, 0, now);

    qfix_claim_one(db, id, "w", now, 3600000);
    return id;
}

/* begin records an attempt of step of job id on tier (NULL: an http step)
 * that estimated est tokens, started at at; returns its ledger id. */
static int64_t
begin(q_db *db, int64_t id, int step, const char *tier, int64_t est, int64_t at)
{
    struct q_attempt_start s = {id, step, "w",  tier, "abc", est,
                                at, NULL, NULL, NULL, NULL,  NULL};
    int64_t aid = 0;
    int num = 0;

    ck_assert_int_eq(q_attempt_begin(db, &s, &aid, &num), 0);
    ck_assert_int_gt(aid, 0);
    return aid;
}

/* finish stores the result of attempt aid (body NULL: none). */
static void
finish(q_db *db, int64_t aid, int status, const char *outcome,
       const char *reason, int64_t tokens, const char *body)
{
    struct q_attempt_result r = {
        .status = status,
        .outcome = outcome,
        .reason = reason,
        .decision = "commit",
        .latency_ms = 10,
        .tokens = tokens,
        .body = body,
        .body_len = body ? strlen(body) : 0,
        .finished_at = SINCE + 10,
    };

    ck_assert_int_eq(q_attempt_finish(db, aid, &r), 0);
}

/* attempt records a finished attempt in one go; returns its ledger id. */
static int64_t
attempt(q_db *db, int64_t id, const char *tier, int64_t at, int status,
        const char *outcome, const char *reason, int64_t tokens)
{
    int64_t aid = begin(db, id, 0, tier, 100, at);

    finish(db, aid, status, outcome, reason, tokens, NULL);
    return aid;
}

/* priced records a finished attempt of job id on tier at at that cost
 * nusd nano-dollars; returns its ledger id. */
static int64_t
priced(q_db *db, int64_t id, const char *tier, int64_t at, int64_t tokens,
       int64_t nusd)
{
    int64_t aid = begin(db, id, 0, tier, 100, at);
    struct q_attempt_result r = {.status = 200,
                                 .outcome = "ok",
                                 .decision = "commit",
                                 .tokens = tokens,
                                 .finished_at = at + 1,
                                 .priced = true,
                                 .cost_estimated = nusd % 2 == 1,
                                 .cost_nusd = nusd};

    ck_assert_int_eq(q_attempt_finish(db, aid, &r), 0);
    return aid;
}

/* ---- jobs by state ---------------------------------------------------- */

START_TEST(test_jobs_created_since_by_state)
{
    q_db *db = qfix_open(NULL);
    int64_t c[Q_JOB_NSTATES];
    int64_t old = qfix_add(db, "old", NULL, 0, BEFORE);

    qfix_claim_one(db, old, "w", BEFORE, 3600000);
    ck_assert_int_eq(q_complete(db, old, "w", SINCE + 5), 0); /* not new */
    /* Made at since: counts. */
    ck_assert_int_eq(q_complete(db, job(db, "ok", SINCE), "w", SINCE + 2), 0);
    ck_assert_int_eq(q_fail(db, job(db, "bad", SINCE + 3), "w", "x", SINCE + 4),
                     0);
    job(db, "running", SINCE + 5);
    qfix_add(db, "queued", NULL, 0, SINCE + 6);
    ck_assert_int_eq(q_cancel(db, qfix_add(db, "c", NULL, 0, SINCE + 6), T0),
                     0);
    for (int i = 0; i < Q_JOB_NSTATES; i++)
        c[i] = -1;
    ck_assert_int_eq(q_report_jobs(db, SINCE, c), 0);
    ck_assert_int_eq(c[Q_JOB_QUEUED], 1);
    ck_assert_int_eq(c[Q_JOB_RUNNING], 1);
    ck_assert_int_eq(c[Q_JOB_SUCCEEDED], 1);
    ck_assert_int_eq(c[Q_JOB_FAILED], 1);
    ck_assert_int_eq(c[Q_JOB_PARKED], 0);
    ck_assert_int_eq(c[Q_JOB_CANCELLED], 1);
    ck_assert_int_eq(q_report_jobs(db, SINCE + 7, c), 0);
    for (int i = 0; i < Q_JOB_NSTATES; i++)
        ck_assert_int_eq(c[i], 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- attempts by tier ------------------------------------------------- */

/* The outcome names in the order of struct q_report_tier's counts. */
static const char *const outcomes[] = {
    "ok",      "soft_throttle", "hard_quota", "truncated", "schema_invalid",
    "refused", "server_error",  "timeout",    "unknown"};
#define NOUTCOMES (sizeof(outcomes) / sizeof(outcomes[0]))

START_TEST(test_tiers_count_each_outcome)
{
    q_db *db = qfix_open(NULL);
    int64_t id = job(db, "a", BEFORE);
    struct q_report_tier *t = NULL;
    size_t n = 0;

    /* Outcome i happens i + 1 times, so a column read in the wrong place
     * shows. */
    for (size_t i = 0; i < NOUTCOMES; i++)
        for (size_t k = 0; k <= i; k++)
            attempt(db, id, "t", SINCE, 200, outcomes[i], NULL, 1);
    begin(db, id, 1, "t", 7, SINCE); /* in flight */
    ck_assert_int_eq(q_report_tiers(db, SINCE, &t, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(t[0].tier, "t");
    ck_assert_int_eq(t[0].requests, 46);
    ck_assert_int_eq(t[0].tokens, 45 + 7); /* reported, else estimated */
    int64_t got[] = {t[0].ok,           t[0].soft_throttle,  t[0].hard_quota,
                     t[0].truncated,    t[0].schema_invalid, t[0].refused,
                     t[0].server_error, t[0].timeout,        t[0].unknown};
    for (size_t i = 0; i < NOUTCOMES; i++)
        ck_assert_int_eq(got[i], (int64_t)i + 1);
    ck_assert_int_eq(t[0].in_flight, 1);
    ck_assert_int_eq(t[0].breaker_opened, 0);
    q_report_tiers_free(t, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_tiers_since_by_name_null_last)
{
    q_db *db = qfix_open(NULL);
    int64_t id = job(db, "a", BEFORE);
    struct q_report_tier *t = NULL;
    size_t n = 0;

    attempt(db, id, "fast", BEFORE, 200, "ok", NULL, 999); /* before */
    attempt(db, id, NULL, SINCE, 500, "server_error", "http_500", 0);
    attempt(db, id, "fast", SINCE, 200, "ok", NULL, 10);
    attempt(db, id, "big", SINCE + 1, 429, "hard_quota", "daily_cap", 5);
    attempt(db, id, "Zed", SINCE + 2, 200, "ok", NULL, 3);
    begin(db, id, 1, "fast", 50, SINCE + 3); /* in flight: its estimate */
    ck_assert_int_eq(q_report_tiers(db, SINCE, &t, &n), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(t[0].tier, "Zed"); /* bytewise: 'Z' < 'b' */
    ck_assert_str_eq(t[1].tier, "big");
    ck_assert_int_eq(t[1].hard_quota, 1);
    ck_assert_str_eq(t[2].tier, "fast");
    ck_assert_int_eq(t[2].requests, 2);
    ck_assert_int_eq(t[2].tokens, 60);
    ck_assert_int_eq(t[2].ok, 1);
    ck_assert_int_eq(t[2].in_flight, 1);
    ck_assert_ptr_null(t[3].tier); /* http steps last */
    ck_assert_int_eq(t[3].server_error, 1);
    ck_assert_int_eq(t[3].tokens, 0);
    q_report_tiers_free(t, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A tier's cost is the sum of its priced attempts since (exact, in
 * nano-dollars); attempts without a price count as requests only. */
START_TEST(test_tiers_sum_costs_of_priced_attempts)
{
    q_db *db = qfix_open(NULL);
    int64_t id = job(db, "a", BEFORE);
    struct q_report_tier *t = NULL;
    size_t n = 0;

    priced(db, id, "paid", BEFORE, 5, 1000000000); /* before since */
    priced(db, id, "paid", SINCE, 10, 150);
    priced(db, id, "paid", SINCE + 1, 20, INT64_C(3000000000001));
    priced(db, id, "free", SINCE, 30, 0);
    attempt(db, id, "paid", SINCE, 200, "ok", NULL, 7); /* no price */
    ck_assert_int_eq(q_report_tiers(db, SINCE, &t, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(t[0].tier, "free");
    ck_assert_int_eq(t[0].priced, 1);
    ck_assert_int_eq(t[0].cost_nusd, 0);
    ck_assert_str_eq(t[1].tier, "paid");
    ck_assert_int_eq(t[1].requests, 3);
    ck_assert_int_eq(t[1].priced, 2);
    ck_assert_int_eq(t[1].cost_nusd, INT64_C(3000000000151));
    q_report_tiers_free(t, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* The jobs with a cost since, the most costly first, then by id; jobs
 * without a priced attempt are not listed. */
START_TEST(test_costliest_jobs_by_cost)
{
    q_db *db = qfix_open(NULL);
    int64_t a = job(db, "a", BEFORE), b = job(db, "b", BEFORE),
            c = job(db, "c", BEFORE), d = job(db, "d", BEFORE);
    struct q_report_job *j = NULL;
    size_t n = 0;

    priced(db, a, "paid", SINCE, 10, 300);
    attempt(db, a, "free", SINCE, 200, "ok", NULL, 5);
    priced(db, b, "paid", SINCE, 10, 100);
    priced(db, b, "paid", SINCE + 1, 10, 400);
    priced(db, c, "paid", SINCE, 1, 300);
    priced(db, d, "paid", BEFORE, 1, 9999); /* before since */
    attempt(db, d, "free", SINCE, 200, "ok", NULL, 5);
    ck_assert_int_eq(q_report_costliest(db, SINCE, 0, &j, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(j[0].id, b);
    ck_assert_str_eq(j[0].name, "b");
    ck_assert_int_eq(j[0].cost_nusd, 500);
    ck_assert_int_eq(j[0].tokens, 20);
    ck_assert_int_eq(j[1].id, a); /* 300, then by id */
    ck_assert_int_eq(j[1].tokens, 15);
    ck_assert_ptr_null(j[1].key);
    ck_assert_int_eq(j[2].id, c);
    q_report_jobs_free(j, n);
    ck_assert_int_eq(q_report_costliest(db, SINCE, 1, &j, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(j[0].id, b);
    q_report_jobs_free(j, n);
    /* a job's whole cost, whenever its attempts ran (max_cost_usd) */
    int64_t nusd = -1;
    ck_assert_int_eq(q_job_cost(db, b, &nusd), 0);
    ck_assert_int_eq(nusd, 500);
    ck_assert_int_eq(q_job_cost(db, d, &nusd), 0);
    ck_assert_int_eq(nusd, 9999);
    ck_assert_int_eq(q_job_cost(db, 999, &nusd), 0);
    ck_assert_int_eq(nusd, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Openings at or after since count, others and other events do not, one
 * rolled back with its transaction neither; a tier with openings and no
 * attempt is listed with requests 0. */
START_TEST(test_tiers_count_breaker_openings_since)
{
    q_db *db = qfix_open(NULL);
    int64_t id = job(db, "a", BEFORE);
    struct q_report_tier *t = NULL;
    size_t n = 0;

    attempt(db, id, "fast", SINCE, 200, "ok", NULL, 10);
    ck_assert_int_eq(q_tier_event_add(db, "fast", BEFORE, "breaker_open"), 0);
    ck_assert_int_eq(q_tier_event_add(db, "old", BEFORE, "breaker_open"), 0);
    ck_assert_int_eq(q_tier_event_add(db, "fast", SINCE, "breaker_open"), 0);
    ck_assert_int_eq(q_tier_event_add(db, "quiet", SINCE, "other"), 0);
    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_tier_event_add(db, "fast", SINCE + 5, "breaker_open"),
                     0);
    ck_assert_int_eq(q_tier_event_add(db, "quiet", SINCE + 1, "breaker_open"),
                     0);
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_tier_event_add(db, "fast", SINCE, "breaker_open"), 0);
    q_tx_rollback(db);
    ck_assert_int_eq(q_tier_event_add(db, NULL, SINCE, "breaker_open"),
                     -EINVAL);
    ck_assert_int_eq(q_report_tiers(db, SINCE, &t, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(t[0].tier, "fast");
    ck_assert_int_eq(t[0].requests, 1);
    ck_assert_int_eq(t[0].ok, 1);
    ck_assert_int_eq(t[0].breaker_opened, 2);
    ck_assert_str_eq(t[1].tier, "quiet");
    ck_assert_int_eq(t[1].requests, 0);
    ck_assert_int_eq(t[1].tokens, 0);
    ck_assert_int_eq(t[1].breaker_opened, 1);
    q_report_tiers_free(t, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- failures ---------------------------------------------------------- */

/* The ledger of test_failures_*: before since, one failure and one ok;
 * after, server_error/http_500 3 times (the latest on job b, step 2, with
 * a body), hard_quota with and without a reason twice each, timeout with
 * none twice, an ok and one in flight. Returns job b. */
static int64_t
failures(q_db *db)
{
    int64_t a = job(db, "a", BEFORE), b = job(db, "b", BEFORE), aid;

    attempt(db, a, "t", BEFORE, 500, "server_error", "http_500", 0);
    attempt(db, a, "t", BEFORE, 200, "ok", NULL, 0);
    attempt(db, a, "t", SINCE, 500, "server_error", "http_500", 0);
    for (int i = 0; i < 2; i++) {
        attempt(db, a, "t", SINCE, 0, "timeout", NULL, 0);
        attempt(db, b, "t", SINCE, 429, "hard_quota", "daily_cap", 0);
        attempt(db, a, NULL, SINCE, 429, "hard_quota", NULL, 0);
        attempt(db, a, "t", SINCE, 500, "server_error", "http_500", 0);
    }
    attempt(db, a, "t", SINCE, 200, "ok", NULL, 0);
    begin(db, b, 2, "t", 1, SINCE); /* a first attempt in flight */
    begin(db, b, 2, "t", 1, SINCE);
    aid = begin(db, b, 2, "big", 1, SINCE + 1);
    finish(db, aid, 503, "server_error", "http_500", 0, "down");
    begin(db, b, 0, "t", 1, SINCE + 2); /* in flight: not a failure */
    return b;
}

START_TEST(test_failures_by_count_then_outcome_and_reason)
{
    q_db *db = qfix_open(NULL);
    struct q_report_failure *f = NULL;
    size_t n = 0;

    failures(db);
    ck_assert_int_eq(q_report_failures(db, SINCE, 0, &f, &n), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(f[0].outcome, "server_error");
    ck_assert_str_eq(f[0].reason, "http_500");
    ck_assert_int_eq(f[0].count, 4); /* not the one before since */
    /* Equal counts: by outcome, then reason with NULL first. */
    ck_assert_str_eq(f[1].outcome, "hard_quota");
    ck_assert_ptr_null(f[1].reason);
    ck_assert_int_eq(f[1].count, 2);
    ck_assert_str_eq(f[2].outcome, "hard_quota");
    ck_assert_str_eq(f[2].reason, "daily_cap");
    ck_assert_int_eq(f[2].count, 2);
    ck_assert_str_eq(f[3].outcome, "timeout");
    ck_assert_int_eq(f[3].count, 2);
    q_report_failures_free(f, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_failure_example_is_the_latest_attempt)
{
    q_db *db = qfix_open(NULL);
    int64_t b = failures(db);
    struct q_report_failure *f = NULL;
    size_t n = 0;

    ck_assert_int_eq(q_report_failures(db, SINCE, 0, &f, &n), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(f[0].job_id, b);
    ck_assert_int_eq(f[0].step, 2);
    ck_assert_int_eq(f[0].attempt, 3);
    ck_assert_int_eq(f[0].status, 503);
    ck_assert_str_eq(f[0].tier, "big");
    ck_assert_str_eq(f[0].body, "down");
    ck_assert_ptr_null(f[1].tier); /* an http step's */
    ck_assert_int_eq(f[2].job_id, b);
    ck_assert_int_eq(f[3].status, 0); /* a transport error */
    ck_assert_ptr_null(f[3].body);
    q_report_failures_free(f, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_failures_limit_keeps_the_largest)
{
    q_db *db = qfix_open(NULL);
    struct q_report_failure *f = NULL;
    size_t n = 0;

    failures(db);
    ck_assert_int_eq(q_report_failures(db, SINCE, 2, &f, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(f[0].outcome, "server_error");
    ck_assert_str_eq(f[1].outcome, "hard_quota");
    ck_assert_ptr_null(f[1].reason);
    q_report_failures_free(f, n);
    ck_assert_int_eq(q_report_failures(db, SINCE + 2, 0, &f, &n), 0);
    ck_assert_uint_eq(n, 0); /* only the one in flight is that late */
    ck_assert_ptr_null(f);
    q_report_failures_free(f, n);
    q_report_failures_free(NULL, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- slowest jobs and jobs by key -------------------------------------- */

/* The jobs of test_slowest_*: one that ended before since, one running,
 * one queued, and three that ended after since, made in the order of
 * their ids in v: a (6 s, made before since), b (3 s, failed) and c (6 s,
 * cancelled). */
static void
ended(q_db *db, int64_t v[3])
{
    int64_t old = job(db, "old", T0 - 9000);

    v[0] = job(db, "a", T0 - 5000);
    v[1] = job(db, "b", T0);
    v[2] = qfix_add(db, "c", NULL, 0, T0);
    ck_assert_int_eq(q_complete(db, old, "w", SINCE - 1), 0);
    ck_assert_int_eq(q_complete(db, v[0], "w", T0 + 1000), 0);
    ck_assert_int_eq(q_fail(db, v[1], "w", "HTTP 500: boom", T0 + 3000), 0);
    ck_assert_int_eq(q_cancel(db, v[2], T0 + 6000), 0);
    job(db, "running", T0 - 7000);
    qfix_add(db, "queued", NULL, 0, T0 - 8000);
}

START_TEST(test_slowest_ended_since_longest_first)
{
    q_db *db = qfix_open(NULL);
    struct q_job *j = NULL;
    size_t n = 0;
    int64_t v[3];

    ended(db, v);
    ck_assert_int_eq(q_report_slowest(db, SINCE, 0, &j, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(j[0].id, v[0]); /* a tie with c: by id */
    ck_assert_int_eq(j[1].id, v[2]);
    ck_assert_int_eq(j[2].id, v[1]);
    q_jobs_free(j, n);
    ck_assert_int_eq(q_report_slowest(db, SINCE, 1, &j, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(j[0].id, v[0]);
    q_jobs_free(j, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Failed jobs: only the failed, ended at or after since, latest first. */
START_TEST(test_failed_jobs_since_latest_first)
{
    q_db *db = qfix_open(NULL);
    struct q_job *j = NULL;
    size_t n = 0;
    int64_t v[3], d = job(db, "d", T0);

    ended(db, v);
    ck_assert_int_eq(q_fail(db, d, "w", "no env FOO", T0 + 4000), 0);
    ck_assert_int_eq(q_report_failed(db, SINCE, 0, &j, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(j[0].id, d);
    ck_assert_str_eq(j[0].error, "no env FOO");
    ck_assert_int_eq(j[0].updated_at, T0 + 4000);
    ck_assert_int_eq(j[1].id, v[1]);
    ck_assert_int_eq(j[1].state, Q_JOB_FAILED);
    q_jobs_free(j, n);
    ck_assert_int_eq(q_report_failed(db, T0 + 3500, 1, &j, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(j[0].id, d);
    q_jobs_free(j, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Jobs by the start of their key: only that prefix (not one that shares
 * its first bytes), created since, the oldest first. */
START_TEST(test_keyed_jobs_by_prefix_since)
{
    q_db *db = qfix_open(NULL);
    struct q_job *j = NULL;
    size_t n = 0;
    int64_t a1, a2;

    qfix_add(db, "old", "schedule:a:2026-01-01T00:00:00Z", 0, BEFORE);
    a2 = qfix_add(db, "a2", "schedule:a:2026-01-01T00:02:07Z", 0, T0 + 20);
    a1 = qfix_add(db, "a1", "schedule:a:2026-01-01T00:01:00Z", 0, T0 + 10);
    qfix_add(db, "ab", "schedule:ab:2026-01-01T00:01:00Z", 0, T0 + 10);
    qfix_add(db, "b", "schedule:b:2026-01-01T00:01:00Z", 0, T0 + 10);
    qfix_add(db, "none", NULL, 0, T0 + 10);
    ck_assert_int_eq(q_report_keyed(db, "schedule:a:", SINCE, 0, &j, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(j[0].id, a1);
    ck_assert_str_eq(j[0].key, "schedule:a:2026-01-01T00:01:00Z");
    ck_assert_int_eq(j[1].id, a2);
    q_jobs_free(j, n);
    ck_assert_int_eq(q_report_keyed(db, "schedule:a:", SINCE, 1, &j, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(j[0].id, a1);
    q_jobs_free(j, n);
    ck_assert_int_eq(q_report_keyed(db, "", SINCE, 0, &j, &n), -EINVAL);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_slowest_rows_read_as_jobs)
{
    q_db *db = qfix_open(NULL);
    struct q_job *j = NULL;
    size_t n = 0;
    int64_t v[3];

    ended(db, v);
    ck_assert_int_eq(q_report_slowest(db, SINCE, 0, &j, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(j[1].state, Q_JOB_CANCELLED);
    ck_assert_str_eq(j[2].name, "b");
    ck_assert_int_eq(j[2].state, Q_JOB_FAILED);
    ck_assert_str_eq(j[2].error, "HTTP 500: boom");
    ck_assert_int_eq(j[2].created_at, T0);
    ck_assert_int_eq(j[2].updated_at, T0 + 3000);
    ck_assert_int_eq(j[2].claims, 1);
    ck_assert_ptr_null(j[2].lease_owner);
    q_jobs_free(j, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_job_by_key_reads_as_job_get)
{
    q_db *db = qfix_open(NULL);
    struct q_job byk = {0}, byid = {0}, none = {.id = -1};
    int64_t id;

    qfix_add(db, "other", "k0", 0, T0);
    id = qfix_add(db, "keyed", "k1", 3, T0);
    ck_assert_int_eq(q_job_by_key(db, "k1", &byk), 0);
    ck_assert_int_eq(q_job_get(db, id, &byid), 0);
    ck_assert_int_eq(byk.id, id);
    ck_assert_str_eq(byk.key, "k1");
    ck_assert_str_eq(byk.name, byid.name);
    ck_assert_str_eq(byk.spec, byid.spec);
    ck_assert_int_eq(byk.priority, 3);
    ck_assert_int_eq(byk.state, byid.state);
    ck_assert_int_eq(byk.deadline_at, byid.deadline_at);
    q_job_cleanup(&byk);
    q_job_cleanup(&byid);
    ck_assert_int_eq(q_job_by_key(db, "k2", &none), -ENOENT);
    ck_assert_int_eq(none.id, -1); /* untouched */
    ck_assert_int_eq(q_job_by_key(db, NULL, &none), -EINVAL);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_nothing_since_is_empty)
{
    q_db *db = qfix_open(NULL);
    struct q_report_tier *t = NULL;
    struct q_job *j = NULL;
    size_t n = 9;

    failures(db);
    ck_assert_int_eq(q_report_tiers(db, SINCE + 3, &t, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(t);
    n = 9;
    ck_assert_int_eq(q_report_slowest(db, SINCE, 0, &j, &n), 0);
    ck_assert_uint_eq(n, 0); /* nothing ended */
    ck_assert_ptr_null(j);
    q_report_tiers_free(NULL, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A reader's snapshot: another handle enqueues and finishes jobs while it
 * is open, and the reader sees none of it until it ends. */
START_TEST(test_read_snapshot_sees_one_moment)
{
    q_db *rd = qfix_open(NULL), *wr = qfix_open(NULL);
    struct q_job j = {0};
    int64_t id = qfix_add(wr, "a", NULL, 0, T0);

    ck_assert_int_eq(q_read_begin(rd), 0);
    ck_assert_int_eq(qfix_count(rd, Q_JOB_QUEUED), 1);
    qfix_claim_one(wr, id, "w", T0, 60000);
    ck_assert_int_eq(q_complete(wr, id, "w", T0 + 1), 0);
    qfix_add(wr, "b", NULL, 0, T0 + 2);
    ck_assert_int_eq(qfix_count(rd, Q_JOB_QUEUED), 1);
    ck_assert_int_eq(qfix_count(rd, Q_JOB_SUCCEEDED), 0);
    ck_assert_int_eq(qfix_state(rd, id), Q_JOB_QUEUED);
    ck_assert_int_eq(q_job_get(rd, id + 1, &j), -ENOENT);
    q_read_end(rd);
    ck_assert_int_eq(qfix_count(rd, Q_JOB_QUEUED), 1); /* b */
    ck_assert_int_eq(qfix_state(rd, id), Q_JOB_SUCCEEDED);
    ck_assert_int_eq(q_close(wr), 0);
    ck_assert_int_eq(q_close(rd), 0);
}
END_TEST

/* Snapshots nest; none is a write transaction, and inside a write
 * transaction one changes nothing. */
START_TEST(test_read_snapshot_nests_and_refuses_writes)
{
    q_db *db = qfix_open(NULL), *wr = qfix_open(NULL);

    ck_assert_int_eq(q_read_begin(db), 0);
    ck_assert_int_eq(q_read_begin(db), 0);
    ck_assert_int_eq(qfix_count(db, Q_JOB_QUEUED), 0);
    ck_assert_int_eq(q_tx_begin(db), -EINVAL);
    q_read_end(db);
    qfix_add(wr, "a", NULL, 0, T0);
    ck_assert_int_eq(qfix_count(db, Q_JOB_QUEUED), 0); /* still the outer */
    q_read_end(db);
    q_read_end(db); /* none open: nothing */
    ck_assert_int_eq(qfix_count(db, Q_JOB_QUEUED), 1);
    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_read_begin(db), 0);
    qfix_add(db, "b", NULL, 0, T0); /* the write transaction's own */
    ck_assert_int_eq(qfix_count(db, Q_JOB_QUEUED), 2);
    q_read_end(db);
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_eq(qfix_count(wr, Q_JOB_QUEUED), 2);
    ck_assert_int_eq(q_close(wr), 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("queue contract: the morning report");
    TCase *jobs = tcase_create("jobs");
    TCase *attempts = tcase_create("attempts");

    tcase_add_checked_fixture(jobs, qfix_setup, qfix_teardown);
    tcase_add_test(jobs, test_jobs_created_since_by_state);
    tcase_add_test(jobs, test_slowest_ended_since_longest_first);
    tcase_add_test(jobs, test_slowest_rows_read_as_jobs);
    tcase_add_test(jobs, test_failed_jobs_since_latest_first);
    tcase_add_test(jobs, test_keyed_jobs_by_prefix_since);
    tcase_add_test(jobs, test_job_by_key_reads_as_job_get);
    tcase_add_test(jobs, test_read_snapshot_sees_one_moment);
    tcase_add_test(jobs, test_read_snapshot_nests_and_refuses_writes);
    suite_add_tcase(s, jobs);

    tcase_add_checked_fixture(attempts, qfix_setup, qfix_teardown);
    tcase_add_test(attempts, test_tiers_count_each_outcome);
    tcase_add_test(attempts, test_tiers_since_by_name_null_last);
    tcase_add_test(attempts, test_tiers_count_breaker_openings_since);
    tcase_add_test(attempts, test_failures_by_count_then_outcome_and_reason);
    tcase_add_test(attempts, test_failure_example_is_the_latest_attempt);
    tcase_add_test(attempts, test_failures_limit_keeps_the_largest);
    tcase_add_test(attempts, test_nothing_since_is_empty);
    tcase_add_test(attempts, test_tiers_sum_costs_of_priced_attempts);
    tcase_add_test(attempts, test_costliest_jobs_by_cost);
    suite_add_tcase(s, attempts);
    return s;
}

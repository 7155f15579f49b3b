/* test_queue_contract_prune.c: the storage contract (queue/queue.h) for
 * retention: q_prune removes finished jobs with their steps, attempts and
 * park items, drops old bodies, tier events and budget windows that have
 * ended, never touches a job with an open park item or one that is not
 * finished, counts without changing anything on a dry run, and goes in
 * steps under a limit. Only queue.h is used, so every backend must pass
 * it (the _pg variant runs it on a throwaway PostgreSQL). */
#include "tests/support/support.h"

#include <errno.h>
#include <stdlib.h>

#include "queue/admin.h"
#include "queue/park.h"
#include "queue/queue.h"
#include "queue/tiers.h"
#include "tests/support/qfix.h"

#define DAY INT64_C(86400000)

/* A job run at `at` through one attempt with a body, then ended with
 * end (Q_JOB_SUCCEEDED, Q_JOB_FAILED, Q_JOB_PARKED with an open item, or
 * Q_JOB_RUNNING: left running). Its id. */
static int64_t
job_at(q_db *db, const char *key, int64_t at, enum q_job_state end)
{
    int64_t id = qfix_add(db, "j", key, 0, at), aid = 0, pid = 0;
    struct q_attempt_start s = {
        .job_id = id, .worker = "w", .tier = "t", .started_at = at};
    struct q_attempt_result r = {.status = 200,
                                 .outcome = "ok",
                                 .decision = "commit",
                                 .body = "{\"a\":1}",
                                 .body_len = 7,
                                 .finished_at = at};
    struct q_park_new pn = {
        .job_id = id, .step_name = "a", .reason = "in_doubt", .parked_at = at};
    int n = 0;

    qfix_claim_one(db, id, "w", at, 60000);
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid, &n), 0);
    ck_assert_int_eq(q_attempt_finish(db, aid, &r), 0);
    if (end == Q_JOB_SUCCEEDED)
        ck_assert_int_eq(q_complete(db, id, "w", at), 0);
    else if (end == Q_JOB_FAILED)
        ck_assert_int_eq(q_fail(db, id, "w", "no", at), 0);
    if (end != Q_JOB_PARKED)
        return id;
    ck_assert_int_eq(q_park_add(db, &pn, &pid), 0);
    ck_assert_int_eq(q_park_job(db, id, "w", at), 0);
    return id;
}

static bool
job_exists(q_db *db, int64_t id)
{
    struct q_job j;
    int rc = q_job_get(db, id, &j);

    if (rc == 0)
        q_job_cleanup(&j);
    ck_assert(rc == 0 || rc == -ENOENT);
    return rc == 0;
}

/* The body of job id's first attempt (NULL: dropped); caller frees. */
static char *
body_of(q_db *db, int64_t id)
{
    struct q_attempt *a = NULL;
    size_t n = 0;
    char *b;

    ck_assert_int_eq(q_attempts_list(db, id, -1, &a, &n), 0);
    ck_assert_uint_eq(n, 1);
    b = a[0].body != NULL ? strdup(a[0].body) : NULL;
    q_attempts_free(a, n);
    return b;
}

static struct q_prune_counts
prune(q_db *db, int64_t jobs, int64_t bodies, int64_t budgets, bool dry)
{
    struct q_prune p = {.jobs_before = jobs,
                        .bodies_before = bodies,
                        .budgets_before = budgets,
                        .dry_run = dry};
    struct q_prune_counts c = {-1, -1, -1, -1, -1, -1, -1, -1};

    ck_assert_int_eq(q_prune(db, &p, &c), 0);
    return c;
}

START_TEST(test_old_finished_jobs_go_with_their_rows)
{
    q_db *db = qfix_open(NULL);
    int64_t done = job_at(db, NULL, T0, Q_JOB_SUCCEEDED);
    int64_t failed = job_at(db, NULL, T0, Q_JOB_FAILED);
    int64_t young = job_at(db, NULL, T0 + 5 * DAY, Q_JOB_SUCCEEDED);
    int64_t running = job_at(db, NULL, T0, Q_JOB_RUNNING);
    int64_t queued = qfix_add(db, "q", NULL, 0, T0);
    struct q_prune_counts c = prune(db, T0 + DAY, 0, 0, false);

    ck_assert_int_eq(c.jobs, 2);
    ck_assert_int_eq(c.steps, 2);
    ck_assert_int_eq(c.attempts, 2);
    ck_assert(!job_exists(db, done) && !job_exists(db, failed));
    ck_assert(job_exists(db, young) && job_exists(db, running) &&
              job_exists(db, queued));
    c = prune(db, T0 + DAY, 0, 0, false); /* nothing more */
    ck_assert_int_eq(c.jobs, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_open_park_items_and_their_jobs_stay)
{
    q_db *db = qfix_open(NULL);
    int64_t parked = job_at(db, NULL, T0, Q_JOB_PARKED);
    int64_t cancelled = job_at(db, NULL, T0, Q_JOB_PARKED);
    struct q_prune_counts c;

    ck_assert_int_eq(q_cancel(db, cancelled, T0), 0); /* its item open */
    c = prune(db, T0 + DAY, T0 + DAY, 0, false);
    ck_assert_int_eq(c.jobs, 0);
    ck_assert_int_eq(c.bodies, 0);
    ck_assert(job_exists(db, parked) && job_exists(db, cancelled));
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_a_closed_park_item_goes_with_its_job)
{
    q_db *db = qfix_open(NULL);
    int64_t id = job_at(db, NULL, T0, Q_JOB_PARKED);
    struct q_park_item *it = NULL;
    struct q_park_filter all = {.all = true};
    struct q_park_close pc = {.resolution = "fail", .by = "op", .now = T0};
    size_t n = 0;
    struct q_prune_counts c;

    ck_assert_int_eq(q_park_list(db, &all, &it, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(q_park_close(db, it[0].id, &pc), 0);
    q_park_items_free(it, n);
    ck_assert_int_eq(q_job_end_parked(db, id, Q_JOB_FAILED, "op", T0), 0);
    c = prune(db, T0 + DAY, 0, 0, false);
    ck_assert_int_eq(c.jobs, 1);
    ck_assert_int_eq(c.park, 1);
    ck_assert_int_eq(q_park_list(db, &all, &it, &n), 0);
    ck_assert_uint_eq(n, 0);
    q_park_items_free(it, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_bodies_of_finished_jobs_are_dropped)
{
    q_db *db = qfix_open(NULL);
    int64_t old = job_at(db, NULL, T0, Q_JOB_SUCCEEDED);
    int64_t young = job_at(db, NULL, T0 + 5 * DAY, Q_JOB_SUCCEEDED);
    int64_t running = job_at(db, NULL, T0, Q_JOB_RUNNING);
    struct q_prune_counts c = prune(db, 0, T0 + DAY, 0, false);
    char *b;

    ck_assert_int_eq(c.bodies, 1);
    ck_assert_int_eq(c.jobs, 0);
    ck_assert_ptr_null(body_of(db, old));
    ck_assert(job_exists(db, old)); /* the attempt row stays */
    ck_assert_str_eq((b = body_of(db, young)), "{\"a\":1}");
    free(b);
    ck_assert_str_eq((b = body_of(db, running)), "{\"a\":1}");
    free(b);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_a_dry_run_counts_and_changes_nothing)
{
    q_db *db = qfix_open(NULL);
    int64_t a = job_at(db, NULL, T0, Q_JOB_SUCCEEDED);
    int64_t b = job_at(db, NULL, T0 + 2 * DAY, Q_JOB_FAILED);
    struct q_prune_counts c;

    ck_assert_int_eq(q_tier_event_add(db, "t", T0, "breaker_open"), 0);
    c = prune(db, T0 + DAY, T0 + 3 * DAY, 0, true);
    ck_assert_int_eq(c.jobs, 1);
    ck_assert_int_eq(c.attempts, 1);
    ck_assert_int_eq(c.bodies, 1); /* b's: a's go with a */
    ck_assert_int_eq(c.tier_events, 1);
    ck_assert(job_exists(db, a) && job_exists(db, b));
    c = prune(db, T0 + DAY, T0 + 3 * DAY, 0, false);
    ck_assert_int_eq(c.jobs + c.bodies + c.tier_events, 3);
    ck_assert(!job_exists(db, a));
    ck_assert_ptr_null(body_of(db, b));
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_a_limit_prunes_in_steps)
{
    q_db *db = qfix_open(NULL);
    struct q_prune p = {.jobs_before = T0 + DAY, .limit = 2};
    struct q_prune_counts c;
    int64_t seen[4] = {0};

    for (int i = 0; i < 5; i++)
        job_at(db, NULL, T0 + i, Q_JOB_SUCCEEDED);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(q_prune(db, &p, &c), 0);
        seen[i] = c.jobs;
    }
    ck_assert_int_eq(seen[0], 2);
    ck_assert_int_eq(seen[1], 2);
    ck_assert_int_eq(seen[2], 1);
    ck_assert_int_eq(seen[3], 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Bodies in steps: each step starts at the job the one before ended at,
 * and every body goes once. */
START_TEST(test_bodies_go_in_steps_from_the_last_job)
{
    q_db *db = qfix_open(NULL);
    struct q_prune p = {.bodies_before = T0 + DAY, .limit = 2};
    struct q_prune_counts c;
    int64_t ids[5], total = 0, steps = 0;

    for (int i = 0; i < 5; i++)
        ids[i] = job_at(db, NULL, T0 + i, Q_JOB_SUCCEEDED);
    do {
        ck_assert_int_eq(q_prune(db, &p, &c), 0);
        total += c.bodies;
        if (c.bodies > 0)
            ck_assert_int_ge(c.bodies_job, p.bodies_from_job);
        p.bodies_from_job = c.bodies_job > 0 ? c.bodies_job : p.bodies_from_job;
        ck_assert_int_lt(++steps, 10);
    } while (c.bodies == p.limit);
    ck_assert_int_eq(total, 5);
    ck_assert_int_eq(p.bodies_from_job, ids[4]);
    for (int i = 0; i < 5; i++)
        ck_assert_ptr_null(body_of(db, ids[i]));
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

static int64_t
budget_rows(q_db *db)
{
    struct q_budget *b = NULL;
    size_t n = 0;

    ck_assert_int_eq(q_budgets_list(db, 0, &b, &n), 0);
    q_budgets_free(b, n);
    return (int64_t)n;
}

START_TEST(test_budget_windows_stay_while_they_count)
{
    q_db *db = qfix_open(NULL);
    int64_t run;
    struct q_prune_counts c;

    ck_assert_int_eq(q_budget_settle(db, "d", "old", 0, 5, T0), 0);
    ck_assert_int_eq(q_budget_settle(db, "d", "new", 0, 5, T0 + 9 * DAY), 0);
    ck_assert_int_eq(q_budget_settle(db, "r", "n:1", 0, 5, T0), 0);
    run = job_at(db, "schedule:n:1", T0, Q_JOB_RUNNING);
    c = prune(db, 0, 0, T0 + DAY, false);
    ck_assert_int_eq(c.budgets, 1); /* "old"; the run's job is running */
    ck_assert_int_eq(budget_rows(db), 2);
    ck_assert_int_eq(q_complete(db, run, "w", T0), 0);
    c = prune(db, 0, 0, T0 + DAY, false);
    ck_assert_int_eq(c.budgets, 1);
    ck_assert_int_eq(budget_rows(db), 1);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_the_plan_keeps_budget_windows_a_month)
{
    struct q_prune p;
    int64_t now = T0 + 100 * DAY;

    q_prune_plan(30 * DAY, 7 * DAY, now, &p);
    ck_assert_int_eq(p.jobs_before, now - 30 * DAY);
    ck_assert_int_eq(p.bodies_before, now - 7 * DAY);
    ck_assert_int_eq(p.budgets_before, now - 31 * DAY);
    q_prune_plan(2 * DAY, 0 * DAY, now, &p);
    ck_assert_int_eq(p.budgets_before, now - 31 * DAY);
    ck_assert_int_eq(p.bodies_before, 0);
    q_prune_plan(90 * DAY, 0 * DAY, now, &p);
    ck_assert_int_eq(p.budgets_before, now - 90 * DAY);
    q_prune_plan(0 * DAY, 7 * DAY, now, &p);
    ck_assert_int_eq(p.jobs_before + p.budgets_before, 0);
}
END_TEST

START_TEST(test_bad_arguments)
{
    q_db *db = qfix_open(NULL);
    struct q_prune p = {.jobs_before = -1};

    ck_assert_int_eq(q_prune(db, &p, NULL), -EINVAL);
    p = (struct q_prune){.limit = -1};
    ck_assert_int_eq(q_prune(db, &p, NULL), -EINVAL);
    p = (struct q_prune){.bodies_from_job = -1};
    ck_assert_int_eq(q_prune(db, &p, NULL), -EINVAL);
    ck_assert_int_eq(q_prune(db, NULL, NULL), -EINVAL);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("queue_contract_prune");
    TCase *tc = tcase_create("prune");

    tcase_add_checked_fixture(tc, qfix_setup, qfix_teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_old_finished_jobs_go_with_their_rows);
    tcase_add_test(tc, test_open_park_items_and_their_jobs_stay);
    tcase_add_test(tc, test_a_closed_park_item_goes_with_its_job);
    tcase_add_test(tc, test_bodies_of_finished_jobs_are_dropped);
    tcase_add_test(tc, test_a_dry_run_counts_and_changes_nothing);
    tcase_add_test(tc, test_a_limit_prunes_in_steps);
    tcase_add_test(tc, test_bodies_go_in_steps_from_the_last_job);
    tcase_add_test(tc, test_budget_windows_stay_while_they_count);
    tcase_add_test(tc, test_the_plan_keeps_budget_windows_a_month);
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

/* test_queue_contract.c: the storage contract (queue/queue.h) for jobs:
 * enqueue and dedupe, claim order, leases and their holders, cancel,
 * transactions (group commit, inner levels), and real processes racing
 * and dying. Only queue.h is used, so every backend must pass it as it
 * stands (tests/support/qfix.h says where the store is). */
#include "tests/support/support.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "queue/park.h"
#include "queue/queue.h"
#include "queue/report.h"
#include "queue/tiers.h"
#include "tests/support/qfix.h"

/* ---- enqueue and claim -------------------------------------------- */

START_TEST(test_dedupe_returns_first_id)
{
    q_db *db = qfix_open(NULL);
    struct q_job_new v[3] = {qfix_job("a", "k1", 0), qfix_job("b", "k1", 0),
                             qfix_job("c", NULL, 0)};
    struct q_enqueue_result r[3];
    int64_t again;

    ck_assert_int_eq(q_enqueue(db, v, 3, NULL, T0, r), 0);
    ck_assert(!r[0].duplicate && r[1].duplicate && !r[2].duplicate);
    ck_assert_int_eq(r[1].id, r[0].id);
    again = qfix_add(db, "d", "k1", 0, T0);
    ck_assert_int_eq(again, r[0].id);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A batch of many jobs, keyed and not: jobs whose key exists (before the
 * batch, or earlier in it) get that job's id, the others new ids that
 * grow in input order; each id's row is that job's. */
START_TEST(test_batch_ids_in_input_order)
{
    enum { N = 150 };
    static char names[N][8], keys[N][8];
    static const char *const old_keys[] = {"old0", "old1", "old2"};
    q_db *db = qfix_open(NULL);
    struct q_job_new v[N];
    struct q_enqueue_result r[N];
    int64_t old[3], last;
    struct q_job got;

    for (int i = 0; i < 3; i++)
        old[i] = qfix_add(db, "old", old_keys[i], 0, T0);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "j%d", i);
        snprintf(keys[i], sizeof(keys[i]), "new%d", i / 10);
        v[i] = qfix_job(names[i],
                        i % 5 == 0   ? old_keys[i % 3]
                        : i % 5 == 1 ? keys[i]
                                     : NULL,
                        0);
    }
    ck_assert_int_eq(q_enqueue(db, v, N, NULL, T0, r), 0);
    last = old[2];
    for (int i = 0; i < N; i++) {
        bool again = i % 5 == 0 || i % 10 == 6;
        ck_assert_msg(r[i].duplicate == again, "job %d", i);
        if (i % 5 == 0)
            ck_assert_int_eq(r[i].id, old[i % 3]);
        else if (again)
            ck_assert_int_eq(r[i].id, r[i - 5].id);
        else
            ck_assert_msg(r[i].id > last, "job %d: id %lld after %lld", i,
                          (long long)r[i].id, (long long)last);
        last = again ? last : r[i].id;
        ck_assert_int_eq(q_job_get(db, r[i].id, &got), 0);
        ck_assert_str_eq(got.name, i % 5 == 0 ? "old"
                                   : again    ? names[i - 5]
                                              : names[i]);
        q_job_cleanup(&got);
    }
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A job's input is stored with it, as given, one per job of a batch (the
 * multi-row and one-row inserts alike), and comes back with the job from
 * a read and from a claim; a job without one has none. */
START_TEST(test_input_stored_with_the_job)
{
    enum { N = 70 };
    static char inputs[N][32];
    q_db *db = qfix_open(NULL);
    struct q_job_new v[N];
    struct q_enqueue_result r[N];
    struct q_job got, *claimed = NULL;
    size_t n = 0;

    for (int i = 0; i < N; i++) {
        snprintf(inputs[i], sizeof(inputs[i]), "{\"i\":%d,\"q\":\"a\\\"b\"}",
                 i);
        v[i] = qfix_job("j", NULL, 0);
        v[i].input = i % 7 == 3 ? NULL : inputs[i];
    }
    ck_assert_int_eq(q_enqueue(db, v, N, NULL, T0, r), 0);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(q_job_get(db, r[i].id, &got), 0);
        if (v[i].input == NULL)
            ck_assert_ptr_null(got.input);
        else
            ck_assert_str_eq(got.input, inputs[i]);
        q_job_cleanup(&got);
    }
    ck_assert_int_eq(q_claim(db, "w1", T0, 1000, 1, &claimed, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(claimed[0].input, inputs[0]);
    q_jobs_free(claimed, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_claim_order_priority_run_at_id)
{
    q_db *db = qfix_open(NULL);
    struct q_job_new late = qfix_job("late", NULL, 9);
    struct q_enqueue_opts o = {.has_run_at = true, .run_at = T0 + 60000};
    struct q_enqueue_result r;
    struct q_job *got = NULL;
    size_t n = 0;
    int64_t low = qfix_add(db, "low", NULL, -1, T0);
    int64_t a = qfix_add(db, "a", NULL, 5, T0);
    int64_t b = qfix_add(db, "b", NULL, 5, T0);

    ck_assert_int_eq(q_enqueue(db, &late, 1, &o, T0, &r), 0);
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
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_lease_ops_need_the_holder)
{
    q_db *db = qfix_open(NULL);
    int64_t id = qfix_add(db, "a", NULL, 0, T0);
    struct q_job *got = NULL, j = {0};
    size_t n = 0;

    qfix_claim_one(db, id, "w1", T0, 1000);
    ck_assert_int_eq(q_extend(db, id, "w2", T0 + 5000, T0), -EBUSY);
    ck_assert_int_eq(q_complete(db, id, "w2", T0), -EBUSY);
    ck_assert_int_eq(q_extend(db, id, "w1", T0 + 5000, T0), 0);
    ck_assert_int_eq(q_release(db, id, "w1", T0 + 7000, T0), 0);
    ck_assert_int_eq(qfix_state(db, id), Q_JOB_QUEUED);
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

/* q_job_wake: a queued job due later is due now; any other is left. */
START_TEST(test_wake_makes_queued_job_due)
{
    q_db *db = qfix_open(NULL);
    int64_t id = qfix_add(db, "a", NULL, 0, T0);
    struct q_job *got = NULL;
    size_t n = 0;

    qfix_claim_one(db, id, "w1", T0, 1000);
    ck_assert_int_eq(q_job_wake(db, id, T0 + 1), -EALREADY); /* running */
    ck_assert_int_eq(q_release(db, id, "w1", T0 + 60000, T0), 0);
    ck_assert_int_eq(q_claim(db, "w2", T0 + 5, 1000, 1, &got, &n), -ENOENT);
    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_job_wake(db, id, T0 + 5), 0);
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_eq(q_job_wake(db, id, T0 + 6), -EALREADY); /* due */
    ck_assert_int_eq(q_job_wake(db, id + 99, T0 + 6), -EALREADY);
    ck_assert_int_eq(q_claim(db, "w2", T0 + 6, 1000, 1, &got, &n), 0);
    ck_assert_int_eq(got[0].id, id);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_expired_lease_is_claimed_again)
{
    q_db *db = qfix_open(NULL);
    int64_t id = qfix_add(db, "a", NULL, 0, T0);
    struct q_job *got = NULL;
    size_t n = 0;

    qfix_claim_one(db, id, "dead", T0, 1000);
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
    q_db *db = qfix_open(NULL);
    struct q_job *got = NULL;
    size_t n = 0;
    int64_t a = qfix_add(db, "a", NULL, 1, T0),
            b = qfix_add(db, "b", NULL, 0, T0);

    ck_assert_int_eq(q_claim(db, "w", T0, 1000, 1, &got, &n), 0);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_cancel(db, a, T0), 0); /* running */
    ck_assert_int_eq(q_extend(db, a, "w", T0 + 9, T0), -EBUSY);
    ck_assert_int_eq(q_cancel(db, b, T0), 0); /* queued */
    ck_assert_int_eq(q_cancel(db, b, T0), -EALREADY);
    ck_assert_int_eq(q_cancel(db, 999, T0), -ENOENT);
    ck_assert_int_eq(qfix_state(db, b), Q_JOB_CANCELLED);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A job cancelled with a step running and its request in flight keeps no
 * step running and no attempt in flight: the step is pending again, the
 * attempt ended with outcome unknown, reason cancelled. */
START_TEST(test_cancel_ends_the_running_step)
{
    q_db *db = qfix_open(NULL);
    int64_t a = qfix_add(db, "a", NULL, 0, T0), aid = 0;
    struct q_attempt_start st = {
        .job_id = a, .worker = "w", .request_sha256 = "x", .started_at = T0};
    struct q_attempt *at = NULL;
    struct q_step *steps = NULL;
    size_t n = 0;
    int num = 0;

    qfix_claim_one(db, a, "w", T0, 1000);
    ck_assert_int_eq(q_step_set(db, a, "w", 0, Q_STEP_RUNNING, NULL, NULL, 0),
                     0);
    ck_assert_int_eq(q_attempt_begin(db, &st, &aid, &num), 0);
    ck_assert_int_eq(q_cancel(db, a, T0 + 5), 0);
    ck_assert_int_eq(q_steps_get(db, a, &steps, &n), 0);
    ck_assert_int_eq(steps[0].state, Q_STEP_PENDING);
    q_steps_free(steps, n);
    ck_assert_int_eq(q_attempts_list(db, a, -1, &at, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(at[0].finished_at, T0 + 5);
    ck_assert_str_eq(at[0].outcome, "unknown");
    ck_assert_str_eq(at[0].reason, "cancelled");
    q_attempts_free(at, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_jobs_list_pages)
{
    q_db *db = qfix_open(NULL);
    struct q_job *got = NULL;
    int64_t id[5];
    size_t n = 0;

    for (int i = 0; i < 5; i++)
        id[i] = qfix_add(db, "j", NULL, 0, T0);
    ck_assert_int_eq(q_cancel(db, id[1], T0), 0);
    /* a page starts after the given id, by id, at most limit long */
    ck_assert_int_eq(q_jobs_list(db, -1, 0, 2, &got, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(got[0].id, id[0]);
    ck_assert_int_eq(got[1].id, id[1]);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_jobs_list(db, -1, id[1], 2, &got, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(got[0].id, id[2]);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_jobs_list(db, -1, id[4], 0, &got, &n), 0);
    ck_assert_uint_eq(n, 0);
    q_jobs_free(got, n);
    /* with a state: the page holds only that state */
    ck_assert_int_eq(q_jobs_list(db, Q_JOB_QUEUED, id[0], 0, &got, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(got[0].id, id[2]);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_jobs_list(db, Q_JOB_CANCELLED, 0, 0, &got, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(got[0].id, id[1]);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* What `stepq serve`'s /metrics reads: finished attempts' latencies per
 * tier in cumulative buckets, the workers holding leases, and the oldest
 * queued job that is due. */
START_TEST(test_reports_for_metrics)
{
    q_db *db = qfix_open(NULL);
    int64_t a = qfix_add(db, "a", NULL, 0, T0),
            b = qfix_add(db, "b", NULL, 0, T0),
            c = qfix_add(db, "c", NULL, 0, T0), aid, due = -1;
    const int64_t lat[] = {80, 300, 200000};
    struct q_latency_group *g = NULL;
    struct q_worker_brief *w = NULL;
    size_t ng = 0, nw = 0;
    int num;

    ck_assert_int_eq(q_stats_oldest_due(db, T0 - 1, &due), 0);
    ck_assert_int_eq(due, 0); /* none due yet */
    ck_assert_int_eq(q_stats_oldest_due(db, T0, &due), 0);
    ck_assert_int_eq(due, T0);
    qfix_claim_one(db, a, "w1", T0, 60000);
    qfix_claim_one(db, b, "w1", T0, 90000);
    for (int i = 0; i < 3; i++) {
        struct q_attempt_start s = {.job_id = a,
                                    .worker = "w1",
                                    .tier = i < 2 ? "free" : "paid",
                                    .request_sha256 = "x",
                                    .started_at = T0};
        struct q_attempt_result r = {.status = 200,
                                     .outcome = "ok",
                                     .decision = "commit",
                                     .latency_ms = lat[i],
                                     .finished_at = T0 + 1};
        ck_assert_int_eq(q_attempt_begin(db, &s, &aid, &num), 0);
        ck_assert_int_eq(q_attempt_finish(db, aid, &r), 0);
    }
    /* one in flight: not counted */
    struct q_attempt_start f = {.job_id = b,
                                .worker = "w1",
                                .tier = "free",
                                .request_sha256 = "y",
                                .started_at = T0};
    ck_assert_int_eq(q_attempt_begin(db, &f, &aid, &num), 0);
    ck_assert_int_eq(q_stats_latency(db, &g, &ng), 0);
    ck_assert_uint_eq(ng, 2);
    ck_assert_str_eq(g[0].tier, "free");
    ck_assert_int_eq(g[0].count, 2);
    ck_assert_int_eq(g[0].sum_ms, 380);
    ck_assert_int_eq(g[0].le[0], 1); /* <= 100 ms */
    ck_assert_int_eq(g[0].le[1], 1); /* <= 250 */
    ck_assert_int_eq(g[0].le[2], 2); /* <= 500 */
    ck_assert_int_eq(g[0].le[Q_LATENCY_NBUCKETS - 1], 2);
    ck_assert_str_eq(g[1].tier, "paid");
    ck_assert_int_eq(g[1].le[Q_LATENCY_NBUCKETS - 1], 0); /* over 120 s */
    ck_assert_int_eq(g[1].count, 1);
    q_latency_groups_free(g, ng);
    ck_assert_int_eq(q_stats_workers(db, &w, &nw), 0);
    ck_assert_uint_eq(nw, 1);
    ck_assert_str_eq(w[0].worker, "w1");
    ck_assert_int_eq(w[0].held, 2);
    ck_assert_int_eq(w[0].lease_until, T0 + 90000);
    q_worker_briefs_free(w, nw);
    ck_assert_int_eq(q_stats_oldest_due(db, T0 + 5, &due), 0);
    ck_assert_int_eq(due, T0); /* c, still queued */
    ck_assert_int_eq(q_cancel(db, c, T0), 0);
    ck_assert_int_eq(q_stats_oldest_due(db, T0 + 5, &due), 0);
    ck_assert_int_eq(due, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_group_commit_rolls_back_whole)
{
    q_db *db = qfix_open(NULL);

    ck_assert_int_eq(q_tx_begin(db), 0);
    qfix_add(db, "a", NULL, 0, T0);
    qfix_add(db, "b", NULL, 0, T0);
    q_tx_rollback(db);
    ck_assert_int_eq(qfix_count(db, Q_JOB_QUEUED), 0);
    ck_assert_int_eq(q_tx_begin(db), 0);
    qfix_add(db, "a", NULL, 0, T0);
    qfix_add(db, "b", NULL, 0, T0);
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_eq(qfix_count(db, Q_JOB_QUEUED), 2);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A call that finds the job not held changes nothing and the rest of the
 * transaction commits; a store that defers the attempt's record says so
 * at the commit (the id stays 0: not recorded, not to be sent). */
START_TEST(test_inner_failure_keeps_outer_work)
{
    q_db *db = qfix_open(NULL);
    struct q_attempt *at = NULL;
    size_t nat = 0;
    int64_t aid = -1;
    int num, rc;

    ck_assert_int_eq(q_tx_begin(db), 0);
    int64_t a = qfix_add(db, "a", NULL, 0, T0);
    struct q_attempt_start st = {.job_id = a,
                                 .worker = "nobody",
                                 .request_sha256 = "x",
                                 .est_tokens = 1,
                                 .started_at = T0};
    rc = q_attempt_begin(db, &st, &aid, &num);
    ck_assert(rc == -EBUSY || rc == 0);
    qfix_add(db, "b", NULL, 0, T0);
    ck_assert_int_eq(q_tx_commit(db), 0);
    if (rc == 0)
        ck_assert_int_eq(aid, 0);
    ck_assert_int_eq(qfix_count(db, Q_JOB_QUEUED), 2);
    ck_assert_int_eq(q_attempts_list(db, a, -1, &at, &nat), 0);
    ck_assert_uint_eq(nat, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* How levels nest, whatever a backend sends when: an inner level rolled
 * back before any statement of it needed an answer leaves nothing (a
 * step, a tier's state), and a write after an inner level that did reach
 * the store and ended well belongs to the outer level and commits. */
START_TEST(test_levels_undo_and_keep_what_they_should)
{
    q_db *db = qfix_open(NULL);
    int64_t id = qfix_add(db, "a", NULL, 0, T0);
    struct q_tier_state st, got;
    struct q_job *jobs = NULL;
    struct q_step *steps = NULL;
    size_t n = 0;

    ck_assert_int_eq(q_tier_load(db, "free", &st), 0);
    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_claim(db, "w", T0, 60000, 1, &jobs, &n), 0);
    q_jobs_free(jobs, n);
    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(
        q_step_set(db, id, NULL, 0, Q_STEP_SUCCEEDED, "t", "gone", 1), 0);
    st.failures = 9;
    ck_assert_int_eq(q_tier_store(db, "free", &st), 0);
    q_tx_rollback(db);
    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_tier_load(db, "free", &got), 0);
    ck_assert_int_eq(got.failures, 0); /* the store was undone */
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_eq(
        q_step_set(db, id, NULL, 1, Q_STEP_SUCCEEDED, "t", "kept", 1), 0);
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_eq(q_steps_get(db, id, &steps, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(steps[0].index, 1);
    ck_assert_str_eq(steps[0].output, "kept");
    q_steps_free(steps, n);
    ck_assert_int_eq(q_tier_load(db, "free", &got), 0);
    ck_assert_int_eq(got.failures, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- real processes ------------------------------------------------- */

START_TEST(test_dedupe_across_processes)
{
    q_db *db = qfix_open(NULL); /* create and migrate before the race */
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
            if (q_open(qfix_location, NULL, &d) != 0)
                _exit(1);
            struct q_job_new s = qfix_job("same", "nightly-1", 0);
            struct q_enqueue_result r;
            int rc = q_enqueue(d, &s, 1, NULL, T0, &r);
            _exit(rc == 0 && q_close(d) == 0 ? 0 : 2);
        }
    }
    close(go[0]);
    close(go[1]);
    qfix_wait_children(pids, 8);
    db = qfix_open(NULL);
    ck_assert_int_eq(q_counts(db, counts, &park), 0);
    ck_assert_int_eq(counts[Q_JOB_QUEUED], 1);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

#define NJOBS 5000
#define NPROC 4

START_TEST(test_claim_exclusive_across_processes)
{
    q_db *db = qfix_open(NULL);
    struct q_job_new *v = xcalloc(NJOBS, sizeof(*v));
    struct q_enqueue_result *r = xcalloc(NJOBS, sizeof(*r));
    int64_t counts[Q_JOB_NSTATES], park;
    static unsigned char seen[NJOBS + 1];
    pid_t pids[NPROC];
    int fds[NPROC][2];

    for (int i = 0; i < NJOBS; i++)
        v[i] = qfix_job("j", NULL, 0);
    ck_assert_int_eq(q_enqueue(db, v, NJOBS, NULL, T0, r), 0);
    free(v);
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
            if (q_open(qfix_location, NULL, &d) != 0)
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
    qfix_wait_children(pids, NPROC);
    db = qfix_open(NULL);
    ck_assert_int_eq(q_counts(db, counts, &park), 0);
    ck_assert_int_eq(counts[Q_JOB_SUCCEEDED], NJOBS);
    ck_assert_int_eq(counts[Q_JOB_QUEUED] + counts[Q_JOB_RUNNING], 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_killed_claimer_jobs_run_elsewhere)
{
    q_db *db = qfix_open(NULL);
    int64_t counts[Q_JOB_NSTATES], park;
    struct q_job *got = NULL;
    size_t n = 0, done = 0;
    int ready[2], st;
    char c;
    pid_t pid;

    for (int i = 0; i < 10; i++)
        qfix_add(db, "j", NULL, 0, T0);
    ck_assert_int_eq(q_close(db), 0);
    ck_assert_int_eq(pipe(ready), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        q_db *d = NULL;
        close(ready[0]);
        if (q_open(qfix_location, NULL, &d) != 0 ||
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

    db = qfix_open(NULL);
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
    Suite *s = suite_create("queue contract: jobs");
    TCase *jobs = tcase_create("jobs");
    TCase *procs = tcase_create("processes");

    tcase_add_checked_fixture(jobs, qfix_setup, qfix_teardown);
    tcase_add_test(jobs, test_dedupe_returns_first_id);
    tcase_add_test(jobs, test_batch_ids_in_input_order);
    tcase_add_test(jobs, test_input_stored_with_the_job);
    tcase_add_test(jobs, test_wake_makes_queued_job_due);
    tcase_add_test(jobs, test_jobs_list_pages);
    tcase_add_test(jobs, test_reports_for_metrics);
    tcase_add_test(jobs, test_claim_order_priority_run_at_id);
    tcase_add_test(jobs, test_lease_ops_need_the_holder);
    tcase_add_test(jobs, test_expired_lease_is_claimed_again);
    tcase_add_test(jobs, test_cancel_states);
    tcase_add_test(jobs, test_cancel_ends_the_running_step);
    tcase_add_test(jobs, test_group_commit_rolls_back_whole);
    tcase_add_test(jobs, test_inner_failure_keeps_outer_work);
    tcase_add_test(jobs, test_levels_undo_and_keep_what_they_should);
    suite_add_tcase(s, jobs);

    tcase_add_checked_fixture(procs, qfix_setup, qfix_teardown);
    tcase_set_timeout(procs, 60);
    tcase_add_test(procs, test_dedupe_across_processes);
    tcase_add_test(procs, test_claim_exclusive_across_processes);
    tcase_add_test(procs, test_killed_claimer_jobs_run_elsewhere);
    suite_add_tcase(s, procs);
    return s;
}

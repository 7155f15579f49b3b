/* test_queue_contract_retry.c: the storage contract of a job's retry
 * (q_job_retry, q_retries_list), through queue/queue.h only, so that
 * every backend passes it (STEPQ_TEST_BACKEND picks the store). */
#include "tests/support/support.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "queue/park.h"
#include "tests/support/qfix.h"

/* One attempt of step idx by worker w, finished with outcome. */
static void
attempt(q_db *db, int64_t id, int idx, const char *outcome, int64_t at)
{
    struct q_attempt_start s = {id, idx,  "w",  NULL, "sha", 10,
                                at, NULL, NULL, NULL, NULL,  NULL};
    struct q_attempt_result r = {.status = 200,
                                 .outcome = outcome,
                                 .decision = "commit",
                                 .tokens = 10,
                                 .finished_at = at + 1};
    int64_t aid = 0;
    int num = 0;

    ck_assert_int_eq(q_attempt_begin(db, &s, &aid, &num), 0);
    ck_assert_int_eq(q_attempt_finish(db, aid, &r), 0);
}

/* A job whose step 0 succeeded, step 1 succeeded on its second attempt
 * and step 2 failed: the job failed with "bad". */
static int64_t
failed_job(q_db *db)
{
    int64_t id = qfix_add(db, "j", NULL, 0, T0);

    qfix_claim_one(db, id, "w", T0, 60000);
    attempt(db, id, 0, "ok", T0);
    ck_assert_int_eq(
        q_step_set(db, id, "w", 0, Q_STEP_SUCCEEDED, NULL, "o0", 0), 0);
    attempt(db, id, 1, "server_error", T0);
    attempt(db, id, 1, "ok", T0);
    ck_assert_int_eq(
        q_step_set(db, id, "w", 1, Q_STEP_SUCCEEDED, NULL, "o1", 0), 0);
    attempt(db, id, 2, "bad_request", T0);
    ck_assert_int_eq(q_step_set(db, id, "w", 2, Q_STEP_FAILED, NULL, NULL, 0),
                     0);
    ck_assert_int_eq(q_fail(db, id, "w", "bad", T0 + 10), 0);
    return id;
}

static struct q_retry_new
retry_of(int64_t id, int from)
{
    struct q_retry_new r = {.job_id = id,
                            .expect = Q_JOB_FAILED,
                            .from = from,
                            .by = "ana",
                            .now = T0 + 20,
                            .run_at = T0 + 30,
                            .deadline_at = T0 + 9000};
    return r;
}

START_TEST(test_retry_queues_from_a_step)
{
    q_db *db = qfix_open(NULL);
    int64_t id = failed_job(db), rid = 0;
    struct q_retry_new rn = retry_of(id, 1);
    struct q_job j = {0};
    struct q_step *st = NULL;
    struct q_attempt *a = NULL;
    size_t ns = 0, na = 0;

    ck_assert_int_eq(q_job_retry(db, &rn, &rid), 0);
    ck_assert_int_gt(rid, 0);
    ck_assert_int_eq(q_job_get(db, id, &j), 0);
    ck_assert_int_eq(j.state, Q_JOB_QUEUED);
    ck_assert_int_eq(j.run_at, T0 + 30);
    ck_assert_int_eq(j.deadline_at, T0 + 9000);
    ck_assert_int_eq(j.updated_at, T0 + 20);
    ck_assert_ptr_null(j.error);
    ck_assert_ptr_null(j.lease_owner);
    q_job_cleanup(&j);
    ck_assert_int_eq(q_steps_get(db, id, &st, &ns), 0);
    ck_assert_uint_eq(ns, 3);
    ck_assert_int_eq(st[0].state, Q_STEP_SUCCEEDED); /* before: kept */
    ck_assert_str_eq(st[0].output, "o0");
    ck_assert_int_eq(st[1].state, Q_STEP_PENDING); /* from here: again */
    ck_assert_ptr_null(st[1].output);
    ck_assert_int_eq(st[1].reset_after, 2); /* its attempts so far */
    ck_assert_int_eq(st[1].tokens, 20);     /* what they used stays */
    ck_assert_int_eq(st[2].state, Q_STEP_PENDING);
    ck_assert_int_eq(st[2].reset_after, 1);
    q_steps_free(st, ns);
    ck_assert_int_eq(q_attempts_list(db, id, -1, &a, &na), 0);
    ck_assert_uint_eq(na, 4); /* the ledger keeps every attempt */
    q_attempts_free(a, na);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_retry_recorded_and_listed)
{
    q_db *db = qfix_open(NULL);
    int64_t id = failed_job(db), other = qfix_add(db, "k", NULL, 0, T0), rid;
    struct q_retry_new rn = retry_of(id, 2);
    struct q_retry *r = NULL;
    size_t n = 9;

    ck_assert_int_eq(q_retries_list(db, id, &r, &n), 0);
    ck_assert_uint_eq(n, 0);
    q_retries_free(r, n);
    ck_assert_int_eq(q_job_retry(db, &rn, &rid), 0);
    ck_assert_int_eq(q_retries_list(db, id, &r, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(r[0].id, rid);
    ck_assert_int_eq(r[0].job_id, id);
    ck_assert_int_eq(r[0].from, 2);
    ck_assert_str_eq(r[0].by, "ana");
    ck_assert_int_eq(r[0].at, T0 + 20);
    ck_assert_int_eq(r[0].prior_state, Q_JOB_FAILED);
    ck_assert_str_eq(r[0].prior_error, "bad");
    q_retries_free(r, n);
    ck_assert_int_eq(q_retries_list(db, other, &r, &n), 0);
    ck_assert_uint_eq(n, 0);
    q_retries_free(r, n);
    q_retries_free(NULL, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Only a job still in the state the caller saw moves; nothing is
 * recorded otherwise. */
START_TEST(test_retry_refused_in_another_state)
{
    q_db *db = qfix_open(NULL);
    int64_t id = failed_job(db), queued = qfix_add(db, "q", NULL, 0, T0);
    struct q_retry_new rn = retry_of(id, 1);
    struct q_retry *r = NULL;
    int64_t rid = 0;
    size_t n = 0;

    ck_assert_int_eq(q_job_retry(db, &rn, &rid), 0);
    rid = 77;
    ck_assert_int_eq(q_job_retry(db, &rn, &rid), -EALREADY);
    ck_assert_int_eq(rid, 77); /* untouched on failure */
    rn.job_id = queued;
    ck_assert_int_eq(q_job_retry(db, &rn, &rid), -EALREADY);
    rn.job_id = 999;
    ck_assert_int_eq(q_job_retry(db, &rn, &rid), -ENOENT);
    ck_assert_int_eq(q_retries_list(db, id, &r, &n), 0);
    ck_assert_uint_eq(n, 1);
    q_retries_free(r, n);
    ck_assert_int_eq(qfix_state(db, queued), Q_JOB_QUEUED);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A retried job is claimed at its run_at, and its next attempt of a
 * reset step is numbered after the earlier ones. */
START_TEST(test_retried_job_claimed_when_due)
{
    q_db *db = qfix_open(NULL);
    int64_t id = failed_job(db), rid = 0, aid = 0;
    struct q_retry_new rn = retry_of(id, 1);
    struct q_attempt_start s = {id,      1,    "w2", NULL, "sha", 10,
                                T0 + 31, NULL, NULL, NULL, NULL,  NULL};
    struct q_job *got = NULL;
    size_t n = 0;
    int num = 0;

    ck_assert_int_eq(q_job_retry(db, &rn, &rid), 0);
    ck_assert_int_eq(q_claim(db, "w2", T0 + 29, 60000, 1, &got, &n), -ENOENT);
    qfix_claim_one(db, id, "w2", T0 + 30, 60000);
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid, &num), 0);
    ck_assert_int_eq(num, 3);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* An attempt a reset step left without result (parked in doubt, then
 * failed by an operator) ends with the retry: unknown, "retried". */
START_TEST(test_retry_closes_attempts_left_open)
{
    q_db *db = qfix_open(NULL);
    int64_t id = qfix_add(db, "j", NULL, 0, T0), aid = 0, rid = 0;
    struct q_attempt_start s = {id, 0,    "w",  NULL, "sha", 10,
                                T0, NULL, NULL, NULL, NULL,  NULL};
    struct q_retry_new rn = retry_of(id, 0);
    struct q_attempt *a = NULL;
    size_t na = 0;
    int num = 0;

    qfix_claim_one(db, id, "w", T0, 60000);
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid, &num), 0);
    ck_assert_int_eq(q_fail(db, id, "w", "failed by ana", T0 + 10), 0);
    ck_assert_int_eq(q_job_retry(db, &rn, &rid), 0);
    ck_assert_int_eq(q_attempts_list(db, id, -1, &a, &na), 0);
    ck_assert_uint_eq(na, 1);
    ck_assert_int_eq(a[0].finished_at, T0 + 20);
    ck_assert_str_eq(a[0].outcome, "unknown");
    ck_assert_str_eq(a[0].reason, "retried");
    q_attempts_free(a, na);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Four processes retry one failed job at once: exactly one wins. */
START_TEST(test_racing_retries_one_wins)
{
    q_db *db = qfix_open(NULL);
    int64_t id = failed_job(db);
    struct q_retry *r = NULL;
    pid_t pids[4];
    int won = 0;
    size_t n = 0;

    ck_assert_int_eq(q_close(db), 0); /* no connection across fork() */
    for (int i = 0; i < 4; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            struct q_retry_new rn = retry_of(id, 1);
            q_db *mine = NULL;
            int64_t rid;
            int rc;
            if (q_open(qfix_location, NULL, &mine) != 0)
                _exit(9);
            rc = q_job_retry(mine, &rn, &rid);
            q_close(mine);
            _exit(rc == 0 ? 0 : rc == -EALREADY ? 1 : 9);
        }
    }
    for (int i = 0; i < 4; i++) {
        int st;
        ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) <= 1);
        won += WEXITSTATUS(st) == 0;
    }
    ck_assert_int_eq(won, 1);
    db = qfix_open(NULL);
    ck_assert_int_eq(q_retries_list(db, id, &r, &n), 0);
    ck_assert_uint_eq(n, 1);
    q_retries_free(r, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("queue_contract_retry");
    TCase *tc = tcase_create("retry");

    tcase_add_checked_fixture(tc, qfix_setup, qfix_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_retry_queues_from_a_step);
    tcase_add_test(tc, test_retry_recorded_and_listed);
    tcase_add_test(tc, test_retry_refused_in_another_state);
    tcase_add_test(tc, test_retried_job_claimed_when_due);
    tcase_add_test(tc, test_retry_closes_attempts_left_open);
    tcase_add_test(tc, test_racing_retries_one_wins);
    suite_add_tcase(s, tc);
    return s;
}

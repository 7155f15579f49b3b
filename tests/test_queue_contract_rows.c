/* test_queue_contract_rows.c: the storage contract (queue/queue.h) for
 * what hangs off a job: step progress, the attempts ledger (charging and
 * kept bodies), tier state and the send log, park items and the
 * primitives of a resolution, when work is next due, and the reports;
 * also how a store is named. Only queue.h is used, so every backend must
 * pass it as it stands (tests/support/qfix.h says where the store is). */
#include "tests/support/support.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "queue/park.h"
#include "queue/queue.h"
#include "queue/report.h"
#include "queue/tiers.h"
#include "tests/support/qfix.h"

/* ---- locations ------------------------------------------------------ */

START_TEST(test_locations_refused_by_meaning)
{
    q_db *db = NULL;

    ck_assert_int_eq(q_open("", NULL, &db), -EINVAL);
    ck_assert_int_eq(q_open("sqlite:", NULL, &db), -EINVAL);
    ck_assert_int_eq(q_open("mysql://127.0.0.1/stepq", NULL, &db),
                     -EPROTONOSUPPORT); /* a backend this build lacks */
    ck_assert_int_eq(q_open_existing(qfix_location, NULL, &db), -ENOENT);
    ck_assert_ptr_null(db);
    db = qfix_open(NULL);
    ck_assert_int_eq(q_close(db), 0);
    ck_assert_int_eq(q_open_existing(qfix_location, NULL, &db), 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- steps and the ledger ------------------------------------------- */

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

    db = qfix_open(&o);
    id = qfix_add(db, "a", NULL, 0, T0);
    struct q_attempt_start s = {id, 0,    "w",  "free", "abc", 100,
                                T0, NULL, NULL, NULL,   NULL,  NULL};
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid1, &num), -EBUSY);
    ck_assert_int_eq(q_claim(db, "w", T0, 1000, 1, &got, &n), 0);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid1, &num), 0);
    ck_assert_int_eq(num, 1);
    struct q_attempt_result r = {
        429,  "hard_quota", "daily_cap", "switch_tier_replay",
        0,    41,           0,           "daily quota exceeded",
        20,   T0 + 41,      true,        false,
        true, false,        4200}; /* priced: 4,200 nano-dollars */
    ck_assert_int_eq(q_attempt_finish(db, aid1, &r), 0);
    ck_assert_int_eq(q_attempt_finish(db, aid1, &r), -EALREADY);
    s.tier = "local";
    s.route = "free: exhausted";
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid2, &num), 0);
    ck_assert_int_eq(num, 2);
    ck_assert_int_eq(q_attempts_list(db, id, -1, &a, &na), 0);
    ck_assert_uint_eq(na, 2);
    ck_assert_str_eq(a[0].body, "daily qu"); /* capped at 8 bytes */
    ck_assert_str_eq(a[0].outcome, "hard_quota");
    ck_assert(a[0].masked);         /* the answer held a secret */
    ck_assert(!a[1].masked);        /* no answer yet */
    ck_assert_ptr_null(a[0].route); /* the first choice */
    ck_assert_str_eq(a[1].route, "free: exhausted");
    ck_assert(a[0].priced && !a[0].cost_estimated);
    ck_assert_int_eq(a[0].cost_nusd, 4200);
    ck_assert(!a[1].priced);               /* no result, no cost */
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

/* An agent step's attempts (worker/agent*.c) keep their kind, and a tool
 * call's its call id, tool and arguments; a park item closed with an
 * answer (approved arguments, a question's answer) keeps it. */
START_TEST(test_agent_attempts_and_park_answer)
{
    q_db *db = qfix_open(NULL);
    int64_t id = qfix_add(db, "a", NULL, 0, T0), aid, pid = 0;
    struct q_job *got = NULL;
    struct q_attempt *a = NULL;
    struct q_park_item it;
    size_t n = 0;
    int num = 0;
    struct q_attempt_start turn = {
        .job_id = id, .worker = "w", .tier = "free", .kind = "turn"};
    struct q_attempt_start call = {.job_id = id,
                                   .worker = "w",
                                   .kind = "tool",
                                   .call_id = "call_1",
                                   .tool = "post_comment",
                                   .args = "{\"body\":\"hi\"}"};
    struct q_park_new p = {.job_id = id,
                           .step_name = "a",
                           .reason = "approval",
                           .request = "{\"call_id\":\"call_1\"}",
                           .parked_at = T0};
    struct q_park_close c = {.resolution = "approve",
                             .by = "ann",
                             .now = T0 + 1,
                             .answer = "{\"body\":\"edited\"}"};

    ck_assert_int_eq(q_claim(db, "w", T0, 60000, 1, &got, &n), 0);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_attempt_begin(db, &turn, &aid, &num), 0);
    ck_assert_int_eq(q_attempt_begin(db, &call, &aid, &num), 0);
    ck_assert_int_eq(q_attempts_list(db, id, 0, &a, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(a[0].kind, "turn");
    ck_assert_ptr_null(a[0].call_id);
    ck_assert_str_eq(a[1].kind, "tool");
    ck_assert_str_eq(a[1].call_id, "call_1");
    ck_assert_str_eq(a[1].tool, "post_comment");
    ck_assert_str_eq(a[1].args, "{\"body\":\"hi\"}");
    q_attempts_free(a, n);
    ck_assert_int_eq(q_park_add(db, &p, &pid), 0);
    ck_assert_int_eq(q_park_close(db, pid, &c), 0);
    ck_assert_int_eq(q_park_get(db, pid, &it), 0);
    ck_assert_str_eq(it.resolution, "approve");
    ck_assert_str_eq(it.answer, "{\"body\":\"edited\"}");
    q_park_item_cleanup(&it);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_kept_body_cut_on_a_character)
{
    struct q_open_opts o = {.keep_body_bytes = 3};
    q_db *db = qfix_open(&o);
    int64_t id = qfix_add(db, "a", NULL, 0, T0), aid;
    struct q_attempt_start s = {.job_id = id,
                                .worker = "w",
                                .request_sha256 = "x",
                                .started_at = T0,
                                NULL};
    struct q_attempt_result r = {.status = 500,
                                 .outcome = "server_error",
                                 .body = "ab\xc3\xa9z",
                                 .body_len = 5,
                                 .finished_at = T0 + 1};
    struct q_attempt *a = NULL;
    size_t na = 0;
    int num;

    qfix_claim_one(db, id, "w", T0, 60000);
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid, &num), 0);
    ck_assert_int_eq(q_attempt_finish(db, aid, &r), 0);
    ck_assert_int_eq(q_attempt_finish(db, aid + 99, &r), -ENOENT);
    ck_assert_int_eq(q_attempts_list(db, id, 0, &a, &na), 0);
    ck_assert_str_eq(a[0].body, "ab"); /* not half of the é */
    q_attempts_free(a, na);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_step_rows_set_and_read)
{
    q_db *db = qfix_open(NULL);
    int64_t id = qfix_add(db, "a", NULL, 0, T0);
    struct q_step *st = NULL;
    size_t n = 0;

    ck_assert_int_eq(q_steps_get(db, id, &st, &n), 0);
    ck_assert_uint_eq(n, 0); /* no row yet: every step pending */
    ck_assert_int_eq(
        q_step_set(db, id, NULL, 1, Q_STEP_SUCCEEDED, "local", "out", 7), 0);
    ck_assert_int_eq(
        q_step_set(db, id, NULL, 1, Q_STEP_SUCCEEDED, NULL, NULL, 3), 0);
    ck_assert_int_eq(q_steps_get(db, id, &st, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(st[0].index, 1);
    ck_assert_str_eq(st[0].tier, "local"); /* NULL keeps */
    ck_assert_str_eq(st[0].output, "out");
    ck_assert_int_eq(st[0].tokens, 10); /* added */
    q_steps_free(st, n);
    ck_assert_int_eq(
        q_step_set(db, id, NULL, 1, Q_STEP_SUCCEEDED, NULL, NULL, -99), 0);
    ck_assert_int_eq(q_steps_get(db, id, &st, &n), 0);
    ck_assert_int_eq(st[0].tokens, 0); /* never below 0 */
    q_steps_free(st, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A caller that corrects the estimate itself (with the commit's step
 * write) finds the charge untouched by the attempt's result. */
/* A worker whose lease expired and was taken by another writes nothing of
 * the job's steps, in a transaction or not (a stalled host that wakes up
 * with an answer in hand); the holder and a resolution (no worker) do. */
START_TEST(test_step_written_only_by_the_holder)
{
    q_db *db = qfix_open(NULL);
    int64_t id = qfix_add(db, "a", NULL, 0, T0);
    struct q_job *got = NULL;
    struct q_step *st = NULL;
    size_t n = 0;
    int rc;

    ck_assert_int_eq(q_claim(db, "wa", T0, 1000, 1, &got, &n), 0);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_step_set(db, id, "wa", 0, Q_STEP_RUNNING, NULL, "a", 1),
                     0);
    ck_assert_int_eq(q_claim(db, "wb", T0 + 5000, 60000, 1, &got, &n), 0);
    q_jobs_free(got, n);
    ck_assert_int_eq(
        q_step_set(db, id, "wa", 0, Q_STEP_SUCCEEDED, NULL, "late", 1), -EBUSY);
    ck_assert_int_eq(q_tx_begin(db), 0);
    rc = q_step_set(db, id, "wa", 0, Q_STEP_SUCCEEDED, NULL, "late", 1);
    ck_assert(rc == 0 || rc == -EBUSY); /* deferred: 0 till it is read */
    ck_assert_int_eq(q_step_set(db, id, "wb", 1, Q_STEP_PENDING, NULL, "b", 1),
                     0);
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_eq(q_step_set(db, id, NULL, 2, Q_STEP_FAILED, NULL, "c", 1),
                     0);
    ck_assert_int_eq(q_steps_get(db, id, &st, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(st[0].state, Q_STEP_RUNNING);
    ck_assert_str_eq(st[0].output, "a");
    ck_assert_int_eq(st[0].tokens, 1);
    ck_assert_str_eq(st[1].output, "b");
    ck_assert_str_eq(st[2].output, "c");
    q_steps_free(st, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_caller_corrects_the_estimate)
{
    q_db *db = qfix_open(NULL);
    int64_t id = qfix_add(db, "a", NULL, 0, T0), aid;
    struct q_attempt_start s = {id, 0,    "w",  "free", "abc", 100,
                                T0, NULL, NULL, NULL,   NULL,  NULL};
    struct q_attempt_result r = {.status = 200,
                                 .outcome = "ok",
                                 .tokens = 30,
                                 .finished_at = T0 + 1,
                                 .caller_corrects = true};
    struct q_step *st = NULL;
    size_t n = 0;
    int num;

    qfix_claim_one(db, id, "w", T0, 60000);
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid, &num), 0);
    ck_assert_int_eq(q_attempt_finish(db, aid, &r), 0);
    ck_assert_int_eq(q_steps_get(db, id, &st, &n), 0);
    ck_assert_int_eq(st[0].tokens, 100); /* still the estimate */
    q_steps_free(st, n);
    ck_assert_int_eq(
        q_step_set(db, id, NULL, 0, Q_STEP_SUCCEEDED, NULL, "o", -70), 0);
    ck_assert_int_eq(q_steps_get(db, id, &st, &n), 0);
    ck_assert_int_eq(st[0].tokens, 30);
    q_steps_free(st, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* With the caller correcting, a second result and an unknown attempt are
 * refused as without, and a worker that does not hold the job records
 * nothing. */
START_TEST(test_caller_corrects_refusals)
{
    q_db *db = qfix_open(NULL);
    int64_t id = qfix_add(db, "a", NULL, 0, T0), aid, other = 0;
    struct q_attempt_start s = {id, 0,    "w",  "free", "abc", 100,
                                T0, NULL, NULL, NULL,   NULL,  NULL};
    struct q_attempt_start x = {id, 0,    "x",  "free", "abc", 100,
                                T0, NULL, NULL, NULL,   NULL,  NULL};
    struct q_attempt_result r = {
        .status = 200, .outcome = "ok", .caller_corrects = true};
    struct q_attempt *a = NULL;
    size_t n = 0;
    int num;

    qfix_claim_one(db, id, "w", T0, 60000);
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid, &num), 0);
    ck_assert_int_eq(q_attempt_begin(db, &x, &other, &num), -EBUSY);
    ck_assert_int_eq(q_attempt_finish(db, aid, &r), 0);
    ck_assert_int_eq(q_attempt_finish(db, aid, &r), -EALREADY);
    ck_assert_int_eq(q_attempt_finish(db, aid + 99, &r), -ENOENT);
    ck_assert_int_eq(q_attempts_list(db, id, -1, &a, &n), 0);
    ck_assert_uint_eq(n, 1); /* x's attempt was not recorded */
    q_attempts_free(a, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A claimed job comes with its step rows, as q_steps_get reads them
 * (text that needs escaping on the way included). */
START_TEST(test_claim_brings_the_step_rows)
{
    q_db *db = qfix_open(NULL);
    int64_t a = qfix_add(db, "a", NULL, 5, T0),
            b = qfix_add(db, "b", NULL, 0, T0);
    const char *out = "\"quoted\"\n\u00e9t\u00e9 \\ {}";
    struct q_job *got = NULL;
    struct q_step *st = NULL;
    size_t n = 0, ns = 0;

    ck_assert_int_eq(
        q_step_set(db, a, NULL, 0, Q_STEP_SUCCEEDED, "free", out, 9), 0);
    ck_assert_int_eq(q_step_set(db, a, NULL, 2, Q_STEP_FAILED, NULL, NULL, 0),
                     0);
    ck_assert_int_eq(q_claim(db, "w", T0, 1000, 2, &got, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(got[0].id, a);
    ck_assert(got[0].has_steps && got[1].has_steps);
    ck_assert_uint_eq(got[1].nsteps, 0); /* b: no rows yet */
    ck_assert_int_eq(q_steps_get(db, a, &st, &ns), 0);
    ck_assert_uint_eq(got[0].nsteps, ns);
    for (size_t i = 0; i < ns; i++) {
        ck_assert_int_eq(got[0].steps[i].index, st[i].index);
        ck_assert_int_eq(got[0].steps[i].state, st[i].state);
        ck_assert_int_eq(got[0].steps[i].tokens, st[i].tokens);
        ck_assert_pstr_eq(got[0].steps[i].tier, st[i].tier);
        ck_assert_pstr_eq(got[0].steps[i].output, st[i].output);
    }
    ck_assert_str_eq(got[0].steps[0].output, out);
    ck_assert_int_eq(b, got[1].id);
    q_steps_free(st, ns);
    q_jobs_free(got, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Inside a transaction a backend may send writes with its next statement
 * (queue.h): they are seen by what the transaction reads next, and one
 * that fails takes the whole transaction with it. */
START_TEST(test_writes_in_a_transaction_are_kept_together)
{
    q_db *db = qfix_open(NULL);
    int64_t id = qfix_add(db, "a", NULL, 0, T0);
    struct q_step *st = NULL;
    size_t n = 0;
    int rc;

    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(
        q_step_set(db, id, NULL, 0, Q_STEP_SUCCEEDED, "free", "x", 4), 0);
    ck_assert_int_eq(q_steps_get(db, id, &st, &n), 0);
    ck_assert_uint_eq(n, 1); /* seen before the commit */
    q_steps_free(st, n);
    rc = q_step_set(db, id + 1000, NULL, 0, Q_STEP_SUCCEEDED, NULL, "y", 0);
    if (rc == 0)
        rc = q_tx_commit(db); /* the failure surfaces here */
    else
        q_tx_rollback(db);
    ck_assert_int_ne(rc, 0); /* no such job */
    ck_assert_int_eq(q_steps_get(db, id, &st, &n), 0);
    ck_assert_uint_eq(n, 0); /* nothing of it was kept */
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Rolling back a nested level undoes what it did, a failed write among
 * it included (found at once, or when the level ends where writes are
 * deferred), and the outer level commits what it did itself. */
START_TEST(test_inner_rollback_undoes_its_failed_write)
{
    q_db *db = qfix_open(NULL);
    int64_t id = qfix_add(db, "a", NULL, 0, T0);
    struct q_step *st = NULL;
    size_t n = 0;
    int rc;

    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_step_set(db, id, NULL, 0, Q_STEP_SUCCEEDED, "t", "o", 1),
                     0);
    ck_assert_int_eq(q_tx_begin(db), 0);
    /* no such job: refused at once, or found when the level ends */
    rc = q_step_set(db, id + 99, NULL, 0, Q_STEP_FAILED, NULL, NULL, 0);
    (void)rc;
    q_tx_rollback(db);
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_eq(q_steps_get(db, id, &st, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(st[0].output, "o");
    q_steps_free(st, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* An attempt recorded in a transaction has its id and number by the
 * commit at the latest; one for a job the worker does not hold gets
 * none (-EBUSY, or an id that stays 0 where the record is deferred). */
START_TEST(test_attempt_recorded_in_a_transaction)
{
    q_db *db = qfix_open(NULL);
    int64_t a = qfix_add(db, "a", NULL, 1, T0);
    int64_t b = qfix_add(db, "b", NULL, 0, T0), ida = -1, idb = -1;
    struct q_attempt_start sa = {a,  0,    "w",  "free", "abc", 10,
                                 T0, NULL, NULL, NULL,   NULL,  NULL};
    struct q_attempt_start sb = {b,  0,    "w",  "free", "abc", 10,
                                 T0, NULL, NULL, NULL,   NULL,  NULL};
    struct q_job *got = NULL;
    struct q_attempt *at = NULL;
    size_t n = 0, na = 0;
    int numa = -1, numb = -1, rc;

    ck_assert_int_eq(q_claim(db, "w", T0, 1000, 1, &got, &n), 0); /* a */
    q_jobs_free(got, n);
    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_attempt_begin(db, &sa, &ida, &numa), 0);
    rc = q_attempt_begin(db, &sb, &idb, &numb);
    ck_assert(rc == 0 || rc == -EBUSY);
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_gt(ida, 0);
    ck_assert_int_eq(numa, 1);
    if (rc == 0)
        ck_assert_int_eq(idb, 0);
    ck_assert_int_eq(q_attempts_list(db, a, -1, &at, &na), 0);
    ck_assert_uint_eq(na, 1);
    ck_assert_int_eq(at[0].id, ida);
    q_attempts_free(at, na);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- tier state ----------------------------------------------------- */

START_TEST(test_tier_state_round_trip)
{
    q_db *db = qfix_open(NULL);
    struct q_tier_state st, got;

    ck_assert_int_eq(q_tier_load(db, "free", &st), 0);
    ck_assert(st.pace == 1.0 && st.doubt); /* nothing known yet */
    ck_assert_int_eq(st.breaker, Q_BREAKER_CLOSED);
    ck_assert_int_eq(st.usage.last_s, 0);
    ck_assert_int_eq(st.flight.n, 0);
    ck_assert_int_eq(st.flight.probe_until, 0);
    st.breaker = Q_BREAKER_OPEN;
    st.failures = 5;
    st.open_until = T0 + 30000;
    strcpy(st.exhausted_reason, "daily_cap");
    st.req_tat = 12.5;
    st.pace = 0.7;
    st.learned_rpm = 60;
    st.doubt = false;
    ck_assert_int_eq(q_tier_store(db, "free", &st), 0);
    ck_assert_int_eq(q_tier_load(db, "free", &got), 0);
    ck_assert_int_eq(got.breaker, Q_BREAKER_OPEN);
    ck_assert_int_eq(got.failures, 5);
    ck_assert_int_eq(got.open_until, T0 + 30000);
    ck_assert_str_eq(got.exhausted_reason, "daily_cap");
    ck_assert(got.req_tat == 12.5 && got.pace == 0.7 && !got.doubt);
    ck_assert_int_eq(got.learned_rpm, 60);
    /* What the loader above the store derives is not stored: not across a
     * commit, nor in the transaction that stored it. */
    st.window_requests = st.window_tokens = st.in_flight = 7;
    st.probe_in_flight = true;
    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_tier_store(db, "free", &st), 0);
    ck_assert_int_eq(q_tier_load(db, "free", &got), 0);
    ck_assert(got.window_requests == 0 && got.window_tokens == 0 &&
              got.in_flight == 0 && !got.probe_in_flight);
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_eq(q_tier_load(db, "free", &got), 0);
    ck_assert(got.window_requests == 0 && got.in_flight == 0 &&
              !got.probe_in_flight);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Tier state stored inside a transaction is what the transaction reads
 * next; a rolled back level (however deep) puts back what its parent had
 * stored, and the commit keeps the last store, also of a transaction that
 * stored and read nothing else. */
static int
failures_in(q_db *db)
{
    struct q_tier_state st;

    ck_assert_int_eq(q_tier_load(db, "free", &st), 0);
    return st.failures;
}

static void
store_failures(q_db *db, int failures)
{
    struct q_tier_state st;

    ck_assert_int_eq(q_tier_load(db, "free", &st), 0);
    st.failures = failures;
    st.doubt = false;
    ck_assert_int_eq(q_tier_store(db, "free", &st), 0);
}

START_TEST(test_tier_state_in_a_transaction)
{
    q_db *db = qfix_open(NULL);
    struct q_tier_state st;

    ck_assert_int_eq(q_tx_begin(db), 0);
    store_failures(db, 1);
    ck_assert_int_eq(q_tx_begin(db), 0);
    store_failures(db, 2);
    ck_assert_int_eq(failures_in(db), 2);
    q_tx_rollback(db);
    ck_assert_int_eq(failures_in(db), 1);
    /* Levels deeper than any a backend keeps state for (the SQLite
     * backend notes 32 levels' undo, then writes through). */
    for (int i = 0; i < 40; i++) {
        ck_assert_int_eq(q_tx_begin(db), 0);
        store_failures(db, 10 + i);
    }
    for (int i = 39; i >= 0; i--) {
        if (i == 2)
            ck_assert_int_eq(failures_in(db), 12);
        if (i >= 2)
            q_tx_rollback(db);
        else
            ck_assert_int_eq(q_tx_commit(db), 0);
    }
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_eq(failures_in(db), 11);

    ck_assert_int_eq(q_tier_load(db, "free", &st), 0);
    st.failures = 42;
    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_tier_store(db, "free", &st), 0); /* only a store */
    ck_assert_int_eq(q_tx_commit(db), 0);
    ck_assert_int_eq(failures_in(db), 42);
    ck_assert_int_eq(q_tx_begin(db), 0);
    store_failures(db, 99);
    q_tx_rollback(db);
    ck_assert_int_eq(failures_in(db), 42);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* What a tier used and has in flight is stored with its row and read back
 * as it was: every second of the minute, counts at their limits, a full
 * flight with a probe out, and none at all. */
START_TEST(test_tier_usage_and_flight_round_trip)
{
    q_db *db = qfix_open(NULL);
    struct q_tier_state st, got;

    ck_assert_int_eq(q_tier_load(db, "free", &st), 0);
    st.usage.last_s = T0 / 1000;
    for (int i = 0; i < Q_TIER_USAGE_SLOTS; i++) {
        st.usage.requests[i] = (uint32_t)i * 1000u + 1u;
        st.usage.tokens[i] = UINT32_MAX - (uint32_t)i;
    }
    st.flight.probe_until = T0 + 40000;
    st.flight.n = Q_TIER_FLIGHT_MAX;
    for (int i = 0; i < Q_TIER_FLIGHT_MAX; i++) {
        st.flight.at[i] = T0 / 1000 + 7 * i + 1;
        st.flight.count[i] = i == 0 ? UINT32_MAX : (uint32_t)i;
    }
    ck_assert_int_eq(q_tier_store(db, "free", &st), 0);
    ck_assert_int_eq(q_tier_load(db, "free", &got), 0);
    ck_assert_mem_eq(&got.usage, &st.usage, sizeof(st.usage));
    qfix_same_flight(&got.flight, &st.flight);
    memset(&st.usage, 0, sizeof(st.usage));
    memset(&st.flight, 0, sizeof(st.flight));
    ck_assert_int_eq(q_tier_store(db, "free", &st), 0);
    ck_assert_int_eq(q_tier_load(db, "free", &got), 0);
    ck_assert_mem_eq(&got.usage, &st.usage, sizeof(st.usage));
    qfix_same_flight(&got.flight, &st.flight);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- park items and resolution primitives --------------------------- */

/* Parks job id's step 0 as worker w would; returns the item's id. */
static int64_t
park_one(q_db *db, int64_t id, const char *reason)
{
    struct q_park_new p = {.job_id = id,
                           .step_name = "post",
                           .reason = reason,
                           .attempts = 1,
                           .error = "HTTP 402",
                           .parked_at = T0 + 5};
    int64_t pid = 0;

    qfix_claim_one(db, id, "w", T0, 60000);
    ck_assert_int_eq(q_park_add(db, &p, &pid), 0);
    ck_assert_int_eq(q_park_job(db, id, "w", T0 + 5), 0);
    return pid;
}

START_TEST(test_park_items_listed_and_closed_once)
{
    q_db *db = qfix_open(NULL);
    int64_t a = qfix_add(db, "a", NULL, 0, T0),
            b = qfix_add(db, "b", NULL, 0, T0);
    int64_t pa = park_one(db, a, "hard_quota"),
            pb = park_one(db, b, "in_doubt");
    struct q_park_filter f = {.reason = "in_doubt"};
    struct q_park_close c = {.resolution = "skip", .by = "bo", .now = T0 + 9};
    struct q_park_item *v = NULL, it;
    size_t n = 0;

    ck_assert_int_eq(qfix_state(db, a), Q_JOB_PARKED);
    ck_assert_int_eq(q_park_list(db, &f, &v, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(v[0].id, pb);
    q_park_items_free(v, n);
    ck_assert_int_eq(q_park_close(db, pa, &c), 0);
    ck_assert_int_eq(q_park_close(db, pa, &c), -EALREADY);
    ck_assert_int_eq(q_park_close(db, 999, &c), -ENOENT);
    ck_assert_int_eq(q_park_get(db, pa, &it), 0);
    ck_assert(!it.open);
    ck_assert_str_eq(it.resolution, "skip");
    ck_assert_str_eq(it.resolved_by, "bo");
    q_park_item_cleanup(&it);
    /* the resolved since a time (the report's), whatever all says */
    f = (struct q_park_filter){.resolved_since = T0 + 9};
    ck_assert_int_eq(q_park_list(db, &f, &v, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(v[0].id, pa);
    q_park_items_free(v, n);
    f.resolved_since = T0 + 10;
    ck_assert_int_eq(q_park_list(db, &f, &v, &n), 0);
    ck_assert_uint_eq(n, 0);
    q_park_items_free(v, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_parked_job_goes_on_once)
{
    q_db *db = qfix_open(NULL);
    int64_t a = qfix_add(db, "a", NULL, 0, T0),
            b = qfix_add(db, "b", NULL, 0, T0);
    struct q_step_reset r = {
        .state = Q_STEP_PENDING, .reset_after = 1, .pin_tier = "local"};
    struct q_job j = {0};
    struct q_step *st = NULL;
    size_t n = 0;

    park_one(db, a, "hard_quota");
    park_one(db, b, "hard_quota");
    ck_assert_int_eq(q_job_requeue_parked(db, a, T0 + 9, T0 + 700, T0 + 5000),
                     0);
    ck_assert_int_eq(q_job_requeue_parked(db, a, T0 + 9, T0 + 9, T0 + 5000),
                     -EALREADY);
    /* due when asked (an operator's "not before"), with the deadline given,
     * changed now */
    ck_assert_int_eq(q_job_get(db, a, &j), 0);
    ck_assert_int_eq(j.run_at, T0 + 700);
    ck_assert_int_eq(j.deadline_at, T0 + 5000);
    ck_assert_int_eq(j.updated_at, T0 + 9);
    q_job_cleanup(&j);
    ck_assert_int_eq(q_step_reset(db, a, 0, &r), 0);
    ck_assert_int_eq(q_steps_get(db, a, &st, &n), 0);
    ck_assert_int_eq(st[0].state, Q_STEP_PENDING);
    ck_assert_int_eq(st[0].reset_after, 1);
    ck_assert_str_eq(st[0].pin_tier, "local");
    q_steps_free(st, n);
    ck_assert_int_eq(qfix_state(db, a), Q_JOB_QUEUED);
    ck_assert_int_eq(q_job_end_parked(db, a, Q_JOB_FAILED, "no", T0 + 9),
                     -EALREADY);
    ck_assert_int_eq(q_job_end_parked(db, b, Q_JOB_QUEUED, NULL, T0 + 9),
                     -EINVAL);
    ck_assert_int_eq(
        q_job_end_parked(db, b, Q_JOB_FAILED, "failed by bo", T0 + 9), 0);
    ck_assert_int_eq(q_job_get(db, b, &j), 0);
    ck_assert_int_eq(j.state, Q_JOB_FAILED);
    ck_assert_str_eq(j.error, "failed by bo");
    q_job_cleanup(&j);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- when work is due, reclaim, reports ----------------------------- */

START_TEST(test_next_due_and_reclaim)
{
    q_db *db = qfix_open(NULL);
    struct q_enqueue_opts later = {.has_run_at = true, .run_at = T0 + 5000};
    struct q_job_new j = qfix_job("later", NULL, 0);
    struct q_enqueue_result r;
    int64_t at = 0, n = -1, id;

    ck_assert_int_eq(q_next_due(db, T0, &at), -ENOENT);
    ck_assert_int_eq(q_enqueue(db, &j, 1, &later, T0, &r), 0);
    ck_assert_int_eq(q_next_due(db, T0, &at), 0);
    ck_assert_int_eq(at, T0 + 5000);
    id = qfix_add(db, "now", NULL, 0, T0);
    qfix_claim_one(db, id, "w", T0, 60000); /* lease ends at T0 + 60000 */
    ck_assert_int_eq(q_next_due(db, T0, &at), 0);
    ck_assert_int_eq(at, T0 + 5000);
    ck_assert_int_eq(q_reclaim(db, T0 + 60000, &n), 0);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(q_reclaim(db, T0 + 60001, &n), 0);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(qfix_state(db, id), Q_JOB_QUEUED);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_reports_count_the_ledger_and_park)
{
    q_db *db = qfix_open(NULL);
    int64_t id = qfix_add(db, "nightly", NULL, 0, T0), aid,
            counts[Q_JOB_NSTATES];
    struct q_attempt_start s = {.job_id = id,
                                .worker = "w",
                                .tier = "free",
                                .request_sha256 = "x",
                                .started_at = T0,
                                NULL};
    struct q_attempt_group *g = NULL;
    struct q_park_brief *pb = NULL;
    size_t ng = 0, np = 0;
    int64_t park_open = -1;
    int num;

    qfix_claim_one(db, id, "w", T0, 60000);
    ck_assert_int_eq(q_attempt_begin(db, &s, &aid, &num), 0);
    ck_assert_int_eq(q_stats_attempts(db, &g, &ng), 0);
    ck_assert_uint_eq(ng, 0); /* in flight: counted once it ends */
    ck_assert_ptr_null(g);
    struct q_park_new p = {.job_id = id,
                           .step_name = "a",
                           .reason = "in_doubt",
                           .tier = "free",
                           .parked_at = T0};
    ck_assert_int_eq(q_park_add(db, &p, &aid), 0);
    ck_assert_int_eq(q_park_job(db, id, "w", T0), 0);
    ck_assert_int_eq(q_stats_park_open(db, 0, &pb, &np), 0);
    ck_assert_uint_eq(np, 1);
    ck_assert_str_eq(pb[0].job_name, "nightly");
    ck_assert_str_eq(pb[0].reason, "in_doubt");
    q_park_briefs_free(pb, np);
    ck_assert_int_eq(q_counts(db, counts, &park_open), 0);
    ck_assert_int_eq(counts[Q_JOB_PARKED], 1);
    ck_assert_int_eq(park_open, 1);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("queue contract: rows");
    TCase *open = tcase_create("locations");
    TCase *ledger = tcase_create("ledger");
    TCase *tiers = tcase_create("tiers");
    TCase *park = tcase_create("park");
    TCase *due = tcase_create("due and reports");

    tcase_add_checked_fixture(open, qfix_setup, qfix_teardown);
    tcase_add_test(open, test_locations_refused_by_meaning);
    suite_add_tcase(s, open);
    tcase_add_checked_fixture(ledger, qfix_setup, qfix_teardown);
    tcase_add_test(ledger, test_attempts_recorded_before_and_after);
    tcase_add_test(ledger, test_kept_body_cut_on_a_character);
    tcase_add_test(ledger, test_agent_attempts_and_park_answer);
    tcase_add_test(ledger, test_step_rows_set_and_read);
    tcase_add_test(ledger, test_step_written_only_by_the_holder);
    tcase_add_test(ledger, test_caller_corrects_the_estimate);
    tcase_add_test(ledger, test_caller_corrects_refusals);
    tcase_add_test(ledger, test_claim_brings_the_step_rows);
    tcase_add_test(ledger, test_writes_in_a_transaction_are_kept_together);
    tcase_add_test(ledger, test_attempt_recorded_in_a_transaction);
    tcase_add_test(ledger, test_inner_rollback_undoes_its_failed_write);
    suite_add_tcase(s, ledger);
    tcase_add_checked_fixture(tiers, qfix_setup, qfix_teardown);
    tcase_add_test(tiers, test_tier_state_round_trip);
    tcase_add_test(tiers, test_tier_usage_and_flight_round_trip);
    tcase_add_test(tiers, test_tier_state_in_a_transaction);
    suite_add_tcase(s, tiers);
    tcase_add_checked_fixture(park, qfix_setup, qfix_teardown);
    tcase_add_test(park, test_park_items_listed_and_closed_once);
    tcase_add_test(park, test_parked_job_goes_on_once);
    suite_add_tcase(s, park);
    tcase_add_checked_fixture(due, qfix_setup, qfix_teardown);
    tcase_add_test(due, test_next_due_and_reclaim);
    tcase_add_test(due, test_reports_count_the_ledger_and_park);
    suite_add_tcase(s, due);
    return s;
}

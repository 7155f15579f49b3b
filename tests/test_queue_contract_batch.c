/* test_queue_contract_batch.c: the storage contract (queue/queue.h) for
 * the batches of a tier in batch mode: a batch recorded before it is
 * sent with its items (ledger attempts), found again by its tier while
 * not done, its provider id kept, its state moving forward only, held by
 * one worker until its lease ends, an item finished when its attempt is,
 * and an item or key twice refused. Only queue.h is used, so every
 * backend must pass it. */
#include "tests/support/support.h"

#include <errno.h>
#include <stdlib.h>

#include "queue/batch.h"
#include "queue/queue.h"
#include "tests/support/qfix.h"

/* Claims a new job for "w" and records one attempt of its step 0. */
static int64_t
attempt_of(q_db *db, const char *name, int64_t *job)
{
    struct q_attempt_start st = {.worker = "w",
                                 .tier = "cheap",
                                 .request_sha256 = "x",
                                 .started_at = T0};
    int64_t aid = 0;
    int num = 0;

    *job = qfix_add(db, name, NULL, 0, T0);
    qfix_claim_one(db, *job, "w", T0, 60000);
    st.job_id = *job;
    ck_assert_int_eq(q_attempt_begin(db, &st, &aid, &num), 0);
    return aid;
}

START_TEST(test_batch_recorded_with_its_items)
{
    q_db *db = qfix_open(NULL);
    int64_t j1, j2, a1 = attempt_of(db, "a", &j1),
                    a2 = attempt_of(db, "b", &j2);
    int64_t id = 0, of = 0;
    struct q_batch *b = NULL;
    struct q_batch_item *it = NULL;
    size_t n = 0;

    ck_assert_int_eq(
        q_batch_create(db, "cheap", "openai", "k1", "w", T0 + 1000, T0, &id),
        0);
    ck_assert_int_eq(q_batch_item_add(db, id, a1, j1, 0), 0);
    ck_assert_int_eq(q_batch_item_add(db, id, a2, j2, 0), 0);
    ck_assert_int_eq(q_batches_open(db, "cheap", &b, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(b[0].id, id);
    ck_assert_str_eq(b[0].api, "openai");
    ck_assert_str_eq(b[0].key, "k1");
    ck_assert_str_eq(b[0].worker, "w");
    ck_assert_ptr_null(b[0].provider_id);
    ck_assert_int_eq(b[0].state, Q_BATCH_SUBMITTING);
    ck_assert_int_eq(b[0].items, 2);
    ck_assert_int_eq(b[0].created_at, T0);
    q_batches_free(b, n);
    ck_assert_int_eq(q_batches_open(db, "other", &b, &n), 0);
    ck_assert_uint_eq(n, 0);
    q_batches_free(b, n);
    ck_assert_int_eq(q_batch_items(db, id, &it, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(it[0].attempt_id, a1 < a2 ? a1 : a2);
    ck_assert(!it[0].finished && !it[1].finished);
    free(it);
    ck_assert_int_eq(q_batch_of_attempt(db, a2, &of), 0);
    ck_assert_int_eq(of, id);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_item_finished_with_its_attempt)
{
    q_db *db = qfix_open(NULL);
    int64_t j1, a1 = attempt_of(db, "a", &j1), id = 0;
    struct q_attempt_result r = {.status = 200,
                                 .outcome = "ok",
                                 .decision = "commit",
                                 .finished_at = T0 + 5};
    struct q_batch_item *it = NULL;
    size_t n = 0;

    ck_assert_int_eq(
        q_batch_create(db, "cheap", "anthropic", "k", "w", T0, T0, &id), 0);
    ck_assert_int_eq(q_batch_item_add(db, id, a1, j1, 0), 0);
    ck_assert_int_eq(q_attempt_finish(db, a1, &r), 0);
    ck_assert_int_eq(q_batch_items(db, id, &it, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert(it[0].finished);
    ck_assert_int_eq(it[0].job_id, j1);
    ck_assert_int_eq(it[0].step, 0);
    free(it);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* An item's realtime cost kept, and the report per tier: only settled
 * items whose attempt finished in the window, with their ledger cost. */
START_TEST(test_report_of_settled_items)
{
    q_db *db = qfix_open(NULL);
    int64_t j1, j2, a1 = attempt_of(db, "a", &j1),
                    a2 = attempt_of(db, "b", &j2);
    int64_t id = 0;
    struct q_attempt_result r = {.status = 200,
                                 .outcome = "ok",
                                 .decision = "commit",
                                 .finished_at = T0 + 5,
                                 .priced = true,
                                 .cost_nusd = 300};
    struct q_report_batch *rep = NULL;
    size_t n = 0;

    ck_assert_int_eq(
        q_batch_create(db, "cheap", "openai", "k", "w", T0, T0, &id), 0);
    ck_assert_int_eq(q_batch_item_add(db, id, a1, j1, 0), 0);
    ck_assert_int_eq(q_batch_item_add(db, id, a2, j2, 0), 0);
    ck_assert_int_eq(q_attempt_finish(db, a1, &r), 0);
    ck_assert_int_eq(q_attempt_finish(db, a2, &r), 0);
    ck_assert_int_eq(q_batch_item_settle(db, a1, 600), 0);
    ck_assert_int_eq(q_batch_item_settle(db, a2 + 100, 600), -ENOENT);
    ck_assert_int_eq(q_batch_item_settle(db, a2, -1), -EINVAL);
    ck_assert_int_eq(q_report_batches(db, T0, &rep, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(rep[0].tier, "cheap");
    ck_assert_int_eq(rep[0].items, 1); /* a2 has no realtime cost */
    ck_assert_int_eq(rep[0].cost_nusd, 300);
    ck_assert_int_eq(rep[0].realtime_nusd, 600);
    q_report_batches_free(rep, n);
    ck_assert_int_eq(q_report_batches(db, T0 + 6, &rep, &n), 0);
    ck_assert_uint_eq(n, 0);
    q_report_batches_free(rep, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_provider_id_and_state_forward_only)
{
    q_db *db = qfix_open(NULL);
    int64_t id = 0;
    struct q_batch *b = NULL;
    size_t n = 0;
    struct q_batch_set s = {.worker = "w",
                            .lease_until = T0 + 100,
                            .state = Q_BATCH_SUBMITTED,
                            .provider_id = "batch_1",
                            .now = T0 + 1};

    ck_assert_int_eq(
        q_batch_create(db, "cheap", "openai", "k", "w", T0 + 100, T0, &id), 0);
    ck_assert_int_eq(q_batch_set(db, id, &s), 0);
    /* NULL keeps the provider id; a state never goes back */
    s = (struct q_batch_set){.worker = "w",
                             .lease_until = T0 + 200,
                             .state = Q_BATCH_ENDED,
                             .now = T0 + 2};
    ck_assert_int_eq(q_batch_set(db, id, &s), 0);
    s.state = Q_BATCH_SUBMITTED;
    ck_assert_int_eq(q_batch_set(db, id, &s), -EBUSY);
    ck_assert_int_eq(q_batches_open(db, "cheap", &b, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(b[0].provider_id, "batch_1");
    ck_assert_int_eq(b[0].state, Q_BATCH_ENDED);
    ck_assert_int_eq(b[0].lease_until, T0 + 200);
    q_batches_free(b, n);
    /* done: no longer open */
    s.state = Q_BATCH_DONE;
    ck_assert_int_eq(q_batch_set(db, id, &s), 0);
    ck_assert_int_eq(q_batches_open(db, "cheap", &b, &n), 0);
    ck_assert_uint_eq(n, 0);
    q_batches_free(b, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_held_by_one_worker_until_its_lease_ends)
{
    q_db *db = qfix_open(NULL);
    int64_t id = 0;
    struct q_batch_set s = {.worker = "v",
                            .lease_until = T0 + 5000,
                            .state = Q_BATCH_SUBMITTING,
                            .now = T0 + 10};
    struct q_batch *b = NULL;
    size_t n = 0;

    ck_assert_int_eq(
        q_batch_create(db, "cheap", "openai", "k", "w", T0 + 100, T0, &id), 0);
    ck_assert_int_eq(q_batch_set(db, id, &s), -EBUSY); /* w holds it */
    s.now = T0 + 100;                                  /* w's lease ended */
    ck_assert_int_eq(q_batch_set(db, id, &s), 0);
    s = (struct q_batch_set){.worker = "w",
                             .lease_until = T0 + 9000,
                             .state = Q_BATCH_SUBMITTED,
                             .now = T0 + 200};
    ck_assert_int_eq(q_batch_set(db, id, &s), -EBUSY);     /* now v does */
    ck_assert_int_eq(q_batch_set(db, 999999, &s), -EBUSY); /* unknown */
    ck_assert_int_eq(q_batches_open(db, "cheap", &b, &n), 0);
    ck_assert_str_eq(b[0].worker, "v");
    q_batches_free(b, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_twice_and_bad_arguments_refused)
{
    q_db *db = qfix_open(NULL);
    int64_t j1, a1 = attempt_of(db, "a", &j1), id = 0, id2 = 0, of = 0;
    struct q_batch_set s = {.worker = "w", .state = 7, .now = T0};

    ck_assert_int_eq(
        q_batch_create(db, "cheap", "openai", "k", "w", T0, T0, &id), 0);
    ck_assert_int_eq(
        q_batch_create(db, "cheap", "openai", "k", "w", T0, T0, &id2), -EEXIST);
    ck_assert_int_eq(
        q_batch_create(db, "cheap", "openai", "", "w", T0, T0, &id2), -EINVAL);
    ck_assert_int_eq(
        q_batch_create(db, NULL, "openai", "k2", "w", T0, T0, &id2), -EINVAL);
    ck_assert_int_eq(q_batch_item_add(db, id, a1, j1, 0), 0);
    ck_assert_int_eq(q_batch_item_add(db, id, a1, j1, 0), -EEXIST);
    ck_assert_int_eq(q_batch_item_add(db, id + 100, a1 + 100, j1, 0), -ENOENT);
    ck_assert_int_eq(q_batch_item_add(db, id, 0, j1, 0), -EINVAL);
    ck_assert_int_eq(q_batch_set(db, id, &s), -EINVAL);
    ck_assert_int_eq(q_batch_of_attempt(db, a1 + 100, &of), -ENOENT);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_rolled_back_batch_is_gone)
{
    q_db *db = qfix_open(NULL);
    int64_t id = 0;
    struct q_batch *b = NULL;
    size_t n = 0;

    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(
        q_batch_create(db, "cheap", "openai", "k", "w", T0, T0, &id), 0);
    q_tx_rollback(db);
    ck_assert_int_eq(q_batches_open(db, "cheap", &b, &n), 0);
    ck_assert_uint_eq(n, 0);
    q_batches_free(b, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("queue contract: batches");
    TCase *rows = tcase_create("rows");

    tcase_add_checked_fixture(rows, qfix_setup, qfix_teardown);
    tcase_add_test(rows, test_batch_recorded_with_its_items);
    tcase_add_test(rows, test_item_finished_with_its_attempt);
    tcase_add_test(rows, test_provider_id_and_state_forward_only);
    tcase_add_test(rows, test_report_of_settled_items);
    tcase_add_test(rows, test_held_by_one_worker_until_its_lease_ends);
    tcase_add_test(rows, test_twice_and_bad_arguments_refused);
    tcase_add_test(rows, test_rolled_back_batch_is_gone);
    suite_add_tcase(s, rows);
    return s;
}

/* test_queue_contract_operators.c: the storage contract (queue/queue.h)
 * for named operators and the audit trail: an operator added once (a
 * second of the same name is -EEXIST), listed by name with its hash,
 * rotated and removed (an unknown name is -ENOENT); audit rows listed
 * oldest first, by time, job and item; an audit row inside a transaction
 * rolled back is gone; bad arguments are -EINVAL. Only queue.h is used,
 * so every backend must pass it. */
#include "tests/support/support.h"

#include <errno.h>
#include <string.h>

#include "queue/audit.h"
#include "queue/queue.h"
#include "tests/support/qfix.h"

#define HASH_A                                                                 \
    "aaaa000000000000000000000000000000000000000000000000000000000001"
#define HASH_B                                                                 \
    "bbbb000000000000000000000000000000000000000000000000000000000002"

START_TEST(test_operator_added_once_and_listed_by_name)
{
    q_db *db = qfix_open(NULL);
    struct q_operator *o = NULL;
    size_t n = 0;

    ck_assert_int_eq(q_operator_add(db, "zoe", "viewer", HASH_A, T0), 0);
    ck_assert_int_eq(q_operator_add(db, "ana", "admin", HASH_B, T0 + 1), 0);
    ck_assert_int_eq(q_operator_add(db, "ana", "viewer", HASH_A, T0 + 2),
                     -EEXIST);
    ck_assert_int_eq(q_operators_list(db, &o, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(o[0].name, "ana");
    ck_assert_str_eq(o[0].role, "admin"); /* the second add changed nothing */
    ck_assert_str_eq(o[0].token_sha256, HASH_B);
    ck_assert_int_eq(o[0].created_at, T0 + 1);
    ck_assert_int_eq(o[0].rotated_at, T0 + 1);
    ck_assert_str_eq(o[1].name, "zoe");
    q_operators_free(o, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_operator_rotated_and_removed)
{
    q_db *db = qfix_open(NULL);
    struct q_operator *o = NULL;
    size_t n = 0;

    ck_assert_int_eq(q_operator_add(db, "ana", "resolver", HASH_A, T0), 0);
    ck_assert_int_eq(q_operator_rotate(db, "ana", HASH_B, T0 + 5), 0);
    ck_assert_int_eq(q_operator_rotate(db, "bob", HASH_B, T0 + 5), -ENOENT);
    ck_assert_int_eq(q_operators_list(db, &o, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(o[0].token_sha256, HASH_B);
    ck_assert_int_eq(o[0].created_at, T0);
    ck_assert_int_eq(o[0].rotated_at, T0 + 5);
    q_operators_free(o, n);
    ck_assert_int_eq(q_operator_remove(db, "bob"), -ENOENT);
    ck_assert_int_eq(q_operator_remove(db, "ana"), 0);
    ck_assert_int_eq(q_operator_remove(db, "ana"), -ENOENT);
    o = NULL;
    ck_assert_int_eq(q_operators_list(db, &o, &n), 0);
    ck_assert_uint_eq(n, 0);
    q_operators_free(o, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* add appends one audit row at at, of job and item. */
static void
add(q_db *db, int64_t at, const char *action, int64_t job, int64_t item)
{
    struct q_audit_new a = {.at = at,
                            .who = "ana",
                            .action = action,
                            .job_id = job,
                            .park_id = item,
                            .source = "127.0.0.1",
                            .detail = "{\"k\":1}"};

    ck_assert_int_eq(q_audit_add(db, &a), 0);
}

/* listed asserts that f matches the actions want (comma-separated). */
static void
listed(q_db *db, struct q_audit_filter f, const char *want)
{
    struct q_audit *a = NULL;
    size_t n = 0;
    char got[256] = "";

    ck_assert_int_eq(q_audit_list(db, &f, &a, &n), 0);
    for (size_t i = 0; i < n; i++) {
        strcat(got, i ? "," : "");
        strcat(got, a[i].action);
        if (i > 0)
            ck_assert_int_gt(a[i].id, a[i - 1].id);
    }
    ck_assert_str_eq(got, want);
    q_audits_free(a, n);
}

START_TEST(test_audit_rows_listed_by_time_job_and_item)
{
    q_db *db = qfix_open(NULL);
    int64_t job = qfix_add(db, "j", NULL, 0, T0);
    struct q_audit *a = NULL;
    size_t n = 0;

    add(db, T0, "enqueue", job, 0);
    add(db, T0 + 10, "park.resolve", job, 7);
    add(db, T0 + 20, "operator.add", 0, 0);
    listed(db, (struct q_audit_filter){0}, "enqueue,park.resolve,operator.add");
    listed(db, (struct q_audit_filter){.since = T0 + 10},
           "park.resolve,operator.add");
    listed(db, (struct q_audit_filter){.job_id = job}, "enqueue,park.resolve");
    listed(db, (struct q_audit_filter){.park_id = 7}, "park.resolve");
    ck_assert_int_eq(
        q_audit_list(db, &(struct q_audit_filter){.since = T0 + 20}, &a, &n),
        0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(a[0].at, T0 + 20);
    ck_assert_str_eq(a[0].who, "ana");
    ck_assert_str_eq(a[0].source, "127.0.0.1");
    ck_assert_str_eq(a[0].detail, "{\"k\":1}");
    ck_assert_int_eq(a[0].job_id, 0);
    ck_assert_int_eq(a[0].park_id, 0);
    q_audits_free(a, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_rolled_back_audit_row_is_gone)
{
    q_db *db = qfix_open(NULL);

    ck_assert_int_eq(q_tx_begin(db), 0);
    add(db, T0, "job.cancel", 0, 0);
    q_tx_rollback(db);
    ck_assert_int_eq(q_tx_begin(db), 0);
    add(db, T0, "park.resolve", 0, 0);
    ck_assert_int_eq(q_tx_commit(db), 0);
    listed(db, (struct q_audit_filter){0}, "park.resolve");
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_bad_arguments_are_einval)
{
    q_db *db = qfix_open(NULL);
    struct q_audit_new a = {
        .at = T0, .who = "", .action = "x", .source = "cli", .detail = "{}"};

    ck_assert_int_eq(q_operator_add(db, "", "admin", HASH_A, T0), -EINVAL);
    ck_assert_int_eq(q_operator_add(db, "ana", "", HASH_A, T0), -EINVAL);
    ck_assert_int_eq(q_operator_add(db, "ana", "admin", NULL, T0), -EINVAL);
    ck_assert_int_eq(q_operator_rotate(db, "ana", "", T0), -EINVAL);
    ck_assert_int_eq(q_audit_add(db, &a), -EINVAL);
    a.who = "ana";
    a.detail = NULL;
    ck_assert_int_eq(q_audit_add(db, &a), -EINVAL);
    a.detail = "{}";
    a.source = NULL;
    ck_assert_int_eq(q_audit_add(db, &a), -EINVAL);
    listed(db, (struct q_audit_filter){0}, "");
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("queue contract: operators and audit");
    TCase *tc = tcase_create("rows");

    tcase_add_checked_fixture(tc, qfix_setup, qfix_teardown);
    tcase_add_test(tc, test_operator_added_once_and_listed_by_name);
    tcase_add_test(tc, test_operator_rotated_and_removed);
    tcase_add_test(tc, test_audit_rows_listed_by_time_job_and_item);
    tcase_add_test(tc, test_rolled_back_audit_row_is_gone);
    tcase_add_test(tc, test_bad_arguments_are_einval);
    suite_add_tcase(s, tc);
    return s;
}

/* test_queue_contract_budget.c: the storage contract (queue/queue.h) for
 * budgets in money: a reservation within the limit and one past it, a
 * settlement that turns a reservation into what the send cost, windows
 * kept apart, bad arguments, a reservation inside a transaction that is
 * rolled back, and processes racing for the last of a budget: none of
 * them passes it. Only queue.h is used, so every backend must pass it. */
#include "tests/support/support.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "queue/queue.h"
#include "queue/tiers.h"
#include "tests/support/qfix.h"

#define DAY "2026-12-06T00:00:00Z"

/* The row of budget name's window, asserting there is one. */
static void
expect(q_db *db, const char *name, const char *window, int64_t spent,
       int64_t reserved)
{
    struct q_budget *b = NULL;
    size_t n = 0;
    bool found = false;

    ck_assert_int_eq(q_budgets_list(db, 0, &b, &n), 0);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(b[i].name, name) != 0 || strcmp(b[i].window, window) != 0)
            continue;
        found = true;
        ck_assert_int_eq(b[i].spent_nusd, spent);
        ck_assert_int_eq(b[i].reserved_nusd, reserved);
    }
    q_budgets_free(b, n);
    ck_assert_msg(found, "no row for %s %s", name, window);
}

START_TEST(test_reserve_within_the_limit_only)
{
    q_db *db = qfix_open(NULL);

    ck_assert_int_eq(q_budget_reserve(db, "paid", DAY, 1000, 1001, T0),
                     -EDQUOT);
    ck_assert_int_eq(q_budget_reserve(db, "paid", DAY, 1000, 600, T0), 0);
    ck_assert_int_eq(q_budget_reserve(db, "paid", DAY, 1000, 400, T0), 0);
    ck_assert_int_eq(q_budget_reserve(db, "paid", DAY, 1000, 1, T0), -EDQUOT);
    expect(db, "paid", DAY, 0, 1000);
    /* a raised limit lets the next one through */
    ck_assert_int_eq(q_budget_reserve(db, "paid", DAY, 1500, 500, T0), 0);
    expect(db, "paid", DAY, 0, 1500);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_settle_turns_a_reservation_into_its_cost)
{
    q_db *db = qfix_open(NULL);

    ck_assert_int_eq(q_budget_reserve(db, "paid", DAY, 1000, 600, T0), 0);
    ck_assert_int_eq(q_budget_settle(db, "paid", DAY, 600, 250, T0 + 1), 0);
    expect(db, "paid", DAY, 250, 0);
    /* what was not spent is free again; what was is not */
    ck_assert_int_eq(q_budget_reserve(db, "paid", DAY, 1000, 750, T0 + 2), 0);
    ck_assert_int_eq(q_budget_reserve(db, "paid", DAY, 1000, 1, T0 + 2),
                     -EDQUOT);
    /* a send that never went out gives all of it back */
    ck_assert_int_eq(q_budget_settle(db, "paid", DAY, 750, 0, T0 + 3), 0);
    expect(db, "paid", DAY, 250, 0);
    /* reserved never goes below 0, spent counts what came */
    ck_assert_int_eq(q_budget_settle(db, "paid", DAY, 99, 10, T0 + 4), 0);
    expect(db, "paid", DAY, 260, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_windows_and_budgets_apart)
{
    q_db *db = qfix_open(NULL);
    struct q_budget *b = NULL;
    size_t n = 0;

    ck_assert_int_eq(q_budget_reserve(db, "paid", DAY, 100, 100, T0), 0);
    ck_assert_int_eq(
        q_budget_reserve(db, "paid", "2026-12-07T00:00:00Z", 100, 100, T0 + 5),
        0);
    ck_assert_int_eq(q_budget_reserve(db, "other", DAY, 100, 100, T0 + 9), 0);
    ck_assert_int_eq(q_budgets_list(db, T0 + 5, &b, &n), 0);
    ck_assert_uint_eq(n, 2); /* written since T0 + 5, by name and window */
    ck_assert_str_eq(b[0].name, "other");
    ck_assert_str_eq(b[1].window, "2026-12-07T00:00:00Z");
    ck_assert_int_eq(b[1].updated_at, T0 + 5);
    q_budgets_free(b, n);
    q_budgets_free(NULL, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_bad_arguments_are_einval)
{
    q_db *db = qfix_open(NULL);
    struct q_budget *b = NULL;
    size_t n = 9;

    ck_assert_int_eq(q_budget_reserve(db, "", DAY, 1, 1, T0), -EINVAL);
    ck_assert_int_eq(q_budget_reserve(db, "p", NULL, 1, 1, T0), -EINVAL);
    ck_assert_int_eq(q_budget_reserve(db, "p", DAY, -1, 1, T0), -EINVAL);
    ck_assert_int_eq(q_budget_settle(db, "p", DAY, 1, -1, T0), -EINVAL);
    ck_assert_int_eq(q_budgets_list(db, 0, &b, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_rolled_back_reservation_is_gone)
{
    q_db *db = qfix_open(NULL);

    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_budget_reserve(db, "paid", DAY, 1000, 900, T0), 0);
    q_tx_rollback(db);
    ck_assert_int_eq(q_budget_reserve(db, "paid", DAY, 1000, 1000, T0), 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- processes racing for the last of a budget ------------------------- */

#define NPROC  4
#define NTRIES 30

/* Reserves 10 at a time until refused; writes one byte a reservation. */
static int
reserve_all(int fd)
{
    q_db *d = qfix_open(NULL);
    int rc = 0;

    for (int i = 0; i < NTRIES && rc == 0; i++) {
        rc = q_budget_reserve(d, "paid", DAY, 500, 10, T0 + i);
        if (rc == 0 && write(fd, "x", 1) != 1)
            rc = -EIO;
    }
    return (rc == 0 || rc == -EDQUOT) && q_close(d) == 0 ? 0 : 1;
}

START_TEST(test_racing_reservations_never_pass_the_limit)
{
    q_db *db = qfix_open(NULL); /* create and migrate before the race */
    pid_t pids[NPROC];
    int fds[2], got = 0;
    char k;

    ck_assert_int_eq(q_close(db), 0);
    ck_assert_int_eq(pipe(fds), 0);
    for (int i = 0; i < NPROC; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            close(fds[0]);
            _exit(reserve_all(fds[1]));
        }
    }
    close(fds[1]);
    while (read(fds[0], &k, 1) == 1)
        got++;
    close(fds[0]);
    qfix_wait_children(pids, NPROC);
    ck_assert_int_eq(got, 50); /* exactly the budget, 500 / 10 */
    db = qfix_open(NULL);
    expect(db, "paid", DAY, 0, 500);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("queue contract: budgets");
    TCase *rows = tcase_create("rows");
    TCase *procs = tcase_create("processes");

    tcase_add_checked_fixture(rows, qfix_setup, qfix_teardown);
    tcase_add_test(rows, test_reserve_within_the_limit_only);
    tcase_add_test(rows, test_settle_turns_a_reservation_into_its_cost);
    tcase_add_test(rows, test_windows_and_budgets_apart);
    tcase_add_test(rows, test_bad_arguments_are_einval);
    tcase_add_test(rows, test_rolled_back_reservation_is_gone);
    suite_add_tcase(s, rows);
    tcase_add_checked_fixture(procs, qfix_setup, qfix_teardown);
    tcase_set_timeout(procs, 60);
    tcase_add_test(procs, test_racing_reservations_never_pass_the_limit);
    suite_add_tcase(s, procs);
    return s;
}

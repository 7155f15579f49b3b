/* test_queue_contract_sched.c: the storage contract (queue/queue.h) for
 * schedules: a schedule with no row, the row a first note makes, progress
 * that only moves forward (done_until, last_slot with its job), pausing
 * and resuming, claiming a slot, listing by name, a note inside a
 * transaction, and notes and claims from processes racing. Only queue.h
 * is used, so every backend must pass it (tests/support/qfix.h says where
 * the store is). */
#include "tests/support/support.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "queue/queue.h"
#include "queue/sched.h"
#include "tests/support/qfix.h"

#define MIN INT64_C(60000)

/* get reads schedule name, asserting it has a row. Caller cleans up. */
static struct q_sched
get(q_db *db, const char *name)
{
    struct q_sched s = {0};

    ck_assert_int_eq(q_sched_get(db, name, &s), 0);
    ck_assert_str_eq(s.name, name);
    return s;
}

/* expect checks the progress fields of schedule name. */
static void
expect(q_db *db, const char *name, int64_t done_until, int64_t last_slot,
       int64_t last_job_id)
{
    struct q_sched s = get(db, name);

    ck_assert_int_eq(s.done_until, done_until);
    ck_assert_int_eq(s.last_slot, last_slot);
    ck_assert_int_eq(s.last_job_id, last_job_id);
    q_sched_cleanup(&s);
}

/* ---- rows and progress ------------------------------------------------ */

START_TEST(test_missing_schedule_has_no_row)
{
    q_db *db = qfix_open(NULL);
    struct q_sched s = {.name = NULL, .since = -1};
    struct q_sched *all = NULL;
    size_t n = 9;

    ck_assert_int_eq(q_sched_get(db, "nightly", &s), -ENOENT);
    ck_assert_int_eq(s.since, -1); /* untouched */
    ck_assert_ptr_null(s.name);
    ck_assert_int_eq(q_sched_list(db, &all, &n), 0);
    ck_assert_uint_eq(n, 0);
    q_scheds_free(all, n);
    q_scheds_free(NULL, 0);
    q_sched_cleanup(NULL);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_first_note_makes_the_row_at_now)
{
    q_db *db = qfix_open(NULL);
    struct q_sched s;

    ck_assert_int_eq(q_sched_note(db, "nightly", T0 - MIN, 0, 0, T0), 0);
    s = get(db, "nightly");
    ck_assert(!s.paused);
    ck_assert_int_eq(s.since, T0);
    ck_assert_int_eq(s.done_until, T0); /* done before now: now */
    ck_assert_int_eq(s.last_slot, 0);
    ck_assert_int_eq(s.last_job_id, 0);
    ck_assert_int_eq(s.updated_at, T0);
    q_sched_cleanup(&s);
    /* A first note already past now keeps what it says was done. */
    ck_assert_int_eq(q_sched_note(db, "hourly", T0 + MIN, 0, 0, T0), 0);
    expect(db, "hourly", T0 + MIN, 0, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_done_until_only_moves_forward)
{
    q_db *db = qfix_open(NULL);
    struct q_sched s;

    ck_assert_int_eq(q_sched_note(db, "n", T0, 0, 0, T0), 0);
    ck_assert_int_eq(q_sched_note(db, "n", T0 + 5 * MIN, 0, 0, T0 + 1), 0);
    expect(db, "n", T0 + 5 * MIN, 0, 0);
    /* A worker behind the others: its smaller done changes nothing. */
    ck_assert_int_eq(q_sched_note(db, "n", T0 + 2 * MIN, 0, 0, T0 + 2), 0);
    s = get(db, "n");
    ck_assert_int_eq(s.done_until, T0 + 5 * MIN);
    ck_assert_int_eq(s.since, T0); /* kept from the first note */
    ck_assert_int_eq(s.updated_at, T0 + 2);
    q_sched_cleanup(&s);
    ck_assert_int_eq(q_sched_note(db, "n", T0 + 9 * MIN, 0, 0, T0 + 3), 0);
    expect(db, "n", T0 + 9 * MIN, 0, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_last_slot_moves_forward_with_a_job)
{
    q_db *db = qfix_open(NULL);
    int64_t a = T0 + MIN, b = T0 + 2 * MIN;

    ck_assert_int_eq(q_sched_note(db, "n", a, a, 0, T0), 0);
    expect(db, "n", a, 0, 0); /* no job: not fired */
    ck_assert_int_eq(q_sched_note(db, "n", a, a, 7, T0), 0);
    expect(db, "n", a, a, 7);
    ck_assert_int_eq(q_sched_note(db, "n", a, a, 8, T0), 0);  /* same slot */
    ck_assert_int_eq(q_sched_note(db, "n", a, T0, 9, T0), 0); /* earlier */
    ck_assert_int_eq(q_sched_note(db, "n", b, b, -1, T0), 0); /* no job */
    expect(db, "n", b, a, 7);
    ck_assert_int_eq(q_sched_note(db, "n", b, b, 10, T0), 0);
    expect(db, "n", b, b, 10);
    /* A first note that fired a slot records it. */
    ck_assert_int_eq(q_sched_note(db, "m", b, b, 11, T0), 0);
    expect(db, "m", b, b, 11);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_bad_name_is_einval)
{
    q_db *db = qfix_open(NULL);
    struct q_sched s = {0};

    ck_assert_int_eq(q_sched_note(db, "", T0, 0, 0, T0), -EINVAL);
    ck_assert_int_eq(q_sched_note(db, NULL, T0, 0, 0, T0), -EINVAL);
    ck_assert_int_eq(q_sched_pause(db, "", true, T0), -EINVAL);
    ck_assert_int_eq(q_sched_get(db, "", &s), -EINVAL);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- claiming ---------------------------------------------------------- */

START_TEST(test_claim_makes_the_row_at_slot)
{
    q_db *db = qfix_open(NULL);
    struct q_sched s;

    ck_assert_int_eq(q_sched_claim(db, "report", T0 + MIN, T0), 0);
    s = get(db, "report");
    ck_assert(!s.paused);
    ck_assert_int_eq(s.since, T0);
    ck_assert_int_eq(s.done_until, T0 + MIN);
    ck_assert_int_eq(s.last_slot, 0);
    ck_assert_int_eq(s.last_job_id, 0);
    ck_assert_int_eq(s.updated_at, T0);
    q_sched_cleanup(&s);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_claim_takes_each_slot_once)
{
    q_db *db = qfix_open(NULL);
    struct q_sched s;

    ck_assert_int_eq(q_sched_claim(db, "r", T0 + MIN, T0), 0);
    ck_assert_int_eq(q_sched_claim(db, "r", T0 + MIN, T0 + 1), -EALREADY);
    ck_assert_int_eq(q_sched_claim(db, "r", T0, T0 + 2), -EALREADY);
    s = get(db, "r");
    ck_assert_int_eq(s.done_until, T0 + MIN);
    ck_assert_int_eq(s.updated_at, T0); /* nothing changed */
    q_sched_cleanup(&s);
    ck_assert_int_eq(q_sched_claim(db, "r", T0 + 2 * MIN, T0 + 3), 0);
    s = get(db, "r");
    ck_assert_int_eq(s.done_until, T0 + 2 * MIN);
    ck_assert_int_eq(s.since, T0);
    ck_assert_int_eq(s.updated_at, T0 + 3);
    q_sched_cleanup(&s);
    /* A claimer whose clock is behind moves updated_at no backwards. */
    ck_assert_int_eq(q_sched_claim(db, "r", T0 + 3 * MIN, T0 - 5), 0);
    s = get(db, "r");
    ck_assert_int_eq(s.done_until, T0 + 3 * MIN);
    ck_assert_int_eq(s.updated_at, T0 + 3);
    q_sched_cleanup(&s);
    /* A note past the slot leaves nothing to claim there. */
    ck_assert_int_eq(q_sched_note(db, "r", T0 + 9 * MIN, 0, 0, T0 + 4), 0);
    ck_assert_int_eq(q_sched_claim(db, "r", T0 + 9 * MIN, T0 + 5), -EALREADY);
    ck_assert_int_eq(q_sched_claim(db, "", T0, T0), -EINVAL);
    ck_assert_int_eq(q_sched_claim(db, NULL, T0, T0), -EINVAL);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_claim_joins_a_transaction)
{
    q_db *db = qfix_open(NULL);
    struct q_sched s = {0};

    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_sched_claim(db, "r", T0 + MIN, T0), 0);
    ck_assert_int_eq(q_sched_claim(db, "r", T0 + MIN, T0), -EALREADY);
    q_tx_rollback(db);
    ck_assert_int_eq(q_sched_get(db, "r", &s), -ENOENT);
    ck_assert_int_eq(q_sched_claim(db, "r", T0 + MIN, T0), 0);
    expect(db, "r", T0 + MIN, 0, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- pausing ---------------------------------------------------------- */

START_TEST(test_pause_then_get_shows_paused)
{
    q_db *db = qfix_open(NULL);
    struct q_sched s;

    ck_assert_int_eq(q_sched_pause(db, "new", true, T0), 0); /* no row */
    s = get(db, "new");
    ck_assert(s.paused);
    ck_assert_int_eq(s.since, T0);
    ck_assert_int_eq(s.done_until, T0);
    q_sched_cleanup(&s);
    ck_assert_int_eq(q_sched_note(db, "old", T0, T0, 3, T0), 0);
    ck_assert_int_eq(q_sched_pause(db, "old", true, T0 + MIN), 0);
    s = get(db, "old");
    ck_assert(s.paused);
    ck_assert_int_eq(s.done_until, T0); /* pausing moves nothing */
    ck_assert_int_eq(s.last_job_id, 3);
    ck_assert_int_eq(s.updated_at, T0 + MIN);
    q_sched_cleanup(&s);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_resume_skips_what_passed_while_paused)
{
    q_db *db = qfix_open(NULL);
    struct q_sched s;

    ck_assert_int_eq(q_sched_note(db, "n", T0, T0, 3, T0), 0);
    ck_assert_int_eq(q_sched_pause(db, "n", true, T0 + MIN), 0);
    ck_assert_int_eq(q_sched_pause(db, "n", false, T0 + 60 * MIN), 0);
    s = get(db, "n");
    ck_assert(!s.paused);
    ck_assert_int_eq(s.done_until, T0 + 60 * MIN);
    ck_assert_int_eq(s.last_slot, T0); /* what fired stays */
    ck_assert_int_eq(s.last_job_id, 3);
    q_sched_cleanup(&s);
    /* Resuming one that runs skips nothing of its catching up. */
    ck_assert_int_eq(q_sched_pause(db, "n", false, T0 + 90 * MIN), 0);
    expect(db, "n", T0 + 60 * MIN, T0, 3);
    /* Nor does a resume move done_until back. */
    ck_assert_int_eq(q_sched_note(db, "n", T0 + 200 * MIN, 0, 0, T0), 0);
    ck_assert_int_eq(q_sched_pause(db, "n", true, T0 + 91 * MIN), 0);
    ck_assert_int_eq(q_sched_pause(db, "n", false, T0 + 92 * MIN), 0);
    expect(db, "n", T0 + 200 * MIN, T0, 3);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* ---- listing, transactions, processes --------------------------------- */

START_TEST(test_list_returns_rows_by_name)
{
    static const char *const want[] = {"B", "a", "a-1", "b"}; /* bytewise */
    q_db *db = qfix_open(NULL);
    struct q_sched *all = NULL;
    size_t n = 0;

    ck_assert_int_eq(q_sched_note(db, "b", T0, 0, 0, T0), 0);
    ck_assert_int_eq(q_sched_pause(db, "a-1", true, T0 + 1), 0);
    ck_assert_int_eq(q_sched_note(db, "B", T0 + MIN, T0 + MIN, 5, T0 + 2), 0);
    ck_assert_int_eq(q_sched_note(db, "a", T0, 0, 0, T0 + 3), 0);
    ck_assert_int_eq(q_sched_list(db, &all, &n), 0);
    ck_assert_uint_eq(n, 4);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(all[i].name, want[i]);
    ck_assert_int_eq(all[0].last_job_id, 5);
    ck_assert_int_eq(all[0].done_until, T0 + MIN);
    ck_assert(all[2].paused && !all[1].paused);
    ck_assert_int_eq(all[3].since, T0);
    q_scheds_free(all, n);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_note_joins_a_transaction)
{
    q_db *db = qfix_open(NULL);
    struct q_sched s = {0};

    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_sched_note(db, "n", T0, T0, 4, T0), 0);
    expect(db, "n", T0, T0, 4); /* seen inside it */
    q_tx_rollback(db);
    ck_assert_int_eq(q_sched_get(db, "n", &s), -ENOENT);
    ck_assert_int_eq(q_tx_begin(db), 0);
    ck_assert_int_eq(q_sched_note(db, "n", T0, T0, 4, T0), 0);
    ck_assert_int_eq(q_sched_pause(db, "n", true, T0 + 1), 0);
    ck_assert_int_eq(q_tx_commit(db), 0);
    s = get(db, "n");
    ck_assert(s.paused);
    ck_assert_int_eq(s.last_job_id, 4);
    q_sched_cleanup(&s);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

#define NPROC  4
#define NNOTES 25

/* note_many is one racing worker: NNOTES notes of schedule "race", each
 * with its own done and slot, in an order of its own. */
static int
note_many(int who)
{
    q_db *d = NULL;
    int rc = q_open(qfix_location, NULL, &d);

    for (int i = 0; rc == 0 && i < NNOTES; i++) {
        int k = who % 2 ? NNOTES - 1 - i : i; /* half go backwards */
        int64_t slot = T0 + (k * NPROC + who) * MIN;
        rc = q_sched_note(d, "race", slot, slot, 1 + k * NPROC + who, T0 + i);
    }
    return rc == 0 && q_close(d) == 0 ? 0 : 1;
}

#define NSLOTS 20

/* claim_all is one racing worker: it claims each of NSLOTS slots of
 * schedule "daily" in order, writing the index of each it got to fd. */
static int
claim_all(int fd)
{
    q_db *d = NULL;
    int rc = q_open(qfix_location, NULL, &d);

    for (int i = 0; rc == 0 && i < NSLOTS; i++) {
        unsigned char k = (unsigned char)i;
        rc = q_sched_claim(d, "daily", T0 + (i + 1) * MIN, T0 + i);
        if (rc == 0 && write(fd, &k, 1) != 1)
            rc = -EIO;
        else if (rc == -EALREADY)
            rc = 0;
    }
    return rc == 0 && q_close(d) == 0 ? 0 : 1;
}

START_TEST(test_racing_claims_take_each_slot_once)
{
    q_db *db = qfix_open(NULL); /* create and migrate before the race */
    int got[NSLOTS] = {0};
    pid_t pids[NPROC];
    unsigned char k;
    int fds[2];

    ck_assert_int_eq(q_close(db), 0);
    ck_assert_int_eq(pipe(fds), 0);
    for (int i = 0; i < NPROC; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            close(fds[0]);
            _exit(claim_all(fds[1]));
        }
    }
    close(fds[1]);
    while (read(fds[0], &k, 1) == 1) {
        ck_assert_uint_lt(k, NSLOTS);
        got[k]++;
    }
    close(fds[0]);
    qfix_wait_children(pids, NPROC);
    for (int i = 0; i < NSLOTS; i++)
        ck_assert_msg(got[i] == 1, "slot %d claimed %d times", i, got[i]);
    db = qfix_open(NULL);
    expect(db, "daily", T0 + NSLOTS * MIN, 0, 0);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_racing_notes_keep_the_latest)
{
    q_db *db = qfix_open(NULL); /* create and migrate before the race */
    int64_t last = NNOTES * NPROC - 1;
    pid_t pids[NPROC];

    ck_assert_int_eq(q_close(db), 0);
    for (int i = 0; i < NPROC; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0)
            _exit(note_many(i));
    }
    qfix_wait_children(pids, NPROC);
    db = qfix_open(NULL);
    expect(db, "race", T0 + last * MIN, T0 + last * MIN, 1 + last);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("queue contract: schedules");
    TCase *rows = tcase_create("rows");
    TCase *procs = tcase_create("processes");

    tcase_add_checked_fixture(rows, qfix_setup, qfix_teardown);
    tcase_add_test(rows, test_missing_schedule_has_no_row);
    tcase_add_test(rows, test_first_note_makes_the_row_at_now);
    tcase_add_test(rows, test_done_until_only_moves_forward);
    tcase_add_test(rows, test_last_slot_moves_forward_with_a_job);
    tcase_add_test(rows, test_bad_name_is_einval);
    tcase_add_test(rows, test_claim_makes_the_row_at_slot);
    tcase_add_test(rows, test_claim_takes_each_slot_once);
    tcase_add_test(rows, test_claim_joins_a_transaction);
    tcase_add_test(rows, test_pause_then_get_shows_paused);
    tcase_add_test(rows, test_resume_skips_what_passed_while_paused);
    tcase_add_test(rows, test_list_returns_rows_by_name);
    tcase_add_test(rows, test_note_joins_a_transaction);
    suite_add_tcase(s, rows);

    tcase_add_checked_fixture(procs, qfix_setup, qfix_teardown);
    tcase_set_timeout(procs, 60);
    tcase_add_test(procs, test_racing_notes_keep_the_latest);
    tcase_add_test(procs, test_racing_claims_take_each_slot_once);
    suite_add_tcase(s, procs);
    return s;
}

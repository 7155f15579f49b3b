/* test_copy_support.h: what test_copy.c checks copies with: a store
 * filled with something in every table, and a row-by-row comparison. */
#ifndef STEPQ_TESTS_TEST_COPY_SUPPORT_H
#define STEPQ_TESTS_TEST_COPY_SUPPORT_H

#include <stddef.h>

#include "queue/queue.h"

/* copyfix_fill puts into db 6 jobs, one in each state (one with a key),
 * 4 step rows, 2 attempts (one finished with a body, one in flight), 2
 * park items (one open, one resolved), tier state: tier "free" with
 * every stored field set, 3 sends (one done, one of tier "paid") and 2
 * breaker openings (one each), and 2 schedules ("nightly" with a slot
 * fired, "weekly" paused). */
void copyfix_fill(q_db *db);

/* copyfix_assert_same fails the test unless x and y hold the same jobs
 * (with their steps and attempts), park items, tier state and events and
 * schedule state, as filled by copyfix_fill. */
void copyfix_assert_same(q_db *x, q_db *y);

/* copyfix_same_jobs fails the test unless x and y hold the same jobs,
 * with the same steps and attempts; returns how many jobs they hold. */
size_t copyfix_same_jobs(q_db *x, q_db *y);

#endif

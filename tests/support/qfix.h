/* qfix.h: the fixture of the queue contract suites (test_queue_contract*.c):
 * a fresh store for every test, opened only through queue/queue.h, and
 * jobs handed to it as rows (no job-file validation: the queue stores what
 * it is given).
 *
 * The store is "sqlite:" + a file in the test's temporary folder, or with
 * STEPQ_TEST_BACKEND=pg a fresh schema in the run's PostgreSQL cluster
 * (tests/support/pgfix.h), so the same suites run on either backend.
 */
#ifndef STEPQ_TESTS_SUPPORT_QFIX_H
#define STEPQ_TESTS_SUPPORT_QFIX_H

#include <stdint.h>
#include <sys/types.h>

#include "queue/queue.h"
#include "queue/tiers.h"

#define T0 INT64_C(1800000000000) /* a fixed "now" for tests */

extern char *qfix_dir;      /* the test's temporary folder */
extern char *qfix_location; /* where the store is */

/* qfix_setup / qfix_teardown: a checked fixture (a fresh folder and
 * location; removed after). */
void qfix_setup(void);
void qfix_teardown(void);

/* qfix_open opens (creating) the store at qfix_location, asserting
 * success. opts may be NULL. */
q_db *qfix_open(const struct q_open_opts *opts);

/* qfix_job is a row for a job named name (key NULL: none) with one step
 * and priority prio; its strings are static or borrowed. */
struct q_job_new qfix_job(const char *name, const char *key, int prio);

/* qfix_add enqueues one such job at now and returns its id. */
int64_t qfix_add(q_db *db, const char *name, const char *key, int prio,
                 int64_t now);

/* qfix_state reads the state of job id, asserting it exists. */
enum q_job_state qfix_state(q_db *db, int64_t id);

/* qfix_count is how many jobs are in state st (asserting q_counts works). */
int64_t qfix_count(q_db *db, enum q_job_state st);

/* qfix_claim_one claims job id for worker at now, leased for lease_ms,
 * asserting that it was the one claimed. */
void qfix_claim_one(q_db *db, int64_t id, const char *worker, int64_t now,
                    int64_t lease_ms);

/* qfix_wait_children waits for n children, asserting each exited 0. */
void qfix_wait_children(const pid_t *pids, int n);

/* qfix_same_flight asserts that two tiers' flights hold the same sends. */
void qfix_same_flight(const struct q_tier_flight *a,
                      const struct q_tier_flight *b);

#endif

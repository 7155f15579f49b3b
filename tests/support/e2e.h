/* e2e.h: end-to-end test helpers (tests/support/): the real `stepq mock`
 * with a script and a request log, a config whose tiers "free" and "local"
 * point at its /free and /local routes, and the real binary to enqueue,
 * work and show. Fixed mock scripts are files in tests/data/e2e/
 * (e2e_start_file); every helper fails the test on error. */
#ifndef STEPQ_TESTS_E2E_H
#define STEPQ_TESTS_E2E_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "tests/support/mockproc.h"

/* E2E_CHAT_JOB is a job of one chat step "a" saying hello: tiers is
 * spliced in before its request (a member with a trailing comma, or ""),
 * extra after it (a member with a leading comma, or ""). */
#define E2E_CHAT_JOB(tiers, extra)                                             \
    "{\"name\":\"j\",\"steps\":[{\"name\":\"a\"," tiers "\"request\":{"        \
    "\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}" extra "}]}"

/* E2E_TWO_POSTS is job number %d of two side-effecting http steps (no
 * key, not replayable) posting to the mock (port %d) at /comments/%d/a,
 * then (port %d) /comments/%d/b: a second send is a duplicate comment. */
#define E2E_TWO_POSTS                                                          \
    "{\"name\":\"p%d\",\"steps\":["                                            \
    "{\"name\":\"a\",\"kind\":\"http\",\"http\":{\"method\":\"POST\","         \
    "\"url\":\"http://127.0.0.1:%d/comments/%d/a\",\"body\":\"x\"}},"          \
    "{\"name\":\"b\",\"kind\":\"http\",\"http\":{\"method\":\"POST\","         \
    "\"url\":\"http://127.0.0.1:%d/comments/%d/b\",\"body\":\"y\"}}]}\n"

extern char *e2e_dir; /* the test's temporary folder (cwd) */
extern char *e2e_db;  /* the store: stepq.db there, or a PostgreSQL schema
                         with STEPQ_TEST_BACKEND=pg (pgfix_db_new); every
                         run of the binary gets it as --db (run_db) */
extern struct mockproc e2e_mock; /* the mock, once e2e_start ran */

/* e2e_setup makes and enters a temporary folder (fixture_setup, which
 * e2e_dir names too), picks the store (e2e_db) and sets FREE_KEY
 * (checked fixture). */
void e2e_setup(void);
/* e2e_teardown stops the mock and removes the folder. */
void e2e_teardown(void);
/* e2e_start starts the mock with script (JSON text), logging to
 * mock.log, and writes stepq.json (lease_s 1, fast backoff, tiers free and
 * local), then runs e2e_init(); extra is spliced into the config object
 * ("" for none). */
void e2e_start(const char *script, const char *extra);
/* e2e_start_file is e2e_start with the script tests/data/e2e/NAME of the
 * source tree ($STEPQ_SRC), which the mock reads at run time. */
void e2e_start_file(const char *name, const char *extra);
/* e2e_config rewrites stepq.json as e2e_start does, but with leases of
 * lease_s, no API key and no timeouts: free_fields is spliced into tier
 * free ("" for none), e.g. "\"timeout_s\": 5, \"rpm\": 60". */
void e2e_config(int lease_s, const char *free_fields);
/* e2e_init runs `stepq init` on e2e_db (fails the test if it does not
 * exit 0). */
void e2e_init(void);
/* e2e_enqueue enqueues job (JSON text: one, array or lines). */
void e2e_enqueue(const char *job);
/* e2e_enqueue_many enqueues n one-step chat jobs j0.. ("n0".. as
 * content); tiers is a "tiers" member with a trailing comma, or "". */
void e2e_enqueue_many(int n, const char *tiers);
/* e2e_enqueue_two_posts enqueues n jobs of E2E_TWO_POSTS (0..n-1). */
void e2e_enqueue_two_posts(int n);
/* e2e_log_count is how many times work.log (the spawned workers' stderr)
 * says what. */
int e2e_log_count(const char *what);
/* e2e_drain runs `stepq work --drain` to exit 0; returns its stderr. */
char *e2e_drain(void);
/* e2e_drain_at runs `stepq work --drain --concurrency C` to exit 0. */
void e2e_drain_at(const char *concurrency);
/* e2e_config_refused writes stepq.json with one https:// tier "a" with
 * fields (JSON members) spliced in and checks that `stepq tiers --check`
 * exits 2 saying want. */
void e2e_config_refused(const char *fields, const char *want);
/* e2e_run_job starts the mock with the script file tests/data/e2e/SCRIPT
 * (e2e_start_file, no extra config), enqueues job, drains the queue and
 * returns job 1 shown (cJSON_Delete it). */
cJSON *e2e_run_job(const char *script, const char *job);
/* e2e_show returns `jobs show ID --json` parsed (cJSON_Delete it); the
 * output must be UTF-8. */
cJSON *e2e_show(int id);
/* e2e_str returns the string member k of o, or NULL. Borrowed. */
const char *e2e_str(const cJSON *o, const char *k);
/* e2e_step_of returns step i of a shown job; e2e_hist its attempt. */
const cJSON *e2e_step_of(const cJSON *job, int i);
const cJSON *e2e_hist(const cJSON *job, int step, int attempt);
/* e2e_expect_attempt checks attempt i of step 0 of a shown job: its
 * outcome, reason and decision (each NULL: not checked). */
void e2e_expect_attempt(const cJSON *job, int attempt, const char *outcome,
                        const char *reason, const char *decision);
/* e2e_one_file returns the one file of the test's folder matching
 * pattern (a glob: a hook writes "done-PID.json"), parsed as JSON (delete
 * it); the test fails unless there is exactly one. */
cJSON *e2e_one_file(const char *pattern);
/* e2e_mock_log returns the mock's request log as an array (delete it). */
cJSON *e2e_mock_log(void);
/* e2e_sent_to counts logged requests whose path starts with prefix; log
 * NULL reads a fresh e2e_mock_log(). */
int e2e_sent_to(const cJSON *log, const char *prefix);
/* e2e_arrivals walks the logged requests whose path starts with prefix, in
 * order of arrival: puts the first max arrival times (ts_ms) in at[] and,
 * unless n429 is NULL, how many were answered 429 in *n429; returns how
 * many there were (at may be NULL when max is 0; log NULL reads a fresh
 * e2e_mock_log()). */
int e2e_arrivals(const cJSON *log, const char *prefix, double *at, int max,
                 int *n429);
/* e2e_expect_each_sent_once asserts that the mock logged n requests, one
 * for each job of e2e_enqueue_many(n, ...) (content "n0".."n<n-1>"). */
void e2e_expect_each_sent_once(int n);
/* e2e_body_of / e2e_sent_body parse a logged request's body. */
cJSON *e2e_body_of(const cJSON *req);
cJSON *e2e_sent_body(const cJSON *log, int i);
/* e2e_spawn_worker starts `stepq work --concurrency 200 EXTRA` in the
 * background, stderr appended to work.log. */
pid_t e2e_spawn_worker(const char *extra);
/* e2e_spawn_workerv starts `stepq work ARGS...` (args NULL-terminated) in
 * the background, stderr appended to work.log. */
pid_t e2e_spawn_workerv(const char *const *args);
/* e2e_spawn_under is e2e_spawn_workerv run through the program wrapper
 * (NULL-terminated, e.g. {"faketime", "-f", "+60s", NULL}; found on PATH;
 * NULL or empty: none). */
pid_t e2e_spawn_under(const char *const *wrapper, const char *const *args);
/* e2e_spawn_faked is e2e_spawn_workerv with the clock of libfaketime
 * (Debian's, preloaded): faketime is its FAKETIME ("+60s", or
 * "@2026-11-30 23:59:30 x60": from that time, 60 times as fast);
 * real_monotonic keeps the monotonic clock the host's. */
pid_t e2e_spawn_faked(const char *faketime, bool real_monotonic,
                      const char *const *args);
/* e2e_wait_for_requests waits until the mock logged n requests. */
void e2e_wait_for_requests(int n, int64_t timeout_ms);
/* e2e_wait_exit waits for pid; its exit code, or 128 + signal. */
int e2e_wait_exit(pid_t pid);
/* e2e_race runs n (at most 16) `stepq ARGV...` on e2e_db at once (each
 * waits for the others to start), waits for them, fails the test unless
 * each exits 0 or 4, and returns how many exited 0. */
int e2e_race(int n, const char *const *argv);
/* e2e_tiers returns `tiers --json` parsed (cJSON_Delete it). */
cJSON *e2e_tiers(void);
/* e2e_tier returns the tier called name of `tiers --json` (cJSON_Delete
 * it); the test fails when there is none. */
cJSON *e2e_tier(const char *name);
/* e2e_status returns `status --json` parsed; e2e_count one state's count
 * in st, or in a fresh e2e_status() when st is NULL. */
cJSON *e2e_status(void);
int e2e_count(const cJSON *st, const char *state);
/* e2e_drain_two runs two `stepq work --drain` at once; both must exit 0. */
void e2e_drain_two(void);
/* e2e_kill_mid_request_then_drain starts `stepq work --drain`, SIGKILLs
 * it once the mock has logged a request, then runs e2e_drain(). */
void e2e_kill_mid_request_then_drain(void);

#endif

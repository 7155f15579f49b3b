/* support.h: what every Check suite shares (tests/support/): the suite
 * runner (main.c), temporary folders and the per-test folder fixture
 * (tmpdir.c), and running the stepq binary to completion (proc.c).
 *
 * Each tests/test_<module>.c defines test_suite(); main.c runs it in fork
 * mode and fails when anything failed or when no test ran at all.
 */
#ifndef STEPQ_TESTS_SUPPORT_H
#define STEPQ_TESTS_SUPPORT_H

#include <stddef.h>
#include <sys/types.h>

#include <check.h>

/* test_suite is defined by each test file. */
Suite *test_suite(void);

/* tmpdir_new creates a fresh private directory under $TMPDIR or /tmp.
 * Caller owns the path; tmpdir_remove() deletes the tree and frees it. */
char *tmpdir_new(void);
/* tmpdir_remove deletes dir recursively and frees it; NULL is a no-op. */
void tmpdir_remove(char *dir);
/* tmpdir_join returns "dir/name". Caller frees. */
char *tmpdir_join(const char *dir, const char *name);
/* tmpdir_write writes len bytes of data to dir/name; returns the path
 * (caller frees). Fails the test on error. */
char *tmpdir_write(const char *dir, const char *name, const char *data,
                   size_t len);

/* The per-test folder, a checked fixture (tcase_add_checked_fixture):
 * fixture_setup makes a fresh temporary folder, enters it and unsets
 * STEPQ_DB and STEPQ_CONFIG; fixture_setup_db also runs `stepq init` on
 * FIXTURE_DB there; fixture_teardown removes the folder. fixture_dir is
 * the folder's path (owned by the fixture: valid until teardown). */
#define FIXTURE_DB "q.db"
extern char *fixture_dir;
void fixture_setup(void);
void fixture_setup_db(void);
void fixture_teardown(void);
/* fixture_init runs `stepq init` (with --db db, unless db is NULL) and
 * fails the test unless it exits 0. */
void fixture_init(const char *db);

/* The result of running a program to completion. */
struct run_result {
    int status; /* exit code, or 128 + signal */
    char *out;  /* owned: everything written to stdout, NUL-terminated */
    char *err;  /* owned: everything written to stderr */
};

/* run_db is the store location that run_stepq (and e2e's workers) put
 * before argv as `--db run_db`; NULL: none, the command's own default.
 * Borrowed from the fixture that set it (e2e_setup: pgfix_db_new);
 * fixture_setup resets it. */
extern const char *run_db;
/* run_argv is the argv to exec stepq with: $STEPQ_BIN (stepq_bin), then
 * `--db run_db` when run_db is set, then first (unless NULL), then argv
 * (NULL-terminated). Caller frees the array (the strings are borrowed). */
const char **run_argv(const char *first, const char *const *argv);
/* run_stepq runs $STEPQ_BIN with argv (NULL-terminated, without argv[0]),
 * feeding input (may be NULL: empty stdin) and collecting output. Fails
 * the test if the binary cannot be started or runs longer than 60 s. */
void run_stepq(const char *const *argv, const char *input,
               struct run_result *res);
/* run_cmd runs stepq as run_stepq does and returns its exit code; the
 * output stays in *res (release it with run_result_free). run_args is
 * the same with empty stdin. RUN and RUN_ARGS take the arguments inline:
 * RUN(&r, NULL, "status", "--json"). */
int run_cmd(struct run_result *res, const char *input, const char *const *argv);
int run_args(struct run_result *res, const char *const *argv);
#define RUN(res, input, ...)                                                   \
    run_cmd(res, input, (const char *[]){__VA_ARGS__, NULL})
#define RUN_ARGS(res, ...) run_args(res, (const char *[]){__VA_ARGS__, NULL})
/* run_job_count returns how many jobs the database db holds, all states
 * together, from `stepq status --json --db db` (which must exit 0). */
int run_job_count(const char *db);
/* job_lines is a bulk input of count keyed one-step jobs as JSON lines
 * (keys s0, s1, ...); line bad_line (1-based; 0: none) has no steps.
 * Caller frees. */
char *job_lines(int count, int bad_line);
/* run_sh runs cmd with /bin/sh, stderr joined to stdout, and returns its
 * exit code (128 + signal when killed); *out gets the output (caller
 * frees). The tcase timeout bounds it. */
int run_sh(const char *cmd, char **out);
/* run_result_free releases the output buffers. */
void run_result_free(struct run_result *res);
/* stepq_bin returns $STEPQ_TEST_BIN if set, else $STEPQ_BIN; fails the
 * test when neither is set. */
const char *stepq_bin(void);
/* source_path returns $STEPQ_SRC/rel (the repository). Caller frees. */
char *source_path(const char *rel);

#endif

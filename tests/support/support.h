/* support.h: what every Check suite shares (tests/support/).
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

/* The result of running a program to completion. */
struct run_result {
    int status; /* exit code, or 128 + signal */
    char *out;  /* owned: everything written to stdout, NUL-terminated */
    char *err;  /* owned: everything written to stderr */
};

/* run_stepq runs $STEPQ_BIN with argv (NULL-terminated, without argv[0]),
 * feeding input (may be NULL: empty stdin) and collecting output. Fails
 * the test if the binary cannot be started or runs longer than 60 s. */
void run_stepq(const char *const *argv, const char *input,
               struct run_result *res);
/* run_result_free releases the output buffers. */
void run_result_free(struct run_result *res);
/* stepq_bin returns $STEPQ_TEST_BIN if set, else $STEPQ_BIN; fails the
 * test when neither is set. */
const char *stepq_bin(void);
/* source_path returns $STEPQ_SRC/rel (the repository). Caller frees. */
char *source_path(const char *rel);

#endif

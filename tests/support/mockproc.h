/* mockproc.h: run the real `stepq mock` as a child process in a test.
 *
 * mockproc_start forks and execs "$STEPQ_BIN mock --port 0 ARGS...", reads
 * the "listening 127.0.0.1:PORT" line with a 5 s poll() (readiness and port
 * in one), and fails the test when it does not come. The child stays in the
 * test's process group, so Check's killpg reaps it if the test dies.
 *
 * The mock suites share one fixture (mockproc_fixture_setup/teardown: a temp
 * dir and a mockproc per test) and start the mock on a script, given as
 * JSON text or as the name of a file under tests/data/mock/.
 */
#ifndef STEPQ_TESTS_MOCKPROC_H
#define STEPQ_TESTS_MOCKPROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct mockproc {
    pid_t pid;  /* 0 when not running */
    int port;   /* the bound port */
    int out_fd; /* read end of the child's stdout; EOF once it exits */
};

/* mockproc_start starts the mock with extra args (NULL-terminated, may be
 * NULL). Fails the test when it exits or stays silent for 5 s. */
void mockproc_start(struct mockproc *mp, const char *const *args);

/* mockproc_spawn runs argv (argv[0] looked up in PATH) as a child whose
 * stdout says "listening 127.0.0.1:PORT" once it is bound, as the mock
 * does (tests/gateway/start.mjs makes the Portkey gateway say it too), and
 * reads that line within timeout_ms; mockproc_stop stops it. Fails the
 * test when the child exits or stays silent. argv is borrowed. */
void mockproc_spawn(struct mockproc *mp, const char *const *argv,
                    int timeout_ms);

/* mockproc_stop sends SIGTERM, waits up to 10 s for the exit and returns
 * the exit code (128 + signal when killed). A stopped or never started
 * mockproc returns -1. */
int mockproc_stop(struct mockproc *mp);

/* mockproc_script returns the script text_or_name stands for: a copy of it
 * when it starts with '{' (JSON text), else the contents of
 * $STEPQ_SRC/tests/data/mock/NAME. Caller frees. Fails the test when the
 * file cannot be read. */
char *mockproc_script(const char *text_or_name);

/* mockproc_start_script writes the script (see mockproc_script) to
 * DIR/script.json and starts the mock with "--script DIR/script.json --log
 * DIR/log.jsonl". Returns the bound port. Fails the test as mockproc_start
 * does. */
int mockproc_start_script(struct mockproc *mp, const char *dir,
                          const char *text_or_name);

/* mockproc_read_log returns DIR/log.jsonl parsed as a cJSON array of its
 * lines, waiting up to 5 s for at least want lines (fewer after that).
 * Caller owns it (cJSON_Delete). Fails the test on a line that is not
 * JSON. */
struct cJSON *mockproc_read_log(const char *dir, int want);

/* The state of the mock suites' checked fixture. Check forks each test, so
 * every test has its own copy. */
extern char *mockproc_dir;          /* the test's temp dir (owned) */
extern struct mockproc mockproc_mp; /* the test's mock process */

/* mockproc_setup is the set-up of the fixture: SIGPIPE ignored, a fresh
 * mockproc_dir, mockproc_mp cleared. */
void mockproc_setup(void);
/* mockproc_teardown stops mockproc_mp (if it runs) and removes
 * mockproc_dir. */
void mockproc_teardown(void);
/* mockproc_fixture_start is mockproc_start_script on the fixture's mock and
 * dir: the log is mockproc_dir/log.jsonl. Returns the port. */
int mockproc_fixture_start(const char *text_or_name);

#endif

/* mockproc.h: run the real `stepq mock` as a child process in a test.
 *
 * mockproc_start forks and execs "$STEPQ_BIN mock --port 0 ARGS...", reads
 * the "listening 127.0.0.1:PORT" line with a 5 s poll() (readiness and port
 * in one), and fails the test when it does not come. The child stays in the
 * test's process group, so Check's killpg reaps it if the test dies.
 */
#ifndef STEPQ_TESTS_MOCKPROC_H
#define STEPQ_TESTS_MOCKPROC_H

#include <stdbool.h>
#include <sys/types.h>

struct mockproc {
    pid_t pid;  /* 0 when not running */
    int port;   /* the bound port */
    int out_fd; /* read end of the child's stdout; EOF once it exits */
};

/* mockproc_start starts the mock with extra args (NULL-terminated, may be
 * NULL). Fails the test when it exits or stays silent for 5 s. */
void mockproc_start(struct mockproc *mp, const char *const *args);

/* mockproc_stop sends SIGTERM, waits up to 10 s for the exit and returns
 * the exit code (128 + signal when killed). A stopped or never started
 * mockproc returns -1. */
int mockproc_stop(struct mockproc *mp);

#endif

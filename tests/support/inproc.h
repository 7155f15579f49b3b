/* inproc.h: the worker run inside the test's own process (worker_run, as
 * `stepq work --drain` runs it), for suites that set its seams
 * (worker/internal.h). Links stepq_worker. */
#ifndef STEPQ_TESTS_SUPPORT_INPROC_H
#define STEPQ_TESTS_SUPPORT_INPROC_H

/* inproc_drain loads ./stepq.json and runs the worker on ./stepq.db with
 * worker id id until the queue drains; concurrency 0: the config's. Fails
 * the test when the config cannot be loaded or the worker fails. */
void inproc_drain(const char *id, int concurrency);

#endif

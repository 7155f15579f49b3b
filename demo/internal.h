/* internal.h: what the demo/ sources share (private to demo/).
 *
 * demo.c opens, runs and closes the demo; side.c owns the scripted
 * endpoints and the side thread (mocks, progress, the time limit); jobs.c
 * writes the config and enqueues the batch.
 */
#ifndef STEPQ_DEMO_INTERNAL_H
#define STEPQ_DEMO_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/config.h"
#include "demo/demo.h"
#include "mock/mock.h"
#include "queue/queue.h"

#define PROGRESS_MS_DEFAULT 250
#define LIMIT_MS_DEFAULT    25000
#define DEMO_CONCURRENCY    8
#define DEMO_GRACE_MS       2000

/* One scripted endpoint of the demo. */
struct demo__endpoint_def {
    const char *name;
    const char *role;
    const char *script;
    const char *path; /* base path of the URL */
};

/* The endpoints, in the order of demo_endpoint_get (side.c). */
extern const struct demo__endpoint_def demo__endpoints[DEMO_NENDPOINTS];

struct demo {
    struct demo_opts opts;
    int64_t started_ms;
    struct config *cfg;                   /* owned */
    char *paths_buf[5 + DEMO_NENDPOINTS]; /* owned strings of paths */
    struct demo_paths paths;
    struct demo_endpoint ep[DEMO_NENDPOINTS];
    struct mock_stats stats[DEMO_NENDPOINTS];
    /* The side loop and what runs on it. */
    uv_loop_t loop;
    uv_async_t stop;
    uv_timer_t tick;
    uv_signal_t sigint;
    uv_signal_t sigterm;
    mock *mocks[DEMO_NENDPOINTS];
    q_db *reader; /* opened and closed on the side thread */
    pthread_t thread;
    bool loop_ready;
    bool thread_started;
    bool stopped;
    atomic_bool worker_running;
    atomic_bool cut;
    atomic_bool interrupted;
};

/* demo__write_text writes text to path (created or truncated). Returns 0,
 * or a negative errno with "cannot write PATH: ..." in err (demo.c). */
int demo__write_text(const char *path, const char *text, char *err, size_t len);

/* demo__start_loop initialises the side loop and its handles (the stop
 * async, the progress timer, the signal watchers). Returns 0 or a libuv
 * error with err set (side.c). */
int demo__start_loop(demo *d, char *err, size_t len);
/* demo__start_mocks starts every endpoint's mock on the side loop and fills
 * d->ep. Returns 0 or the mock's error with err set; mocks started before
 * a failure are stopped by demo__stop_all. */
int demo__start_mocks(demo *d, char *err, size_t len);
/* demo__start_thread starts the progress timer and the side thread, with
 * SIGINT and SIGTERM blocked in it. Returns 0 or -errno with err set. */
int demo__start_thread(demo *d, char *err, size_t len);
/* demo__stop_all closes the side loop's handles and stops the mocks,
 * keeping their last stats; runs on the thread that runs the loop. */
void demo__stop_all(demo *d);

/* demo__write_config writes DIR/stepq.json for the two tier mocks and
 * parses it into d->cfg. Returns 0 or a negative errno with err set
 * (jobs.c). */
int demo__write_config(demo *d, char *err, size_t len);
/* demo__enqueue_batch writes d->opts.njobs jobs to DIR/jobs.jsonl, then
 * validates and enqueues them in one transaction. Returns 0 or a negative
 * errno with err set. */
int demo__enqueue_batch(demo *d, char *err, size_t len);

#endif

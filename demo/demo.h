/* demo.h: `stepq demo`, a self-contained tour of stepq against mock tiers.
 *
 * demo_open makes a fresh folder, starts three scripted mock endpoints on
 * free loopback ports (a "free" tier with a per-minute limit and a small
 * daily token allowance, a "backup" tier with a short 5xx storm, and a
 * comments API with its own storm) on a libuv loop in a thread of its own,
 * writes the config and a nightly batch of jobs (changelog jobs and one
 * triage agent, whose model is a route of the free tier's mock and whose
 * comment parks for approval) into a new database, and
 * starts reporting progress. demo_run runs the real worker on it until the
 * queue drains. demo_close stops the mocks and keeps every file, so that
 * the database can be inspected and its park items resolved afterwards.
 *
 * demo/ owns that tour and nothing else: demo.c (open, run, close), side.c
 * (the scripted endpoints and their thread, the progress tally), jobs.c
 * (the config and the batch). This is its public header; demo/internal.h
 * is private to the folder.
 *
 * Signals: from demo_open to demo_stop, SIGINT and SIGTERM are watched
 * (libuv) and only remembered (demo_was_interrupted); while demo_run runs
 * they also stop the worker (stop claiming, finish or give back what is in
 * flight). The mock thread blocks both, so the handler runs on the
 * caller's thread. Nothing here prints; the progress callback gets numbers.
 */
#ifndef STEPQ_DEMO_DEMO_H
#define STEPQ_DEMO_DEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/defs.h"
#include "mock/mock.h"
#include "queue/queue.h"

#define DEMO_JOBS_DEFAULT 20
#define DEMO_JOBS_MAX     200

typedef struct demo demo;

/* What the database says at one moment. */
struct demo_tally {
    int64_t elapsed_ms;          /* since demo_open */
    int64_t jobs[Q_JOB_NSTATES]; /* jobs by state */
    int64_t park_open;           /* open park items */
    int64_t attempts;            /* every request in the ledger */
    int64_t free_requests;       /* attempts on tier "free" */
    int64_t backup_requests;     /* attempts on tier "backup" */
    int64_t http_requests;       /* attempts of http steps */
    int64_t throttles;           /* soft throttles absorbed by waiting */
    int64_t switches;            /* switch_tier_replay decisions */
};

/* Called on the demo's own thread (not the caller's) with a snapshot. */
typedef void (*demo_progress_cb)(const struct demo_tally *t, void *arg);

struct demo_opts {
    int njobs;           /* 1..DEMO_JOBS_MAX; 0: DEMO_JOBS_DEFAULT */
    int64_t progress_ms; /* period of on_progress; 0: 250 */
    int64_t limit_ms;    /* stop the worker (as SIGTERM would) after this
                            long; 0: 25000 */
    demo_progress_cb on_progress; /* may be NULL */
    void *arg;
};

/* One mock endpoint of the demo. */
struct demo_endpoint {
    const char *name;   /* "free", "backup", "comments" */
    const char *role;   /* one line for humans: what it is scripted to do */
    int port;           /* bound loopback port */
    char url[64];       /* base URL ("http://127.0.0.1:PORT/v1") */
    const char *script; /* its mock script (JSON text), static */
};

#define DEMO_NENDPOINTS 3

/* Where the demo's files are. Borrowed from the demo. */
struct demo_paths {
    const char *dir;        /* the fresh folder */
    const char *db;         /* DIR/stepq.db */
    const char *config;     /* DIR/stepq.json (its "db" is stepq.db) */
    const char *jobs;       /* DIR/jobs.jsonl: the batch as enqueued */
    const char *worker_log; /* DIR/worker.log: the worker's attempt lines */
    const char *mock_logs[DEMO_NENDPOINTS]; /* DIR/mock-NAME.log */
};

/* demo_open sets everything up (see the top of this file) in a new folder
 * under $TMPDIR or /tmp. Returns 0 with *out (caller owns it: demo_close);
 * on failure a negative errno with a message in err, everything started is
 * stopped, and the folder (if made) is kept for a look. */
STEPQ_MUST_CHECK int demo_open(const struct demo_opts *opts, demo **out,
                               char *err, size_t len);

/* demo_run runs the worker with drain on the demo's database until no job
 * is due in the next 60 s, a signal stops it, or the time limit passes.
 * The worker's per-attempt lines go to paths->worker_log (standard error
 * is redirected for the duration). Returns worker_run's result. */
STEPQ_MUST_CHECK int demo_run(demo *d);

/* demo_was_cut is true when the time limit stopped the worker. */
bool demo_was_cut(const demo *d);
/* demo_was_interrupted is true when SIGINT or SIGTERM came from outside
 * after demo_open (the worker, if running, stopped on it too). */
bool demo_was_interrupted(const demo *d);

/* demo_tally_read fills *out from the database at db (elapsed_ms from
 * since_mono_ms, a clock_mono_ms() value; 0 leaves it 0). Returns 0 or the
 * queue's error. */
STEPQ_MUST_CHECK int demo_tally_read(q_db *db, int64_t since_mono_ms,
                                     struct demo_tally *out);

/* demo_started_ms is the clock_mono_ms() of demo_open. */
int64_t demo_started_ms(const demo *d);

/* demo_paths_get and demo_endpoint_get describe the demo; borrowed until
 * demo_close. i < DEMO_NENDPOINTS. */
const struct demo_paths *demo_paths_get(const demo *d);
const struct demo_endpoint *demo_endpoint_get(const demo *d, int i);

/* demo_stop stops the progress reports and the mocks and waits for the
 * demo's thread; files are kept. Calling it again does nothing. */
void demo_stop(demo *d);

/* demo_mock_stats copies endpoint i's request counters as they were when
 * demo_stop ran (all zero before). */
void demo_mock_stats(const demo *d, int i, struct mock_stats *out);

/* demo_close stops (demo_stop) and frees the demo; files are kept. NULL is
 * a no-op. */
void demo_close(demo *d);

#endif

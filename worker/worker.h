/* worker.h: `stepq work`: claims due jobs and runs their steps on one libuv
 * loop, through admission, the policy, the tiers and the park table.
 *
 * Every attempt is recorded in the ledger before it is sent. Jobs stay
 * leased while they run (heartbeats extend the lease); a long backoff gives
 * the job back to the queue with a later run_at rather than holding a
 * slot. A job reclaimed after a crash whose current step has an attempt
 * without result is in doubt: replayable (or with an idempotency key) it is
 * retried, otherwise parked with reason in_doubt and not sent again.
 */
#ifndef STEPQ_WORKER_WORKER_H
#define STEPQ_WORKER_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "common/defs.h"

struct worker_opts {
    const char *db_path;      /* borrowed */
    const struct config *cfg; /* borrowed; tiers, policy, worker numbers */
    int concurrency;          /* jobs held at once; 0: cfg's */
    bool drain;               /* exit when idle and nothing due in 60 s */
    const char *worker_id;    /* NULL: "HOST:PID" */
    int64_t grace_ms;         /* on SIGINT/SIGTERM: wait this long for
                                 requests in flight; 0: 10 s */
    bool progress;            /* a line per job start and end (terminal) */
};

/* worker_run opens the database, runs until SIGINT/SIGTERM (or, with
 * drain, until idle) and closes everything. Returns 0; -EINVAL for a bad
 * config (a classify rule that does not compile: logged with the rule);
 * -EIO when the database or the HTTP client cannot be set up (logged). */
STEPQ_MUST_CHECK int worker_run(const struct worker_opts *opts);

#endif

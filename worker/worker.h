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

struct cJSON;
typedef struct q_db q_db;

/* Builds the morning report for the config's on_report hook: what
 * happened from since to until, as `report --json` shows it (cli passes
 * view_report). Returns 0 with *out set (the worker deletes it), or a
 * negative errno. */
typedef int (*worker_report_fn)(q_db *db, const struct config *cfg,
                                int64_t since, int64_t until,
                                struct cJSON **out);

/* The JSON of job id as `jobs show --json` gives it, for the on_done and
 * on_fail hooks (`stepq work` passes view/'s view_job, so the worker never
 * includes view/). Caller owns *out. Returns 0 or the store's error. */
typedef int (*worker_job_fn)(q_db *db, int64_t id, struct cJSON **out);

struct worker_opts {
    const char *db_path;      /* borrowed */
    const struct config *cfg; /* borrowed; tiers, policy, worker numbers */
    int concurrency;          /* jobs held at once; 0: cfg's */
    bool drain;               /* exit when idle and nothing due in 60 s */
    const char *worker_id;    /* NULL: "HOST:PID" */
    int64_t grace_ms;         /* on SIGINT/SIGTERM: wait this long for
                                 requests in flight; 0: 10 s */
    bool progress;            /* a line per job start and end (terminal) */
    worker_report_fn report;  /* for on_report; NULL: no report is sent */
    worker_job_fn job;        /* for on_done, on_fail; NULL: not told */
};

/* worker_run opens the database, runs until SIGINT/SIGTERM (or, with
 * drain, until idle) and closes everything. Returns 0; -EINVAL for a bad
 * config (a classify rule that does not compile: logged with the rule);
 * -EIO when the database or the HTTP client cannot be set up (logged). */
STEPQ_MUST_CHECK int worker_run(const struct worker_opts *opts);

struct cJSON;

/* What `stepq tiers --check` looks at (probe.c). */
struct worker_probe_opts {
    const char *tier;            /* only this tier; NULL: every tier */
    const struct cJSON *request; /* the chat request sent; NULL: a tiny
                                    one (one message, max_tokens 16) */
    bool dry_run;                /* build and show, send nothing */
};

/* worker_probe builds one chat request for each tier of cfg (or opts->tier)
 * exactly as the worker would and, unless dry_run, sends them all at once
 * on a loop of its own, each bounded by its tier's timeout_s, outside
 * admission and the database. *out gets an array, one object per tier in
 * config order: a dry run's {"tier", "method", "url", "headers", "body",
 * "error", "note", "warnings"} with the key and env: values masked; a
 * check's {"tier", "url", "result", "status", "outcome", "reason",
 * "latency_ms", "error", "note", "warnings"} (worker_gateway_warnings),
 * result one of reachable, auth_failed, wrong_path, rate_limited, timeout,
 * unreachable, error, not_sent (a request that cannot be built: an env:
 * variable unset). No value of a secret is in *out. *all_ok is
 * true when every request could be built and (checked) was reachable.
 * Returns 0 (caller owns *out: cJSON_Delete); -ENOENT when opts->tier is
 * not a tier of cfg; -EINVAL when cfg has no tier or a classify rule does
 * not compile; -EIO when the loop or the HTTP client cannot be set up. */
STEPQ_MUST_CHECK int worker_probe(const struct config *cfg,
                                  const struct worker_probe_opts *opts,
                                  struct cJSON **out, bool *all_ok);

/* worker_gateway_warnings adds to warnings (a JSON array) one string for
 * each way tier t, going through a gateway stepq knows (Portkey, the
 * LiteLLM proxy, Cloudflare AI Gateway; by its headers or host), undoes
 * what stepq relies on: an Idempotency-Key the gateway does not pass on,
 * and retries the gateway makes itself. Each names the tier, the header and
 * what to do. Reads the config only (an env: value is not read, nor
 * judged). Never fails (aborts on OOM); warnings is borrowed. */
void worker_gateway_warnings(const struct config_tier *t,
                             struct cJSON *warnings);

#endif

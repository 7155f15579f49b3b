/* view.h: view/ owns the reference's JSON of what is stored: a job as
 * listed, a job shown with its steps and every attempt, a park item shown
 * with what is needed to decide it, the status counts, each tier's shared
 * state and the answer to an enqueue. The CLI's --json and `stepq serve`
 * print the same objects because both build them here.
 *
 * Reading goes through queue/ (and the tier snapshot of tier/tier.h);
 * nothing here writes or prints.
 */
#ifndef STEPQ_VIEW_VIEW_H
#define STEPQ_VIEW_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/config.h"
#include "common/defs.h"
#include "common/xalloc.h"
#include "queue/audit.h"
#include "queue/park.h"
#include "queue/queue.h"

/* view_job_row renders j as one entry of `jobs list --json`: id, name,
 * key, state, created_at, updated_at. Caller owns the result. */
cJSON *view_job_row(const struct q_job *j);

/* view_jobs loads a page of jobs (state < 0: all; ids above after; at most
 * limit, 0: all) and renders it as `jobs list --json` (an array). Returns
 * 0 with *out set (caller owns it) or the storage error. */
STEPQ_MUST_CHECK int view_jobs(q_db *db, int state, int64_t after, size_t limit,
                               cJSON **out);

/* view_job loads job id with its steps, attempts, park items, retries and
 * audit rows ("audit", as view_audit), all in one read snapshot
 * (q_read_begin), and renders `jobs show --json`. Returns 0 with *out set,
 * -ENOENT when there is no such job, or the storage error. */
STEPQ_MUST_CHECK int view_job(q_db *db, int64_t id, cJSON **out);

/* view_wait_over tells whether a wait for a job (GET /v1/jobs/ID?wait=,
 * `stepq jobs wait`) is over now that the job is in state st, last
 * changed at ver (updated_at): at an end (succeeded, failed, cancelled),
 * and when it parks, since only a person moves it on from there. A job
 * already parked when the wait began (parked_ver: its updated_at then;
 * -1: it was not parked) is waited on until it moves on and ends or parks
 * again, so that a program asking again does not spin. */
bool view_wait_over(enum q_job_state st, int64_t ver, int64_t parked_ver);

/* view_park_item loads park item id with its job and the attempts of its
 * step and renders `park show --json`: the item (park_item_json) with
 * job_name, job_state, the step's kind, side_effects, replayable and
 * idempotency_key, the request as sent, the history and the item's audit
 * rows ("audit", as view_audit), in one read snapshot. Returns 0 with
 * *out set, -ENOENT, or the storage error. */
STEPQ_MUST_CHECK int view_park_item(q_db *db, int64_t id, cJSON **out);

/* view_park_list renders items (n of them) as `park list --json`. */
cJSON *view_park_list(const struct q_park_item *items, size_t n);

/* view_status renders `status --json`: {"jobs": {STATE: N, ...},
 * "park_open": N}, of one read snapshot. Returns 0 with *out set, or the
 * storage error. */
STEPQ_MUST_CHECK int view_status(q_db *db, cJSON **out);

/* view_tiers renders `tiers --json`: each tier of cfg with the state
 * every worker shares, as of now (the store's clock). Returns 0 with *out
 * set, or the storage error with *failed (if not NULL) naming the tier
 * that could not be read. */
STEPQ_MUST_CHECK int view_tiers(q_db *db, const struct config *cfg, int64_t now,
                                cJSON **out, const char **failed);

/* view_schedules renders `schedules --json`: each schedule of cfg with
 * name, cron, tz, catch_up, job (its file, or "(inline)"), paused,
 * next_slot (the first after now), last_slot (the latest fired, or null)
 * and last_job ({"id", "state"} of that slot's job, or null). Returns 0
 * with *out set, or the storage error. */
STEPQ_MUST_CHECK int view_schedules(q_db *db, const struct config *cfg,
                                    int64_t now, cJSON **out);

/* view_report renders `report --json`: what happened from since to now
 * (ms): "jobs" created by state, each schedule's slots with their jobs'
 * states (missed: no job), park items waiting (the oldest 50), each
 * tier's attempts by outcome and tokens, the top 10 reasons of failure
 * with the latest attempt of each as an example, and the 5 slowest jobs
 * that ended, all read in one snapshot (q_read_begin). Returns 0 with
 * *out set, or the storage error. */
STEPQ_MUST_CHECK int view_report(q_db *db, const struct config *cfg,
                                 int64_t since, int64_t now, cJSON **out);

/* view_enqueued renders the answer to an enqueue of n jobs: one
 * {"id": N, "duplicate": B}, or an array of them when many. */
cJSON *view_enqueued(const struct q_enqueue_result *res, size_t n, bool many);
/* view_enqueued_text appends the same answer to out as unformatted JSON
 * text (cJSON's bytes), without a tree of every result. */
void view_enqueued_text(const struct q_enqueue_result *res, size_t n, bool many,
                        struct xbuf *out);

/* view_audit renders the audit rows f matches as `stepq audit --json` (an
 * array, oldest first: id, at, who, action, job_id, park_id, source,
 * detail). Returns 0 with *out set (caller owns it) or the storage
 * error. */
STEPQ_MUST_CHECK int view_audit(q_db *db, const struct q_audit_filter *f,
                                cJSON **out);

#endif

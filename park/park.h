/* park.h: park/ owns parking: parking a step (the park item and the
 * job's parked state written together, and the on_park hook told of it),
 * resolution (an operator's retry, skip or fail of an item) and rendering
 * (the reference's JSON of an item).
 *
 * Storage lives in queue/ (q_park_*); the rules over it live here.
 */
#ifndef STEPQ_PARK_PARK_H
#define STEPQ_PARK_PARK_H

#include <cjson/cJSON.h>
#include <uv.h>

#include "common/defs.h"
#include "queue/queue.h"

/* park_item_json renders it as in the reference's `park list --json`: id,
 * job_id, step, reason, attempts, request_sha256, error, tier, parked_at,
 * state, resolution, resolved_by, note (plus resolved_at). Caller owns the
 * result (cJSON_Delete). */
cJSON *park_item_json(const struct q_park_item *it);

/* park_step parks a held step: records the item p (q_park_add) and marks
 * the job parked for worker (q_park_job), both under one savepoint inside
 * the caller's transaction, so either both are written or neither is.
 * *id gets the item's id. Returns 0, or the negative errno of the write
 * that failed (-EBUSY: the job is not held by worker; -EIO); on failure
 * the savepoint is rolled back (or was never opened) and the caller's
 * transaction is left as it was. p and worker are borrowed. */
STEPQ_MUST_CHECK int park_step(q_db *db, const struct q_park_new *p,
                               const char *worker, int64_t *id);

/* park_notify tells the on_park hook cmd of item id: loads the item from
 * db, renders it with park_item_json and starts cmd with that JSON on its
 * input (park_hook_run). Call it only after the transaction that parked
 * the item has committed: before, the hook could not find it. cmd NULL:
 * does nothing and returns 0. Returns 0, the error of q_park_get
 * (-ENOENT: no such item), or that of park_hook_run (logged). */
int park_notify(uv_loop_t *loop, q_db *db, const char *cmd, int64_t timeout_ms,
                int64_t id);

/* park_hook_run starts `/bin/sh -c cmd` with json on its standard input,
 * on loop, and returns at once. The hook is killed (SIGKILL) when it runs
 * longer than timeout_ms; its exit status is logged. All its handles are
 * freed when it ends. Returns 0, or a negative errno when it cannot be
 * started (logged). */
STEPQ_MUST_CHECK int park_hook_run(uv_loop_t *loop, const char *cmd,
                                   int64_t timeout_ms, const char *json);

#endif

/* park.h: the park table as operators see it: rendering of park items,
 * and the on_park notification hook.
 *
 * Storage and resolution live in queue/ (q_park_*); this module turns items
 * into the reference's JSON and tells someone when a step is parked.
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

/* park_hook_run starts `/bin/sh -c cmd` with json on its standard input,
 * on loop, and returns at once. The hook is killed (SIGKILL) when it runs
 * longer than timeout_ms; its exit status is logged. All its handles are
 * freed when it ends. Returns 0, or a negative errno when it cannot be
 * started (logged). */
STEPQ_MUST_CHECK int park_hook_run(uv_loop_t *loop, const char *cmd,
                                   int64_t timeout_ms, const char *json);

#endif

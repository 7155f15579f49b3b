/* internal.h: declarations private to park/ (not a public interface). */
#ifndef STEPQ_PARK_INTERNAL_H
#define STEPQ_PARK_INTERNAL_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "park/park.h"
#include "queue/park.h"
#include "queue/queue.h"

/* park_step opens its savepoint through this pointer (q_tx_begin unless a
 * test replaces it, as beanstalkd's falloc), so tests can fail it. */
extern int (*park__tx_begin)(q_db *db);

/* park__read_spec parses the stored job job_id's text (validated at
 * enqueue) into *out (NULL when it has none; caller cJSON_Deletes it).
 * Returns 0 or the error of reading the job. */
int park__read_spec(q_db *db, int64_t job_id, cJSON **out);

/* park__fresh_deadline is when a job let go on at now must be done by:
 * its deadline_s (spec's, else the default) from now, since the job is
 * due again now (an operator's resolve, a retry). */
int64_t park__fresh_deadline(const cJSON *spec, int64_t now);

/* park__tx_end ends the transaction q_tx_begin opened: commits when rc is
 * 0, rolls back otherwise. Returns rc or the commit's error. */
int park__tx_end(q_db *db, int rc);

/* park__tool_request is the request of a tool call's item (tool, call_id,
 * args, parameters), or NULL when it is not one. Caller cJSON_Deletes. */
cJSON *park__tool_request(const struct q_park_item *it);
/* park__tool_decision checks d on item it (park_tool_check's rules) and
 * gives what the job does: for a tool call's approve, reject or done, a
 * retry of the step (the worker reads the item's resolution back) with
 * *answer what the item keeps (approved args, the answer; borrowed from
 * d). Returns 0 or -EINVAL. */
int park__tool_decision(const struct q_park_item *it,
                        const struct park_decision *d,
                        struct park_decision *eff, const char **answer);

#endif

/* internal.h: declarations private to worker/ (not a public interface). */
#ifndef STEPQ_WORKER_INTERNAL_H
#define STEPQ_WORKER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* ---- step helpers (step.c) ------------------------------------------ */

/* worker__expand returns a deep copy of item in which every
 * "{{steps.NAME.output}}" in a string is replaced by outputs[i] where
 * names[i] is NAME (a NULL output, or an unknown name, gives ""). Caller
 * owns the copy (cJSON_Delete). */
cJSON *worker__expand(const cJSON *item, const char *const *names,
                      const char *const *outputs, size_t n);

/* worker__degrade applies a step's "degrade" settings to a chat request
 * object in place: max_tokens (and max_completion_tokens) lowered,
 * tools and tool_choice dropped, only the last N messages kept (leading
 * system messages stay). degrade may be NULL (then it lowers nothing). */
void worker__degrade(cJSON *request, const cJSON *degrade);

/* worker__sha256_hex writes the SHA-256 of data as 64 hex digits + NUL. */
void worker__sha256_hex(const void *data, size_t len, char out[65]);

/* worker__has_keys reports whether text parses as a JSON object holding
 * every string of keys (a cJSON array). Text need not be NUL-terminated. */
bool worker__has_keys(const char *text, size_t len, const cJSON *keys);

/* ---- fault injection (worker.c) ------------------------------------- */

#include "queue/queue.h"

/* The worker opens the savepoint of park() and commits each loop turn
 * through these pointers (q_tx_begin and q_tx_commit unless a test
 * replaces them, as beanstalkd's falloc), so tests can fail them. */
extern int (*worker__park_tx_begin)(q_db *db);
extern int (*worker__turn_commit)(q_db *db);

#endif

/* internal.h: what the sources of stepq_view share (private to view/). */
#ifndef STEPQ_VIEW_INTERNAL_H
#define STEPQ_VIEW_INTERNAL_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "queue/queue.h"

/* view__report_failed adds "failed_jobs" to o: the jobs that failed since
 * since, with or without attempts. view__report_resolutions adds
 * "resolutions": the park items resolved since since, who resolved them
 * and how. Each returns 0 or the store's error (o then holds no such
 * member). */
int view__report_failed(q_db *db, int64_t since, cJSON *o);
int view__report_resolutions(q_db *db, int64_t since, cJSON *o);

#endif

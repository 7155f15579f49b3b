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
/* view__add_http_target adds "http": {"method", "url"} to o for an http
 * step's "http" object of its job file (nothing for any other value): the
 * method (POST when not given) and the url as written, templates kept,
 * its secrets masked (httptext_url_masked), so an operator sees where a
 * post went without the job file. */
void view__add_http_target(cJSON *o, const cJSON *http);

int view__report_failed(q_db *db, int64_t since, cJSON *o);

struct config_schedule;
struct sched_cron;
/* view__report_manual_runs adds "manual_runs" to schedule s's entry e:
 * the jobs of s created since since (`schedules run`) whose key's second
 * is no slot of its cron (a run in the very second of a slot is that
 * slot's job): at most 100, the oldest first, each {"at", "job_id",
 * "state"}. Returns 0 or the store's error. */
int view__report_manual_runs(q_db *db, const struct config_schedule *s,
                             const struct sched_cron *cron, int64_t since,
                             cJSON *e);
int view__report_resolutions(q_db *db, int64_t since, cJSON *o);

/* view__audit_add adds "audit" to o: the audit rows of job job_id, or of
 * park item park_id (one of them 0), oldest first. Returns 0 or the
 * store's error (o then holds no such member). */
int view__audit_add(q_db *db, cJSON *o, int64_t job_id, int64_t park_id);

#endif

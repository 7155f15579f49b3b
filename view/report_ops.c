/* report_ops.c: the morning report's account of what operators must act on
 * or know of: every job that failed in the window, those that failed
 * before any attempt (a step that could not be built, an env variable
 * missing) as much as those whose attempts failed, and every resolution
 * of a park item: who resolved what, how, and when. */
#include "view/internal.h"

#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/json.h"
#include "queue/park.h"
#include "queue/report.h"
#include "sched/sched.h"

/* How much of each list the report holds. */
#define REPORT_FAILED_MAX      20
#define REPORT_RESOLUTIONS_MAX 50
#define REPORT_ERROR_MAX       300
#define REPORT_MANUAL_MAX      100

int
view__report_failed(q_db *db, int64_t since, cJSON *o)
{
    struct q_job *j = NULL;
    size_t n = 0;
    cJSON *f, *arr;
    char err[REPORT_ERROR_MAX + 1];
    int rc = q_report_failed(db, since, 0, &j, &n);

    if (rc != 0)
        return rc;
    f = cJSON_AddObjectToObject(o, "failed_jobs");
    cJSON_AddNumberToObject(f, "count", (double)n);
    arr = cJSON_AddArrayToObject(f, "latest");
    for (size_t i = 0; i < n && i < REPORT_FAILED_MAX; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "id", (double)j[i].id);
        cJSON_AddStringToObject(e, "name", j[i].name);
        json_add_time(e, "ended_at", j[i].updated_at);
        if (j[i].error != NULL)
            snprintf(err, sizeof(err), "%s", j[i].error);
        json_add_string(e, "error", j[i].error != NULL ? err : NULL);
        cJSON_AddItemToArray(arr, e);
    }
    q_jobs_free(j, n);
    return 0;
}

int
view__report_resolutions(q_db *db, int64_t since, cJSON *o)
{
    struct q_park_filter filter = {.all = true, .resolved_since = since};
    struct q_park_item *it = NULL;
    size_t n = 0, shown = 0;
    cJSON *r, *arr;
    int rc = q_park_list(db, &filter, &it, &n);

    if (rc != 0)
        return rc;
    r = cJSON_AddObjectToObject(o, "resolutions");
    cJSON_AddNumberToObject(r, "count", (double)n);
    arr = cJSON_AddArrayToObject(r, "latest");
    /* Listed by id; the latest resolved first. */
    for (size_t k = n; k > 0 && shown < REPORT_RESOLUTIONS_MAX; k--, shown++) {
        const struct q_park_item *p = &it[k - 1];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "id", (double)p->id);
        cJSON_AddNumberToObject(e, "job_id", (double)p->job_id);
        json_add_string(e, "step", p->step_name);
        json_add_string(e, "reason", p->reason);
        json_add_string(e, "resolution", p->resolution);
        json_add_string(e, "by", p->resolved_by);
        json_add_time(e, "at", p->resolved_at);
        json_add_string(e, "note", p->note);
        cJSON_AddItemToArray(arr, e);
    }
    q_park_items_free(it, n);
    return 0;
}

/* Whether the instant t (ms) is a slot of cron in zone tz: a whole
 * minute that the cron allows there. */
static bool
is_slot(const struct sched_cron *cron, const char *tz, int64_t t)
{
    struct sched_civil civil;

    return t % 60000 == 0 && sched_civil_of(tz, t / 1000, &civil) == 0 &&
           sched_cron_matches(cron, &civil);
}

int
view__report_manual_runs(q_db *db, const struct config_schedule *s,
                         const struct sched_cron *cron, int64_t since, cJSON *e)
{
    char prefix[300];
    struct q_job *j = NULL;
    size_t n = 0, shown = 0;
    cJSON *arr;
    int rc;

    snprintf(prefix, sizeof(prefix), "schedule:%s:", s->name);
    if ((rc = q_report_keyed(db, prefix, since, 0, &j, &n)) != 0)
        return rc;
    arr = cJSON_AddArrayToObject(e, "manual_runs");
    for (size_t i = 0; i < n && shown < REPORT_MANUAL_MAX; i++) {
        int64_t at;
        if (clock_parse_utc(j[i].key + strlen(prefix), &at) != 0 ||
            (cron != NULL && is_slot(cron, s->tz, at)))
            continue;
        cJSON *r = cJSON_CreateObject();
        json_add_time(r, "at", at);
        cJSON_AddNumberToObject(r, "job_id", (double)j[i].id);
        cJSON_AddStringToObject(r, "state", q_job_state_name(j[i].state));
        cJSON_AddItemToArray(arr, r);
        shown++;
    }
    q_jobs_free(j, n);
    return 0;
}

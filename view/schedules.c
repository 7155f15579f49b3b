/* schedules.c: each schedule of the config with what the store knows of
 * it: paused, the last slot fired and its job, and the next slot. */
#include "view/view.h"

#include <errno.h>
#include <string.h>

#include "common/json.h"
#include "queue/sched.h"
#include "sched/sched.h"

static cJSON *
schedule_json(q_db *db, const struct config_schedule *s,
              const struct q_sched *st, int64_t now)
{
    cJSON *o = cJSON_CreateObject();
    struct sched_cron cron;
    struct q_job job = {0};
    int64_t next = 0;
    char err[256];

    cJSON_AddStringToObject(o, "name", s->name);
    cJSON_AddStringToObject(o, "cron", s->cron);
    cJSON_AddStringToObject(o, "tz", s->tz);
    cJSON_AddStringToObject(o, "catch_up", config_catch_up_name(s->catch_up));
    json_add_string(o, "job", s->job_path != NULL ? s->job_path : "(inline)");
    cJSON_AddBoolToObject(o, "paused", st != NULL && st->paused);
    if (sched_cron_parse(s->cron, &cron, err, sizeof(err)) != 0 ||
        sched_next(&cron, s->tz, now / 1000, &next) != 0)
        next = 0;
    json_add_time(o, "next_slot", next * 1000);
    json_add_time(o, "last_slot", st != NULL ? st->last_slot : 0);
    if (st != NULL && st->last_job_id > 0 &&
        q_job_get(db, st->last_job_id, &job) == 0) {
        cJSON *j = cJSON_AddObjectToObject(o, "last_job");
        cJSON_AddNumberToObject(j, "id", (double)job.id);
        cJSON_AddStringToObject(j, "state", q_job_state_name(job.state));
        q_job_cleanup(&job);
    } else {
        cJSON_AddNullToObject(o, "last_job");
    }
    return o;
}

int
view_schedules(q_db *db, const struct config *cfg, int64_t now, cJSON **out)
{
    struct q_sched *st = NULL;
    size_t n = 0;
    int rc = q_sched_list(db, &st, &n);
    cJSON *arr;

    if (rc != 0)
        return rc;
    arr = cJSON_CreateArray();
    for (size_t i = 0; i < cfg->nschedules; i++) {
        const struct q_sched *mine = NULL;
        for (size_t k = 0; k < n; k++)
            if (strcmp(st[k].name, cfg->schedules[i].name) == 0)
                mine = &st[k];
        cJSON_AddItemToArray(arr,
                             schedule_json(db, &cfg->schedules[i], mine, now));
    }
    q_scheds_free(st, n);
    *out = arr;
    return 0;
}

/* park.c: rendering park items as the reference shows them (`park list
 * --json`, `park show`, `jobs show`). */
#include "park/park.h"

#include "common/clock.h"

static void
add_str(cJSON *o, const char *name, const char *v)
{
    if (v != NULL)
        cJSON_AddStringToObject(o, name, v);
    else
        cJSON_AddNullToObject(o, name);
}

static void
add_time(cJSON *o, const char *name, int64_t ms)
{
    char buf[32];

    if (ms > 0)
        cJSON_AddStringToObject(o, name,
                                clock_format_utc(ms, buf, sizeof(buf)));
    else
        cJSON_AddNullToObject(o, name);
}

cJSON *
park_item_json(const struct q_park_item *it)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddNumberToObject(o, "id", (double)it->id);
    cJSON_AddNumberToObject(o, "job_id", (double)it->job_id);
    add_str(o, "step", it->step_name);
    add_str(o, "reason", it->reason);
    cJSON_AddNumberToObject(o, "attempts", it->attempts);
    add_str(o, "request_sha256", it->request_sha256);
    add_str(o, "error", it->error);
    add_str(o, "tier", it->tier);
    add_time(o, "parked_at", it->parked_at);
    cJSON_AddStringToObject(o, "state", it->open ? "open" : "resolved");
    add_str(o, "resolution", it->resolution);
    add_str(o, "resolved_by", it->resolved_by);
    add_time(o, "resolved_at", it->resolved_at);
    add_str(o, "note", it->note);
    return o;
}

/* park.c: rendering park items as the reference shows them (`park list
 * --json`, `park show`, `jobs show`). */
#include "park/park.h"

#include "common/json.h"

cJSON *
park_item_json(const struct q_park_item *it)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddNumberToObject(o, "id", (double)it->id);
    cJSON_AddNumberToObject(o, "job_id", (double)it->job_id);
    json_add_string(o, "step", it->step_name);
    json_add_string(o, "reason", it->reason);
    cJSON_AddNumberToObject(o, "attempts", it->attempts);
    json_add_string(o, "request_sha256", it->request_sha256);
    json_add_string(o, "error", it->error);
    json_add_string(o, "tier", it->tier);
    json_add_time(o, "parked_at", it->parked_at);
    cJSON_AddStringToObject(o, "state", it->open ? "open" : "resolved");
    json_add_string(o, "resolution", it->resolution);
    json_add_string(o, "resolved_by", it->resolved_by);
    json_add_time(o, "resolved_at", it->resolved_at);
    json_add_string(o, "note", it->note);
    return o;
}

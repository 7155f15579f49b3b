/* park.c: rendering park items as the reference shows them (`park list
 * --json`, `park show`, `jobs show`). */
#include "park/park.h"

#include "common/json.h"
#include "park/internal.h"
#include "queue/park.h"

/* "call": a tool call's item shows the tool, the call id, the exact
 * arguments and the question of an ask tool; "answer": the arguments an
 * operator approved, or the answer given. Other items: null. */
static void
add_call(cJSON *o, const struct q_park_item *it)
{
    cJSON *req = park__tool_request(it), *call;

    if (req == NULL) {
        cJSON_AddNullToObject(o, "call");
        cJSON_AddNullToObject(o, "answer");
        return;
    }
    call = cJSON_AddObjectToObject(o, "call");
    cJSON_AddItemToObject(call, "tool",
                          cJSON_DetachItemFromObjectCaseSensitive(req, "tool"));
    cJSON_AddItemToObject(
        call, "call_id",
        cJSON_DetachItemFromObjectCaseSensitive(req, "call_id"));
    cJSON *args = cJSON_DetachItemFromObjectCaseSensitive(req, "args");
    cJSON_AddItemToObject(call, "args", args ? args : cJSON_CreateNull());
    cJSON *q = cJSON_DetachItemFromObjectCaseSensitive(req, "question");
    cJSON_AddItemToObject(call, "question", q ? q : cJSON_CreateNull());
    cJSON_Delete(req);
    json_add_string(o, "answer", it->answer);
}

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
    add_call(o, it);
    return o;
}

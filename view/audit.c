/* audit.c: the audit trail as the reference's JSON: `stepq audit --json`,
 * GET /v1/audit, and the "audit" member of a job or park item shown. */
#include "view/view.h"

#include "common/json.h"
#include "queue/audit.h"
#include "view/internal.h"

/* One row: id, at, who, action, job_id and park_id (null when none),
 * source, detail (the stored object; {} if it no longer parses). */
static cJSON *
row_json(const struct q_audit *a)
{
    cJSON *o = cJSON_CreateObject(), *d = cJSON_Parse(a->detail);

    cJSON_AddNumberToObject(o, "id", (double)a->id);
    json_add_time(o, "at", a->at);
    cJSON_AddStringToObject(o, "who", a->who);
    cJSON_AddStringToObject(o, "action", a->action);
    if (a->job_id > 0)
        cJSON_AddNumberToObject(o, "job_id", (double)a->job_id);
    else
        cJSON_AddNullToObject(o, "job_id");
    if (a->park_id > 0)
        cJSON_AddNumberToObject(o, "park_id", (double)a->park_id);
    else
        cJSON_AddNullToObject(o, "park_id");
    cJSON_AddStringToObject(o, "source", a->source);
    if (!cJSON_IsObject(d)) {
        cJSON_Delete(d);
        d = cJSON_CreateObject();
    }
    cJSON_AddItemToObject(o, "detail", d);
    return o;
}

int
view_audit(q_db *db, const struct q_audit_filter *f, cJSON **out)
{
    struct q_audit *rows = NULL;
    size_t n = 0;
    int rc = q_audit_list(db, f, &rows, &n);

    if (rc != 0)
        return rc;
    *out = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(*out, row_json(&rows[i]));
    q_audits_free(rows, n);
    return 0;
}

int
view__audit_add(q_db *db, cJSON *o, int64_t job_id, int64_t park_id)
{
    struct q_audit_filter f = {.job_id = job_id, .park_id = park_id};
    cJSON *arr = NULL;
    int rc = view_audit(db, &f, &arr);

    if (rc == 0)
        cJSON_AddItemToObject(o, "audit", arr);
    return rc;
}

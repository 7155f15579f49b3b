/* park.c: a park item shown with what an operator needs to decide it. */
#include "view/view.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/httptext.h"
#include "common/json.h"
#include "park/park.h"
#include "queue/park.h"
#include "spec/spec.h"
#include "view/internal.h"

void
view__add_http_target(cJSON *o, const cJSON *http)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(http, "method"),
                *u = cJSON_GetObjectItemCaseSensitive(http, "url");
    cJSON *t;
    char *url;

    if (!cJSON_IsObject(http) || !cJSON_IsString(u))
        return;
    t = cJSON_AddObjectToObject(o, "http");
    cJSON_AddStringToObject(t, "method",
                            cJSON_IsString(m) ? m->valuestring : "POST");
    url = httptext_url_masked(u->valuestring);
    cJSON_AddStringToObject(t, "url", url);
    free(url);
}

/* Adds what the job file says about the step (kind, side effects, key). */
static void
add_step_facts(cJSON *o, const struct q_job *job, int step)
{
    struct spec_job *spec = NULL;
    char err[256];

    if (spec_parse(job->spec, strlen(job->spec),
                   &(struct spec_opts){.stored = true}, &spec, err,
                   sizeof(err)) != 0 ||
        step < 0 || (size_t)step >= spec->nsteps) {
        spec_job_free(spec);
        return;
    }
    const struct spec_step *s = &spec->steps[step];
    cJSON_AddStringToObject(o, "kind",
                            s->kind == SPEC_STEP_HTTP ? "http" : "chat");
    cJSON_AddBoolToObject(o, "side_effects", s->side_effects);
    cJSON_AddBoolToObject(o, "replayable", s->replayable);
    cJSON_AddBoolToObject(o, "idempotency_key", s->idempotency_key != NULL);
    view__add_http_target(o, s->http);
    spec_job_free(spec);
}

static cJSON *
attempts_json(const struct q_attempt *a, size_t n)
{
    cJSON *arr = cJSON_CreateArray();
    char buf[32];

    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "attempt", a[i].attempt);
        json_add_string(o, "tier", a[i].tier);
        if (a[i].status > 0)
            cJSON_AddNumberToObject(o, "status", a[i].status);
        else
            cJSON_AddNullToObject(o, "status");
        cJSON_AddStringToObject(o, "outcome",
                                a[i].outcome ? a[i].outcome : "(no result)");
        json_add_string(o, "reason", a[i].reason);
        json_add_string(o, "decision", a[i].decision);
        cJSON_AddStringToObject(
            o, "started_at",
            clock_format_utc(a[i].started_at, buf, sizeof(buf)));
        json_add_string(o, "body", a[i].body);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

static int
item_read(q_db *db, int64_t id, cJSON **out)
{
    struct q_park_item it = {0};
    struct q_job job = {0};
    struct q_attempt *a = NULL;
    size_t na = 0;
    int rc = q_park_get(db, id, &it);

    if (rc == 0)
        rc = q_job_get(db, it.job_id, &job);
    if (rc == 0)
        rc = q_attempts_list(db, it.job_id, it.step, &a, &na);
    if (rc == 0) {
        cJSON *o = park_item_json(&it);
        cJSON_AddStringToObject(o, "job_name", job.name);
        cJSON_AddStringToObject(o, "job_state", q_job_state_name(job.state));
        add_step_facts(o, &job, it.step);
        json_add_string(o, "request", it.request);
        cJSON_AddItemToObject(o, "history", attempts_json(a, na));
        if ((rc = view__audit_add(db, o, 0, id)) == 0)
            *out = o;
        else
            cJSON_Delete(o);
    }
    q_attempts_free(a, na);
    q_park_item_cleanup(&it);
    q_job_cleanup(&job);
    return rc;
}

int
view_park_item(q_db *db, int64_t id, cJSON **out)
{
    int rc = q_read_begin(db);

    if (rc != 0)
        return rc;
    rc = item_read(db, id, out);
    q_read_end(db);
    return rc;
}

cJSON *
view_park_list(const struct q_park_item *items, size_t n)
{
    cJSON *arr = cJSON_CreateArray();

    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, park_item_json(&items[i]));
    return arr;
}

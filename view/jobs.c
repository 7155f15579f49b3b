/* jobs.c: a job as listed and a job shown with its steps and attempts. */
#include "view/view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/price.h"
#include "park/park.h"
#include "queue/park.h"
#include "queue/report.h"
#include "spec/spec.h"
#include "view/internal.h"

cJSON *
view_job_row(const struct q_job *j)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddNumberToObject(o, "id", (double)j->id);
    cJSON_AddStringToObject(o, "name", j->name);
    json_add_string(o, "key", j->key);
    cJSON_AddStringToObject(o, "state", q_job_state_name(j->state));
    json_add_time(o, "created_at", j->created_at);
    json_add_time(o, "updated_at", j->updated_at);
    return o;
}

int
view_jobs(q_db *db, int state, int64_t after, size_t limit, cJSON **out)
{
    struct q_job *jobs = NULL;
    size_t n = 0;
    int rc = q_jobs_list(db, state, after, limit, &jobs, &n);

    if (rc != 0)
        return rc;
    *out = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(*out, view_job_row(&jobs[i]));
    q_jobs_free(jobs, n);
    return 0;
}

/* Sums the cost of the attempts of step (< 0: all): *priced when any of
 * them had a price. */
static int64_t
cost_sum(const struct q_attempt *a, size_t n, int step, bool *priced)
{
    int64_t sum = 0;

    *priced = false;
    for (size_t i = 0; i < n; i++) {
        if ((step < 0 || a[i].step == step) && a[i].priced) {
            *priced = true;
            sum += a[i].cost_nusd;
        }
    }
    return sum;
}

/* The job's retries (q_retries_list), for the attempts that came after
 * each. */
struct retries {
    const struct q_retry *v;
    size_t n;
};

/* Which retry an attempt started at `at` ran after: 1 for the first of
 * rt, 0 for none (the job's first run). Times are the store's clock. */
static size_t
retry_of(const struct retries *rt, int64_t at)
{
    size_t k = 0;

    while (k < rt->n && rt->v[k].at <= at)
        k++;
    return k;
}

/* "batch": {"id", "provider_id"} of the batch an attempt is an item of
 * (a tier in batch mode), else null. */
static void
add_batch(cJSON *o, const struct q_attempt *a)
{
    cJSON *b;

    if (a->batch_id == 0) {
        cJSON_AddNullToObject(o, "batch");
        return;
    }
    b = cJSON_AddObjectToObject(o, "batch");
    cJSON_AddNumberToObject(b, "id", (double)a->batch_id);
    json_add_string(b, "provider_id", a->batch_provider_id);
}

/* Builds the "history" array of one step from the job's attempts. */
/* An agent step's attempt (worker/agent*.c): "kind" ("turn", "tool", or
 * null for a plain attempt); a tool call's "call_id", "tool", "args" (as
 * JSON when they parse, else the text) and "result" (what the model got,
 * cut at VIEW_RESULT_MAX bytes); a turn's "calls" (how many it asked). */
#define VIEW_RESULT_MAX 300
static void
add_agent(cJSON *o, const struct q_attempt *a)
{
    const char *k = a->kind ? a->kind : "";
    cJSON *args;

    json_add_string(o, "kind", a->kind);
    if (strcmp(k, "tool") == 0) {
        json_add_string(o, "call_id", a->call_id);
        json_add_string(o, "tool", a->tool);
        args = a->args ? cJSON_Parse(a->args) : NULL;
        if (args != NULL)
            cJSON_AddItemToObject(o, "args", args);
        else
            json_add_string(o, "args", a->args);
        if (a->body != NULL && strlen(a->body) > VIEW_RESULT_MAX) {
            char cut[VIEW_RESULT_MAX + 4];
            size_t n = VIEW_RESULT_MAX;
            while (n > 0 && ((unsigned char)a->body[n] & 0xC0) == 0x80)
                n--; /* on a character */
            snprintf(cut, sizeof(cut), "%.*s...", (int)n, a->body);
            cJSON_AddStringToObject(o, "result", cut);
        } else {
            json_add_string(o, "result", a->body);
        }
    } else if (strcmp(k, "turn") == 0 && a->decision != NULL &&
               strcmp(a->decision, "tool_calls") == 0) {
        cJSON *root = a->body ? cJSON_Parse(a->body) : NULL;
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(
                cJSON_GetArrayItem(
                    cJSON_GetObjectItemCaseSensitive(root, "choices"), 0),
                "message"),
            "tool_calls");
        cJSON_AddNumberToObject(o, "calls", cJSON_GetArraySize(tc));
        cJSON_Delete(root);
    }
}

static cJSON *
history_json(const struct q_attempt *a, size_t n, int step,
             const struct retries *rt, int *count)
{
    cJSON *arr = cJSON_CreateArray();

    *count = 0;
    for (size_t i = 0; i < n; i++) {
        cJSON *o;
        bool ok;
        if (a[i].step != step)
            continue;
        (*count)++;
        ok = a[i].outcome != NULL && strcmp(a[i].outcome, "ok") == 0;
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "attempt", a[i].attempt);
        json_add_string(o, "tier", a[i].tier);
        if (a[i].finished_at != 0 && a[i].status != 0)
            cJSON_AddNumberToObject(o, "status", a[i].status);
        else
            cJSON_AddNullToObject(o, "status");
        json_add_string(o, "outcome", a[i].outcome);
        json_add_string(o, "reason", a[i].reason);
        json_add_string(o, "decision", a[i].decision);
        cJSON_AddNumberToObject(o, "delay_ms", (double)a[i].delay_ms);
        cJSON_AddNumberToObject(o, "latency_ms", (double)a[i].latency_ms);
        json_add_string(o, "body", ok ? NULL : a[i].body);
        cJSON_AddBoolToObject(o, "masked", a[i].masked);
        json_add_string(o, "route", a[i].route);
        add_batch(o, &a[i]);
        add_agent(o, &a[i]);
        if (a[i].finished_at != 0)
            cJSON_AddNumberToObject(o, "tokens", (double)a[i].tokens);
        else
            cJSON_AddNullToObject(o, "tokens");
        json_add_cost(o, a[i].priced, a[i].cost_nusd);
        cJSON_AddBoolToObject(o, "cost_estimated", a[i].cost_estimated);
        json_add_string(o, "request_sha256", a[i].request_sha256);
        json_add_time(o, "started_at", a[i].started_at);
        json_add_time(o, "finished_at", a[i].finished_at);
        if (retry_of(rt, a[i].started_at) > 0)
            cJSON_AddNumberToObject(o, "retry",
                                    (double)retry_of(rt, a[i].started_at));
        else
            cJSON_AddNullToObject(o, "retry");
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

/* "schedule": {"name", "slot"} of a slot's job (its key is the slot's:
 * "schedule:NAME:SLOT", and no other job may have such a key), else
 * null. */
static void
add_schedule(cJSON *o, const char *key)
{
    const char *name, *colon;
    char buf[128];
    cJSON *s;

    if (!spec_key_reserved(key)) {
        cJSON_AddNullToObject(o, "schedule");
        return;
    }
    name = key + strlen(SPEC_SCHEDULE_KEY_PREFIX);
    colon = strchr(name, ':');
    if (colon == NULL) {
        cJSON_AddNullToObject(o, "schedule");
        return;
    }
    s = cJSON_AddObjectToObject(o, "schedule");
    snprintf(buf, sizeof(buf), "%.*s", (int)(colon - name), name);
    cJSON_AddStringToObject(s, "name", buf);
    cJSON_AddStringToObject(s, "slot", colon + 1);
}

/* "input": the job's input as JSON (stored as its text), or null. */
static void
add_input(cJSON *o, const char *text)
{
    cJSON *v = text ? cJSON_Parse(text) : NULL;

    cJSON_AddItemToObject(o, "input", v ? v : cJSON_CreateNull());
}

/* Renders the job with its steps. Steps without a progress row have not
 * started: they are pending. */
static cJSON *
job_json(const struct q_job *j, const struct q_step *steps, size_t nsteps,
         const struct q_attempt *att, size_t natt, const struct retries *rt)
{
    cJSON *o = cJSON_CreateObject(), *arr, *spec, *sp;
    int idx = 0;
    int64_t sum;
    bool priced;

    cJSON_AddNumberToObject(o, "id", (double)j->id);
    cJSON_AddStringToObject(o, "name", j->name);
    json_add_string(o, "key", j->key);
    cJSON_AddStringToObject(o, "state", q_job_state_name(j->state));
    cJSON_AddNumberToObject(o, "priority", (double)j->priority);
    json_add_time(o, "created_at", j->created_at);
    json_add_time(o, "updated_at", j->updated_at);
    json_add_time(o, "run_at", j->run_at);
    json_add_time(o, "deadline_at", j->deadline_at);
    json_add_string(o, "error", j->error);
    add_input(o, j->input);
    add_schedule(o, j->key);
    sum = cost_sum(att, natt, -1, &priced);
    json_add_cost(o, priced, sum);
    arr = cJSON_AddArrayToObject(o, "steps");
    spec = cJSON_Parse(j->spec);
    sp = cJSON_GetObjectItemCaseSensitive(spec, "steps");
    for (const cJSON *s = sp ? sp->child : NULL; s != NULL;
         s = s->next, idx++) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(s, "name");
        const struct q_step *row = NULL;
        cJSON *so = cJSON_CreateObject();
        int count = 0;
        for (size_t k = 0; k < nsteps; k++) {
            if (steps[k].index == idx)
                row = &steps[k];
        }
        const cJSON *http = cJSON_GetObjectItemCaseSensitive(s, "http");
        cJSON_AddStringToObject(so, "name",
                                cJSON_IsString(name) ? name->valuestring : "?");
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(s, "kind");
        cJSON_AddStringToObject(
            so, "kind", cJSON_IsString(kind) ? kind->valuestring : "chat");
        view__add_http_target(so, http);
        if (cJSON_GetObjectItemCaseSensitive(s, "foreach") != NULL)
            cJSON_AddItemToObject(
                so, "foreach",
                cJSON_Duplicate(cJSON_GetObjectItem(s, "foreach"), true));
        cJSON_AddStringToObject(
            so, "state", q_step_state_name(row ? row->state : Q_STEP_PENDING));
        json_add_string(so, "tier", row ? row->tier : NULL);
        cJSON *hist = history_json(att, natt, idx, rt, &count);
        cJSON_AddNumberToObject(so, "attempts", count);
        cJSON_AddNumberToObject(so, "tokens", row ? (double)row->tokens : 0);
        sum = cost_sum(att, natt, idx, &priced);
        json_add_cost(so, priced, sum);
        /* A step skipped by its "when" keeps why where an output would
         * be (worker/step.c); it has no output. */
        bool why = row && row->state == Q_STEP_SKIPPED && row->output;
        json_add_string(so, "output", row && !why ? row->output : NULL);
        json_add_string(so, "reason", why ? row->output : NULL);
        cJSON_AddItemToObject(so, "history", hist);
        cJSON_AddItemToArray(arr, so);
    }
    cJSON_Delete(spec);
    return o;
}

/* "retries": each retry of the job, oldest first: when, who, from which
 * step, and the state and error the job had then. */
static void
add_retries(cJSON *o, const struct retries *rt)
{
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(o, "steps");
    cJSON *arr = cJSON_AddArrayToObject(o, "retries");

    for (size_t i = 0; i < rt->n; i++) {
        const struct q_retry *r = &rt->v[i];
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(steps, r->from), "name");
        cJSON *e = cJSON_CreateObject();
        json_add_time(e, "at", r->at);
        cJSON_AddStringToObject(e, "by", r->by);
        json_add_string(e, "from",
                        cJSON_IsString(name) ? name->valuestring : NULL);
        cJSON_AddStringToObject(e, "state", q_job_state_name(r->prior_state));
        json_add_string(e, "error", r->prior_error);
        cJSON_AddItemToArray(arr, e);
    }
}

/* "elements" of each foreach step of job j (shown in o): the job of
 * each element made so far, by index: its id, state and error. */
static int
add_elements(q_db *db, const struct q_job *j, cJSON *o)
{
    cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "steps");
    int idx = 0, rc = 0;

    for (s = s ? s->child : NULL; s != NULL; s = s->next, idx++) {
        const cJSON *fe = cJSON_GetObjectItemCaseSensitive(s, "foreach");
        struct q_job *el = NULL;
        size_t n = 0;
        char prefix[96];
        cJSON *arr;
        if (cJSON_GetObjectItemCaseSensitive(fe, "in") == NULL)
            continue; /* none, or an element's own job */
        snprintf(prefix, sizeof(prefix),
                 SPEC_FOREACH_KEY_PREFIX "%lld:%d:", (long long)j->id, idx);
        if ((rc = q_report_keyed(db, prefix, j->created_at, 0, &el, &n)) != 0)
            return rc;
        arr = cJSON_AddArrayToObject(s, "elements");
        for (size_t i = 0; i < n; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "index",
                                    atoi(el[i].key + strlen(prefix)));
            cJSON_AddNumberToObject(e, "job", (double)el[i].id);
            cJSON_AddStringToObject(e, "state", q_job_state_name(el[i].state));
            json_add_string(e, "error", el[i].error);
            cJSON_AddItemToArray(arr, e);
        }
        q_jobs_free(el, n);
    }
    return 0;
}

static int
job_read(q_db *db, int64_t id, cJSON **out)
{
    struct q_job job = {0};
    struct q_step *steps = NULL;
    struct q_attempt *att = NULL;
    struct q_park_item *parked = NULL;
    struct q_retry *retries = NULL;
    size_t nsteps = 0, natt = 0, nparked = 0, nretries = 0;
    int rc = q_job_get(db, id, &job);

    if (rc == 0)
        rc = q_steps_get(db, id, &steps, &nsteps);
    if (rc == 0)
        rc = q_attempts_list(db, id, -1, &att, &natt);
    if (rc == 0) {
        struct q_park_filter f = {.all = true, .job_id = id};
        rc = q_park_list(db, &f, &parked, &nparked);
    }
    if (rc == 0)
        rc = q_retries_list(db, id, &retries, &nretries);
    if (rc == 0) {
        const struct retries rt = {retries, nretries};
        cJSON *park;
        *out = job_json(&job, steps, nsteps, att, natt, &rt);
        park = cJSON_AddArrayToObject(*out, "park");
        for (size_t i = 0; i < nparked; i++)
            cJSON_AddItemToArray(park, park_item_json(&parked[i]));
        add_retries(*out, &rt);
        if ((rc = add_elements(db, &job, *out)) != 0 ||
            (rc = view__audit_add(db, *out, id, 0)) != 0) {
            cJSON_Delete(*out);
            *out = NULL;
        }
    }
    q_retries_free(retries, nretries);
    q_park_items_free(parked, nparked);
    q_job_cleanup(&job);
    q_steps_free(steps, nsteps);
    q_attempts_free(att, natt);
    return rc;
}

/* A job's rows in one snapshot: its state, steps and attempts as one
 * moment had them, not a step done under a job still running. */
int
view_job(q_db *db, int64_t id, cJSON **out)
{
    int rc = q_read_begin(db);

    if (rc != 0)
        return rc;
    rc = job_read(db, id, out);
    q_read_end(db);
    return rc;
}

bool
view_wait_over(enum q_job_state st, int64_t ver, int64_t parked_ver)
{
    if (st == Q_JOB_SUCCEEDED || st == Q_JOB_FAILED || st == Q_JOB_CANCELLED)
        return true;
    return st == Q_JOB_PARKED && ver != parked_ver;
}

/* cmd_jobs.c: stepq jobs list|show|cancel. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/xalloc.h"
#include "park/park.h"
#include "queue/queue.h"

static const char usage[] =
    "usage: stepq jobs list [--state S] [--json]\n"
    "       stepq jobs show ID [--json]\n"
    "       stepq jobs cancel ID\n"
    "\n"
    "list    every job, oldest first; --state queued|running|succeeded|\n"
    "        failed|parked|cancelled keeps one state\n"
    "show    one job with its steps and the history of every attempt\n"
    "cancel  stop a queued, running or parked job (exit 4 if it already\n"
    "        ended, 3 if there is no such job)\n";

static int
jobs_list(struct cli_env *env, int argc, char **argv)
{
    const char *state = NULL;
    bool json = false;
    struct cli_opt opts[] = {
        {"state", &state, NULL}, {"json", NULL, &json}, {NULL, NULL, NULL}};
    enum q_job_state st = Q_JOB_QUEUED;
    struct q_job *jobs = NULL;
    size_t n = 0;
    q_db *db = NULL;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0)
        return rc;
    if (state != NULL && q_job_state_from_name(state, &st) != 0) {
        cli_error("jobs list: --state must be queued, running, succeeded, "
                  "failed, parked or cancelled, not %s",
                  state);
        return CLI_USAGE;
    }
    if ((rc = cli_open_db(env, &db)) != 0)
        return rc;
    rc = q_jobs_list(db, state ? (int)st : -1, 0, &jobs, &n);
    q_close(db);
    if (rc != 0) {
        cli_error("jobs list: cannot read the database");
        return CLI_RUNTIME;
    }
    if (json) {
        cJSON *arr = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "id", (double)jobs[i].id);
            cJSON_AddStringToObject(o, "name", jobs[i].name);
            json_add_string(o, "key", jobs[i].key);
            cJSON_AddStringToObject(o, "state",
                                    q_job_state_name(jobs[i].state));
            json_add_time(o, "created_at", jobs[i].created_at);
            json_add_time(o, "updated_at", jobs[i].updated_at);
            cJSON_AddItemToArray(arr, o);
        }
        cli_print_json(arr);
    } else {
        printf("%-8s %-10s %-20s %-28s %s\n", "ID", "STATE", "CREATED", "NAME",
               "KEY");
        for (size_t i = 0; i < n; i++) {
            char buf[32];
            printf("%-8lld %-10s %-20s %-28s %s\n", (long long)jobs[i].id,
                   q_job_state_name(jobs[i].state),
                   clock_format_utc(jobs[i].created_at, buf, sizeof(buf)),
                   jobs[i].name, jobs[i].key ? jobs[i].key : "-");
        }
    }
    q_jobs_free(jobs, n);
    return CLI_OK;
}

/* Builds the "history" array of one step from the job's attempts. */
static cJSON *
history_json(const struct q_attempt *a, size_t n, int step, int *count)
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
        json_add_string(o, "request_sha256", a[i].request_sha256);
        json_add_time(o, "started_at", a[i].started_at);
        json_add_time(o, "finished_at", a[i].finished_at);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

/* Renders the reference's "jobs show --json" object. Steps without a progress
 * row have not started: they are pending. */
static cJSON *
job_json(const struct q_job *j, const struct q_step *steps, size_t nsteps,
         const struct q_attempt *att, size_t natt)
{
    cJSON *o = cJSON_CreateObject(), *arr, *spec, *sp;
    int idx = 0;

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
        cJSON_AddStringToObject(so, "name",
                                cJSON_IsString(name) ? name->valuestring : "?");
        cJSON_AddStringToObject(
            so, "state", q_step_state_name(row ? row->state : Q_STEP_PENDING));
        json_add_string(so, "tier", row ? row->tier : NULL);
        cJSON *hist = history_json(att, natt, idx, &count);
        cJSON_AddNumberToObject(so, "attempts", count);
        cJSON_AddNumberToObject(so, "tokens", row ? (double)row->tokens : 0);
        json_add_string(so, "output", row ? row->output : NULL);
        cJSON_AddItemToObject(so, "history", hist);
        cJSON_AddItemToArray(arr, so);
    }
    cJSON_Delete(spec);
    return o;
}

static void
print_job_text(const cJSON *o)
{
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(o, "steps"), *s;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(o, "error");
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(o, "key");

    printf("job %d  %s  %s\n",
           cJSON_GetObjectItemCaseSensitive(o, "id")->valueint,
           cJSON_GetObjectItemCaseSensitive(o, "name")->valuestring,
           cJSON_GetObjectItemCaseSensitive(o, "state")->valuestring);
    printf("  key      %s\n", cJSON_IsString(key) ? key->valuestring : "-");
    printf("  created  %s\n",
           cJSON_GetObjectItemCaseSensitive(o, "created_at")->valuestring);
    printf("  deadline %s\n",
           cJSON_GetObjectItemCaseSensitive(o, "deadline_at")->valuestring);
    if (cJSON_IsString(err))
        printf("  error    %s\n", err->valuestring);
    cJSON_ArrayForEach(s, steps)
    {
        const cJSON *h, *tier = cJSON_GetObjectItemCaseSensitive(s, "tier");
        printf("  step %-20s %-10s tier %-10s attempts %d\n",
               cJSON_GetObjectItemCaseSensitive(s, "name")->valuestring,
               cJSON_GetObjectItemCaseSensitive(s, "state")->valuestring,
               cJSON_IsString(tier) ? tier->valuestring : "-",
               cJSON_GetObjectItemCaseSensitive(s, "attempts")->valueint);
        cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(s, "history"))
        {
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(h, "status");
            const cJSON *oc = cJSON_GetObjectItemCaseSensitive(h, "outcome");
            const cJSON *de = cJSON_GetObjectItemCaseSensitive(h, "decision");
            char status[16] = "-";
            if (cJSON_IsNumber(st))
                snprintf(status, sizeof(status), "%d", st->valueint);
            printf("    #%d status %s outcome %s decision %s\n",
                   cJSON_GetObjectItemCaseSensitive(h, "attempt")->valueint,
                   status, cJSON_IsString(oc) ? oc->valuestring : "(no result)",
                   cJSON_IsString(de) ? de->valuestring : "-");
        }
    }
}

static int
jobs_show(struct cli_env *env, int argc, char **argv)
{
    bool json = false;
    struct cli_opt opts[] = {{"json", NULL, &json}, {NULL, NULL, NULL}};
    struct q_job job = {0};
    struct q_step *steps = NULL;
    struct q_attempt *att = NULL;
    struct q_park_item *parked = NULL;
    size_t nsteps = 0, natt = 0, nparked = 0;
    const char *pos[1];
    long long id = 0;
    q_db *db = NULL;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, pos, 1, &npos, usage)) != 0)
        return rc;
    if (npos != 1) {
        cli_error("jobs show: which job? (stepq jobs show ID)");
        return CLI_USAGE;
    }
    if ((rc = cli_parse_id(pos[0], &id)) != 0)
        return rc;
    if ((rc = cli_open_db(env, &db)) != 0)
        return rc;
    rc = q_job_get(db, id, &job);
    if (rc == 0)
        rc = q_steps_get(db, id, &steps, &nsteps);
    if (rc == 0)
        rc = q_attempts_list(db, id, -1, &att, &natt);
    if (rc == 0) {
        struct q_park_filter f = {.all = true, .job_id = id};
        rc = q_park_list(db, &f, &parked, &nparked);
    }
    q_close(db);
    if (rc == -ENOENT) {
        cli_error("jobs show: no job %lld", id);
        return CLI_NOTFOUND;
    }
    if (rc != 0) {
        cli_error("jobs show: cannot read the database");
        q_job_cleanup(&job);
        q_steps_free(steps, nsteps);
        q_attempts_free(att, natt);
        return CLI_RUNTIME;
    }
    cJSON *o = job_json(&job, steps, nsteps, att, natt);
    cJSON *park = cJSON_AddArrayToObject(o, "park");
    for (size_t i = 0; i < nparked; i++)
        cJSON_AddItemToArray(park, park_item_json(&parked[i]));
    q_park_items_free(parked, nparked);
    q_job_cleanup(&job);
    q_steps_free(steps, nsteps);
    q_attempts_free(att, natt);
    if (json) {
        cli_print_json(o);
    } else {
        print_job_text(o);
        cJSON_Delete(o);
    }
    return CLI_OK;
}

static int
jobs_cancel(struct cli_env *env, int argc, char **argv)
{
    const char *pos[1];
    long long id = 0;
    q_db *db = NULL;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, NULL, pos, 1, &npos, usage)) != 0)
        return rc;
    if (npos != 1) {
        cli_error("jobs cancel: which job? (stepq jobs cancel ID)");
        return CLI_USAGE;
    }
    if ((rc = cli_parse_id(pos[0], &id)) != 0)
        return rc;
    if ((rc = cli_open_db(env, &db)) != 0)
        return rc;
    rc = q_cancel(db, id, cli_now(db));
    q_close(db);
    switch (rc) {
    case 0:
        printf("cancelled job %lld\n", id);
        return CLI_OK;
    case -ENOENT:
        cli_error("jobs cancel: no job %lld", id);
        return CLI_NOTFOUND;
    case -EALREADY:
        cli_error("jobs cancel: job %lld has already ended", id);
        return CLI_CONFLICT;
    default:
        cli_error("jobs cancel: cannot write to the database");
        return CLI_RUNTIME;
    }
}

int
cmd_jobs(struct cli_env *env, int argc, char **argv)
{
    static const struct cli_sub subs[] = {{"list", jobs_list},
                                          {"show", jobs_show},
                                          {"cancel", jobs_cancel},
                                          {NULL, NULL}};

    return cli_subcommand(env, argc, argv, subs, usage);
}

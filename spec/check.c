/* check.c: `stepq check` and POST /v1/jobs/check: a job validated as an
 * enqueue would, its tiers and environment variables looked up, and what
 * each step sends filled as far as it can be before the job runs; nothing
 * written, nothing sent.
 */
#include "spec/spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

/* Every "env:NAME" header of job j's http steps names a set variable. */
static int
check_env(const struct spec_job *j, char *err, size_t len)
{
    for (size_t i = 0; i < j->nsteps; i++) {
        const cJSON *h =
            j->steps[i].http
                ? cJSON_GetObjectItemCaseSensitive(j->steps[i].http, "headers")
                : NULL;
        for (const cJSON *c = h ? h->child : NULL; c != NULL; c = c->next) {
            const char *v = cJSON_IsString(c) ? c->valuestring : "";
            if (strncmp(v, "env:", 4) != 0 || getenv(v + 4) != NULL)
                continue;
            snprintf(err, len,
                     "steps[%zu].http.headers.%s: environment variable %s is "
                     "not set (step %s reads it when it sends)",
                     i, c->string, v + 4, j->steps[i].name);
            return -ENOENT;
        }
    }
    return 0;
}

/* One job's part of the report. */
static cJSON *
job_report(const struct spec_job *j)
{
    struct spec_vars v = {.input = j->input};
    cJSON *o = cJSON_CreateObject(), *steps, *sends;
    char why[512];

    cJSON_AddStringToObject(o, "name", j->name);
    cJSON_AddItemToObject(o, "input",
                          j->input ? cJSON_Duplicate(j->input, true)
                                   : cJSON_CreateNull());
    steps = cJSON_AddArrayToObject(o, "steps");
    for (size_t i = 0; i < j->nsteps; i++) {
        const struct spec_step *s = &j->steps[i];
        cJSON *so = cJSON_CreateObject();
        cJSON_AddStringToObject(so, "name", s->name);
        cJSON_AddStringToObject(so, "kind",
                                s->kind == SPEC_STEP_CHAT ? "chat" : "http");
        cJSON_AddItemToObject(so, "when",
                              s->when ? cJSON_Duplicate(s->when, true)
                                      : cJSON_CreateNull());
        /* Validation read every input template: filling cannot fail. */
        if (spec_step_fill(j, i, &v, &sends, why, sizeof(why)) != 0)
            sends = cJSON_CreateString(why);
        cJSON_AddItemToObject(so, "sends", sends);
        cJSON_AddItemToArray(steps, so);
    }
    return o;
}

int
spec_check(const char *text, size_t len, const struct config *cfg,
           const cJSON *input, cJSON **report, char *err, size_t errlen)
{
    static const char *const no_tiers[1] = {NULL};
    const char **names = spec_tier_names(cfg);
    struct spec_opts o = {.tiers = names ? names : no_tiers,
                          .ntiers = names ? cfg->ntiers : 0,
                          .input = input,
                          .tools = cfg != NULL ? &cfg->tools : NULL,
                          .hooks = cfg != NULL ? &cfg->hooks : NULL};
    struct spec_job **jobs = NULL;
    char why[1024];
    size_t n = 0;
    int rc = spec_parse_many(text, len, &o, &jobs, &n, err, errlen);
    cJSON *out, *arr;

    free(names);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if ((rc = check_env(jobs[i], why, sizeof(why))) == 0)
            continue;
        if (n > 1)
            snprintf(err, errlen, "job %zu: %s", i, why);
        else
            snprintf(err, errlen, "%s", why);
        spec_jobs_free(jobs, n);
        return rc;
    }
    out = cJSON_CreateObject();
    cJSON_AddTrueToObject(out, "ok");
    arr = cJSON_AddArrayToObject(out, "jobs");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, job_report(jobs[i]));
    spec_jobs_free(jobs, n);
    *report = out;
    return 0;
}

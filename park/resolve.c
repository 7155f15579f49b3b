/* resolve.c: what an operator's decision on a park item does, and which
 * decisions are valid. The CLI (and later the HTTP API) parse their input
 * into a struct park_decision and call these; the storage primitives are
 * the queue's (q_park_close, q_job_requeue_parked, q_job_end_parked,
 * q_step_reset), composed here once for every backend.
 */
#include "park/park.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "park/internal.h"
#include "queue/park.h"
#include "queue/report.h"
#include "tier/tier.h"

static const char *const how_names[] = {"retry", "skip",    "done",
                                        "fail",  "approve", "reject"};

const char *
park_how_name(enum park_how how)
{
    return (unsigned)how < 6 ? how_names[how] : "unknown";
}

int
park_how_from_name(const char *name, enum park_how *out)
{
    for (int i = 0; name != NULL && i < 6; i++) {
        if (strcmp(name, how_names[i]) == 0) {
            *out = (enum park_how)i;
            return 0;
        }
    }
    return -EINVAL;
}

/* Writes why into err; returns -EINVAL. */
static int
refuse(char *err, size_t len, const char *why)
{
    snprintf(err, len, "%s", why);
    return -EINVAL;
}

int
park_decision_check(const struct park_decision *d, bool bulk,
                    const struct config *cfg, char *err, size_t len)
{
    if ((unsigned)d->how > PARK_REJECT)
        return refuse(err, len, "unknown resolution");
    if (bulk && (d->how == PARK_APPROVE || d->how == PARK_REJECT))
        return refuse(err, len,
                      "approve and reject are per item (each shows its call)");
    if (d->args != NULL && d->how != PARK_APPROVE)
        return refuse(err, len, "args go with approve");
    if (d->by == NULL || d->by[strspn(d->by, " \t")] == '\0')
        return refuse(err, len, "say who resolves it (by)");
    if (!json_plain_text(d->by, false))
        return refuse(err, len,
                      "by must be UTF-8 text without control characters");
    if (d->note != NULL && !json_plain_text(d->note, true))
        return refuse(err, len,
                      "the note must be UTF-8 text without control "
                      "characters (newlines and tabs are fine)");
    if (bulk && d->how == PARK_DONE)
        return refuse(err, len, "done is per item (its output is the step's)");
    if (d->output != NULL && d->how != PARK_DONE)
        return refuse(err, len, "output goes with done");
    if (d->tier != NULL && (bulk || d->how != PARK_RETRY))
        return refuse(err, len,
                      bulk ? "a tier to retry on is per item"
                           : "tier goes with retry");
    if (d->not_before != 0 && d->how != PARK_RETRY)
        return refuse(err, len, "not_before goes with retry");
    if (d->lift_wall && d->how != PARK_RETRY)
        return refuse(err, len, "lift_wall goes with retry");
    if (d->not_before < 0)
        return refuse(err, len, "not_before must be a time from 1970 on");
    if (d->tier != NULL && cfg != NULL &&
        config_find_tier(cfg, d->tier) == NULL) {
        snprintf(err, len, "no tier named %s in the config", d->tier);
        return -EINVAL;
    }
    if (d->output != NULL && (!json_utf8_valid(d->output, d->output_len) ||
                              memchr(d->output, '\0', d->output_len) != NULL))
        return refuse(err, len, "the output is not UTF-8 text");
    return 0;
}

int
park__read_spec(q_db *db, int64_t job_id, cJSON **out)
{
    struct q_job job;
    int rc = q_job_get(db, job_id, &job);

    if (rc != 0)
        return rc;
    *out = job.spec != NULL ? cJSON_Parse(job.spec) : NULL;
    q_job_cleanup(&job);
    return 0;
}

int64_t
park__fresh_deadline(const cJSON *spec, int64_t now)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(spec, "deadline_s");
    int64_t span = Q_DEADLINE_S_DEFAULT;

    if (cJSON_IsNumber(d) && d->valuedouble >= 1)
        span = (int64_t)d->valuedouble;
    return now + span * 1000;
}

/* Whether step of spec is an http step (which has no tiers). */
static bool
is_http_step(const cJSON *spec, int step)
{
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "steps"),
                           step),
        "kind");

    return cJSON_IsString(k) && strcmp(k->valuestring, "http") == 0;
}

/* Lifts the wall of the host http step step of spec sends to. */
static int
lift_host_wall(q_db *db, const cJSON *spec, int step)
{
    const cJSON *s = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(spec, "steps"), step);
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(s, "http"), "url");
    char key[300];

    if (!cJSON_IsString(url) ||
        tier_host_key(url->valuestring, key, sizeof(key)) != 0)
        return 0; /* no host to lift */
    return tier_host_wall_lift(db, key);
}

/* An element of a foreach step (a job whose key is "foreach:JOB:...",
 * spec.h's SPEC_FOREACH_KEY_PREFIX) that ended here makes the step's job
 * due now, to look at its elements: a hint, as the worker's (its own
 * look comes later anyway). Returns 0 or a storage error. */
static int
wake_foreach(q_db *db, int64_t job_id, int64_t now)
{
    struct q_job job = {0};
    long long of = 0;
    int rc = q_job_get(db, job_id, &job);

    if (rc == 0 && job.key != NULL && strncmp(job.key, "foreach:", 8) == 0 &&
        sscanf(job.key + 8, "%lld:", &of) == 1 &&
        (rc = q_job_wake(db, of, now)) == -EALREADY)
        rc = 0;
    q_job_cleanup(&job);
    return rc;
}

/* The job and step part of a resolution; the item is already closed.
 * attempts is the last attempt number the step has. */
static int
go_on(q_db *db, const struct q_park_item *it, int attempts,
      const struct park_decision *d)
{
    struct q_step_reset reset = {.state = Q_STEP_PENDING};
    char error[512];
    int64_t deadline, run_at = d->now;
    cJSON *spec = NULL;
    bool http, last;
    int rc;

    if (d->how == PARK_FAIL) {
        snprintf(error, sizeof(error),
                 "step %s: failed by %s at park item %lld%s%s", it->step_name,
                 d->by ? d->by : "an operator", (long long)it->id,
                 d->note ? ": " : "", d->note ? d->note : "");
        if ((rc = q_job_end_parked(db, it->job_id, Q_JOB_FAILED, error,
                                   d->now)) != 0 ||
            (rc = wake_foreach(db, it->job_id, d->now)) != 0)
            return rc;
        return q_step_set(db, it->job_id, NULL, it->step, Q_STEP_FAILED, NULL,
                          NULL, 0);
    }
    if ((rc = park__read_spec(db, it->job_id, &spec)) != 0)
        return rc;
    if (d->how == PARK_RETRY && d->not_before > d->now)
        run_at = d->not_before;
    deadline = park__fresh_deadline(spec, run_at);
    http = is_http_step(spec, it->step);
    if (d->how == PARK_RETRY && d->lift_wall && http &&
        (rc = lift_host_wall(db, spec, it->step)) != 0) {
        cJSON_Delete(spec);
        return rc;
    }
    last = it->step + 1 ==
           cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(spec, "steps"));
    cJSON_Delete(spec);
    /* A tier to retry on means nothing to an http step: refused (the
     * caller's rollback undoes the item's close). */
    if (d->how == PARK_RETRY && d->tier != NULL && http)
        return -EINVAL;
    /* Skip or done on the last step ends the job here: nothing is left for
     * a worker to run. -EALREADY: the job was cancelled, or is not parked
     * any more. */
    if (last && (d->how == PARK_SKIP || d->how == PARK_DONE)) {
        rc = q_job_end_parked(db, it->job_id, Q_JOB_SUCCEEDED, NULL, d->now);
        if (rc == 0)
            rc = wake_foreach(db, it->job_id, d->now);
    } else
        rc = q_job_requeue_parked(db, it->job_id, d->now, run_at, deadline);
    if (rc != 0)
        return rc;
    if (d->how == PARK_SKIP) {
        reset.state = Q_STEP_SKIPPED;
    } else if (d->how == PARK_DONE) {
        reset.state = Q_STEP_SUCCEEDED;
        reset.output = d->output ? d->output : "";
    } else {
        /* A retry starts a fresh count of attempts after the ones so far. */
        reset.reset_after = attempts;
        reset.pin_tier = d->tier;
    }
    return q_step_reset(db, it->job_id, it->step, &reset);
}

/* Resolves item id inside the caller's transaction. */
static int
resolve_one(q_db *db, int64_t id, const struct park_decision *d)
{
    const struct q_park_close close = {
        .resolution = park_how_name(d->how),
        .by = d->by,
        .note = d->note,
        .now = d->now,
    };
    struct q_park_close closing = close;
    struct park_decision eff;
    struct q_park_item it;
    struct q_attempt *a = NULL;
    size_t na = 0;
    int attempts, rc;

    if ((rc = q_park_get(db, id, &it)) != 0)
        return rc;
    if ((rc = park__tool_decision(&it, d, &eff, &closing.answer)) != 0 ||
        (rc = q_park_close(db, id, &closing)) != 0) {
        q_park_item_cleanup(&it);
        return rc;
    }
    /* The item's own count can be older than the ledger's: the last
     * attempt number of the step is what a retry counts from. */
    attempts = it.attempts;
    if ((rc = q_attempts_list(db, it.job_id, it.step, &a, &na)) == 0) {
        if (na > 0)
            attempts = a[na - 1].attempt;
        q_attempts_free(a, na);
        rc = go_on(db, &it, attempts, &eff);
    }
    q_park_item_cleanup(&it);
    return rc;
}

int
park__tx_end(q_db *db, int rc)
{
    if (rc != 0) {
        q_tx_rollback(db);
        return rc;
    }
    return q_tx_commit(db);
}

int
park_resolve(q_db *db, int64_t id, const struct park_decision *d)
{
    int rc = q_tx_begin(db);

    if (rc != 0)
        return rc;
    return park__tx_end(db, resolve_one(db, id, d));
}

/* Cancels job job_id and closes its open items with close. */
static int
cancel_one(q_db *db, int64_t job_id, const struct q_park_close *close,
           int64_t now)
{
    const struct q_park_filter f = {.job_id = job_id};
    struct q_park_item *items = NULL;
    size_t count = 0;
    int rc;

    /* A parked job's open items close with it: left open, they would be
     * listed and counted for ever, and no resolution could act on them. */
    if ((rc = q_cancel(db, job_id, now)) == 0 &&
        (rc = wake_foreach(db, job_id, now)) == 0)
        rc = q_park_list(db, &f, &items, &count);
    for (size_t i = 0; rc == 0 && i < count; i++)
        rc = q_park_close(db, items[i].id, close);
    q_park_items_free(items, count);
    return rc;
}

/* The elements of job job_id's foreach steps (jobs keyed
 * "foreach:JOB:...") that have not ended are cancelled with it. */
static int
cancel_elements(q_db *db, int64_t job_id, const struct q_park_close *close,
                int64_t now)
{
    struct q_job job = {0}, *els = NULL;
    size_t n = 0;
    char prefix[48];
    int rc = q_job_get(db, job_id, &job);

    snprintf(prefix, sizeof(prefix), "foreach:%lld:", (long long)job_id);
    if (rc == 0)
        rc = q_report_keyed(db, prefix, job.created_at, 0, &els, &n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (els[i].state == Q_JOB_QUEUED || els[i].state == Q_JOB_RUNNING ||
            els[i].state == Q_JOB_PARKED)
            rc = cancel_one(db, els[i].id, close, now);
    }
    q_jobs_free(els, n);
    q_job_cleanup(&job);
    return rc;
}

int
park_cancel_job(q_db *db, int64_t job_id, const char *by, int64_t now)
{
    const struct q_park_close close = {
        .resolution = "cancel",
        .by = by,
        .note = "the job was cancelled",
        .now = now,
    };
    int rc;

    if (by != NULL &&
        (by[strspn(by, " \t")] == '\0' || !json_plain_text(by, false)))
        return -EINVAL;
    if ((rc = q_tx_begin(db)) != 0)
        return rc;
    if ((rc = cancel_one(db, job_id, &close, now)) == 0)
        rc = cancel_elements(db, job_id, &close, now);
    return park__tx_end(db, rc);
}

int
park_resolve_matching(q_db *db, const struct q_park_filter *f,
                      const struct park_decision *d, int64_t *n)
{
    struct q_park_filter open_only = *f;
    struct q_park_item *items = NULL;
    size_t count = 0;
    int64_t done = 0;
    int rc = q_tx_begin(db);

    if (rc != 0)
        return rc;
    open_only.all = false;
    rc = q_park_list(db, &open_only, &items, &count);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        rc = resolve_one(db, items[i].id, d);
        /* Two items of one job: the first sent the job on; the rest of
         * that job's items are closed with the same resolution. */
        if (rc == -EALREADY)
            rc = 0;
        else if (rc == 0)
            done++;
    }
    q_park_items_free(items, count);
    rc = park__tx_end(db, rc);
    if (rc == 0)
        *n = done;
    return rc;
}

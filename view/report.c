/* report.c: the morning report: what happened since a time, from the
 * store alone (so every worker's night is in it): jobs by state, each
 * schedule's slots and whether they ran, park items waiting, what each
 * tier did, the top reasons of failure with an example each, and the
 * slowest jobs (the failed jobs and the resolutions in report_ops.c); and what
 * it cost: each tier, each schedule and slot, and the costliest jobs (money is
 * summed in nano-dollars, shown in dollars). */
#include "view/view.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/price.h"
#include "queue/batch.h"
#include "queue/report.h"
#include "queue/sched.h"
#include "queue/tiers.h"
#include "sched/sched.h"
#include "spec/spec.h"
#include "view/internal.h"

/* How much of each list the report holds. */
#define REPORT_SLOTS_MAX    100
#define REPORT_PARK_MAX     50
#define REPORT_FAILURES_MAX 10
#define REPORT_SLOWEST_MAX  5
#define REPORT_BODY_MAX     2000
#define REPORT_COSTLIEST    5

/* The jobs with a cost since the report's start, most costly first. */
struct costs {
    struct q_report_job *j;
    size_t n;
};

/* The cost of job id since the start: false when it has none. */
static bool
job_cost(const struct costs *c, int64_t id, int64_t *nusd)
{
    for (size_t i = 0; i < c->n; i++) {
        if (c->j[i].id == id) {
            *nusd = c->j[i].cost_nusd;
            return true;
        }
    }
    return false;
}

/* What the jobs of schedule name (their keys "schedule:NAME:SLOT") cost
 * since the start; *priced when any had a cost. */
static int64_t
schedule_cost(const struct costs *c, const char *name, bool *priced)
{
    size_t plen = strlen(SPEC_SCHEDULE_KEY_PREFIX), nlen = strlen(name);
    int64_t sum = 0;

    *priced = false;
    for (size_t i = 0; i < c->n; i++) {
        const char *k = c->j[i].key;
        if (k != NULL && strncmp(k, SPEC_SCHEDULE_KEY_PREFIX, plen) == 0 &&
            strncmp(k + plen, name, nlen) == 0 && k[plen + nlen] == ':') {
            *priced = true;
            sum += c->j[i].cost_nusd;
        }
    }
    return sum;
}

static int
add_jobs(q_db *db, int64_t since, cJSON *o)
{
    int64_t counts[Q_JOB_NSTATES] = {0}, total = 0;
    cJSON *j, *by;
    int rc = q_report_jobs(db, since, counts);

    if (rc != 0)
        return rc;
    j = cJSON_AddObjectToObject(o, "jobs");
    by = cJSON_CreateObject();
    for (int i = 0; i < Q_JOB_NSTATES; i++) {
        cJSON_AddNumberToObject(by, q_job_state_name(i), (double)counts[i]);
        total += counts[i];
    }
    cJSON_AddNumberToObject(j, "created", (double)total);
    cJSON_AddItemToObject(j, "by_state", by);
    return 0;
}

/* One slot of a schedule: its job (by the slot's key) and that job's
 * state, or missed. */
static int
add_slot(q_db *db, const struct costs *costs, const struct config_schedule *s,
         int64_t slot_ms, cJSON *slots, int64_t tally[3])
{
    int64_t nusd = 0;

    struct q_job job = {0};
    char key[256], at[32];
    cJSON *o = cJSON_CreateObject();
    int rc;

    sched_key(s, slot_ms, key, sizeof(key));
    cJSON_AddStringToObject(o, "slot",
                            clock_format_utc(slot_ms, at, sizeof(at)));
    rc = q_job_by_key(db, key, &job);
    if (rc == 0) {
        cJSON_AddNumberToObject(o, "job_id", (double)job.id);
        cJSON_AddStringToObject(o, "state", q_job_state_name(job.state));
        bool priced = job_cost(costs, job.id, &nusd);
        json_add_cost(o, priced, nusd);
        tally[job.state == Q_JOB_FAILED ? 2 : 0]++;
        q_job_cleanup(&job);
    } else if (rc == -ENOENT) {
        cJSON_AddNullToObject(o, "job_id");
        cJSON_AddStringToObject(o, "state", "missed");
        cJSON_AddNullToObject(o, "cost_usd");
        tally[1]++;
    } else {
        cJSON_Delete(o);
        return rc;
    }
    cJSON_AddItemToArray(slots, o);
    return 0;
}

/* The slots of s after `after` (seconds) up to now (ms), each with its
 * job's state, into slots (the latest REPORT_SLOTS_MAX) and tally (all):
 * found in batches, so that a long span does not read the zone once a
 * slot. */
static int
walk_slots(q_db *db, const struct costs *costs, const struct config_schedule *s,
           const struct sched_cron *cron, int64_t after, int64_t now,
           cJSON *slots, int64_t tally[3])
{
    int64_t batch[256];
    size_t n = 0;
    int listed = cJSON_GetArraySize(slots); /* counted once: cJSON walks */
    int rc;

    do {
        if (sched_next_n(cron, s->tz, after, now / 1000, batch, 256, &n) != 0)
            return 0; /* not a zone: refused at start, not reached */
        for (size_t i = 0; i < n; i++) {
            if ((rc = add_slot(db, costs, s, batch[i] * 1000, slots, tally)) !=
                0)
                return rc;
            if (++listed > REPORT_SLOTS_MAX) {
                cJSON_DeleteItemFromArray(slots, 0);
                listed--;
            }
        }
        after = n > 0 ? batch[n - 1] : after;
    } while (n == 256);
    return 0;
}

/* Each schedule's slots in [since, now], from when it was first seen:
 * the latest REPORT_SLOTS_MAX listed, all counted. */
static int
add_schedules(q_db *db, const struct config *cfg, const struct costs *costs,
              int64_t since, int64_t now, cJSON *o)
{
    cJSON *arr = cJSON_AddArrayToObject(o, "schedules");

    for (size_t i = 0; i < cfg->nschedules; i++) {
        const struct config_schedule *s = &cfg->schedules[i];
        struct sched_cron cron;
        struct q_sched st = {0};
        int64_t from = since, tally[3] = {0}; /* ran, missed, failed */
        bool priced;
        char err[256];
        int rc = q_sched_get(db, s->name, &st);
        cJSON *e, *slots;

        if (rc != 0 && rc != -ENOENT)
            return rc;
        if (rc == 0 && st.since > from)
            from = st.since;
        bool seen = rc == 0, paused = rc == 0 && st.paused;
        q_sched_cleanup(&st);
        e = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, e);
        cJSON_AddStringToObject(e, "name", s->name);
        cJSON_AddStringToObject(e, "cron", s->cron);
        cJSON_AddStringToObject(e, "tz", s->tz);
        cJSON_AddBoolToObject(e, "paused", paused);
        slots = cJSON_CreateArray();
        if (sched_cron_parse(s->cron, &cron, err, sizeof(err)) != 0)
            seen = false; /* refused at start: not reached */
        /* The walk starts just before the first whole second at or after
         * from: a slot at from counts, one earlier in from's second does
         * not (a schedule first seen at 00:00:00.026 fires no 00:00). */
        if (seen &&
            (rc = walk_slots(db, costs, s, &cron, (from + 999) / 1000 - 1, now,
                             slots, tally)) != 0) {
            cJSON_Delete(slots);
            return rc;
        }
        cJSON_AddNumberToObject(e, "ran", (double)(tally[0] + tally[2]));
        cJSON_AddNumberToObject(e, "missed", (double)tally[1]);
        cJSON_AddNumberToObject(e, "failed", (double)tally[2]);
        int64_t sum = schedule_cost(costs, s->name, &priced);
        json_add_cost(e, priced, sum);
        cJSON_AddItemToObject(e, "slots", slots);
        if ((rc = view__report_manual_runs(db, s, seen ? &cron : NULL, since,
                                           e)) != 0)
            return rc;
    }
    return 0;
}

static int
add_park(q_db *db, int64_t now, cJSON *o)
{
    int64_t counts[Q_JOB_NSTATES], open = 0;
    struct q_park_brief *p = NULL;
    size_t n = 0;
    cJSON *park, *arr;
    int rc = q_counts(db, counts, &open);

    if (rc == 0)
        rc = q_stats_park_open(db, REPORT_PARK_MAX, &p, &n);
    if (rc != 0)
        return rc;
    park = cJSON_AddObjectToObject(o, "park");
    cJSON_AddNumberToObject(park, "waiting", (double)open);
    arr = cJSON_AddArrayToObject(park, "oldest");
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "id", (double)p[i].id);
        cJSON_AddNumberToObject(e, "job_id", (double)p[i].job_id);
        json_add_string(e, "job_name", p[i].job_name);
        json_add_string(e, "step", p[i].step);
        json_add_string(e, "reason", p[i].reason);
        json_add_string(e, "tier", p[i].tier);
        cJSON_AddNumberToObject(e, "age_s",
                                (double)((now - p[i].parked_at) / 1000));
        json_add_string(e, "error", p[i].error);
        cJSON_AddItemToArray(arr, e);
    }
    q_park_briefs_free(p, n);
    return 0;
}

static int
add_tiers(q_db *db, int64_t since, cJSON *o)
{
    struct q_report_tier *t = NULL;
    size_t n = 0;
    int64_t total = 0;
    bool priced = false;
    cJSON *arr;
    int rc = q_report_tiers(db, since, &t, &n);

    if (rc != 0)
        return rc;
    arr = cJSON_AddArrayToObject(o, "tiers");
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        json_add_string(e, "tier", t[i].tier);
        cJSON_AddNumberToObject(e, "requests", (double)t[i].requests);
        cJSON_AddNumberToObject(e, "tokens", (double)t[i].tokens);
        cJSON_AddNumberToObject(e, "ok", (double)t[i].ok);
        cJSON_AddNumberToObject(e, "throttles", (double)t[i].soft_throttle);
        cJSON_AddNumberToObject(e, "walls", (double)t[i].hard_quota);
        cJSON_AddNumberToObject(e, "server_errors", (double)t[i].server_error);
        cJSON_AddNumberToObject(e, "timeouts", (double)t[i].timeout);
        cJSON_AddNumberToObject(e, "other",
                                (double)(t[i].truncated + t[i].schema_invalid +
                                         t[i].refused + t[i].unknown));
        cJSON_AddNumberToObject(e, "in_flight", (double)t[i].in_flight);
        cJSON_AddNumberToObject(e, "breaker_openings",
                                (double)t[i].breaker_opened);
        json_add_cost(e, t[i].priced > 0, t[i].cost_nusd);
        cJSON_AddItemToArray(arr, e);
        priced = priced || t[i].priced > 0;
        total += t[i].cost_nusd;
    }
    json_add_cost(o, priced, total);
    q_report_tiers_free(t, n);
    return 0;
}

/* add_batches adds "batches": per tier in batch mode, its items that
 * finished in the window with what they cost, what the same usage would
 * have cost realtime, and the difference (docs/reference.md "Batches"). */
static int
add_batches(q_db *db, int64_t since, cJSON *o)
{
    struct q_report_batch *b = NULL;
    size_t n = 0;
    cJSON *arr;
    int rc = q_report_batches(db, since, &b, &n);

    if (rc != 0)
        return rc;
    arr = cJSON_AddArrayToObject(o, "batches");
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        json_add_string(e, "tier", b[i].tier);
        cJSON_AddNumberToObject(e, "items", (double)b[i].items);
        json_add_cost(e, true, b[i].cost_nusd);
        cJSON_AddNumberToObject(e, "realtime_usd",
                                price_usd(b[i].realtime_nusd));
        cJSON_AddNumberToObject(e, "saved_usd",
                                price_usd(b[i].realtime_nusd - b[i].cost_nusd));
        cJSON_AddItemToArray(arr, e);
    }
    q_report_batches_free(b, n);
    return 0;
}

/* add_step_name adds "step": the name of step idx of job job_id, as park
 * items and the worker's log name it (null if the job cannot be read). */
static void
add_step_name(q_db *db, cJSON *o, int64_t job_id, int idx)
{
    struct q_job job;
    cJSON *spec = NULL;
    const cJSON *step;

    if (q_job_get(db, job_id, &job) != 0) {
        cJSON_AddNullToObject(o, "step");
        return;
    }
    if (job.spec != NULL)
        spec = cJSON_Parse(job.spec);
    step = cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "steps"), idx);
    json_add_string(o, "step",
                    cJSON_GetStringValue(cJSON_GetObjectItem(step, "name")));
    cJSON_Delete(spec);
    q_job_cleanup(&job);
}

static int
add_failures(q_db *db, int64_t since, cJSON *o)
{
    struct q_report_failure *f = NULL;
    size_t n = 0;
    cJSON *arr;
    char body[REPORT_BODY_MAX + 1];
    int rc = q_report_failures(db, since, REPORT_FAILURES_MAX, &f, &n);

    if (rc != 0)
        return rc;
    arr = cJSON_AddArrayToObject(o, "failures");
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject(), *x;
        json_add_string(e, "outcome", f[i].outcome);
        json_add_string(e, "reason", f[i].reason);
        cJSON_AddNumberToObject(e, "count", (double)f[i].count);
        x = cJSON_AddObjectToObject(e, "example");
        cJSON_AddNumberToObject(x, "job_id", (double)f[i].job_id);
        add_step_name(db, x, f[i].job_id, f[i].step);
        cJSON_AddNumberToObject(x, "attempt", f[i].attempt);
        json_add_string(x, "tier", f[i].tier);
        if (f[i].status > 0)
            cJSON_AddNumberToObject(x, "status", f[i].status);
        else
            cJSON_AddNullToObject(x, "status");
        if (f[i].body != NULL)
            snprintf(body, sizeof(body), "%s", f[i].body);
        json_add_string(x, "body", f[i].body != NULL ? body : NULL);
        cJSON_AddItemToArray(arr, e);
    }
    q_report_failures_free(f, n);
    return 0;
}

static int
add_slowest(q_db *db, int64_t since, cJSON *o)
{
    struct q_job *j = NULL;
    size_t n = 0;
    cJSON *arr;
    int rc = q_report_slowest(db, since, REPORT_SLOWEST_MAX, &j, &n);

    if (rc != 0)
        return rc;
    arr = cJSON_AddArrayToObject(o, "slowest");
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "id", (double)j[i].id);
        cJSON_AddStringToObject(e, "name", j[i].name);
        cJSON_AddStringToObject(e, "state", q_job_state_name(j[i].state));
        cJSON_AddNumberToObject(
            e, "seconds", (double)(j[i].updated_at - j[i].created_at) / 1000);
        cJSON_AddItemToArray(arr, e);
    }
    q_jobs_free(j, n);
    return 0;
}

/* "budgets": each budget window written since since, with the budget's
 * limit when the config still has it (null when not). */
static int
add_budgets(q_db *db, const struct config *cfg, int64_t since, cJSON *o)
{
    cJSON *arr = cJSON_AddArrayToObject(o, "budgets");
    struct q_budget *b = NULL;
    size_t n = 0;
    int rc = q_budgets_list(db, since, &b, &n);

    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct config_budget *cb = config_find_budget(cfg, b[i].name);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", b[i].name);
        cJSON_AddStringToObject(e, "window", b[i].window);
        if (cb != NULL)
            cJSON_AddNumberToObject(e, "usd", price_usd(cb->limit_nusd));
        else
            cJSON_AddNullToObject(e, "usd");
        cJSON_AddNumberToObject(e, "spent_usd", price_usd(b[i].spent_nusd));
        cJSON_AddNumberToObject(e, "reserved_usd",
                                price_usd(b[i].reserved_nusd));
        cJSON_AddItemToArray(arr, e);
    }
    q_budgets_free(b, n);
    return rc;
}

static void
add_costliest(const struct costs *c, cJSON *o)
{
    cJSON *arr = cJSON_AddArrayToObject(o, "costliest");

    for (size_t i = 0; i < c->n && i < REPORT_COSTLIEST; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "id", (double)c->j[i].id);
        cJSON_AddStringToObject(e, "name", c->j[i].name);
        cJSON_AddNumberToObject(e, "tokens", (double)c->j[i].tokens);
        json_add_cost(e, true, c->j[i].cost_nusd);
        cJSON_AddItemToArray(arr, e);
    }
}

static int
report_read(q_db *db, const struct config *cfg, int64_t since, int64_t now,
            cJSON **out)
{
    cJSON *o = cJSON_CreateObject();
    struct costs costs = {NULL, 0};
    int rc;

    json_add_time(o, "since", since);
    json_add_time(o, "until", now);
    if ((rc = q_report_costliest(db, since, 0, &costs.j, &costs.n)) != 0 ||
        (rc = add_jobs(db, since, o)) != 0 ||
        (rc = add_schedules(db, cfg, &costs, since, now, o)) != 0 ||
        (rc = add_park(db, now, o)) != 0 ||
        (rc = add_tiers(db, since, o)) != 0 ||
        (rc = add_batches(db, since, o)) != 0 ||
        (rc = add_failures(db, since, o)) != 0 ||
        (rc = view__report_failed(db, since, o)) != 0 ||
        (rc = add_slowest(db, since, o)) != 0 ||
        (rc = view__report_resolutions(db, since, o)) != 0 ||
        (rc = add_budgets(db, cfg, since, o)) != 0) {
        q_report_jobs_free(costs.j, costs.n);
        cJSON_Delete(o);
        return rc;
    }
    add_costliest(&costs, o);
    q_report_jobs_free(costs.j, costs.n);
    *out = o;
    return 0;
}

/* The report is many reads: one snapshot makes them one picture (the
 * counts add up to the lists), and costs SQLite one read lock instead of
 * one per statement. */
int
view_report(q_db *db, const struct config *cfg, int64_t since, int64_t now,
            cJSON **out)
{
    int rc = q_read_begin(db);

    if (rc != 0)
        return rc;
    rc = report_read(db, cfg, since, now, out);
    q_read_end(db);
    return rc;
}

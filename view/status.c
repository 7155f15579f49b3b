/* status.c: the status counts, each tier's shared state, and the answer
 * to an enqueue. */
#include "view/view.h"

#include <stdio.h>

#include "common/json.h"
#include "common/price.h"
#include "queue/tiers.h"
#include "tier/tier.h"

int
view_status(q_db *db, cJSON **out)
{
    int64_t counts[Q_JOB_NSTATES], park_open = 0;
    cJSON *jobs;
    int rc = q_read_begin(db);

    if (rc != 0)
        return rc;
    /* The counts and the open park items of one moment. */
    rc = q_counts(db, counts, &park_open);
    q_read_end(db);
    if (rc != 0)
        return rc;
    *out = cJSON_CreateObject();
    jobs = cJSON_AddObjectToObject(*out, "jobs");
    for (int i = 0; i < Q_JOB_NSTATES; i++)
        cJSON_AddNumberToObject(jobs, q_job_state_name(i), (double)counts[i]);
    cJSON_AddNumberToObject(*out, "park_open", (double)park_open);
    return 0;
}

/* An "until" time as JSON prints: one that has passed is not in force, so
 * it is 0, which json_add_time prints as null. */
static int64_t
in_force(int64_t ms, int64_t now)
{
    return ms > now ? ms : 0;
}

/* The pace to one decimal: 600 rpm, not 599.99999999. */
static double
round1(double v)
{
    return (double)(int64_t)(v * 10 + 0.5) / 10;
}

/* What a step that prefers the tier does now: "admits" (it is sent),
 * "waits" (the tier is only paced, and its spill lets steps wait) or
 * "passes" (walled, failing, or spill "now": the next tier of the step's
 * list), with the refusal's reason; and the spill setting. */
static void
add_preference(cJSON *o, const struct config_tier *t,
               const struct q_tier_state *st, int64_t now)
{
    struct tier_verdict v;
    const char *steps = "admits";

    tier_evaluate(t, st, now, 0, false, &v);
    if (!v.admitted)
        steps = tier_reason_is_pace(v.reason) && t->spill_after_ms != 0
                    ? "waits"
                    : "passes";
    cJSON_AddStringToObject(o, "steps", steps);
    json_add_string(o, "refused_by", v.admitted ? NULL : v.reason);
    if (t->spill_after_ms == CONFIG_SPILL_DEADLINE)
        cJSON_AddStringToObject(o, "spill", "deadline");
    else if (t->spill_after_ms == 0)
        cJSON_AddStringToObject(o, "spill", "now");
    else
        cJSON_AddNumberToObject(o, "spill", (double)t->spill_after_ms / 1000);
}

/* "price": the tier's declared price in dollars, as the config writes it,
 * or null. */
static void
add_price(cJSON *o, const struct price *p)
{
    cJSON *e;

    if (!p->set) {
        cJSON_AddNullToObject(o, "price");
        return;
    }
    e = cJSON_AddObjectToObject(o, "price");
    cJSON_AddNumberToObject(e, "input_per_mtok",
                            (double)p->input / PRICE_NUSD_PER_USD);
    cJSON_AddNumberToObject(e, "output_per_mtok",
                            (double)p->output / PRICE_NUSD_PER_USD);
    cJSON_AddNumberToObject(e, "cached_input_per_mtok",
                            (double)p->cache_read / PRICE_NUSD_PER_USD);
    cJSON_AddNumberToObject(e, "cache_write_per_mtok",
                            (double)p->cache_write / PRICE_NUSD_PER_USD);
    cJSON_AddNumberToObject(e, "per_request",
                            (double)p->per_request / PRICE_NUSD_PER_USD);
}

static cJSON *
tier_json(const struct config_tier *t, const struct q_tier_state *st,
          int64_t now)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "name", t->name);
    /* Open past its cooldown, a breaker lets its probe through: it is
     * half open, whether or not a request has come to be that probe. */
    cJSON_AddStringToObject(
        o, "breaker",
        q_breaker_name(st->breaker == Q_BREAKER_OPEN && st->open_until <= now
                           ? Q_BREAKER_HALF_OPEN
                           : st->breaker));
    json_add_time(
        o, "open_until",
        in_force(st->breaker == Q_BREAKER_OPEN ? st->open_until : 0, now));
    json_add_time(o, "exhausted_until", in_force(st->exhausted_until, now));
    json_add_string(o, "exhausted_reason",
                    st->exhausted_until > now && st->exhausted_reason[0]
                        ? st->exhausted_reason
                        : NULL);
    json_add_time(o, "limited_until", in_force(st->limited_until, now));
    cJSON_AddNumberToObject(o, "rate_rpm", round1(tier_rate_rpm(t, st)));
    cJSON_AddBoolToObject(o, "in_doubt", st->doubt);
    cJSON_AddNumberToObject(o, "rpm_used", (double)st->window_requests);
    cJSON_AddNumberToObject(o, "tpm_used", (double)st->window_tokens);
    cJSON_AddNumberToObject(o, "allowance_used", (double)st->allowance_used);
    cJSON_AddNumberToObject(o, "in_flight", (double)st->in_flight);
    add_preference(o, t, st, now);
    add_price(o, &t->price);
    return o;
}

int
view_tiers(q_db *db, const struct config *cfg, int64_t now, cJSON **out,
           const char **failed)
{
    cJSON *arr = cJSON_CreateArray();

    for (size_t i = 0; i < cfg->ntiers; i++) {
        const struct config_tier *t = &cfg->tiers[i];
        struct q_tier_state st;
        int rc = tier_snapshot(db, t, now, true, &st);
        if (rc != 0) {
            if (failed != NULL)
                *failed = t->name;
            cJSON_Delete(arr);
            return rc;
        }
        cJSON_AddItemToArray(arr, tier_json(t, &st, now));
    }
    *out = arr;
    return 0;
}

cJSON *
view_enqueued(const struct q_enqueue_result *res, size_t n, bool many)
{
    cJSON *arr;

    many = many || n != 1;
    arr = many ? cJSON_CreateArray() : NULL;
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", (double)res[i].id);
        cJSON_AddBoolToObject(o, "duplicate", res[i].duplicate);
        if (!many)
            return o;
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

void
view_enqueued_text(const struct q_enqueue_result *res, size_t n, bool many,
                   struct xbuf *out)
{
    char one[64];

    many = many || n != 1;
    if (many)
        xbuf_lit(out, "[");
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(one, sizeof(one), "%s{\"id\":%lld,\"duplicate\":%s}",
                           i > 0 ? "," : "", (long long)res[i].id,
                           res[i].duplicate ? "true" : "false");
        xbuf_put(out, one, (size_t)len);
    }
    if (many)
        xbuf_lit(out, "]");
}

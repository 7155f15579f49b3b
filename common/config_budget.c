/* config_budget.c: the config's "budgets": what the sends on some or all
 * tiers may cost, per window of time or per run of a schedule, shared by
 * every worker on the database (docs/reference.md "Budgets"). */
#include "common/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/price.h"
#include "common/xalloc.h"

/* The largest budget a config may declare: a million dollars. */
#define BUDGET_MAX_USD 1e6

/* "tiers": names of the config's tiers, each once. */
static int
parse_tiers(const cJSON *o, const char *path, const struct config *c,
            struct config_budget *b, char *err, size_t len)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "tiers"), *it;
    char p[256];
    int i = 0;

    if (v == NULL)
        return 0;
    json_path_key(p, sizeof(p), path, "tiers");
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
        return json_fail(err, len, p,
                         "must be a non-empty array of tier "
                         "names");
    b->tiers = xcalloc((size_t)cJSON_GetArraySize(v), sizeof(char *));
    cJSON_ArrayForEach(it, v)
    {
        char q[300];
        json_path_index(q, sizeof(q), p, i++);
        if (!cJSON_IsString(it) || config_find_tier(c, it->valuestring) == NULL)
            return json_fail(err, len, q, "must name a tier of the config");
        for (size_t k = 0; k < b->ntiers; k++) {
            if (strcmp(b->tiers[k], it->valuestring) == 0)
                return json_fail(err, len, q, "tier %s named twice",
                                 it->valuestring);
        }
        b->tiers[b->ntiers++] = xstrdup(it->valuestring);
    }
    return 0;
}

static int
parse_budget(const cJSON *o, const char *path, const struct config *c,
             struct config_budget *b, char *err, size_t len)
{
    static const char *const keys[] = {"name",  "usd",      "per",
                                       "tiers", "schedule", NULL};
    const char *name = NULL, *per = NULL, *sched = NULL;
    double usd = 0;
    char p[256];
    int rc;

    if ((rc = json_check_object(o, path, keys, err, len)) ||
        (rc = json_get_string(o, "name", true, path, &name, err, len)) ||
        (rc = json_get_number(o, "usd", 0, BUDGET_MAX_USD, path, &usd, err,
                              len)) ||
        (rc = json_get_string(o, "per", false, path, &per, err, len)) ||
        (rc = json_get_string(o, "schedule", false, path, &sched, err, len)))
        return rc;
    if (cJSON_GetObjectItemCaseSensitive(o, "usd") == NULL)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "usd"),
                         "missing (the budget in US dollars)");
    if (name[0] == '\0' || strlen(name) > 100 || !json_plain_text(name, false))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "name"),
                         "must be 1 to 100 bytes of printable text");
    b->name = xstrdup(name);
    b->limit_nusd = price_from_usd(usd);
    b->window_s = 86400;
    if (per != NULL && strcmp(per, "schedule_run") == 0)
        b->per = CONFIG_BUDGET_SCHEDULE_RUN;
    else if (per != NULL && config__window_seconds(per, &b->window_s) != 0)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "per"),
                         "must be hour, day, week, month or schedule_run");
    if (sched != NULL && b->per != CONFIG_BUDGET_SCHEDULE_RUN)
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "schedule"),
                         "only with \"per\": \"schedule_run\"");
    if (sched != NULL && config_find_schedule(c, sched) == NULL)
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "schedule"),
                         "must name a schedule of the config");
    b->schedule = xstrdup(sched);
    return parse_tiers(o, path, c, b, err, len);
}

int
config__parse_budgets(const cJSON *v, struct config *c, char *err, size_t len)
{
    const cJSON *it;
    char p[64];
    int rc, i = 0;

    if (!cJSON_IsArray(v))
        return json_fail(err, len, "budgets", "must be an array");
    c->budgets =
        xcalloc((size_t)cJSON_GetArraySize(v) + 1, sizeof(*c->budgets));
    cJSON_ArrayForEach(it, v)
    {
        json_path_index(p, sizeof(p), "budgets", i);
        /* Counted before it is parsed: what it holds is freed either way. */
        c->nbudgets++;
        if ((rc = parse_budget(it, p, c, &c->budgets[i], err, len)) != 0)
            return rc;
        for (int k = 0; k < i; k++) {
            if (strcmp(c->budgets[k].name, c->budgets[i].name) == 0)
                return json_fail(err, len, p, "duplicate budget name %s",
                                 c->budgets[i].name);
        }
        i++;
    }
    return 0;
}

void
config__budgets_free(struct config *c)
{
    for (size_t i = 0; i < c->nbudgets; i++) {
        struct config_budget *b = &c->budgets[i];
        free(b->name);
        free(b->schedule);
        for (size_t k = 0; k < b->ntiers; k++)
            free(b->tiers[k]);
        free(b->tiers);
    }
    free(c->budgets);
    c->budgets = NULL;
    c->nbudgets = 0;
}

bool
config_budget_window(const struct config_budget *b, int64_t now, char *buf,
                     size_t len, int64_t *ends_at)
{
    int64_t w = b->window_s * 1000, start;

    if (b->per != CONFIG_BUDGET_WINDOW || w <= 0)
        return false;
    start = now - now % w;
    clock_format_utc(start, buf, len);
    *ends_at = start + w;
    return true;
}

const struct config_budget *
config_find_budget(const struct config *cfg, const char *name)
{
    for (size_t i = 0; cfg != NULL && i < cfg->nbudgets; i++) {
        if (strcmp(cfg->budgets[i].name, name) == 0)
            return &cfg->budgets[i];
    }
    return NULL;
}

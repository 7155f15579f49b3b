/* cmd_report.c: stepq report — what happened since a time (the morning
 * report). */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/price.h"
#include "queue/queue.h"
#include "view/view.h"

static const char usage[] =
    "usage: stepq report [--since SPAN|TIME] [--json]\n"
    "\n"
    "What happened since a time (default: the last 24 hours), from the\n"
    "database, so every worker's night is in it: jobs created by state,\n"
    "each schedule's slots (ran, missed, failed), park items waiting with\n"
    "their age, each tier's requests, tokens, throttles, walls, server\n"
    "errors, timeouts and cost, the top reasons of failure with an example\n"
    "body each, every job that failed (with or without attempts), the\n"
    "costliest jobs, the slowest jobs, and the park items resolved (how,\n"
    "by whom). Money is in USD,\n"
    "from each tier's \"price\" in the config.\n"
    "\n"
    "  --since SPAN|TIME  a span back from now (90m, 24h, 7d, 3600s) or an\n"
    "                     RFC 3339 time (2026-11-30T00:00:00Z)\n"
    "  --json             print JSON\n";

static double
num(const cJSON *o, const char *name)
{
    return cJSON_GetNumberValue(cJSON_GetObjectItem(o, name));
}

/* The member cost_usd of o as dollars ("$0.00042"), or "-" when it is
 * null (nothing priced). */
static const char *
money(const cJSON *o, char *buf, size_t len)
{
    const cJSON *c = cJSON_GetObjectItem(o, "cost_usd");

    if (!cJSON_IsNumber(c))
        return "-";
    return price_format(price_from_usd(c->valuedouble), buf, len);
}

static void
print_jobs_and_schedules(const cJSON *r)
{
    char cost[40];

    const cJSON *jobs = cJSON_GetObjectItem(r, "jobs"), *it, *s;

    printf("jobs created: %.0f", num(jobs, "created"));
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(jobs, "by_state"))
    {
        if (it->valuedouble > 0)
            printf(", %s %.0f", it->string, it->valuedouble);
    }
    printf("\n");
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(r, "schedules"))
    {
        const cJSON *slots = cJSON_GetObjectItem(s, "slots");
        const cJSON *last =
            cJSON_GetArrayItem(slots, cJSON_GetArraySize(slots) - 1);
        printf("schedule %-16s ran %.0f, missed %.0f, failed %.0f, cost %s%s",
               cli_json_text(s, "name"), num(s, "ran"), num(s, "missed"),
               num(s, "failed"), money(s, cost, sizeof(cost)),
               cJSON_IsTrue(cJSON_GetObjectItem(s, "paused")) ? " (paused)"
                                                              : "");
        if (last != NULL)
            printf("; last slot %s: %s", cli_json_text(last, "slot"),
                   cli_json_text(last, "state"));
        if (cJSON_GetArraySize(cJSON_GetObjectItem(s, "manual_runs")) > 0)
            printf("; run by hand %d time(s)",
                   cJSON_GetArraySize(cJSON_GetObjectItem(s, "manual_runs")));
        printf("\n");
    }
}

static void
print_park_and_tiers(const cJSON *r)
{
    static const char *const heads[] = {
        "TIER", "REQUESTS", "TOKENS", "OK",      "THROTTLES", "WALLS",
        "5XX",  "TIMEOUTS", "OTHER",  "BREAKER", "COST"};
    static const char *const counted[] = {
        "requests",      "tokens",   "ok",    "throttles",       "walls",
        "server_errors", "timeouts", "other", "breaker_openings"};
    const cJSON *park = cJSON_GetObjectItem(r, "park"), *p, *t;
    struct cli_table tab;

    printf("park items waiting: %.0f\n", num(park, "waiting"));
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(park, "oldest"))
    {
        long long age = (long long)num(p, "age_s");
        printf("  #%.0f job %.0f %s: %s, tier %s, waiting %lldh%02lldm: "
               "%.80s\n",
               num(p, "id"), num(p, "job_id"), cli_json_text(p, "step"),
               cli_json_text(p, "reason"), cli_json_text(p, "tier"), age / 3600,
               age / 60 % 60, cli_json_text(p, "error"));
    }
    cli_table_init(&tab, 11, heads, "lrrrrrrrrrr");
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(r, "tiers"))
    {
        char n[9][32], cost[40];
        const char *cells[11] = {cli_json_text(t, "tier")};
        for (int i = 0; i < 9; i++) {
            snprintf(n[i], sizeof(n[i]), "%.0f", num(t, counted[i]));
            cells[i + 1] = n[i];
        }
        cells[10] = money(t, cost, sizeof(cost));
        cli_table_add(&tab, cells);
    }
    cli_table_print(&tab);
    cli_table_cleanup(&tab);
}

static void
print_failures_and_slowest(const cJSON *r)
{
    const cJSON *f, *j;
    char cost[40];

    printf("failures:\n");
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(r, "failures"))
    {
        const cJSON *x = cJSON_GetObjectItem(f, "example");
        printf("  %6.0f %s (%s), e.g. job %.0f step %s attempt %.0f: "
               "%.100s\n",
               num(f, "count"), cli_json_text(f, "outcome"),
               cli_json_text(f, "reason"), num(x, "job_id"),
               cli_json_text(x, "step"), num(x, "attempt"),
               cli_json_text(x, "body"));
    }
    f = cJSON_GetObjectItem(r, "failed_jobs");
    printf("failed jobs: %.0f\n", num(f, "count"));
    cJSON_ArrayForEach(j, cJSON_GetObjectItem(f, "latest"))
    {
        printf("  job %.0f %s at %s: %.100s\n", num(j, "id"),
               cli_json_text(j, "name"), cli_json_text(j, "ended_at"),
               cli_json_text(j, "error"));
    }
    printf("cost: %s\ncostliest jobs:\n", money(r, cost, sizeof(cost)));
    cJSON_ArrayForEach(j, cJSON_GetObjectItem(r, "costliest"))
    {
        printf("  job %.0f %s: %s for %.0f tokens\n", num(j, "id"),
               cli_json_text(j, "name"), money(j, cost, sizeof(cost)),
               num(j, "tokens"));
    }
    printf("slowest jobs:\n");
    cJSON_ArrayForEach(j, cJSON_GetObjectItem(r, "slowest"))
    {
        printf("  job %.0f %s: %s in %.1f s\n", num(j, "id"),
               cli_json_text(j, "name"), cli_json_text(j, "state"),
               num(j, "seconds"));
    }
    cJSON_ArrayForEach(j, cJSON_GetObjectItem(r, "batches"))
    {
        printf("batch tier %s: %.0f items, $%.6f against $%.6f realtime: "
               "saved $%.6f\n",
               cli_json_text(j, "tier"), num(j, "items"), num(j, "cost_usd"),
               num(j, "realtime_usd"), num(j, "saved_usd"));
    }
    printf("budgets:\n");
    cJSON_ArrayForEach(j, cJSON_GetObjectItem(r, "budgets"))
    {
        const cJSON *usd = cJSON_GetObjectItem(j, "usd");
        char limit[32] = "(no longer in the config)";
        if (cJSON_IsNumber(usd))
            snprintf(limit, sizeof(limit), "of $%.2f", usd->valuedouble);
        printf("  %s %s: $%.4f spent, $%.4f reserved %s\n",
               cli_json_text(j, "name"), cli_json_text(j, "window"),
               num(j, "spent_usd"), num(j, "reserved_usd"), limit);
    }
    f = cJSON_GetObjectItem(r, "resolutions");
    printf("resolutions: %.0f\n", num(f, "count"));
    cJSON_ArrayForEach(j, cJSON_GetObjectItem(f, "latest"))
    {
        printf("  item %.0f (job %.0f step %s, %s): %s by %s at %s\n",
               num(j, "id"), num(j, "job_id"), cli_json_text(j, "step"),
               cli_json_text(j, "reason"), cli_json_text(j, "resolution"),
               cli_json_text(j, "by"), cli_json_text(j, "at"));
    }
}

int
cmd_report(struct cli_env *env, int argc, char **argv)
{
    const char *since_s = NULL;
    bool json = false;
    struct cli_opt opts[] = {
        {"since", &since_s, NULL}, {"json", NULL, &json}, {NULL, NULL, NULL}};
    const struct config *cfg = NULL;
    cJSON *r = NULL;
    q_db *db = NULL;
    int64_t now, since;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0)
        return rc;
    if ((rc = cli_config(env, &cfg)) != 0 || (rc = cli_open_db(env, &db)) != 0)
        return rc;
    now = cli_now(db);
    since = now - 86400000;
    if (since_s != NULL && clock_parse_since(since_s, now, &since) != 0) {
        q_close(db);
        cli_error("report: --since %s is not a span (90m, 24h, 7d) or an "
                  "RFC 3339 time",
                  since_s);
        return CLI_USAGE;
    }
    rc = view_report(db, cfg, since, now, &r);
    q_close(db);
    if (rc != 0) {
        cli_error("report: cannot read the database");
        return CLI_RUNTIME;
    }
    if (json) {
        cli_print_json(r);
        return CLI_OK;
    }
    printf("report from %s to %s\n", cli_json_text(r, "since"),
           cli_json_text(r, "until"));
    print_jobs_and_schedules(r);
    print_park_and_tiers(r);
    print_failures_and_slowest(r);
    cJSON_Delete(r);
    return CLI_OK;
}

/* cmd_tiers.c: stepq tiers — each configured tier's shared state. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/json.h"
#include "queue/queue.h"
#include "worker/tier.h"

static const char usage[] =
    "usage: stepq tiers [--json]\n"
    "\n"
    "The state every worker on the database shares for each tier of the\n"
    "config: breaker (closed, open, half_open) and until when it is open,\n"
    "a quota wall and until when, the pace in force (requests per minute\n"
    "it is paced to: the declared or learned limit, lowered after 429s),\n"
    "requests and tokens sent in the last minute, allowance used, and\n"
    "requests in flight.\n";

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

static const char *
until_text(int64_t ms, int64_t now, char *buf, size_t len)
{
    if (ms <= now)
        return "-";
    return clock_format_utc(ms, buf, len);
}

int
cmd_tiers(struct cli_env *env, int argc, char **argv)
{
    bool json = false;
    struct cli_opt opts[] = {{"json", NULL, &json}, {NULL, NULL, NULL}};
    const struct config *cfg = NULL;
    cJSON *arr = NULL;
    int64_t now = 0;
    q_db *db = NULL;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0)
        return rc;
    if ((rc = cli_config(env, &cfg)) != 0 || (rc = cli_open_db(env, &db)) != 0)
        return rc;
    now = cli_now(db);
    arr = cJSON_CreateArray();
    if (!json)
        printf("%-12s %-10s %-21s %-21s %-10s %8s %6s %9s %12s %9s\n", "TIER",
               "BREAKER", "OPEN UNTIL", "EXHAUSTED UNTIL", "REASON", "PACE RPM",
               "RPM", "TPM", "ALLOWANCE", "IN FLIGHT");
    for (size_t i = 0; i < cfg->ntiers; i++) {
        const struct config_tier *t = &cfg->tiers[i];
        struct q_tier_state st;
        char a[32], b[32];
        if (tier_snapshot(db, t, now, true, &st) != 0) {
            cli_error("tiers: cannot read the state of tier %s", t->name);
            rc = CLI_RUNTIME;
            break;
        }
        if (!json) {
            printf("%-12s %-10s %-21s %-21s %-10s %8.1f %6lld %9lld "
                   "%12lld %9lld\n",
                   t->name, q_breaker_name(st.breaker),
                   until_text(st.open_until, now, a, sizeof(a)),
                   until_text(st.exhausted_until, now, b, sizeof(b)),
                   st.exhausted_until > now ? st.exhausted_reason : "-",
                   tier_rate_rpm(t, &st), (long long)st.window_requests,
                   (long long)st.window_tokens, (long long)st.allowance_used,
                   (long long)st.in_flight);
            continue;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "breaker", q_breaker_name(st.breaker));
        json_add_time(
            o, "open_until",
            in_force(st.breaker == Q_BREAKER_OPEN ? st.open_until : 0, now));
        json_add_time(o, "exhausted_until", in_force(st.exhausted_until, now));
        if (st.exhausted_until > now && st.exhausted_reason[0])
            cJSON_AddStringToObject(o, "exhausted_reason", st.exhausted_reason);
        else
            cJSON_AddNullToObject(o, "exhausted_reason");
        json_add_time(o, "limited_until", in_force(st.limited_until, now));
        cJSON_AddNumberToObject(o, "rate_rpm", round1(tier_rate_rpm(t, &st)));
        cJSON_AddBoolToObject(o, "in_doubt", st.doubt);
        cJSON_AddNumberToObject(o, "rpm_used", (double)st.window_requests);
        cJSON_AddNumberToObject(o, "tpm_used", (double)st.window_tokens);
        cJSON_AddNumberToObject(o, "allowance_used", (double)st.allowance_used);
        cJSON_AddNumberToObject(o, "in_flight", (double)st.in_flight);
        cJSON_AddItemToArray(arr, o);
    }
    q_close(db);
    if (json && rc == 0)
        cli_print_json(arr);
    else
        cJSON_Delete(arr);
    return rc;
}

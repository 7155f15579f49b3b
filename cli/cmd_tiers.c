/* cmd_tiers.c: stepq tiers — each configured tier's shared state. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "queue/queue.h"
#include "view/view.h"

static const char usage[] =
    "usage: stepq tiers [--json]\n"
    "\n"
    "The state every worker on the database shares for each tier of the\n"
    "config: breaker (closed, open, half_open) and until when it is open,\n"
    "a quota wall and until when, the pace in force (requests per minute\n"
    "it is paced to: the declared or learned limit, lowered after 429s),\n"
    "requests and tokens sent in the last minute, allowance used, and\n"
    "requests in flight.\n";

static long long
num_of(const cJSON *o, const char *name)
{
    return (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(o, name));
}

int
cmd_tiers(struct cli_env *env, int argc, char **argv)
{
    bool json = false;
    struct cli_opt opts[] = {{"json", NULL, &json}, {NULL, NULL, NULL}};
    const struct config *cfg = NULL;
    const char *failed = "?";
    const cJSON *t;
    cJSON *arr = NULL;
    q_db *db = NULL;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0)
        return rc;
    if ((rc = cli_config(env, &cfg)) != 0 || (rc = cli_open_db(env, &db)) != 0)
        return rc;
    rc = view_tiers(db, cfg, cli_now(db), &arr, &failed);
    q_close(db);
    if (rc != 0) {
        cli_error("tiers: cannot read the state of tier %s", failed);
        return CLI_RUNTIME;
    }
    if (json) {
        cli_print_json(arr);
        return CLI_OK;
    }
    printf("%-12s %-10s %-21s %-21s %-10s %8s %6s %9s %12s %9s\n", "TIER",
           "BREAKER", "OPEN UNTIL", "EXHAUSTED UNTIL", "REASON", "PACE RPM",
           "RPM", "TPM", "ALLOWANCE", "IN FLIGHT");
    cJSON_ArrayForEach(t, arr)
    {
        printf("%-12s %-10s %-21s %-21s %-10s %8.1f %6lld %9lld %12lld "
               "%9lld\n",
               cli_json_text(t, "name"), cli_json_text(t, "breaker"),
               cli_json_text(t, "open_until"),
               cli_json_text(t, "exhausted_until"),
               cli_json_text(t, "exhausted_reason"),
               cJSON_GetNumberValue(cJSON_GetObjectItem(t, "rate_rpm")),
               num_of(t, "rpm_used"), num_of(t, "tpm_used"),
               num_of(t, "allowance_used"), num_of(t, "in_flight"));
    }
    cJSON_Delete(arr);
    return CLI_OK;
}

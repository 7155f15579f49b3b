/* cmd_status.c: stepq status — job counts by state and open park items. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "queue/queue.h"
#include "view/view.h"

static const char usage[] = "usage: stepq status [--json]\n"
                            "\n"
                            "Job counts by state and the number of open park "
                            "items.\n"
                            "--json: {\"jobs\": {\"queued\": N, ...}, "
                            "\"park_open\": N}\n";

int
cmd_status(struct cli_env *env, int argc, char **argv)
{
    bool json = false;
    struct cli_opt opts[] = {{"json", NULL, &json}, {NULL, NULL, NULL}};
    const char *path = NULL;
    char where[CLI_WHERE_MAX];
    cJSON *root = NULL, *jobs;
    q_db *db = NULL;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0)
        return rc;
    if ((rc = cli_open_db(env, &db)) != 0 ||
        (rc = cli_db_path(env, &path)) != 0) {
        q_close(db);
        return rc;
    }
    rc = view_status(db, &root);
    q_close(db);
    path = q_location_redact(path, where, sizeof(where));
    if (rc != 0) {
        cli_error("status: cannot read %s", path);
        return CLI_RUNTIME;
    }
    if (json) {
        cli_print_json(root);
        return CLI_OK;
    }
    jobs = cJSON_GetObjectItem(root, "jobs");
    printf("database %s\n", path);
    for (int i = 0; i < Q_JOB_NSTATES; i++)
        printf("  %-10s %lld\n", q_job_state_name(i),
               (long long)cJSON_GetNumberValue(
                   cJSON_GetObjectItem(jobs, q_job_state_name(i))));
    printf("park items open: %lld\n",
           (long long)cJSON_GetNumberValue(
               cJSON_GetObjectItem(root, "park_open")));
    cJSON_Delete(root);
    return CLI_OK;
}

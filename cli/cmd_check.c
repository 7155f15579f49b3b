/* cmd_check.c: stepq check — a job file validated as `stepq enqueue`
 * would take it, its tiers and environment variables looked up, and
 * what each step sends filled as far as it can be before the job runs
 * (spec_check); nothing is written and nothing is sent. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/file.h"
#include "common/json.h"
#include "spec/spec.h"

/* The largest input check reads (a bulk file is checked whole, in
 * memory). */
#define CHECK_MAX_BYTES (64 * 1024 * 1024)

static const char usage[] =
    "usage: stepq check [FILE|-] [--input JSON|@FILE] [--json]\n"
    "\n"
    "Checks one job, a JSON array of jobs, or JSON lines from FILE or\n"
    "standard input as `stepq enqueue` would take them, and more: every\n"
    "tier a step names is in the config, and every environment variable an\n"
    "http step's \"env:NAME\" header names is set. Prints what each step\n"
    "sends, with every template filled that can be before the job runs\n"
    "({{input.PATH}}; a step's output is filled when the job runs).\n"
    "Nothing is written and nothing is sent. Exit 0 when the jobs would\n"
    "be taken, 2 when not (the message names the JSON path).\n"
    "\n"
    "  --input JSON   every job's input (JSON text, or @FILE), as enqueue's\n"
    "  --json         print {\"ok\": true, \"jobs\": [...]}, or\n"
    "                 {\"ok\": false, \"error\": \"...\"}\n";

/* The text form: each job, and what each step sends on one line. */
static void
print_text(const cJSON *report)
{
    const cJSON *j, *s;

    cJSON_ArrayForEach(j, cJSON_GetObjectItemCaseSensitive(report, "jobs"))
    {
        const cJSON *steps = cJSON_GetObjectItemCaseSensitive(j, "steps");
        printf("job %s: ok (%d step%s)\n", cli_json_text(j, "name"),
               cJSON_GetArraySize(steps),
               cJSON_GetArraySize(steps) == 1 ? "" : "s");
        cJSON_ArrayForEach(s, steps)
        {
            const cJSON *when = cJSON_GetObjectItemCaseSensitive(s, "when");
            char *sends =
                json_print(cJSON_GetObjectItemCaseSensitive(s, "sends"));
            char *cond = cJSON_IsNull(when) ? NULL : json_print(when);
            printf("  %s (%s)%s%s: %s\n", cli_json_text(s, "name"),
                   cli_json_text(s, "kind"), cond ? " when " : "",
                   cond ? cond : "", sends);
            free(sends);
            free(cond);
        }
    }
}

int
cmd_check(struct cli_env *env, int argc, char **argv)
{
    const char *file = "-", *input_arg = NULL, *pos[1];
    bool json = false;
    struct cli_opt opts[] = {
        {"input", &input_arg, NULL}, {"json", NULL, &json}, {NULL, NULL, NULL}};
    const struct config *cfg = NULL;
    cJSON *input = NULL, *report = NULL;
    char *text = NULL, err[1024];
    size_t len = 0;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, pos, 1, &npos, usage)) != 0)
        return rc;
    if (npos == 1)
        file = pos[0];
    if ((rc = cli_read_input("check", input_arg, &input)) != 0 ||
        (rc = cli_config(env, &cfg)) != 0)
        goto out;
    if ((rc = file_read_all(file, CHECK_MAX_BYTES, &text, &len)) != 0) {
        cli_error("check: %s: %s", strcmp(file, "-") ? file : "stdin",
                  rc == -ENOENT   ? "no such file"
                  : rc == -EISDIR ? "a folder, not a job file"
                  : rc == -E2BIG  ? "larger than check reads (64 MiB)"
                                  : "cannot read");
        rc = rc == -EIO ? CLI_RUNTIME : CLI_USAGE;
        goto out;
    }
    if (spec_check(text, len, cfg, input, &report, err, sizeof(err)) != 0) {
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddFalseToObject(o, "ok");
            cJSON_AddStringToObject(o, "error", err);
            cli_print_json(o);
        }
        cli_error("check: %s: %s", strcmp(file, "-") ? file : "stdin", err);
        rc = CLI_USAGE;
        goto out;
    }
    if (json)
        cli_print_json(report);
    else
        print_text(report);
    if (!json)
        cJSON_Delete(report);
    rc = CLI_OK;
out:
    free(text);
    cJSON_Delete(input);
    return rc;
}

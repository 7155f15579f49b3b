/* cmd_audit.c: stepq audit — the audit trail: every write made through
 * the CLI or `stepq serve`, who made it, from where. Also cli_audit_by,
 * what the CLI's own audit rows say of who wrote. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "park/park.h"
#include "queue/audit.h"
#include "queue/queue.h"
#include "view/view.h"

static const char usage[] =
    "usage: stepq audit [--since SPAN|TIME] [--json]\n"
    "\n"
    "The audit trail, oldest first: every write made through the CLI or\n"
    "stepq serve (enqueue, park resolve, job cancel and retry, operators),\n"
    "who made it (the operator, or the OS user on the CLI), from where\n"
    "(the client's address, or cli), and a short detail.\n"
    "\n"
    "  --since SPAN|TIME  a span back from now (90m, 24h, 7d) or an\n"
    "                     RFC 3339 time (default: 24h)\n"
    "  --json             the rows as a JSON array\n";

void
cli_audit_by(const struct q_db *db, struct park_audit *a)
{
    a->who = cli_login_name();
    a->source = "cli";
    a->now = cli_now(db);
}

int
cli_audited(struct q_db *db, int rc, const char *action, int64_t job_id,
            const char *schedule)
{
    struct park_audit a = {.action = action, .job_id = job_id};
    cJSON *d = cJSON_CreateObject();

    cJSON_AddStringToObject(d, "schedule", schedule);
    a.detail = d;
    cli_audit_by(db, &a);
    rc = park_audited(db, rc, &a);
    cJSON_Delete(d);
    return rc;
}

/* One row of the text form: time, who, action, what, where, detail. */
static void
print_row(const cJSON *r, const char *indent)
{
    const cJSON *job = cJSON_GetObjectItem(r, "job_id");
    const cJSON *item = cJSON_GetObjectItem(r, "park_id");
    char what[64] = "-", *detail;

    if (cJSON_IsNumber(item))
        snprintf(what, sizeof(what), "park %lld",
                 (long long)cJSON_GetNumberValue(item));
    else if (cJSON_IsNumber(job))
        snprintf(what, sizeof(what), "job %lld",
                 (long long)cJSON_GetNumberValue(job));
    detail = cJSON_PrintUnformatted(cJSON_GetObjectItem(r, "detail"));
    printf("%s%s  %-12s %-18s %-12s %-15s %s\n", indent, cli_json_text(r, "at"),
           cli_json_text(r, "who"), cli_json_text(r, "action"), what,
           cli_json_text(r, "source"), detail ? detail : "{}");
    cJSON_free(detail);
}

void
cli_print_audit(const struct cJSON *rows, const char *indent)
{
    const cJSON *r;

    if (indent[0] != '\0' && cJSON_GetArraySize(rows) > 0)
        printf("%saudit:\n", indent);
    cJSON_ArrayForEach(r, rows)
    {
        print_row(r, indent);
    }
}

int
cmd_audit(struct cli_env *env, int argc, char **argv)
{
    const char *since_s = NULL;
    bool json = false;
    struct cli_opt opts[] = {
        {"since", &since_s, NULL}, {"json", NULL, &json}, {NULL, NULL, NULL}};
    struct q_audit_filter f = {0};
    cJSON *arr = NULL;
    q_db *db = NULL;
    int64_t now;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0 ||
        (rc = cli_open_db(env, &db)) != 0)
        return rc;
    now = cli_now(db);
    f.since = now - 86400000;
    if (since_s != NULL && clock_parse_since(since_s, now, &f.since) != 0) {
        q_close(db);
        cli_error("audit: --since %s is not a span (90m, 24h, 7d) or an "
                  "RFC 3339 time",
                  since_s);
        return CLI_USAGE;
    }
    rc = view_audit(db, &f, &arr);
    q_close(db);
    if (rc != 0) {
        cli_error("audit: cannot read the database");
        return CLI_RUNTIME;
    }
    if (json) {
        cli_print_json(arr);
        return CLI_OK;
    }
    cli_print_audit(arr, "");
    cJSON_Delete(arr);
    return CLI_OK;
}

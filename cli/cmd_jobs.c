/* cmd_jobs.c: stepq jobs list|show|cancel|retry|wait (wait in
 * cmd_jobs_wait.c). */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/json.h"
#include "common/price.h"
#include "park/park.h"
#include "queue/queue.h"
#include "view/view.h"

static const char usage[] =
    "usage: stepq jobs list [--state S] [--json]\n"
    "       stepq jobs show ID [--json]\n"
    "       stepq jobs cancel ID [--by NAME] [--json]\n"
    "       stepq jobs retry ID [--from STEP] [--force-side-effects] "
    "[--by NAME] [--json]\n"
    "       stepq jobs wait ID [--timeout S] [--json]\n"
    "\n"
    "list    every job, oldest first; --state queued|running|succeeded|\n"
    "        failed|parked|cancelled keeps one state\n"
    "show    one job with its steps and the history of every attempt\n"
    "cancel  stop a queued, running or parked job (exit 4 if it already\n"
    "        ended, 3 if there is no such job); a parked job's open park\n"
    "        items are closed with resolution \"cancel\", by NAME (default:\n"
    "        your login name); --json prints "
    "{\"id\":N,\"state\":\"cancelled\"}\n"
    "retry   queue a failed or cancelled job again (a succeeded one only\n"
    "        with --from): steps before STEP (default: the first step not\n"
    "        done) keep their output, STEP and later ones run again with a\n"
    "        fresh count of attempts, and the job gets its deadline_s again.\n"
    "        A side-effecting step that was sent is not sent again without\n"
    "        --force-side-effects. Recorded with NAME (default: your login\n"
    "        name). Exit 4 for a job in another state or a sent side\n"
    "        effect, 3 if there is no such job, 2 for a bad --from; --json\n"
    "        prints {\"id\":N,\"state\":\"queued\",\"from\":STEP,"
    "\"by\":NAME,\"run_at\":T}\n"
    "wait    wait until the job ends or parks, at most --timeout S\n"
    "        (seconds, or 10m, 2h); prints the outcome (--json: the job as\n"
    "        show gives it). Exit 0 succeeded, 5 failed or cancelled, 6\n"
    "        parked (a person must act), 7 the timeout came first, 3 no such\n"
    "        job\n";

static int
jobs_list(struct cli_env *env, int argc, char **argv)
{
    const char *state = NULL;
    bool json = false;
    struct cli_opt opts[] = {
        {"state", &state, NULL}, {"json", NULL, &json}, {NULL, NULL, NULL}};
    static const char *const heads[] = {"ID", "STATE", "CREATED", "NAME",
                                        "KEY"};
    enum q_job_state st = Q_JOB_QUEUED;
    struct cli_table t;
    const cJSON *j;
    cJSON *arr = NULL;
    q_db *db = NULL;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0)
        return rc;
    if (state != NULL && q_job_state_from_name(state, &st) != 0) {
        cli_error("jobs list: --state must be queued, running, succeeded, "
                  "failed, parked or cancelled, not %s",
                  state);
        return CLI_USAGE;
    }
    if ((rc = cli_open_db(env, &db)) != 0)
        return rc;
    rc = view_jobs(db, state ? (int)st : -1, 0, 0, &arr);
    q_close(db);
    if (rc != 0) {
        cli_error("jobs list: cannot read the database");
        return CLI_RUNTIME;
    }
    if (json) {
        cli_print_json(arr);
        return CLI_OK;
    }
    cli_table_init(&t, 5, heads, "lllll");
    cJSON_ArrayForEach(j, arr)
    {
        char id[32];
        const char *cells[5] = {
            id, cli_json_text(j, "state"), cli_json_text(j, "created_at"),
            cli_json_text(j, "name"), cli_json_text(j, "key")};
        snprintf(id, sizeof(id), "%lld",
                 (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "id")));
        cli_table_add(&t, cells);
    }
    cli_table_print(&t);
    cli_table_cleanup(&t);
    cJSON_Delete(arr);
    return CLI_OK;
}

/* " cost $X" for a member cost_usd of o that is a number, else "" (not
 * priced); "~" marks an estimate. */
static const char *
cost_text(const cJSON *o, char *buf, size_t len)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "cost_usd");
    char money[40];

    if (!cJSON_IsNumber(c))
        return "";
    snprintf(
        buf, len, " cost %s%s",
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "cost_estimated"))
            ? "~"
            : "",
        price_format(price_from_usd(c->valuedouble), money, sizeof(money)));
    return buf;
}

/* The job's input, compact, on one line (none: nothing). */
static void
print_input(const cJSON *o)
{
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, "input");
    char *text = in && !cJSON_IsNull(in) ? json_print(in) : NULL;

    if (text != NULL)
        printf("  input    %s\n", text);
    free(text);
}

/* An agent step's attempt as a line of its transcript: a model turn
 * (tier, tokens, cost, finish) or a tool call (tool, arguments, state,
 * result excerpt). False for a plain attempt. */
static bool
print_agent(const cJSON *h)
{
    const char *kind = cli_json_text(h, "kind");
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(h, "tokens");
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(h, "calls");
    char cost[64], *args;

    if (strcmp(kind, "turn") == 0) {
        printf("    #%d turn  tier %s tokens %.0f%s finish %s",
               cJSON_GetObjectItemCaseSensitive(h, "attempt")->valueint,
               cli_json_text(h, "tier"),
               cJSON_IsNumber(tok) ? tok->valuedouble : 0,
               cost_text(h, cost, sizeof(cost)),
               cJSON_IsNumber(calls) ? "tool_calls"
                                     : cli_json_text(h, "outcome"));
        if (cJSON_IsNumber(calls))
            printf(" (%d calls)", calls->valueint);
        printf("\n");
        return true;
    }
    if (strcmp(kind, "tool") != 0)
        return false;
    args = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(h, "args"));
    printf("    #%d call  %s %s: %s (%s)\n",
           cJSON_GetObjectItemCaseSensitive(h, "attempt")->valueint,
           cli_json_text(h, "tool"), args ? args : "-",
           cli_json_text(h, "outcome"), cli_json_text(h, "decision"));
    if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(h, "result")))
        printf("           -> %s\n", cli_json_text(h, "result"));
    free(args);
    return true;
}

/* One attempt of a shown job's step; the first one after a retry (*after:
 * the retry of the attempt before) says which and who asked for it. */
static void
print_attempt(const cJSON *h, const cJSON *retries, int *after)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(h, "status");
    const cJSON *oc = cJSON_GetObjectItemCaseSensitive(h, "outcome");
    const cJSON *de = cJSON_GetObjectItemCaseSensitive(h, "decision");
    const cJSON *ht = cJSON_GetObjectItemCaseSensitive(h, "tier");
    const cJSON *ro = cJSON_GetObjectItemCaseSensitive(h, "route");
    const cJSON *rn = cJSON_GetObjectItemCaseSensitive(h, "retry");
    const cJSON *ba = cJSON_GetObjectItemCaseSensitive(h, "batch");
    char status[16] = "-", cost[64];

    if (cJSON_IsNumber(rn) && rn->valueint != *after) {
        *after = rn->valueint;
        printf("    (retry %d, by %s)\n", *after,
               cli_json_text(cJSON_GetArrayItem(retries, *after - 1), "by"));
    }
    if (cJSON_IsNumber(st))
        snprintf(status, sizeof(status), "%d", st->valueint);
    if (print_agent(h))
        return;
    printf("    #%d tier %s status %s outcome %s decision %s%s\n",
           cJSON_GetObjectItemCaseSensitive(h, "attempt")->valueint,
           cJSON_IsString(ht) ? ht->valuestring : "-", status,
           cJSON_IsString(oc) ? oc->valuestring : "(no result)",
           cJSON_IsString(de) ? de->valuestring : "-",
           cost_text(h, cost, sizeof(cost)));
    if (cJSON_IsString(ro))
        printf("       not first choice: %s\n", ro->valuestring);
    if (cJSON_IsObject(ba) &&
        cJSON_IsString(cJSON_GetObjectItem(ba, "provider_id")))
        printf("       in batch %d (%s at the provider)\n",
               cJSON_GetObjectItemCaseSensitive(ba, "id")->valueint,
               cli_json_text(ba, "provider_id"));
    else if (cJSON_IsObject(ba))
        printf("       in batch %d (no id from its provider)\n",
               cJSON_GetObjectItemCaseSensitive(ba, "id")->valueint);
}

/* The park items of step's tool calls (approvals, questions, calls in
 * doubt) and who resolved them. */
static void
print_calls_parked(const cJSON *o, const char *step)
{
    const cJSON *p;

    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(o, "park"))
    {
        const cJSON *call = cJSON_GetObjectItemCaseSensitive(p, "call");
        char *args;
        if (!cJSON_IsObject(call) || strcmp(cli_json_text(p, "step"), step))
            continue;
        args = cJSON_PrintUnformatted(
            cJSON_GetObjectItemCaseSensitive(call, "args"));
        printf("    %s %s %s: %s", cli_json_text(p, "reason"),
               cli_json_text(call, "tool"), args ? args : "-",
               cli_json_text(p, "state"));
        if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(p, "resolution")))
            printf(" %s by %s at %s", cli_json_text(p, "resolution"),
                   cli_json_text(p, "resolved_by"),
                   cli_json_text(p, "resolved_at"));
        if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(p, "note")))
            printf(" (%s)", cli_json_text(p, "note"));
        printf("\n");
        free(args);
    }
}

static void
print_job_text(const cJSON *o)
{
    const cJSON *retries = cJSON_GetObjectItemCaseSensitive(o, "retries");
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(o, "steps"), *s;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(o, "error");
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(o, "key");
    char cost[64];

    printf("job %d  %s  %s\n",
           cJSON_GetObjectItemCaseSensitive(o, "id")->valueint,
           cJSON_GetObjectItemCaseSensitive(o, "name")->valuestring,
           cJSON_GetObjectItemCaseSensitive(o, "state")->valuestring);
    printf("  key      %s\n", cJSON_IsString(key) ? key->valuestring : "-");
    printf("  created  %s\n",
           cJSON_GetObjectItemCaseSensitive(o, "created_at")->valuestring);
    printf("  deadline %s\n",
           cJSON_GetObjectItemCaseSensitive(o, "deadline_at")->valuestring);
    if (cJSON_IsString(err))
        printf("  error    %s\n", err->valuestring);
    print_input(o);
    if (cost_text(o, cost, sizeof(cost))[0] != '\0')
        printf("  cost     %s\n", cost + strlen(" cost "));
    cJSON_ArrayForEach(s, retries)
    {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, "error");
        printf("  retried  %s by %s from step %s (was %s%s%s)\n",
               cli_json_text(s, "at"), cli_json_text(s, "by"),
               cli_json_text(s, "from"), cli_json_text(s, "state"),
               cJSON_IsString(e) ? ": " : "",
               cJSON_IsString(e) ? e->valuestring : "");
    }
    cJSON_ArrayForEach(s, steps)
    {
        const cJSON *h, *tier = cJSON_GetObjectItemCaseSensitive(s, "tier");
        printf(
            "  step %-20s %-10s tier %-10s attempts %d tokens %.0f%s\n",
            cJSON_GetObjectItemCaseSensitive(s, "name")->valuestring,
            cJSON_GetObjectItemCaseSensitive(s, "state")->valuestring,
            cJSON_IsString(tier) ? tier->valuestring : "-",
            cJSON_GetObjectItemCaseSensitive(s, "attempts")->valueint,
            cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(s, "tokens")),
            cost_text(s, cost, sizeof(cost)));
        int after = 0;
        if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(s, "reason")))
            printf("    %s\n", cli_json_text(s, "reason"));
        if (cJSON_GetObjectItem(s, "http") != NULL) {
            const cJSON *t = cJSON_GetObjectItem(s, "http");
            printf("    %s %s\n", cli_json_text(t, "method"),
                   cli_json_text(t, "url"));
        }
        cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(s, "history"))
            print_attempt(h, retries, &after);
        cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(s, "elements"))
            printf("    element %-4d job %-6d %s%s%s\n",
                   cJSON_GetObjectItem(h, "index")->valueint,
                   cJSON_GetObjectItem(h, "job")->valueint,
                   cli_json_text(h, "state"),
                   cJSON_IsString(cJSON_GetObjectItem(h, "error")) ? ": " : "",
                   cJSON_IsString(cJSON_GetObjectItem(h, "error"))
                       ? cli_json_text(h, "error")
                       : "");
        print_calls_parked(o, cli_json_text(s, "name"));
    }
    cli_print_audit(cJSON_GetObjectItem(o, "audit"), "  ");
}

int
cli_jobs_args(int argc, char **argv, const struct cli_opt *opts,
              const char *sub, const char *help, long long *id)
{
    const char *pos[1];
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, pos, 1, &npos, help)) != 0)
        return rc;
    if (npos != 1) {
        cli_error("jobs %s: which job? (stepq jobs %s ID)", sub, sub);
        return CLI_USAGE;
    }
    return cli_parse_id(pos[0], id);
}

static int
jobs_wait(struct cli_env *env, int argc, char **argv)
{
    return cli_jobs_wait(env, argc, argv, usage);
}

static int
jobs_show(struct cli_env *env, int argc, char **argv)
{
    bool json = false;
    struct cli_opt opts[] = {{"json", NULL, &json}, {NULL, NULL, NULL}};
    long long id = 0;
    cJSON *o = NULL;
    q_db *db = NULL;
    int rc;

    if ((rc = cli_jobs_args(argc, argv, opts, "show", usage, &id)) != 0)
        return rc;
    if ((rc = cli_open_db(env, &db)) != 0)
        return rc;
    rc = view_job(db, id, &o);
    q_close(db);
    if (rc == -ENOENT) {
        cli_error("jobs show: no job %lld", id);
        return CLI_NOTFOUND;
    }
    if (rc != 0) {
        cli_error("jobs show: cannot read the database");
        return CLI_RUNTIME;
    }
    if (json) {
        cli_print_json(o);
    } else {
        print_job_text(o);
        cJSON_Delete(o);
    }
    return CLI_OK;
}

static int
jobs_cancel(struct cli_env *env, int argc, char **argv)
{
    const char *by = NULL;
    bool json = false;
    struct cli_opt opts[] = {
        {"by", &by, NULL}, {"json", NULL, &json}, {NULL, NULL, NULL}};
    struct park_audit a = {0};
    long long id = 0;
    q_db *db = NULL;
    int rc;

    if ((rc = cli_jobs_args(argc, argv, opts, "cancel", usage, &id)) != 0)
        return rc;
    if ((rc = cli_open_db(env, &db)) != 0)
        return rc;
    cli_audit_by(db, &a);
    rc = park_cancel_job_audited(db, id, by ? by : cli_login_name(), &a);
    q_close(db);
    switch (rc) {
    case 0:
        if (json)
            printf("{\"id\":%lld,\"state\":\"cancelled\"}\n", id);
        else
            printf("cancelled job %lld\n", id);
        return CLI_OK;
    case -ENOENT:
        cli_error("jobs cancel: no job %lld", id);
        return CLI_NOTFOUND;
    case -EALREADY:
        cli_error("jobs cancel: job %lld has already ended", id);
        return CLI_CONFLICT;
    case -EINVAL:
        cli_error("jobs cancel: --by must be a name: UTF-8 text without "
                  "control characters");
        return CLI_USAGE;
    default:
        cli_error("jobs cancel: cannot write to the database");
        return CLI_RUNTIME;
    }
}

static int
jobs_retry(struct cli_env *env, int argc, char **argv)
{
    struct park_retry r = {0};
    struct park_retried done;
    bool json = false;
    struct cli_opt opts[] = {
        {"from", &r.from, NULL},
        {"by", &r.by, NULL},
        {"force-side-effects", NULL, &r.force_side_effects},
        {"json", NULL, &json},
        {NULL, NULL, NULL}};
    const struct config *cfg = NULL;
    struct park_audit a = {0};
    long long id = 0;
    q_db *db = NULL;
    char err[512];
    int rc;

    if ((rc = cli_jobs_args(argc, argv, opts, "retry", usage, &id)) != 0)
        return rc;
    if ((rc = cli_config(env, &cfg)) != 0 || (rc = cli_open_db(env, &db)) != 0)
        return rc;
    if (r.by == NULL)
        r.by = cli_login_name();
    r.now = cli_now(db);
    r.lease_ms = (int64_t)(cfg->worker.lease_s * 1000);
    cli_audit_by(db, &a);
    rc = park_retry_job_audited(db, id, &r, &done, err, sizeof(err), &a);
    q_close(db);
    if (rc == -ENOENT || rc == -EALREADY || rc == -EINVAL) {
        cli_error("jobs retry: %s", err);
        return cli_exit_code(rc);
    }
    if (rc != 0) {
        cli_error("jobs retry: cannot write to the database");
        return CLI_RUNTIME;
    }
    if (json) {
        cli_print_json(park_retried_json(&done, r.by));
    } else {
        printf("retried job %lld from step %s\n", id, done.from_name);
        if (done.run_at > r.now)
            printf("due in %lld s: it was cancelled less than a lease "
                   "(worker.lease_s) ago\n",
                   (long long)((done.run_at - r.now + 999) / 1000));
    }
    return CLI_OK;
}

int
cmd_jobs(struct cli_env *env, int argc, char **argv)
{
    static const struct cli_sub subs[] = {
        {"list", jobs_list},   {"show", jobs_show}, {"cancel", jobs_cancel},
        {"retry", jobs_retry}, {"wait", jobs_wait}, {NULL, NULL}};

    return cli_subcommand(env, argc, argv, subs, usage);
}

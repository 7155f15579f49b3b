/* cmd_park.c: stepq park list|show|resolve — the operators' review. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/json.h"
#include "common/xalloc.h"
#include "park/park.h"
#include "policy/policy.h"
#include "queue/park.h"
#include "queue/queue.h"
#include "view/view.h"

#define OUTPUT_MAX_BYTES (16 * 1024 * 1024)

static const char usage[] =
    "usage: stepq park list [--all] [--json] [--reason R] [--tier T] [--job "
    "ID]\n"
    "       stepq park show ID [--json]\n"
    "       stepq park resolve ID (--retry [--tier NAME] [--not-before T]\n"
    "                              [--lift-wall] | --skip |\n"
    "                              --done [--output FILE|-] | --fail |\n"
    "                              --approve [--args FILE|-] | --reject)\n"
    "                             [--by NAME] [--note TEXT] [--json]\n"
    "       stepq park resolve --all-matching [--reason R] [--tier T]\n"
    "                             [--job ID] (--retry [--not-before T]\n"
    "                             [--lift-wall] | --skip | --fail)\n"
    "                             [--by NAME] [--note TEXT] [--json]\n"
    "\n"
    "list     open items (--all: resolved ones too), then counts per reason\n"
    "         and tier\n"
    "show     everything needed to decide: the job and step, the request as\n"
    "         sent, the raw error, every attempt\n"
    "resolve  --retry sends the step again (fresh attempts, optionally on one\n"
    "         tier; --not-before: not before an RFC 3339 time, or a span\n"
    "         from now such as 6h; --lift-wall: an http step's host's wall\n"
    "         ended, send now); --skip goes on without it; --done records "
    "your output\n"
    "         (later steps' templates see it) and goes on; --fail fails the\n"
    "         job. A tool call's item (approval, question, in_doubt):\n"
    "         --approve runs it (--args: with these arguments, checked\n"
    "         against the tool's parameters), --reject gives the model the\n"
    "         --note as its result, --done gives it the --output.\n"
    "         --by defaults to your login name. An item already resolved\n"
    "         exits 4; an unknown id exits 3. --json prints\n"
    "         {\"id\":N,\"resolution\":R}, or with --all-matching\n"
    "         {\"resolved\":N,\"resolution\":R} (N: the items resolved).\n";

static void
age_text(int64_t since, int64_t now, char *buf, size_t len)
{
    int64_t s = (now - since) / 1000;

    if (s < 0)
        s = 0;
    if (s < 120)
        snprintf(buf, len, "%llds", (long long)s);
    else if (s < 7200)
        snprintf(buf, len, "%lldm", (long long)s / 60);
    else if (s < 172800)
        snprintf(buf, len, "%lldh", (long long)s / 3600);
    else
        snprintf(buf, len, "%lldd", (long long)s / 86400);
}

/* First line of the error, cut to width, for the table. */
static void
short_error(const char *e, char *buf, size_t width)
{
    size_t n = 0;

    for (; e != NULL && e[n] && e[n] != '\n' && n + 1 < width; n++)
        buf[n] = e[n];
    buf[n] = '\0';
    if (e != NULL && e[n] != '\0' && n > 3)
        memcpy(buf + n - 3, "...", 4);
}

struct tally {
    const char *name;
    int n;
};

static void
count(struct tally *t, size_t *nt, size_t cap, const char *name)
{
    for (size_t i = 0; i < *nt; i++) {
        if (strcmp(t[i].name, name) == 0) {
            t[i].n++;
            return;
        }
    }
    if (*nt < cap)
        t[(*nt)++] = (struct tally){name, 1};
}

static void
print_tallies(const struct q_park_item *items, size_t n)
{
    struct tally reasons[32], tiers[32];
    size_t nr = 0, nt = 0;
    int open = 0;

    for (size_t i = 0; i < n; i++) {
        if (!items[i].open)
            continue;
        open++;
        count(reasons, &nr, 32, items[i].reason ? items[i].reason : "-");
        count(tiers, &nt, 32, items[i].tier ? items[i].tier : "-");
    }
    printf("\n%d open", open);
    for (size_t i = 0; i < nr; i++)
        printf("%s%s %d", i ? ", " : "; by reason: ", reasons[i].name,
               reasons[i].n);
    for (size_t i = 0; i < nt; i++)
        printf("%s%s %d", i ? ", " : "; by tier: ", tiers[i].name, tiers[i].n);
    printf("\n");
}

static int
parse_job_filter(const char *job, int64_t *out)
{
    long long id = 0;
    int rc;

    if (job == NULL)
        return 0;
    if ((rc = cli_parse_id(job, &id)) != 0) {
        cli_error("park: --job takes a job id");
        return rc;
    }
    *out = id;
    return 0;
}

/* A --reason filter must be one a park item can have (an outcome, or
 * in_doubt): a misspelt one would match nothing without a word. */
static int
check_reason_filter(const char *reason)
{
    enum policy_outcome o;

    if (reason == NULL || strcmp(reason, "in_doubt") == 0 ||
        policy_outcome_from_name(reason, &o) == 0)
        return 0;
    cli_error("park: --reason %s: not a reason a park item has (in_doubt, "
              "or an outcome such as hard_quota or server_error)",
              reason);
    return CLI_USAGE;
}

static int
list_cmd(struct cli_env *env, int argc, char **argv)
{
    bool json = false, all = false;
    const char *reason = NULL, *tier = NULL, *job = NULL;
    struct cli_opt opts[] = {{"json", NULL, &json},     {"all", NULL, &all},
                             {"reason", &reason, NULL}, {"tier", &tier, NULL},
                             {"job", &job, NULL},       {NULL, NULL, NULL}};
    struct q_park_filter f = {0};
    struct q_park_item *items = NULL;
    int64_t now = 0;
    size_t n = 0;
    q_db *db = NULL;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0 ||
        (rc = parse_job_filter(job, &f.job_id)) != 0 ||
        (rc = check_reason_filter(reason)) != 0)
        return rc;
    f.all = all;
    f.reason = reason;
    f.tier = tier;
    if ((rc = cli_open_db(env, &db)) != 0)
        return rc;
    rc = q_park_list(db, &f, &items, &n);
    now = cli_now(db); /* ages on the store's clock, as parked_at */
    q_close(db);
    if (rc != 0) {
        cli_error("park list: cannot read the database");
        return CLI_RUNTIME;
    }
    if (json) {
        cli_print_json(view_park_list(items, n));
    } else {
        static const char *const heads[] = {"ID",   "AGE",    "STATE", "JOB",
                                            "STEP", "REASON", "TIER",  "ERROR"};
        struct cli_table t;
        cli_table_init(&t, 8, heads, "llllllll");
        for (size_t i = 0; i < n; i++) {
            char id[32], jobid[32], age[16], err[48];
            const char *cells[8] = {id,
                                    age,
                                    items[i].open ? "open"
                                                  : items[i].resolution,
                                    jobid,
                                    items[i].step_name,
                                    items[i].reason,
                                    items[i].tier,
                                    err};
            snprintf(id, sizeof(id), "%lld", (long long)items[i].id);
            snprintf(jobid, sizeof(jobid), "%lld", (long long)items[i].job_id);
            age_text(items[i].parked_at, now, age, sizeof(age));
            short_error(items[i].error, err, sizeof(err));
            cli_table_add(&t, cells);
        }
        cli_table_print(&t);
        cli_table_cleanup(&t);
        print_tallies(items, n);
    }
    q_park_items_free(items, n);
    return CLI_OK;
}

static void
print_item_text(const cJSON *o)
{
    const cJSON *h;
    bool open = strcmp(cli_json_text(o, "state"), "open") == 0;

    printf("park item %lld (%s)\n",
           (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "id")),
           open ? "open" : "resolved");
    printf("  job       %lld %s (%s)\n",
           (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "job_id")),
           cli_json_text(o, "job_name"), cli_json_text(o, "job_state"));
    printf("  step      %s: kind %s, side effects %s, idempotency key %s\n",
           cli_json_text(o, "step"),
           cJSON_GetObjectItem(o, "kind") ? cli_json_text(o, "kind") : "?",
           cJSON_IsTrue(cJSON_GetObjectItem(o, "side_effects")) ? "yes" : "no",
           cJSON_IsTrue(cJSON_GetObjectItem(o, "idempotency_key")) ? "yes"
                                                                   : "no");
    if (cJSON_GetObjectItem(o, "http") != NULL) {
        const cJSON *t = cJSON_GetObjectItem(o, "http");
        printf("  sends     %s %s\n", cli_json_text(t, "method"),
               cli_json_text(t, "url"));
    }
    printf("  reason    %s after %d attempt(s), tier %s\n",
           cli_json_text(o, "reason"),
           (int)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "attempts")),
           cli_json_text(o, "tier"));
    printf("  sha256    %s\n", cli_json_text(o, "request_sha256"));
    printf("  error     %s\n", cli_json_text(o, "error"));
    printf("  request   %s\n", cli_json_text(o, "request"));
    if (!open) {
        const char *note = cJSON_GetStringValue(cJSON_GetObjectItem(o, "note"));
        const char *by =
            cJSON_GetStringValue(cJSON_GetObjectItem(o, "resolved_by"));
        printf("  resolved  %s by %s%s%s\n", cli_json_text(o, "resolution"),
               by ? by : "?", note ? ": " : "", note ? note : "");
    }
    cJSON_ArrayForEach(h, cJSON_GetObjectItem(o, "history"))
    {
        const cJSON *st = cJSON_GetObjectItem(h, "status");
        char status[16] = "-";
        if (cJSON_IsNumber(st))
            snprintf(status, sizeof(status), "%d", st->valueint);
        printf("  attempt %d: status %s, %s, %s\n",
               cJSON_GetObjectItem(h, "attempt")->valueint, status,
               cli_json_text(h, "outcome"), cli_json_text(h, "decision"));
    }
    cli_print_audit(cJSON_GetObjectItem(o, "audit"), "  ");
}

static int
show_cmd(struct cli_env *env, int argc, char **argv)
{
    bool json = false;
    struct cli_opt opts[] = {{"json", NULL, &json}, {NULL, NULL, NULL}};
    const char *pos[1];
    long long id = 0;
    q_db *db = NULL;
    cJSON *o = NULL;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, pos, 1, &npos, usage)) != 0)
        return rc;
    if (npos != 1) {
        cli_error("park show: which item? (stepq park show ID)");
        return CLI_USAGE;
    }
    if ((rc = cli_parse_id(pos[0], &id)) != 0 || (rc = cli_open_db(env, &db)))
        return rc;
    rc = view_park_item(db, id, &o);
    q_close(db);
    if (rc == -ENOENT) {
        cli_error("park show: no park item %lld", id);
        return CLI_NOTFOUND;
    }
    if (rc != 0) {
        cli_error("park show: cannot read the database");
        return CLI_RUNTIME;
    }
    if (json) {
        cli_print_json(o);
        return CLI_OK;
    }
    print_item_text(o);
    cJSON_Delete(o);
    return CLI_OK;
}

/* Exactly one of the resolutions, as the CLI flags give it. */
static int
pick_resolution(const bool *flags, enum park_how *out)
{
    int n = 0;

    for (int i = 0; i <= PARK_REJECT; i++) {
        if (flags[i]) {
            *out = (enum park_how)i;
            n++;
        }
    }
    if (n != 1) {
        cli_error("park resolve: give exactly one of --retry, --skip, --done, "
                  "--fail, --approve or --reject");
        return CLI_USAGE;
    }
    return 0;
}

/* Checks d by park's rules (the same for every caller). A bulk retry's
 * tier filter must name a tier of the config too (a typo matches nothing). */
static int
check_decision(struct cli_env *env, const struct park_decision *d, bool bulk,
               const char *filter_tier)
{
    const struct config *cfg = NULL;
    char err[256];
    int rc;

    if ((d->tier != NULL || filter_tier != NULL) &&
        (rc = cli_config(env, &cfg)) != 0)
        return rc;
    if (park_decision_check(d, bulk, cfg, err, sizeof(err)) != 0) {
        cli_error("park resolve: %s", err);
        return CLI_USAGE;
    }
    if (filter_tier != NULL && config_find_tier(cfg, filter_tier) == NULL) {
        cli_error("park resolve: no tier named %s in the config", filter_tier);
        return CLI_USAGE;
    }
    return 0;
}

/* Reads the --output (or --args: args) file into d (owned text in
 * *text). */
static int
read_output(const char *output, bool args, struct park_decision *d, char **text)
{
    size_t len = 0;
    int rc = file_read_all(output, OUTPUT_MAX_BYTES, text, &len);

    if (rc == 0 && args) {
        d->args = *text;
        return 0;
    }
    if (rc != 0) {
        cli_error("park resolve: --%s %s: %s", args ? "args" : "output", output,
                  rc == -ENOENT  ? "no such file"
                  : rc == -E2BIG ? "larger than 16 MiB"
                                 : "cannot read");
        return CLI_USAGE;
    }
    d->output = *text;
    d->output_len = len;
    return 0;
}

/* --not-before: an RFC 3339 time, or a span from now ("6h", "90m"). */
static int
parse_not_before(const char *s, bool retry, int64_t now, int64_t *out)
{
    int64_t back = 0;

    if (!retry) {
        cli_error("park resolve: --not-before goes with --retry");
        return CLI_USAGE;
    }
    if (clock_parse_utc(s, out) == 0)
        return 0;
    if (clock_parse_since(s, 0, &back) == 0 && back < 0) {
        *out = now - back;
        return 0;
    }
    cli_error("park resolve: --not-before %s is not an RFC 3339 time or a "
              "span (6h, 90m, 2d)",
              s);
    return CLI_USAGE;
}

/* Prints what a resolution did, or why it did not, and maps it to the
 * exit code: rc is park_resolve's (all: park_resolve_matching's, which
 * resolved n items). */
static int
resolved(int rc, bool json, bool all, long long id, int64_t n,
         enum park_how how)
{
    switch (rc) {
    case 0:
        if (json)
            printf("{\"%s\":%lld,\"resolution\":\"%s\"}\n",
                   all ? "resolved" : "id", all ? (long long)n : id,
                   park_how_name(how));
        else if (all)
            printf("resolved %lld item(s): %s\n", (long long)n,
                   park_how_name(how));
        else
            printf("resolved park item %lld: %s\n", id, park_how_name(how));
        return CLI_OK;
    case -ENOENT:
        cli_error("park resolve: no park item %lld", id);
        return CLI_NOTFOUND;
    case -EALREADY:
        cli_error("park resolve: park item %lld is already resolved (or its "
                  "job is no longer parked)",
                  id);
        return CLI_CONFLICT;
    case -EINVAL:
        cli_error("park resolve: --tier: park item %lld is an http step's, "
                  "which has no tiers",
                  id);
        return CLI_USAGE;
    default:
        cli_error("park resolve: cannot write to the database");
        return CLI_RUNTIME;
    }
}

/* Which items: one ID, or --all-matching with its filters (where --tier
 * picks the items; with one item it is the tier to retry on). */
static int
pick_items(bool all, int npos, const char *const *pos, const char *reason,
           const char *job, const char *tier, long long *id,
           struct q_park_filter *f)
{
    int rc;

    if (all == (npos == 1)) {
        cli_error("park resolve: give one item ID or --all-matching");
        return CLI_USAGE;
    }
    if (!all && (reason != NULL || job != NULL)) {
        cli_error("park resolve: --reason and --job go with --all-matching");
        return CLI_USAGE;
    }
    if ((!all && (rc = cli_parse_id(pos[0], id)) != 0) ||
        (rc = parse_job_filter(job, &f->job_id)) != 0 ||
        (rc = check_reason_filter(reason)) != 0)
        return rc;
    f->reason = reason;
    f->tier = all ? tier : NULL;
    return 0;
}

/* Resolves the checked decision d in the store, with its audit row, and
 * returns the exit code. */
static int
resolve_in_store(struct cli_env *env, struct park_decision *d, bool all,
                 long long id, const struct q_park_filter *f,
                 const char *not_before, bool json)
{
    struct park_audit a = {0};
    q_db *db = NULL;
    char err[512];
    int64_t n = 0;
    int rc;

    if ((rc = cli_open_db(env, &db)) != 0)
        return rc;
    /* A tool call's item: approve/reject only there, edited arguments
     * checked against the tool's parameters (exit 2, nothing changed). */
    if (!all && park_tool_check(db, id, d, err, sizeof(err)) == -EINVAL) {
        cli_error("park resolve: park item %lld: %s", id, err);
        q_close(db);
        return CLI_USAGE;
    }
    d->now = cli_now(db);
    if (not_before != NULL &&
        (rc = parse_not_before(not_before, d->how == PARK_RETRY, d->now,
                               &d->not_before)) != 0) {
        q_close(db);
        return rc;
    }
    cli_audit_by(db, &a);
    rc = all ? park_resolve_matching_audited(db, f, d, &n, &a)
             : park_resolve_audited(db, id, d, &a);
    q_close(db);
    return resolved(rc, json, all, id, n, d->how);
}

static int
resolve_cmd(struct cli_env *env, int argc, char **argv)
{
    bool how[PARK_REJECT + 1] = {false}, all = false, json = false;
    bool lift = false;
    const char *tier = NULL, *output = NULL, *by = NULL, *note = NULL;
    const char *args = NULL;
    const char *reason = NULL, *job = NULL, *not_before = NULL;
    struct cli_opt opts[] = {{"retry", NULL, &how[PARK_RETRY]},
                             {"not-before", &not_before, NULL},
                             {"lift-wall", NULL, &lift},
                             {"skip", NULL, &how[PARK_SKIP]},
                             {"done", NULL, &how[PARK_DONE]},
                             {"fail", NULL, &how[PARK_FAIL]},
                             {"approve", NULL, &how[PARK_APPROVE]},
                             {"reject", NULL, &how[PARK_REJECT]},
                             {"args", &args, NULL},
                             {"tier", &tier, NULL},
                             {"output", &output, NULL},
                             {"by", &by, NULL},
                             {"note", &note, NULL},
                             {"all-matching", NULL, &all},
                             {"reason", &reason, NULL},
                             {"job", &job, NULL},
                             {"json", NULL, &json},
                             {NULL, NULL, NULL}};
    struct park_decision d = {0};
    struct q_park_filter f = {0};
    const char *pos[1];
    char *text = NULL, *args_text = NULL;
    long long id = 0;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, pos, 1, &npos, usage)) != 0 ||
        (rc = pick_resolution(how, &d.how)) != 0 ||
        (rc = pick_items(all, npos, pos, reason, job, tier, &id, &f)) != 0)
        return rc;
    d.tier = all ? NULL : tier;
    d.output = output != NULL ? "" : NULL; /* the rules first, then read */
    d.by = by ? by : cli_login_name();
    d.note = note;
    d.lift_wall = lift;
    d.args = args != NULL ? "{}" : NULL; /* the rules first, then read */
    if ((rc = check_decision(env, &d, all,
                             all && d.how == PARK_RETRY ? tier : NULL)) != 0)
        return rc;
    if ((output == NULL || ((rc = read_output(output, false, &d, &text)) == 0 &&
                            (rc = check_decision(env, &d, all, NULL)) == 0)) &&
        (args == NULL || (rc = read_output(args, true, &d, &args_text)) == 0))
        rc = resolve_in_store(env, &d, all, id, &f, not_before, json);
    free(text);
    free(args_text);
    return rc;
}

int
cmd_park(struct cli_env *env, int argc, char **argv)
{
    static const struct cli_sub subs[] = {{"list", list_cmd},
                                          {"show", show_cmd},
                                          {"resolve", resolve_cmd},
                                          {NULL, NULL}};

    return cli_subcommand(env, argc, argv, subs, usage);
}

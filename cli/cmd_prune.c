/* cmd_prune.c: stepq prune — a one-off of the retention (q_prune): the
 * finished jobs older than a span, with their rows, or what the config's
 * retention names, in steps of PRUNE_STEP jobs so that workers are not
 * held up. */
#include "cli/cli.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "queue/admin.h"
#include "queue/queue.h"

#define DAY_MS     (24LL * 3600 * 1000)
#define PRUNE_STEP 5000

static const char usage[] =
    "usage: stepq prune [--older-than SPAN|TIME] [--dry-run] [--json]\n"
    "\n"
    "Removes finished jobs (succeeded, failed, cancelled) last changed\n"
    "before a time, with their steps, attempts and park items; tier events\n"
    "as old; and budget windows written before then that have ended. A job\n"
    "with an open park item is never removed, nor one that is not finished.\n"
    "Without --older-than, the config's \"retention\" says what goes (and\n"
    "attempt_bodies_days drops older bodies). --dry-run counts and changes\n"
    "nothing. Runs in steps of 5000 jobs while workers go on.\n"
    "  --older-than SPAN|TIME  a span back from now (90m, 24h, 30d) or an\n"
    "                          RFC 3339 time\n"
    "--json prints {\"pruned\": {\"jobs\": N, ...}, \"dry_run\": B, ...}.\n";

static void
add_counts(struct q_prune_counts *sum, const struct q_prune_counts *c)
{
    sum->jobs += c->jobs;
    sum->steps += c->steps;
    sum->attempts += c->attempts;
    sum->park += c->park;
    sum->bodies += c->bodies;
    sum->tier_events += c->tier_events;
    sum->budgets += c->budgets;
}

static void
print_result(const struct q_prune_counts *c, const struct q_prune *p, bool json)
{
    static const char *const names[7] = {"jobs",   "steps",  "attempts",
                                         "park",   "bodies", "tier_events",
                                         "budgets"};
    const int64_t v[7] = {c->jobs,   c->steps,       c->attempts, c->park,
                          c->bodies, c->tier_events, c->budgets};
    char when[64];

    if (json) {
        cJSON *o = cJSON_CreateObject(),
              *n = cJSON_AddObjectToObject(o, "pruned");
        for (size_t i = 0; i < STEPQ_ARRAY_LEN(v); i++)
            cJSON_AddNumberToObject(n, names[i], (double)v[i]);
        cJSON_AddBoolToObject(o, "dry_run", p->dry_run);
        if (p->jobs_before > 0)
            cJSON_AddStringToObject(
                o, "jobs_before",
                clock_format_utc(p->jobs_before, when, sizeof(when)));
        else
            cJSON_AddNullToObject(o, "jobs_before");
        cli_print_json(o);
        return;
    }
    printf("%s", p->dry_run ? "would prune" : "pruned");
    if (p->jobs_before > 0)
        printf(" (finished before %s)",
               clock_format_utc(p->jobs_before, when, sizeof(when)));
    printf("\n");
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(v); i++)
        printf("  %-11s %lld\n", names[i], (long long)v[i]);
}

/* What to prune at now: --older-than, else the config's retention. 0 or
 * an exit code after printing. */
static int
plan(struct cli_env *env, const char *older, int64_t now, struct q_prune *p)
{
    const struct config *cfg = NULL;
    int64_t before = 0;
    int rc;

    if (older != NULL) {
        if (clock_parse_since(older, now, &before) != 0 || before <= 0 ||
            before > now) {
            cli_error("prune: --older-than %s is not a span (90m, 24h, 30d) "
                      "or an RFC 3339 time in the past",
                      older);
            return CLI_USAGE;
        }
        /* 0s: everything finished before now (an age of 0 keeps all). */
        q_prune_plan(now > before ? now - before : 1, 0, now, p);
        return 0;
    }
    if ((rc = cli_config(env, &cfg)) != 0)
        return rc;
    if (cfg->retention.finished_jobs_days == 0 &&
        cfg->retention.attempt_bodies_days == 0) {
        cli_error("prune: how old? give --older-than SPAN, or set "
                  "\"retention\" in the config");
        return CLI_USAGE;
    }
    q_prune_plan(cfg->retention.finished_jobs_days * DAY_MS,
                 cfg->retention.attempt_bodies_days * DAY_MS, now, p);
    return 0;
}

int
cmd_prune(struct cli_env *env, int argc, char **argv)
{
    bool dry = false, json = false;
    const char *older = NULL;
    const struct cli_opt opts[] = {{"older-than", &older, NULL},
                                   {"dry-run", NULL, &dry},
                                   {"json", NULL, &json},
                                   {NULL, NULL, NULL}};
    struct q_prune p;
    struct q_prune_counts sum = {0}, c;
    q_db *db = NULL;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0)
        return rc;
    if ((rc = cli_open_db(env, &db)) != 0)
        return rc;
    if ((rc = plan(env, older, cli_now(db), &p)) != 0)
        goto out;
    p.dry_run = dry;
    p.limit = PRUNE_STEP;
    do {
        if ((rc = q_prune(db, &p, &c)) != 0) {
            cli_error("prune: the database failed (%s); what was pruned "
                      "before stays pruned",
                      strerror(-rc));
            rc = CLI_RUNTIME;
            goto out;
        }
        add_counts(&sum, &c);
        if (c.bodies_job > 0)
            p.bodies_from_job = c.bodies_job;
    } while (!dry && (c.jobs == PRUNE_STEP || c.bodies == PRUNE_STEP));
    print_result(&sum, &p, json);
out:
    q_close(db);
    return rc;
}

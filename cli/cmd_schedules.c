/* cmd_schedules.c: stepq schedules — the config's schedules with their
 * state; pause, resume, and run one now. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "queue/queue.h"
#include "queue/sched.h"
#include "sched/sched.h"
#include "view/view.h"

static const char usage[] =
    "usage: stepq schedules [--json]\n"
    "       stepq schedules pause NAME\n"
    "       stepq schedules resume NAME\n"
    "       stepq schedules run NAME [--json]\n"
    "\n"
    "The schedules of the config (\"schedules\"): each one's cron\n"
    "expression and zone, whether it is paused, its next slot, the last\n"
    "slot fired and the state of that job. Every `stepq work` fires the\n"
    "due slots, each one once across every worker.\n"
    "\n"
    "  pause NAME    fire none of its slots until resumed (kept in the\n"
    "                database, for every worker)\n"
    "  resume NAME   fire again from now on (slots passed while it was\n"
    "                paused are not caught up)\n"
    "  run NAME      enqueue its job now, once, as a slot of this second\n";

#define NCOLS 7

static const char *const heads[NCOLS] = {
    "SCHEDULE", "CRON", "ZONE", "PAUSED", "NEXT SLOT", "LAST SLOT", "LAST JOB"};

/* The cells of schedule s in the table: borrowed from s, but for the last
 * job's, which is written to job (len bytes). */
static void
cells(const cJSON *s, const char *cell[NCOLS], char *job, size_t len)
{
    const cJSON *j = cJSON_GetObjectItem(s, "last_job");

    snprintf(job, len, "-");
    if (cJSON_IsObject(j))
        snprintf(job, len, "%lld %s",
                 (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "id")),
                 cli_json_text(j, "state"));
    cell[0] = cli_json_text(s, "name");
    cell[1] = cli_json_text(s, "cron");
    cell[2] = cli_json_text(s, "tz");
    cell[3] = cJSON_IsTrue(cJSON_GetObjectItem(s, "paused")) ? "yes" : "no";
    cell[4] = cli_json_text(s, "next_slot");
    cell[5] = cli_json_text(s, "last_slot");
    cell[6] = job;
}

static int
list(struct cli_env *env, int argc, char **argv)
{
    bool json = false;
    struct cli_opt opts[] = {{"json", NULL, &json}, {NULL, NULL, NULL}};
    const struct config *cfg = NULL;
    cJSON *arr = NULL;
    const cJSON *s;
    const char *cell[NCOLS];
    char job[64];
    struct cli_table t;
    q_db *db = NULL;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0)
        return rc;
    if ((rc = cli_config(env, &cfg)) != 0 || (rc = cli_open_db(env, &db)) != 0)
        return rc;
    rc = view_schedules(db, cfg, cli_now(db), &arr);
    q_close(db);
    if (rc != 0) {
        cli_error("schedules: cannot read their state");
        return CLI_RUNTIME;
    }
    if (json) {
        cli_print_json(arr);
        return CLI_OK;
    }
    /* The columns are as wide as their widest cell: a zone such as
     * America/Argentina/Buenos_Aires does not fit a fixed width. */
    cli_table_init(&t, NCOLS, heads, "lllllll");
    cJSON_ArrayForEach(s, arr)
    {
        cells(s, cell, job, sizeof(job));
        cli_table_add(&t, cell);
    }
    cli_table_print(&t);
    cli_table_cleanup(&t);
    if (cJSON_GetArraySize(arr) == 0)
        printf("(the config has no schedules)\n");
    cJSON_Delete(arr);
    return CLI_OK;
}

/* The schedule NAME of argv (after the subcommand), or exit 3. */
static int
named(struct cli_env *env, int argc, char **argv, bool *json,
      const struct config **cfg, const struct config_schedule **s)
{
    struct cli_opt opts[] = {{"json", NULL, json}, {NULL, NULL, NULL}};
    const char *pos[1] = {NULL};
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, pos, 1, &npos, usage)) != 0)
        return rc;
    if (npos != 1) {
        cli_error("schedules %s: which schedule? (NAME)", argv[0]);
        return CLI_USAGE;
    }
    if ((rc = cli_config(env, cfg)) != 0)
        return rc;
    if ((*s = config_find_schedule(*cfg, pos[0])) == NULL) {
        cli_error("schedules: no schedule %s in the config", pos[0]);
        return CLI_NOTFOUND;
    }
    return 0;
}

static int
pause_or_resume(struct cli_env *env, int argc, char **argv, bool paused)
{
    const struct config *cfg = NULL;
    const struct config_schedule *s = NULL;
    bool json = false;
    q_db *db = NULL;
    int rc;

    if ((rc = named(env, argc, argv, &json, &cfg, &s)) != 0 ||
        (rc = cli_open_db(env, &db)) != 0)
        return rc;
    if ((rc = q_tx_begin(db)) == 0)
        rc = cli_audited(db, q_sched_pause(db, s->name, paused, cli_now(db)),
                         paused ? "schedule.pause" : "schedule.resume", 0,
                         s->name);
    q_close(db);
    if (rc != 0) {
        cli_error("schedules: cannot %s %s", paused ? "pause" : "resume",
                  s->name);
        return cli_exit_code(rc);
    }
    printf("schedule %s %s\n", s->name, paused ? "paused" : "resumed");
    return CLI_OK;
}

static int
sched_pause(struct cli_env *env, int argc, char **argv)
{
    return pause_or_resume(env, argc, argv, true);
}

static int
sched_resume(struct cli_env *env, int argc, char **argv)
{
    return pause_or_resume(env, argc, argv, false);
}

static int
sched_run(struct cli_env *env, int argc, char **argv)
{
    const struct config *cfg = NULL;
    const struct config_schedule *s = NULL;
    bool json = false, dup = false;
    char err[1024];
    int64_t id = 0, now;
    q_db *db = NULL;
    int rc;

    if ((rc = named(env, argc, argv, &json, &cfg, &s)) != 0 ||
        (rc = cli_open_db(env, &db)) != 0)
        return rc;
    now = cli_now(db);
    if ((rc = q_tx_begin(db)) == 0) {
        rc = sched_enqueue(db, cfg, s, now / 1000 * 1000, now, &id, &dup, err,
                           sizeof(err));
        rc = cli_audited(db, rc, "schedule.run", rc == 0 ? id : 0, s->name);
    }
    q_close(db);
    if (rc == -EINVAL) {
        cli_error("schedules run %s: its job: %s", s->name, err);
        return CLI_USAGE;
    }
    if (rc != 0) {
        cli_error("schedules run %s: cannot enqueue", s->name);
        return CLI_RUNTIME;
    }
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", (double)id);
        cJSON_AddBoolToObject(o, "duplicate", dup);
        cli_print_json(o);
    } else {
        printf("%lld%s\n", (long long)id, dup ? " (already enqueued)" : "");
    }
    return CLI_OK;
}

int
cmd_schedules(struct cli_env *env, int argc, char **argv)
{
    static const struct cli_sub subs[] = {{"pause", sched_pause},
                                          {"resume", sched_resume},
                                          {"run", sched_run},
                                          {NULL, NULL}};

    if (argc >= 2 && argv[1][0] != '-')
        return cli_subcommand(env, argc, argv, subs, usage);
    return list(env, argc, argv);
}

/* cmd_copy.c: stepq copy FROM TO — take a whole queue (jobs, steps,
 * attempts, park items, tier state and events, schedule state) from one
 * store to another, say from a SQLite file to PostgreSQL and back, ids
 * kept. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "cli/cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/location.h"
#include "queue/admin.h"
#include "queue/queue.h"

static const char usage[] =
    "usage: stepq copy FROM TO [--force] [--json]\n"
    "\n"
    "Copies every job, step, attempt, park item, tier state and event and\n"
    "schedule state of the database FROM into the database TO (created and\n"
    "migrated as `stepq init` would), ids kept, in one transaction of TO:\n"
    "a copy that fails leaves TO as it was. FROM and TO are locations as\n"
    "for --db (a path, sqlite:PATH or a postgresql:// URL). TO must hold\n"
    "none of these; --force replaces what it holds. Stop the workers on\n"
    "FROM first.\n"
    "--json prints {\"copied\": {...}, \"from\": ..., \"to\": ...}.\n";

/* A location as messages show it: any password masked. */
struct shown {
    char from[512], to[512];
};

static void
print_result(const struct q_copy_counts *c, const struct shown *sh, bool json)
{
    static const char *const names[13] = {
        "jobs",      "steps",       "attempts",   "park",        "tiers",
        "schedules", "tier_events", "budgets",    "job_retries", "operators",
        "audit",     "batches",     "batch_items"};
    const int64_t v[13] = {
        c->jobs,      c->steps,       c->attempts,   c->park,    c->tiers,
        c->schedules, c->tier_events, c->budgets,    c->retries, c->operators,
        c->audit,     c->batches,     c->batch_items};

    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON *copied = cJSON_AddObjectToObject(root, "copied");
        for (size_t i = 0; i < STEPQ_ARRAY_LEN(v); i++)
            cJSON_AddNumberToObject(copied, names[i], (double)v[i]);
        cJSON_AddStringToObject(root, "from", sh->from);
        cJSON_AddStringToObject(root, "to", sh->to);
        cli_print_json(root);
        return;
    }
    printf("copied %s to %s\n", sh->from, sh->to);
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(v); i++)
        printf("  %-11s %lld\n", names[i], (long long)v[i]);
}

/* open_both opens FROM (only an existing store: no database there is
 * exit 3) and TO (created and migrated). Prints and returns the exit code
 * on failure. */
static int
open_both(const char *from, const char *to, const struct shown *sh, q_db **src,
          q_db **dst)
{
    int rc;

    if ((rc = q_open_existing(from, NULL, src)) != 0) {
        if (rc != -ENOENT)
            return cli_open_failed(sh->from, rc);
        cli_error("copy: no stepq database at %s to copy from", sh->from);
        return CLI_NOTFOUND;
    }
    if ((rc = q_open(to, NULL, dst)) != 0) {
        if (rc != -EIO)
            return cli_open_failed(sh->to, rc);
        cli_error("copy: cannot create or migrate database %s", sh->to);
        return CLI_RUNTIME;
    }
    return 0;
}

/* file_of is the file a path location names (without "sqlite:"). */
static const char *
file_of(const char *loc)
{
    static const char pre[] = "sqlite:";

    return strncmp(loc, pre, sizeof(pre) - 1) == 0 ? loc + sizeof(pre) - 1
                                                   : loc;
}

/* Two spellings of one PostgreSQL database are not caught here; the copy
 * then fails on its own locks, changing nothing. */
bool
cli_same_store(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];

    if (strcmp(a, b) == 0)
        return true;
    if (!location_is_path(a) || !location_is_path(b))
        return false;
    if (strcmp(file_of(a), file_of(b)) == 0)
        return true;
    return realpath(file_of(a), ra) != NULL &&
           realpath(file_of(b), rb) != NULL && strcmp(ra, rb) == 0;
}

int
cmd_copy(struct cli_env *env, int argc, char **argv)
{
    bool force = false, json = false;
    const struct cli_opt opts[] = {
        {"force", NULL, &force}, {"json", NULL, &json}, {NULL, NULL, NULL}};
    const char *pos[2] = {NULL, NULL};
    struct q_copy_counts counts = {0};
    struct shown sh;
    q_db *src = NULL, *dst = NULL;
    int npos = 0, rc;

    (void)env;
    if ((rc = cli_parse_args(argc, argv, opts, pos, 2, &npos, usage)) != 0)
        return rc;
    if (npos != 2) {
        cli_error("copy: from where to where? (stepq copy FROM TO)");
        return CLI_USAGE;
    }
    q_location_redact(pos[0], sh.from, sizeof(sh.from));
    q_location_redact(pos[1], sh.to, sizeof(sh.to));
    if (cli_same_store(pos[0], pos[1])) {
        cli_error("copy: FROM and TO are the same database (%s)", sh.from);
        return CLI_USAGE;
    }
    if ((rc = open_both(pos[0], pos[1], &sh, &src, &dst)) != 0)
        goto out;
    rc = q_copy(src, dst, force, &counts);
    if (rc == -EEXIST) {
        cli_error("copy: %s already holds jobs, park items, tier or "
                  "schedule state; nothing was copied (--force replaces them)",
                  sh.to);
        rc = CLI_CONFLICT;
    } else if (rc == -EAGAIN) {
        cli_error("copy: %s or %s stayed locked by another process (stop "
                  "the workers first; are they the same database?); %s is "
                  "unchanged",
                  sh.from, sh.to, sh.to);
        rc = CLI_RUNTIME;
    } else if (rc != 0) {
        cli_error("copy: copying %s to %s failed (%s); %s is unchanged",
                  sh.from, sh.to, strerror(-rc), sh.to);
        rc = CLI_RUNTIME;
    } else {
        print_result(&counts, &sh, json);
    }
out:
    q_close(dst);
    q_close(src);
    return rc;
}

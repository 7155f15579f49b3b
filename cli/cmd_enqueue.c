/* cmd_enqueue.c: stepq enqueue — validate jobs, then write them all in one
 * transaction, or none. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "queue/queue.h"
#include "spec/spec.h"
#include "view/view.h"

/* A bulk file may hold many jobs; each job is still capped on its own. */
#define INPUT_MAX_BYTES ((size_t)1 << 30)

static const char usage[] =
    "usage: stepq enqueue [FILE|-] [--key K] [--run-at T] [--priority N]\n"
    "                     [--json]\n"
    "\n"
    "Reads one job, a JSON array of jobs, or JSON lines (one job per line)\n"
    "from FILE or standard input. Every job is validated before anything is\n"
    "written; then all are written in one transaction. Prints each job's id\n"
    "(--json: {\"id\":N,\"duplicate\":false}, an array for several jobs). A\n"
    "job whose key exists is not added again: its id is printed with\n"
    "duplicate true, exit 0.\n"
    "\n"
    "  --key K        dedupe key (one job only)\n"
    "  --run-at T     not before T (RFC 3339, e.g. 2026-11-30T03:40:00Z)\n"
    "  --priority N   higher runs first (default 0)\n"
    "  --json         print JSON\n";

static int
parse_overrides(const char *key, const char *run_at, const char *prio,
                struct q_enqueue_opts *o)
{
    if (key != NULL) {
        if (key[0] == '\0') {
            cli_error("enqueue: --key must not be empty");
            return CLI_USAGE;
        }
        if (spec_key_reserved(key)) {
            cli_error(
                "enqueue: --key: keys starting with " SPEC_SCHEDULE_KEY_PREFIX
                " are the schedules' own");
            return CLI_USAGE;
        }
        o->key = key;
    }
    if (run_at != NULL) {
        if (clock_parse_utc(run_at, &o->run_at) != 0) {
            cli_error("enqueue: --run-at %s is not an RFC 3339 time such as "
                      "2026-11-30T03:40:00Z",
                      run_at);
            return CLI_USAGE;
        }
        o->has_run_at = true;
    }
    if (prio != NULL) {
        char *end;
        errno = 0;
        o->priority = strtoll(prio, &end, 10);
        if (errno != 0 || end == prio || *end != '\0' ||
            o->priority < -1000000 || o->priority > 1000000) {
            cli_error("enqueue: --priority must be a whole number between "
                      "-1000000 and 1000000, not %s",
                      prio);
            return CLI_USAGE;
        }
        o->has_priority = true;
    }
    return 0;
}

static void
print_results(const struct q_enqueue_result *res, size_t n, bool many,
              bool json)
{
    if (json) {
        cli_print_json(view_enqueued(res, n, many));
        return;
    }
    for (size_t i = 0; i < n; i++)
        printf("%lld\n", (long long)res[i].id);
}

int
cmd_enqueue(struct cli_env *env, int argc, char **argv)
{
    const char *key = NULL, *run_at = NULL, *prio = NULL, *file = "-";
    const char *path = NULL;
    bool json = false, many = false;
    struct cli_opt opts[] = {{"key", &key, NULL},
                             {"run-at", &run_at, NULL},
                             {"priority", &prio, NULL},
                             {"json", NULL, &json},
                             {NULL, NULL, NULL}};
    struct q_enqueue_opts over = {0};
    struct spec_opts vopts = {0};
    const struct config *cfg = NULL;
    struct spec_job **jobs = NULL;
    struct q_enqueue_result *res = NULL;
    struct q_job_new *rows = NULL;
    const char **tier_names = NULL;
    char *text = NULL, err[1024];
    const char *pos[1];
    size_t len = 0, n = 0;
    q_db *db = NULL;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, pos, 1, &npos, usage)) != 0)
        return rc;
    if (npos == 1)
        file = pos[0];
    if ((rc = parse_overrides(key, run_at, prio, &over)) != 0)
        return rc;
    if ((rc = cli_config(env, &cfg)) != 0)
        return rc;
    rc = file_read_all(file, INPUT_MAX_BYTES, &text, &len);
    if (rc != 0) {
        cli_error("enqueue: %s: %s", strcmp(file, "-") ? file : "stdin",
                  rc == -ENOENT  ? "no such file"
                  : rc == -E2BIG ? "input larger than 1 GiB"
                                 : "cannot read");
        return rc == -EIO ? CLI_RUNTIME : CLI_USAGE;
    }
    /* Tier names are checked only when the config names tiers. */
    if (cfg->ntiers > 0) {
        tier_names = xcalloc(cfg->ntiers, sizeof(*tier_names));
        for (size_t i = 0; i < cfg->ntiers; i++)
            tier_names[i] = cfg->tiers[i].name;
        vopts.tiers = tier_names;
        vopts.ntiers = cfg->ntiers;
    }
    rc = spec_parse_many(text, len, &vopts, &jobs, &n, err, sizeof(err));
    many = text[strspn(text, " \t\r\n")] == '[';
    free(text);
    if (rc != 0) {
        cli_error("enqueue: %s: %s", strcmp(file, "-") ? file : "stdin", err);
        rc = CLI_USAGE;
        goto out;
    }
    if (over.key != NULL && n > 1) {
        cli_error("enqueue: --key applies to a single job, the input has %zu",
                  n);
        rc = CLI_USAGE;
        goto out;
    }
    if ((rc = cli_open_db(env, &db)) != 0 ||
        (rc = cli_db_path(env, &path)) != 0)
        goto out;
    res = xcalloc(n, sizeof(*res));
    rows = spec_job_rows(jobs, n);
    rc = q_enqueue(db, rows, n, &over, cli_now(db), res);
    if (rc != 0) {
        char where[CLI_WHERE_MAX];

        cli_error("enqueue: cannot write to %s; nothing was enqueued",
                  q_location_redact(path, where, sizeof(where)));
        rc = CLI_RUNTIME;
        goto out;
    }
    print_results(res, n, many || n > 1, json);
    rc = CLI_OK;
out:
    if (q_close(db) != 0 && rc == CLI_OK)
        rc = CLI_RUNTIME;
    free(res);
    free(rows);
    free(tier_names);
    spec_jobs_free(jobs, n);
    return rc;
}

/* cmd_work.c: stepq work — run jobs until stopped (or drained). */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "queue/queue.h"
#include "view/view.h"
#include "worker/worker.h"

static const char usage[] =
    "usage: stepq work [--concurrency N] [--drain] [--worker-id ID]\n"
    "                  [--grace S]\n"
    "\n"
    "Claims due jobs (up to N at once; default: the config's worker\n"
    "concurrency) and runs their steps. Logs one JSON line per attempt on\n"
    "stderr. SIGINT/SIGTERM: stop claiming, let requests in flight finish\n"
    "for up to --grace seconds (default 10), give the rest back, exit 0.\n"
    "\n"
    "  --concurrency N jobs at once, 1 to 100,000 (default: the config's)\n"
    "  --drain         exit 0 when no job runs and none is due in 60 s\n"
    "  --worker-id ID  the lease owner name (default HOST:PID)\n"
    "  --grace S       seconds in-flight requests may finish after a\n"
    "                  signal, 1 to 86,400 (default 10)\n";

static int
parse_positive(const char *what, const char *s, long max, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1 || v > max) {
        cli_error("work: %s must be a whole number from 1 to %ld, not %s", what,
                  max, s);
        return CLI_USAGE;
    }
    *out = v;
    return 0;
}

int
cmd_work(struct cli_env *env, int argc, char **argv)
{
    const char *conc = NULL, *id = NULL, *grace = NULL, *path = NULL;
    bool drain = false;
    struct cli_opt opts[] = {{"concurrency", &conc, NULL},
                             {"drain", NULL, &drain},
                             {"worker-id", &id, NULL},
                             {"grace", &grace, NULL},
                             {NULL, NULL, NULL}};
    struct worker_opts wo = {0};
    const struct config *cfg = NULL;
    q_db *db = NULL;
    long n = 0;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0)
        return rc;
    if (conc != NULL &&
        (rc = parse_positive("--concurrency", conc, 100000, &n)) != 0)
        return rc;
    wo.concurrency = (int)n;
    if (grace != NULL) {
        if ((rc = parse_positive("--grace", grace, 86400, &n)) != 0)
            return rc;
        wo.grace_ms = (int64_t)n * 1000;
    }
    if (id != NULL && id[0] == '\0') {
        cli_error("work: --worker-id must not be empty");
        return CLI_USAGE;
    }
    if ((rc = cli_config(env, &cfg)) != 0 || (rc = cli_open_db(env, &db)) != 0)
        return rc;
    /* The worker opens its own connection, and it too refuses a path with
     * no current stepq database; the check above is what names the
     * problem for the user. */
    if (q_close(db) != 0 || (rc = cli_db_path(env, &path)) != 0)
        return rc != 0 ? rc : CLI_RUNTIME;
    wo.db_path = path;
    wo.cfg = cfg;
    wo.drain = drain;
    wo.worker_id = id;
    wo.progress = isatty(2);
    wo.report = view_report; /* the on_report hook's report */
    wo.job = view_job;       /* the on_done and on_fail hooks' job */
    xalloc_keep_freed();
    rc = worker_run(&wo);
    if (rc == -EINVAL) {
        cli_error("work: the config is not valid (see above)");
        return CLI_USAGE;
    }
    if (rc != 0) {
        char where[CLI_WHERE_MAX];

        cli_error("work: cannot run on %s",
                  q_location_redact(path, where, sizeof(where)));
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

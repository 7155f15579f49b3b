/* main.c: global options and dispatch to the cmd_<name>.c commands. */
#include "cli/cli.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef STEPQ_MIMALLOC
#include <mimalloc.h>
#endif

#include "common/log.h"
#include "common/xalloc.h"

static const char usage[] =
    "usage: stepq [--db PATH] [--config PATH] [-v] COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  init                          create or migrate the database\n"
    "  enqueue [FILE...|-]           add jobs (one, an array, or a series)\n"
    "  check [FILE|-]                check jobs before paying: nothing sent\n"
    "  work                          run jobs (--drain: until none is due)\n"
    "  jobs list|show|cancel|retry|wait  inspect, retry, wait for jobs\n"
    "  status                        job counts by state\n"
    "  tiers [--check]               each tier's shared state, or try each\n"
    "  schedules                     the config's schedules and their state\n"
    "  schedules pause|resume|run    pause or resume one, or run it now\n"
    "  report [--since 24h]          what happened since a time\n"
    "  park list|show|resolve        review and resolve parked steps\n"
    "  policy check CASES.json       run a case table through the policy\n"
    "  mock                          local OpenAI-compatible test endpoint\n"
    "  demo                          self-contained tour against mock tiers\n"
    "  copy FROM TO                  copy a whole queue to another database\n"
    "  backup DEST                   a consistent copy while workers run\n"
    "  prune [--older-than 30d]      remove old finished jobs\n"
    "  serve [--listen HOST:PORT]    the HTTP API over the database\n"
    "  operators add|list|remove|rotate  who may use serve, as what\n"
    "  audit [--since 24h]           every write: who, what, from where\n"
    "\n"
    "Global options go before or after the command. The database is --db,\n"
    "else $STEPQ_DB, else the config's \"db\", else ./stepq.db; the config\n"
    "is --config, else $STEPQ_CONFIG, else ./stepq.json. -v raises the log\n"
    "level (also $STEPQ_LOG=error|warn|info|debug).\n"
    "Run 'stepq COMMAND --help' for a command's options.\n";

static const struct cli_command commands[] = {
    {"init", cmd_init},           {"enqueue", cmd_enqueue},
    {"jobs", cmd_jobs},           {"status", cmd_status},
    {"policy", cmd_policy},       {"mock", cmd_mock},
    {"tiers", cmd_tiers},         {"work", cmd_work},
    {"demo", cmd_demo},           {"park", cmd_park},
    {"copy", cmd_copy},           {"serve", cmd_serve},
    {"schedules", cmd_schedules}, {"report", cmd_report},
    {"backup", cmd_backup},       {"prune", cmd_prune},
    {"operators", cmd_operators}, {"audit", cmd_audit},
    {"check", cmd_check},
};

/* take_global removes --db/--config/-v wherever they stand, so that
 * "stepq --db q.db park list" and "stepq park list --db q.db" agree.
 * Returns 0, or CLI_USAGE when a value is missing. */
static int
take_global(int *argc, char **argv, struct cli_env *env, int *verbose)
{
    int out = 1;

    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        size_t n = 0;

        if (strcmp(a, "--") == 0) {
            while (i < *argc)
                argv[out++] = argv[i++];
            break;
        }
        if (strncmp(a, "--db", 4) == 0 && (a[4] == '\0' || a[4] == '=')) {
            slot = &env->db_opt;
            n = 4;
        } else if (strncmp(a, "--config", 8) == 0 &&
                   (a[8] == '\0' || a[8] == '=')) {
            slot = &env->config_opt;
            n = 8;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            (*verbose)++;
            continue;
        } else if (strcmp(a, "-vv") == 0) {
            *verbose += 2;
            continue;
        }
        if (slot == NULL) {
            argv[out++] = argv[i];
            continue;
        }
        if (a[n] == '=') {
            *slot = a + n + 1;
        } else if (i + 1 < *argc) {
            *slot = argv[++i];
        } else {
            cli_error("%s needs a value", a);
            return CLI_USAGE;
        }
    }
    *argc = out;
    argv[out] = NULL;
    return 0;
}

/* print_allocator names the allocator that serves malloc in this process:
 * mimalloc when the build links it and a block from calloc lies in its
 * heap, else the C library's. It asks the heap, not the build, so a link
 * that lost the override (or a preloaded allocator) shows as "other". */
static void
print_allocator(void)
{
#ifdef STEPQ_MIMALLOC
    void *p = calloc(1, 64);
    bool ours = p != NULL && mi_is_in_heap_region(p);
    int v = mi_version();

    free(p);
    printf(ours ? "allocator: mimalloc %d.%d.%d\n"
                : "allocator: other (mimalloc %d.%d.%d linked, not in use)\n",
           v / 100, v / 10 % 10, v % 10);
#else
    printf("allocator: libc\n");
#endif
}

/* Output that could not be written (a full disk, /dev/full, an I/O
 * error) fails the command, whatever it did: a script must not take a
 * lost job id or a lost listing for success. A reader that went away
 * ends stepq with SIGPIPE first, as it ends other tools. */
static int
output_written(int rc)
{
    int err = fflush(stdout) != 0 ? errno : ferror(stdout) ? EIO : 0;

    if (err == 0)
        return rc;
    cli_error("cannot write the output: %s", strerror(err));
    return rc == CLI_OK ? CLI_RUNTIME : rc;
}

int
main(int argc, char **argv)
{
    struct cli_env env = {0};
    const char *lvl = getenv("STEPQ_LOG");
    enum log_level level = LOG_LEVEL_WARN;
    int verbose = 0, rc;

    if (lvl != NULL && log_level_from_name(lvl, &level) != 0) {
        cli_error("STEPQ_LOG must be error, warn, info or debug, not %s", lvl);
        return CLI_USAGE;
    }
    if ((rc = take_global(&argc, argv, &env, &verbose)) != 0)
        return rc;
    level += verbose;
    log_set_level(level > LOG_LEVEL_DEBUG ? LOG_LEVEL_DEBUG : level);
    if ((rc = cli_usage_asked(argc, argv, usage)) != 0)
        return output_written(rc == CLI_HELP ? CLI_OK : rc);
    if (strcmp(argv[1], "--version") == 0) {
        printf("stepq %s\n", STEPQ_VERSION);
        print_allocator();
        return output_written(CLI_OK);
    }
    rc = cli_dispatch(&env, commands, STEPQ_ARRAY_LEN(commands), argc, argv);
    config_free(env.cfg);
    return output_written(rc);
}

/* dispatch.c: runs one top-level command and turns what it returns into
 * the process exit code (see cli_dispatch in cli.h). Kept apart from
 * main.c so that the mapping is tested on its own (tests/test_cli.c). */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

int
cli_dispatch(struct cli_env *env, const struct cli_command *cmds, size_t n,
             int argc, char **argv)
{
    int rc;

    if (argc < 2)
        return CLI_USAGE;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(argv[1], cmds[i].name) != 0)
            continue;
        rc = cmds[i].fn(env, argc - 1, argv + 1);
        if (rc == CLI_HELP)
            return CLI_OK;
        if (rc < 0) {
            /* A command is meant to print its failure and return an exit
             * code; a raw -errno got past it. Never report it as success. */
            fprintf(stderr, "stepq: %s: %s\n", cmds[i].name, strerror(-rc));
            return CLI_RUNTIME;
        }
        return rc;
    }
    fprintf(stderr, "stepq: unknown command '%s' (try 'stepq --help')\n",
            argv[1]);
    return CLI_USAGE;
}

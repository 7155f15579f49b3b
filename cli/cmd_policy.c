/* cmd_policy.c: placeholder until the policy command lands. */
#include "cli/cli.h"

int
cmd_policy(struct cli_env *env, int argc, char **argv)
{
    (void)env;
    (void)argc;
    cli_error("%s: not implemented yet", argv[0]);
    return CLI_RUNTIME;
}

/* cmd_init.c: stepq init — create or migrate the database. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>

#include "queue/queue.h"

static const char usage[] =
    "usage: stepq init [--db PATH]\n"
    "\n"
    "Creates the database (mode 0600, WAL) or migrates an older one to the\n"
    "current schema, and says so. Running it again changes nothing. It is\n"
    "the only command that creates or migrates: the others, given a path\n"
    "with no stepq database (or an older one), say so and exit 1.\n";

int
cmd_init(struct cli_env *env, int argc, char **argv)
{
    const char *path = NULL;
    char where[CLI_WHERE_MAX];
    q_db *db = NULL;
    int npos = 0, rc, version = 0;
    bool older;

    if ((rc = cli_parse_args(argc, argv, NULL, NULL, 0, &npos, usage)) != 0)
        return rc;
    if ((rc = cli_db_path(env, &path)) != 0)
        return rc;
    /* An older schema is said so once migrated (an upgraded package's
     * first `stepq init`). */
    rc = q_open_existing(path, NULL, &db);
    older = rc == -ESTALE;
    q_close(db);
    db = NULL;
    /* The only command that creates or migrates (cli_open_db does
     * neither). */
    if ((rc = q_open(path, NULL, &db)) != 0) {
        if (rc != -EIO)
            return cli_open_failed(path, rc);
        cli_error("cannot create or migrate database %s",
                  q_location_redact(path, where, sizeof(where)));
        return CLI_RUNTIME;
    }
    rc = q_db_version(db, &version);
    q_close(db);
    if (rc != 0)
        return CLI_RUNTIME;
    printf("database %s %s (schema version %d)\n",
           q_location_redact(path, where, sizeof(where)),
           older ? "migrated from an older schema" : "ready", version);
    return CLI_OK;
}

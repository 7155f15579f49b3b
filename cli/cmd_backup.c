/* cmd_backup.c: stepq backup DEST — a consistent copy of the database,
 * taken while workers run (q_backup), into a new SQLite file. */
#include "cli/cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "queue/admin.h"
#include "queue/queue.h"

static const char usage[] =
    "usage: stepq backup DEST [--force] [--json]\n"
    "\n"
    "Writes a consistent copy of the database, as it was at one moment, to\n"
    "the new SQLite file DEST (mode 0600) while workers go on: written to\n"
    "DEST.tmp, flushed to disk, then renamed. A SQLite database is copied\n"
    "in one read (VACUUM INTO), which holds up no worker; a PostgreSQL\n"
    "database is copied row by row into the SQLite file, as `stepq copy`\n"
    "does (pg_dump backs up the server itself). DEST must not exist:\n"
    "--force replaces it (and any DEST-wal and DEST-shm). To restore: stop\n"
    "the workers, copy DEST over the database file, run `stepq init`.\n"
    "--json prints {\"backup\": DEST, \"bytes\": N, \"ms\": N, \"method\": "
    "...}.\n";

static void
print_result(const char *dest, const struct q_backup_info *info, int64_t ms,
             bool json)
{
    const char *method = info->copied ? "copy" : "vacuum_into";

    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "backup", dest);
        cJSON_AddNumberToObject(o, "bytes", (double)info->bytes);
        cJSON_AddNumberToObject(o, "ms", (double)ms);
        cJSON_AddStringToObject(o, "method", method);
        cli_print_json(o);
        return;
    }
    printf("backup %s written: %lld bytes in %lld ms (%s)\n", dest,
           (long long)info->bytes, (long long)ms, method);
}

int
cmd_backup(struct cli_env *env, int argc, char **argv)
{
    bool force = false, json = false;
    const struct cli_opt opts[] = {
        {"force", NULL, &force}, {"json", NULL, &json}, {NULL, NULL, NULL}};
    const char *pos[1] = {NULL}, *path = NULL;
    struct q_backup_info info = {0};
    q_db *db = NULL;
    int npos = 0, rc;
    int64_t t0;

    if ((rc = cli_parse_args(argc, argv, opts, pos, 1, &npos, usage)) != 0)
        return rc;
    if (npos != 1 || pos[0][0] == '\0') {
        cli_error("backup: where to? (stepq backup DEST)");
        return CLI_USAGE;
    }
    if ((rc = cli_db_path(env, &path)) != 0)
        return rc;
    /* Renaming over the database would lose it under its workers. */
    if (cli_same_store(path, pos[0])) {
        cli_error("backup: %s is the database itself; give another file",
                  pos[0]);
        return CLI_USAGE;
    }
    if ((rc = cli_open_db(env, &db)) != 0)
        return rc;
    t0 = clock_mono_ms();
    rc = q_backup(db, pos[0], force, &info);
    q_close(db);
    if (rc == -EEXIST) {
        cli_error("backup: %s exists; nothing was written (--force "
                  "replaces it)",
                  pos[0]);
        return CLI_CONFLICT;
    }
    if (rc != 0) {
        cli_error("backup: writing %s failed (%s); nothing was written", pos[0],
                  strerror(-rc));
        return CLI_RUNTIME;
    }
    print_result(pos[0], &info, clock_mono_ms() - t0, json);
    return CLI_OK;
}

/* cmd_operators.c: stepq operators add|list|remove|rotate — the named
 * operators `stepq serve` accepts (park/park.h: roles, tokens). */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "park/park.h"
#include "queue/audit.h"
#include "queue/queue.h"

static const char usage[] =
    "usage: stepq operators add NAME --role viewer|resolver|admin [--json]\n"
    "       stepq operators list [--json]\n"
    "       stepq operators remove NAME\n"
    "       stepq operators rotate NAME [--json]\n"
    "\n"
    "The named operators of `stepq serve`: once one exists, the server\n"
    "accepts only their tokens (Authorization: Bearer TOKEN), and records\n"
    "each write under the operator's name.\n"
    "\n"
    "add     make an operator and print its token, once: only its SHA-256\n"
    "        is stored. viewer reads; resolver also resolves park items and\n"
    "        cancels or retries jobs; admin does everything\n"
    "list    names, roles and when each token was made (never a token)\n"
    "remove  delete an operator: its token is refused at once\n"
    "rotate  give an operator a new token (printed once): the old one is\n"
    "        refused at once\n";

/* The result of add and rotate: the token, once. */
static void
print_token(const char *name, const char *role, const char *token, bool json)
{
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", name);
        if (role != NULL)
            cJSON_AddStringToObject(o, "role", role);
        cJSON_AddStringToObject(o, "token", token);
        cli_print_json(o);
        return;
    }
    printf("%s\n", token);
    fprintf(stderr,
            "stepq: the token of operator %s is printed above, once: only "
            "its hash is kept\n",
            name);
}

/* Maps an operator write's error to a message and exit code. */
static int
write_failed(const char *cmd, const char *name, int rc)
{
    if (rc == -EEXIST)
        cli_error("operators %s: an operator named %s exists already", cmd,
                  name);
    else if (rc == -ENOENT)
        cli_error("operators %s: no operator named %s", cmd, name);
    else
        cli_error("operators %s: cannot write to the database", cmd);
    return cli_exit_code(rc);
}

/* Parses NAME (one positional) and opens the database. */
static int
name_and_db(struct cli_env *env, int argc, char **argv,
            const struct cli_opt *opts, const char *cmd, const char **name,
            q_db **db)
{
    const char *pos[1];
    char err[160];
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, pos, 1, &npos, usage)) != 0)
        return rc;
    if (npos != 1) {
        cli_error("operators %s: which operator? (stepq operators %s NAME)",
                  cmd, cmd);
        return CLI_USAGE;
    }
    if (park_operator_name_check(pos[0], err, sizeof(err)) != 0) {
        cli_error("operators %s: %s", cmd, err);
        return CLI_USAGE;
    }
    *name = pos[0];
    return cli_open_db(env, db);
}

static int
add_cmd(struct cli_env *env, int argc, char **argv)
{
    const char *role_s = NULL, *name = NULL;
    bool json = false;
    struct cli_opt opts[] = {
        {"role", &role_s, NULL}, {"json", NULL, &json}, {NULL, NULL, NULL}};
    char token[PARK_TOKEN_SIZE];
    struct park_audit by = {0};
    enum park_role role;
    q_db *db = NULL;
    int rc;

    if ((rc = name_and_db(env, argc, argv, opts, "add", &name, &db)) != 0)
        return rc;
    if (park_role_from_name(role_s, &role) != 0) {
        q_close(db);
        cli_error("operators add: --role must be viewer, resolver or admin%s%s",
                  role_s ? ", not " : "", role_s ? role_s : "");
        return CLI_USAGE;
    }
    cli_audit_by(db, &by);
    rc = park_operator_add(db, name, role, &by, token);
    q_close(db);
    if (rc != 0)
        return write_failed("add", name, rc);
    print_token(name, park_role_name(role), token, json);
    return CLI_OK;
}

static int
rotate_cmd(struct cli_env *env, int argc, char **argv)
{
    const char *name = NULL;
    bool json = false;
    struct cli_opt opts[] = {{"json", NULL, &json}, {NULL, NULL, NULL}};
    char token[PARK_TOKEN_SIZE];
    struct park_audit by = {0};
    q_db *db = NULL;
    int rc;

    if ((rc = name_and_db(env, argc, argv, opts, "rotate", &name, &db)) != 0)
        return rc;
    cli_audit_by(db, &by);
    rc = park_operator_rotate(db, name, &by, token);
    q_close(db);
    if (rc != 0)
        return write_failed("rotate", name, rc);
    print_token(name, NULL, token, json);
    return CLI_OK;
}

static int
remove_cmd(struct cli_env *env, int argc, char **argv)
{
    const char *name = NULL;
    struct cli_opt opts[] = {{NULL, NULL, NULL}};
    struct park_audit by = {0};
    q_db *db = NULL;
    int rc;

    if ((rc = name_and_db(env, argc, argv, opts, "remove", &name, &db)) != 0)
        return rc;
    cli_audit_by(db, &by);
    rc = park_operator_remove(db, name, &by);
    q_close(db);
    if (rc != 0)
        return write_failed("remove", name, rc);
    printf("removed operator %s\n", name);
    return CLI_OK;
}

static int
list_cmd(struct cli_env *env, int argc, char **argv)
{
    static const char *const heads[] = {"NAME", "ROLE", "TOKEN MADE"};
    bool json = false;
    struct cli_opt opts[] = {{"json", NULL, &json}, {NULL, NULL, NULL}};
    struct q_operator *ops = NULL;
    struct cli_table t;
    size_t n = 0;
    q_db *db = NULL;
    cJSON *arr;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0 ||
        (rc = cli_open_db(env, &db)) != 0)
        return rc;
    rc = q_operators_list(db, &ops, &n);
    q_close(db);
    if (rc != 0) {
        cli_error("operators list: cannot read the database");
        return CLI_RUNTIME;
    }
    /* The hash stays out of both forms: it is a stand-in for the token. */
    arr = cJSON_CreateArray();
    cli_table_init(&t, 3, heads, "lll");
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        char made[32];
        const char *cells[3] = {ops[i].name, ops[i].role, made};
        clock_format_utc(ops[i].rotated_at, made, sizeof(made));
        cJSON_AddStringToObject(o, "name", ops[i].name);
        cJSON_AddStringToObject(o, "role", ops[i].role);
        cJSON_AddStringToObject(o, "token_made_at", made);
        cJSON_AddItemToArray(arr, o);
        cli_table_add(&t, cells);
    }
    q_operators_free(ops, n);
    if (json)
        cli_print_json(arr);
    else {
        cJSON_Delete(arr);
        cli_table_print(&t);
    }
    cli_table_cleanup(&t);
    return CLI_OK;
}

int
cmd_operators(struct cli_env *env, int argc, char **argv)
{
    static const struct cli_sub subs[] = {{"add", add_cmd},
                                          {"list", list_cmd},
                                          {"remove", remove_cmd},
                                          {"rotate", rotate_cmd},
                                          {NULL, NULL}};

    return cli_subcommand(env, argc, argv, subs, usage);
}

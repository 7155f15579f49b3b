/* args.c: what the commands share: argument and id parsing, config and
 * database opening, exit codes, error messages and JSON output. */
#include "cli/cli.h"

#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/json.h"
#include "policy/policy.h"
#include "queue/queue.h"
#include "sched/sched.h"
#include "spec/spec.h"

void
cli_error(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "stepq: %s\n", msg);
}

void
cli_print_json(cJSON *item)
{
    char *s = json_print(item);

    puts(s);
    free(s);
    cJSON_Delete(item);
}

int
cli_exit_code(int rc)
{
    switch (rc) {
    case 0:
        return CLI_OK;
    case -EINVAL:
    case -E2BIG:
        return CLI_USAGE;
    case -ENOENT:
        return CLI_NOTFOUND;
    case -EALREADY:
    case -EBUSY:
    case -EEXIST:
        return CLI_CONFLICT;
    default:
        return CLI_RUNTIME;
    }
}

static const struct cli_opt *
find_opt(const struct cli_opt *opts, const char *name, size_t len)
{
    for (; opts != NULL && opts->name != NULL; opts++) {
        if (strlen(opts->name) == len && strncmp(opts->name, name, len) == 0)
            return opts;
    }
    return NULL;
}

int
cli_parse_args(int argc, char **argv, const struct cli_opt *opts,
               const char **pos, int maxpos, int *npos, const char *usage)
{
    int n = 0;
    bool only_pos = false;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            fputs(usage, stdout);
            return CLI_HELP;
        }
        if (!only_pos && strcmp(a, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (!only_pos && a[0] == '-' && a[1] == '-') {
            const char *name = a + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            const struct cli_opt *o = find_opt(opts, name, len);
            if (o == NULL) {
                cli_error("%s: unknown option %s", argv[0], a);
                fputs(usage, stderr);
                return CLI_USAGE;
            }
            if (o->flag != NULL) {
                if (eq != NULL) {
                    cli_error("%s: --%s takes no value", argv[0], o->name);
                    return CLI_USAGE;
                }
                *o->flag = true;
            } else if (eq != NULL) {
                *o->value = eq + 1;
            } else if (i + 1 < argc) {
                *o->value = argv[++i];
            } else {
                cli_error("%s: --%s needs a value", argv[0], o->name);
                return CLI_USAGE;
            }
            continue;
        }
        if (!only_pos && a[0] == '-' && a[1] != '\0') {
            cli_error("%s: unknown option %s", argv[0], a);
            fputs(usage, stderr);
            return CLI_USAGE;
        }
        if (n >= maxpos) {
            cli_error("%s: unexpected argument %s", argv[0], a);
            fputs(usage, stderr);
            return CLI_USAGE;
        }
        pos[n++] = a;
    }
    *npos = n;
    return 0;
}

int
cli_parse_id(const char *s, long long *out)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v <= 0) {
        cli_error("not a valid id: %s", s);
        return CLI_USAGE;
    }
    *out = v;
    return 0;
}

/* Compiles cfg's classify rules once, to refuse a bad one with its path
 * ("classify[0].body: ...") whatever the command. */
static int
rules_check(const struct config *cfg, char *err, size_t len)
{
    policy_rules *rules = NULL;
    int rc = policy_rules_new(cfg->rules, cfg->nrules, &rules, err, len);

    policy_rules_free(rules);
    return rc;
}

int
cli_config(struct cli_env *env, const struct config **out)
{
    const char *path = env->config_opt;
    bool explicit = true;
    char err[1024];
    int rc;

    if (env->cfg != NULL) {
        *out = env->cfg;
        return 0;
    }
    if (path == NULL)
        path = getenv("STEPQ_CONFIG");
    if (path == NULL || path[0] == '\0') {
        path = "stepq.json";
        explicit = false;
    }
    rc = config_load(path, &env->cfg, err, sizeof(err));
    if (rc == -ENOENT && !explicit) {
        env->cfg = config_new_default();
        rc = 0;
    }
    if (rc != 0) {
        cli_error("config %s", err);
        return rc == -EINVAL || rc == -ENOENT ? CLI_USAGE : CLI_RUNTIME;
    }
    /* Schedules' expressions and zones, the classify rules' regular
     * expressions and outcomes, and the shared tools' definitions, as every
     * other field, for every command; schedules' jobs where they are fired
     * or run (work, schedules). */
    if (sched_check(env->cfg, false, err, sizeof(err)) != 0 ||
        rules_check(env->cfg, err, sizeof(err)) != 0 ||
        spec_tools_check_config(env->cfg, err, sizeof(err)) != 0) {
        cli_error("config %s: %s", path, err);
        config_free(env->cfg);
        env->cfg = NULL;
        return CLI_USAGE;
    }
    *out = env->cfg;
    return 0;
}

int
cli_db_path(struct cli_env *env, const char **out)
{
    const struct config *cfg;
    const char *p = env->db_opt, *named = env->config_opt;
    int rc;

    /* A config named by --config or $STEPQ_CONFIG is read even when the
     * database is named too: a mistyped path or a bad file is exit 2 for
     * every command, not only for those that use the config. */
    if (named == NULL)
        named = getenv("STEPQ_CONFIG");
    if (named != NULL && named[0] != '\0' && (rc = cli_config(env, &cfg)) != 0)
        return rc;
    if (p == NULL || p[0] == '\0')
        p = getenv("STEPQ_DB");
    if (p == NULL || p[0] == '\0') {
        if ((rc = cli_config(env, &cfg)) != 0)
            return rc;
        p = cfg->db ? cfg->db : "stepq.db";
    }
    *out = p;
    return 0;
}

int
cli_usage_asked(int argc, char **argv, const char *usage)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(usage, stdout);
        return CLI_HELP;
    }
    return 0;
}

int
cli_subcommand(struct cli_env *env, int argc, char **argv,
               const struct cli_sub *subs, const char *usage)
{
    int rc = cli_usage_asked(argc, argv, usage);

    if (rc != 0)
        return rc;
    for (const struct cli_sub *s = subs; s->name != NULL; s++) {
        if (strcmp(argv[1], s->name) == 0)
            return s->fn(env, argc - 1, argv + 1);
    }
    cli_error("%s: unknown subcommand '%s' (try 'stepq %s --help')", argv[0],
              argv[1], argv[0]);
    fputs(usage, stderr);
    return CLI_USAGE;
}

int
cli_open_failed(const char *location, int rc)
{
    char where[CLI_WHERE_MAX];
    const char *path = q_location_redact(location, where, sizeof(where));

    switch (rc) {
    case -ENOENT:
        cli_error("no stepq database at %s (create it with `stepq init`)",
                  path);
        break;
    case -ESTALE:
        cli_error("the database at %s is from an older stepq: run `stepq "
                  "init` to migrate it (every worker on it must be this "
                  "version or newer)",
                  path);
        break;
    case -ENOTSUP:
        cli_error("the database at %s was made by a newer stepq; upgrade "
                  "stepq",
                  path);
        break;
    case -EAGAIN:
        cli_error("the database at %s stayed locked by another process", path);
        break;
    case -EINVAL:
    case -EPROTONOSUPPORT:
        cli_error("%s: not a database location this stepq can open (%s)",
                  path[0] ? path : "(empty)", q_location_kinds());
        return CLI_USAGE;
    default:
        cli_error("cannot open database %s", path);
        break;
    }
    return CLI_RUNTIME;
}

const char *
cli_login_name(void)
{
    /* The account the process runs as first: $USER is whatever the
     * caller's environment says, and the audit trail records this name. */
    struct passwd *pw = getpwuid(getuid());
    const char *u = getenv("USER");

    if (pw != NULL && pw->pw_name != NULL && pw->pw_name[0] != '\0')
        return pw->pw_name;
    return u != NULL && u[0] != '\0' ? u : "unknown";
}

int64_t
cli_now(const struct q_db *db)
{
    return clock_now_ms() + q_clock_offset(db);
}

int
cli_open_db(struct cli_env *env, struct q_db **db)
{
    const char *path = NULL;
    int rc;

    if ((rc = cli_db_path(env, &path)) != 0)
        return rc;
    if ((rc = q_open_existing(path, NULL, db)) != 0)
        return cli_open_failed(path, rc);
    return 0;
}

const char *
cli_json_text(const cJSON *o, const char *name)
{
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(o, name));

    return v != NULL ? v : "-";
}

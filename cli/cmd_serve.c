/* cmd_serve.c: stepq serve — the HTTP API over the database. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "queue/queue.h"
#include "serve/serve.h"

#define TOKEN_ENV_DEFAULT "STEPQ_TOKEN"

static const char usage[] =
    "usage: stepq serve [--listen HOST:PORT] [--token-env NAME] [--no-auth]\n"
    "                   [--max-body BYTES] [--timeout S]\n"
    "\n"
    "Serves the HTTP API (docs/reference.md, \"serve\") over the\n"
    "database until SIGINT or SIGTERM. Prints \"listening HOST:PORT\" once\n"
    "bound (--listen 127.0.0.1:0 picks a free port).\n"
    "\n"
    "  --listen HOST:PORT  numeric address (default " SERVE_LISTEN_DEFAULT ")\n"
    "  --token-env NAME    every request must carry Authorization: Bearer\n"
    "                      with the token in $NAME (default $" TOKEN_ENV_DEFAULT
    ")\n"
    "  --no-auth           no token: allowed on a loopback address only\n"
    "  --max-body BYTES    larger request bodies get 413 (default 32 MiB)\n"
    "  --timeout S         close connections idle this long, or whose request\n"
    "                      headers take longer (default 30)\n";

static int
parse_count(const char *name, const char *text, long long lo, long long hi,
            long long *out)
{
    char *end;

    errno = 0;
    *out = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || *out < lo || *out > hi) {
        cli_error("serve: --%s must be a whole number from %lld to %lld, not "
                  "%s",
                  name, lo, hi, text);
        return CLI_USAGE;
    }
    return 0;
}

static void
ready(const char *addr, void *arg)
{
    (void)arg;
    printf("listening %s\n", addr);
    fflush(stdout);
}

/* Where the token comes from, and whether going without one is allowed. */
static int
pick_token(const char *listen, const char *token_env, bool no_auth,
           const char **token)
{
    bool loopback = false;
    char err[256];

    if (serve_listen_check(listen, &loopback, err, sizeof(err)) != 0) {
        cli_error("serve: %s", err);
        return CLI_USAGE;
    }
    if (no_auth) {
        if (token_env != NULL) {
            cli_error("serve: --no-auth and --token-env do not go together");
            return CLI_USAGE;
        }
        if (!loopback) {
            cli_error("serve: --no-auth is allowed on a loopback address "
                      "only, not %s: set a token (--token-env)",
                      listen);
            return CLI_USAGE;
        }
        *token = NULL;
        return 0;
    }
    token_env = token_env ? token_env : TOKEN_ENV_DEFAULT;
    *token = getenv(token_env);
    if (*token == NULL || (*token)[0] == '\0') {
        cli_error("serve: $%s is not set: set it to the token requests must "
                  "carry, or pass --no-auth on a loopback address",
                  token_env);
        return CLI_USAGE;
    }
    if (strlen(*token) < 16) {
        cli_error("serve: the token in $%s is shorter than 16 characters",
                  token_env);
        return CLI_USAGE;
    }
    return 0;
}

int
cmd_serve(struct cli_env *env, int argc, char **argv)
{
    const char *listen = SERVE_LISTEN_DEFAULT, *token_env = NULL;
    const char *max_body = NULL, *timeout = NULL;
    bool no_auth = false;
    struct cli_opt opts[] = {
        {"listen", &listen, NULL},   {"token-env", &token_env, NULL},
        {"no-auth", NULL, &no_auth}, {"max-body", &max_body, NULL},
        {"timeout", &timeout, NULL}, {NULL, NULL, NULL}};
    struct serve_opts o = {.max_body = SERVE_MAX_BODY_DEFAULT,
                           .timeout_s = SERVE_TIMEOUT_S_DEFAULT,
                           .ready = ready};
    const struct config *cfg = NULL;
    long long v = 0;
    char err[512];
    q_db *db = NULL;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0 ||
        (rc = pick_token(listen, token_env, no_auth, &o.token)) != 0)
        return rc;
    if (max_body != NULL) {
        if ((rc = parse_count("max-body", max_body, 1024, 1LL << 30, &v)))
            return rc;
        o.max_body = (size_t)v;
    }
    if (timeout != NULL) {
        if ((rc = parse_count("timeout", timeout, 1, 3600, &v)) != 0)
            return rc;
        o.timeout_s = (unsigned)v;
    }
    if ((rc = cli_config(env, &cfg)) != 0 || (rc = cli_open_db(env, &db)) != 0)
        return rc;
    o.db = db;
    o.cfg = cfg;
    o.listen = listen;
    if (o.token == NULL)
        fprintf(stderr, "stepq: serve: no token asked (--no-auth): any "
                        "program on this host can use the API\n");
    xalloc_keep_freed();
    rc = serve_run(&o, err, sizeof(err));
    q_close(db);
    if (rc != 0) {
        cli_error("serve: %s", err);
        return rc == -EINVAL ? CLI_USAGE : CLI_RUNTIME;
    }
    return CLI_OK;
}

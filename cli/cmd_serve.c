/* cmd_serve.c: stepq serve — the HTTP API over the database. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "common/xalloc.h"
#include "queue/audit.h"
#include "queue/queue.h"
#include "serve/serve.h"

#define TOKEN_ENV_DEFAULT "STEPQ_TOKEN"

static const char usage[] =
    "usage: stepq serve [--listen HOST:PORT] [--token-env NAME] [--no-auth]\n"
    "                   [--max-body BYTES] [--timeout S]\n"
    "                   [--tls-cert FILE --tls-key FILE]\n"
    "\n"
    "Serves the HTTP API (docs/reference.md, \"serve\") over the\n"
    "database until SIGINT or SIGTERM. Prints \"listening HOST:PORT\" once\n"
    "bound (--listen 127.0.0.1:0 picks a free port).\n"
    "\n"
    "Once the database has named operators (stepq operators add), only\n"
    "their tokens are accepted, each allowing what its role does; until\n"
    "then one shared token (or none) stands for a one-person setup.\n"
    "\n"
    "  --listen HOST:PORT  numeric address (default " SERVE_LISTEN_DEFAULT ")\n"
    "  --token-env NAME    without named operators, every request must carry\n"
    "                      Authorization: Bearer with the token in $NAME\n"
    "                      (default $" TOKEN_ENV_DEFAULT ")\n"
    "  --no-auth           no token, without named operators: allowed on a\n"
    "                      loopback address only\n"
    "  --tls-cert FILE     serve HTTPS with this PEM certificate (chain)\n"
    "  --tls-key FILE      and this PEM key (both or neither)\n"
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

/* Whether going without a token is allowed where we listen. */
static int
check_listen(const char *listen, const char *token_env, bool no_auth)
{
    bool loopback = false;
    char err[256];

    if (serve_listen_check(listen, &loopback, err, sizeof(err)) != 0) {
        cli_error("serve: %s", err);
        return CLI_USAGE;
    }
    if (no_auth && token_env != NULL) {
        cli_error("serve: --no-auth and --token-env do not go together");
        return CLI_USAGE;
    }
    if (no_auth && !loopback) {
        cli_error("serve: --no-auth is allowed on a loopback address "
                  "only, not %s: set a token (--token-env) or add "
                  "operators (stepq operators add)",
                  listen);
        return CLI_USAGE;
    }
    return 0;
}

/* Where the shared token comes from; with named operators in the store
 * (nops), none is needed, and the shared token is not accepted. */
static int
pick_token(const char *token_env, bool no_auth, size_t nops, const char **token)
{
    *token = NULL;
    if (no_auth)
        return 0;
    token_env = token_env ? token_env : TOKEN_ENV_DEFAULT;
    *token = getenv(token_env);
    if (*token != NULL && (*token)[0] == '\0')
        *token = NULL;
    if (*token == NULL && nops == 0) {
        cli_error("serve: $%s is not set: set it to the token requests must "
                  "carry, add named operators (stepq operators add), or "
                  "pass --no-auth on a loopback address",
                  token_env);
        return CLI_USAGE;
    }
    if (*token != NULL && strlen(*token) < 16) {
        cli_error("serve: the token in $%s is shorter than 16 characters",
                  token_env);
        return CLI_USAGE;
    }
    return 0;
}

/* Reads --tls-cert and --tls-key (both or neither) into o. */
static int
read_tls(const char *cert, const char *key, char **cert_pem, char **key_pem)
{
    const char *names[2] = {"--tls-cert", "--tls-key"}, *files[2] = {cert, key};
    char **out[2] = {cert_pem, key_pem};
    size_t n = 0;

    if ((cert == NULL) != (key == NULL)) {
        cli_error("serve: --tls-cert and --tls-key go together");
        return CLI_USAGE;
    }
    if (cert == NULL)
        return 0;
    if (!serve_tls_supported()) {
        cli_error("serve: this libmicrohttpd was built without TLS (no "
                  "GnuTLS): terminate TLS in a reverse proxy instead "
                  "(docs/reference.md, \"stepq serve\")");
        return CLI_USAGE;
    }
    for (int i = 0; i < 2; i++) {
        int rc = file_read_all(files[i], 1 << 20, out[i], &n);
        if (rc != 0) {
            cli_error("serve: %s %s: %s", names[i], files[i],
                      rc == -ENOENT  ? "no such file"
                      : rc == -E2BIG ? "larger than 1 MiB"
                                     : "cannot read");
            return CLI_USAGE;
        }
        if (strstr(*out[i], "-----BEGIN ") == NULL) {
            cli_error("serve: %s %s: not PEM (no -----BEGIN line)", names[i],
                      files[i]);
            return CLI_USAGE;
        }
    }
    return 0;
}

/* Says at start which way requests are let in. */
static void
tell_mode(const struct serve_opts *o, size_t nops, const char *token_env)
{
    if (nops > 0)
        fprintf(stderr,
                "stepq: serve: %zu named operator(s): only their tokens are "
                "accepted%s\n",
                nops,
                o->token != NULL ? " (the shared token is not, while any "
                                   "operator exists)"
                                 : "");
    else if (o->token != NULL)
        fprintf(stderr,
                "stepq: serve: one shared token ($%s), for a one-person "
                "setup: it may do everything; add named operators with "
                "roles with stepq operators add\n",
                token_env ? token_env : TOKEN_ENV_DEFAULT);
    else if (o->no_auth)
        fprintf(stderr, "stepq: serve: no token asked (--no-auth): any "
                        "program on this host can use the API\n");
}

int
cmd_serve(struct cli_env *env, int argc, char **argv)
{
    const char *listen = SERVE_LISTEN_DEFAULT, *token_env = NULL;
    const char *max_body = NULL, *timeout = NULL, *cert = NULL, *key = NULL;
    bool no_auth = false;
    struct cli_opt opts[] = {
        {"listen", &listen, NULL},   {"token-env", &token_env, NULL},
        {"no-auth", NULL, &no_auth}, {"max-body", &max_body, NULL},
        {"timeout", &timeout, NULL}, {"tls-cert", &cert, NULL},
        {"tls-key", &key, NULL},     {NULL, NULL, NULL}};
    struct serve_opts o = {.max_body = SERVE_MAX_BODY_DEFAULT,
                           .timeout_s = SERVE_TIMEOUT_S_DEFAULT,
                           .ready = ready};
    const struct config *cfg = NULL;
    struct q_operator *ops = NULL;
    char *cert_pem = NULL, *key_pem = NULL;
    long long v = 0;
    char err[512];
    q_db *db = NULL;
    size_t nops = 0;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0 ||
        (rc = check_listen(listen, token_env, no_auth)) != 0)
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
    if ((rc = read_tls(cert, key, &cert_pem, &key_pem)) != 0)
        goto out;
    if ((rc = cli_config(env, &cfg)) != 0 || (rc = cli_open_db(env, &db)) != 0)
        goto out;
    if (q_operators_list(db, &ops, &nops) != 0) {
        cli_error("serve: cannot read the operators from the database");
        rc = CLI_RUNTIME;
        goto out;
    }
    q_operators_free(ops, nops);
    if ((rc = pick_token(token_env, no_auth, nops, &o.token)) != 0)
        goto out;
    o.db = db;
    o.cfg = cfg;
    o.listen = listen;
    o.no_auth = no_auth;
    o.tls_cert = cert_pem;
    o.tls_key = key_pem;
    tell_mode(&o, nops, token_env);
    xalloc_keep_freed();
    rc = serve_run(&o, err, sizeof(err));
    if (rc != 0) {
        cli_error("serve: %s", err);
        rc = rc == -EINVAL ? CLI_USAGE : CLI_RUNTIME;
    }
out:
    q_close(db);
    free(cert_pem);
    free(key_pem);
    return rc;
}

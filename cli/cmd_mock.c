/* cmd_mock.c: `stepq mock`, the scripted OpenAI-compatible endpoint.
 *
 * Prints "listening HOST:PORT" on stdout once bound and serves until SIGINT
 * or SIGTERM, then closes every handle and exits 0. A bad script exits 2
 * with the JSON path of the first problem.
 */
#include "cli/cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "common/file.h"
#include "common/xalloc.h"
#include "mock/mock.h"

#define MAX_SCRIPT (16u << 20)

static const char usage[] =
    "usage: stepq mock [--port P] [--host ADDR] [--script FILE] [--log FILE]\n"
    "                  [--log-stderr] [--check]\n"
    "\n"
    "Serves an OpenAI-compatible endpoint with scripted faults (see\n"
    "docs/mock.md). Prints \"listening HOST:PORT\" once bound; --port 0 (the\n"
    "default) picks a free port. Serves until SIGINT or SIGTERM.\n"
    "\n"
    "  --port P        TCP port (0: any free one)\n"
    "  --host ADDR     IPv4 address to bind (default 127.0.0.1)\n"
    "  --script FILE   JSON script of answers and faults (- reads stdin)\n"
    "  --log FILE      append one JSON line per request to FILE\n"
    "  --log-stderr    also write the request lines to stderr\n"
    "  --check         validate the script and exit\n";

struct run {
    mock *m;
    uv_signal_t sigint, sigterm; /* data = this */
    int signo;
};

static void
on_signal(uv_signal_t *s, int signo)
{
    struct run *r = s->data;

    if (r->m == NULL)
        return;
    r->signo = signo;
    mock_stop(r->m, NULL, NULL);
    r->m = NULL;
    uv_close((uv_handle_t *)&r->sigint, NULL);
    uv_close((uv_handle_t *)&r->sigterm, NULL);
}

static int
parse_port(const char *s, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 0 || v > 65535) {
        cli_error("mock: --port must be a number from 0 to 65535, not %s", s);
        return CLI_USAGE;
    }
    *out = (int)v;
    return 0;
}

static int
serve(const struct mock_options *opts)
{
    uv_loop_t loop;
    struct run r = {0};
    char err[1024];
    int port = 0, rc;

    if ((rc = uv_loop_init(&loop)) != 0) {
        cli_error("mock: %s", uv_strerror(rc));
        return CLI_RUNTIME;
    }
    rc = mock_start_with(&loop, opts, &r.m, &port, err, sizeof(err));
    if (rc != 0) {
        cli_error("mock: %s", err);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
        return rc == -EINVAL ? CLI_USAGE : CLI_RUNTIME;
    }
    uv_signal_init(&loop, &r.sigint);
    uv_signal_init(&loop, &r.sigterm);
    r.sigint.data = r.sigterm.data = &r;
    uv_signal_start(&r.sigint, on_signal, SIGINT);
    uv_signal_start(&r.sigterm, on_signal, SIGTERM);
    printf("listening %s:%d\n", opts->host ? opts->host : "127.0.0.1", port);
    fflush(stdout);
    uv_run(&loop, UV_RUN_DEFAULT);
    if ((rc = uv_loop_close(&loop)) != 0) {
        cli_error("mock: loop did not close: %s", uv_strerror(rc));
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

int
cmd_mock(struct cli_env *env, int argc, char **argv)
{
    const char *port_s = NULL, *script_path = NULL;
    struct mock_options opts = {0};
    bool check = false;
    const struct cli_opt opt_list[] = {
        {"port", &port_s, NULL},
        {"host", &opts.host, NULL},
        {"script", &script_path, NULL},
        {"log", &opts.log_path, NULL},
        {"log-stderr", NULL, &opts.log_stderr},
        {"check", NULL, &check},
        {NULL, NULL, NULL},
    };
    char *text = NULL, err[1024];
    size_t len = 0;
    int npos = 0, rc;

    (void)env;
    rc = cli_parse_args(argc, argv, opt_list, NULL, 0, &npos, usage);
    if (rc != 0)
        return rc;
    if (port_s != NULL && (rc = parse_port(port_s, &opts.port)) != 0)
        return rc;
    if (script_path != NULL) {
        rc = file_read_all(script_path, MAX_SCRIPT, &text, &len);
        if (rc != 0) {
            cli_error("mock: script %s: %s", script_path,
                      rc == -ENOENT   ? "no such file"
                      : rc == -E2BIG  ? "larger than 16 MiB"
                      : rc == -EISDIR ? "a folder, not a script"
                                      : strerror(-rc));
            return rc == -EIO ? CLI_RUNTIME : CLI_USAGE;
        }
    }
    rc = mock_script_check(text, err, sizeof(err));
    if (rc != 0 || check) {
        if (rc != 0)
            cli_error("mock: script %s: %s",
                      script_path ? script_path : "(none)", err);
        free(text);
        return rc == 0 ? CLI_OK : CLI_USAGE;
    }
    /* A client that goes away mid-answer must not kill the mock. */
    signal(SIGPIPE, SIG_IGN);
    opts.script = text;
    xalloc_keep_freed();
    rc = serve(&opts);
    free(text);
    return rc;
}

/* cmd_enqueue.c: stepq enqueue — read the input in pieces, validate each
 * job as it comes and write it inside one transaction, committed at the
 * end: all jobs or none, in memory one piece, one batch and the ids.
 * Input that can stall (a pipe) is gathered to its end first, in memory
 * or a spool file, so that the transaction never waits for a producer. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/json.h"
#include "common/xalloc.h"
#include "park/park.h"
#include "queue/queue.h"
#include "spec/spec.h"
#include "view/view.h"

/* Bytes per read. */
#define READ_BYTES 65536
/* Input that can stall kept in memory before it goes to a spool file. */
#define SPOOL_MEM (4 * 1024 * 1024)

static const char usage[] =
    "usage: stepq enqueue [FILE...|-] [--input JSON|@FILE] [--key K]\n"
    "                     [--run-at T] [--priority N] [--json]\n"
    "\n"
    "Reads one job, a JSON array of jobs, or jobs one after another (JSON\n"
    "lines, or pretty-printed objects each starting on a new line) from\n"
    "each FILE in turn, or standard input. Every job is validated as it is\n"
    "read and all are written in one transaction, committed at the end: one\n"
    "bad job in any file and nothing is written. Input from a pipe is read\n"
    "to its end first (past 4 MiB into a spool file in $TMPDIR), so a slow\n"
    "producer holds no lock.\n"
    "Prints each job's id (--json: {\"id\":N,\"duplicate\":false}, an array\n"
    "for several jobs). A job whose key exists is not added again: its id\n"
    "is printed with duplicate true, exit 0.\n"
    "\n"
    "  --input JSON   every job's input (JSON text, or @FILE to read it),\n"
    "                 read by {{input.PATH}} templates\n"
    "  --key K        dedupe key (one job only, over all the files)\n"
    "  --run-at T     not before T: RFC 3339 (2026-11-30T03:40:00Z), or a\n"
    "                 span from now (+90s, +10m, +2h, +1d)\n"
    "  --priority N   higher runs first (default 0)\n"
    "  --json         print JSON\n";

static int
parse_overrides(const char *key, const char *run_at, const char *prio,
                struct q_enqueue_opts *o, int64_t *run_after)
{
    if (key != NULL) {
        char err[128];

        if (spec_key_check(key, err, sizeof(err)) != 0) {
            cli_error("enqueue: --%s", err);
            return CLI_USAGE;
        }
        o->key = key;
    }
    if (run_at != NULL) {
        if (clock_parse_after(run_at, &o->run_at, run_after) != 0) {
            cli_error("enqueue: --run-at %s is neither an RFC 3339 time such "
                      "as 2026-11-30T03:40:00Z nor a span from now such as "
                      "+90s, +10m, +2h or +1d (a whole number and s, m, h or "
                      "d)",
                      run_at);
            return CLI_USAGE;
        }
        o->has_run_at = *run_after < 0; /* a span: set at the enqueue */
    }
    if (prio != NULL) {
        char *end;
        errno = 0;
        o->priority = strtoll(prio, &end, 10);
        if (errno != 0 || end == prio || *end != '\0' ||
            o->priority < -1000000 || o->priority > 1000000) {
            cli_error("enqueue: --priority must be a whole number between "
                      "-1000000 and 1000000, not %s",
                      prio);
            return CLI_USAGE;
        }
        o->has_priority = true;
    }
    return 0;
}

/* What the batches of one enqueue share: the enqueue (spec/'s one
 * path), the store it opens at the first batch (a bad first job needs
 * none), and how it failed. */
struct sink {
    struct cli_env *env;
    q_db *db;
    spec_enqueue *e;
    int exit_code; /* a batch's failure, as the exit code; 0: none */
};

/* The message of a write or commit that failed; the exit code. */
static int
write_failed(struct sink *k)
{
    const char *path = NULL;
    char where[CLI_WHERE_MAX];

    (void)cli_db_path(k->env, &path);
    cli_error(
        "enqueue: cannot write to %s; nothing was enqueued",
        q_location_redact(path ? path : "the database", where, sizeof(where)));
    return k->exit_code = CLI_RUNTIME;
}

/* The enqueue's audit row, before its commit (a spec_enqueue
 * before_commit). */
static int
audit_enqueued(void *ctx, q_db *db, const struct q_enqueue_result *res,
               size_t n)
{
    struct park_audit a = {0};

    (void)ctx;
    cli_audit_by(db, &a);
    return park_audit_enqueued(db, res, n, &a);
}

/* Opens the store at the enqueue's first batch. */
static int
open_store(void *ctx, q_db **db, int64_t *now)
{
    struct sink *k = ctx;
    int rc;

    if ((rc = cli_open_db(k->env, &k->db)) != 0) {
        k->exit_code = rc;
        return -ECANCELED;
    }
    *db = k->db;
    *now = cli_now(k->db);
    return 0;
}

int
cli_read_input(const char *cmd, const char *arg, cJSON **out)
{
    char *text = NULL, err[512];
    size_t len = 0;
    int rc;

    *out = NULL;
    if (arg == NULL)
        return 0;
    if (arg[0] == '@') {
        rc = file_read_all(arg + 1, SPEC_INPUT_MAX_BYTES * 4, &text, &len);
        if (rc != 0) {
            cli_error("%s: --input %s: %s", cmd, arg,
                      rc == -ENOENT  ? "no such file"
                      : rc == -E2BIG ? "larger than an input may be"
                                     : "cannot be read");
            return CLI_USAGE;
        }
        arg = text;
    } else {
        len = strlen(arg);
    }
    rc = spec_input_parse(arg, len, out, err, sizeof(err));
    free(text);
    if (rc != 0) {
        cli_error("%s: --input: %s", cmd, err);
        return CLI_USAGE;
    }
    return 0;
}

/* Prints the ids; --json as view_enqueued renders each result, an array
 * written piece by piece for many (not one tree of every result). */
static void
print_results(const struct q_enqueue_result *res, size_t n, bool many,
              bool json)
{
    for (size_t i = 0; i < n; i++) {
        if (!json) {
            printf("%lld\n", (long long)res[i].id);
            continue;
        }
        cJSON *o = view_enqueued(&res[i], 1, false);
        char *s = json_print(o);
        fputs(many ? (i == 0 ? "[" : ",") : "", stdout);
        fputs(s, stdout);
        free(s);
        cJSON_Delete(o);
    }
    if (json)
        fputs(many ? "]\n" : "\n", stdout);
}

/* Feeds bytes [0, len) of mem to the stream in pieces; rc of the stream. */
static int
feed_memory(spec_enqueue *e, const char *mem, size_t len, char *err,
            size_t errlen)
{
    int rc = 0;

    for (size_t off = 0; rc == 0 && off < len; off += READ_BYTES) {
        size_t n = len - off < READ_BYTES ? len - off : READ_BYTES;
        rc = spec_enqueue_feed(e, mem + off, n, err, errlen);
    }
    return rc;
}

/* An unlinked temporary file in $TMPDIR (else /tmp), mode 0600, opened
 * for writing and reading back; NULL with errno set. */
static FILE *
spool_open(void)
{
    const char *dir = getenv("TMPDIR");
    char path[4096];
    FILE *f;
    int fd;

    if (dir == NULL || dir[0] == '\0')
        dir = "/tmp";
    if (snprintf(path, sizeof(path), "%s/stepq-enqueue.XXXXXX", dir) >=
        (int)sizeof(path)) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    if ((fd = mkstemp(path)) < 0)
        return NULL;
    (void)unlink(path);
    if ((f = fdopen(fd, "w+b")) == NULL)
        close(fd);
    return f;
}

/* Reads input that can stall (a pipe, a terminal, a socket) to its end
 * before anything is written: the enqueue's transaction holds the
 * store's write lock from its first batch, and a producer writing slowly
 * would keep every worker and every other enqueue waiting for it. Up to
 * SPOOL_MEM bytes wait in memory (*mem, *len: the whole input); beyond
 * that the input goes to a spool file (*spool, rewound), read back as a
 * regular file is. 0, or the exit code (message printed). */
static int
gather(FILE *f, const char *name, char **mem, size_t *len, FILE **spool)
{
    size_t cap = READ_BYTES, got;
    char *buf = xmalloc(cap);
    int err;

    *len = 0;
    *spool = NULL;
    while ((got = fread(buf + *len, 1, cap - *len, f)) > 0) {
        *len += got;
        if (*len < cap)
            continue;
        if (cap >= SPOOL_MEM)
            break;
        cap *= 2;
        buf = xrealloc(buf, cap);
    }
    if (ferror(f)) {
        free(buf);
        cli_error("enqueue: %s: cannot read", name);
        return CLI_RUNTIME;
    }
    if (*len < cap || feof(f)) {
        *mem = buf;
        return 0;
    }
    if ((*spool = spool_open()) == NULL) {
        err = errno;
        free(buf);
        cli_error("enqueue: %s: cannot make a spool file in %s: %s; nothing "
                  "was enqueued",
                  name, getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                  strerror(err));
        return CLI_RUNTIME;
    }
    got = *len;
    do {
        if (fwrite(buf, 1, got, *spool) != got)
            break;
    } while ((got = fread(buf, 1, cap, f)) > 0);
    free(buf); /* keeps errno */
    if (ferror(f)) {
        cli_error("enqueue: %s: cannot read", name);
    } else if (ferror(*spool) || fflush(*spool) != 0 ||
               fseek(*spool, 0, SEEK_SET) != 0) {
        err = errno; /* of the write, flush or seek that failed */
        cli_error("enqueue: %s: cannot write the spool file: %s; nothing was "
                  "enqueued",
                  name, strerror(err ? err : EIO));
    } else {
        return 0;
    }
    fclose(*spool);
    *spool = NULL;
    return CLI_RUNTIME;
}

/* Feeds the input to the stream and ends it (last: commits); 0, or the
 * exit code (message printed). A regular file is read as it comes; other
 * input is gathered first. */
static int
read_input(const char *file, bool last, struct sink *k)
{
    const char *name = strcmp(file, "-") ? file : "stdin";
    FILE *f = strcmp(file, "-") ? fopen(file, "rb") : stdin, *in;
    FILE *spool = NULL;
    char *buf, *mem = NULL, err[1024];
    struct stat sb;
    size_t got, len = 0;
    int rc = 0;

    /* A path that names no readable file is bad input (exit 2), as
     * park resolve --output says of its file. */
    if (f == NULL) {
        int e = errno;
        cli_error("enqueue: %s: %s%s%s", name,
                  e == ENOENT ? "no such file" : "cannot read (",
                  e == ENOENT ? "" : strerror(e), e == ENOENT ? "" : ")");
        return CLI_USAGE;
    }
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        cli_error("enqueue: %s: a folder, not a job file", name);
        if (f != stdin)
            fclose(f);
        return CLI_USAGE;
    }
    in = f;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        if ((rc = gather(f, name, &mem, &len, &spool)) != 0) {
            if (f != stdin)
                fclose(f);
            return k->exit_code = rc;
        }
        in = spool;
    }
    buf = xmalloc(READ_BYTES);
    if (mem != NULL)
        rc = feed_memory(k->e, mem, len, err, sizeof(err));
    while (in != NULL && rc == 0 && (got = fread(buf, 1, READ_BYTES, in)) > 0)
        rc = spec_enqueue_feed(k->e, buf, got, err, sizeof(err));
    if (rc == 0 && in != NULL && ferror(in)) {
        cli_error("enqueue: %s: cannot read%s", name,
                  in == spool ? " the spool file" : "");
        rc = -EIO;
        k->exit_code = CLI_RUNTIME;
    } else if (rc == 0) {
        rc = last ? spec_enqueue_end(k->e, err, sizeof(err))
                  : spec_enqueue_next(k->e, err, sizeof(err));
    }
    free(buf);
    free(mem);
    if (spool != NULL)
        fclose(spool);
    if (f != stdin)
        fclose(f);
    if (rc != 0 && k->exit_code == 0 && spec_enqueue_store_failed(k->e)) {
        write_failed(k);
    } else if (rc != 0 && k->exit_code == 0) {
        cli_error("enqueue: %s: %s", name, err);
        k->exit_code = CLI_USAGE;
    }
    return rc != 0 ? k->exit_code : 0;
}

/* The files to read: every positional argument ("-" once at most), or
 * standard input. 0, or the exit code (message printed). */
static int
check_files(const char **pos, int npos)
{
    bool dash = false;

    for (int i = 0; i < npos; i++) {
        if (strcmp(pos[i], "-") == 0 && dash) {
            cli_error("enqueue: - (standard input) is given twice");
            return CLI_USAGE;
        }
        dash = dash || strcmp(pos[i], "-") == 0;
    }
    return 0;
}

int
cmd_enqueue(struct cli_env *env, int argc, char **argv)
{
    const char *key = NULL, *run_at = NULL, *prio = NULL;
    const char *input_arg = NULL,
               **pos = xcalloc((size_t)argc + 1, sizeof(*pos));
    bool json = false, many = false;
    struct cli_opt opts[] = {
        {"key", &key, NULL},       {"run-at", &run_at, NULL},
        {"priority", &prio, NULL}, {"input", &input_arg, NULL},
        {"json", NULL, &json},     {NULL, NULL, NULL}};
    struct q_enqueue_opts over = {0};
    struct sink k = {.env = env};
    const struct config *cfg = NULL;
    const struct q_enqueue_result *res;
    cJSON *input = NULL;
    int64_t run_after = -1;
    int npos = 0, rc;
    size_t n = 0;

    if ((rc = cli_parse_args(argc, argv, opts, pos, argc, &npos, usage)) != 0)
        goto out;
    if (npos == 0)
        pos[npos++] = "-";
    if ((rc = check_files(pos, npos)) != 0 ||
        (rc = parse_overrides(key, run_at, prio, &over, &run_after)) != 0 ||
        (rc = cli_read_input("enqueue", input_arg, &input)) != 0 ||
        (rc = cli_config(env, &cfg)) != 0)
        goto out;
    /* Tier names are checked only when the config names tiers. */
    k.e = spec_enqueue_new(
        &(struct spec_enqueue_opts){.open = open_store,
                                    .ctx = &k,
                                    .cfg = cfg,
                                    .input = input,
                                    .over = &over,
                                    .has_run_after = run_after >= 0,
                                    .run_after_ms = run_after,
                                    .before_commit = audit_enqueued});
    for (int i = 0; i < npos; i++) {
        if ((rc = read_input(pos[i], i == npos - 1, &k)) != 0)
            goto out;
    }
    res = spec_enqueue_results(k.e, &n, &many);
    print_results(res, n, many, json);
    rc = CLI_OK;
out:
    spec_enqueue_free(k.e);
    if (q_close(k.db) != 0 && rc == CLI_OK)
        rc = CLI_RUNTIME;
    cJSON_Delete(input);
    free(pos);
    return rc;
}

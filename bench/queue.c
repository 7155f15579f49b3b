/* bench/queue.c: queue store throughput, run on demand (never in tests).
 *
 *   build/release/bench/bench_queue [--runs 5] [--single N] [--batch N]
 *       [--backlog N] [--drain N] [--only ROW[,ROW...]] [--dir DIR]
 *       [--db LOCATION]
 *       [--durable no|yes|both] [--tsv]
 *
 * Prints jobs/s, the median of --runs runs, for: enqueue one job per
 * transaction, enqueue 100 per transaction (with validation, and stored
 * only), --batch jobs as JSON lines through the stream of `stepq enqueue`
 * in one transaction, and claim+complete from a backlog with 1 and 4
 * processes (one job per claim, and 32 per claim), each turn's completions
 * committed with its next claim in one transaction as the worker's turns
 * do, each with q_open_opts.durable off and
 * on (SQLite: synchronous=NORMAL and FULL, WAL). Enqueue includes parsing
 * and validating the job's JSON. --drain N times the claim rows over the
 * first N jobs of the backlog (the queue stays as deep; the run shorter).
 *
 * The store is a fresh SQLite file in --dir for every run, or with --db a
 * PostgreSQL location (postgresql://..., postgres://... or libpq's keyword
 * form): every run then gets a fresh schema of its own on that server,
 * made and dropped with psql (on the PATH), and the location is never
 * printed (it may hold a password).
 */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/xalloc.h"
#include "queue/queue.h"
#include "queue/report.h"
#include "spec/spec.h"

static const char job_text[] =
    "{\"name\":\"bench\",\"steps\":[{\"name\":\"summarize\",\"request\":{"
    "\"messages\":[{\"role\":\"user\",\"content\":\"Summarize the merged "
    "pull requests of the night as JSON.\"}],\"max_tokens\":800},"
    "\"expect_json\":[\"summary\"]}]}";

extern char **environ;

static const char *base_dir = "/tmp";
static const char *server; /* --db: a PostgreSQL location, or NULL */
static int run_no;
static int take; /* --drain: jobs the claim rows take of the backlog */

static bool
is_server(const char *loc)
{
    return strncmp(loc, "postgresql://", 13) == 0 ||
           strncmp(loc, "postgres://", 11) == 0 ||
           (strchr(loc, '=') != NULL && strstr(loc, "://") == NULL);
}

/* Runs one SQL command on the server with psql; exits on failure (the
 * benchmark cannot go on without its schema). */
static void
psql(const char *sql)
{
    char *argv[] = {
        "psql", "-X",           "-q", "-v",        "ON_ERROR_STOP=1",
        "-d",   (char *)server, "-c", (char *)sql, NULL};
    pid_t pid;
    int st;
    if (posix_spawnp(&pid, "psql", NULL, NULL, argv, environ) != 0 ||
        waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "bench_queue: psql failed: %s\n", sql);
        exit(1);
    }
}

static void
schema_name(int no, char *buf, size_t size)
{
    snprintf(buf, size, "bench_queue_%d_%d", (int)getpid(), no);
}

/* A fresh store for one run: a new SQLite file in base_dir, or a new
 * schema on the server (the location with its search_path set to it).
 * Caller owns the result; free() it after remove_store(). */
static char *
fresh_store(void)
{
    char *p = xmalloc(strlen(server ? server : base_dir) + 200);
    char name[64], sql[300];
    if (server == NULL) {
        sprintf(p, "%s/bench-queue-%d-%d.db", base_dir, (int)getpid(),
                run_no++);
        unlink(p);
        return p;
    }
    schema_name(run_no++, name, sizeof(name));
    snprintf(sql, sizeof(sql),
             "SET client_min_messages TO warning; "
             "DROP SCHEMA IF EXISTS %s CASCADE; "
             "CREATE SCHEMA %s",
             name, name);
    psql(sql);
    if (is_server(server) && strstr(server, "://") != NULL)
        sprintf(p, "%s%coptions=-csearch_path%%3D%s", server,
                strchr(server, '?') ? '&' : '?', name);
    else
        sprintf(p, "%s options=-csearch_path=%s", server, name);
    return p;
}

/* Removes the store of the latest fresh_store(). */
static void
remove_store(const char *p)
{
    char side[600], name[64];
    if (server != NULL) {
        schema_name(run_no - 1, name, sizeof(name));
        snprintf(side, sizeof(side),
                 "SET client_min_messages TO warning; DROP SCHEMA %s CASCADE",
                 name);
        psql(side);
        return;
    }
    unlink(p);
    snprintf(side, sizeof(side), "%s-wal", p);
    unlink(side);
    snprintf(side, sizeof(side), "%s-shm", p);
    unlink(side);
}

static q_db *
open_or_die(const char *path, bool full)
{
    struct q_open_opts o = {
        .durable = full, .lock_wait_ms = 10000, .keep_body_bytes = 65536};
    q_db *db = NULL;
    if (q_open(path, &o, &db) != 0) {
        fprintf(stderr, "cannot open %s\n", server ? "the server" : path);
        exit(1);
    }
    return db;
}

static struct spec_job *
parse_job(void)
{
    struct spec_job *s = NULL;
    char err[256];
    if (spec_parse(job_text, sizeof(job_text) - 1, NULL, &s, err,
                   sizeof(err)) != 0) {
        fprintf(stderr, "bad bench job: %s\n", err);
        exit(1);
    }
    return s;
}

/* Enqueues n jobs, per at a time in one transaction; returns jobs/s.
 * validate: parse and validate every job's JSON inside the timing (what
 * `stepq enqueue` and stepq_enqueue do); otherwise one job validated
 * before the timing is stored n times (the storage cost alone, as a queue
 * that stores JSON unchecked would measure it). */
static double
bench_enqueue(const char *path, bool full, int n, int per, bool validate)
{
    q_db *db = open_or_die(path, full);
    struct spec_job **v = xcalloc((size_t)per, sizeof(*v));
    struct q_job_new *rows = xcalloc((size_t)per, sizeof(*rows));
    struct q_enqueue_result *r = xcalloc((size_t)per, sizeof(*r));
    struct spec_job *once = validate ? NULL : parse_job();
    int64_t t0, now = clock_now_ms();

    /* Stored only: the rows of the one job are made before the timing. */
    for (int i = 0; !validate && i < per; i++)
        spec_job_row(once, &rows[i]);
    t0 = clock_mono_ms();
    for (int done = 0; done < n; done += per) {
        for (int i = 0; validate && i < per; i++) {
            v[i] = parse_job();
            spec_job_row(v[i], &rows[i]);
        }
        if (q_enqueue(db, rows, (size_t)per, NULL, now, r) != 0) {
            fprintf(stderr, "enqueue failed\n");
            exit(1);
        }
        for (int i = 0; validate && i < per; i++)
            spec_job_free(v[i]);
    }
    spec_job_free(once);
    double secs = (double)(clock_mono_ms() - t0) / 1000.0;
    free(v);
    free(rows);
    free(r);
    q_close(db);
    return n / secs;
}

/* The batches of bench_stream: written inside the run's transaction. */
static int
stream_batch(void *ctx, struct spec_batch *b)
{
    struct q_enqueue_result *r = xcalloc(b->n, sizeof(*r));
    int rc = q_enqueue(ctx, b->rows, b->n, NULL, clock_now_ms(), r);

    free(r);
    return rc;
}

/* Enqueues n jobs given as JSON lines, as `stepq enqueue FILE` does
 * without the process: one stream (it takes 64 KiB at a time), validated
 * and written batch by batch (SPEC_BATCH_JOBS) inside one transaction;
 * returns jobs/s. */
static double
bench_stream(const char *path, bool full, int n)
{
    size_t one = sizeof(job_text) - 1, len = (size_t)n * (one + 1);
    char *text = xmalloc(len + 1), err[256];
    q_db *db = open_or_die(path, full);
    spec_stream *st;
    int64_t t0;
    int rc;

    for (int i = 0; i < n; i++) {
        memcpy(text + (size_t)i * (one + 1), job_text, one);
        text[(size_t)i * (one + 1) + one] = '\n';
    }
    t0 = clock_mono_ms();
    st = spec_stream_new(NULL, SPEC_BATCH_JOBS, stream_batch, db);
    rc = q_tx_begin(db);
    if (rc == 0)
        rc = spec_stream_feed(st, text, len, err, sizeof(err));
    if (rc == 0)
        rc = spec_stream_end(st, err, sizeof(err));
    if (rc == 0)
        rc = q_tx_commit(db);
    if (rc != 0) {
        fprintf(stderr, "stream enqueue failed: %d\n", rc);
        exit(1);
    }
    double secs = (double)(clock_mono_ms() - t0) / 1000.0;
    spec_stream_free(st);
    free(text);
    q_close(db);
    return n / secs;
}

static void
fill_backlog(const char *path, int n)
{
    q_db *db = open_or_die(path, false);
    struct spec_job **v = xcalloc(1000, sizeof(*v));
    struct q_job_new rows[1000];
    struct q_enqueue_result *r = xcalloc(1000, sizeof(*r));
    int64_t now = clock_now_ms() - 1000;

    for (int done = 0; done < n; done += 1000) {
        int k = n - done < 1000 ? n - done : 1000;
        for (int i = 0; i < k; i++)
            v[i] = parse_job();
        for (int i = 0; i < k; i++)
            spec_job_row(v[i], &rows[i]);
        if (q_enqueue(db, rows, (size_t)k, NULL, now, r) != 0)
            exit(1);
        for (int i = 0; i < k; i++)
            spec_job_free(v[i]);
    }
    free(v);
    free(r);
    q_close(db);
}

/* Completes the n jobs of got (none: n is 0) and claims up to want more
 * into *next, *nnext, in one transaction, as a worker's turn does: its
 * completions and its next claims commit together. */
static int
turn(q_db *db, const char *name, const struct q_job *got, size_t n, int want,
     struct q_job **next, size_t *nnext)
{
    int64_t now = clock_now_ms();
    int rc = q_tx_begin(db);

    *next = NULL;
    *nnext = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = q_complete(db, got[i].id, name, now);
    if (rc == 0 && want > 0)
        rc = q_claim(db, name, now, 60000, (size_t)want, next, nnext);
    if (rc == -ENOENT)
        rc = 0; /* nothing left to claim */
    if (rc == 0 && (rc = q_tx_commit(db)) == 0)
        return 0;
    q_tx_rollback(db); /* a no-op after a failed commit, which ended it */
    q_jobs_free(*next, *nnext);
    *next = NULL;
    *nnext = 0;
    return rc;
}

/* One worker process: claim `per` at a time and complete them, each
 * turn's completions with the next claim in one transaction, until
 * nothing is left or it has done quota. */
static int
drain(const char *path, bool full, int per, int id, int quota)
{
    q_db *db = open_or_die(path, full);
    char name[32];
    struct q_job *got = NULL, *next;
    size_t n = 0, nnext;
    int rc = 0, done = 0;

    snprintf(name, sizeof(name), "bench-%d", id);
    /* SQLite's busy wait is not fair: under FULL sync a process can wait
     * out its busy timeout (-EAGAIN). A worker retries then; so does this
     * one, for every call. */
    for (;;) {
        int left = quota - done - (int)n;
        int want = left < per ? left : per;
        while ((rc = turn(db, name, got, n, want, &next, &nnext)) == -EAGAIN)
            ;
        if (rc != 0)
            break;
        done += (int)n;
        q_jobs_free(got, n);
        got = next;
        n = nnext;
        if (n == 0)
            break;
    }
    q_jobs_free(got, n);
    q_close(db);
    return rc == 0 || done >= quota ? done : -1;
}

/* Fills a backlog, then times procs processes draining `take` jobs of it
 * (take / procs each; all of it when take is 0 or above the backlog). */
static double
bench_claim(const char *path, bool full, int backlog, int upto, int procs,
            int per)
{
    pid_t pids[16];
    int64_t t0;

    int quota = upto > 0 && upto < backlog ? upto / procs : backlog;
    int total = upto > 0 && upto < backlog ? quota * procs : backlog;

    fill_backlog(path, backlog);
    t0 = clock_mono_ms();
    for (int p = 0; p < procs; p++) {
        pids[p] = fork();
        if (pids[p] == 0)
            _exit(drain(path, full, per, p, quota) >= 0 ? 0 : 1);
    }
    for (int p = 0; p < procs; p++) {
        int st;
        waitpid(pids[p], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "worker %d failed\n", p);
            exit(1);
        }
    }
    return total / ((double)(clock_mono_ms() - t0) / 1000.0);
}

static const char usage[] =
    "usage: bench_queue [--runs N] [--single N] [--batch N] [--backlog N]\n"
    "                   [--drain N]\n"
    "                   [--only ROW[,ROW...]] [--dir DIR] [--db LOCATION]\n"
    "                   [--durable no|yes|both] [--tsv]\n"
    "ROW 0-8 runs rows of the table (0: enqueue 1 per transaction, 1: 100\n"
    "per transaction, 2-5: claim+complete, 6-7: enqueue stored only, 8:\n"
    "--batch jobs as JSON lines through a stream in one transaction).\n"
    "--db: a PostgreSQL location (a fresh schema per run, made with psql),\n"
    "or \"sqlite\" (the default: a fresh file per run in --dir).\n"
    "--drain N: the claim rows time draining N jobs of the backlog (all of\n"
    "it by default), N/processes each.\n"
    "--tsv: one line per row: name, the two medians, then each column's\n"
    "runs comma-separated (0 for a column not run).\n";

static const char *const names[] = {
    "enqueue, 1 per transaction",
    "enqueue, 100 per transaction",
    "claim+complete, 1 process, 1 per claim",
    "claim+complete, 4 processes, 1 per claim",
    "claim+complete, 1 process, 32 per claim",
    "claim+complete, 4 processes, 32 per claim",
    "enqueue, 1 per transaction, stored only",
    "enqueue, 100 per transaction, stored only",
    "enqueue, JSON lines streamed, 1 transaction"};

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One run of row b on a fresh store; returns jobs/s. */
static double
run_row(int b, bool full, int single, int batch, int backlog)
{
    char *p = fresh_store();
    double r;
    switch (b) {
    case 0:
        r = bench_enqueue(p, full, single, 1, true);
        break;
    case 1:
        r = bench_enqueue(p, full, batch, 100, true);
        break;
    case 6:
        r = bench_enqueue(p, full, single, 1, false);
        break;
    case 7:
        r = bench_enqueue(p, full, batch, 100, false);
        break;
    case 8:
        r = bench_stream(p, full, batch);
        break;
    default:
        r = bench_claim(p, full, backlog, take, b % 2 ? 4 : 1, b < 4 ? 1 : 32);
        break;
    }
    remove_store(p);
    free(p);
    return r;
}

/* Parses "--only 1,3": which of the 9 rows run. */
static int
parse_rows(const char *v, bool *want)
{
    char *end;
    for (;;) {
        long b = strtol(v, &end, 10);
        if (end == v || b < 0 || b > 8)
            return -EINVAL;
        want[b] = true;
        if (*end == '\0')
            return 0;
        if (*end != ',')
            return -EINVAL;
        v = end + 1;
    }
}

int
main(int argc, char **argv)
{
    int runs = 5, single = 20000, batch = 100000, backlog = 100000;
    bool want[9] = {false}, any = false, tsv = false, cols[2] = {true, true};

    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        if (strcmp(argv[i], "--tsv") == 0) {
            tsv = true;
            i--;
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "bench_queue: %s needs a value\n%s", argv[i],
                    usage);
            return 2;
        }
        if (strcmp(argv[i], "--runs") == 0)
            runs = atoi(v);
        else if (strcmp(argv[i], "--single") == 0)
            single = atoi(v);
        else if (strcmp(argv[i], "--batch") == 0)
            batch = atoi(v);
        else if (strcmp(argv[i], "--backlog") == 0)
            backlog = atoi(v);
        else if (strcmp(argv[i], "--drain") == 0)
            take = atoi(v);
        else if (strcmp(argv[i], "--only") == 0 && parse_rows(v, want) == 0)
            any = true;
        else if (strcmp(argv[i], "--dir") == 0)
            base_dir = v;
        else if (strcmp(argv[i], "--db") == 0 && strcmp(v, "sqlite") == 0)
            server = NULL;
        else if (strcmp(argv[i], "--db") == 0 && is_server(v))
            server = v;
        else if (strcmp(argv[i], "--durable") == 0 &&
                 (strcmp(v, "no") == 0 || strcmp(v, "yes") == 0 ||
                  strcmp(v, "both") == 0)) {
            cols[0] = strcmp(v, "yes") != 0;
            cols[1] = strcmp(v, "no") != 0;
        } else {
            fprintf(stderr, "bench_queue: bad option %s\n%s", argv[i], usage);
            return 2;
        }
    }
    if (runs < 1 || runs > 99 || single < 1 || batch < 100 || backlog < 1 ||
        take < 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    if (!tsv)
        printf("%-44s %12s %12s\n", "benchmark (median of runs, jobs/s)",
               server ? "not durable" : "NORMAL", server ? "durable" : "FULL");
    for (int b = 0; b < 9; b++) {
        double med[2] = {0, 0}, r[2][99] = {{0}};
        if (any && !want[b])
            continue;
        for (int full = 0; full < 2; full++) {
            for (int k = 0; cols[full] && k < runs; k++)
                r[full][k] = run_row(b, full, single, batch, backlog);
            qsort(r[full], (size_t)runs, sizeof(double), cmp_double);
            med[full] = r[full][runs / 2];
        }
        if (!tsv) {
            printf("%-44s %12.0f %12.0f\n", names[b], med[0], med[1]);
            fflush(stdout);
            continue;
        }
        printf("%s\t%.0f\t%.0f", names[b], med[0], med[1]);
        for (int full = 0; full < 2; full++)
            for (int k = 0; k < runs; k++)
                printf("%s%.0f", k ? "," : "\t", r[full][k]);
        printf("\n");
        fflush(stdout);
    }
    return 0;
}

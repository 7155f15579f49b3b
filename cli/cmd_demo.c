/* cmd_demo.c: stepq demo — a self-contained tour against mock tiers. */
#include "cli/cli.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "demo/demo.h"
#include "queue/queue.h"
#include "queue/report.h"

static const char usage[] =
    "usage: stepq demo [--jobs N]\n"
    "\n"
    "A self-contained tour that needs nothing but this binary. It starts\n"
    "three mock endpoints on free loopback ports: tier \"free\" (a\n"
    "per-minute limit and a small daily token allowance that runs out),\n"
    "tier \"backup\" (slower, a short 5xx storm) and a comments API (its\n"
    "own 5xx storm). It creates a database in a fresh folder under $TMPDIR\n"
    "(or /tmp), enqueues a nightly batch of changelog jobs (summarize_prs,\n"
    "write_changelog, post_comment; half of the posts carry an idempotency\n"
    "key) and one triage agent (tier \"agent\": its model labels an issue\n"
    "with two tool calls, then asks to post a comment, which is parked for\n"
    "approval before it is sent), and runs the real worker until the queue\n"
    "drains, in under 30 s, with a live progress line. It then prints what\n"
    "each outcome and decision did, which steps were parked and why, and\n"
    "the commands to inspect and resolve them. The folder and its database\n"
    "are kept. No API key is needed; --db and --config are ignored. Ctrl-C\n"
    "stops the worker early and still prints the summary.\n"
    "\n"
    "  --jobs N   changelog jobs in the batch (1 to 200, default 20)\n";

static volatile sig_atomic_t interrupted;

static void
on_interrupt(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* Outside the demo's own watchers (demo_open to demo_stop), Ctrl-C only
 * marks the demo interrupted, so that the summary is still printed. */
static void
catch_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* ---- progress --------------------------------------------------------- */

struct progress {
    bool tty;
    int width;              /* terminal columns */
    bool printed;           /* a tty line is showing */
    struct demo_tally last; /* last one printed (plain mode) */
};

static bool
same_tally(const struct demo_tally *a, const struct demo_tally *b)
{
    struct demo_tally x = *a, y = *b;

    x.elapsed_ms = y.elapsed_ms = 0;
    return memcmp(&x, &y, sizeof(x)) == 0;
}

/* Progress line form i (0 long, 1 medium, 2 short) into buf. */
static int
form(int i, const struct demo_tally *t, char *buf, size_t len)
{
    double s = (double)t->elapsed_ms / 1000.0;
    long long done = t->jobs[Q_JOB_SUCCEEDED], run = t->jobs[Q_JOB_RUNNING];
    long long park = t->jobs[Q_JOB_PARKED], fail = t->jobs[Q_JOB_FAILED];
    long long wait = t->jobs[Q_JOB_QUEUED]; /* behind a backoff or a wall */
    long long fr = t->free_requests, br = t->backup_requests;
    long long hr = t->http_requests, thr = t->throttles, sw = t->switches;

    switch (i) {
    case 0:
        return snprintf(buf, len,
                        "[%5.1fs] jobs %lld done, %lld running, %lld waiting, "
                        "%lld parked, %lld failed | requests free %lld, backup "
                        "%lld, posts %lld | throttles absorbed %lld | tier "
                        "switches %lld",
                        s, done, run, wait, park, fail, fr, br, hr, thr, sw);
    case 1:
        return snprintf(buf, len,
                        "[%5.1fs] done %lld, running %lld, waiting %lld, "
                        "parked %lld, failed %lld | free %lld, backup %lld, "
                        "posts %lld | throttles %lld, switches %lld",
                        s, done, run, wait, park, fail, fr, br, hr, thr, sw);
    default:
        return snprintf(buf, len,
                        "[%4.1fs] done %lld run %lld wait %lld park %lld fail "
                        "%lld | free %lld backup %lld post %lld | thr %lld sw "
                        "%lld",
                        s, done, run, wait, park, fail, fr, br, hr, thr, sw);
    }
}

/* The progress line: the long form, else a shorter one that fits width
 * (a terminal line that wraps breaks the carriage-return redraw). */
static void
format_tally(const struct demo_tally *t, int width, char *buf, size_t len)
{
    for (int i = 0; i < 3; i++) {
        if (form(i, t, buf, len) < width || width <= 0)
            return;
    }
    if (width > 1 && strlen(buf) >= (size_t)width)
        buf[width - 1] = '\0';
}

/* Runs on the demo's thread: the caller's thread is inside the worker and
 * prints nothing until the demo thread is joined. */
static void
on_progress(const struct demo_tally *t, void *arg)
{
    struct progress *p = arg;
    char line[512];

    if (!p->tty && same_tally(t, &p->last))
        return;
    format_tally(t, p->tty ? p->width : 0, line, sizeof(line));
    if (p->tty) {
        printf("\r\033[K%s", line);
        p->printed = true;
    } else {
        printf("%s\n", line);
        p->last = *t;
    }
    fflush(stdout);
}

/* ---- summary ---------------------------------------------------------- */

/* What one kind of ledger entry meant, in the demo's words (one line). */
static const char *
explain(const struct q_attempt_group *g)
{
    const char *o = g->outcome, *dec = g->decision;
    bool http = g->tier == NULL;

    if (o == NULL)
        return "no answer recorded: in flight when the worker stopped";
    if (dec == NULL)
        return "answered, no decision recorded";
    if (strcmp(dec, "tool_calls") == 0)
        return "agent turn: the model called tools, each call recorded "
               "before it is sent";
    if (strcmp(dec, "tool_result") == 0)
        return "agent tool call: sent once, its result goes back to the "
               "model";
    if (strcmp(dec, "park_for_human") == 0 && strcmp(o, "approval") == 0)
        return "agent call that needs approval: parked before it was sent, "
               "with its arguments";
    if (strcmp(dec, "commit") == 0)
        return http ? "posted: the job is done"
                    : "answered: output committed, the job moved on";
    if (strcmp(dec, "backoff_retry") == 0) {
        if (strcmp(o, "soft_throttle") == 0)
            return "rpm limit: waited as asked, resent on the same tier";
        if (strcmp(o, "hard_quota") == 0)
            return "the wall resets before the deadline: rescheduled";
        if (http)
            return "5xx on a post with an idempotency key: safe, resent";
        return "5xx storm: backed off with jitter, retried the same tier";
    }
    if (strcmp(dec, "switch_tier_replay") == 0) {
        if (strcmp(o, "hard_quota") == 0)
            return "quota wall: tier marked exhausted, replayed on the next";
        return "replayable step: replayed on the next tier";
    }
    if (strcmp(dec, "park_for_human") == 0) {
        if (strcmp(o, "hard_quota") == 0 || strcmp(o, "refused") == 0)
            return "wall on a step with no idempotency key: parked";
        return "no idempotency key, the write may have landed: parked";
    }
    if (strcmp(dec, "degrade_then_retry") == 0)
        return "output cut or malformed: smaller request, retried once";
    if (strcmp(dec, "fail_loud") == 0)
        return "no safe move left: the job failed, raw body kept";
    return "";
}

/* Who made the attempts of g: a tier, an agent's tool call, or a post. */
static const char *
who(const struct q_attempt_group *g)
{
    const char *o = g->outcome ? g->outcome : "", *dec = g->decision;

    if (g->tier != NULL)
        return g->tier;
    if (dec != NULL &&
        (strcmp(dec, "tool_result") == 0 ||
         (strcmp(dec, "park_for_human") == 0 && strcmp(o, "approval") == 0)))
        return "tool";
    return "post";
}

static void
print_ledger(q_db *db, const struct demo_tally *t)
{
    struct q_attempt_group *g = NULL;
    size_t n = 0;
    char what[96];

    if (q_stats_attempts(db, &g, &n) != 0) {
        cli_error("demo: cannot read the attempts ledger");
        return;
    }
    printf("\nWhat happened (%lld requests, from the attempts ledger):\n",
           (long long)t->attempts);
    for (size_t i = 0; i < n; i++) {
        if (g[i].reason != NULL)
            snprintf(what, sizeof(what), "%s (%s)",
                     g[i].outcome ? g[i].outcome : "none", g[i].reason);
        else
            snprintf(what, sizeof(what), "%s",
                     g[i].outcome ? g[i].outcome : "none");
        printf("  %-8s %-34s -> %-19s x%lld\n", who(&g[i]), what,
               g[i].decision ? g[i].decision : "-", (long long)g[i].count);
        printf("           %s\n", explain(&g[i]));
    }
    q_attempt_groups_free(g, n);
}

static void
print_mocks(const demo *d)
{
    printf("\nWhat the mock endpoints saw:\n");
    for (int i = 0; i < DEMO_NENDPOINTS; i++) {
        const struct demo_endpoint *e = demo_endpoint_get(d, i);
        struct mock_stats s;

        uint64_t counted, other;

        demo_mock_stats(d, i, &s);
        /* The rest are the script's own errors (a post's daily limit, a
         * failed post): counted so that the columns add up. */
        counted = s.ok + s.rate_limited + s.quota + s.storm;
        other = s.requests > counted ? s.requests - counted : 0;
        printf("  %-8s %llu requests: %llu ok, %llu rate-limited, %llu over "
               "quota, %llu in a storm, %llu other errors\n",
               e->name, (unsigned long long)s.requests,
               (unsigned long long)s.ok, (unsigned long long)s.rate_limited,
               (unsigned long long)s.quota, (unsigned long long)s.storm,
               (unsigned long long)other);
    }
}

/* Prints s cut to max bytes, with "..." when cut. */
static void
print_cut(const char *s, size_t max)
{
    size_t len = strlen(s);

    if (len <= max)
        printf("%s", s);
    else
        printf("%.*s...", (int)max, s);
}

/* Writes s into buf (len bytes) ready to paste into a POSIX shell: as is
 * when it holds only safe characters, else in single quotes. */
static const char *
shell_word(const char *s, char *buf, size_t len)
{
    size_t o = 0;

    if (s[0] != '\0' &&
        strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
                  "qrstuvwxyz0123456789/._+-=:,@%") == strlen(s)) {
        snprintf(buf, len, "%s", s);
        return buf;
    }
    buf[o++] = '\'';
    for (; *s != '\0' && o + 5 < len; s++) {
        if (*s == '\'') {
            memcpy(buf + o, "'\\''", 4);
            o += 4;
        } else {
            buf[o++] = *s;
        }
    }
    buf[o++] = '\'';
    buf[o] = '\0';
    return buf;
}

/* The command a user types to run this binary again: "stepq" when the
 * stepq found on $PATH is this very file, else this binary's own path (a
 * newcomer who ran scripts/demo.sh has no stepq on $PATH, and the closing
 * commands must work as printed). Written into buf, shell-quoted. */
static const char *
self_command(char *buf, size_t len)
{
    char exe[PATH_MAX], cand[PATH_MAX];
    const char *path = getenv("PATH");
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    struct stat self, st;

    if (n <= 0 || stat("/proc/self/exe", &self) != 0) {
        snprintf(buf, len, "stepq");
        return buf;
    }
    exe[n] = '\0';
    while (path != NULL && *path != '\0') {
        size_t dl = strcspn(path, ":");
        if (dl > 0 && (int)dl < (int)sizeof(cand) - 7) {
            snprintf(cand, sizeof(cand), "%.*s/stepq", (int)dl, path);
            if (stat(cand, &st) == 0) {
                if (st.st_dev == self.st_dev && st.st_ino == self.st_ino) {
                    snprintf(buf, len, "stepq");
                    return buf;
                }
                break; /* another stepq comes first on $PATH */
            }
        }
        path += dl + (path[dl] == ':');
    }
    return shell_word(exe, buf, len);
}

/* The commands that resolve post item id and approval item appr (0:
 * none of that kind). */
static void
print_resolve(const char *self, const char *path, int64_t id, int64_t appr)
{
    if (id > 0) {
        printf("  %s --db %s park resolve %lld --retry\n"
               "      send the post again (run a worker with a reachable "
               "endpoint after it)\n",
               self, path, (long long)id);
        printf(
            "  %s --db %s park resolve %lld --skip\n"
            "      go on without the post (the next worker finishes the job)\n",
            self, path, (long long)id);
        printf(
            "  %s --db %s park resolve %lld --done --output -\n"
            "      you posted it by hand: record the output (the next worker\n"
            "      finishes the job)\n",
            self, path, (long long)id);
    }
    if (appr > 0) {
        printf("  %s --db %s park resolve %lld --approve --by you\n"
               "      let the agent's comment go as shown (--args - to edit "
               "it; the next\n      worker posts it and asks the model "
               "again)\n",
               self, path, (long long)appr);
        printf("  %s --db %s park resolve %lld --reject --note 'not in "
               "public'\n"
               "      never posted; the model receives your note as the "
               "result\n",
               self, path, (long long)appr);
    }
}

static int64_t
print_parked(q_db *db, const char *path)
{
    char self[PATH_MAX + 64], db_word[PATH_MAX + 64];
    struct q_park_brief *p = NULL;
    size_t n = 0;
    int64_t first = 0, appr = 0, job = 0;

    if (q_stats_park_open(db, 0, &p, &n) != 0) {
        cli_error("demo: cannot read the park table");
        return 0;
    }
    if (n == 0) {
        printf("\nNothing was parked this time (the storms fell on posts "
               "with idempotency keys).\n");
    } else {
        printf("\nParked for a human (%zu):\n", n);
        job = p[0].job_id;
    }
    for (size_t i = 0; i < n; i++) {
        bool approval = strcmp(p[i].reason, "approval") == 0;
        if (approval && appr == 0)
            appr = p[i].id;
        else if (!approval && first == 0)
            first = p[i].id;
        printf("  park %lld: job %lld %s, step %s, reason %s\n",
               (long long)p[i].id, (long long)p[i].job_id, p[i].job_name,
               p[i].step, p[i].reason);
        if (p[i].error != NULL) {
            printf("      ");
            print_cut(p[i].error, 90);
            printf("\n");
        }
    }
    self_command(self, sizeof(self));
    path = shell_word(path, db_word, sizeof(db_word));
    printf("\nInspect and resolve:\n");
    printf("  %s --db %s park list\n", self, path);
    if (n > 0) {
        printf("  %s --db %s park show %lld\n", self, path, (long long)p[0].id);
        printf("  %s --db %s jobs show %lld\n", self, path, (long long)job);
        print_resolve(self, path, first, appr);
    }
    q_park_briefs_free(p, n);
    return (int64_t)n;
}

static void
print_failed(q_db *db)
{
    struct q_job *jobs = NULL;
    size_t n = 0;

    if (q_jobs_list(db, Q_JOB_FAILED, 0, 0, &jobs, &n) != 0 || n == 0) {
        q_jobs_free(jobs, n);
        return;
    }
    printf("\nFailed (%zu):\n", n);
    for (size_t i = 0; i < n; i++) {
        printf("  job %lld %s: ", (long long)jobs[i].id, jobs[i].name);
        print_cut(jobs[i].error ? jobs[i].error : "(no error)", 90);
        printf("\n");
    }
    q_jobs_free(jobs, n);
}

static int
print_summary(demo *d, bool stopped_early)
{
    const struct demo_paths *paths = demo_paths_get(d);
    struct demo_tally t;
    q_db *db = NULL;
    int64_t left;

    if (q_open(paths->db, NULL, &db) != 0 ||
        demo_tally_read(db, demo_started_ms(d), &t) != 0) {
        cli_error("demo: cannot read %s", paths->db);
        q_close(db);
        return CLI_RUNTIME;
    }
    left = t.jobs[Q_JOB_QUEUED] + t.jobs[Q_JOB_RUNNING];
    printf("\n%s in %.1f s: %lld succeeded, %lld parked, %lld failed",
           left > 0 ? "Stopped" : "Done", (double)t.elapsed_ms / 1000.0,
           (long long)t.jobs[Q_JOB_SUCCEEDED], (long long)t.jobs[Q_JOB_PARKED],
           (long long)t.jobs[Q_JOB_FAILED]);
    if (left > 0)
        printf(", %lld not finished (%s)", (long long)left,
               stopped_early ? "stopped early"
                             : "due later than the next minute");
    printf(".\n");
    printf("jobs: %lld succeeded, %lld parked, %lld failed, %lld queued, "
           "%lld running, %lld cancelled; park items open: %lld\n",
           (long long)t.jobs[Q_JOB_SUCCEEDED], (long long)t.jobs[Q_JOB_PARKED],
           (long long)t.jobs[Q_JOB_FAILED], (long long)t.jobs[Q_JOB_QUEUED],
           (long long)t.jobs[Q_JOB_RUNNING], (long long)t.jobs[Q_JOB_CANCELLED],
           (long long)t.park_open);
    print_ledger(db, &t);
    print_mocks(d);
    print_parked(db, paths->db);
    print_failed(db);
    if (q_close(db) != 0)
        cli_error("demo: %s did not close cleanly", paths->db);
    printf("\nKept in %s:\n", paths->dir);
    printf("  stepq.db       the database: try the commands above on it\n");
    printf("  stepq.json     the config (its mock endpoints are gone now)\n");
    printf("  jobs.jsonl     the batch as enqueued\n");
    printf("  worker.log     one JSON line per attempt\n");
    printf("  mock-*.log     one JSON line per request each mock saw\n");
    printf("database: %s\n", paths->db);
    return CLI_OK;
}

static void
print_header(const demo *d, int njobs)
{
    const struct demo_paths *paths = demo_paths_get(d);

    printf("stepq demo: %d nightly changelog jobs, each summarize_prs -> "
           "write_changelog -> post_comment\n",
           njobs);
    for (int i = 0; i < DEMO_NENDPOINTS; i++) {
        const struct demo_endpoint *e = demo_endpoint_get(d, i);
        printf("  %-8s %-28s %s\n", e->name, e->url, e->role);
    }
    printf("  every other post has an idempotency key; the rest must never "
           "be sent twice\n");
    printf("  plus a triage agent (tier agent): it labels issue 412 with two "
           "tool calls,\n  then asks to post a comment, which waits for "
           "your approval\n");
    printf("  database %s\n\n", paths->db);
    fflush(stdout);
}

static int
parse_jobs(const char *s, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1 || v > DEMO_JOBS_MAX) {
        cli_error("demo: --jobs must be a whole number from 1 to %d, not %s",
                  DEMO_JOBS_MAX, s);
        return CLI_USAGE;
    }
    *out = (int)v;
    return 0;
}

int
cmd_demo(struct cli_env *env, int argc, char **argv)
{
    const char *jobs = NULL;
    struct cli_opt opts[] = {{"jobs", &jobs, NULL}, {NULL, NULL, NULL}};
    struct demo_opts o = {0};
    struct progress p = {0};
    struct winsize ws;
    demo *d = NULL;
    char err[512];
    int npos = 0, rc, wrc = 0;

    (void)env;
    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0)
        return rc;
    o.njobs = DEMO_JOBS_DEFAULT;
    if (jobs != NULL && (rc = parse_jobs(jobs, &o.njobs)) != 0)
        return rc;
    p.tty = isatty(STDOUT_FILENO);
    p.width = 80;
    if (p.tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        p.width = ws.ws_col;
    o.progress_ms = p.tty ? 200 : 1000;
    o.on_progress = on_progress;
    o.arg = &p;
    catch_signals();
    if ((rc = demo_open(&o, &d, err, sizeof(err))) != 0) {
        cli_error("demo: %s", err);
        return CLI_RUNTIME;
    }
    print_header(d, o.njobs);
    if (!interrupted)
        wrc = demo_run(d);
    demo_stop(d);
    catch_signals();
    if (demo_was_interrupted(d))
        interrupted = 1;
    if (p.printed)
        printf("\n");
    if (wrc != 0)
        cli_error("demo: the worker could not run (see %s)",
                  demo_paths_get(d)->worker_log);
    if (demo_was_cut(d))
        printf("Time limit reached: the worker was stopped.\n");
    else if (interrupted)
        printf("Interrupted: the worker gave unfinished jobs back to the "
               "queue.\n");
    rc = print_summary(d, interrupted || demo_was_cut(d));
    demo_close(d);
    return wrc != 0 ? CLI_RUNTIME : rc;
}

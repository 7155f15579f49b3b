/* demo.c: the set-up, the thread that serves the mocks and samples
 * progress, and the worker run of `stepq demo`.
 *
 * The mocks run on their own libuv loop in a second thread, because
 * worker_run owns the caller's thread until the queue drains. The same
 * loop carries a timer that reads the database through its own connection
 * (WAL lets it read while the worker writes) and hands a tally to the
 * progress callback, and an async handle that stops it all. Handles are
 * initialised before the thread starts (pthread_create orders those writes
 * before the thread's first read); after that only the thread touches the
 * loop, until it is joined.
 */
#include "demo/demo.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "spec/spec.h"
#include "worker/worker.h"

#define PROGRESS_MS_DEFAULT 250
#define LIMIT_MS_DEFAULT    25000
#define DEMO_CONCURRENCY    8
#define DEMO_GRACE_MS       2000

/* The free tier: a per-minute limit (its window shortened to 2 s so the
 * demo sees it several times) and a daily token allowance that runs out
 * part way through the batch. The worker's config knows neither: like a
 * real provider, the endpoint tells it. */
static const char free_script[] =
    "{\"model\": \"free-small\", \"latency_ms\": 250, \"jitter_ms\": 250,\n"
    " \"rpm\": 6, \"rpm_window_ms\": 2000, \"allowance_tokens\": 600}\n";

/* The backup tier: slower, and a short 5xx storm once it gets busy. */
static const char backup_script[] =
    "{\"model\": \"backup-large\", \"latency_ms\": 400, \"jitter_ms\": 300,\n"
    " \"storm\": {\"status\": 503, \"requests\": 3, \"after\": 4}}\n";

/* The comments API of the last step. Each trouble is tied to one
 * repository, so every run tells the same story: posts with an
 * idempotency key (web, sdk-python) ride out their 5xx answers, the post
 * for search (no key) gets a 502 and may have been written, and billing
 * (no key) meets a daily limit. */
static const char comments_script[] =
    "{\"latency_ms\": 100, \"jitter_ms\": 50, \"routes\": [\n"
    " {\"path\": \"/repos/web\", \"latency_ms\": 100,\n"
    "  \"storm\": {\"status\": 503, \"requests\": 2}},\n"
    " {\"path\": \"/repos/sdk-python\", \"latency_ms\": 100,\n"
    "  \"storm\": {\"status\": 502, \"requests\": 1}},\n"
    " {\"path\": \"/repos/search\", \"latency_ms\": 100,\n"
    "  \"storm\": {\"status\": 502, \"requests\": 1}},\n"
    " {\"path\": \"/repos/billing\", \"latency_ms\": 100,\n"
    "  \"answers\": [{\"status\": 429, \"body\": {\"error\": {\"message\":\n"
    "   \"You have reached the daily limit of comments for this "
    "installation\", \"code\": \"daily_limit\"}}}]}]}\n";

static const struct {
    const char *name;
    const char *role;
    const char *script;
    const char *path; /* base path of the URL */
} endpoints[DEMO_NENDPOINTS] = {
    {"free", "tier 1: rpm limit, small daily allowance", free_script, "/v1"},
    {"backup", "tier 2: slower, short 5xx storm", backup_script, "/v1"},
    {"comments", "comments API: 5xx on some posts, a daily limit",
     comments_script, ""},
};

static const char *const repos[] = {
    "api",     "web",    "cli",        "docs",   "billing", "auth",    "search",
    "mobile",  "infra",  "sdk-python", "sdk-go", "ingest",  "reports", "admin",
    "gateway", "notify", "storage",    "sched",  "metrics", "website",
};

static const char *const prs[] = {
    "fix login redirect loop",
    "bump libuv to 1.48",
    "add retry jitter to the uploader",
    "drop Python 3.8 support",
    "cache tier state per worker",
    "document the park table",
    "speed up the claim query",
    "handle 529 as overloaded",
    "stream large exports",
    "rotate API keys without restart",
    "fix a race in the heartbeat",
};

struct demo {
    struct demo_opts opts;
    int64_t started_ms;
    struct config *cfg;                   /* owned */
    char *paths_buf[5 + DEMO_NENDPOINTS]; /* owned strings of paths */
    struct demo_paths paths;
    struct demo_endpoint ep[DEMO_NENDPOINTS];
    struct mock_stats stats[DEMO_NENDPOINTS];
    /* The side loop and what runs on it. */
    uv_loop_t loop;
    uv_async_t stop;
    uv_timer_t tick;
    uv_signal_t sigint;
    uv_signal_t sigterm;
    mock *mocks[DEMO_NENDPOINTS];
    q_db *reader; /* opened and closed on the side thread */
    pthread_t thread;
    bool loop_ready;
    bool thread_started;
    bool stopped;
    atomic_bool worker_running;
    atomic_bool cut;
    atomic_bool interrupted;
};

/* ---- files ------------------------------------------------------------ */

static char *
join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = xmalloc(n);

    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int
write_text(const char *path, const char *text, char *err, size_t len)
{
    FILE *f = fopen(path, "w");
    int rc = 0;

    if (f == NULL || fputs(text, f) == EOF)
        rc = -errno;
    if (f != NULL && fclose(f) != 0 && rc == 0)
        rc = -errno;
    if (rc != 0)
        snprintf(err, len, "cannot write %s: %s", path, strerror(-rc));
    return rc;
}

static int
make_dir(demo *d, char *err, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    char *tpl;
    char name[40];

    if (tmp == NULL || tmp[0] == '\0')
        tmp = "/tmp";
    tpl = join(tmp, "stepq-demo-XXXXXX");
    if (mkdtemp(tpl) == NULL) {
        int rc = -errno;
        snprintf(err, len, "cannot make a folder in %s: %s", tmp,
                 strerror(errno));
        free(tpl);
        return rc;
    }
    d->paths_buf[0] = tpl;
    d->paths_buf[1] = join(tpl, "stepq.db");
    d->paths_buf[2] = join(tpl, "stepq.json");
    d->paths_buf[3] = join(tpl, "jobs.jsonl");
    d->paths_buf[4] = join(tpl, "worker.log");
    d->paths.dir = d->paths_buf[0];
    d->paths.db = d->paths_buf[1];
    d->paths.config = d->paths_buf[2];
    d->paths.jobs = d->paths_buf[3];
    d->paths.worker_log = d->paths_buf[4];
    for (int i = 0; i < DEMO_NENDPOINTS; i++) {
        snprintf(name, sizeof(name), "mock-%s.log", endpoints[i].name);
        d->paths_buf[5 + i] = join(tpl, name);
        d->paths.mock_logs[i] = d->paths_buf[5 + i];
    }
    return 0;
}

/* ---- the side loop ------------------------------------------------------ */

/* Stops everything on the side loop; runs on the thread that runs it. */
static void
stop_all(demo *d)
{
    if (!uv_is_closing((uv_handle_t *)&d->tick)) {
        uv_timer_stop(&d->tick);
        uv_close((uv_handle_t *)&d->tick, NULL);
    }
    if (!uv_is_closing((uv_handle_t *)&d->stop))
        uv_close((uv_handle_t *)&d->stop, NULL);
    if (!uv_is_closing((uv_handle_t *)&d->sigint))
        uv_close((uv_handle_t *)&d->sigint, NULL);
    if (!uv_is_closing((uv_handle_t *)&d->sigterm))
        uv_close((uv_handle_t *)&d->sigterm, NULL);
    for (int i = 0; i < DEMO_NENDPOINTS; i++) {
        if (d->mocks[i] != NULL) {
            mock_get_stats(d->mocks[i], &d->stats[i]);
            mock_stop(d->mocks[i], NULL, NULL);
            d->mocks[i] = NULL;
        }
    }
}

static void
on_stop(uv_async_t *h)
{
    stop_all(h->data);
}

/* The worker's own watchers stop it; this one only remembers that a human
 * (not the time limit) asked. While it is active, libuv keeps its signal
 * handler installed, so a Ctrl-C just after the worker closed its watchers
 * does not fall back to the default action and skip the summary. */
static void
on_signal(uv_signal_t *h, int signum)
{
    demo *d = h->data;

    (void)signum;
    if (!atomic_load(&d->cut))
        atomic_store(&d->interrupted, true);
}

static void
on_tick(uv_timer_t *h)
{
    demo *d = h->data;
    struct demo_tally t;

    /* The time limit works like a SIGTERM from outside: the worker stops
     * claiming and gives back what it cannot finish within its grace. */
    if (atomic_load(&d->worker_running) && !atomic_load(&d->cut) &&
        clock_mono_ms() - d->started_ms >= d->opts.limit_ms) {
        atomic_store(&d->cut, true);
        kill(getpid(), SIGTERM);
    }
    if (d->opts.on_progress == NULL)
        return;
    if (d->reader == NULL && q_open(d->paths.db, NULL, &d->reader) != 0)
        return;
    if (demo_tally_read(d->reader, d->started_ms, &t) == 0)
        d->opts.on_progress(&t, d->opts.arg);
}

static void *
side_main(void *arg)
{
    demo *d = arg;

    uv_run(&d->loop, UV_RUN_DEFAULT);
    if (q_close(d->reader) != 0)
        log_warn("demo: progress connection did not close cleanly");
    d->reader = NULL;
    return NULL;
}

static int
start_loop(demo *d, char *err, size_t len)
{
    int rc;

    if ((rc = uv_loop_init(&d->loop)) != 0) {
        snprintf(err, len, "cannot start an event loop: %s", uv_strerror(rc));
        return rc;
    }
    d->loop_ready = true;
    uv_async_init(&d->loop, &d->stop, on_stop);
    uv_timer_init(&d->loop, &d->tick);
    uv_signal_init(&d->loop, &d->sigint);
    uv_signal_init(&d->loop, &d->sigterm);
    d->stop.data = d->tick.data = d->sigint.data = d->sigterm.data = d;
    uv_signal_start(&d->sigint, on_signal, SIGINT);
    uv_signal_start(&d->sigterm, on_signal, SIGTERM);
    return 0;
}

static int
start_mocks(demo *d, char *err, size_t len)
{
    char merr[256];
    int rc;

    for (int i = 0; i < DEMO_NENDPOINTS; i++) {
        struct mock_options mo = {0};
        struct demo_endpoint *e = &d->ep[i];

        mo.script = endpoints[i].script;
        mo.log_path = d->paths.mock_logs[i];
        rc = mock_start_with(&d->loop, &mo, &d->mocks[i], &e->port, merr,
                             sizeof(merr));
        if (rc != 0) {
            snprintf(err, len, "cannot start the %s mock: %s",
                     endpoints[i].name, merr);
            return rc;
        }
        e->name = endpoints[i].name;
        e->role = endpoints[i].role;
        e->script = endpoints[i].script;
        snprintf(e->url, sizeof(e->url), "http://127.0.0.1:%d%s", e->port,
                 endpoints[i].path);
    }
    return 0;
}

/* Starts the side thread with SIGINT and SIGTERM blocked in it, so that
 * they are delivered to the caller's thread (and the worker's handlers). */
static int
start_thread(demo *d, char *err, size_t len)
{
    sigset_t block, old;
    int rc;

    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    uv_timer_start(&d->tick, on_tick, (uint64_t)d->opts.progress_ms,
                   (uint64_t)d->opts.progress_ms);
    rc = pthread_create(&d->thread, NULL, side_main, d);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(err, len, "cannot start a thread: %s", strerror(rc));
        return -rc;
    }
    d->thread_started = true;
    return 0;
}

/* ---- config and jobs ---------------------------------------------------- */

static int
write_config(demo *d, char *err, size_t len)
{
    char text[1024], perr[256];
    int rc;

    /* Short backoffs keep the tour under half a minute; real configs keep
     * the defaults (base 1 s, cap 20 s). */
    snprintf(text, sizeof(text),
             "{\n"
             "  \"db\": \"stepq.db\",\n"
             "  \"worker\": {\"concurrency\": %d, \"lease_s\": 30},\n"
             "  \"policy\": {\"backoff_base_s\": 0.2, \"backoff_cap_s\": 2},\n"
             "  \"tiers\": [\n"
             "    {\"name\": \"free\", \"base_url\": \"%s\","
             " \"model\": \"small\", \"timeout_s\": 10},\n"
             "    {\"name\": \"backup\", \"base_url\": \"%s\","
             " \"model\": \"large\", \"timeout_s\": 10}\n"
             "  ]\n"
             "}\n",
             DEMO_CONCURRENCY, d->ep[0].url, d->ep[1].url);
    rc = config_parse(text, strlen(text), d->paths.dir, &d->cfg, perr,
                      sizeof(perr));
    if (rc != 0) {
        snprintf(err, len, "demo config: %s", perr);
        return rc;
    }
    return write_text(d->paths.config, text, err, len);
}

static cJSON *
message(const char *content)
{
    cJSON *msgs = cJSON_CreateArray();
    cJSON *m = cJSON_CreateObject();

    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(msgs, m);
    return msgs;
}

/* One night's changelog job for repository i: summarize the merged pull
 * requests, write the entry, post it as a comment. Every other post
 * carries an idempotency key, so a storm on the comments API shows both
 * sides of the rule: keyed posts are retried, the others parked. */
static cJSON *
make_job(const demo *d, int i, const char *date)
{
    size_t nrepos = STEPQ_ARRAY_LEN(repos), nprs = STEPQ_ARRAY_LEN(prs);
    cJSON *job = cJSON_CreateObject(), *steps = cJSON_CreateArray();
    cJSON *s, *req, *http, *body, *keys;
    char repo[48], buf[512], url[160];

    if ((size_t)i < nrepos)
        snprintf(repo, sizeof(repo), "%s", repos[i]);
    else
        snprintf(repo, sizeof(repo), "%s-%d", repos[(size_t)i % nrepos],
                 i / (int)nrepos + 1);
    snprintf(buf, sizeof(buf), "changelog-%s", repo);
    cJSON_AddStringToObject(job, "name", buf);
    snprintf(buf, sizeof(buf), "changelog-%s-%s", repo, date);
    cJSON_AddStringToObject(job, "key", buf);
    cJSON_AddItemToObject(job, "steps", steps);

    s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "name", "summarize_prs");
    snprintf(buf, sizeof(buf),
             "Summarize the pull requests merged today in %s as JSON with a "
             "\"summary\" key:\n- #%d %s\n- #%d %s\n- #%d %s",
             repo, 400 + 3 * i, prs[(size_t)i % nprs], 401 + 3 * i,
             prs[(size_t)(i + 3) % nprs], 402 + 3 * i,
             prs[(size_t)(i + 7) % nprs]);
    req = cJSON_CreateObject();
    cJSON_AddItemToObject(req, "messages", message(buf));
    cJSON_AddNumberToObject(req, "max_tokens", 300);
    cJSON_AddItemToObject(s, "request", req);
    keys = cJSON_CreateArray();
    cJSON_AddItemToArray(keys, cJSON_CreateString("summary"));
    cJSON_AddItemToObject(s, "expect_json", keys);
    cJSON_AddNumberToObject(s, "token_budget", 4000);
    cJSON_AddItemToArray(steps, s);

    s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "name", "write_changelog");
    snprintf(buf, sizeof(buf),
             "Write a three-line changelog entry for %s from this summary: "
             "{{steps.summarize_prs.output}}",
             repo);
    req = cJSON_CreateObject();
    cJSON_AddItemToObject(req, "messages", message(buf));
    cJSON_AddNumberToObject(req, "max_tokens", 300);
    cJSON_AddItemToObject(s, "request", req);
    cJSON_AddItemToArray(steps, s);

    s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "name", "post_comment");
    cJSON_AddStringToObject(s, "kind", "http");
    if (i % 2 == 1) {
        snprintf(buf, sizeof(buf), "changelog-%s-%s-comment", repo, date);
        cJSON_AddStringToObject(s, "idempotency_key", buf);
        cJSON_AddNumberToObject(s, "max_attempts", 5);
    }
    http = cJSON_CreateObject();
    cJSON_AddStringToObject(http, "method", "POST");
    snprintf(url, sizeof(url), "%s/repos/%s/comments", d->ep[2].url, repo);
    cJSON_AddStringToObject(http, "url", url);
    body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "text", "{{steps.write_changelog.output}}");
    cJSON_AddItemToObject(http, "body", body);
    cJSON_AddItemToObject(s, "http", http);
    cJSON_AddItemToArray(steps, s);
    return job;
}

/* Writes the batch to DIR/jobs.jsonl, then validates and enqueues it the
 * way `stepq enqueue jobs.jsonl` does: all jobs in one transaction. */
static int
enqueue_batch(demo *d, char *err, size_t len)
{
    const char *tiers[] = {"free", "backup"};
    struct spec_opts vo = {tiers, 2};
    struct spec_job **specs = NULL;
    struct q_enqueue_result *res = NULL;
    struct q_job_new *rows = NULL;
    q_db *db = NULL;
    size_t n = 0, cap = 4096, used = 0;
    char *text = xmalloc(cap), date[32], verr[256];
    int64_t now = clock_now_ms();
    int rc;

    clock_format_utc(now, date, sizeof(date));
    date[10] = '\0';
    text[0] = '\0';
    for (int i = 0; i < d->opts.njobs; i++) {
        cJSON *job = make_job(d, i, date);
        char *line = cJSON_PrintUnformatted(job);
        size_t l = strlen(line);

        if (used + l + 2 > cap) {
            cap = (used + l + 2) * 2;
            text = xrealloc(text, cap);
        }
        memcpy(text + used, line, l);
        used += l;
        text[used++] = '\n';
        text[used] = '\0';
        cJSON_free(line);
        cJSON_Delete(job);
    }
    if ((rc = write_text(d->paths.jobs, text, err, len)) != 0)
        goto out;
    rc = spec_parse_many(text, used, &vo, &specs, &n, verr, sizeof(verr));
    if (rc != 0) {
        snprintf(err, len, "demo jobs: %s", verr);
        goto out;
    }
    if ((rc = q_open(d->paths.db, NULL, &db)) != 0) {
        snprintf(err, len, "cannot open %s", d->paths.db);
        goto out;
    }
    res = xcalloc(n, sizeof(*res));
    rows = spec_job_rows(specs, n);
    if ((rc = q_enqueue(db, rows, n, NULL, now, res)) != 0)
        snprintf(err, len, "cannot enqueue into %s", d->paths.db);
out:
    if (q_close(db) != 0 && rc == 0) {
        snprintf(err, len, "cannot close %s", d->paths.db);
        rc = -EIO;
    }
    free(res);
    free(rows);
    spec_jobs_free(specs, n);
    free(text);
    return rc;
}

/* ---- public ------------------------------------------------------------- */

int
demo_open(const struct demo_opts *opts, demo **out, char *err, size_t len)
{
    demo *d = xcalloc(1, sizeof(*d));
    int rc;

    d->opts = *opts;
    if (d->opts.njobs <= 0)
        d->opts.njobs = DEMO_JOBS_DEFAULT;
    if (d->opts.njobs > DEMO_JOBS_MAX) {
        snprintf(err, len, "at most %d jobs", DEMO_JOBS_MAX);
        free(d);
        return -EINVAL;
    }
    if (d->opts.progress_ms <= 0)
        d->opts.progress_ms = PROGRESS_MS_DEFAULT;
    if (d->opts.limit_ms <= 0)
        d->opts.limit_ms = LIMIT_MS_DEFAULT;
    d->started_ms = clock_mono_ms();
    atomic_init(&d->worker_running, false);
    atomic_init(&d->cut, false);
    atomic_init(&d->interrupted, false);
    /* Ignored before any socket exists: the mocks write to clients that
     * may hang up. */
    signal(SIGPIPE, SIG_IGN);
    if ((rc = make_dir(d, err, len)) != 0 ||
        (rc = start_loop(d, err, len)) != 0 ||
        (rc = start_mocks(d, err, len)) != 0 ||
        (rc = write_config(d, err, len)) != 0 ||
        (rc = enqueue_batch(d, err, len)) != 0 ||
        (rc = start_thread(d, err, len)) != 0) {
        demo_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

int
demo_run(demo *d)
{
    struct worker_opts wo = {0};
    int saved = -1, fd, rc;

    wo.db_path = d->paths.db;
    wo.cfg = d->cfg;
    wo.concurrency = DEMO_CONCURRENCY;
    wo.drain = true;
    wo.grace_ms = DEMO_GRACE_MS;
    /* The worker writes a JSON line per attempt on standard error; the
     * demo shows a summary instead and keeps the lines in a file. */
    fflush(stderr);
    fd = open(d->paths.worker_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
              0600);
    if (fd >= 0) {
        saved = dup(STDERR_FILENO);
        if (saved >= 0)
            dup2(fd, STDERR_FILENO);
        close(fd);
    }
    atomic_store(&d->worker_running, true);
    /* A signal before the worker started: skip it, keep what is there. */
    rc = atomic_load(&d->interrupted) ? 0 : worker_run(&wo);
    atomic_store(&d->worker_running, false);
    if (saved >= 0) {
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
    }
    return rc;
}

bool
demo_was_cut(const demo *d)
{
    return atomic_load(&d->cut);
}

bool
demo_was_interrupted(const demo *d)
{
    return atomic_load(&d->interrupted);
}

int
demo_tally_read(q_db *db, int64_t since_mono_ms, struct demo_tally *out)
{
    struct demo_tally t = {0};
    struct q_attempt_group *g = NULL;
    size_t n = 0;
    int rc;

    if ((rc = q_counts(db, t.jobs, &t.park_open)) != 0 ||
        (rc = q_stats_attempts(db, &g, &n)) != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        const char *o = g[i].outcome, *dec = g[i].decision;

        t.attempts += g[i].count;
        if (g[i].tier == NULL)
            t.http_requests += g[i].count;
        else if (strcmp(g[i].tier, "free") == 0)
            t.free_requests += g[i].count;
        else if (strcmp(g[i].tier, "backup") == 0)
            t.backup_requests += g[i].count;
        if (o != NULL && dec != NULL && strcmp(o, "soft_throttle") == 0 &&
            strcmp(dec, "backoff_retry") == 0)
            t.throttles += g[i].count;
        if (dec != NULL && strcmp(dec, "switch_tier_replay") == 0)
            t.switches += g[i].count;
    }
    q_attempt_groups_free(g, n);
    if (since_mono_ms > 0)
        t.elapsed_ms = clock_mono_ms() - since_mono_ms;
    *out = t;
    return 0;
}

int64_t
demo_started_ms(const demo *d)
{
    return d->started_ms;
}

const struct demo_paths *
demo_paths_get(const demo *d)
{
    return &d->paths;
}

const struct demo_endpoint *
demo_endpoint_get(const demo *d, int i)
{
    return &d->ep[i];
}

void
demo_stop(demo *d)
{
    if (d->stopped || !d->loop_ready)
        return;
    d->stopped = true;
    if (d->thread_started) {
        uv_async_send(&d->stop);
        pthread_join(d->thread, NULL);
    } else {
        stop_all(d);
        uv_run(&d->loop, UV_RUN_DEFAULT);
    }
    if (uv_loop_close(&d->loop) != 0)
        log_warn("demo: handles left open on the mock loop");
}

void
demo_mock_stats(const demo *d, int i, struct mock_stats *out)
{
    *out = d->stats[i];
}

void
demo_close(demo *d)
{
    if (d == NULL)
        return;
    demo_stop(d);
    config_free(d->cfg);
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(d->paths_buf); i++)
        free(d->paths_buf[i]);
    free(d);
}

/* side.c: the scripted endpoints of `stepq demo` and the side thread.
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
#include "demo/internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "queue/report.h"

/* The triage agent's model (tier "agent", a route of the free tier's
 * mock): it labels the issue with two calls at once, then asks to post a
 * comment, which waits for approval; approved, it answers with the
 * results it received. */
#define AGENT_ROUTE                                                            \
    " \"routes\": [{\"path\": \"/agent\", \"model\": \"agent-small\","         \
    " \"latency_ms\": 300, \"echo_tool_results\": true, \"tool_turns\": [\n"   \
    "  [{\"name\": \"add_label\", \"arguments\": {\"label\": \"bug\"}},"       \
    " {\"name\": \"add_label\", \"arguments\": {\"label\": \"p1\"}}],\n"       \
    "  [{\"name\": \"post_comment\", \"arguments\": {\"body\": \"Reproduced "  \
    "on 1.48: the redirect loops when the session cookie is missing. "         \
    "Labelled bug, p1.\"}}]]}]"

/* The free tier: a per-minute limit (its window shortened to 2 s so the
 * demo sees it several times) and a daily token allowance that runs out
 * part way through the batch. The worker's config knows neither: like a
 * real provider, the endpoint tells it. */
static const char free_script[] =
    "{\"model\": \"free-small\", \"latency_ms\": 250, \"jitter_ms\": 250,\n"
    " \"rpm\": 6, \"rpm_window_ms\": 2000, \"allowance_tokens\": "
    "600,\n" AGENT_ROUTE "}\n";

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

const struct demo__endpoint_def demo__endpoints[DEMO_NENDPOINTS] = {
    {"free", "tier 1: rpm limit, small daily allowance", free_script, "/v1"},
    {"backup", "tier 2: slower, short 5xx storm", backup_script, "/v1"},
    {"comments", "comments API: 5xx on some posts, a daily limit",
     comments_script, ""},
};

/* ---- the side loop ------------------------------------------------------ */

/* Stops everything on the side loop; runs on the thread that runs it. */
void
demo__stop_all(demo *d)
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
    demo__stop_all(h->data);
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

int
demo__start_loop(demo *d, char *err, size_t len)
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

int
demo__start_mocks(demo *d, char *err, size_t len)
{
    char merr[256];
    int rc;

    for (int i = 0; i < DEMO_NENDPOINTS; i++) {
        struct mock_options mo = {0};
        struct demo_endpoint *e = &d->ep[i];

        mo.script = demo__endpoints[i].script;
        mo.log_path = d->paths.mock_logs[i];
        rc = mock_start_with(&d->loop, &mo, &d->mocks[i], &e->port, merr,
                             sizeof(merr));
        if (rc != 0) {
            snprintf(err, len, "cannot start the %s mock: %s",
                     demo__endpoints[i].name, merr);
            return rc;
        }
        e->name = demo__endpoints[i].name;
        e->role = demo__endpoints[i].role;
        e->script = demo__endpoints[i].script;
        snprintf(e->url, sizeof(e->url), "http://127.0.0.1:%d%s", e->port,
                 demo__endpoints[i].path);
    }
    return 0;
}

/* Starts the side thread with SIGINT and SIGTERM blocked in it, so that
 * they are delivered to the caller's thread (and the worker's handlers). */
int
demo__start_thread(demo *d, char *err, size_t len)
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

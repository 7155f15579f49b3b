/* worker.c: the loop of `stepq work`: its setup, worker_run, the
 * signals and the shutdown. The loop's phases live beside it: turn.c
 * (loop turns, the tick, group commit), run.c (a job's life), send.c
 * (sending an attempt) and answer.c (acting on an answer).
 *
 * One uv timer ("tick") drives everything that is not a network event:
 * claiming when slots are free, waking runs whose backoff ended,
 * heartbeats, and the drain and stop checks. Answers arrive through the
 * HTTP client's callback, which classifies, decides and carries the
 * decision out at once. Each claimed job is a struct run; a step's
 * context (tier in use, tiers switched away from, degraded, throttle
 * waits) is derived from the attempts ledger when the step is entered, so
 * a job given back to the queue, or taken over after a crash, continues
 * exactly where the ledger says it was.
 */
#include "worker/worker.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <uv.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "http/http.h"
#include "park/park.h"
#include "policy/policy.h"
#include "queue/queue.h"
#include "sched/sched.h"
#include "tier/tier.h"
#include "worker/batch.h"
#include "worker/internal.h"

/* ---- shutdown and signals -------------------------------------------- */

static void
on_http_closed(void *arg)
{
    (void)arg;
}

static void
on_handle_closed(uv_handle_t *h)
{
    (void)h;
}

int64_t
worker__now(const struct worker *w)
{
    return clock_now_ms() + q_clock_offset(w->db);
}

static void
on_hooks_stop(uv_timer_t *t)
{
    struct worker *w = t->data;

    park_hooks_kill(&w->loop);
    w->hooks_stop_on = false;
    uv_close((uv_handle_t *)t, on_handle_closed);
}

void
worker__phase_to(struct worker *w, enum worker_phase to)
{
    assert((w->phase == WORKER_RUNNING && to == WORKER_STOPPING) ||
           (w->phase == WORKER_STOPPING && to != WORKER_STOPPING));
    assert(to != WORKER_RUNNING || w->drain);
    w->phase = to;
}

/* The moves of enum worker_run_state, one row per state it leaves: the
 * states it may go to. Every state but an end may become RELOAD (a lost
 * turn enters each run without a call in flight again) or LOST (the
 * heartbeat found its lease gone, or the worker stopped with the store
 * away). A wait goes back to ACTIVE when it ends, GATHERING to BATCHED
 * when its batch is recorded; nothing but ACTIVE leaves as DONE (a batch
 * run leaves its batch first). DONE is undone by a lost turn (RELOAD, or
 * LOST when the turn claimed it); LOST is the end of ends. */
#define RUN_TO(s) (1u << WORKER_RUN_##s)
static const unsigned run_moves[] = {
    [WORKER_RUN_ACTIVE] = RUN_TO(SLOT_WAIT) | RUN_TO(GATHERING) |
                          RUN_TO(BATCHED) | RUN_TO(RELOAD) | RUN_TO(DONE) |
                          RUN_TO(LOST),
    [WORKER_RUN_SLOT_WAIT] = RUN_TO(ACTIVE) | RUN_TO(RELOAD) | RUN_TO(LOST),
    [WORKER_RUN_GATHERING] =
        RUN_TO(ACTIVE) | RUN_TO(BATCHED) | RUN_TO(RELOAD) | RUN_TO(LOST),
    [WORKER_RUN_BATCHED] = RUN_TO(ACTIVE) | RUN_TO(RELOAD) | RUN_TO(LOST),
    [WORKER_RUN_RELOAD] = RUN_TO(ACTIVE) | RUN_TO(LOST),
    [WORKER_RUN_DONE] = RUN_TO(RELOAD) | RUN_TO(LOST),
    [WORKER_RUN_LOST] = 0,
};
#undef RUN_TO

void
worker__run_to(struct run *r, enum worker_run_state to)
{
    bool allowed = (run_moves[r->state] >> to) & 1u;

    assert(allowed);
    (void)allowed;
    /* A batch run knows its batch; a gathering one has none yet. */
    assert(to != WORKER_RUN_BATCHED || r->batch != NULL);
    assert(to != WORKER_RUN_GATHERING || r->batch == NULL);
    if (r->state == WORKER_RUN_SLOT_WAIT)
        r->w->slot_waiters--;
    if (to == WORKER_RUN_SLOT_WAIT)
        r->w->slot_waiters++;
    assert(r->w->slot_waiters >= 0);
    r->state = to;
}

bool
worker__shutdown(struct worker *w, bool force)
{
    if (w->phase == WORKER_CLOSING)
        return true;
    worker__turn_end(w);
    /* Settling what the last sends left (a request not sent) opens a
     * turn of its own: it commits here, before the loop's handles go. */
    if (w->tx_open)
        worker__turn_end(w);
    if (w->store != WORKER_STORE_UP && !force)
        return false; /* the last turn did not commit: its runs go on */
    worker__phase_to(w, WORKER_CLOSING);
    worker__wake_close(w);
    uv_close((uv_handle_t *)&w->idle, on_handle_closed);
    uv_close((uv_handle_t *)&w->check, on_handle_closed);
    uv_close((uv_handle_t *)&w->tick, on_handle_closed);
    worker__sched_close(w);
    uv_close((uv_handle_t *)&w->sigint, on_handle_closed);
    uv_close((uv_handle_t *)&w->sigterm, on_handle_closed);
    http_client_close(w->http, on_http_closed, NULL);
    w->http = NULL;
    /* A signal's grace bounds the hooks still running too (an on_park
     * hook may have an hour): past it they are killed. The timer does not
     * keep the loop running by itself (worker_run closes it). */
    if (w->stop_deadline > 0) {
        int64_t left = w->stop_deadline - worker__now(w);
        uv_timer_init(&w->loop, &w->hooks_stop);
        w->hooks_stop.data = w;
        w->hooks_stop_on = true;
        uv_timer_start(&w->hooks_stop, on_hooks_stop,
                       (uint64_t)(left > 0 ? left : 0), 0);
        uv_unref((uv_handle_t *)&w->hooks_stop);
    }
    return true;
}

static void
on_check(uv_check_t *h)
{
    worker__turn_claim(h->data);
    worker__turn_end(h->data);
}

static void
on_signal(uv_signal_t *h, int signum)
{
    struct worker *w = h->data;

    if (w->phase != WORKER_RUNNING)
        return;
    log_info("signal %d: finishing requests in flight, then stopping", signum);
    worker__phase_to(w, WORKER_STOPPING);
    w->stop_deadline = worker__now(w) + w->grace_ms;
    worker__kick(w);
}

/* ---- setup and worker_run -------------------------------------------- */

/* The options of the run, and the worker's id and random seed. */
static void
take_opts(struct worker *w, const struct worker_opts *o)
{
    char host[64] = "host";

    w->cfg = o->cfg;
    w->concurrency =
        o->concurrency > 0 ? o->concurrency : o->cfg->worker.concurrency;
    w->drain = o->drain;
    w->progress = o->progress;
    w->report = o->report;
    w->job = o->job;
    w->grace_ms = o->grace_ms > 0 ? o->grace_ms : 10000;
    w->lease_ms = (int64_t)(o->cfg->worker.lease_s * 1000);
    w->idle_poll_ms =
        o->cfg->worker.idle_poll_ms > 0 ? o->cfg->worker.idle_poll_ms : 200;
    w->next_sync = clock_mono_ms() + WORKER_CLOCK_SYNC_MS;
    w->rng = (uint64_t)clock_now_ms() ^ ((uint64_t)getpid() << 32) ^
             0x9e3779b97f4a7c15ULL;
    if (o->worker_id != NULL) {
        snprintf(w->id, sizeof(w->id), "%s", o->worker_id);
    } else {
        gethostname(host, sizeof(host) - 1);
        snprintf(w->id, sizeof(w->id), "%s:%d", host, (int)getpid());
    }
}

/* What the config asks of the loop: the classify rules compiled, the
 * schedules checked, one slot per tier for its memory. -EINVAL (logged)
 * for a config that cannot run. */
static int
take_config(struct worker *w, const struct config *cfg)
{
    bool sched = cfg->nschedules > 0 || cfg->on_report != NULL;
    char err[512];

    if (policy_rules_new(cfg->rules, cfg->nrules, &w->rules, err,
                         sizeof(err)) != 0 ||
        (sched && sched_check(cfg, true, err, sizeof(err)) != 0)) {
        log_error("config: %s", err);
        return -EINVAL;
    }
    if (sched)
        sched_zone_pin(); /* before curl's resolver threads */
    policy_config_init(&w->pcfg, &cfg->policy, w->rules);
    w->streaks = xcalloc(cfg->ntiers + 1, sizeof(*w->streaks));
    w->refused = xcalloc(cfg->ntiers + 1, sizeof(*w->refused));
    w->latency_ms = xcalloc(cfg->ntiers + 1, sizeof(*w->latency_ms));
    w->gather_since = xcalloc(cfg->ntiers + 1, sizeof(*w->gather_since));
    return 0;
}

/* The loop and the http client on it. */
static int
open_loop(struct worker *w)
{
    struct http_client_opts hopts = {0};
    int rc;

    if (uv_loop_init(&w->loop) != 0)
        return -EIO;
    hopts.max_response_bytes = (size_t)w->cfg->worker.max_response_bytes;
    /* Open connections kept for the runs in hand, which may be up to
     * WORKER_RUNS_IN_HAND times the concurrency while some wait for a
     * tier (to other hosts than those in flight), though not beyond one
     * multi handle's worth unless the concurrency itself needs more: more
     * handles would split the connection pool. A concurrency above that
     * keeps WORKER_RUNS_IN_HAND per run too: an agent's run uses its
     * model's connection and those of its tool calls (other hosts), and
     * a cache of one per run closed and reopened them at every turn
     * (1,000 agents at once: 7% to 13% of the worker's CPU,
     * bench/agent.py). */
    hopts.max_idle_connections = w->concurrency * WORKER_RUNS_IN_HAND;
    if (hopts.max_idle_connections > HTTP_SHARD_CONNECTIONS &&
        w->concurrency <= HTTP_SHARD_CONNECTIONS)
        hopts.max_idle_connections = HTTP_SHARD_CONNECTIONS;
    if ((rc = http_client_new(&w->loop, &hopts, &w->http)) != 0) {
        uv_loop_close(&w->loop);
        return rc;
    }
    uv_timer_init(&w->loop, &w->tick);
    w->tick.data = w;
    uv_timer_init(&w->loop, &w->sched);
    w->sched.data = w;
    uv_idle_init(&w->loop, &w->idle);
    w->idle.data = w;
    uv_check_init(&w->loop, &w->check);
    w->check.data = w;
    uv_check_start(&w->check, on_check);
    uv_signal_init(&w->loop, &w->sigint);
    uv_signal_init(&w->loop, &w->sigterm);
    w->sigint.data = w->sigterm.data = w;
    uv_signal_start(&w->sigint, on_signal, SIGINT);
    uv_signal_start(&w->sigterm, on_signal, SIGTERM);
    return 0;
}

static int
setup(struct worker *w, const struct worker_opts *o)
{
    /* A database server that hangs is noticed within a quarter of a lease
     * (at least 10 s, past the 5 s lock wait): the worker then keeps what
     * it holds and reconnects, as after a lost connection. */
    int64_t quarter = (int64_t)(o->cfg->worker.lease_s * 250);
    struct q_open_opts qopts = {
        .keep_body_bytes = o->cfg->worker.keep_body_bytes,
        .answer_wait_ms = quarter > 10000 ? (int)quarter : 10000,
    };
    int rc;

    take_opts(w, o);
    if ((rc = take_config(w, o->cfg)) != 0 ||
        (rc = q_open_existing(o->db_path, &qopts, &w->db)) != 0)
        return rc;
    for (size_t i = 0; i < o->cfg->ntiers; i++) {
        if ((rc = tier_sync_config(w->db, &o->cfg->tiers[i], worker__now(w))) !=
            0)
            return rc;
    }
    if ((rc = open_loop(w)) != 0)
        return rc;
    worker__wake_open(w);
    worker__sched_start(w);
    return 0;
}

int
worker_run(const struct worker_opts *opts)
{
    struct worker *w = xcalloc(1, sizeof(*w));
    int rc;

    signal(SIGPIPE, SIG_IGN);
    rc = setup(w, opts);
    if (rc == 0) {
        log_info("worker %s: concurrency %d", w->id, w->concurrency);
        worker__kick(w);
        uv_run(&w->loop, UV_RUN_DEFAULT);
        if (w->hooks_stop_on) { /* the hooks ended before the grace */
            uv_close((uv_handle_t *)&w->hooks_stop, on_handle_closed);
            uv_run(&w->loop, UV_RUN_DEFAULT);
        }
        worker__sweep(w);
        if (uv_loop_close(&w->loop) != 0)
            log_warn("worker: handles left open at exit");
    }
    if (q_close(w->db) != 0 && rc == 0)
        rc = -EIO;
    policy_rules_free(w->rules);
    free(w->streaks);
    free(w->refused);
    free(w->latency_ms);
    free(w->gather_since);
    worker__batches_free(w);
    free(w->hooks);
    free(w->ended);
    free(w);
    return rc;
}

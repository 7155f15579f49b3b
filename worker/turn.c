/* turn.c: loop turns. One uv timer ("tick") drives everything that is
 * not a network event: claiming when slots are free, waking runs whose
 * wait ended (in the order tiers should take them), heartbeats, sweeping
 * finished runs, and the drain and stop checks. Every state change of a
 * turn is committed together (group commit) in the check phase, after a
 * turn whose answers freed slots has claimed into them; only then are the
 * turn's requests sent and the on_park hooks told.
 */
#include "worker/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "park/park.h"
#include "queue/report.h"
#include "worker/batch.h"

#define DRAIN_HORIZON_MS 60000
#define TICK_GAP_MAX_MS  50
/* The most slots a turn claims into before its commit (worker__turn_claim);
 * more are left to the tick's own turn. */
#define TURN_CLAIM_MAX 32

int (*worker__turn_commit)(q_db *db) = q_tx_commit;

static void on_tick(uv_timer_t *t);

/* ---- loop turns: group commit -------------------------------------- */

/* Every state change of one loop turn goes into one transaction, opened
 * by the first callback of the turn and committed in the check phase,
 * after the I/O callbacks. Requests recorded in the turn are sent only
 * after that commit, so "recorded before it is sent" holds. The idle
 * handle keeps the poll from blocking while a turn is open. */
static void
on_idle(uv_idle_t *h)
{
    (void)h;
}

void
worker__poll_no_block(struct worker *w)
{
    uv_idle_start(&w->idle, on_idle);
}

bool
worker__turn_begin(struct worker *w)
{
    int rc;

    if (w->tx_open)
        return true;
    if (w->phase == WORKER_CLOSING || w->store == WORKER_STORE_DOWN)
        return false;
    if ((rc = q_tx_begin(w->db)) != 0) {
        worker__store_lost(w, rc);
        return false;
    }
    w->tx_open = true;
    w->turn_claimed = false;
    w->turn_started = clock_mono_ms();
    uv_idle_start(&w->idle, on_idle);
    return true;
}

/* ---- ending a turn: commit, then hooks and sends ------------------ */

/* Starts the on_park hooks of the items the turn parked; runs after the
 * turn's commit. committed false (the commit failed): the items do not
 * exist, so no hook is told of them. */
static void
run_hooks(struct worker *w, bool committed)
{
    int64_t timeout_ms = (int64_t)(w->cfg->on_park_timeout_s * 1000);

    for (size_t i = 0; committed && i < w->nhooks; i++)
        park_notify(&w->loop, w->db, w->cfg->on_park, timeout_ms, w->hooks[i]);
    w->nhooks = 0;
    /* on_done and on_fail, the config's and then the job's own: the job
     * as `jobs show --json` gives it, read after the commit that ended it */
    for (size_t i = 0; committed && i < w->nended; i++) {
        const struct worker_ended *e = &w->ended[i];
        const char *cfg_cmd = e->failed ? w->cfg->on_fail : w->cfg->on_done;
        cJSON *job = NULL;
        char *json;
        if (w->job(w->db, e->id, &job) != 0) {
            log_warn("job %lld: cannot read it for its %s hook",
                     (long long)e->id, e->failed ? "on_fail" : "on_done");
            continue;
        }
        json = cJSON_PrintUnformatted(job);
        cJSON_Delete(job);
        if (cfg_cmd != NULL)
            (void)park_hook_run(&w->loop, e->failed ? "on_fail" : "on_done",
                                cfg_cmd, timeout_ms, json);
        if (e->own != NULL)
            (void)park_hook_run(
                &w->loop, e->failed ? "the job's on_fail" : "the job's on_done",
                e->own, timeout_ms, json);
        free(json);
    }
    w->nended = 0;
}

/* Sends what the turn recorded. Runs after the commit. */
static void
flush_sends(struct worker *w)
{
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        int rc;
        worker__agent_flush(r);
        if (!r->has_pending)
            continue;
        r->has_pending = false;
        if (r->attempt_id <= 0) {
            /* The store found the lease lost when it wrote the record
             * (a store that defers it tells at the commit): not sent. */
            http_request_cleanup(&r->pending);
            worker__turn_begin(w);
            worker__unrecorded(r, -EBUSY);
            continue;
        }
        rc = http_send(w->http, &r->pending, worker__on_done, r, &r->call);
        http_request_cleanup(&r->pending);
        if (rc != 0) {
            int64_t now = worker__now(w);
            struct q_attempt_result res = {.outcome = "unknown",
                                           .reason = "not_sent",
                                           .decision = "fail_loud",
                                           .finished_at = now};
            char err[512];
            r->call = NULL;
            worker__turn_begin(w);
            if (q_attempt_finish(w->db, r->attempt_id, &res) != 0)
                log_warn("cannot record an unsent attempt");
            snprintf(err, sizeof(err), "step %s: the request could not be sent",
                     cur_spec(r)->name);
            worker__fail_job(r, err);
        }
    }
}

/* After a commit: the turn's claims and finishes are final, and the
 * answers it wrote need not be kept. */
static void
turn_committed(struct worker *w)
{
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        r->fresh = false;
        if (r->held != NULL && r->state != WORKER_RUN_RELOAD) {
            worker__held_free(r->held);
            r->held = NULL;
        }
    }
    if (w->store != WORKER_STORE_UP)
        worker__store_back(w);
}

void
worker__turn_end(struct worker *w)
{
    bool committed = true;
    int64_t held = 0;
    int rc;

    if (w->tx_open) {
        held = clock_mono_ms() - w->turn_started;
        w->tx_open = false;
        if ((rc = worker__turn_commit(w->db)) != 0) {
            committed = false;
            w->tick_after_commit = false;
            worker__turn_lost(w);
            worker__store_lost(w, rc);
        } else {
            turn_committed(w);
        }
    }
    uv_idle_stop(&w->idle);
    run_hooks(w, committed);
    flush_sends(w);
    worker__batch_flush(w, committed);
    worker__sweep(w);
    if (w->tick_after_commit && w->phase != WORKER_CLOSING) {
        /* From the check phase, measured from now (the loop's time is
         * that of the iteration's start): the lock stays free while the
         * loop polls, at least 1 ms and as long as the turn held it (up
         * to TICK_GAP_MAX_MS). SQLite's busy handler polls, so another
         * process only gets in while the lock is free; back-to-back turns
         * would keep it waiting for their whole run. */
        w->tick_after_commit = false;
        if (held > TICK_GAP_MAX_MS)
            held = TICK_GAP_MAX_MS;
        if (q_lock_in_line(w->db))
            held = 1; /* waiters are let in by the store, in turn */
        uv_update_time(&w->loop);
        uv_timer_start(&w->tick, on_tick, (uint64_t)(held > 1 ? held : 1), 0);
    }
}

/* ---- the tick: sweep, claim, heartbeat, wake, re-arm -------------- */

void
worker__sweep(struct worker *w)
{
    struct run **pp = &w->runs;

    /* A finish inside an open turn is not final until it commits: a turn
     * that is lost enters the run again (worker__turn_lost). */
    if (w->tx_open)
        return;
    while (*pp != NULL) {
        struct run *r = *pp;
        if (run_has_left(r) && r->call == NULL && !worker__agent_busy(r)) {
            *pp = r->next;
            w->nruns--;
            worker__run_free(r);
        } else {
            pp = &r->next;
        }
    }
}

/* The runs that hold a slot: those not finished (a finished run is freed
 * once its turn has committed, but its slot is free at once). */
static int
live(const struct worker *w)
{
    int n = 0;

    for (const struct run *r = w->runs; r != NULL; r = r->next)
        n += !run_has_left(r);
    return n;
}

/* Whether the tick claims: a slot is free and the next claim is due. */
static bool
claim_due(const struct worker *w, int64_t now)
{
    return worker__free_slots(w) > 0 && now >= w->next_claim;
}

static void
claim(struct worker *w, int64_t now)
{
    struct q_job *jobs = NULL;
    size_t n = 0;
    int slots = worker__free_slots(w), rc;

    if (slots <= 0)
        return;
    w->turn_claimed = true;
    rc = q_claim(w->db, w->id, now, w->lease_ms, (size_t)slots, &jobs, &n);
    if (rc == -ENOENT) {
        w->next_claim = now + w->idle_poll_ms;
        return;
    }
    if (rc != 0) {
        w->next_claim = now + 1000;
        return;
    }
    w->next_claim = now;
    for (size_t i = 0; i < n; i++)
        worker__run_start(w, &jobs[i]);
    q_jobs_free(jobs, n);
}

/* A turn opened by answers (an I/O callback) that freed slots claims the
 * next jobs before it commits: a step's settle and the next job's claim
 * and first attempt then share one transaction, one commit (on
 * PostgreSQL one fsync and one round trip less per step at concurrency
 * 1) instead of a settle turn and a claim turn. The tick the finishes
 * asked for still runs (wake-ups, heartbeats, the drain's end); its
 * claim finds the slots taken. Once a turn: a tick's turn has claimed
 * already, and a second claim would find nothing and push the next one
 * back. Not while stopping: the tick decides that. Not for more than
 * TURN_CLAIM_MAX slots either: on SQLite a turn that settled a burst of
 * answers and then started as many runs cost more per step than two
 * turns (each savepoint journals the pages the transaction has already
 * changed; at concurrency 256, 192 steps a commit against 112, SQL time
 * 46 against 41 us a step), so a burst's claim is left to the tick. */
void
worker__turn_claim(struct worker *w)
{
    int64_t now;
    int slots;

    if (!w->tx_open || w->turn_claimed || w->in_tick ||
        w->phase != WORKER_RUNNING || w->store != WORKER_STORE_UP)
        return;
    now = worker__now(w);
    slots = worker__free_slots(w);
    if (slots > 0 && slots <= TURN_CLAIM_MAX && now >= w->next_claim)
        claim(w, now);
}

static void
heartbeat(struct worker *w, int64_t now)
{
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (run_has_left(r))
            continue;
        if (q_extend(w->db, r->job.id, w->id, now + w->lease_ms, now) ==
            -EBUSY) {
            /* Cancelled, or taken over after our lease ran out. LOST
             * before its calls are cancelled: their answers then write
             * nothing of it. */
            log_warn("job %lld: lease lost; dropping it", (long long)r->job.id);
            worker__lose(r);
            if (r->call != NULL)
                http_cancel(r->call);
            worker__agent_cancel(r);
        }
    }
    w->next_heartbeat = now + w->lease_ms / 3;
}

/* Re-arms the tick from inside its own callback. Never at 0 ms: libuv
 * 1.44 runs a timer re-armed at 0 from a timer callback again in the same
 * timer phase, so the check phase that commits the turn never ran and a
 * due backlog handed straight back (a tier limited for more than 2 s) was
 * claimed and released in one write transaction while other processes
 * waited for the lock (CONVENTIONS 10.2). Work that is due now gets its
 * tick after the turn's commit instead (worker__turn_end), so the turn ends and
 * the lock is free while the loop polls. */
static void
rearm(struct worker *w, int64_t now, int64_t next)
{
    if (next <= now) {
        w->tick_after_commit = true;
        uv_timer_stop(&w->tick);
        /* the poll must not block before the check phase comes */
        uv_idle_start(&w->idle, on_idle);
        return;
    }
    uv_timer_start(&w->tick, on_tick, (uint64_t)(next - now), 0);
}

void
worker__tick_in(struct worker *w, int64_t ms)
{
    if (w->phase != WORKER_CLOSING)
        uv_timer_start(&w->tick, on_tick, (uint64_t)(ms > 1 ? ms : 1), 0);
}

/* Stopping while the store is unreachable, past the grace period: what
 * the runs kept cannot be written; their attempts stay without a result
 * and whoever takes the jobs next settles them as in doubt. */
static void
abandon(struct worker *w)
{
    log_warn("worker: stopping with the database unreachable; %d job(s) "
             "left to their leases",
             w->nruns);
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (r->state != WORKER_RUN_LOST)
            worker__run_to(r, WORKER_RUN_LOST);
        if (r->call != NULL)
            http_cancel(r->call);
        worker__agent_cancel(r);
    }
    (void)worker__shutdown(w, true);
}

/* Opens the tick's turn; while the store is unreachable, the turn that
 * writes back what the runs kept, once its retry is due. Returns false
 * when no turn could be opened (the tick is then armed for the retry). */
static bool
tick_turn(struct worker *w, int64_t now)
{
    int64_t mono = clock_mono_ms();

    if (w->store != WORKER_STORE_UP && w->phase != WORKER_RUNNING &&
        (w->nruns == 0 || now >= w->stop_deadline)) {
        abandon(w);
        return false;
    }
    if (w->store != WORKER_STORE_UP && mono < w->retry_at) {
        worker__tick_in(w, w->retry_at - mono);
        return false;
    }
    if (w->store != WORKER_STORE_UP)
        worker__recover(w, now);
    else
        worker__turn_begin(w);
    if (!w->tx_open) {
        worker__tick_in(w, w->retry_at - clock_mono_ms());
        return false;
    }
    if (!w->wake_on && w->wake_retry_at > 0 && mono >= w->wake_retry_at)
        worker__wake_open(w);
    return true;
}

/* Whether the tick has anything to write: a heartbeat, a run whose wait
 * is over, a claim, the wake channel's retry, stopping or a drain's end
 * (each as tick_body tests it). A tick with none of these opens no
 * transaction: at concurrency 1 the tick each finish asks for found the
 * slot taken by the answer's own turn and committed an empty one, a
 * BEGIN IMMEDIATE and a COMMIT (and the store's write lock) a step. */
static bool
tick_writes(const struct worker *w, int64_t now)
{
    if (w->store != WORKER_STORE_UP || w->phase != WORKER_RUNNING ||
        now >= w->next_heartbeat || (w->drain && live(w) == 0) ||
        claim_due(w, now) || worker__batch_due(w, now) ||
        (!w->wake_on && w->wake_retry_at > 0 &&
         clock_mono_ms() >= w->wake_retry_at))
        return true;
    for (const struct run *r = w->runs; r != NULL; r = r->next) {
        if (worker__run_due(w, r, now))
            return true;
    }
    return false;
}

static void
tick_body(struct worker *w, int64_t now, int64_t next)
{
    int64_t at;

    if (tick_writes(w, now) && !tick_turn(w, now))
        return;
    if (now >= w->next_heartbeat)
        heartbeat(w, now);
    next = worker__wake_due(w, now, next);
    next = worker__batch_tick(w, now, next);
    worker__sweep(w);
    if (w->phase != WORKER_RUNNING) {
        if (live(w) == 0) {
            (void)worker__shutdown(w, false);
            return;
        }
        if (now >= w->stop_deadline) {
            for (struct run *r = w->runs; r != NULL; r = r->next) {
                if (r->call != NULL)
                    http_cancel(r->call);
                worker__agent_cancel(r);
            }
            worker__sweep(w);
        }
        uv_timer_start(&w->tick, on_tick, 20, 0);
        return;
    }
    if (claim_due(w, now)) {
        claim(w, now);
        worker__sweep(w);
    }
    /* A claim that found nothing pushed next_claim ahead: only then is
     * the queue known to be empty for this worker. */
    if (w->drain && live(w) == 0 && w->next_claim > now) {
        int rc = q_next_due(w->db, now, &at);
        int64_t slot = worker__sched_next(w, now);
        /* A schedule's slot within a minute of the drain's start is
         * waited for too: its job is work of this drain (a later one is
         * not, or a schedule of every minute would never let it end). */
        if (w->drain_slots_until == 0)
            w->drain_slots_until = now + DRAIN_HORIZON_MS;
        if ((rc == -ENOENT || (rc == 0 && at > now + DRAIN_HORIZON_MS)) &&
            (slot == 0 || slot > w->drain_slots_until)) {
            worker__phase_to(w, WORKER_STOPPING);
            if (!worker__shutdown(w, false))
                worker__phase_to(w, WORKER_RUNNING); /* not empty after all */
            return;
        }
    }
    if (worker__free_slots(w) > 0 && w->next_claim < next)
        next = w->next_claim;
    if (w->next_heartbeat < next)
        next = w->next_heartbeat;
    /* Runs told to wait during this tick (their kick was only marked). */
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (worker__run_waits(r) && r->wake_at < next)
            next = r->wake_at;
    }
    /* The wake channel is asked for again on its own backoff. */
    if (!w->wake_on && w->wake_retry_at > 0 &&
        now + (w->wake_retry_at - clock_mono_ms()) < next)
        next = now + (w->wake_retry_at - clock_mono_ms());
    rearm(w, now, next);
}

static void
on_tick(uv_timer_t *t)
{
    struct worker *w = t->data;
    int64_t now;

    w->in_tick = true;
    if (!w->tx_open && w->store == WORKER_STORE_UP &&
        clock_mono_ms() >= w->next_sync) {
        /* Outside a transaction: the offset is the store's clock now. */
        if (q_clock_sync(w->db) != 0) {
            /* logged by the store; the offset measured before is kept */
        }
        w->next_sync = clock_mono_ms() + WORKER_CLOCK_SYNC_MS;
    }
    now = worker__now(w);
    tick_body(w, now, now + w->idle_poll_ms);
    w->in_tick = false;
}

/* Asks for a tick soon. From an I/O callback the timer runs in the next
 * loop iteration, after the check phase has committed the turn; inside
 * the tick it does nothing: the tick re-arms itself for the runs that
 * finished (free slots) or wait (wake_at) when it ends (rearm). */
void
worker__kick(struct worker *w)
{
    if (w->phase == WORKER_CLOSING)
        return;
    if (w->in_tick)
        return;
    uv_timer_start(&w->tick, on_tick, 0, 0);
}

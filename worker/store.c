/* store.c: the worker and a store that is not always there. When a turn
 * cannot begin or commit (the store went away: a restarted server, a lost
 * connection), nothing the turn recorded is sent, the jobs it claimed are
 * dropped, and every other run keeps in memory what it has (the answer of
 * its attempt above all) until a turn can commit again, retried with
 * backoff (100 ms doubling to 5 s). Also here: the store's wake channel
 * (q_wake_fd), polled on the loop so that an idle worker claims as soon
 * as another process enqueues.
 */
#include "worker/internal.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#define RETRY_FIRST_MS 100
#define RETRY_MAX_MS   5000

static int64_t
backoff(int64_t ms)
{
    if (ms <= 0)
        return RETRY_FIRST_MS;
    return ms * 2 < RETRY_MAX_MS ? ms * 2 : RETRY_MAX_MS;
}

/* ---- the store unreachable, and back ------------------------------- */

void
worker__store_to(struct worker *w, enum worker_store to)
{
    assert((w->store == WORKER_STORE_UP && to == WORKER_STORE_DOWN) ||
           (w->store == WORKER_STORE_DOWN && to != WORKER_STORE_DOWN) ||
           (w->store == WORKER_STORE_RECOVERING && to == WORKER_STORE_DOWN));
    w->store = to;
}

void
worker__store_lost(struct worker *w, int rc)
{
    if (w->store == WORKER_STORE_UP) {
        worker__store_to(w, WORKER_STORE_DOWN);
        w->down_since = clock_mono_ms();
        w->retry_ms = RETRY_FIRST_MS;
        log_warn("cannot commit to the database: retrying in %lld ms (%s)",
                 (long long)w->retry_ms, strerror(-rc));
    } else {
        w->retry_ms = backoff(w->retry_ms);
    }
    w->retry_at = clock_mono_ms() + w->retry_ms;
    worker__tick_in(w, w->retry_ms);
}

void
worker__store_back(struct worker *w)
{
    worker__store_to(w, WORKER_STORE_UP);
    w->retry_ms = 0;
    log_warn("database commits again after %lld ms",
             (long long)(clock_mono_ms() - w->down_since));
    worker__kick(w);
}

void
worker__turn_lost(struct worker *w)
{
    w->nhooks = 0; /* the items it parked do not exist */
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (r->has_pending) {
            /* Its attempt was not committed: never sent. */
            http_request_cleanup(&r->pending);
            r->has_pending = false;
        }
        worker__agent_unqueue(r); /* its tool calls' records too */
        if (r->fresh) {
            /* Claimed in the lost turn: not this worker's. Not fresh any
             * more either: a second lost turn finds it LOST already. */
            r->fresh = false;
            if (r->state != WORKER_RUN_LOST)
                worker__run_to(r, WORKER_RUN_LOST);
            continue;
        }
        if (r->state == WORKER_RUN_LOST || r->call != NULL)
            continue; /* another's now, or in flight and untouched */
        if (r->state != WORKER_RUN_RELOAD)
            worker__run_to(r, WORKER_RUN_RELOAD); /* a DONE one too */
    }
}

void
worker__recover(struct worker *w, int64_t now)
{
    bool open;
    int rc;

    /* One round trip outside a transaction first (a backend may open its
     * transactions lazily, and an empty turn would then "commit" with the
     * server still away); the offset is worth measuring again anyway. */
    if ((rc = q_clock_sync(w->db)) != 0) {
        worker__store_lost(w, rc);
        return;
    }
    w->next_heartbeat = 0; /* renew every lease this turn */
    worker__store_to(w, WORKER_STORE_RECOVERING);
    open = worker__turn_begin(w);
    worker__store_to(w, WORKER_STORE_DOWN);
    if (!open)
        return; /* still unreachable: worker__store_lost set the retry */
    for (struct run *r = w->runs; r != NULL && rc == 0; r = r->next) {
        if (r->state != WORKER_RUN_RELOAD)
            continue;
        /* A RELOAD run has no call: a lost turn skips those, and none is
         * sent before the run is entered again. */
        assert(r->call == NULL);
        rc = q_extend(w->db, r->job.id, w->id, now + w->lease_ms, now);
        if (rc == -EBUSY) {
            /* Taken over while the store was away: the new holder
             * settles the attempt this run kept an answer for. */
            log_warn("job %lld: lease lost while the database was "
                     "unreachable; left to its new holder",
                     (long long)r->job.id);
            worker__lose(r);
            rc = 0;
        } else if (rc == 0) {
            worker__run_to(r, WORKER_RUN_ACTIVE);
            worker__run_resume(r);
        }
    }
    if (rc != 0) {
        /* Gone again: this turn will not commit either. */
        q_tx_rollback(w->db);
        w->tx_open = false;
        worker__turn_lost(w);
        worker__store_lost(w, rc);
    }
}

/* ---- answers kept until written ------------------------------------ */

void
worker__held_free(struct held *h)
{
    if (h == NULL)
        return;
    http_response_cleanup(&h->res);
    free(h->body);
    free(h);
}

void
worker__hold(struct run *r, struct http_response *res)
{
    struct held *h = xcalloc(1, sizeof(*h));

    http_response_move(&h->res, res);
    h->attempt_id = r->attempt_id;
    h->send_id = r->send_id;
    h->send_est = r->send_est;
    h->sent_at = r->sent_at;
    h->input_tokens = r->input_tokens;
    h->body = xstrndup(r->body ? r->body : "", r->body_len);
    h->body_len = r->body_len;
    memcpy(h->sha, r->sha, sizeof(h->sha));
    worker__held_free(r->held);
    r->held = h;
}

/* ---- the wake channel ---------------------------------------------- */

static void
on_wake_closed(uv_handle_t *h)
{
    struct worker *w = h->data;

    w->wake_closing = false;
}

void
worker__wake_close(struct worker *w)
{
    if (!w->wake_on)
        return;
    w->wake_on = false;
    w->wake_closing = true;
    uv_close((uv_handle_t *)&w->wake, on_wake_closed);
}

/* The channel failed: stop polling it (the descriptor is the store's) and
 * ask for it again later; the worker finds work by its due time
 * meanwhile. */
static void
wake_lost(struct worker *w)
{
    worker__wake_close(w);
    w->wake_retry_ms = backoff(w->wake_retry_ms);
    w->wake_retry_at = clock_mono_ms() + w->wake_retry_ms;
    if (w->wake_retry_ms == RETRY_FIRST_MS)
        log_warn("wake-ups lost: looking for work by due time; "
                 "reconnecting in %lld ms",
                 (long long)w->wake_retry_ms);
}

static void
on_wake(uv_poll_t *h, int status, int events)
{
    struct worker *w = h->data;
    unsigned ev = 0;

    (void)events;
    if (status < 0 || q_wake_take(w->db, &ev) != 0) {
        wake_lost(w);
        return;
    }
    if (ev & Q_WAKE_JOBS)
        w->next_claim = 0; /* claim in the next turn */
    if (ev & Q_WAKE_TIERS)
        worker__wake_waiting(w, worker__now(w));
    if (ev != 0)
        worker__kick(w);
}

void
worker__wake_open(struct worker *w)
{
    int fd;

    if (w->wake_on || w->wake_closing || w->phase == WORKER_CLOSING)
        return;
    fd = q_wake_fd(w->db);
    if (fd == -ENOTSUP) {
        w->wake_retry_at = 0; /* the store has none: due times only */
        return;
    }
    if (fd < 0 || uv_poll_init(&w->loop, &w->wake, fd) != 0) {
        wake_lost(w);
        return;
    }
    w->wake.data = w;
    if (uv_poll_start(&w->wake, UV_READABLE, on_wake) != 0) {
        w->wake_on = true;
        wake_lost(w);
        return;
    }
    w->wake_on = true;
    if (w->wake_retry_ms > 0)
        log_info("wake-ups back");
    w->wake_retry_ms = 0;
    w->wake_retry_at = 0;
}

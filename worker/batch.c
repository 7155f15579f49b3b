/* batch.c: a tier in batch mode (docs/reference.md "Batches"): the
 * batches a worker holds in hand, each a small machine of calls to its
 * provider (upload, create, find, poll, fetch) made when the tier's pace
 * admits them (a call is not a chat attempt: it is admitted and settled
 * as one request of no tokens), sent after the turn that admitted it has
 * committed, and answered in a turn of its own (batch_apply.c). A run in
 * a batch holds no slot; its job's lease is renewed by the heartbeat like
 * any run in hand, and after a crash whoever holds the job next joins the
 * batch from the store (worker__batch_join) instead of sending it again. */
#include "worker/batch_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "queue/batch.h"
#include "tier/tier.h"

/* The most batches of one tier a worker keeps in hand at once. */
#define BATCH_OPEN_MAX 16
/* A call that failed is tried again after this long at most. */
#define RETRY_MS 5000

struct wbatch *
batch__new(struct worker *w, int64_t id, int ti, const char *key)
{
    struct wbatch *b = xcalloc(1, sizeof(*b));

    b->w = w;
    b->id = id;
    b->ti = ti;
    snprintf(b->key, sizeof(b->key), "%s", key);
    b->next = w->batches;
    w->batches = b;
    return b;
}

static void
wb_free(struct wbatch *b)
{
    if (b->pending)
        http_request_cleanup(&b->req);
    cJSON_Delete(b->bodies);
    free(b->provider_id);
    free(b->file_id);
    free(b->after);
    free(b->out_file);
    free(b->err_file);
    http_batch_results_free(b->res, b->nres);
    free(b);
}

void
worker__batches_free(struct worker *w)
{
    while (w->batches != NULL) {
        struct wbatch *b = w->batches;
        w->batches = b->next;
        wb_free(b);
    }
}

void
batch__custom_id(int64_t attempt_id, char *buf, size_t len)
{
    snprintf(buf, len, "a%lld", (long long)attempt_id);
}

int
batch__set(struct wbatch *b, int state, int64_t now)
{
    struct worker *w = b->w;
    struct q_batch_set s = {.worker = w->id,
                            .lease_until = now + w->lease_ms,
                            .state = state,
                            .provider_id = b->provider_id,
                            .now = now};

    return q_batch_set(w->db, b->id, &s);
}

/* Runs of w gathering for tier ti, or waiting in b (b NULL: gathering). */
static size_t
runs_of(const struct worker *w, int ti, const struct wbatch *b)
{
    size_t n = 0;

    for (const struct run *r = w->runs; r != NULL; r = r->next) {
        if (run_has_left(r))
            continue;
        if (b == NULL ? r->state == WORKER_RUN_GATHERING && r->batch_ti == ti
                      : r->batch == b)
            n++;
    }
    return n;
}

static size_t
open_of(const struct worker *w, int ti)
{
    size_t n = 0;

    for (const struct wbatch *b = w->batches; b != NULL; b = b->next)
        n += b->ti == ti;
    return n;
}

int64_t
worker__batch_room(const struct worker *w)
{
    int64_t room = 0;

    for (size_t ti = 0; ti < w->cfg->ntiers; ti++) {
        if (w->cfg->tiers[ti].batch_mode)
            room += BATCH_OPEN_MAX * w->cfg->tiers[ti].batch.max_items;
    }
    return room;
}

bool
worker__batch_takes(const struct run *r, int ti, int64_t slack, char *why,
                    size_t len)
{
    const struct worker *w = r->w;
    const struct config_tier *t = &w->cfg->tiers[ti];
    const struct spec_step *s = cur_spec(r);

    if (s->kind != SPEC_STEP_CHAT || !s->replayable || s->side_effects) {
        snprintf(why, len,
                 "%s: batch takes only replayable steps without "
                 "side effects",
                 t->name);
        return false;
    }
    if (slack < t->batch.expect_ms) {
        snprintf(why, len,
                 "%s: batch (%.1f s left, a batch is expected to take "
                 "%.1f s)",
                 t->name, (double)slack / 1000,
                 (double)t->batch.expect_ms / 1000);
        return false;
    }
    if (w->phase != WORKER_RUNNING || open_of(w, ti) >= BATCH_OPEN_MAX) {
        snprintf(why, len, "%s: batch (no room in this worker's batches)",
                 t->name);
        return false;
    }
    return true;
}

void
worker__batch_leave(struct run *r)
{
    if (r->state == WORKER_RUN_GATHERING || r->state == WORKER_RUN_BATCHED)
        worker__run_to(r, WORKER_RUN_ACTIVE);
    r->batch = NULL;
}

/* The batch id in hand, or NULL. */
static struct wbatch *
in_hand(struct worker *w, int64_t id)
{
    for (struct wbatch *b = w->batches; b != NULL; b = b->next) {
        if (b->id == id)
            return b;
    }
    return NULL;
}

/* A batch of the store taken in hand: what it does first follows from
 * where it stands. */
static struct wbatch *
load(struct worker *w, int ti, int64_t id, int64_t now)
{
    struct q_batch *rows = NULL;
    size_t n = 0;
    struct wbatch *b = NULL;

    if (q_batches_open(w->db, w->cfg->tiers[ti].name, &rows, &n) != 0)
        return NULL;
    for (size_t i = 0; i < n && b == NULL; i++) {
        if (rows[i].id != id)
            continue;
        b = batch__new(w, id, ti, rows[i].key);
        b->created_at = rows[i].created_at;
        b->items = rows[i].items;
        b->provider_id =
            rows[i].provider_id ? xstrdup(rows[i].provider_id) : NULL;
        /* Recorded but not known to be sent: its lease is taken first,
         * then the provider is asked whether it has it. */
        b->phase = rows[i].state == Q_BATCH_SUBMITTING ? WB_TAKE : WB_POLL;
        b->next_at = now;
    }
    q_batches_free(rows, n);
    return b;
}

bool
worker__batch_join(struct run *r, const struct q_attempt *a)
{
    struct worker *w = r->w;
    int ti = worker__tier_index(w, a->tier);
    int64_t id = 0, now = worker__now(w);
    struct wbatch *b;

    if (ti < 0 || !w->cfg->tiers[ti].batch_mode ||
        q_batch_of_attempt(w->db, a->id, &id) != 0)
        return false;
    if ((b = in_hand(w, id)) == NULL && (b = load(w, ti, id, now)) == NULL)
        return false;
    r->batch = b;
    r->batch_ti = ti;
    worker__run_to(r, WORKER_RUN_BATCHED);
    r->cur_tier = ti;
    r->attempt_id = a->id;
    r->attempt_no = a->attempt;
    r->attempt_est = -1; /* the store corrects the step */
    r->body_len = 0;     /* the request is the batch's, not kept here */
    r->send_id = 0;
    r->send_est = 0;
    r->wake_at = WORKER_BATCH_WAKE;
    log_info("job %lld: waits in batch %lld of tier %s", (long long)r->job.id,
             (long long)id, w->cfg->tiers[ti].name);
    /* Results in hand already: applied in this turn. */
    if (b->phase == WB_APPLIED)
        batch__apply(b, now);
    return true;
}

/* Whether b has a call to make at now. */
static bool
call_due(const struct wbatch *b, int64_t now)
{
    return b->phase != WB_APPLIED && b->phase != WB_LINK && !b->pending &&
           b->call == NULL && b->next_at <= now;
}

/* Whether tier ti's gathering is full or old enough to be sent. */
static bool
gather_due(const struct worker *w, int ti, int64_t now)
{
    const struct config_tier *t = &w->cfg->tiers[ti];
    size_t n;

    if (!t->batch_mode || w->gather_since[ti] == 0)
        return false;
    n = runs_of(w, ti, NULL);
    return n > 0 && ((int64_t)n >= t->batch.max_items ||
                     now - w->gather_since[ti] >= t->batch.gather_ms);
}

bool
worker__batch_due(const struct worker *w, int64_t now)
{
    for (size_t ti = 0; ti < w->cfg->ntiers; ti++) {
        if (gather_due(w, (int)ti, now))
            return true;
    }
    for (const struct wbatch *b = w->batches; b != NULL; b = b->next) {
        if (call_due(b, now))
            return true;
    }
    for (const struct run *r = w->runs; r != NULL; r = r->next) {
        if (r->batch != NULL && !run_has_left(r) && now >= r->job.deadline_at)
            return true;
    }
    return false;
}

/* Admits b's call through its tier's pace and keeps it to be sent after
 * the commit; a tier that says no sets when to ask again. */
static void
admit_call(struct wbatch *b, int64_t now)
{
    struct worker *w = b->w;
    struct tier_verdict v;
    int64_t send = 0;

    if (b->phase == WB_TAKE) {
        /* No call: its lease, once its holder's has ended, is taken in
         * this turn; then the provider is asked whether it has it. */
        if (batch__set(b, Q_BATCH_SUBMITTING, now) == 0) {
            b->phase = WB_FIND;
            b->next_at = now;
            admit_call(b, now);
        } else {
            b->next_at = now + 1000;
        }
        return;
    }
    if (tier_admit(w->db, wb_tier(b), now, 0, false, &v, &send) != 0) {
        b->next_at = now + RETRY_MS;
        return;
    }
    if (!v.admitted) {
        b->next_at =
            v.retry_at < now + RETRY_MS * 12 ? v.retry_at : now + RETRY_MS * 12;
        return;
    }
    if (batch__request(b, &b->req) != 0) {
        if (tier_unsent(w->db, wb_tier(b), send, 0, -1, now) != 0)
            log_warn("cannot settle an unsent batch call");
        b->next_at = now + RETRY_MS * 12;
        return;
    }
    b->send_id = send;
    b->pending = true;
    worker__poll_no_block(w);
}

/* A batch no run of this worker waits in, past its submission: dropped
 * from memory (the store keeps it; whoever holds its jobs polls it). */
static bool
idle(const struct wbatch *b)
{
    return !b->pending && b->call == NULL && !b->fresh && b->phase != WB_LINK &&
           b->phase != WB_UPLOAD && b->phase != WB_CREATE &&
           runs_of(b->w, b->ti, b) == 0;
}

int64_t
worker__batch_tick(struct worker *w, int64_t now, int64_t next)
{
    struct wbatch **pp = &w->batches;

    for (size_t ti = 0; ti < w->cfg->ntiers; ti++) {
        const struct config_tier *t = &w->cfg->tiers[ti];
        if (gather_due(w, (int)ti, now))
            batch__submit(w, (int)ti, now);
        if (t->batch_mode && w->gather_since[ti] > 0 &&
            w->gather_since[ti] + t->batch.gather_ms < next)
            next = w->gather_since[ti] + t->batch.gather_ms;
    }
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (r->batch == NULL || run_has_left(r))
            continue;
        if (now >= r->job.deadline_at && w->tx_open)
            batch__late(r);
        else if (r->job.deadline_at < next)
            next = r->job.deadline_at;
    }
    while (*pp != NULL) {
        struct wbatch *b = *pp;
        /* While it is being sent, its lease is renewed: no one else looks
         * it up (WB_TAKE) meanwhile. */
        if (w->tx_open && (b->phase == WB_UPLOAD || b->phase == WB_CREATE) &&
            b->renew_at > 0 && now >= b->renew_at) {
            b->renew_at = now + w->lease_ms / 3;
            if (batch__set(b, Q_BATCH_SUBMITTING, now) != 0)
                log_warn("batch %lld: its lease was taken", (long long)b->id);
        }
        if (idle(b) && !w->tx_open) {
            *pp = b->next;
            wb_free(b);
            continue;
        }
        if (call_due(b, now) && w->tx_open)
            admit_call(b, now);
        if (b->phase != WB_APPLIED && !b->pending && b->call == NULL &&
            b->next_at < next)
            next = b->next_at;
        pp = &b->next;
    }
    return next;
}

static void
on_call_done(http_call *call, struct http_response *res, void *arg)
{
    struct wbatch *b = arg;
    struct worker *w = b->w;
    int64_t now = worker__now(w);
    struct tier_outcome o;

    (void)call;
    b->call = NULL;
    if (res->error == HTTP_ERR_CANCELLED || w->phase == WORKER_CLOSING)
        return;
    if (!worker__turn_begin(w)) {
        b->next_at = now + RETRY_MS; /* the store is away: asked again */
        return;
    }
    tier_outcome_init(&o);
    o.charged = 0;
    if (res->status == 429)
        o.uncounted = true;
    if (tier_settle(w->db, wb_tier(b), b->send_id, now, &o, NULL) != 0)
        log_warn("cannot settle a batch call of tier %s", wb_tier(b)->name);
    b->send_id = 0;
    batch__on_answer(b, res, now);
    worker__kick(w);
}

void
worker__batch_flush(struct worker *w, bool committed)
{
    for (struct wbatch *b = w->batches; b != NULL; b = b->next) {
        if (committed)
            b->fresh = false;
        if (committed && b->phase == WB_LINK && worker__turn_begin(w))
            batch__link(b, worker__now(w));
        if (!b->pending)
            continue;
        b->pending = false;
        if (!committed || w->phase == WORKER_CLOSING ||
            http_send(w->http, &b->req, on_call_done, b, &b->call) != 0) {
            b->call = NULL;
            b->next_at = worker__now(w) + RETRY_MS;
        }
        http_request_cleanup(&b->req);
    }
    /* A batch recorded in a turn that did not commit does not exist; its
     * runs are entered again from the store (worker__turn_lost). */
    for (struct wbatch **pp = &w->batches; !committed && *pp != NULL;) {
        struct wbatch *b = *pp;
        if (b->fresh && b->call == NULL) {
            *pp = b->next;
            for (struct run *r = w->runs; r != NULL; r = r->next) {
                if (r->batch == b)
                    worker__batch_leave(r);
            }
            wb_free(b);
        } else {
            pp = &b->next;
        }
    }
}

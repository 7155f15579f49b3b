/* send.c: sending an attempt: the tier chosen by admission (candidates in
 * order, FIFO within a pass), the request body built and estimated (kept
 * while a run waits for a tier), the step's max_total_tokens, and the
 * attempt recorded in the ledger before it is sent; the send itself
 * happens after the turn's commit (turn.c).
 */
#include "worker/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "worker/tier.h"

#define HTTP_STEP_TIMEOUT_MS 60000

static void settle_unsent(struct run *r, int64_t now);
static void not_durable(struct run *r, int64_t now);

/* ---- choosing a tier ----------------------------------------------- */

/* Fills idx with the step's candidate tiers in order; returns how many. */
static size_t
candidates(const struct run *r, int *idx)
{
    const struct spec_step *s = cur_spec(r);
    const struct config *cfg = r->w->cfg;
    size_t n = 0;

    if (r->wait_tier >= 0 || r->pin_tier >= 0) {
        idx[0] = r->wait_tier >= 0 ? r->wait_tier : r->pin_tier;
        return 1;
    }
    if (s->tiers == NULL) {
        for (size_t i = 0; i < cfg->ntiers; i++)
            idx[n++] = (int)i;
        return n;
    }
    for (const cJSON *c = s->tiers->child; c != NULL; c = c->next) {
        int ti = worker__tier_index(r->w, c->valuestring);
        if (ti >= 0)
            idx[n++] = ti;
    }
    return n;
}

/* Writes into why the step's tiers that this worker's config lacks
 * ("tiers not in this worker's config: ghost"), or nothing when it names
 * none (a job enqueued under another config). */
static void
unknown_tiers(const struct run *r, char *why, size_t len)
{
    const struct spec_step *s = cur_spec(r);
    size_t used = 0;

    why[0] = '\0';
    for (const cJSON *c = s->tiers ? s->tiers->child : NULL; c != NULL;
         c = c->next) {
        int k;
        if (worker__tier_index(r->w, c->valuestring) >= 0 || used >= len)
            continue;
        k = snprintf(why + used, len - used, "%s%s",
                     used ? ", " : "tiers not in this worker's config: ",
                     c->valuestring);
        if (k > 0)
            used += (size_t)k;
    }
}

/* What the rest of the job is expected to take from now: one attempt of
 * this step and of each step after it, at the latency this worker has
 * seen of its tiers (the slowest), at least 1 s an attempt. */
static int64_t
rest_ms(const struct run *r)
{
    const struct worker *w = r->w;
    int64_t per = 1000;

    for (size_t i = 0; i < w->cfg->ntiers; i++) {
        if (w->latency_ms[i] > per)
            per = w->latency_ms[i];
    }
    return per * (int64_t)(r->spec->nsteps - r->step);
}

/* Whether the step waits for tier t, which paces it until v->retry_at,
 * rather than going on to a later tier: as long as the wait leaves the
 * rest of the job its time before the deadline, and within the tier's
 * spill setting. When not, why says why (for the attempt's route). */
static bool
waits_for(const struct run *r, const struct config_tier *t,
          const struct tier_verdict *v, int64_t now, char *why, size_t len)
{
    int64_t wait = v->retry_at - now;
    int64_t slack = r->job.deadline_at - now - rest_ms(r);
    int64_t waited = r->admit_since > 0 ? now - r->admit_since : 0;

    if (t->spill_after_ms == 0) {
        snprintf(why, len, "%s: %s (spill: now)", t->name, v->reason);
        return false;
    }
    if (wait > slack) {
        snprintf(why, len,
                 "%s: %s (a wait of %.1f s would miss the deadline: %.1f s "
                 "left, the rest of the job needs about %.1f s)",
                 t->name, v->reason, (double)wait / 1000,
                 (double)(r->job.deadline_at - now) / 1000,
                 (double)rest_ms(r) / 1000);
        return false;
    }
    if (t->spill_after_ms > 0 && waited + wait > t->spill_after_ms) {
        snprintf(why, len, "%s: %s (waited %.1f s; spill after %.1f s)",
                 t->name, v->reason, (double)waited / 1000,
                 (double)t->spill_after_ms / 1000);
        return false;
    }
    return true;
}

/* Appends "; text" (or text) to the route. */
static void
route_add(struct run *r, const char *text)
{
    size_t used = strlen(r->route);

    if (used + 3 < sizeof(r->route))
        snprintf(r->route + used, sizeof(r->route) - used, "%s%s",
                 used ? "; " : "", text);
}

/* Admits the send on tier ti: its budgets first (worker__budget_reserve),
 * then the tier (tier_admit); what was reserved goes back when the tier
 * says no. A budget's no is a verdict with reason "budget" (btext says
 * which and how much). Returns 0 with *v set, or a storage error (the
 * tier is skipped). */
static int
admit(struct run *r, int ti, int64_t est, int64_t now, struct tier_verdict *v,
      int64_t *send, char *btext, size_t blen)
{
    const struct config_tier *t = &r->w->cfg->tiers[ti];
    int64_t at = INT64_MAX;
    int rc = worker__budget_reserve(r, t, r->input_tokens, est, now, &at, btext,
                                    blen);

    if (rc == -EDQUOT) {
        *v = (struct tier_verdict){.reason = "budget", .retry_at = at};
        r->budget_refused = true;
        return 0;
    }
    if (rc != 0)
        return rc;
    rc = tier_admit(r->w->db, t, now, est, *sends_on(r, ti) > 0, v, send);
    if (rc != 0 || !v->admitted)
        worker__budget_settle(r, 0, now);
    return rc;
}

/* Admits the request on the first candidate tier that takes it, in the
 * order of preference: an earlier tier that is only paced is waited for
 * (waits_for) instead of going on to a later one. Returns the tier index,
 * or -1 with *retry_at (INT64_MAX: no tier left) and a description of why
 * in why. r->route says what the chosen tier was preferred over. */
static int
choose_tier(struct run *r, int64_t est, int64_t now, int64_t *retry_at,
            char *why, size_t whylen)
{
    struct worker *w = r->w;
    int *idx = xcalloc(w->cfg->ntiers + 1, sizeof(int));
    size_t n = candidates(r, idx), used = 0;
    int chosen = -1;
    bool waiting = false;

    *retry_at = INT64_MAX;
    why[0] = '\0';
    r->route[0] = '\0';
    r->budget_refused = false;
    for (size_t i = 0; i < n && chosen < 0 && !waiting; i++) {
        const struct config_tier *t = &w->cfg->tiers[idx[i]];
        struct tier_verdict v;
        int64_t send = 0;
        struct tier_no *no = &w->refused[idx[i]];
        char btext[256] = "";
        if (r->switched[idx[i]]) {
            char text[160];
            snprintf(text, sizeof(text), "%s: left after its answer", t->name);
            route_add(r, text);
            continue;
        }
        if (no->pass == w->pass) {
            v = (struct tier_verdict){.admitted = false,
                                      .probe = false,
                                      .reason = no->reason,
                                      .retry_at = no->retry_at};
        } else if (admit(r, idx[i], est, now, &v, &send, btext,
                         sizeof(btext)) != 0) {
            continue;
        }
        if (v.admitted) {
            chosen = idx[i];
            r->send_id = send;
            r->send_est = est < 0 ? 0 : est; /* what tier_admit charged */
            break;
        }
        /* The allowance depends on the step (headroom above degrade_at
         * for a step already on the tier), a budget on the job and the
         * send: not the same no for all. */
        if (strcmp(v.reason, "allowance") != 0 &&
            strcmp(v.reason, "budget") != 0)
            *no = (struct tier_no){
                .pass = w->pass, .reason = v.reason, .retry_at = v.retry_at};
        if (v.retry_at < *retry_at)
            *retry_at = v.retry_at;
        if (used < whylen) {
            int k = snprintf(why + used, whylen - used, "%s%s: %s",
                             used ? "; " : "", t->name, v.reason);
            if (k > 0)
                used += (size_t)k;
        }
        if (tier_reason_is_pace(v.reason) && n > 1) {
            char spill[256];
            if (waits_for(r, t, &v, now, spill, sizeof(spill))) {
                /* Preferred and only paced: this tier's retry_at, not
                 * the earliest of the ones after it. */
                *retry_at = v.retry_at;
                waiting = true;
            } else {
                route_add(r, spill);
            }
        } else if (btext[0] != '\0') {
            route_add(r, btext);
        } else {
            char text[160];
            snprintf(text, sizeof(text), "%s: %s", t->name, v.reason);
            route_add(r, text);
        }
    }
    free(idx);
    return chosen;
}

/* Other tiers of the step that admit now or within the slack. */
int
worker__tiers_left(const struct run *r, int64_t est, int64_t now, int64_t slack)
{
    struct worker *w = r->w;
    int *idx = xcalloc(w->cfg->ntiers + 1, sizeof(int));
    size_t n = candidates(r, idx);
    int left = 0;

    for (size_t i = 0; i < n; i++) {
        struct q_tier_state st;
        struct tier_verdict v;
        if (idx[i] == r->cur_tier || r->switched[idx[i]])
            continue;
        if (tier_snapshot(w->db, &w->cfg->tiers[idx[i]], now, false, &st) != 0)
            continue;
        tier_evaluate(&w->cfg->tiers[idx[i]], &st, now, est, false, &v);
        if (v.admitted || v.retry_at - now <= slack)
            left++;
    }
    free(idx);
    return left;
}

/* ---- the request body: estimates, max_total_tokens ------------------- */

/* The chat request body before the tier's model is set: the step's
 * request with templates expanded, degraded if the step was degraded. */
cJSON *
worker__chat_body(const struct run *r)
{
    const struct spec_step *s = cur_spec(r);
    cJSON *req = worker__expand(
        s->request, r->names, (const char *const *)r->outputs, r->spec->nsteps);
    if (r->degraded)
        worker__degrade(req, s->degrade);
    return req;
}

int64_t
worker__estimate_tokens(const cJSON *req, int64_t *input)
{
    char *text = json_print(req);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(req, "max_tokens");
    int64_t in = (int64_t)strlen(text) / 4, out = 0;

    free(text);
    if (cJSON_IsNumber(mt) && mt->valuedouble > 0)
        out = (int64_t)mt->valuedouble;
    *input = in;
    return in + out;
}

/* A run waiting for a tier keeps the body it built, so that each look at
 * the tiers does not expand and measure the request again. */
static cJSON *
take_chat_body(struct run *r, int64_t *est)
{
    cJSON *body = r->ready.body;

    if (body != NULL && r->ready.step == r->step &&
        r->ready.degraded == r->degraded) {
        r->ready.body = NULL;
        r->input_tokens = r->ready.input;
        *est = r->ready.est;
        return body;
    }
    cJSON_Delete(body);
    r->ready.body = NULL;
    body = worker__chat_body(r);
    *est = worker__estimate_tokens(body, &r->input_tokens);
    return body;
}

static void
keep_chat_body(struct run *r, cJSON *body, int64_t est)
{
    cJSON_Delete(r->ready.body);
    r->ready.body = body;
    r->ready.step = r->step;
    r->ready.degraded = r->degraded;
    r->ready.est = est;
    r->ready.input = r->input_tokens;
}

/* max_total_tokens caps what a step spends over all its attempts and
 * tiers. The spend is read from the database, where every attempt is
 * charged its estimate when it is recorded and corrected to the reported
 * usage when it ends, so it holds across workers and crashes (an attempt
 * in doubt keeps its estimate). True, with the job's error in err, when
 * sending est more tokens would pass the cap or the spend cannot be read. */
static bool
over_max_total(struct run *r, int64_t est, char *err, size_t len)
{
    const struct spec_step *s = cur_spec(r);
    struct q_step *steps = NULL;
    size_t ns = 0;
    int64_t spent = -1;

    if (s->max_total_tokens <= 0)
        return false;
    if (q_steps_get(r->w->db, r->job.id, &steps, &ns) == 0) {
        spent = 0;
        for (size_t i = 0; i < ns; i++) {
            if (steps[i].index == r->step)
                spent = steps[i].tokens;
        }
        q_steps_free(steps, ns);
    }
    if (spent >= 0 && spent + est <= s->max_total_tokens)
        return false;
    snprintf(err, len,
             "step %s: budget_spent: max_total_tokens %lld would be passed "
             "(%lld spent, the next request needs about %lld)",
             s->name, (long long)s->max_total_tokens, (long long)spent,
             (long long)est);
    return true;
}

/* ---- an attempt, recorded before it is sent -------------------------- */

/* The step's own timeout_s, else the tier's, else 60 s (docs/reference.md). */
static int64_t
timeout_ms(const struct spec_step *s, const struct config_tier *t)
{
    if (s->timeout_s > 0)
        return (int64_t)(s->timeout_s * 1000);
    return t != NULL ? (int64_t)(t->timeout_s * 1000) : HTTP_STEP_TIMEOUT_MS;
}

void
worker__attempt(struct run *r)
{
    struct worker *w = r->w;
    const struct spec_step *s = cur_spec(r);
    struct http_request req;
    struct q_attempt_start st;
    int64_t now = worker__now(w), est = 0, retry_at = 0;
    cJSON *body = NULL;
    char err[1024], why[512];
    int rc, ti = -1;

    r->wake_at = 0;
    if (w->stopping) {
        worker__give_back(r, now);
        return;
    }
    /* Past its deadline a job gives up before it sends anything more. */
    if (now >= r->job.deadline_at) {
        char at[40];
        snprintf(err, sizeof(err),
                 "step %s: deadline_passed: the job's deadline was %s; "
                 "nothing sent",
                 s->name, clock_format_utc(r->job.deadline_at, at, sizeof(at)));
        worker__fail_job(r, err);
        return;
    }
    if (s->kind == SPEC_STEP_CHAT) {
        body = take_chat_body(r, &est);
        if (over_max_total(r, est, err, sizeof(err))) {
            cJSON_Delete(body);
            worker__fail_job(r, err);
            return;
        }
        ti = choose_tier(r, est, now, &retry_at, why, sizeof(why));
        if (ti < 0) {
            int64_t slack = r->job.deadline_at - now;
            if (retry_at != INT64_MAX && retry_at - now < slack) {
                if (r->admit_since == 0)
                    r->admit_since = now;
                keep_chat_body(r, body, est);
                worker__wait_then_attempt(r, retry_at - now);
                return;
            }
            cJSON_Delete(body);
            /* A budget that cannot cover the send before the deadline is
             * an operator's call (raise it, then retry): parked, not
             * failed. */
            if (r->budget_refused) {
                snprintf(err, sizeof(err),
                         "step %s: budget: no tier the budgets can cover "
                         "before the deadline (%s)",
                         s->name, r->route);
                worker__park(r, "budget", err);
                return;
            }
            if (why[0] == '\0')
                unknown_tiers(r, why, sizeof(why));
            snprintf(err, sizeof(err),
                     "step %s: no tier admits before the "
                     "deadline (%s)",
                     s->name, why[0] ? why : "no tier configured or left");
            worker__fail_job(r, err);
            return;
        }
        r->cur_tier = ti;
        r->admit_since = 0;
        r->wait_tier = -1;
        r->sent_at = now;
        const struct config_tier *t = &w->cfg->tiers[ti];
        rc = http_tier_request(body, t, timeout_ms(s, t), &req, err,
                               sizeof(err));
        /* The key goes out with a chat step too: it is what makes a
         * replay of a step with side effects safe (decide counts on it). */
        if (rc == 0 && s->idempotency_key != NULL &&
            (rc = http_request_add_header(&req, "Idempotency-Key",
                                          s->idempotency_key)) != 0) {
            http_request_cleanup(&req); /* a job from before the check */
            snprintf(err, sizeof(err), "idempotency_key: not a header value");
        }
    } else {
        r->send_id = 0;
        r->cur_tier = -1;
        body = worker__expand_http(s->http, r->names,
                                   (const char *const *)r->outputs,
                                   r->spec->nsteps);
        rc = http_step_request(body, s->idempotency_key, timeout_ms(s, NULL),
                               &req, err, sizeof(err));
        r->input_tokens = 0;
    }
    cJSON_Delete(body);
    if (rc != 0) {
        char msg[1200];
        if (r->send_id > 0)
            settle_unsent(r, now);
        snprintf(msg, sizeof(msg), "step %s: cannot build the request: %s",
                 s->name, err);
        worker__fail_job(r, msg);
        return;
    }
    worker__sha256_hex(req.body ? req.body : "", req.body_len, r->sha);
    free(r->body);
    r->body = xstrndup(req.body ? req.body : "", req.body_len);
    r->body_len = req.body_len;
    st = (struct q_attempt_start){
        .job_id = r->job.id,
        .step = r->step,
        .worker = w->id,
        .tier = cur_tier(r) ? cur_tier(r)->name : NULL,
        .request_sha256 = r->sha,
        .est_tokens = est,
        .started_at = now,
        .route = ti >= 0 && r->route[0] != '\0' ? r->route : NULL,
    };
    /* Recorded before it is sent: a crash from here on leaves an attempt
     * without result, which the next holder treats as in doubt. */
    rc = q_attempt_begin(w->db, &st, &r->attempt_id, &r->attempt_no);
    r->attempt_est = est;
    /* A write without a key (decide's in-doubt row: never sent twice
     * without a human) waits for its record to be on disk, not only
     * written: after a power loss that undid the record, the next worker
     * would find no attempt and send it again. Any other step may be sent
     * again, so its record need not wait for the disk. */
    if (rc == 0 && s->side_effects && s->idempotency_key == NULL &&
        q_tx_durable(w->db) != 0) {
        http_request_cleanup(&req);
        not_durable(r, now);
        return;
    }
    if (rc != 0) {
        http_request_cleanup(&req);
        worker__unrecorded(r, rc);
        return;
    }
    (*sends_on(r, r->cur_tier))++;
    /* Sent once the loop turn's transaction, which holds the attempt's
     * record, has committed (flush_sends, turn.c). */
    r->pending = req;
    r->has_pending = true;
    worker__poll_no_block(w);
}

/* The store cannot put the record of r's attempt on disk (its flush
 * failed before, and it trusts none since): the request is not sent. It
 * would be safe only until a power loss undid the record, so the step is
 * parked with its attempt closed as not sent; a retry after a restart of
 * the worker on a sound disk sends it. */
static void
not_durable(struct run *r, int64_t now)
{
    struct q_attempt_result res = {.outcome = "unknown",
                                   .reason = "not_sent",
                                   .decision = "park_for_human",
                                   .finished_at = now};

    if (r->send_id > 0)
        settle_unsent(r, now);
    if (r->attempt_id > 0 && q_attempt_finish(r->w->db, r->attempt_id, &res))
        log_warn("job %lld: cannot close an attempt not sent",
                 (long long)r->job.id);
    worker__park(r, "in_doubt",
                 "not sent: the database cannot flush its records to disk "
                 "(see the worker's log), and a request that must not be "
                 "sent twice is sent only once its record would survive a "
                 "power loss; fix the disk, restart the worker, then retry");
}

void
worker__unrecorded(struct run *r, int rc)
{
    int64_t now = worker__now(r->w);

    if (r->send_id > 0)
        settle_unsent(r, now);
    if (rc == -EBUSY) {
        r->lost = true;
        worker__finish(r, "lease lost");
    } else {
        worker__give_back(r, now + 1000);
    }
}

void
worker__switch_tier(struct run *r)
{
    if (r->cur_tier >= 0)
        r->switched[r->cur_tier] = true;
    r->cur_tier = -1;
    worker__attempt(r);
}

/* A request admitted but never sent is no longer in flight, and its
 * allowance is refunded. */
static void
settle_unsent(struct run *r, int64_t now)
{
    struct tier_outcome o;

    tier_outcome_init(&o);
    o.uncounted = true;
    o.charged = r->send_est;
    o.sent_at = r->sent_at;
    if (tier_settle(r->w->db, cur_tier(r), r->send_id, now, &o, NULL) != 0)
        log_warn("cannot settle an unsent request");
    r->send_id = 0;
    worker__budget_settle(r, 0, now); /* never sent: nothing spent */
}

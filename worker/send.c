/* send.c: sending an attempt: the tier chosen by admission (choose.c),
 * or a wait for one, a park or a failure without; the request body built
 * and estimated (kept
 * while a run waits for a tier), the step's max_total_tokens, and the
 * attempt recorded in the ledger before it is sent; the send itself
 * happens after the turn's commit (turn.c).
 */
#include "worker/internal.h"
#include "worker/money.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "tier/tier.h"
#include "worker/batch.h"

#define HTTP_STEP_TIMEOUT_MS 60000

static void settle_unsent(struct run *r, int64_t now);
static void not_durable(struct run *r, int64_t now);

/* ---- the request body: estimates, max_total_tokens ------------------- */

/* The chat request body before the tier's model is set: the step's
 * request with templates expanded, degraded if the step was degraded. */
cJSON *
worker__chat_body(const struct run *r)
{
    const struct spec_step *s = cur_spec(r);
    cJSON *req = worker__fill(r);
    if (r->degraded)
        worker__degrade(req, s->degrade);
    return r->agent != NULL ? worker__agent_body(r, req) : req;
}

int64_t
worker__estimate_tokens(const cJSON *req, int64_t *input)
{
    static const char *const caps[] = {"max_tokens", "max_completion_tokens"};
    char *text = json_print(req);
    int64_t in = (int64_t)strlen(text) / 4, out = 0;

    free(text);
    /* OpenAI's reasoning models take max_completion_tokens instead: the
     * larger cap is what the answer may cost. */
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(caps); i++) {
        const cJSON *mt = cJSON_GetObjectItemCaseSensitive(req, caps[i]);
        if (cJSON_IsNumber(mt) && mt->valuedouble > out)
            out = (int64_t)mt->valuedouble;
    }
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
bool
worker__over_max_total(struct run *r, int64_t est, char *err, size_t len)
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

/* No tier admits the send now: the run waits for the earliest that will
 * before the deadline (keeping the body it built), or parks when only a
 * budget stands in the way, or fails. */
static void
no_tier(struct run *r, cJSON *body, int64_t est, int64_t retry_at, char *why,
        size_t whylen, int64_t now)
{
    const struct spec_step *s = cur_spec(r);
    char err[1024];

    if (retry_at != INT64_MAX && retry_at - now < r->job.deadline_at - now) {
        if (r->admit_since == 0)
            r->admit_since = now;
        keep_chat_body(r, body, est);
        worker__wait_then_attempt(r, retry_at - now);
        return;
    }
    cJSON_Delete(body);
    /* A budget that cannot cover the send before the deadline is an
     * operator's call (raise it, then retry): parked, not failed. */
    if (r->budget_refused) {
        snprintf(err, sizeof(err),
                 "step %s: budget: no tier the budgets can cover before the "
                 "deadline (%s)",
                 s->name, r->route);
        worker__park(r, "budget", err);
        return;
    }
    if (why[0] == '\0')
        worker__unknown_tiers(r, why, whylen);
    snprintf(err, sizeof(err),
             "step %s: no tier admits before the deadline (%s)", s->name,
             why[0] ? why : "no tier configured or left");
    worker__fail_job(r, err);
}

/* A chat step's request, on the tier admission chose for it. Returns 0
 * with *req built; 1 when the run went elsewhere (it waits for a tier, or
 * failed or parked without one, or passed max_total_tokens); or a negative
 * errno with err saying why the request cannot be built. */
static int
chat_request(struct run *r, int64_t now, int64_t *est, struct http_request *req,
             char *err, size_t len)
{
    const struct spec_step *s = cur_spec(r);
    int64_t retry_at = 0;
    char why[512];
    cJSON *body = take_chat_body(r, est);
    const struct config_tier *t;
    int ti, rc;

    if (worker__agent_over_turns(r)) {
        cJSON_Delete(body);
        return 1;
    }
    if (worker__over_max_total(r, *est, err, len)) {
        cJSON_Delete(body);
        worker__fail_job(r, err);
        return 1;
    }
    if ((ti = worker__choose_tier(r, *est, now, &retry_at, why, sizeof(why))) <
        0) {
        no_tier(r, body, *est, retry_at, why, sizeof(why), now);
        return 1;
    }
    if (r->w->cfg->tiers[ti].batch_mode) {
        /* Built again when its batch is recorded (batch_submit.c). */
        cJSON_Delete(body);
        worker__batch_gather(r, ti, now);
        return 1;
    }
    r->cur_tier = ti;
    r->admit_since = 0;
    r->wait_tier = -1;
    r->sent_at = now;
    t = &r->w->cfg->tiers[ti];
    /* Streamed when the tier or the step asks for it (the step on
     * whatever tier it uses, whose stall timeouts apply): said here once,
     * the request and its answer carry it (worker__unstream). */
    rc = http_tier_request(body, t, t->stream || s->stream, timeout_ms(s, t),
                           req, err, len);
    cJSON_Delete(body);
    /* The key goes out with a chat step too: it is what makes a replay of
     * a step with side effects safe (decide counts on it). */
    if (rc == 0 && s->idempotency_key != NULL &&
        (rc = http_request_add_header(req, "Idempotency-Key",
                                      s->idempotency_key)) != 0) {
        http_request_cleanup(req); /* a job from before the check */
        snprintf(err, len, "idempotency_key: not a header value");
    }
    return rc;
}

/* Whether the host of http step s answered a wall that still holds (any
 * worker's send found it): then req, built, is not sent. A post with side
 * effects parks with what it would have sent, to be retried after the
 * wall (the error says when); any other http step waits for the wall's
 * end when its deadline allows, else fails. Returns true when it did one
 * of those. */
static bool
host_walled(struct run *r, const struct spec_step *s, struct http_request *req,
            int64_t now)
{
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(s->http, "url");
    char key[300], reason[32], at[40], err[600];
    int64_t until = 0;

    if (!cJSON_IsString(url) ||
        tier_host_key(url->valuestring, key, sizeof(key)) != 0)
        return false;
    if (tier_host_wall(r->w->db, key, now, &until, reason) != 0) {
        log_warn("job %lld: cannot read the state of %s; sending",
                 (long long)r->job.id, key + strlen(TIER_HOST_PREFIX));
        return false;
    }
    if (until == 0)
        return false;
    clock_format_utc(until, at, sizeof(at));
    snprintf(err, sizeof(err),
             "not sent: %s answered a wall (%s) that holds until %s; "
             "retry after then (park resolve --retry --not-before %s)",
             key + strlen(TIER_HOST_PREFIX), reason, at, at);
    if (s->side_effects) {
        worker__sha256_hex(req->body ? req->body : "", req->body_len, r->sha);
        free(r->body);
        r->body = xstrndup(req->body ? req->body : "", req->body_len);
        r->body_len = req->body_len;
        http_request_cleanup(req);
        worker__park(r, "hard_quota", err);
    } else if (until < r->job.deadline_at) {
        http_request_cleanup(req);
        worker__wait_then_attempt(r, until - now);
    } else {
        http_request_cleanup(req);
        snprintf(err, sizeof(err),
                 "step %s: %s answered a wall (%s) that holds until %s, "
                 "past the job's deadline; nothing sent",
                 s->name, key + strlen(TIER_HOST_PREFIX), reason, at);
        worker__fail_job(r, err);
    }
    return true;
}

/* Records the attempt of req (est tokens charged) before it is sent, and
 * queues req to go out once the turn that holds the record commits. */
static void
record_and_queue(struct run *r, struct http_request *req, int64_t est,
                 int64_t now)
{
    struct worker *w = r->w;
    const struct spec_step *s = cur_spec(r);
    struct q_attempt_start st;
    int rc;

    worker__sha256_hex(req->body ? req->body : "", req->body_len, r->sha);
    free(r->body);
    r->body = xstrndup(req->body ? req->body : "", req->body_len);
    r->body_len = req->body_len;
    st = (struct q_attempt_start){
        .job_id = r->job.id,
        .step = r->step,
        .worker = w->id,
        .tier = cur_tier(r) ? cur_tier(r)->name : NULL,
        .request_sha256 = r->sha,
        .est_tokens = est,
        .started_at = now,
        .route = cur_tier(r) && r->route[0] != '\0' ? r->route : NULL,
        .kind = r->agent != NULL ? "turn" : NULL,
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
        http_request_cleanup(req);
        not_durable(r, now);
        return;
    }
    if (rc != 0) {
        http_request_cleanup(req);
        worker__unrecorded(r, rc);
        return;
    }
    (*sends_on(r, r->cur_tier))++;
    /* Sent once the loop turn's transaction, which holds the attempt's
     * record, has committed (flush_sends, turn.c). */
    r->pending = *req;
    r->has_pending = true;
    worker__poll_no_block(w);
}

void
worker__attempt(struct run *r)
{
    struct worker *w = r->w;
    const struct spec_step *s = cur_spec(r);
    struct http_request req;
    int64_t now = worker__now(w), est = 0;
    char err[1024];
    int rc;

    r->wake_at = 0;
    if (w->phase != WORKER_RUNNING) {
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
        if ((rc = chat_request(r, now, &est, &req, err, sizeof(err))) > 0)
            return;
    } else {
        cJSON *body = worker__fill(r);
        r->send_id = 0;
        r->cur_tier = -1;
        rc = http_step_request(body, s->idempotency_key, timeout_ms(s, NULL),
                               &req, err, sizeof(err));
        r->input_tokens = 0;
        cJSON_Delete(body);
    }
    if (rc == 0 && s->kind == SPEC_STEP_HTTP && host_walled(r, s, &req, now))
        return;
    if (rc != 0) {
        char msg[1200];
        if (r->send_id > 0)
            settle_unsent(r, now);
        snprintf(msg, sizeof(msg), "step %s: cannot build the request: %s",
                 s->name, err);
        worker__fail_job(r, msg);
        return;
    }
    record_and_queue(r, &req, est, now);
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
        worker__lose(r);
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
    if (tier_unsent(r->w->db, cur_tier(r), r->send_id, r->send_est, r->sent_at,
                    now) != 0)
        log_warn("cannot settle an unsent request");
    r->send_id = 0;
    worker__budget_settle(r, 0, now); /* never sent: nothing spent */
}

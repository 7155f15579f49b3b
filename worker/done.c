/* done.c: the end of a request: an answer is held for the loop turn that
 * acts on it (answer.c); a request cut short, by the worker's stop or a
 * lost lease, ends its attempt where it may and settles its tier's send
 * where no other worker will. */
#include "worker/internal.h"
#include "worker/money.h"

#include <assert.h>
#include <stdbool.h>

#include "common/log.h"
#include "tier/tier.h"

/* stopped_mid_request records the attempt this worker cut short when it
 * stopped (its --grace ran out), for a step that may be sent again: its
 * outcome is unknown, reason worker_stopped, and the next holder retries
 * it without counting it against max_attempts (derive_context), as
 * Sidekiq does not count a job its shutdown pushed back (up to
 * WORKER_STOPS_FREE times a step). The request's estimate stays charged:
 * the endpoint may have spent it. A step that may not be sent again (not
 * replayable, or with side effects and no idempotency key, decide's
 * in-doubt rule) keeps the attempt open: the next holder parks it.
 * Returns whether it closed the attempt. */
static bool
stopped_mid_request(struct run *r, const struct http_response *res, int64_t now)
{
    const struct spec_step *s = cur_spec(r);
    struct q_attempt_result ar = {.outcome = "unknown",
                                  .reason = WORKER_STOPPED,
                                  .decision = "backoff_retry",
                                  .latency_ms = res->latency_ms,
                                  .tokens = r->send_est > 0 ? r->send_est : 0,
                                  .finished_at = now};
    struct attempt_log line = {.job = r->job.id,
                               .step = s->name,
                               .attempt = r->attempt_no,
                               .tier = cur_tier(r) ? cur_tier(r)->name : NULL,
                               .outcome = ar.outcome,
                               .reason = ar.reason,
                               .decision = ar.decision,
                               .latency_ms = res->latency_ms,
                               .error = http_error_name(res->error)};

    if (r->attempt_id <= 0 || !policy_may_resend(s->replayable, s->side_effects,
                                                 s->idempotency_key != NULL))
        return false;
    if (s->kind == SPEC_STEP_CHAT)
        worker__cost_worst(cur_tier(r), r->input_tokens, ar.tokens, &ar);
    worker__budget_settle(r, ar.priced ? ar.cost_nusd : -1, worker__now(r->w));
    if (q_attempt_finish(r->w->db, r->attempt_id, &ar) != 0) {
        log_warn("job %lld: cannot record the attempt cut short",
                 (long long)r->job.id);
        return false;
    }
    if (r->logged_attempt != r->attempt_id) {
        log_attempt(&line);
        r->logged_attempt = r->attempt_id;
    }
    return true;
}

/* settles_its_send says whether the tier's send of a request cut short
 * is this worker's to end. An attempt left open is settled in doubt by
 * the job's next holder, which then takes the send off the tier
 * (tier_forget_send): ending it here too would take out another worker's
 * send. So it is ours when the attempt was closed by us (closed), or by a
 * cancel of the job while we held it (no claim since ours: a later
 * holder may already have settled it in doubt), or never recorded. */
static bool
settles_its_send(struct run *r, bool closed)
{
    struct q_job job;
    bool ours;

    if (closed || r->attempt_id <= 0)
        return true;
    if (q_job_get(r->w->db, r->job.id, &job) != 0)
        return false; /* store away: it cannot be written now anyway */
    ours = job.state == Q_JOB_CANCELLED && job.claims == r->job.claims;
    q_job_cleanup(&job);
    return ours;
}

void
worker__on_done(http_call *call, struct http_response *res, void *arg)
{
    struct run *r = arg;
    struct worker *w = r->w;
    int64_t now = worker__now(w);

    (void)call;
    r->call = NULL;
    worker__slot_freed(w, now);
    if (res->error == HTTP_ERR_CANCELLED || r->state == WORKER_RUN_LOST) {
        /* Stopped or lease lost: the endpoint may have acted, so the
         * attempt stays without result and the next holder decides
         * (unless stopped_mid_request can close it). */
        bool closed;
        worker__turn_begin(w);
        closed =
            r->state != WORKER_RUN_LOST && stopped_mid_request(r, res, now);
        if (r->send_id > 0 && cur_tier(r) != NULL &&
            settles_its_send(r, closed)) {
            struct tier_outcome o;
            tier_outcome_init(&o);
            if (tier_settle(w->db, cur_tier(r), r->send_id, now, &o, NULL) != 0)
                log_warn("cannot settle a cancelled request");
        }
        r->send_id = 0;
        if (r->state == WORKER_RUN_LOST)
            worker__lose(r);
        else
            worker__give_back(r, now);
        return;
    }
    /* A job that leaves while its request is out is LOST (above). */
    assert(!run_has_left(r));
    /* Kept until the turn that writes it has committed. */
    worker__hold(r, res);
    if (!worker__turn_begin(w)) {
        worker__run_to(r, WORKER_RUN_RELOAD); /* acted on once it is back */
        return;
    }
    worker__answer(r);
}

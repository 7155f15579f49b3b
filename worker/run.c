/* run.c: a job's life on this worker: its run started from the claimed
 * job and freed when it leaves, entering each step with its context
 * derived from the attempts ledger, and settling an attempt left in
 * doubt by an earlier holder. The ways a job leaves are in leave.c.
 */
#include "worker/internal.h"
#include "worker/money.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "park/park.h"
#include "tier/tier.h"
#include "worker/batch.h"
#include "worker/foreach.h"

int
worker__tier_index(const struct worker *w, const char *name)
{
    for (size_t i = 0; name != NULL && i < w->cfg->ntiers; i++) {
        if (strcmp(w->cfg->tiers[i].name, name) == 0)
            return (int)i;
    }
    return -1;
}

void
worker__forget_send(struct run *r, const struct q_attempt *a, int64_t now)
{
    struct worker *w = r->w;
    int ti = a->tier != NULL ? worker__tier_index(w, a->tier) : -1;

    if (ti >= 0 &&
        tier_forget_send(w->db, &w->cfg->tiers[ti], a->started_at, now) != 0)
        log_warn("job %lld: cannot take the lost request off tier %s",
                 (long long)r->job.id, a->tier);
}

/* ---- entering a step: context from the ledger ---------------------- */

/* Rebuilds the step's context from its attempts (an attempt left without
 * a result by an earlier holder is settled by the caller, step_enter). */
void
worker__derive_context(struct run *r, const struct q_attempt *a, size_t n)
{
    struct worker *w = r->w;
    int stops = 0;

    r->cur_tier = -1;
    r->wait_tier = -1;
    memset(r->switched, 0, w->cfg->ntiers * sizeof(bool));
    r->degraded = r->schema_retried = false;
    r->throttle_waits = 0;
    memset(r->sends, 0, (w->cfg->ntiers + 1) * sizeof(int));
    r->attempt_no = 0;
    for (size_t i = 0; i < n; i++) {
        int ti = worker__tier_index(w, a[i].tier);
        const char *d = a[i].decision ? a[i].decision : "";
        const char *o = a[i].outcome ? a[i].outcome : "";
        r->attempt_no = a[i].attempt;
        if (a[i].attempt <= r->reset_after)
            continue; /* before an operator's retry: a fresh start */
        r->cur_tier = ti;
        /* Counted per tier, so a detour to another tier (one refused
         * admission for a while) does not restart a tier's count. */
        bool stop_free = a[i].reason != NULL &&
                         strcmp(a[i].reason, WORKER_STOPPED) == 0 &&
                         ++stops <= WORKER_STOPS_FREE;
        if (!(strcmp(d, "backoff_retry") == 0 &&
              strcmp(o, "soft_throttle") == 0) &&
            !stop_free)
            (*sends_on(r, ti))++;
        if (a[i].latency_ms > 0)
            r->last_latency = a[i].latency_ms;
        /* A batch item that failed: the step goes on on other tiers. */
        if (ti >= 0 && w->cfg->tiers[ti].batch_mode && a[i].finished_at != 0 &&
            strcmp(o, "ok") != 0)
            r->switched[ti] = true;
        if (strcmp(d, "switch_tier_replay") == 0 && ti >= 0) {
            r->switched[ti] = true;
            r->cur_tier = -1;
        }
        r->degraded |= strcmp(d, "degrade_then_retry") == 0;
        if (strcmp(d, "backoff_retry") == 0 && strcmp(o, "schema_invalid") == 0)
            r->schema_retried = true;
        if (strcmp(d, "backoff_retry") == 0 && strcmp(o, "soft_throttle") == 0)
            r->throttle_waits++;
    }
}

/* An attempt without a result, found on entry, was sent (or about to be)
 * by a worker that died or gave the job back: nobody knows whether the
 * endpoint acted on it. A step that may not be replayed is parked. One
 * that may is decided like a lost answer (a timeout that counts as an
 * attempt): retried while attempts are left on the tier, else switched,
 * else failed. */
static void
settle_in_doubt(struct run *r, const struct q_attempt *last)
{
    struct worker *w = r->w;
    const struct spec_step *s = cur_spec(r);
    bool replay = s->replayable || s->idempotency_key != NULL;
    int64_t now = worker__now(w);
    struct policy_class c;
    struct policy_decision d = {.action = POLICY_PARK_FOR_HUMAN};
    struct policy_step ps;
    struct q_attempt_result res = {
        .outcome = "unknown", .reason = "in_doubt", .finished_at = now};
    struct attempt_log line = {.job = r->job.id,
                               .step = s->name,
                               .attempt = last->attempt,
                               .tier = last->tier,
                               .outcome = "unknown",
                               .reason = "in_doubt"};
    char err[512];

    if (s->kind == SPEC_STEP_CHAT) {
        /* The lost request was charged its estimate when it was recorded;
         * the endpoint may have spent it, so the step keeps that charge
         * (max_total_tokens holds across crashes). The context derived
         * from the ledger rebuilds the same request. */
        cJSON *body = worker__chat_body(r);
        int64_t in = 0;
        res.tokens = worker__estimate_tokens(body, &in);
        cJSON_Delete(body);
        worker__cost_worst(last->tier ? config_find_tier(w->cfg, last->tier)
                                      : NULL,
                           in, res.tokens, &res);
    }
    if (replay) {
        policy_class_init(&c, POLICY_TIMEOUT, POLICY_REASON_IN_DOUBT);
        r->input_tokens = 0;
        worker__step_context(r, now, true, &ps);
        policy_decide(&c, &ps, &w->pcfg, &d);
    }
    res.decision = line.decision = policy_action_name(d.action);
    res.delay_ms = line.delay_ms = d.wait_ms;
    if (q_attempt_finish(w->db, last->id, &res) != 0)
        log_warn("job %lld: cannot settle in-doubt attempt",
                 (long long)r->job.id);
    worker__forget_send(r, last, now);
    log_attempt(&line);
    snprintf(r->sha, sizeof(r->sha), "%s",
             last->request_sha256 ? last->request_sha256 : "");
    switch (d.action) {
    case POLICY_BACKOFF_RETRY:
        worker__wait_then_attempt(r, d.wait_ms);
        return;
    case POLICY_SWITCH_TIER_REPLAY:
        worker__switch_tier(r);
        return;
    case POLICY_PARK_FOR_HUMAN:
        worker__park(r, "in_doubt",
                     "in doubt: this request was recorded but no answer was "
                     "(its worker stopped, lost its database, or could not "
                     "flush the record to disk); the endpoint may or may not "
                     "have acted on it");
        return;
    default:
        snprintf(err, sizeof(err),
                 "step %s: in doubt after the worker stopped mid-request, "
                 "with no attempts or tiers left",
                 s->name);
        worker__fail_job(r, err);
        return;
    }
}

/* The last attempt was answered and decided park_for_human, but the park
 * did not happen (it failed and the job was given back): carry the
 * decision out now instead of sending the step again. */
static void
park_again(struct run *r, const struct q_attempt *last)
{
    const char *o = last->outcome ? last->outcome : "unknown";
    bool wall = strcmp(o, "hard_quota") == 0 || strcmp(o, "refused") == 0;
    char err[ERROR_BODY_MAX + 512];

    snprintf(r->sha, sizeof(r->sha), "%s",
             last->request_sha256 ? last->request_sha256 : "");
    snprintf(err, sizeof(err), "step %s: HTTP %d %s (%s): %.*s",
             cur_spec(r)->name, last->status, o,
             last->reason ? last->reason : "-", ERROR_BODY_MAX,
             last->body ? last->body : "");
    worker__park(r, wall ? o : "in_doubt", err);
}

/* Takes what an operator's park retry left on the current step's row
 * (steps: the job's rows), and whether the ledger holds any attempt of
 * the step (*sent). */
static void
take_step_row(struct run *r, const struct q_step *steps, size_t n, bool *sent)
{
    r->reset_after = 0;
    r->pin_tier = -1;
    *sent = false;
    for (size_t i = 0; i < n; i++) {
        if (steps[i].index != r->step)
            continue;
        r->reset_after = steps[i].reset_after;
        if (steps[i].pin_tier != NULL)
            r->pin_tier = worker__tier_index(r->w, steps[i].pin_tier);
        *sent = steps[i].attempts > 0;
    }
}

/* A job's step rows, as q_steps_get gave them (v may be NULL: none). */
struct step_rows {
    const struct q_step *v;
    size_t n;
};

/* Reads the current step's row (take_step_row) and the step's attempts:
 * none to read when the row counts none (one round trip less per step on
 * a remote store). rows: the job's rows read in this turn, or NULL. */
static int
load_step(struct run *r, const struct step_rows *rows, struct q_attempt **a,
          size_t *n)
{
    struct q_step *steps = NULL;
    size_t ns = 0;
    bool sent = false;
    int rc = 0;

    if (rows == NULL && (rc = q_steps_get(r->w->db, r->job.id, &steps, &ns)))
        return rc;
    take_step_row(r, rows != NULL ? rows->v : steps,
                  rows != NULL ? rows->n : ns, &sent);
    q_steps_free(steps, ns);
    *a = NULL;
    *n = 0;
    return sent ? q_attempts_list(r->w->db, r->job.id, r->step, a, n) : 0;
}

/* The answer r kept (r->held) is for the step's last attempt, a, which
 * the store still shows without a result: the turn that wrote it did not
 * commit. The attempt's fields come back from what was kept, and the
 * answer is acted on again in this turn. */
static void
answer_again(struct run *r, const struct q_attempt *a)
{
    struct held *h = r->held;

    r->attempt_id = a->id;
    r->attempt_no = a->attempt;
    r->attempt_est = -1; /* not kept: the store corrects the step */
    r->send_id = h->send_id;
    r->send_est = h->send_est;
    r->sent_at = h->sent_at;
    r->input_tokens = h->input_tokens;
    free(r->body);
    r->body = xstrndup(h->body, h->body_len);
    r->body_len = h->body_len;
    memcpy(r->sha, h->sha, sizeof(r->sha));
    worker__answer(r);
}

/* Enters the run's current step; again: after a lost turn, when an
 * answer kept for the step's last attempt is acted on instead of
 * settling that attempt as in doubt. rows: the job's step rows when the
 * caller has just read them, else NULL. */
static void
enter(struct run *r, bool again, const struct step_rows *rows)
{
    struct worker *w = r->w;
    struct q_attempt *a = NULL;
    size_t n = 0;

    r->sha[0] = '\0';
    free(r->body);
    r->body = NULL;
    worker__batch_leave(r);
    if (r->step >= (int)r->spec->nsteps) {
        if (q_complete(w->db, r->job.id, w->id, worker__now(w)) != 0)
            log_warn("job %lld: lease lost before completion",
                     (long long)r->job.id);
        else
            worker__ended(r, false);
        worker__finish(r, "succeeded");
        return;
    }
    switch (worker__step_gate(r)) {
    case WORKER_GATE_SKIPPED:
        enter(r, again, NULL); /* the next step */
        return;
    case WORKER_GATE_ENDED:
        return;
    case WORKER_GATE_GO:
        break;
    }
    if (cur_spec(r)->foreach_in != NULL) { /* one job per element */
        worker__foreach_enter(r);
        return;
    }
    if (load_step(r, rows, &a, &n) != 0) {
        worker__give_back(r, worker__now(w) + 1000);
        return;
    }
    worker__agent_leave(r); /* another step's loop ended */
    if (cur_spec(r)->tools != NULL && r->held == NULL) {
        worker__agent_enter(r, a, n); /* the tool loop (agent.c) */
        q_attempts_free(a, n);
        return;
    }
    worker__derive_context(r, a, n);
    if (again && r->held != NULL &&
        (n == 0 || a[n - 1].finished_at != 0 ||
         a[n - 1].id != r->held->attempt_id)) {
        /* Written after all (the commit's answer was lost, not the
         * commit), or not this step's: the store's word stands. */
        worker__held_free(r->held);
        r->held = NULL;
    }
    if (n > 0 && a[n - 1].finished_at == 0 && again && r->held != NULL) {
        answer_again(r, &a[n - 1]);
        q_attempts_free(a, n);
        return;
    }
    /* An item of a batch still open waits for its result (batch.c):
     * never sent again while its batch may answer it. */
    if (n > 0 && a[n - 1].finished_at == 0 &&
        worker__batch_join(r, &a[n - 1])) {
        q_attempts_free(a, n);
        return;
    }
    if (n > 0 && a[n - 1].finished_at == 0) {
        settle_in_doubt(r, &a[n - 1]);
        q_attempts_free(a, n);
        return;
    }
    if (n > 0 && a[n - 1].attempt > r->reset_after && a[n - 1].decision &&
        strcmp(a[n - 1].decision, "park_for_human") == 0) {
        park_again(r, &a[n - 1]);
        q_attempts_free(a, n);
        return;
    }
    q_attempts_free(a, n);
    worker__attempt(r);
}

void
worker__step_enter(struct run *r)
{
    enter(r, false, NULL);
}

/* Reads the job's progress from the store (the outputs of the steps done;
 * the current step is the first that did not succeed or get skipped) and
 * enters the current step. */
static void
resume(struct run *r, bool again)
{
    struct worker *w = r->w;
    struct q_step *steps = NULL;
    size_t ns = 0;

    if (r->job.has_steps && !again) {
        /* read by the claim, in this turn */
        steps = r->job.steps;
        ns = r->job.nsteps;
        r->job.steps = NULL;
        r->job.nsteps = 0;
        r->job.has_steps = false;
    } else if (q_steps_get(w->db, r->job.id, &steps, &ns) != 0) {
        worker__give_back(r, worker__now(w) + 1000);
        return;
    }
    r->step = 0;
    for (size_t i = 0; i < r->spec->nsteps; i++) {
        free(r->outputs[i]);
        r->outputs[i] = NULL;
        r->skipped[i] = false;
    }
    for (size_t i = 0; i < ns; i++) {
        if (steps[i].index < 0 || steps[i].index >= (int)r->spec->nsteps)
            continue;
        if (steps[i].state == Q_STEP_SUCCEEDED && steps[i].output)
            r->outputs[steps[i].index] = xstrdup(steps[i].output);
        /* Skipped by its "when": the row keeps why (an operator's skip
         * keeps none, and later templates read an empty output). */
        if (steps[i].state == Q_STEP_SKIPPED && steps[i].output)
            r->skipped[steps[i].index] = true;
    }
    while (r->step < (int)r->spec->nsteps) {
        bool done = false;
        for (size_t i = 0; i < ns; i++) {
            if (steps[i].index == r->step &&
                (steps[i].state == Q_STEP_SUCCEEDED ||
                 steps[i].state == Q_STEP_SKIPPED))
                done = true;
        }
        if (!done)
            break;
        r->step++;
    }
    if (!again)
        worker__progress(r, r->job.claims > 1 ? "resumed" : "started");
    enter(r, again, &(struct step_rows){steps, ns});
    q_steps_free(steps, ns);
}

/* ---- a run's start and end ----------------------------------------- */

void
worker__run_free(struct run *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; r->spec != NULL && i < r->spec->nsteps; i++)
        free(r->outputs[i]);
    free(r->outputs);
    free(r->skipped);
    free(r->switched);
    free(r->sends);
    free(r->holds); /* a send never answered: its reservation stays spent */
    free(r->body);
    cJSON_Delete(r->ready.body);
    cJSON_Delete(r->filled.body);
    worker__held_free(r->held);
    worker__agent_free(r->agent);
    if (r->has_pending)
        http_request_cleanup(&r->pending);
    spec_job_free(r->spec);
    q_job_cleanup(&r->job);
    free(r);
}

/* Parses the stored job with its stored input (which its templates
 * read); 0 or -EINVAL with why in err. */
static int
parse_stored(struct run *r, char *err, size_t len)
{
    struct spec_opts o = {.stored = true};
    cJSON *input = NULL;
    int rc;

    if (r->job.input != NULL && (input = cJSON_Parse(r->job.input)) == NULL) {
        snprintf(err, len, "its input is not JSON");
        return -EINVAL;
    }
    o.input = input;
    rc = spec_parse(r->job.spec, strlen(r->job.spec), &o, &r->spec, err, len);
    cJSON_Delete(input);
    return rc;
}

void
worker__run_start(struct worker *w, struct q_job *job)
{
    struct run *r = xcalloc(1, sizeof(*r));
    char err[512];

    r->w = w;
    r->attempt_est = -1;
    r->fresh = true; /* dropped if the claim's turn does not commit */
    r->job = *job;
    memset(job, 0, sizeof(*job));
    r->switched = xcalloc(w->cfg->ntiers + 1, sizeof(bool));
    r->sends = xcalloc(w->cfg->ntiers + 1, sizeof(int));
    r->cur_tier = -1;
    r->wait_tier = -1;
    r->next = w->runs;
    w->runs = r;
    w->nruns++;
    if (parse_stored(r, err, sizeof(err)) != 0) {
        char msg[700];
        snprintf(msg, sizeof(msg), "the stored job is not valid: %s", err);
        r->spec = NULL;
        if (q_fail(w->db, r->job.id, w->id, msg, worker__now(w)) != 0)
            log_warn("job %lld: cannot fail", (long long)r->job.id);
        else
            worker__ended(r, true);
        worker__run_to(r, WORKER_RUN_DONE);
        return;
    }
    r->outputs = xcalloc(r->spec->nsteps, sizeof(char *));
    r->skipped = xcalloc(r->spec->nsteps, sizeof(bool));
    resume(r, false);
}

void
worker__run_resume(struct run *r)
{
    r->wake_at = 0;
    r->admit_since = 0;
    r->send_id = 0;
    resume(r, true);
}

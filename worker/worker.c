/* worker.c: the loop of `stepq work`.
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

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "park/park.h"
#include "policy/policy.h"
#include "queue/queue.h"
#include "spec/spec.h"
#include "worker/http.h"
#include "worker/internal.h"
#include "worker/tier.h"

/* A wait up to this long keeps the job's slot; a longer one gives the job
 * back to the queue with a later run_at. */
#define HOLD_MAX_MS          2000
#define IDLE_POLL_MS         200
#define DRAIN_HORIZON_MS     60000
#define HTTP_STEP_TIMEOUT_MS 60000
#define ERROR_BODY_MAX       2000
#define HOUR_MS              (3600 * 1000)
#define TICK_GAP_MAX_MS      50

struct run;

struct worker {
    uv_loop_t loop;
    uv_timer_t tick;
    uv_signal_t sigint;
    uv_signal_t sigterm;
    uv_idle_t idle;   /* active while a turn is open: poll must not block */
    uv_check_t check; /* ends the turn: commit, then send */
    bool tx_open;
    q_db *db;
    http_client *http;
    const struct config *cfg;
    policy_rules *rules;
    struct policy_config pcfg;
    struct policy_streak *streaks; /* one per config tier */
    char id[128];
    int concurrency;
    bool drain;
    bool stopping;
    bool progress;
    bool closing;
    bool in_tick;           /* on_tick is running: it re-arms itself (rearm) */
    bool tick_after_commit; /* tick again soon after the turn commits */
    int64_t turn_started;   /* monotonic ms: the turn's BEGIN */
    int64_t grace_ms;
    int64_t stop_deadline;
    int64_t lease_ms;
    int64_t next_heartbeat;
    int64_t next_claim;
    struct run *runs;
    int nruns;
    /* Admission within one pass over the waiting runs: a tier that said
     * no to one run says no to the runs behind it (FIFO), without asking
     * the database again. */
    uint64_t pass;
    struct tier_no *refused; /* one per config tier */
    int64_t *hooks;          /* owned: park items parked this turn, told to the
                                on_park hook once the turn has committed */
    size_t nhooks, caphooks;
    uint64_t rng;
    int failed; /* a fatal error: stop */
};

struct tier_no {
    uint64_t pass; /* the pass it said no in */
    const char *reason;
    int64_t retry_at;
};

struct run {
    struct worker *w;
    struct run *next;
    struct q_job job;      /* owned */
    struct spec_job *spec; /* owned */
    char **outputs;        /* owned, one per step */
    const char **names;    /* borrowed from spec, one per step */
    int step;
    /* The step's context, derived from the ledger on entry. */
    int cur_tier;   /* config tier index, or -1 */
    bool *switched; /* per config tier: switched away from */
    bool degraded;
    bool schema_retried;
    int throttle_waits;
    int *sends;      /* per config tier, and one for http steps: sends of the
                        step that count as attempts (a throttle wait does not) */
    int reset_after; /* ledger attempts up to this predate a park retry */
    int pin_tier;    /* a park retry's tier, or -1 */
    int wait_tier;   /* a throttled retry waits for this tier, or -1 */
    int64_t last_latency;
    /* The attempt in flight. */
    http_call *call;
    int64_t attempt_id;
    int attempt_no;
    int64_t send_id; /* tier send, 0 for http steps */
    int64_t input_tokens;
    char sha[65];
    char *body;                  /* owned: the request body as sent */
    struct http_request pending; /* owned: recorded, sent after commit */
    bool has_pending;
    size_t body_len;
    int64_t wake_at;     /* > 0: waiting until then */
    int64_t admit_since; /* > 0: waiting for a tier since then (FIFO) */
    int64_t sent_at;     /* when the attempt in flight was admitted */
    struct {
        cJSON *body; /* owned: the chat body built while waiting, or NULL */
        int step;
        bool degraded;
        int64_t est, input;
    } ready;
    bool finished; /* the job left this worker */
    bool lost;     /* the lease was lost: touch nothing */
};

static void attempt(struct run *r);
static void settle_unsent(struct run *r, int64_t now);
static void step_enter(struct run *r);
static void kick(struct worker *w);
static void on_tick(uv_timer_t *t);
static void turn_begin(struct worker *w);
static void on_idle(uv_idle_t *h);
static void step_context(struct run *r, int64_t now, bool wrote,
                         struct policy_step *ps);
static cJSON *chat_body(const struct run *r);
static int64_t estimate_tokens(const cJSON *req, int64_t *input);

int (*worker__park_tx_begin)(q_db *db) = q_tx_begin;
int (*worker__turn_commit)(q_db *db) = q_tx_commit;

/* ---- small helpers ---------------------------------------------------- */

static uint64_t
next_rand(struct worker *w)
{
    /* xorshift64*: jitter only, not security. */
    w->rng ^= w->rng >> 12;
    w->rng ^= w->rng << 25;
    w->rng ^= w->rng >> 27;
    return w->rng * 2685821657736338717ULL;
}

static const struct spec_step *
cur_spec(const struct run *r)
{
    return &r->spec->steps[r->step];
}

/* The step's counted sends on tier ti (-1: an http step, no tier). */
static int *
sends_on(struct run *r, int ti)
{
    return &r->sends[ti >= 0 ? ti : (int)r->w->cfg->ntiers];
}

static const struct config_tier *
cur_tier(const struct run *r)
{
    return r->cur_tier >= 0 ? &r->w->cfg->tiers[r->cur_tier] : NULL;
}

static int
tier_index(const struct worker *w, const char *name)
{
    for (size_t i = 0; name != NULL && i < w->cfg->ntiers; i++) {
        if (strcmp(w->cfg->tiers[i].name, name) == 0)
            return (int)i;
    }
    return -1;
}

static void
progress(const struct run *r, const char *what)
{
    if (r->w->progress)
        fprintf(stderr, "job %lld %s: %s\n", (long long)r->job.id, r->job.name,
                what);
}

static void
finish(struct run *r, const char *state)
{
    if (!r->finished && state != NULL)
        progress(r, state);
    r->finished = true;
    kick(r->w);
}

/* Gives the job back to the queue, due at run_at; the step is pending
 * again (its context lives in the ledger). */
static void
give_back(struct run *r, int64_t run_at)
{
    struct worker *w = r->w;
    int64_t now = clock_now_ms();

    if (!r->lost && r->step < (int)r->spec->nsteps) {
        if (q_step_set(w->db, r->job.id, r->step, Q_STEP_PENDING, NULL, NULL,
                       0) != 0)
            log_warn("job %lld: cannot reset step state", (long long)r->job.id);
    }
    if (!r->lost && q_release(w->db, r->job.id, w->id, run_at, now) != 0)
        log_warn("job %lld: lease already gone at release",
                 (long long)r->job.id);
    finish(r, NULL);
}

static void
fail_job(struct run *r, const char *error)
{
    struct worker *w = r->w;
    int64_t now = clock_now_ms();
    int rc;

    if (r->step < (int)r->spec->nsteps &&
        q_step_set(w->db, r->job.id, r->step, Q_STEP_FAILED, NULL, NULL, 0))
        log_warn("job %lld: cannot mark step failed", (long long)r->job.id);
    rc = q_fail(w->db, r->job.id, w->id, error, now);
    if (rc != 0)
        log_warn("job %lld: cannot fail job: lease lost", (long long)r->job.id);
    finish(r, "failed");
}

static void
wait_then_attempt(struct run *r, int64_t wait_ms)
{
    int64_t now = clock_now_ms();

    if (wait_ms > HOLD_MAX_MS) {
        give_back(r, now + wait_ms);
        return;
    }
    r->wake_at = now + (wait_ms > 0 ? wait_ms : 0);
    if (r->wake_at == 0)
        r->wake_at = 1;
    kick(r->w);
}

/* "step NAME: HTTP 429 hard_quota (daily_cap): <body>" */
static char *
error_text(const struct run *r, const struct http_response *res,
           const struct policy_class *c)
{
    size_t blen =
        res->body_len < ERROR_BODY_MAX ? res->body_len : ERROR_BODY_MAX;
    size_t n = blen + 512;
    char *s = xmalloc(n);
    int k;

    if (res->error != HTTP_ERR_NONE)
        k = snprintf(s, n, "step %s: %s (%s, %s): %s", cur_spec(r)->name,
                     http_error_name(res->error),
                     policy_outcome_name(c->outcome),
                     c->reason ? c->reason : "-", res->error_text);
    else
        k = snprintf(s, n, "step %s: HTTP %d %s (%s): ", cur_spec(r)->name,
                     res->status, policy_outcome_name(c->outcome),
                     c->reason ? c->reason : "-");
    if (res->error == HTTP_ERR_NONE && k > 0 && (size_t)k < n) {
        memcpy(s + k, res->body, blen);
        s[(size_t)k + blen] = '\0';
        json_utf8_scrub(s + k, blen);
    }
    return s;
}

/* ---- parking ------------------------------------------------------------ */

/* Runs the config's on_park command with the item's JSON on its input. A
 * failing or hanging hook never blocks the worker: it runs beside the loop
 * and is killed at its time limit. */
static void
notify(struct worker *w, int64_t id)
{
    struct q_park_item it;
    cJSON *o;
    char *json;

    if (w->cfg->on_park == NULL || q_park_get(w->db, id, &it) != 0)
        return;
    o = park_item_json(&it);
    q_park_item_cleanup(&it);
    json = json_print(o);
    cJSON_Delete(o);
    if (park_hook_run(&w->loop, w->cfg->on_park,
                      (int64_t)(w->cfg->on_park_timeout_s * 1000), json) != 0)
        log_warn("park item %lld: on_park hook did not start", (long long)id);
    free(json);
}

static void
park(struct run *r, const char *reason, const char *error)
{
    struct worker *w = r->w;
    const struct config_tier *t = cur_tier(r);
    struct q_park_new p = {
        .job_id = r->job.id,
        .step = r->step,
        .step_name = cur_spec(r)->name,
        .reason = reason,
        .attempts = r->attempt_no,
        .request_sha256 = r->sha[0] ? r->sha : NULL,
        .request = r->body,
        .error = error,
        .tier = t ? t->name : NULL,
        .parked_at = clock_now_ms(),
    };
    int64_t id = 0;

    /* A savepoint inside the turn's transaction: when it cannot even be
     * opened there is nothing of ours to roll back, and a rollback here
     * would abandon the caller's level, the whole turn. */
    if (worker__park_tx_begin(w->db) != 0) {
        log_error("job %lld: cannot park step %s; giving the job back",
                  (long long)r->job.id, p.step_name);
        give_back(r, clock_now_ms() + 1000);
        return;
    }
    if (q_park_add(w->db, &p, &id) != 0 ||
        q_park_job(w->db, r->job.id, w->id, p.parked_at) != 0) {
        q_tx_rollback(w->db);
        log_error("job %lld: cannot park step %s; giving the job back",
                  (long long)r->job.id, p.step_name);
        give_back(r, clock_now_ms() + 1000);
        return;
    }
    if (q_tx_commit(w->db) != 0) {
        give_back(r, clock_now_ms() + 1000);
        return;
    }
    /* The hook is told once the turn has committed (run_hooks): before,
     * the item it is told of may not exist for anyone else yet. */
    if (w->nhooks == w->caphooks) {
        w->caphooks = w->caphooks ? 2 * w->caphooks : 8;
        w->hooks = xrealloc(w->hooks, w->caphooks * sizeof(*w->hooks));
    }
    w->hooks[w->nhooks++] = id;
    finish(r, "parked");
}

/* Starts the on_park hooks of the items the turn parked; runs after the
 * turn's commit. committed false (the commit failed): the items do not
 * exist, so no hook is told of them. */
static void
run_hooks(struct worker *w, bool committed)
{
    for (size_t i = 0; committed && i < w->nhooks; i++)
        notify(w, w->hooks[i]);
    w->nhooks = 0;
}

/* ---- entering a step: context from the ledger --------------------------- */

/* Rebuilds the step's context from its attempts. Returns the attempt left
 * without a result by an earlier holder (in doubt), or NULL. */
static void
derive_context(struct run *r, const struct q_attempt *a, size_t n)
{
    struct worker *w = r->w;

    r->cur_tier = -1;
    r->wait_tier = -1;
    memset(r->switched, 0, w->cfg->ntiers * sizeof(bool));
    r->degraded = r->schema_retried = false;
    r->throttle_waits = 0;
    memset(r->sends, 0, (w->cfg->ntiers + 1) * sizeof(int));
    r->attempt_no = 0;
    for (size_t i = 0; i < n; i++) {
        int ti = tier_index(w, a[i].tier);
        const char *d = a[i].decision ? a[i].decision : "";
        const char *o = a[i].outcome ? a[i].outcome : "";
        r->attempt_no = a[i].attempt;
        if (a[i].attempt <= r->reset_after)
            continue; /* before an operator's retry: a fresh start */
        r->cur_tier = ti;
        /* Counted per tier, so a detour to another tier (one refused
         * admission for a while) does not restart a tier's count. */
        if (!(strcmp(d, "backoff_retry") == 0 &&
              strcmp(o, "soft_throttle") == 0))
            (*sends_on(r, ti))++;
        if (a[i].latency_ms > 0)
            r->last_latency = a[i].latency_ms;
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
    int64_t now = clock_now_ms();
    struct policy_class c = {.outcome = POLICY_TIMEOUT,
                             .reason = "in_doubt",
                             .rule = -1,
                             .wait_ms = -1,
                             .reset_at_ms = -1,
                             .remaining_requests = -1,
                             .remaining_tokens = -1,
                             .requests_reset_at_ms = -1,
                             .tokens_reset_at_ms = -1};
    struct policy_decision d = {POLICY_PARK_FOR_HUMAN, 0, "in_doubt"};
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
        cJSON *body = chat_body(r);
        int64_t in = 0;
        res.tokens = estimate_tokens(body, &in);
        cJSON_Delete(body);
    }
    if (replay) {
        r->input_tokens = 0;
        step_context(r, now, true, &ps);
        policy_decide(&c, &ps, &w->pcfg, &d);
    }
    res.decision = line.decision = policy_action_name(d.action);
    res.delay_ms = line.delay_ms = d.wait_ms;
    if (q_attempt_finish(w->db, last->id, &res) != 0)
        log_warn("job %lld: cannot settle in-doubt attempt",
                 (long long)r->job.id);
    log_attempt(&line);
    snprintf(r->sha, sizeof(r->sha), "%s",
             last->request_sha256 ? last->request_sha256 : "");
    switch (d.action) {
    case POLICY_BACKOFF_RETRY:
        wait_then_attempt(r, d.wait_ms);
        return;
    case POLICY_SWITCH_TIER_REPLAY:
        if (r->cur_tier >= 0)
            r->switched[r->cur_tier] = true;
        r->cur_tier = -1;
        attempt(r);
        return;
    case POLICY_PARK_FOR_HUMAN:
        park(r, "in_doubt",
             "in doubt: the worker stopped while this request was in "
             "flight; the endpoint may or may not have acted on it");
        return;
    default:
        snprintf(err, sizeof(err),
                 "step %s: in doubt after the worker stopped mid-request, "
                 "with no attempts or tiers left",
                 s->name);
        fail_job(r, err);
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
    park(r, wall ? o : "in_doubt", err);
}

/* Reads what an operator's park retry left on the step row. */
static int
load_step_row(struct run *r)
{
    struct q_step *steps = NULL;
    size_t n = 0;
    int rc = q_steps_get(r->w->db, r->job.id, &steps, &n);

    r->reset_after = 0;
    r->pin_tier = -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (steps[i].index != r->step)
            continue;
        r->reset_after = steps[i].reset_after;
        if (steps[i].pin_tier != NULL)
            r->pin_tier = tier_index(r->w, steps[i].pin_tier);
    }
    q_steps_free(steps, n);
    return rc;
}

static void
step_enter(struct run *r)
{
    struct worker *w = r->w;
    struct q_attempt *a = NULL;
    size_t n = 0;

    r->sha[0] = '\0';
    free(r->body);
    r->body = NULL;
    if (r->step >= (int)r->spec->nsteps) {
        if (q_complete(w->db, r->job.id, w->id, clock_now_ms()) != 0)
            log_warn("job %lld: lease lost before completion",
                     (long long)r->job.id);
        finish(r, "succeeded");
        return;
    }
    if (load_step_row(r) != 0 ||
        q_attempts_list(w->db, r->job.id, r->step, &a, &n) != 0) {
        give_back(r, clock_now_ms() + 1000);
        return;
    }
    derive_context(r, a, n);
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
    attempt(r);
}

/* ---- choosing a tier ---------------------------------------------------- */

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
        int ti = tier_index(r->w, c->valuestring);
        if (ti >= 0)
            idx[n++] = ti;
    }
    return n;
}

/* Admits the request on the first candidate tier that takes it. Returns
 * the tier index, or -1 with *retry_at (INT64_MAX: no tier left) and a
 * description of why in why. */
static int
choose_tier(struct run *r, int64_t est, int64_t now, int64_t *retry_at,
            char *why, size_t whylen)
{
    struct worker *w = r->w;
    int *idx = xcalloc(w->cfg->ntiers + 1, sizeof(int));
    size_t n = candidates(r, idx), used = 0;
    int chosen = -1;

    *retry_at = INT64_MAX;
    why[0] = '\0';
    for (size_t i = 0; i < n && chosen < 0; i++) {
        const struct config_tier *t = &w->cfg->tiers[idx[i]];
        struct tier_verdict v;
        int64_t send = 0;
        struct tier_no *no = &w->refused[idx[i]];
        if (r->switched[idx[i]])
            continue;
        if (no->pass == w->pass) {
            v = (struct tier_verdict){false, false, no->reason, no->retry_at};
        } else if (tier_admit(w->db, t, now, est, *sends_on(r, idx[i]) > 0, &v,
                              &send) != 0) {
            continue;
        }
        if (v.admitted) {
            chosen = idx[i];
            r->send_id = send;
            break;
        }
        /* The allowance depends on the step (headroom above degrade_at
         * for a step already on the tier): not the same no for all. */
        if (strcmp(v.reason, "allowance") != 0)
            *no = (struct tier_no){w->pass, v.reason, v.retry_at};
        if (v.retry_at < *retry_at)
            *retry_at = v.retry_at;
        if (used < whylen) {
            int k = snprintf(why + used, whylen - used, "%s%s: %s",
                             used ? "; " : "", t->name, v.reason);
            if (k > 0)
                used += (size_t)k;
        }
    }
    free(idx);
    return chosen;
}

/* Other tiers of the step that admit now or within the slack. */
static int
tiers_left(const struct run *r, int64_t est, int64_t now, int64_t slack)
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

/* ---- sending an attempt -------------------------------------------------- */

static void on_done(http_call *call, struct http_response *res, void *arg);

/* The chat request body before the tier's model is set: the step's
 * request with templates expanded, degraded if the step was degraded. */
static cJSON *
chat_body(const struct run *r)
{
    const struct spec_step *s = cur_spec(r);
    cJSON *req = worker__expand(
        s->request, r->names, (const char *const *)r->outputs, r->spec->nsteps);
    if (r->degraded)
        worker__degrade(req, s->degrade);
    return req;
}

static int64_t
estimate_tokens(const cJSON *req, int64_t *input)
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
    body = chat_body(r);
    *est = estimate_tokens(body, &r->input_tokens);
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

/* The step's own timeout_s, else the tier's, else 60 s (docs/reference.md). */
static int64_t
timeout_ms(const struct spec_step *s, const struct config_tier *t)
{
    if (s->timeout_s > 0)
        return (int64_t)(s->timeout_s * 1000);
    return t != NULL ? (int64_t)(t->timeout_s * 1000) : HTTP_STEP_TIMEOUT_MS;
}

static void
attempt(struct run *r)
{
    struct worker *w = r->w;
    const struct spec_step *s = cur_spec(r);
    struct http_request req;
    struct q_attempt_start st;
    int64_t now = clock_now_ms(), est = 0, retry_at = 0;
    cJSON *body = NULL;
    char err[1024], why[512];
    int rc, ti = -1;

    r->wake_at = 0;
    if (w->stopping) {
        give_back(r, now);
        return;
    }
    if (s->kind == SPEC_STEP_CHAT) {
        body = take_chat_body(r, &est);
        if (over_max_total(r, est, err, sizeof(err))) {
            cJSON_Delete(body);
            fail_job(r, err);
            return;
        }
        ti = choose_tier(r, est, now, &retry_at, why, sizeof(why));
        if (ti < 0) {
            int64_t slack = r->job.deadline_at - now;
            if (retry_at != INT64_MAX && retry_at - now < slack) {
                if (r->admit_since == 0)
                    r->admit_since = now;
                keep_chat_body(r, body, est);
                wait_then_attempt(r, retry_at - now);
                return;
            }
            cJSON_Delete(body);
            snprintf(err, sizeof(err),
                     "step %s: no tier admits before the "
                     "deadline (%s)",
                     s->name, why[0] ? why : "no tier configured or left");
            fail_job(r, err);
            return;
        }
        r->cur_tier = ti;
        r->admit_since = 0;
        r->wait_tier = -1;
        r->sent_at = now;
        const struct config_tier *t = &w->cfg->tiers[ti];
        rc = http_chat_request(body, t->base_url, t->model, t->api_key_env,
                               timeout_ms(s, t), &req, err, sizeof(err));
    } else {
        r->send_id = 0;
        r->cur_tier = -1;
        body = worker__expand(s->http, r->names,
                              (const char *const *)r->outputs, r->spec->nsteps);
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
        fail_job(r, msg);
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
    };
    /* Recorded before it is sent: a crash from here on leaves an attempt
     * without result, which the next holder treats as in doubt. */
    rc = q_attempt_begin(w->db, &st, &r->attempt_id, &r->attempt_no);
    if (rc != 0) {
        http_request_cleanup(&req);
        if (r->send_id > 0)
            settle_unsent(r, now);
        if (rc == -EBUSY) {
            r->lost = true;
            finish(r, "lease lost");
        } else {
            give_back(r, now + 1000);
        }
        return;
    }
    (*sends_on(r, r->cur_tier))++;
    /* Sent once the loop turn's transaction, which holds the attempt's
     * record, has committed (flush_sends). */
    r->pending = req;
    r->has_pending = true;
    uv_idle_start(&w->idle, on_idle);
}

/* A request admitted but never sent leaves the tier's log, and its
 * allowance is refunded. */
static void
settle_unsent(struct run *r, int64_t now)
{
    struct tier_outcome o;

    tier_outcome_init(&o);
    o.uncounted = true;
    if (tier_settle(r->w->db, cur_tier(r), r->send_id, now, &o, NULL) != 0)
        log_warn("cannot settle an unsent request");
    r->send_id = 0;
}

/* Sends what the turn recorded. Runs after the commit. */
static void
flush_sends(struct worker *w)
{
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        int rc;
        if (!r->has_pending)
            continue;
        r->has_pending = false;
        rc = http_send(w->http, &r->pending, on_done, r, &r->call);
        http_request_cleanup(&r->pending);
        if (rc != 0) {
            int64_t now = clock_now_ms();
            struct q_attempt_result res = {.outcome = "unknown",
                                           .reason = "not_sent",
                                           .decision = "fail_loud",
                                           .finished_at = now};
            char err[512];
            r->call = NULL;
            turn_begin(w);
            if (q_attempt_finish(w->db, r->attempt_id, &res) != 0)
                log_warn("cannot record an unsent attempt");
            snprintf(err, sizeof(err), "step %s: the request could not be sent",
                     cur_spec(r)->name);
            fail_job(r, err);
        }
    }
}

/* ---- an answer: classify, decide, act ---------------------------------- */

static enum policy_transport
transport_of(enum http_error e)
{
    switch (e) {
    case HTTP_ERR_NONE:
        return POLICY_TRANSPORT_NONE;
    case HTTP_ERR_TIMEOUT:
        return POLICY_TRANSPORT_TIMEOUT;
    case HTTP_ERR_REFUSED:
        return POLICY_TRANSPORT_REFUSED;
    case HTTP_ERR_TOO_LARGE:
        return POLICY_TRANSPORT_TOO_LARGE;
    case HTTP_ERR_TLS:
        return POLICY_TRANSPORT_TLS;
    default:
        return POLICY_TRANSPORT_RESET;
    }
}

static enum policy_breaker
breaker_of(const struct run *r, int64_t now)
{
    struct q_tier_state st;

    if (cur_tier(r) == NULL ||
        tier_snapshot(r->w->db, cur_tier(r), now, false, &st) != 0)
        return POLICY_BREAKER_CLOSED;
    switch (st.breaker) {
    case Q_BREAKER_OPEN:
        return POLICY_BREAKER_OPEN;
    case Q_BREAKER_HALF_OPEN:
        return POLICY_BREAKER_HALF_OPEN;
    default:
        return POLICY_BREAKER_CLOSED;
    }
}

/* Runs waiting for a tier look again: an answer ended a doubt or a probe,
 * or freed a place under an in-flight cap. One pass asks each tier once. */
static void
wake_waiting(struct worker *w, int64_t now)
{
    bool any = false;

    w->pass++;
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (r->admit_since > 0 && r->wake_at > now && r->call == NULL &&
            !r->finished) {
            r->wake_at = now;
            any = true;
        }
    }
    if (any)
        kick(w);
}

/* Tells the tier what the answer taught: usage, breaker, doubt, walls,
 * cooldown, pace and the limits its headers name. */
static void
settle_tier(struct run *r, const struct policy_class *c, int64_t tokens,
            const struct policy_input *in, int64_t now,
            struct policy_class *for_decide)
{
    const struct config_tier *t = cur_tier(r);
    struct tier_outcome o;
    bool reopened = false;

    if (t == NULL || r->send_id == 0)
        return;
    tier_outcome_init(&o);
    o.tokens = tokens;
    o.sent_at = r->sent_at;
    if (c->outcome == POLICY_SOFT_THROTTLE) {
        /* The whole tier waits what the endpoint asked for, and a 429 in
         * spite of pacing lowers the pace. */
        o.uncounted = true;
        o.throttle_ms = c->wait_ms > 0 ? c->wait_ms : 0;
        o.paced_down = true;
    }
    if (c->outcome == POLICY_OK)
        o.result = TIER_RESULT_OK;
    else if (policy_counts_for_breaker(c->outcome))
        o.result = TIER_RESULT_FAILURE;
    if (c->outcome == POLICY_HARD_QUOTA) {
        /* A daily cap that says "retry in 48s" (Gemini sends a retryDelay
         * with PerDay quotas too) will not lift in 48 s: believe the
         * allowance window, not the short wait, or the worker would send
         * into the same wall every minute all night. */
        bool daily = c->reason != NULL && strcmp(c->reason, "daily_cap") == 0;
        bool short_reset =
            c->reset_at_ms > now && c->reset_at_ms < now + HOUR_MS;
        if (c->reason != NULL && strcmp(c->reason, "auth") == 0)
            o.exhausted_until = INT64_MAX / 4; /* until the config changes */
        else if (c->reset_at_ms > now && !(daily && short_reset))
            o.exhausted_until = c->reset_at_ms;
        else
            o.exhausted_until = tier_wall_until(t, now);
        o.exhausted_reason = c->reason;
        if (for_decide->reset_at_ms < 0 || (daily && short_reset))
            for_decide->reset_at_ms = o.exhausted_until;
    }
    o.remaining_requests = c->remaining_requests;
    o.requests_reset_at = c->requests_reset_at_ms;
    o.remaining_tokens = c->remaining_tokens;
    o.tokens_reset_at = c->tokens_reset_at_ms;
    tier_limits_from_headers(in->headers, in->nheaders, &o.limit_rpm,
                             &o.limit_tpm);
    if (tier_settle(r->w->db, t, r->send_id, now, &o, &reopened) != 0)
        log_warn("job %lld: cannot record tier state for %s",
                 (long long)r->job.id, t->name);
    r->send_id = 0;
    if (reopened)
        wake_waiting(r->w, now);
}

/* The step's context for decide, at now. wrote: the endpoint may have
 * acted on the request. */
static void
step_context(struct run *r, int64_t now, bool wrote, struct policy_step *ps)
{
    const struct spec_step *s = cur_spec(r);

    memset(ps, 0, sizeof(*ps));
    ps->attempts_used = *sends_on(r, r->cur_tier);
    ps->attempts_left = s->max_attempts - ps->attempts_used;
    ps->input_tokens = r->input_tokens;
    ps->token_budget = s->token_budget;
    ps->slack_ms = r->job.deadline_at - now -
                   (r->last_latency > 0 ? r->last_latency : 1000);
    ps->tiers_left = s->kind == SPEC_STEP_CHAT
                         ? tiers_left(r, r->input_tokens, now, ps->slack_ms)
                         : 0;
    ps->replayable = s->replayable;
    ps->side_effects = s->side_effects;
    ps->idempotency_key = s->idempotency_key != NULL;
    ps->write_may_have_happened = wrote;
    ps->degraded = r->degraded;
    ps->schema_retried = r->schema_retried;
    ps->throttle_waits_used = r->throttle_waits;
    ps->breaker = breaker_of(r, now);
    ps->now_ms = now;
    ps->seed = next_rand(r->w);
}

static void
commit_step(struct run *r, const char *output)
{
    struct worker *w = r->w;
    const struct config_tier *t = cur_tier(r);

    if (q_step_set(w->db, r->job.id, r->step, Q_STEP_SUCCEEDED,
                   t ? t->name : NULL, output, 0) != 0) {
        give_back(r, clock_now_ms() + 1000);
        return;
    }
    free(r->outputs[r->step]);
    r->outputs[r->step] = xstrdup(output);
    r->step++;
    step_enter(r);
}

static void
act(struct run *r, const struct policy_decision *d,
    const struct policy_class *c, struct http_response *res, const char *output)
{
    char *err;

    switch (d->action) {
    case POLICY_COMMIT:
        commit_step(r, output);
        return;
    case POLICY_BACKOFF_RETRY:
        if (c->outcome == POLICY_SOFT_THROTTLE) {
            /* The tier cools down as a whole (settle_tier): the run waits
             * in line for it, or for another tier, instead of on a timer
             * of its own that would bring every throttled run back at
             * once. */
            r->throttle_waits++;
            (*sends_on(r, r->cur_tier))--; /* a wait, not an attempt */
            r->admit_since = clock_now_ms();
            r->wait_tier = r->cur_tier;
            wait_then_attempt(r, 0);
            return;
        }
        if (c->outcome == POLICY_SCHEMA_INVALID)
            r->schema_retried = true;
        wait_then_attempt(r, d->wait_ms);
        return;
    case POLICY_DEGRADE_THEN_RETRY:
        r->degraded = true;
        attempt(r);
        return;
    case POLICY_SWITCH_TIER_REPLAY:
        if (r->cur_tier >= 0)
            r->switched[r->cur_tier] = true;
        r->cur_tier = -1;
        attempt(r);
        return;
    case POLICY_PARK_FOR_HUMAN:
        err = error_text(r, res, c);
        park(r,
             d->reason && strcmp(d->reason, "in_doubt") == 0
                 ? "in_doubt"
                 : policy_outcome_name(c->outcome),
             err);
        free(err);
        return;
    default:
        err = error_text(r, res, c);
        fail_job(r, err);
        free(err);
        return;
    }
}

static void
on_done(http_call *call, struct http_response *res, void *arg)
{
    struct run *r = arg;
    struct worker *w = r->w;
    const struct spec_step *s = cur_spec(r);
    struct policy_header *hdrs = NULL;
    struct http_chat_answer ans = {0};
    struct policy_input in;
    struct policy_class c, dc;
    struct policy_step ps;
    struct policy_decision d;
    struct q_attempt_result ar;
    struct attempt_log line;
    int64_t now = clock_now_ms(), tokens = 0;
    const char *output = NULL;
    bool parsed_chat = false;
    int ti = r->cur_tier;

    (void)call;
    r->call = NULL;
    turn_begin(w);
    if (res->error == HTTP_ERR_CANCELLED || r->lost) {
        /* Stopped or lease lost: the endpoint may have acted, so the
         * attempt stays without result and the next holder decides. */
        if (r->send_id > 0 && cur_tier(r) != NULL) {
            struct tier_outcome o;
            tier_outcome_init(&o);
            if (tier_settle(w->db, cur_tier(r), r->send_id, now, &o, NULL) != 0)
                log_warn("cannot settle a cancelled request");
            r->send_id = 0;
        }
        if (r->lost)
            finish(r, "lease lost");
        else
            give_back(r, now);
        return;
    }
    r->last_latency = res->latency_ms;
    hdrs = xcalloc(res->nheaders + 1, sizeof(*hdrs));
    for (size_t i = 0; i < res->nheaders; i++) {
        hdrs[i].name = res->headers[i].name;
        hdrs[i].value = res->headers[i].value;
    }
    memset(&in, 0, sizeof(in));
    in.status = res->status;
    in.transport = transport_of(res->error);
    in.headers = hdrs;
    in.nheaders = res->nheaders;
    in.body = res->body;
    in.body_len = res->body_len;
    in.parsed = POLICY_PARSED_DERIVE;
    in.http_step = s->kind == SPEC_STEP_HTTP;
    in.now_ms = now;
    if (s->kind == SPEC_STEP_CHAT && res->error == HTTP_ERR_NONE &&
        res->status >= 200 && res->status < 300 &&
        http_chat_parse(res->body, res->body_len, &ans) == 0) {
        parsed_chat = true;
        if (s->expect_json != NULL)
            in.parsed = worker__has_keys(ans.content,
                                         ans.content ? strlen(ans.content) : 0,
                                         s->expect_json)
                            ? POLICY_PARSED_YES
                            : POLICY_PARSED_NO;
    }
    policy_classify(&in, &w->pcfg, ti >= 0 ? &w->streaks[ti] : NULL, &c);
    if (s->kind == SPEC_STEP_CHAT) {
        tokens = parsed_chat && ans.total_tokens >= 0
                     ? ans.total_tokens
                     : (int64_t)(r->body_len + res->body_len) / 4;
    }
    dc = c;
    settle_tier(r, &c, s->kind == SPEC_STEP_CHAT ? tokens : -1, &in, now, &dc);
    step_context(r, now, policy_write_may_have_happened(&in), &ps);
    policy_decide(&dc, &ps, &w->pcfg, &d);
    if (d.action == POLICY_BACKOFF_RETRY && c.outcome == POLICY_SOFT_THROTTLE)
        d.wait_ms = c.wait_ms > 0 ? c.wait_ms : 1000; /* the tier's cooldown */

    ar = (struct q_attempt_result){
        .status = res->status,
        .outcome = policy_outcome_name(c.outcome),
        .reason = c.reason,
        .decision = policy_action_name(d.action),
        .delay_ms = d.wait_ms,
        .latency_ms = res->latency_ms,
        .tokens = tokens,
        .body = c.outcome == POLICY_OK ? NULL : res->body,
        .body_len = c.outcome == POLICY_OK ? 0 : res->body_len,
        .finished_at = now,
    };
    if (q_attempt_finish(w->db, r->attempt_id, &ar) != 0)
        log_warn("job %lld: cannot record the attempt's result",
                 (long long)r->job.id);
    line = (struct attempt_log){
        .job = r->job.id,
        .step = s->name,
        .attempt = r->attempt_no,
        .tier = cur_tier(r) ? cur_tier(r)->name : NULL,
        .status = res->status,
        .outcome = ar.outcome,
        .reason = c.reason,
        .decision = ar.decision,
        .delay_ms = d.wait_ms,
        .latency_ms = res->latency_ms,
        .error =
            res->error != HTTP_ERR_NONE ? http_error_name(res->error) : NULL,
        .body = c.outcome == POLICY_OK ? NULL : res->body,
        .body_len = res->body_len,
    };
    log_attempt(&line);
    if (s->kind == SPEC_STEP_CHAT)
        output = ans.content ? ans.content : res->body;
    else
        output = res->body;
    act(r, &d, &c, res, output);
    http_chat_answer_cleanup(&ans);
    free(hdrs);
}

/* ---- loop turns: group commit ------------------------------------------ */

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

static void
turn_begin(struct worker *w)
{
    if (w->tx_open || w->closing)
        return;
    if (q_tx_begin(w->db) != 0) {
        /* Each change then commits on its own: slower, still correct. */
        log_warn("worker: cannot open a transaction; committing singly");
        return;
    }
    w->tx_open = true;
    w->turn_started = clock_mono_ms();
    uv_idle_start(&w->idle, on_idle);
}

/* The turn's work is lost (the database refused the commit): act as if
 * this worker had crashed. Leases expire and the jobs are recovered. */
static void
drop_all(struct worker *w)
{
    log_error("worker: commit failed; dropping %d job(s) to their leases",
              w->nruns);
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (r->has_pending) {
            http_request_cleanup(&r->pending);
            r->has_pending = false;
        }
        r->lost = true;
        if (r->call != NULL)
            http_cancel(r->call);
        r->finished = true;
    }
}

static void
turn_end(struct worker *w)
{
    bool committed = true;
    int64_t held = 0;

    if (w->tx_open) {
        held = clock_mono_ms() - w->turn_started;
        w->tx_open = false;
        if (worker__turn_commit(w->db) != 0) {
            committed = false;
            drop_all(w);
        }
    }
    uv_idle_stop(&w->idle);
    run_hooks(w, committed);
    flush_sends(w);
    if (w->tick_after_commit && !w->closing) {
        /* From the check phase, measured from now (the loop's time is
         * that of the iteration's start): the lock stays free while the
         * loop polls, at least 1 ms and as long as the turn held it (up
         * to TICK_GAP_MAX_MS). SQLite's busy handler polls, so another
         * process only gets in while the lock is free; back-to-back turns
         * would keep it waiting for their whole run. */
        w->tick_after_commit = false;
        if (held > TICK_GAP_MAX_MS)
            held = TICK_GAP_MAX_MS;
        uv_update_time(&w->loop);
        uv_timer_start(&w->tick, on_tick, (uint64_t)(held > 1 ? held : 1), 0);
    }
}

static void
on_check(uv_check_t *h)
{
    turn_end(h->data);
}

/* ---- runs -----------------------------------------------------------------
 */

static void
run_free(struct run *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; r->spec != NULL && i < r->spec->nsteps; i++)
        free(r->outputs[i]);
    free(r->outputs);
    free((void *)r->names);
    free(r->switched);
    free(r->sends);
    free(r->body);
    cJSON_Delete(r->ready.body);
    if (r->has_pending)
        http_request_cleanup(&r->pending);
    spec_job_free(r->spec);
    q_job_cleanup(&r->job);
    free(r);
}

static void
run_start(struct worker *w, struct q_job *job)
{
    struct run *r = xcalloc(1, sizeof(*r));
    struct q_step *steps = NULL;
    size_t ns = 0;
    char err[512];

    r->w = w;
    r->job = *job;
    memset(job, 0, sizeof(*job));
    r->switched = xcalloc(w->cfg->ntiers + 1, sizeof(bool));
    r->sends = xcalloc(w->cfg->ntiers + 1, sizeof(int));
    r->cur_tier = -1;
    r->wait_tier = -1;
    r->next = w->runs;
    w->runs = r;
    w->nruns++;
    if (spec_parse(r->job.spec, strlen(r->job.spec), NULL, &r->spec, err,
                   sizeof(err)) != 0) {
        char msg[700];
        snprintf(msg, sizeof(msg), "the stored job is not valid: %s", err);
        r->spec = NULL;
        if (q_fail(w->db, r->job.id, w->id, msg, clock_now_ms()) != 0)
            log_warn("job %lld: cannot fail", (long long)r->job.id);
        r->finished = true;
        return;
    }
    r->outputs = xcalloc(r->spec->nsteps, sizeof(char *));
    r->names = xcalloc(r->spec->nsteps, sizeof(char *));
    for (size_t i = 0; i < r->spec->nsteps; i++)
        r->names[i] = r->spec->steps[i].name;
    if (q_steps_get(w->db, r->job.id, &steps, &ns) != 0) {
        give_back(r, clock_now_ms() + 1000);
        return;
    }
    r->step = 0;
    for (size_t i = 0; i < ns; i++) {
        if (steps[i].index < 0 || steps[i].index >= (int)r->spec->nsteps)
            continue;
        if (steps[i].state == Q_STEP_SUCCEEDED && steps[i].output)
            r->outputs[steps[i].index] = xstrdup(steps[i].output);
    }
    /* The current step is the first that did not succeed or get skipped. */
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
    q_steps_free(steps, ns);
    progress(r, r->job.claims > 1 ? "resumed" : "started");
    step_enter(r);
}

static void
sweep(struct worker *w)
{
    struct run **pp = &w->runs;

    while (*pp != NULL) {
        struct run *r = *pp;
        if (r->finished && r->call == NULL) {
            *pp = r->next;
            w->nruns--;
            run_free(r);
        } else {
            pp = &r->next;
        }
    }
}

static void
claim(struct worker *w, int64_t now)
{
    struct q_job *jobs = NULL;
    size_t n = 0;
    int slots = w->concurrency - w->nruns, rc;

    if (slots <= 0)
        return;
    rc = q_claim(w->db, w->id, now, w->lease_ms, (size_t)slots, &jobs, &n);
    if (rc == -ENOENT) {
        w->next_claim = now + IDLE_POLL_MS;
        return;
    }
    if (rc != 0) {
        w->next_claim = now + 1000;
        return;
    }
    w->next_claim = now;
    for (size_t i = 0; i < n; i++)
        run_start(w, &jobs[i]);
    q_jobs_free(jobs, n);
}

static void
heartbeat(struct worker *w, int64_t now)
{
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (r->finished || r->lost)
            continue;
        if (q_extend(w->db, r->job.id, w->id, now + w->lease_ms, now) ==
            -EBUSY) {
            /* Cancelled, or taken over after our lease ran out. */
            log_warn("job %lld: lease lost; dropping it", (long long)r->job.id);
            r->lost = true;
            if (r->call != NULL)
                http_cancel(r->call);
            finish(r, "lease lost");
        }
    }
    w->next_heartbeat = now + w->lease_ms / 3;
}

/* ---- the loop -------------------------------------------------------------
 */

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

static void
shutdown_loop(struct worker *w)
{
    if (w->closing)
        return;
    turn_end(w);
    w->closing = true;
    uv_close((uv_handle_t *)&w->idle, on_handle_closed);
    uv_close((uv_handle_t *)&w->check, on_handle_closed);
    uv_close((uv_handle_t *)&w->tick, on_handle_closed);
    uv_close((uv_handle_t *)&w->sigint, on_handle_closed);
    uv_close((uv_handle_t *)&w->sigterm, on_handle_closed);
    http_client_close(w->http, on_http_closed, NULL);
    w->http = NULL;
}

/* Runs waiting for a tier go first, longest waiting first; then the
 * rest (backoffs) by job id. */
static int
by_wait(const void *a, const void *b)
{
    const struct run *x = *(struct run *const *)a;
    const struct run *y = *(struct run *const *)b;
    int64_t wx = x->admit_since > 0 ? x->admit_since : INT64_MAX;
    int64_t wy = y->admit_since > 0 ? y->admit_since : INT64_MAX;

    if (wx != wy)
        return wx < wy ? -1 : 1;
    return x->job.id < y->job.id ? -1 : x->job.id > y->job.id;
}

/* Attempts the runs whose wait is over, in the order tiers should take
 * them; returns the earliest wake time left (at most next). */
static int64_t
wake_due(struct worker *w, int64_t now, int64_t next)
{
    struct run **due = xcalloc((size_t)w->nruns + 1, sizeof(*due));
    size_t n = 0;

    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (r->finished || r->call != NULL || r->wake_at == 0)
            continue;
        if (r->wake_at <= now || w->stopping)
            due[n++] = r;
        else if (r->wake_at < next)
            next = r->wake_at;
    }
    qsort(due, n, sizeof(*due), by_wait);
    w->pass++;
    for (size_t i = 0; i < n; i++) {
        attempt(due[i]);
        if (due[i]->wake_at > now && due[i]->wake_at < next)
            next = due[i]->wake_at;
    }
    free(due);
    return next;
}

/* Re-arms the tick from inside its own callback. Never at 0 ms: libuv
 * 1.44 runs a timer re-armed at 0 from a timer callback again in the same
 * timer phase, so the check phase that commits the turn never ran and a
 * due backlog handed straight back (a tier limited for more than 2 s) was
 * claimed and released in one write transaction while other processes
 * waited for the lock (CONVENTIONS 10.2). Work that is due now gets its
 * tick after the turn's commit instead (turn_end), so the turn ends and
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

static void
tick_body(struct worker *w, int64_t now, int64_t next)
{
    int64_t at;

    turn_begin(w);
    if (now >= w->next_heartbeat)
        heartbeat(w, now);
    next = wake_due(w, now, next);
    sweep(w);
    if (w->stopping) {
        if (w->nruns == 0) {
            shutdown_loop(w);
            return;
        }
        if (now >= w->stop_deadline) {
            for (struct run *r = w->runs; r != NULL; r = r->next) {
                if (r->call != NULL)
                    http_cancel(r->call);
            }
            sweep(w);
        }
        uv_timer_start(&w->tick, on_tick, 20, 0);
        return;
    }
    if (w->nruns < w->concurrency && now >= w->next_claim) {
        claim(w, now);
        sweep(w);
    }
    /* A claim that found nothing pushed next_claim ahead: only then is
     * the queue known to be empty for this worker. */
    if (w->drain && w->nruns == 0 && w->next_claim > now) {
        int rc = q_next_due(w->db, now, &at);
        if (rc == -ENOENT || (rc == 0 && at > now + DRAIN_HORIZON_MS)) {
            w->stopping = true;
            shutdown_loop(w);
            return;
        }
    }
    if (w->nruns < w->concurrency && w->next_claim < next)
        next = w->next_claim;
    if (w->next_heartbeat < next)
        next = w->next_heartbeat;
    /* Runs told to wait during this tick (their kick was only marked). */
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (!r->finished && r->call == NULL && r->wake_at > 0 &&
            r->wake_at < next)
            next = r->wake_at;
    }
    rearm(w, now, next);
}

static void
on_tick(uv_timer_t *t)
{
    struct worker *w = t->data;
    int64_t now = clock_now_ms();

    w->in_tick = true;
    tick_body(w, now, now + IDLE_POLL_MS);
    w->in_tick = false;
}

/* Asks for a tick soon. From an I/O callback the timer runs in the next
 * loop iteration, after the check phase has committed the turn; inside
 * the tick it does nothing: the tick re-arms itself for the runs that
 * finished (free slots) or wait (wake_at) when it ends (rearm). */
static void
kick(struct worker *w)
{
    if (w->closing)
        return;
    if (w->in_tick)
        return;
    uv_timer_start(&w->tick, on_tick, 0, 0);
}

static void
on_signal(uv_signal_t *h, int signum)
{
    struct worker *w = h->data;

    if (w->stopping)
        return;
    log_info("signal %d: finishing requests in flight, then stopping", signum);
    w->stopping = true;
    w->stop_deadline = clock_now_ms() + w->grace_ms;
    kick(w);
}

static int
setup(struct worker *w, const struct worker_opts *o)
{
    struct http_client_opts hopts = {0};
    struct q_open_opts qopts = {false, 5000, o->cfg->worker.keep_body_bytes};
    char err[512], host[64] = "host";
    int rc;

    w->cfg = o->cfg;
    w->concurrency =
        o->concurrency > 0 ? o->concurrency : o->cfg->worker.concurrency;
    w->drain = o->drain;
    w->progress = o->progress;
    w->grace_ms = o->grace_ms > 0 ? o->grace_ms : 10000;
    w->lease_ms = (int64_t)(o->cfg->worker.lease_s * 1000);
    w->rng = (uint64_t)clock_now_ms() ^ ((uint64_t)getpid() << 32) ^
             0x9e3779b97f4a7c15ULL;
    if (o->worker_id != NULL) {
        snprintf(w->id, sizeof(w->id), "%s", o->worker_id);
    } else {
        gethostname(host, sizeof(host) - 1);
        snprintf(w->id, sizeof(w->id), "%s:%d", host, (int)getpid());
    }
    rc = policy_rules_new(o->cfg->rules, o->cfg->nrules, &w->rules, err,
                          sizeof(err));
    if (rc != 0) {
        log_error("config: %s", err);
        return -EINVAL;
    }
    policy_config_init(&w->pcfg, &o->cfg->policy, w->rules);
    w->streaks = xcalloc(o->cfg->ntiers + 1, sizeof(*w->streaks));
    w->refused = xcalloc(o->cfg->ntiers + 1, sizeof(*w->refused));
    if ((rc = q_open_existing(o->db_path, &qopts, &w->db)) != 0)
        return rc;
    for (size_t i = 0; i < o->cfg->ntiers; i++) {
        if ((rc = tier_sync_config(w->db, &o->cfg->tiers[i])) != 0)
            return rc;
    }
    if (uv_loop_init(&w->loop) != 0)
        return -EIO;
    hopts.max_response_bytes = (size_t)o->cfg->worker.max_response_bytes;
    if ((rc = http_client_new(&w->loop, &hopts, &w->http)) != 0) {
        uv_loop_close(&w->loop);
        return rc;
    }
    uv_timer_init(&w->loop, &w->tick);
    w->tick.data = w;
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

int
worker_run(const struct worker_opts *opts)
{
    struct worker *w = xcalloc(1, sizeof(*w));
    bool loop_ready = false;
    int rc;

    signal(SIGPIPE, SIG_IGN);
    rc = setup(w, opts);
    loop_ready = rc == 0;
    if (rc == 0) {
        log_info("worker %s: concurrency %d", w->id, w->concurrency);
        kick(w);
        uv_run(&w->loop, UV_RUN_DEFAULT);
        sweep(w);
        if (uv_loop_close(&w->loop) != 0)
            log_warn("worker: handles left open at exit");
    }
    (void)loop_ready;
    if (q_close(w->db) != 0 && rc == 0)
        rc = -EIO;
    policy_rules_free(w->rules);
    free(w->streaks);
    free(w->refused);
    free(w->hooks);
    free(w);
    return rc;
}

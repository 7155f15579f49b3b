/* agent_call.c: the calls of an agent step's turn. Each call is checked
 * (a tool the step does not offer, arguments that do not parse or fail
 * the tool's schema: an error result the model sees, counted against
 * max_tool_errors), then run: an http action is an attempt of kind "tool"
 * recorded before it is sent, with the tool's own replayable,
 * side_effects and idempotency_key; up to tool_parallelism at once. A
 * call that needs a human (needs_approval, an ask tool, a side effect in
 * doubt) parks the step once its siblings have ended; the operator's
 * resolution (park/resolve.c) is read back from its park item.
 */
#include "worker/agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "queue/park.h"

#define TOOL_TIMEOUT_MS 60000 /* unless the step sets timeout_s */

/* Records a call's attempt (kind "tool") and, when res is given, its
 * result at once (a call answered without being sent). Returns 0 with
 * the attempt's id in ac->attempt_id. */
static int
record(struct run *r, struct agent_call *ac, const char *args,
       const struct q_attempt_result *res)
{
    struct worker *w = r->w;
    struct q_attempt_start st = {
        .job_id = r->job.id,
        .step = r->step,
        .worker = w->id,
        .started_at = worker__now(w),
        .kind = "tool",
        .call_id = ac->c->id,
        .tool = ac->c->name,
        .args = args,
    };
    int rc;

    if (res == NULL) {
        /* Deferred by a store that writes at the commit (PostgreSQL): the
         * id and number are written then, so both live in ac, which stays
         * until then (the turn's calls are freed only once all are
         * answered), never on this stack. */
        rc = q_attempt_begin(w->db, &st, &ac->attempt_id, &ac->attempt_no);
    } else if ((rc = q_tx_begin(w->db)) == 0) {
        /* A level of its own: the id is known at once, to finish it. */
        if ((rc = q_attempt_begin(w->db, &st, &ac->attempt_id,
                                  &ac->attempt_no)) == 0)
            rc = q_attempt_finish(w->db, ac->attempt_id, res);
        if (rc == 0)
            rc = q_tx_commit(w->db);
        else
            q_tx_rollback(w->db);
    }
    if (rc != 0)
        worker__unrecorded(r, rc);
    return rc;
}

/* Answers ac without sending it: result goes to the model (an error when
 * outcome is not "ok"). Returns 0, or the store's error (the run then
 * went elsewhere). */
static int
answer(struct run *r, struct agent_call *ac, const char *outcome,
       const char *reason, const char *result)
{
    struct q_attempt_result res = {.outcome = outcome,
                                   .reason = reason,
                                   .decision = "tool_result",
                                   .body = result,
                                   .body_len = strlen(result),
                                   .finished_at = worker__now(r->w)};
    const char *args = ac->args ? ac->args : ac->c->args_text;
    int rc = record(r, ac, args, &res);

    if (rc != 0)
        return rc;
    free(ac->result);
    ac->result = xstrdup(result);
    ac->is_error = strcmp(outcome, "ok") != 0;
    ac->state = AC_DONE;
    if (strcmp(outcome, "invalid_call") == 0)
        r->agent->errors++;
    return 0;
}

/* The arguments ac runs with (an operator's edit, else the model's).
 * Caller cJSON_Deletes the result; NULL when they do not parse. */
static cJSON *
args_of(const struct agent_call *ac)
{
    if (ac->args != NULL)
        return cJSON_Parse(ac->args);
    return ac->c->args ? cJSON_Duplicate(ac->c->args, true) : NULL;
}

/* Checks ac as the model sent it. Returns true when it is sound; else
 * it is answered with an error (false, and *rc the store's error). */
static bool
check(struct run *r, struct agent_call *ac, const struct spec_tool *t, int *rc)
{
    char msg[1200], err[600];

    *rc = 0;
    if (ac->c->problem == HTTP_CALL_OK && t != NULL && ac->c->args != NULL) {
        cJSON *args = args_of(ac);
        int bad =
            spec_schema_validate(t->parameters, args, "args", err, sizeof(err));
        cJSON_Delete(args);
        if (bad == 0)
            return true;
        snprintf(msg, sizeof(msg),
                 "error: the arguments of %s do not fit its parameters: %s",
                 t->name, err);
    } else if (ac->c->problem == HTTP_CALL_UNKNOWN_TOOL || t == NULL) {
        snprintf(msg, sizeof(msg), "error: there is no tool named \"%s\"",
                 ac->c->name);
    } else {
        snprintf(msg, sizeof(msg), "error: the call of %s is not valid: %s",
                 ac->c->name, http_call_problem_name(ac->c->problem));
    }
    *rc = answer(r, ac, "invalid_call", http_call_problem_name(ac->c->problem),
                 msg);
    return false;
}

/* Builds ac's http request from its arguments. Returns 0, or -EINVAL
 * with err. */
static int
build(struct run *r, struct agent_call *ac, const struct spec_tool *t,
      struct http_request *req, char *err, size_t len)
{
    cJSON *args = args_of(ac), *http = NULL;
    char *key = NULL;
    int rc = spec_tool_request(t, args, &http, &key, err, len);

    cJSON_Delete(args);
    if (rc != 0)
        return rc;
    if ((rc = worker__fill_http(r, http, err, len)) == 0)
        rc = http_step_request(http, key,
                               cur_spec(r)->timeout_s > 0
                                   ? (int64_t)(cur_spec(r)->timeout_s * 1000)
                                   : TOOL_TIMEOUT_MS,
                               req, err, len);
    cJSON_Delete(http);
    free(key);
    return rc;
}

/* Records ac and queues it to be sent once the turn commits. */
static int
start(struct run *r, struct agent_call *ac, const struct spec_tool *t)
{
    struct http_request req;
    char err[600], msg[700];
    char *args_text = NULL;
    int rc;

    if (build(r, ac, t, &req, err, sizeof(err)) != 0) {
        snprintf(msg, sizeof(msg), "error: cannot run %s: %s", t->name, err);
        return answer(r, ac, "not_sent", "build", msg);
    }
    args_text = ac->args ? xstrdup(ac->args) : xstrdup(ac->c->args_text);
    rc = record(r, ac, args_text, NULL);
    free(args_text);
    if (rc != 0) {
        http_request_cleanup(&req);
        return rc;
    }
    /* As a plain step's (send.c): a call with side effects and no key is
     * sent only once its record is on disk, not only written, or a power
     * loss that undid the record would let the next worker send it
     * again. */
    if (t->side_effects && t->idempotency_key == NULL &&
        q_tx_durable(r->w->db) != 0) {
        /* The store trusts no flush since one failed (logged): not sent,
         * held as a call in doubt is, to be parked once its siblings end
         * (a retry after a restart on a sound disk sends it). */
        http_request_cleanup(&req);
        ac->state = AC_HOLD;
        return 0;
    }
    ac->req = req;
    ac->queued = true;
    ac->state = AC_SENT;
    r->agent->inflight++;
    worker__poll_no_block(r->w);
    return 0;
}

/* ---- parking for a human --------------------------------------------- */

/* What a park item of ac shows: tool, call id, arguments and parameters
 * (the schema an operator's edit is checked against). Caller frees. */
static char *
park_request(const struct agent_call *ac, const struct spec_tool *t)
{
    cJSON *o = cJSON_CreateObject(), *args = args_of(ac);
    char *text;

    cJSON_AddStringToObject(o, "tool", ac->c->name);
    cJSON_AddStringToObject(o, "call_id", ac->c->id);
    cJSON_AddItemToObject(o, "args", args ? args : cJSON_CreateObject());
    if (t != NULL && t->kind == SPEC_TOOL_ASK)
        cJSON_AddStringToObject(o, "question", t->ask);
    if (t != NULL && t->parameters != NULL)
        cJSON_AddItemToObject(o, "parameters",
                              cJSON_Duplicate(t->parameters, true));
    text = json_print(o);
    cJSON_Delete(o);
    return text;
}

/* Parks the step for ac: reason "approval", "question" or "in_doubt". */
static void
park_call(struct run *r, struct agent_call *ac, const struct spec_tool *t,
          const char *reason)
{
    struct q_attempt_result res = {.outcome = reason,
                                   .reason = reason,
                                   .decision = "park_for_human",
                                   .finished_at = worker__now(r->w)};
    char *req = park_request(ac, t);
    const char *args = ac->args ? ac->args : ac->c->args_text;
    char err[2048];

    if (strcmp(reason, "in_doubt") != 0 && record(r, ac, args, &res) != 0) {
        free(req);
        return;
    }
    if (strcmp(reason, "question") == 0)
        snprintf(err, sizeof(err), "question: %s (arguments %s)", t->ask, args);
    else if (strcmp(reason, "approval") == 0)
        snprintf(err, sizeof(err),
                 "approval: %s wants to run with arguments %s", ac->c->name,
                 args);
    else
        snprintf(err, sizeof(err),
                 "in doubt: %s was sent with arguments %s by a worker that "
                 "stopped before its answer; it has side effects and no "
                 "idempotency_key, so it is not sent again without a human",
                 ac->c->name, args);
    free(r->body);
    r->body = req;
    r->body_len = strlen(req);
    r->sha[0] = '\0';
    ac->state = AC_PARKED;
    worker__park(r, reason, err);
}

int
agent__find_resolution(struct run *r, const char *call_id,
                       struct q_park_item *out)
{
    const struct q_park_filter f = {.all = true, .job_id = r->job.id};
    struct q_park_item *v = NULL;
    size_t n = 0;
    int found = -1, rc = q_park_list(r->w->db, &f, &v, &n);

    if (rc != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        cJSON *req = v[i].request ? cJSON_Parse(v[i].request) : NULL;
        const char *id = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(req, "call_id"));
        if (!v[i].open && v[i].step == r->step && id != NULL &&
            strcmp(id, call_id) == 0 && (found < 0 || v[i].id > v[found].id))
            found = (int)i;
        cJSON_Delete(req);
    }
    if (found >= 0) {
        *out = v[found];
        memset(&v[found], 0, sizeof(v[found]));
    }
    q_park_items_free(v, n);
    return found >= 0 ? 0 : -ENOENT;
}

/* A parked call whose item an operator resolved: approved (with edited
 * arguments, or a retry of one in doubt) it runs; rejected, the note is
 * its result; done, the answer (or output) is. Returns false when the run
 * went elsewhere. */
static bool
resolved(struct run *r, struct agent_call *ac)
{
    struct q_park_item it;
    char msg[2048];
    const char *how;
    bool go = true;

    if (agent__find_resolution(r, ac->c->id, &it) != 0) {
        snprintf(msg, sizeof(msg),
                 "step %s: the park item of call %s is not found",
                 cur_spec(r)->name, ac->c->id);
        worker__fail_job(r, msg);
        return false;
    }
    how = it.resolution ? it.resolution : "";
    if (strcmp(how, "approve") == 0 || strcmp(how, "retry") == 0) {
        ac->approved = true;
        if (it.answer != NULL) {
            free(ac->args);
            ac->args = xstrdup(it.answer);
        }
        ac->state = AC_TODO;
    } else if (strcmp(how, "reject") == 0) {
        snprintf(msg, sizeof(msg), "rejected by %s%s%s",
                 it.resolved_by ? it.resolved_by : "an operator",
                 it.note ? ": " : "", it.note ? it.note : "");
        go = answer(r, ac, "rejected", "rejected", msg) == 0;
    } else if (strcmp(how, "done") == 0) {
        go = answer(r, ac, "ok", "answered",
                    it.answer ? it.answer
                    : it.note ? it.note
                              : "") == 0;
    } else {
        snprintf(msg, sizeof(msg), "step %s: call %s: park item %lld was %s",
                 cur_spec(r)->name, ac->c->id, (long long)it.id, how);
        worker__fail_job(r, msg);
        go = false;
    }
    q_park_item_cleanup(&it);
    return go;
}

/* Settles the attempt of ac left without result as in doubt, decided
 * decision. Returns false when the run went elsewhere. */
static bool
settle_doubt(struct run *r, struct agent_call *ac, const char *decision)
{
    struct q_attempt_result res = {.outcome = "unknown",
                                   .reason = "in_doubt",
                                   .decision = decision,
                                   .finished_at = worker__now(r->w)};

    if (q_attempt_finish(r->w->db, ac->attempt_id, &res) != 0) {
        worker__give_back(r, worker__now(r->w) + 1000);
        return false;
    }
    return true;
}

/* A call its holder sent and died before the answer. Resent when that is
 * safe (replayable, no side effects, or an idempotency key: the same
 * arguments give the same key); else held, to be parked in doubt once
 * its siblings have ended. */
static bool
in_doubt(struct run *r, struct agent_call *ac, const struct spec_tool *t)
{
    bool resend = t != NULL && (t->replayable || !t->side_effects ||
                                t->idempotency_key != NULL);

    ac->approved = true; /* it passed its checks before it was sent */
    if (!resend) {
        ac->state = AC_HOLD;
        return true;
    }
    if (!settle_doubt(r, ac, "backoff_retry"))
        return false;
    ac->state = AC_TODO;
    return true;
}

/* ---- the turn's work ------------------------------------------------- */

/* Whether ac waits for a human before it runs. */
static bool
needs_human(const struct agent_call *ac, const struct spec_tool *t)
{
    cJSON *args;
    bool need;

    if (ac->approved)
        return false;
    if (t->kind == SPEC_TOOL_ASK)
        return true;
    args = args_of(ac);
    need = spec_tool_needs_approval(t, args);
    cJSON_Delete(args);
    return need;
}

/* One pass over the calls: settles what a crash or a park left, checks
 * and starts what can run. Returns false when the run went elsewhere. */
static bool
pass(struct run *r)
{
    struct agent *ag = r->agent;
    const struct spec_step *s = cur_spec(r);
    int rc;

    for (size_t i = 0; i < ag->open.n; i++) {
        struct agent_call *ac = &ag->calls[i];
        const struct spec_tool *t = spec_toolset_find(&ag->ts, ac->c->name);
        if (ac->state == AC_DOUBT && !in_doubt(r, ac, t))
            return false;
        if (ac->state == AC_PARKED && !resolved(r, ac))
            return false;
        if (ac->state != AC_TODO)
            continue;
        if ((int)i >= s->max_tool_calls_per_turn) {
            char msg[200];
            snprintf(msg, sizeof(msg),
                     "error: not run: at most %d tool calls per turn",
                     s->max_tool_calls_per_turn);
            if (answer(r, ac, "not_sent", "max_tool_calls_per_turn", msg))
                return false;
            continue;
        }
        if (!ac->approved && !check(r, ac, t, &rc)) {
            if (rc != 0)
                return false;
            continue;
        }
        if (needs_human(ac, t) || ag->inflight >= s->tool_parallelism)
            continue;
        if (t->kind == SPEC_TOOL_HTTP && start(r, ac, t) != 0)
            return false;
    }
    return true;
}

void
agent__call_work(struct run *r)
{
    struct agent *ag = r->agent;
    const struct spec_step *s = cur_spec(r);
    char err[300];

    if (run_has_left(r))
        return;
    /* Past its deadline a job sends nothing more, tool calls included. */
    if (worker__now(r->w) >= r->job.deadline_at) {
        snprintf(err, sizeof(err),
                 "step %s: deadline_passed: the job's deadline came in its "
                 "tool loop; nothing more sent",
                 s->name);
        worker__fail_job(r, err);
        return;
    }
    if (!pass(r))
        return;
    if (ag->errors > s->max_tool_errors) {
        snprintf(err, sizeof(err),
                 "step %s: max_tool_errors: %d calls were not valid "
                 "(max_tool_errors %d)",
                 s->name, ag->errors, s->max_tool_errors);
        worker__fail_job(r, err);
        return;
    }
    if (ag->inflight > 0)
        return;
    for (size_t i = 0; i < ag->open.n; i++) {
        struct agent_call *ac = &ag->calls[i];
        const struct spec_tool *t = spec_toolset_find(&ag->ts, ac->c->name);
        if (ac->state == AC_HOLD) {
            if (settle_doubt(r, ac, "park_for_human"))
                park_call(r, ac, t, "in_doubt");
            return;
        }
        if (ac->state == AC_TODO) {
            park_call(r, ac, t,
                      t->kind == SPEC_TOOL_ASK ? "question" : "approval");
            return;
        }
    }
    agent__close_turn(ag);
    worker__attempt(r);
}

/* ---- sending and answers ------------------------------------------- */

/* The outcome of a tool's answer: "ok" for a 2xx, else what failed. */
static const char *
outcome_of(const struct http_response *res)
{
    if (res->error != HTTP_ERR_NONE)
        return http_error_name(res->error);
    return res->status >= 200 && res->status < 300 ? "ok" : "http_error";
}

static void
on_tool_done(http_call *call, struct http_response *res, void *arg)
{
    struct agent_call *ac = arg;
    struct run *r = ac->r;
    struct worker *w = r->w;
    int64_t now = worker__now(w);
    const char *outcome = outcome_of(res);
    char *text, *shown = NULL;
    struct q_attempt_result ar;

    (void)call;
    ac->call = NULL;
    r->agent->inflight--;
    if (res->error == HTTP_ERR_CANCELLED || r->state == WORKER_RUN_LOST) {
        /* Left without result: the next holder settles it (in doubt). */
        if (r->agent->inflight == 0 && !run_has_left(r) &&
            worker__turn_begin(w))
            worker__give_back(r, now);
        return;
    }
    if (!worker__turn_begin(w)) {
        /* Entered again once the store is back; a job that left already
         * (failed with this call in flight) stays gone. */
        if (!run_has_left(r) && r->state != WORKER_RUN_RELOAD)
            worker__run_to(r, WORKER_RUN_RELOAD);
        return;
    }
    /* Read as text the model can take: bad bytes and NULs as '?'. */
    if ((text = http_as_text(res->body, res->body_len)) == NULL)
        text = xstrndup(res->body ? res->body : "", res->body_len);
    if (strcmp(outcome, "ok") != 0) {
        size_t len = strlen(text) + 64;
        shown = xmalloc(len);
        snprintf(shown, len, "error: HTTP %d %s: %s", res->status, outcome,
                 text);
    }
    ar = (struct q_attempt_result){.status = res->status,
                                   .outcome = outcome,
                                   .decision = "tool_result",
                                   .latency_ms = res->latency_ms,
                                   .body = shown ? shown : text,
                                   .body_len = strlen(shown ? shown : text),
                                   .finished_at = now};
    if (q_attempt_finish(w->db, ac->attempt_id, &ar) != 0)
        log_warn("job %lld: cannot record a tool call's result",
                 (long long)r->job.id);
    free(ac->result);
    ac->result = xstrdup(shown ? shown : text);
    ac->is_error = shown != NULL;
    ac->state = AC_DONE;
    free(text);
    free(shown);
    agent__call_work(r); /* nothing more when the step failed meanwhile */
}

void
worker__agent_flush(struct run *r)
{
    struct agent *ag = r->agent;

    for (size_t i = 0; ag != NULL && i < ag->open.n; i++) {
        struct agent_call *ac = &ag->calls[i];
        if (!ac->queued)
            continue;
        ac->queued = false;
        ac->r = r;
        if (ac->attempt_id <= 0) {
            /* The store found the lease lost when it wrote the record (a
             * store that defers it tells at the commit): not sent. */
            http_request_cleanup(&ac->req);
            if (--ag->inflight == 0 && worker__turn_begin(r->w))
                worker__unrecorded(r, -EBUSY);
            continue;
        }
        if (http_send(r->w->http, &ac->req, on_tool_done, ac, &ac->call) != 0) {
            log_warn("job %lld: a tool call could not be sent",
                     (long long)r->job.id);
            ag->inflight--;
        }
        http_request_cleanup(&ac->req);
    }
}

void
worker__agent_unqueue(struct run *r)
{
    struct agent *ag = r->agent;

    for (size_t i = 0; ag != NULL && i < ag->open.n; i++) {
        struct agent_call *ac = &ag->calls[i];
        if (!ac->queued)
            continue;
        http_request_cleanup(&ac->req);
        ac->queued = false;
        ag->inflight--;
    }
}

void
worker__agent_cancel(struct run *r)
{
    struct agent *ag = r->agent;

    for (size_t i = 0; ag != NULL && i < ag->open.n; i++) {
        if (ag->calls[i].call != NULL)
            http_cancel(ag->calls[i].call);
    }
}

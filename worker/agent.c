/* agent.c: the tool loop of a chat step with "tools" (issue 41), the
 * model's side. Each model turn is an attempt of kind "turn" through the
 * step's usual path (tiers, pacing, budgets, classify/decide: a throttle
 * or a wall mid-loop switches tiers with the same messages); a turn that
 * answers with calls is recorded with decision "tool_calls" and the calls
 * as its body, and each call is an attempt of kind "tool" (agent_call.c).
 *
 * The conversation is not stored apart: it is read back from the ledger
 * on every entry of the step (worker__agent_enter), so a worker that dies
 * resumes from the last committed result. The messages sent each turn are
 * the step's own, then for each turn with calls the assistant's message
 * and one tool message per call (OpenAI's shape; a native tier maps it,
 * http/native_tools.c).
 */
#include "worker/agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "http/tools.h"

void
worker__agent_free(struct agent *ag)
{
    if (ag == NULL)
        return;
    worker__agent_free_calls(ag);
    cJSON_Delete(ag->convo);
    spec_toolset_cleanup(&ag->ts);
    free(ag);
}

void
worker__agent_leave(struct run *r)
{
    if (r->agent != NULL && r->agent->step != r->step) {
        worker__agent_free(r->agent);
        r->agent = NULL;
    }
}

bool
worker__agent_busy(const struct run *r)
{
    return r->agent != NULL && r->agent->inflight > 0;
}

/* The names of the step's tools, for http_toolcalls_read. Caller frees
 * the array (the names are borrowed). */
static const char **
tool_names(const struct agent *ag)
{
    const char **v = xcalloc(ag->ts.n + 1, sizeof(*v));

    for (size_t i = 0; i < ag->ts.n; i++)
        v[i] = ag->ts.tools[i].name;
    return v;
}

/* Reads the calls of answer root into ag->open (replacing any) with one
 * call slot each, all to do. Returns the number of calls, 0 for none, or
 * -EINVAL when root is no answer shape. */
static int
open_turn(struct agent *ag, const cJSON *root)
{
    const char **names = tool_names(ag);
    struct http_tool_calls c;
    int rc = http_toolcalls_read(root, names, ag->ts.n, &c);

    free(names);
    if (rc != 0)
        return rc;
    if (c.n == 0) {
        http_toolcalls_cleanup(&c);
        return 0;
    }
    worker__agent_free_calls(ag);
    ag->open = c;
    ag->calls = xcalloc(c.n, sizeof(*ag->calls));
    for (size_t i = 0; i < c.n; i++)
        ag->calls[i].c = &ag->open.v[i];
    return (int)c.n;
}

void
worker__agent_free_calls(struct agent *ag)
{
    for (size_t i = 0; ag->calls != NULL && i < ag->open.n; i++) {
        free(ag->calls[i].result);
        free(ag->calls[i].args);
        if (ag->calls[i].queued)
            http_request_cleanup(&ag->calls[i].req);
    }
    free(ag->calls);
    ag->calls = NULL;
    http_toolcalls_cleanup(&ag->open);
}

void
agent__close_turn(struct agent *ag)
{
    struct http_tool_result *res = xcalloc(ag->open.n, sizeof(*res));

    for (size_t i = 0; i < ag->open.n; i++)
        res[i] = (struct http_tool_result){
            .call = &ag->open.v[i],
            .content = ag->calls[i].result ? ag->calls[i].result : "",
            .is_error = ag->calls[i].is_error};
    if (http_tool_turn_messages(ag->convo, HTTP_TOOLS_OPENAI, &ag->open, res,
                                ag->open.n) != 0)
        log_error("cannot append a tool turn to the conversation");
    free(res);
    worker__agent_free_calls(ag);
}

/* The body a turn with calls is recorded with: the calls in OpenAI's
 * answer shape, ids included, so that reading it back gives the same
 * calls. Caller frees. */
static char *
calls_body(const struct http_tool_calls *c)
{
    cJSON *root = cJSON_CreateObject(), *choice = cJSON_CreateObject();
    cJSON *msg = cJSON_CreateObject(), *tc = cJSON_CreateArray();
    char *text;

    cJSON_AddStringToObject(msg, "role", "assistant");
    if (c->text != NULL)
        cJSON_AddStringToObject(msg, "content", c->text);
    else
        cJSON_AddNullToObject(msg, "content");
    for (size_t i = 0; i < c->n; i++) {
        cJSON *o = cJSON_CreateObject(), *f = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", c->v[i].id);
        cJSON_AddStringToObject(o, "type", "function");
        cJSON_AddStringToObject(f, "name", c->v[i].name);
        cJSON_AddStringToObject(f, "arguments", c->v[i].args_text);
        cJSON_AddItemToObject(o, "function", f);
        http_tool_call_extra(o, &c->v[i]);
        cJSON_AddItemToArray(tc, o);
    }
    cJSON_AddItemToObject(msg, "tool_calls", tc);
    cJSON_AddItemToObject(choice, "message", msg);
    cJSON_AddStringToObject(choice, "finish_reason", "tool_calls");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "choices"), choice);
    text = json_print(root);
    cJSON_Delete(root);
    return text;
}

/* ---- the model's turn ------------------------------------------------ */

cJSON *
worker__agent_body(const struct run *r, cJSON *req)
{
    const struct agent *ag = r->agent;
    cJSON *msgs = cJSON_GetObjectItemCaseSensitive(req, "messages");
    struct http_tool *t = xcalloc(ag->ts.n + 1, sizeof(*t));
    const cJSON *m;

    for (size_t i = 0; i < ag->ts.n; i++)
        t[i] = (struct http_tool){.name = ag->ts.tools[i].name,
                                  .description = ag->ts.tools[i].description,
                                  .parameters = ag->ts.tools[i].parameters};
    cJSON_DeleteItemFromObjectCaseSensitive(req, "tools");
    cJSON_AddItemToObject(req, "tools",
                          http_tools_json(t, ag->ts.n, HTTP_TOOLS_OPENAI));
    free(t);
    if (cJSON_IsArray(msgs)) {
        cJSON_ArrayForEach(m, ag->convo)
        {
            cJSON_AddItemToArray(msgs, cJSON_Duplicate(m, true));
        }
    }
    return req;
}

char *
worker__agent_turn_body(struct run *r, const cJSON *root)
{
    struct agent *ag = r->agent;
    char *body;

    if (ag == NULL || open_turn(ag, root) <= 0)
        return NULL;
    body = calls_body(&ag->open);
    return body;
}

void
worker__agent_turn(struct run *r)
{
    r->agent->turns++;
    agent__call_work(r);
}

/* ---- entering the step: the conversation from the ledger ------------- */

/* Takes tool attempt a into the open turn: its result, or what stands in
 * its way (a park, a send without answer). */
static void
take_tool(struct agent *ag, const struct q_attempt *a)
{
    for (size_t i = 0; i < ag->open.n; i++) {
        struct agent_call *ac = &ag->calls[i];
        const char *d = a->decision ? a->decision : "";
        if (a->call_id == NULL || strcmp(ac->c->id, a->call_id) != 0)
            continue;
        ac->attempt_id = a->id;
        free(ac->result);
        ac->result = NULL;
        /* The arguments it went out with (an operator's edit included):
         * what a resend or a park after a crash shows and sends. */
        free(ac->args);
        ac->args = a->args ? xstrdup(a->args) : NULL;
        if (a->finished_at == 0) {
            ac->state = AC_DOUBT;
        } else if (strcmp(d, "park_for_human") == 0) {
            ac->state = AC_PARKED;
        } else {
            ac->state = AC_DONE;
            ac->result = xstrdup(a->body ? a->body : "");
            ac->is_error = a->outcome == NULL || strcmp(a->outcome, "ok") != 0;
            if (a->outcome != NULL && strcmp(a->outcome, "invalid_call") == 0)
                ag->errors++;
        }
        return;
    }
}

/* Whether every call of the open turn has its result. */
static bool
turn_done(const struct agent *ag)
{
    for (size_t i = 0; i < ag->open.n; i++) {
        if (ag->calls[i].state != AC_DONE)
            return false;
    }
    return true;
}

/* Whether model turn a was answered with a context overflow (trim.c). */
static bool
is_overflow(const struct q_attempt *a)
{
    return a->finished_at != 0 && a->reason != NULL &&
           strcmp(a->reason, "context_overflow") == 0;
}

/* Reads the step's attempts back into r->agent; returns the index of the
 * first attempt of the current model turn's context (after the last
 * turn answered with calls). */
static size_t
replay(struct run *r, const struct q_attempt *a, size_t n)
{
    struct agent *ag = r->agent;
    size_t from = 0;

    cJSON_Delete(ag->convo);
    ag->convo = cJSON_CreateArray();
    worker__agent_free_calls(ag);
    ag->turns = ag->errors = ag->overflows = ag->trimmed = 0;
    for (size_t i = 0; i < n; i++) {
        const char *k = a[i].kind ? a[i].kind : "";
        if (strcmp(k, "tool") == 0) {
            take_tool(ag, &a[i]);
            continue;
        }
        if (is_overflow(&a[i])) {
            if (ag->open.n > 0 && turn_done(ag))
                agent__close_turn(ag); /* what that turn was sent with */
            agent__overflowed(ag);     /* the trim it made, again */
            continue;
        }
        if (a[i].finished_at == 0 || a[i].decision == NULL ||
            strcmp(a[i].decision, "tool_calls") != 0 || a[i].body == NULL)
            continue;
        if (ag->open.n > 0)
            agent__close_turn(ag); /* answered, else no turn follows */
        cJSON *root = cJSON_Parse(a[i].body);
        if (open_turn(ag, root) > 0)
            ag->turns++;
        cJSON_Delete(root);
        from = i + 1;
    }
    if (ag->open.n > 0 && turn_done(ag))
        agent__close_turn(ag);
    return from;
}

/* A model turn left without a result by a holder that died: a model turn
 * changes nothing outside, so it is closed as in doubt and asked again
 * with the same messages. */
static void
settle_turn(struct run *r, const struct q_attempt *last)
{
    struct q_attempt_result res = {.outcome = "unknown",
                                   .reason = "in_doubt",
                                   .decision = "backoff_retry",
                                   .tokens = 0,
                                   .finished_at = worker__now(r->w)};

    if (q_attempt_finish(r->w->db, last->id, &res) != 0)
        log_warn("job %lld: cannot settle an in-doubt model turn",
                 (long long)r->job.id);
    worker__forget_send(r, last, res.finished_at);
}

void
worker__agent_enter(struct run *r, const struct q_attempt *a, size_t n)
{
    const struct spec_step *s = cur_spec(r);
    char err[600];
    size_t from;

    if (r->agent == NULL) {
        r->agent = xcalloc(1, sizeof(*r->agent));
        r->agent->step = r->step;
    }
    if (!r->agent->ts_built) {
        if (spec_toolset_build(s->tools, "tools", &r->w->cfg->tools,
                               &r->agent->ts, err, sizeof(err)) != 0) {
            char msg[700];
            snprintf(msg, sizeof(msg), "step %s: %s", s->name, err);
            worker__fail_job(r, msg);
            return;
        }
        r->agent->ts_built = true;
    }
    from = replay(r, a, n);
    worker__derive_context(r, a + from, n - from);
    if (r->agent->open.n > 0) {
        agent__call_work(r);
        return;
    }
    if (n > from && a[n - 1].finished_at == 0 && a[n - 1].kind != NULL &&
        strcmp(a[n - 1].kind, "turn") == 0)
        settle_turn(r, &a[n - 1]);
    worker__attempt(r);
}

bool
worker__agent_over_turns(struct run *r)
{
    const struct spec_step *s = cur_spec(r);
    char err[300];

    if (r->agent == NULL || r->agent->turns < s->max_turns)
        return false;
    snprintf(err, sizeof(err),
             "step %s: max_turns: the model still called tools after %d "
             "turns (max_turns %d)",
             s->name, r->agent->turns, s->max_turns);
    worker__fail_job(r, err);
    return true;
}

/* trim.c: a model turn of the tool loop answered with a context overflow
 * (classify's truncated / context_overflow: OpenAI's 400
 * context_length_exceeded, Anthropic's "prompt is too long", Gemini's
 * "input token count ... exceeds the maximum"). The first one trims the
 * oldest tool results of the conversation once and asks again with the
 * same tier; a second one fails the step, saying so.
 *
 * Trimming keeps every message: a tool message keeps its role and its
 * tool_call_id and only its content becomes a short marker, so each call
 * of an assistant message still has its result and the provider accepts
 * the conversation. The oldest results go first, until at least half of
 * the bytes of all tool results are cut: the latest results, which the
 * model is working on, stay whole where they can.
 *
 * The trim is not stored apart. The overflow is an attempt of the step
 * like any other (outcome truncated, reason context_overflow), and reading
 * the ledger back (agent.c) trims the conversation again at the point
 * where that attempt stands, so a worker that resumes the loop sends what
 * the one that died sent, and counts the overflow.
 */
#include "worker/agent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

/* Whether m is a tool result message; its content's length in *len. */
static bool
tool_content(const cJSON *m, size_t *len)
{
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");

    if (!cJSON_IsString(role) || strcmp(role->valuestring, "tool") != 0 ||
        !cJSON_IsString(c))
        return false;
    *len = strlen(c->valuestring);
    return true;
}

int
agent__trim(cJSON *convo)
{
    size_t total = 0, cut = 0, len;
    cJSON *m;
    int n = 0;

    cJSON_ArrayForEach(m, convo)
    {
        if (tool_content(m, &len))
            total += len;
    }
    cJSON_ArrayForEach(m, convo)
    {
        char marker[160];
        if (cut * 2 >= total && n > 0)
            break;
        if (!tool_content(m, &len))
            continue;
        snprintf(marker, sizeof(marker),
                 "[stepq: %zu bytes of this tool result were trimmed after "
                 "the model's context overflowed]",
                 len);
        cJSON_ReplaceItemInObjectCaseSensitive(m, "content",
                                               cJSON_CreateString(marker));
        cut += len;
        n++;
    }
    return n;
}

/* Whether class c is a context overflow. */
static bool
is_overflow(const struct policy_class *c)
{
    return c->outcome == POLICY_TRUNCATED &&
           c->why == POLICY_REASON_CONTEXT_OVERFLOW;
}

void
agent__overflowed(struct agent *ag)
{
    if (ag->overflows++ == 0)
        ag->trimmed = agent__trim(ag->convo);
}

void
worker__agent_overflow(struct run *r, const struct policy_class *c,
                       struct policy_decision *d)
{
    struct agent *ag = r->agent;

    if (ag == NULL || !is_overflow(c))
        return;
    if (ag->overflows == 0) {
        agent__overflowed(ag);
        if (ag->trimmed > 0) {
            *d = (struct policy_decision){.action = POLICY_BACKOFF_RETRY,
                                          .wait_ms = 0,
                                          .reason = "context_trim"};
            return;
        }
    }
    *d = (struct policy_decision){
        .action = POLICY_FAIL_LOUD, .wait_ms = 0, .reason = "context_overflow"};
}

char *
worker__agent_overflow_text(const struct run *r, const struct policy_class *c,
                            char *err)
{
    const struct agent *ag = r->agent;
    const char *name = cur_spec(r)->name, *what = err;
    size_t n, nlen = strlen(name);
    char *s;

    if (ag == NULL || !is_overflow(c))
        return err;
    n = strlen(err) + 300;
    s = xmalloc(n);
    /* err says "step NAME: HTTP 400 ...": the step is named once. */
    if (strncmp(err, "step ", 5) == 0 && strncmp(err + 5, name, nlen) == 0 &&
        strncmp(err + 5 + nlen, ": ", 2) == 0)
        what += 7 + nlen;
    if (ag->trimmed > 0)
        snprintf(s, n,
                 "step %s: context_overflow: the conversation still "
                 "overflows the model's context after its %d oldest tool "
                 "results were trimmed (%s)",
                 name, ag->trimmed, what);
    else
        snprintf(s, n,
                 "step %s: context_overflow: the model's context overflows "
                 "and there is no tool result to trim (%s)",
                 name, what);
    free(err);
    return s;
}

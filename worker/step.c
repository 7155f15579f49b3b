/* step.c: entering a step (its "when", its templates filled or the job
 * failed), preparing its request (degrade, hashes) and checking its
 * output. Helpers of run.c, send.c and answer.c. */
#include "worker/internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/log.h"
#include "common/xalloc.h"

/* What the current step's templates read, each output parsed once
 * however many of them read it; spec_vars_cleanup when done. */
static void
vars_of(const struct run *r, struct spec_vars *v)
{
    spec_vars_init(v);
    v->input = r->spec->input;
    v->outputs = (const char *const *)r->outputs;
    v->skipped = r->skipped;
}

cJSON *
worker__fill(const struct run *r)
{
    cJSON *out;

    /* Filled once, when the step was entered: nothing it reads changes
     * while the step runs. Its templates read the job's input and the
     * outputs of earlier steps, which change only when a step commits or
     * the run is read again from the store, and both enter the step anew
     * (a park's retry too: the job is claimed again). A degrade, a tier
     * switch or an agent's turns change the copy, never the fill. */
    assert(r->filled.body != NULL && r->filled.step == r->step);
    if ((out = cJSON_Duplicate(r->filled.body, true)) == NULL) {
        log_error("job %lld: step %s: cannot copy the body filled on entry",
                  (long long)r->job.id, cur_spec(r)->name);
        abort();
    }
    return out;
}

int
worker__fill_http(const struct run *r, cJSON *http, char *err, size_t len)
{
    struct spec_vars v;
    int rc;

    vars_of(r, &v);
    rc = spec_http_fill(r->spec, (size_t)r->step, &v, http, err, len);
    spec_vars_cleanup(&v);
    return rc;
}

enum worker_gate
worker__step_gate(struct run *r)
{
    struct worker *w = r->w;
    const struct spec_step *s = cur_spec(r);
    struct spec_vars v;
    char why[1024], msg[1200];
    cJSON *body = NULL;
    bool holds = true;
    int rc = 0;

    cJSON_Delete(r->filled.body); /* the step entered before */
    r->filled.body = NULL;
    vars_of(r, &v); /* the "when" and the fill read each output once */
    /* A foreach step's "when" that reads its element is asked per element
     * (foreach.c). */
    if (!spec_foreach_when_per_element(r->spec, (size_t)r->step))
        spec_when_holds(r->spec, (size_t)r->step, &v, &holds, why, sizeof(why));
    /* Filled here, once per entry; every attempt of the step sends a copy
     * (worker__fill). */
    if (holds)
        rc = spec_step_fill(r->spec, (size_t)r->step, &v, &body, why,
                            sizeof(why));
    spec_vars_cleanup(&v);
    if (!holds) {
        if (q_step_set(w->db, r->job.id, w->id, r->step, Q_STEP_SKIPPED, NULL,
                       why, 0) != 0) {
            worker__give_back(r, worker__now(w) + 1000);
            return WORKER_GATE_ENDED;
        }
        r->skipped[r->step++] = true;
        return WORKER_GATE_SKIPPED;
    }
    if (rc != 0) {
        snprintf(msg, sizeof(msg), "step %s: %s; nothing sent", s->name, why);
        worker__fail_job(r, msg);
        return WORKER_GATE_ENDED;
    }
    r->filled.body = body;
    r->filled.step = r->step;
    return WORKER_GATE_GO;
}

/* is_role: whether message m has role role. */
static bool
is_role(const cJSON *m, const char *role)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");

    return cJSON_IsString(r) && strcmp(r->valuestring, role) == 0;
}

void
worker__degrade(cJSON *request, const cJSON *degrade)
{
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(degrade, "max_tokens");
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(degrade, "drop_tools");
    const cJSON *keep =
        cJSON_GetObjectItemCaseSensitive(degrade, "keep_last_messages");
    cJSON *msgs = cJSON_GetObjectItemCaseSensitive(request, "messages");

    if (cJSON_IsNumber(mt)) {
        static const char *const fields[] = {"max_tokens",
                                             "max_completion_tokens"};
        bool set = false;
        for (size_t i = 0; i < 2; i++) {
            cJSON *f = cJSON_GetObjectItemCaseSensitive(request, fields[i]);
            if (f == NULL)
                continue;
            set = true;
            /* Degrading lowers a limit; it never raises one. */
            if (!cJSON_IsNumber(f) || f->valuedouble > mt->valuedouble)
                cJSON_ReplaceItemInObjectCaseSensitive(
                    request, fields[i], cJSON_CreateNumber(mt->valuedouble));
        }
        if (!set)
            cJSON_AddNumberToObject(request, "max_tokens", mt->valuedouble);
    }
    if (cJSON_IsTrue(drop)) {
        cJSON_DeleteItemFromObjectCaseSensitive(request, "tools");
        cJSON_DeleteItemFromObjectCaseSensitive(request, "tool_choice");
        cJSON_DeleteItemFromObjectCaseSensitive(request, "functions");
        cJSON_DeleteItemFromObjectCaseSensitive(request, "function_call");
        /* Refused without tools by OpenAI-compatible servers. */
        cJSON_DeleteItemFromObjectCaseSensitive(request, "parallel_tool_calls");
    }
    if (cJSON_IsNumber(keep) && cJSON_IsArray(msgs)) {
        int total = cJSON_GetArraySize(msgs), lead = 0, start;
        /* Leading system messages carry the instructions: keep them. */
        while (lead < total &&
               is_role(cJSON_GetArrayItem(msgs, lead), "system"))
            lead++;
        start = total - (int)keep->valuedouble;
        /* A tool result stays with the assistant message that called for
         * it: a "tool" message without its tool_calls is refused. */
        while (start > lead && is_role(cJSON_GetArrayItem(msgs, start), "tool"))
            start--;
        for (int i = lead; i < start; i++)
            cJSON_DeleteItemFromArray(msgs, lead);
    }
}

void
worker__sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    static const char hex[] = "0123456789abcdef";

    if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1 || n != 32) {
        fprintf(stderr, "stepq: SHA-256 failed\n");
        abort();
    }
    for (unsigned i = 0; i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = '\0';
}

bool
worker__has_keys(const char *text, size_t len, const cJSON *keys)
{
    cJSON *o = spec_output_json(text, len);
    const cJSON *k;
    bool ok = cJSON_IsObject(o);

    cJSON_ArrayForEach(k, keys)
    {
        if (ok && cJSON_IsString(k) &&
            cJSON_GetObjectItemCaseSensitive(o, k->valuestring) == NULL)
            ok = false;
    }
    cJSON_Delete(o);
    return ok;
}

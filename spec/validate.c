/* validate.c: the rules of a valid job (docs/reference.md "Job file").
 *
 * A job is refused whole, with the JSON path of the first problem, before
 * anything is written.  Unknown fields are refused everywhere except inside
 * a chat step's "request" (an OpenAI body has many optional fields) and an
 * http step's "body" (it is the user's payload).
 */
#include "spec/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/httptext.h"
#include "common/json.h"
#include "common/price.h"
#include "common/xalloc.h"

static const char *const job_keys[] = {
    "name",         "key",   "priority", "run_at",  "deadline_s", "steps",
    "max_cost_usd", "input", "on_done",  "on_fail", NULL};
static const char *const step_keys[] = {"name",
                                        "kind",
                                        "replayable",
                                        "side_effects",
                                        "idempotency_key",
                                        "request",
                                        "http",
                                        "token_budget",
                                        "max_total_tokens",
                                        "timeout_s",
                                        "max_attempts",
                                        "expect_json",
                                        "tiers",
                                        "degrade",
                                        "when",
                                        "foreach",
                                        "stream",
                                        SPEC_TOOL_STEP_KEYS,
                                        NULL};
static const char *const http_keys[] = {"method", "url", "headers", "body",
                                        NULL};

/* Bits of job_keys and step_keys, in their order: what members() found. */
enum {
    J_NAME,
    J_KEY,
    J_PRIORITY,
    J_RUN_AT,
    J_DEADLINE,
    J_STEPS,
    J_MAX_COST,
    J_INPUT,
    J_ON_DONE,
    J_ON_FAIL
};
enum {
    S_NAME,
    S_KIND,
    S_REPLAYABLE,
    S_SIDE_EFFECTS,
    S_IDEMPOTENCY_KEY,
    S_REQUEST,
    S_HTTP,
    S_TOKEN_BUDGET,
    S_MAX_TOTAL_TOKENS,
    S_TIMEOUT,
    S_MAX_ATTEMPTS,
    S_EXPECT_JSON,
    S_TIERS,
    S_DEGRADE,
    S_WHEN,
    S_FOREACH,
    S_STREAM,
    S_TOOLS /* and the other SPEC_TOOL_STEP_KEYS after it */
};
#define HAS(mask, bit) (((mask) & (1u << (bit))) != 0)

/* members checks in one pass that every field of obj is in allowed (at
 * most 32 names) and appears once, and sets bit i of *mask when allowed[i]
 * is there ("path.key: unknown field", "duplicate field"). The getters are
 * then asked only about fields that are there: looking up each of a
 * step's fourteen names was a sixth of validating a job (perf, bench/queue
 * with 100 per transaction). */
static int
members(const cJSON *obj, const char *path, const char *const *allowed,
        unsigned *mask, char *err, size_t len)
{
    char p[PATH_LEN];
    unsigned seen = 0, i;

    if (!cJSON_IsObject(obj))
        return json_fail(err, len, path, "must be an object");
    for (const cJSON *it = obj->child; it != NULL; it = it->next) {
        for (i = 0; allowed[i] != NULL; i++) {
            if (strcmp(allowed[i], it->string) == 0)
                break;
        }
        if (allowed[i] == NULL || (seen & (1u << i)) != 0)
            return json_fail(
                err, len, json_path_key(p, sizeof(p), path, it->string),
                allowed[i] == NULL ? "unknown field" : "duplicate field");
        seen |= 1u << i;
    }
    *mask = seen;
    return 0;
}

/* step_path writes "steps[i]" into buf (PATH_LEN bytes) without printf:
 * it is every step's path prefix, needed before any problem is found. */
static const char *
step_path(char *buf, size_t i)
{
    char digits[24];
    size_t n = 0, at = 6;

    memcpy(buf, "steps[", 6);
    do {
        digits[n++] = (char)('0' + i % 10);
        i /= 10;
    } while (i > 0);
    while (n > 0)
        buf[at++] = digits[--n];
    buf[at++] = ']';
    buf[at] = '\0';
    return buf;
}

/* The checks below get the path of the step and the name of the field
 * (key) and format "steps[0].key" only for a message: formatting every
 * path up front was an eighth of validating a job. */

static int
check_string_array(const cJSON *a, const char *path, const char *key,
                   bool nonempty, char *err, size_t len)
{
    char p[PATH_LEN], q[PATH_LEN];
    int i = 0;

    if (!cJSON_IsArray(a))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, key),
                         "must be an array of strings");
    if (nonempty && a->child == NULL)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, key),
                         "must not be empty");
    for (const cJSON *c = a->child; c != NULL; c = c->next, i++) {
        if (!cJSON_IsString(c) || c->valuestring[0] == '\0')
            return json_fail(
                err, len,
                json_path_index(q, sizeof(q),
                                json_path_key(p, sizeof(p), path, key), i),
                "must be a non-empty string");
    }
    return 0;
}

static int
check_tiers(const cJSON *a, const char *path, const struct spec_opts *opts,
            char *err, size_t len)
{
    char p[PATH_LEN], q[PATH_LEN];
    int rc, i = 0;

    if ((rc = check_string_array(a, path, "tiers", true, err, len)) != 0)
        return rc;
    /* A tier twice would be tried twice: a switch there replays the step
     * on the tier that just refused it. */
    for (const cJSON *c = a->child; c != NULL; c = c->next, i++) {
        for (const cJSON *o = a->child; o != c; o = o->next) {
            if (strcmp(o->valuestring, c->valuestring) == 0)
                return json_fail(
                    err, len,
                    json_path_index(q, sizeof(q),
                                    json_path_key(p, sizeof(p), path, "tiers"),
                                    i),
                    "tier %s named twice", c->valuestring);
        }
    }
    i = 0;
    if (opts == NULL || opts->tiers == NULL)
        return 0;
    for (const cJSON *c = a->child; c != NULL; c = c->next, i++) {
        bool known = false;
        for (size_t k = 0; k < opts->ntiers && !known; k++)
            known = strcmp(opts->tiers[k], c->valuestring) == 0;
        if (!known)
            return json_fail(
                err, len,
                json_path_index(q, sizeof(q),
                                json_path_key(p, sizeof(p), path, "tiers"), i),
                "no tier named %s in the config", c->valuestring);
    }
    return 0;
}

static int
check_http(const cJSON *h, const cJSON *step, const char *path, char *err,
           size_t len)
{
    static const char *const methods[] = {"GET",   "POST",   "PUT",
                                          "PATCH", "DELETE", NULL};
    const char *method = "POST", *url = NULL;
    const cJSON *headers;
    char p[PATH_LEN];
    bool ok = false;
    int rc;

    if ((rc = json_check_object(h, path, http_keys, err, len)) ||
        (rc = json_get_string(h, "method", false, path, &method, err, len)) ||
        (rc = json_get_string(h, "url", true, path, &url, err, len)))
        return rc;
    for (const char *const *m = methods; *m && !ok; m++)
        ok = strcmp(*m, method) == 0;
    if (!ok)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "method"),
                         "must be GET, POST, PUT, PATCH or DELETE");
    if ((rc = spec__check_step_url(step, url, path, err, len)) != 0)
        return rc;
    headers = cJSON_GetObjectItemCaseSensitive(h, "headers");
    if (headers != NULL &&
        (rc = spec__check_http_headers(headers, path, err, len)) != 0)
        return rc;
    return 0;
}

/* A step's body by its kind: a chat step's "request" (streamed when its
 * "stream" says so), an http step's "http", and not the other's. */
static int
step_body(const cJSON *o, unsigned m, const char *path, struct spec_step *s,
          char *err, size_t len)
{
    char p[PATH_LEN];
    int rc;

    if (HAS(m, S_STREAM) &&
        (rc = json_get_bool(o, "stream", path, &s->stream, err, len)) != 0)
        return rc;
    if (s->stream && s->kind != SPEC_STEP_CHAT)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "stream"),
                         "only for steps of kind \"chat\"");
    if (HAS(m, S_REQUEST))
        s->request = cJSON_GetObjectItemCaseSensitive(o, "request");
    if (HAS(m, S_HTTP))
        s->http = cJSON_GetObjectItemCaseSensitive(o, "http");
    if (s->kind == SPEC_STEP_CHAT) {
        if (s->request == NULL)
            return json_fail(err, len,
                             json_path_key(p, sizeof(p), path, "request"),
                             "missing");
        if ((rc = spec__check_request(s->request, path, err, len)) != 0)
            return rc;
        if (s->http != NULL)
            return json_fail(err, len,
                             json_path_key(p, sizeof(p), path, "http"),
                             "only for steps of kind \"http\"");
    } else {
        json_path_key(p, sizeof(p), path, "http");
        if (s->http == NULL)
            return json_fail(err, len, p, "missing");
        if ((rc = check_http(s->http, o, p, err, len)) != 0)
            return rc;
        if (s->request != NULL)
            return json_fail(err, len,
                             json_path_key(p, sizeof(p), path, "request"),
                             "only for steps of kind \"chat\"");
    }
    return 0;
}

/* A step's name and kind: a name a template can name, "chat" or "http". */
static int
step_name_kind(const cJSON *o, unsigned m, const char *path,
               struct spec_step *s, char *err, size_t len)
{
    const char *kind = "chat";
    char p[PATH_LEN];
    int rc;

    if ((rc = json_get_string(o, "name", true, path, &s->name, err, len)) ||
        (HAS(m, S_KIND) &&
         (rc = json_get_string(o, "kind", false, path, &kind, err, len))))
        return rc;
    if (s->name[0] == '\0')
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "name"),
                         "must not be empty");
    if (strpbrk(s->name, "{}") != NULL || strstr(s->name, ".output"))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "name"),
                         "must not contain braces or \".output\"");
    if (strcmp(kind, "chat") == 0)
        s->kind = SPEC_STEP_CHAT;
    else if (strcmp(kind, "http") == 0)
        s->kind = SPEC_STEP_HTTP;
    else
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "kind"),
                         "must be \"chat\" or \"http\", not \"%s\"", kind);
    return 0;
}

/* A step's flags and bounds, each with its default: replayable and
 * side_effects by kind, the idempotency key (a header value), attempts,
 * token_budget (the size one request is planned to fit; it does not cap
 * spend, max_total_tokens does) and timeout_s. */
static int
step_bounds(const cJSON *o, unsigned m, const char *path, struct spec_step *s,
            char *err, size_t len)
{
    int64_t attempts = 3, budget = 8000, total = 0;
    double timeout = 0;
    char p[PATH_LEN];
    int rc;

    s->replayable = s->kind == SPEC_STEP_CHAT;
    s->side_effects = s->kind == SPEC_STEP_HTTP;
    if ((HAS(m, S_REPLAYABLE) &&
         (rc = json_get_bool(o, "replayable", path, &s->replayable, err,
                             len))) ||
        (HAS(m, S_SIDE_EFFECTS) &&
         (rc = json_get_bool(o, "side_effects", path, &s->side_effects, err,
                             len))) ||
        (HAS(m, S_IDEMPOTENCY_KEY) &&
         (rc = json_get_string(o, "idempotency_key", false, path,
                               &s->idempotency_key, err, len))) ||
        (HAS(m, S_MAX_ATTEMPTS) &&
         (rc = json_get_int(o, "max_attempts", 1, 100, path, &attempts, err,
                            len))) ||
        (HAS(m, S_TOKEN_BUDGET) &&
         (rc = json_get_int(o, "token_budget", 1, INT64_C(1) << 40, path,
                            &budget, err, len))) ||
        (HAS(m, S_MAX_TOTAL_TOKENS) &&
         (rc = json_get_int(o, "max_total_tokens", 1, INT64_C(1) << 40, path,
                            &total, err, len))) ||
        (HAS(m, S_TIMEOUT) &&
         (rc = json_get_number(o, "timeout_s", 0.001, 86400, path, &timeout,
                               err, len))))
        return rc;
    if (s->idempotency_key != NULL && s->idempotency_key[0] == '\0')
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "idempotency_key"),
                         "must not be empty");
    /* It is sent as a header: no control characters. */
    if (s->idempotency_key != NULL &&
        !httptext_is_field_value(s->idempotency_key))
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "idempotency_key"),
                         "must be printable text (it is sent as the "
                         "Idempotency-Key header)");
    s->max_attempts = (int)attempts;
    s->token_budget = budget;
    s->max_total_tokens = total;
    s->timeout_s = timeout;
    return 0;
}

static int
parse_step(const cJSON *o, const char *path, struct spec_step *s,
           const struct spec_opts *opts, char *err, size_t len)
{
    char p[PATH_LEN];
    unsigned m = 0;
    int rc;

    if ((rc = members(o, path, step_keys, &m, err, len)) ||
        (rc = step_name_kind(o, m, path, s, err, len)) ||
        (rc = step_bounds(o, m, path, s, err, len)) ||
        (rc = step_body(o, m, path, s, err, len)))
        return rc;
    if (HAS(m, S_EXPECT_JSON)) {
        s->expect_json = cJSON_GetObjectItemCaseSensitive(o, "expect_json");
        if ((rc = check_string_array(s->expect_json, path, "expect_json", false,
                                     err, len)) != 0)
            return rc;
    }
    if (HAS(m, S_TIERS)) {
        s->tiers = cJSON_GetObjectItemCaseSensitive(o, "tiers");
        if ((rc = check_tiers(s->tiers, path, opts, err, len)) != 0)
            return rc;
    }
    if (HAS(m, S_WHEN))
        s->when = cJSON_GetObjectItemCaseSensitive(o, "when");
    if (HAS(m, S_DEGRADE)) {
        s->degrade = cJSON_GetObjectItemCaseSensitive(o, "degrade");
        if ((rc = spec__check_degrade(
                 s->degrade, json_path_key(p, sizeof(p), path, "degrade"), err,
                 len)) != 0)
            return rc;
    }
    return spec__step_tools(o, m >> S_TOOLS, path, s, opts, err, len);
}

/* The job's input: opts' (a copy), else its own field; at most
 * SPEC_INPUT_MAX_BYTES as compact JSON, kept as that text for the store. */
static int
take_input(struct spec_job *j, bool own, const struct spec_opts *opts,
           char *err, size_t len)
{
    if (opts != NULL && opts->input != NULL) {
        j->input_own = cJSON_Duplicate(opts->input, true);
        j->input = j->input_own;
    } else if (own) {
        j->input = cJSON_GetObjectItemCaseSensitive(j->root, "input");
    }
    if (j->input == NULL)
        return 0;
    j->input_text = json_print(j->input);
    if (strlen(j->input_text) > SPEC_INPUT_MAX_BYTES)
        return json_fail(err, len, "input",
                         "%zu bytes as compact JSON, larger than the limit "
                         "of %d",
                         strlen(j->input_text), SPEC_INPUT_MAX_BYTES);
    return 0;
}

/* Step i's templates, read once every step's name is known: what it
 * sends, its condition, and its idempotency key (which holds none: a
 * schedule's are filled before this). */
static int
step_templates(struct spec_job *j, size_t i, const struct spec_opts *opts,
               char *err, size_t len)
{
    struct spec_step *s = &j->steps[i];
    struct spec_seg top = {NULL, "steps", 0}, step = {&top, NULL, (int)i};
    struct spec_seg req = {&step, "request", 0}, http = {&step, "http", 0};
    char p[PATH_LEN], q[PATH_LEN];
    struct spec_tpl t;
    const char *pos;
    int rc;

    if (s->element >= 0) /* an element's: filled when it was made */
        return 0;
    if (s->foreach_in != NULL &&
        (rc = spec__check_foreach(j, i, opts, err, len)) != 0)
        return rc;
    if (s->request != NULL &&
        (rc = spec__check_sent(s->request, &req, j, i, opts, &s->templated, err,
                               len)) != 0)
        return rc;
    if (s->http != NULL &&
        (rc = spec__check_sent(s->http, &http, j, i, opts, &s->templated, err,
                               len)) != 0)
        return rc;
    if (s->tools != NULL &&
        (rc = spec__tool_templates(j, i, opts, err, len)) != 0)
        return rc;
    step_path(p, i);
    if (s->when != NULL &&
        (rc = spec__check_when(s->when, json_path_key(q, sizeof(q), p, "when"),
                               j, i, opts, err, len)) != 0)
        return rc;
    if (s->idempotency_key == NULL)
        return 0;
    pos = s->idempotency_key;
    json_path_key(q, sizeof(q), p, "idempotency_key");
    /* A foreach step's key may name its element ("label-{{issue.n}}"):
     * each element's job has it filled. */
    while ((rc = spec__tpl_next(&pos, j, i, opts, q, &t, err, len)) == 1) {
        if (!t.item)
            return json_fail(err, len, q,
                             "holds a template; only a schedule's "
                             "{{schedule.*}} and a foreach step's element "
                             "are filled in a key");
    }
    return rc;
}

/* The job's steps (steps: its "steps", or NULL): 1 to 1,000 of them,
 * each parsed with its foreach, names unique. */
static int
parse_steps(struct spec_job *j, const cJSON *steps,
            const struct spec_opts *opts, char *err, size_t len)
{
    const cJSON *it;
    char p[PATH_LEN];
    size_t i = 0;
    int rc;

    if (steps == NULL)
        return json_fail(err, len, "steps", "missing");
    if (!cJSON_IsArray(steps))
        return json_fail(err, len, "steps", "must be an array");
    j->nsteps = 0;
    cJSON_ArrayForEach(it, steps) j->nsteps++;
    if (j->nsteps == 0)
        return json_fail(err, len, "steps", "must not be empty");
    if (j->nsteps > 1000)
        return json_fail(err, len, "steps", "more than 1000 steps");
    j->steps = xcalloc(j->nsteps, sizeof(*j->steps));
    cJSON_ArrayForEach(it, steps)
    {
        step_path(p, i);
        if ((rc = parse_step(it, p, &j->steps[i], opts, err, len)) != 0 ||
            (rc = spec__step_foreach(it, p, j->key, &j->steps[i], err, len)))
            return rc;
        for (size_t k = 0; k < i; k++) {
            char q[PATH_LEN];
            if (strcmp(j->steps[k].name, j->steps[i].name) == 0)
                return json_fail(err, len,
                                 json_path_key(q, sizeof(q), p, "name"),
                                 "duplicate step name %s", j->steps[i].name);
        }
        i++;
    }
    return 0;
}

int
spec__validate(struct spec_job *j, const struct spec_opts *opts, char *err,
               size_t len)
{
    const cJSON *root = j->root;
    const char *run_at = NULL;
    double deadline = Q_DEADLINE_S_DEFAULT, max_cost = 0;
    unsigned m = 0;
    int rc;

    if (!cJSON_IsObject(root))
        return json_fail(err, len, "", "a job must be a JSON object");
    if ((rc = members(root, "", job_keys, &m, err, len)) ||
        (rc = json_get_string(root, "name", true, "", &j->name, err, len)) ||
        (HAS(m, J_KEY) &&
         (rc = json_get_string(root, "key", false, "", &j->key, err, len))) ||
        (HAS(m, J_PRIORITY) &&
         (rc = json_get_int(root, "priority", -1000000, 1000000, "",
                            &j->priority, err, len))) ||
        (HAS(m, J_RUN_AT) && (rc = json_get_string(root, "run_at", false, "",
                                                   &run_at, err, len))) ||
        (HAS(m, J_DEADLINE) &&
         (rc = json_get_number(root, "deadline_s", 1, 366.0 * 86400, "",
                               &deadline, err, len))) ||
        (HAS(m, J_MAX_COST) &&
         (rc = json_get_number(root, "max_cost_usd", 0, 1e6, "", &max_cost, err,
                               len))) ||
        (HAS(m, J_ON_DONE) && (rc = spec__hook_name(root, "on_done", opts,
                                                    &j->on_done, err, len))) ||
        (HAS(m, J_ON_FAIL) && (rc = spec__hook_name(root, "on_fail", opts,
                                                    &j->on_fail, err, len))) ||
        (rc = spec__run_at(run_at, j, err, len)))
        return rc;
    j->max_cost_nusd = HAS(m, J_MAX_COST) ? price_from_usd(max_cost) : -1;
    if (j->name[0] == '\0')
        return json_fail(err, len, "name", "must not be empty");
    if ((rc = take_input(j, HAS(m, J_INPUT), opts, err, len)) != 0)
        return rc;
    if (j->key != NULL && opts != NULL && opts->schedule != NULL)
        return json_fail(err, len, "key",
                         "a schedule's job has none (the schedule gives it "
                         "schedule:%s:SLOT)",
                         opts->schedule);
    if (j->key != NULL &&
        (rc = spec__key_rules(j->key, opts != NULL && opts->stored, err,
                              len)) != 0)
        return rc;
    j->deadline_s = (int64_t)deadline;
    if ((rc = parse_steps(j,
                          HAS(m, J_STEPS)
                              ? cJSON_GetObjectItemCaseSensitive(root, "steps")
                              : NULL,
                          opts, err, len)) != 0)
        return rc;
    /* Templates last: a reference may name any step, so all names must be
     * known first to tell "later" from "unknown" (template.c). */
    for (size_t i = 0; i < j->nsteps; i++) {
        if ((rc = step_templates(j, i, opts, err, len)) != 0)
            return rc;
    }
    return 0;
}

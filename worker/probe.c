/* probe.c: `stepq tiers --check` and `--dry-run` (declared in
 * worker/worker.h): one small chat request per tier, built exactly as the
 * worker builds it (http_tier_request), sent at once to every tier on a
 * loop of its own, each bounded by its tier's timeout_s, and judged by
 * policy_classify; or, for a dry run, the request shown with every secret
 * masked.
 *
 * Nothing here touches the database or the tiers' shared state: a check
 * is not an attempt, is not paced and counts toward no breaker. Secrets
 * (the key, env: values) are read only to build the request; what is
 * returned never holds one: headers are masked, and an answer's body is
 * cut to an excerpt from which every secret the tier sent is removed.
 */
#include "worker/worker.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "common/clock.h"
#include "common/httptext.h"
#include "common/json.h"
#include "common/xalloc.h"
#include "http/http.h"
#include "policy/policy.h"
#include "worker/internal.h"

#define PROBE_REQUEST                                                          \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"Reply with the word "     \
    "ok.\"}],\"max_tokens\":16}"
#define EXCERPT 300 /* bytes of an answer's body shown */

/* One tier being checked. */
struct probe {
    const struct config_tier *t; /* borrowed */
    struct http_request req;     /* built; cleaned up once sent */
    bool built, done;
    char error[512];          /* why it was not sent, or the transport error */
    struct http_response res; /* body and headers moved out of the answer */
};

/* mask shows a long key by its first three and last four characters
 * ("sk-…abcd"), anything shorter as "***". Caller frees. */
static char *
mask(const char *key)
{
    size_t n = strlen(key);
    char *out;

    if (n < 20)
        return xstrdup("***");
    out = xmalloc(16);
    snprintf(out, 16, "%.3s\u2026%s", key, key + n - 4);
    return out;
}

/* config_value returns the tier's configured value of header name, or
 * NULL when the tier does not set it. */
static const char *
config_value(const struct config_tier *t, const char *name)
{
    for (size_t i = 0; i < t->nheaders; i++) {
        if (strcasecmp(t->headers[i].name, name) == 0)
            return t->headers[i].value;
    }
    return NULL;
}

/* shown is what a dry run prints for a header of the built request. */
static char *
shown(const struct config_tier *t, const struct http_header *h)
{
    const char *kh = config_tier_key_header(t), *cv;
    char *m, *out;

    if (kh != NULL && strcasecmp(h->name, kh) == 0) {
        if (strncmp(h->value, "Bearer ", 7) != 0 ||
            t->auth == CONFIG_AUTH_HEADER)
            return mask(h->value);
        m = mask(h->value + 7);
        out = xmalloc(strlen(m) + 8);
        snprintf(out, strlen(m) + 8, "Bearer %s", m);
        free(m);
        return out;
    }
    cv = config_value(t, h->name);
    if (cv != NULL && (strncmp(cv, "env:", 4) == 0 ||
                       httptext_is_credential_name(h->name, strlen(h->name))))
        return xstrdup("***");
    return xstrdup(h->value);
}

/* excerpt returns the start of text with bytes that are not UTF-8
 * replaced (the client has replaced every secret the request carried by
 * "***" already: http_request.secrets). Caller frees. */
static char *
excerpt(const char *text, size_t len)
{
    size_t n = len < EXCERPT ? len : EXCERPT;
    char *s = xstrndup(text, len);

    if (strlen(s) > n)
        s[n] = '\0';
    json_utf8_scrub(s, strlen(s));
    return s;
}

static void
probe_cleanup(struct probe *p)
{
    http_request_cleanup(&p->req);
    http_response_cleanup(&p->res);
}

/* note says what an operator should know before reading the result: the
 * default auth sends no key when its variable is unset. NULL: nothing. */
static const char *
note(const struct config_tier *t, char *buf, size_t len)
{
    const char *k;

    if (t->auth != CONFIG_AUTH_DEFAULT || t->api_key_env == NULL)
        return NULL;
    k = getenv(t->api_key_env);
    if (k != NULL && *k != '\0')
        return NULL;
    snprintf(buf, len, "%s is not set: no key is sent", t->api_key_env);
    return buf;
}

/* add_warnings adds the tier's "warnings" (worker_gateway_warnings). */
static void
add_warnings(cJSON *o, const struct config_tier *t)
{
    worker_gateway_warnings(t, cJSON_AddArrayToObject(o, "warnings"));
}

/* build fills p's request; false (with p->error) when it cannot be built,
 * e.g. an env: variable is unset: then nothing is sent. */
static bool
build(struct probe *p, const cJSON *request)
{
    int64_t ms = (int64_t)(p->t->timeout_s * 1000);

    if (http_tier_request(request, p->t, p->t->stream, ms > 0 ? ms : 1, &p->req,
                          p->error, sizeof(p->error)) != 0)
        return false;
    p->built = true;
    return true;
}

static void
add_url(cJSON *o, const struct config_tier *t)
{
    char *url = NULL, err[256];

    if (http_tier_url(t, false, &url, err, sizeof(err)) == 0)
        cJSON_AddStringToObject(o, "url", url);
    else
        cJSON_AddNullToObject(o, "url");
    free(url);
}

/* ---- the dry run ------------------------------------------------------- */

/* tls_of is the tier's TLS files (paths, not secrets) as an object of the
 * ones set, or JSON null when none is. */
static cJSON *
tls_of(const struct config_tier *t)
{
    const char *names[] = {"ca_file", "ca_path", "client_cert", "client_key"};
    const char *paths[] = {t->ca_file, t->ca_path, t->client_cert,
                           t->client_key};
    cJSON *o = NULL;

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(names); i++) {
        if (paths[i] == NULL)
            continue;
        if (o == NULL)
            o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, names[i], paths[i]);
    }
    return o != NULL ? o : cJSON_CreateNull();
}

static cJSON *
dry_one(const struct config_tier *t, const cJSON *request, bool *ok)
{
    struct probe p = {.t = t};
    cJSON *o = cJSON_CreateObject(), *h, *body;
    char nb[256];

    cJSON_AddStringToObject(o, "tier", t->name);
    cJSON_AddStringToObject(o, "method", "POST");
    add_url(o, t);
    cJSON_AddItemToObject(o, "tls", tls_of(t));
    if (!build(&p, request)) {
        *ok = false;
        cJSON_AddNullToObject(o, "headers");
        cJSON_AddNullToObject(o, "body");
        cJSON_AddStringToObject(o, "error", p.error);
    } else {
        h = cJSON_AddObjectToObject(o, "headers");
        for (size_t i = 0; i < p.req.nheaders; i++) {
            char *v = shown(t, &p.req.headers[i]);
            cJSON_AddStringToObject(h, p.req.headers[i].name, v);
            free(v);
        }
        body = cJSON_ParseWithLength(p.req.body, p.req.body_len);
        cJSON_AddItemToObject(o, "body", body ? body : cJSON_CreateNull());
        cJSON_AddNullToObject(o, "error");
    }
    json_add_string(o, "note", note(t, nb, sizeof(nb)));
    add_warnings(o, t);
    probe_cleanup(&p);
    return o;
}

/* ---- the check ---------------------------------------------------------- */

static void
on_done(http_call *call, struct http_response *res, void *arg)
{
    struct probe *p = arg;

    (void)call;
    /* Moved out: the client frees what is left in *res. */
    http_response_move(&p->res, res);
    p->done = true;
}

/* result_of names what an operator needs to fix. */
static const char *
result_of(const struct probe *p, const struct policy_class *c, bool chat)
{
    const struct http_response *r = &p->res;

    if (r->error == HTTP_ERR_TIMEOUT)
        return "timeout";
    if (r->error == HTTP_ERR_BAD_RESPONSE)
        return "error"; /* something answered, not in HTTP */
    if (r->error == HTTP_ERR_TLS_CERTIFICATE)
        return "certificate_refused";
    if (r->error != HTTP_ERR_NONE && r->error != HTTP_ERR_TOO_LARGE)
        return "unreachable";
    if (r->status == 401 || r->status == 403 || c->why == POLICY_REASON_AUTH)
        return "auth_failed";
    if (r->status == 404 || r->status == 405)
        return "wrong_path";
    if (r->status == 429 || c->outcome == POLICY_SOFT_THROTTLE ||
        c->outcome == POLICY_HARD_QUOTA)
        return "rate_limited";
    if (r->status >= 200 && r->status < 300 && chat &&
        (c->outcome == POLICY_OK || c->outcome == POLICY_TRUNCATED ||
         c->outcome == POLICY_SCHEMA_INVALID))
        return "reachable";
    return "error";
}

static cJSON *
judge(struct probe *p, const struct policy_config *pcfg, bool *ok)
{
    cJSON *o = cJSON_CreateObject();
    struct policy_header *hdrs;
    struct policy_input in = {0};
    struct policy_class c;
    struct http_chat_answer ans;
    const char *result;
    bool chat = false;
    char nb[256], *ex;

    cJSON_AddStringToObject(o, "tier", p->t->name);
    add_url(o, p->t);
    if (!p->built) {
        *ok = false;
        cJSON_AddStringToObject(o, "result", "not_sent");
        cJSON_AddNullToObject(o, "status");
        cJSON_AddNullToObject(o, "outcome");
        cJSON_AddNullToObject(o, "reason");
        cJSON_AddNullToObject(o, "latency_ms");
        cJSON_AddStringToObject(o, "error", p->error);
        json_add_string(o, "note", note(p->t, nb, sizeof(nb)));
        add_warnings(o, p->t);
        return o;
    }
    worker__unstream(p->t, &p->res);
    hdrs = xcalloc(p->res.nheaders + 1, sizeof(*hdrs));
    for (size_t i = 0; i < p->res.nheaders; i++)
        hdrs[i] = (struct policy_header){p->res.headers[i].name,
                                         p->res.headers[i].value};
    in.status = p->res.status;
    in.transport = worker__transport_of(p->res.error);
    in.headers = hdrs;
    in.nheaders = p->res.nheaders;
    /* Judged on the answer as it came; only the excerpt shown is masked. */
    in.body = p->res.raw ? p->res.raw : p->res.body;
    in.body_len = p->res.raw ? p->res.raw_len : p->res.body_len;
    in.parsed = POLICY_PARSED_DERIVE;
    in.now_ms = clock_now_ms();
    if (p->res.error == HTTP_ERR_NONE && p->res.status >= 200 &&
        p->res.status < 300 &&
        http_chat_parse(in.body, in.body_len, &ans) == 0) {
        chat = true;
        http_chat_answer_cleanup(&ans);
    }
    policy_classify(&in, pcfg, NULL, &c);
    free(hdrs);
    result = result_of(p, &c, chat);
    *ok = *ok && strcmp(result, "reachable") == 0;
    cJSON_AddStringToObject(o, "result", result);
    if (p->res.error == HTTP_ERR_NONE || p->res.status > 0)
        cJSON_AddNumberToObject(o, "status", p->res.status);
    else
        cJSON_AddNullToObject(o, "status");
    cJSON_AddStringToObject(o, "outcome", policy_outcome_name(c.outcome));
    json_add_string(o, "reason", c.reason);
    cJSON_AddNumberToObject(o, "latency_ms", (double)p->res.latency_ms);
    if (strcmp(result, "reachable") == 0) {
        cJSON_AddNullToObject(o, "error");
    } else if (p->res.error != HTTP_ERR_NONE) {
        ex = excerpt(p->res.error_text, strlen(p->res.error_text));
        cJSON_AddStringToObject(o, "error",
                                ex[0] ? ex : http_error_name(p->res.error));
        free(ex);
    } else {
        ex = excerpt(p->res.body ? p->res.body : "", p->res.body_len);
        cJSON_AddStringToObject(o, "error", ex);
        free(ex);
    }
    json_add_string(o, "note", note(p->t, nb, sizeof(nb)));
    add_warnings(o, p->t);
    return o;
}

/* check sends every built request on one loop and waits for them all:
 * each ends by its answer or its own timeout. */
static int
check(const struct config *cfg, struct probe *ps, size_t n)
{
    struct http_client_opts copts = {
        .max_response_bytes = (size_t)cfg->worker.max_response_bytes};
    http_client *c = NULL;
    uv_loop_t loop;
    size_t left = 0;
    int rc;

    /* A peer that closes while a request is written must not kill us. */
    signal(SIGPIPE, SIG_IGN);
    if (uv_loop_init(&loop) != 0)
        return -EIO;
    if ((rc = http_client_new(&loop, &copts, &c)) != 0) {
        (void)uv_loop_close(&loop);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        if (!ps[i].built)
            continue;
        if ((rc = http_send(c, &ps[i].req, on_done, &ps[i], NULL)) != 0) {
            snprintf(ps[i].error, sizeof(ps[i].error),
                     "the request cannot be sent (%s)", strerror(-rc));
            ps[i].built = false;
            continue;
        }
        http_request_cleanup(&ps[i].req);
        left++;
    }
    while (left > 0) {
        uv_run(&loop, UV_RUN_ONCE);
        left = 0;
        for (size_t i = 0; i < n; i++)
            left += ps[i].built && !ps[i].done;
    }
    http_client_close(c, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    return uv_loop_close(&loop) == 0 ? 0 : -EIO;
}

/* select_tiers lists the tiers to look at: only, or all. */
static int
select_tiers(const struct config *cfg, const char *only,
             const struct config_tier ***out, size_t *n)
{
    const struct config_tier **ts = xcalloc(cfg->ntiers + 1, sizeof(*ts));

    *n = 0;
    for (size_t i = 0; i < cfg->ntiers; i++) {
        if (only == NULL || strcmp(cfg->tiers[i].name, only) == 0)
            ts[(*n)++] = &cfg->tiers[i];
    }
    if (*n == 0) {
        free(ts);
        return only != NULL ? -ENOENT : -EINVAL;
    }
    *out = ts;
    return 0;
}

int
worker_probe(const struct config *cfg, const struct worker_probe_opts *opts,
             cJSON **out, bool *all_ok)
{
    const struct config_tier **ts = NULL;
    cJSON *def = NULL, *arr;
    const cJSON *request = opts->request;
    struct probe *ps = NULL;
    policy_rules *rules = NULL;
    struct policy_config pcfg;
    char err[512];
    size_t n = 0;
    bool ok = true;
    int rc;

    if ((rc = select_tiers(cfg, opts->tier, &ts, &n)) != 0)
        return rc;
    if (request == NULL)
        request = def = cJSON_Parse(PROBE_REQUEST);
    arr = cJSON_CreateArray();
    if (opts->dry_run) {
        for (size_t i = 0; i < n; i++)
            cJSON_AddItemToArray(arr, dry_one(ts[i], request, &ok));
        goto out;
    }
    if ((rc = policy_rules_new(cfg->rules, cfg->nrules, &rules, err,
                               sizeof(err))) != 0)
        goto out;
    policy_config_init(&pcfg, &cfg->policy, rules);
    ps = xcalloc(n, sizeof(*ps));
    for (size_t i = 0; i < n; i++) {
        ps[i].t = ts[i];
        http_request_init(&ps[i].req);
        (void)build(&ps[i], request);
    }
    if ((rc = check(cfg, ps, n)) == 0) {
        for (size_t i = 0; i < n; i++)
            cJSON_AddItemToArray(arr, judge(&ps[i], &pcfg, &ok));
    }
    for (size_t i = 0; i < n; i++)
        probe_cleanup(&ps[i]);
out:
    free(ps);
    free(ts);
    policy_rules_free(rules);
    cJSON_Delete(def);
    if (rc != 0) {
        cJSON_Delete(arr);
        return rc;
    }
    *out = arr;
    *all_ok = ok;
    return 0;
}

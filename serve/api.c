/* api.c: the routes of `stepq serve` and their answers. Each reads or
 * writes through the same calls as the CLI command it mirrors: view/ for
 * the JSON, spec/ for jobs, park/ for resolutions. */
#include "serve/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/xalloc.h"
#include "park/park.h"
#include "spec/spec.h"
#include "view/view.h"

/* A page of GET /v1/jobs: by default, and at most. */
#define JOBS_PAGE     100
#define JOBS_PAGE_MAX 1000

/* Queues text (consumed, whatever happens) as a JSON answer, with an
 * Allow header when allow is not NULL (a 405). */
static enum MHD_Result
reply_text_allow(struct MHD_Connection *c, unsigned status, char *text,
                 size_t len, const char *allow)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    enum MHD_Result ok;

    if (r == NULL) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (allow != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result
reply_text(struct MHD_Connection *c, unsigned status, char *text, size_t len)
{
    return reply_text_allow(c, status, text, len, NULL);
}

enum MHD_Result
serve_reply_json(struct MHD_Connection *c, unsigned status, cJSON *body)
{
    char *text = cJSON_PrintUnformatted(body);

    cJSON_Delete(body);
    if (text == NULL)
        return MHD_NO;
    return reply_text(c, status, text, strlen(text));
}

/* Queues the error body {"error": {"code", "message"}}, with an Allow
 * header when allow is not NULL. */
static enum MHD_Result
reply_error(struct MHD_Connection *c, unsigned status, const char *code,
            const char *msg, const char *allow)
{
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    char *text;

    cJSON_AddStringToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", msg);
    text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (text == NULL)
        return MHD_NO;
    return reply_text_allow(c, status, text, strlen(text), allow);
}

enum MHD_Result
serve_reply_error(struct MHD_Connection *c, unsigned status, const char *code,
                  const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return reply_error(c, status, code, msg, NULL);
}

/* 405, with the methods the path has in its Allow header (RFC 9110). */
static enum MHD_Result
not_allowed(struct MHD_Connection *c, const char *method, const char *url)
{
    char msg[512], allow[32];

    snprintf(msg, sizeof(msg), "%s is not allowed on %s", method, url);
    serve_allowed(url, allow, sizeof(allow));
    return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method_not_allowed",
                       msg, allow);
}

enum MHD_Result
serve_storage_error(struct MHD_Connection *c, int rc, const char *doing)
{
    if (rc == -EAGAIN || rc == -EBUSY)
        return serve_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable",
                                 "cannot %s: the database is busy or away; "
                                 "try again",
                                 doing);
    return serve_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "storage",
                             "cannot %s", doing);
}

int64_t
serve_store_now(const struct serve_opts *o)
{
    return clock_now_ms() + q_clock_offset(o->db);
}

const char *
serve_arg(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
}

/* ---- query parameters ------------------------------------------------ */

/* The query parameters each route reads; any other, one given twice, or
 * a value holding a NUL (%00) is refused (400), as a misspelt field of a
 * body is: "?job=1" must not pass for "every item". */
static const char *const *
params_of(enum serve_route_id r)
{
    static const char *const none[] = {NULL};
    static const char *const jobs[] = {"state", "limit", "after", NULL};
    static const char *const park[] = {"state", "job_id",    "reason",
                                       "tier",  "job_names", NULL};
    static const char *const report[] = {"since", NULL};
    static const char *const job[] = {"wait", NULL};

    return r == R_JOB                      ? job
           : r == R_JOBS_LIST              ? jobs
           : r == R_PARK_LIST              ? park
           : r == R_REPORT || r == R_AUDIT ? report
                                           : none;
}

struct query_check {
    const char *const *allowed;
    const char *seen[8];
    int nseen;
    char problem[160];
};

static enum MHD_Result
query_param(void *cls, enum MHD_ValueKind kind, const char *key,
            size_t key_size, const char *value, size_t value_size)
{
    struct query_check *q = cls;
    bool known = false;

    (void)kind;
    for (const char *const *a = q->allowed; *a != NULL && !known; a++)
        known = strcmp(*a, key) == 0;
    if (!known || strlen(key) != key_size) {
        snprintf(q->problem, sizeof(q->problem),
                 "unknown query parameter %.64s", key);
        return MHD_NO;
    }
    if (value != NULL && strlen(value) != value_size) {
        snprintf(q->problem, sizeof(q->problem),
                 "query parameter %.64s holds a NUL", key);
        return MHD_NO;
    }
    for (int i = 0; i < q->nseen; i++) {
        if (strcmp(q->seen[i], key) == 0) {
            snprintf(q->problem, sizeof(q->problem),
                     "query parameter %.64s given twice", key);
            return MHD_NO;
        }
    }
    if (q->nseen < 8)
        q->seen[q->nseen++] = key;
    return MHD_YES;
}

/* NULL when c's query suits route r, else what is wrong (in q). */
static const char *
query_problem(struct MHD_Connection *c, enum serve_route_id r,
              struct query_check *q)
{
    memset(q, 0, sizeof(*q));
    q->allowed = params_of(r);
    (void)MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, query_param, q);
    return q->problem[0] ? q->problem : NULL;
}

/* ---- jobs ------------------------------------------------------------ */

/* The body is validated and written as stepq enqueue reads its input,
 * through spec/'s one enqueue path: job by job in batches inside one
 * transaction with its audit row, so memory holds the body and one
 * batch, not every parsed job; the answer is written as text, not built
 * as a tree of every result. A job's input is its own "input" field. */
/* The audit row of an enqueue (a spec_enqueue before_commit; ctx: the
 * park_audit of who asked). */
static int
audit_enqueued(void *ctx, q_db *db, const struct q_enqueue_result *res,
               size_t n)
{
    return park_audit_enqueued(db, res, n, ctx);
}

static enum MHD_Result
jobs_enqueue(const struct serve_opts *o, const struct serve_caller *who,
             struct MHD_Connection *c, const char *body, size_t len)
{
    struct park_audit a = {0};
    struct spec_enqueue_opts eo = {.db = o->db,
                                   .now = serve_store_now(o),
                                   .cfg = o->cfg,
                                   .ctx = &a,
                                   .before_commit = audit_enqueued};
    const struct q_enqueue_result *res;
    struct xbuf out = {0};
    spec_enqueue *e;
    bool many, fresh = false;
    size_t n = 0;
    char err[1024];
    int rc;

    if (body == NULL || len == 0)
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "invalid_job",
                                 "the body is empty: send a job, an array of "
                                 "jobs or JSON lines");
    serve_audit_by(who, eo.now, &a);
    e = spec_enqueue_new(&eo);
    if ((rc = spec_enqueue_text(e, body, len, err, sizeof(err))) != 0) {
        bool store = spec_enqueue_store_failed(e);
        spec_enqueue_free(e);
        if (store)
            return serve_storage_error(c, rc, "enqueue: nothing was enqueued");
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "invalid_job", "%s",
                                 err);
    }
    res = spec_enqueue_results(e, &n, &many);
    for (size_t i = 0; i < n; i++)
        fresh = fresh || !res[i].duplicate;
    view_enqueued_text(res, n, many, &out);
    spec_enqueue_free(e);
    return reply_text(c, fresh ? MHD_HTTP_CREATED : MHD_HTTP_OK, out.p,
                      out.len);
}

/* ---- checking jobs before paying (stepq check) ---------------------- */

/* The body is checked as POST /v1/jobs would take it, and more (spec_check:
 * tiers, environment variables); nothing is written or sent. 200 with the
 * report, or 400 invalid_job with the message. */
static enum MHD_Result
jobs_check(const struct serve_opts *o, struct MHD_Connection *c,
           const char *body, size_t len)
{
    cJSON *report = NULL;
    char err[1024];

    if (body == NULL || len == 0)
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "invalid_job",
                                 "the body is empty: send a job, an array of "
                                 "jobs or JSON lines");
    if (spec_check(body, len, o->cfg, NULL, &report, err, sizeof(err)) != 0)
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "invalid_job", "%s",
                                 err);
    return serve_reply_json(c, MHD_HTTP_OK, report);
}

static enum MHD_Result
jobs_list(const struct serve_opts *o, struct MHD_Connection *c)
{
    const char *state = serve_arg(c, "state"), *limit = serve_arg(c, "limit");
    const char *after = serve_arg(c, "after");
    enum q_job_state st = Q_JOB_QUEUED;
    int64_t lim = JOBS_PAGE, from = 0;
    cJSON *out = NULL;
    int rc;

    if (state != NULL && strcmp(state, "all") != 0 &&
        q_job_state_from_name(state, &st) != 0)
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request",
                                 "state must be queued, running, succeeded, "
                                 "failed, parked, cancelled or all");
    if (limit != NULL &&
        ((lim = serve_whole(limit, strlen(limit))) < 1 || lim > JOBS_PAGE_MAX))
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request",
                                 "limit must be 1 to %d", JOBS_PAGE_MAX);
    if (after != NULL && (from = serve_whole(after, strlen(after))) < 0)
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request",
                                 "after must be a job id");
    bool one = state != NULL && strcmp(state, "all") != 0;
    rc = view_jobs(o->db, one ? (int)st : -1, from, (size_t)lim, &out);
    if (rc != 0)
        return serve_storage_error(c, rc, "list jobs");
    return serve_reply_json(c, MHD_HTTP_OK, out);
}

enum MHD_Result
serve_job_show(const struct serve_opts *o, struct MHD_Connection *c, int64_t id)
{
    cJSON *out = NULL;
    int rc = view_job(o->db, id, &out);

    if (rc == -ENOENT)
        return serve_reply_error(c, MHD_HTTP_NOT_FOUND, "not_found",
                                 "no job %lld", (long long)id);
    if (rc != 0)
        return serve_storage_error(c, rc, "read the job");
    return serve_reply_json(c, MHD_HTTP_OK, out);
}

static enum MHD_Result
jobs_cancel(const struct serve_opts *o, const struct serve_caller *who,
            struct MHD_Connection *c, int64_t id)
{
    struct park_audit a = {0};
    cJSON *out;
    int rc;

    /* Its open park items close with it (resolution "cancel"). */
    serve_audit_by(who, serve_store_now(o), &a);
    rc = park_cancel_job_audited(
        o->db, id, who->mode == SERVE_NAMED ? who->op.name : NULL, &a);

    if (rc == -ENOENT)
        return serve_reply_error(c, MHD_HTTP_NOT_FOUND, "not_found",
                                 "no job %lld", (long long)id);
    if (rc == -EALREADY)
        return serve_reply_error(c, MHD_HTTP_CONFLICT, "conflict",
                                 "job %lld has already ended", (long long)id);
    if (rc != 0)
        return serve_storage_error(c, rc, "cancel the job");
    out = cJSON_CreateObject();
    cJSON_AddNumberToObject(out, "id", (double)id);
    cJSON_AddStringToObject(out, "state", "cancelled");
    return serve_reply_json(c, MHD_HTTP_OK, out);
}

/* ---- jobs retry: POST /v1/jobs/ID/retry ------------------------------ */

/* Reads a retry's body ({"from", "by", "force_side_effects"}, each
 * optional; no body at all is {}) into r, borrowing from *doc. */
static int
read_retry(const char *body, size_t len, cJSON **doc, struct park_retry *r,
           char *err, size_t errlen)
{
    static const char *const fields[] = {"from", "by", "force_side_effects",
                                         NULL};

    *doc = len == 0 ? cJSON_CreateObject() : NULL;
    if (*doc == NULL &&
        json_parse_whole(body, len, "the body is ", doc, err, errlen) != 0)
        return -EINVAL;
    if (json_check_object(*doc, "", fields, err, errlen) != 0 ||
        json_get_string(*doc, "from", false, "", &r->from, err, errlen) ||
        json_get_string(*doc, "by", false, "", &r->by, err, errlen) ||
        json_get_bool(*doc, "force_side_effects", "", &r->force_side_effects,
                      err, errlen))
        return -EINVAL;
    return 0;
}

/* As `jobs retry`: who asked is the named operator (a body's "by" must
 * be its name), else the body's "by", else "api". */
static enum MHD_Result
jobs_retry(const struct serve_opts *o, const struct serve_caller *who,
           struct MHD_Connection *c, int64_t id, const char *body, size_t len)
{
    struct park_retry r = {.by =
                               who->mode == SERVE_NAMED ? who->op.name : "api"};
    struct park_retried done;
    struct park_audit a = {0};
    enum MHD_Result ret;
    cJSON *doc = NULL, *out;
    char err[512];
    int rc = read_retry(body, len, &doc, &r, err, sizeof(err));

    if (rc == 0 && serve_by_refused(who, r.by, c, &ret)) {
        cJSON_Delete(doc);
        return ret;
    }
    if (rc == 0) {
        r.now = serve_store_now(o);
        r.lease_ms = (int64_t)(o->cfg ? o->cfg->worker.lease_s * 1000 : 0);
        serve_audit_by(who, r.now, &a);
        rc = park_retry_job_audited(o->db, id, &r, &done, err, sizeof(err), &a);
    }
    out = rc == 0 ? park_retried_json(&done, r.by) : NULL;
    cJSON_Delete(doc);
    if (rc == -EINVAL)
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request", "%s",
                                 err);
    if (rc == -ENOENT)
        return serve_reply_error(c, MHD_HTTP_NOT_FOUND, "not_found", "%s", err);
    if (rc == -EALREADY)
        return serve_reply_error(c, MHD_HTTP_CONFLICT, "conflict", "%s", err);
    if (rc != 0)
        return serve_storage_error(c, rc, "retry the job");
    return serve_reply_json(c, MHD_HTTP_OK, out);
}

/* The morning report, as `stepq report --json --since S` (24h unless
 * given). */
static enum MHD_Result
report(const struct serve_opts *o, struct MHD_Connection *c)
{
    const char *since_s = serve_arg(c, "since");
    int64_t now = serve_store_now(o), since = now - 86400000;
    cJSON *out = NULL;
    int rc;

    if (since_s != NULL && clock_parse_since(since_s, now, &since) != 0)
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request",
                                 "since must be a span (90m, 24h, 7d) or an "
                                 "RFC 3339 time");
    if ((rc = view_report(o->db, o->cfg, since, now, &out)) != 0)
        return serve_storage_error(c, rc, "read the report");
    return serve_reply_json(c, MHD_HTTP_OK, out);
}

/* ---- the rest -------------------------------------------------------- */

static enum MHD_Result
tiers(const struct serve_opts *o, struct MHD_Connection *c)
{
    const char *failed = "?";
    cJSON *out = NULL;
    int rc = view_tiers(o->db, o->cfg, serve_store_now(o), &out, &failed);

    if (rc != 0) {
        char doing[128];
        snprintf(doing, sizeof(doing), "read the state of tier %s", failed);
        return serve_storage_error(c, rc, doing);
    }
    return serve_reply_json(c, MHD_HTTP_OK, out);
}

static enum MHD_Result
status(const struct serve_opts *o, struct MHD_Connection *c, bool health)
{
    cJSON *out = NULL;
    int rc = view_status(o->db, &out);

    if (health) {
        cJSON_Delete(out);
        out = cJSON_CreateObject();
        cJSON_AddBoolToObject(out, "ok", rc == 0);
        return serve_reply_json(
            c, rc == 0 ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, out);
    }
    if (rc != 0)
        return serve_storage_error(c, rc, "read the status");
    return serve_reply_json(c, MHD_HTTP_OK, out);
}

enum MHD_Result
serve_route(const struct serve_opts *o, const struct serve_caller *who,
            struct MHD_Connection *c, const char *method, const char *url,
            const char *body, size_t len)
{
    enum serve_route_id r;
    int64_t id = 0;
    const struct serve_asset *page = NULL;
    struct query_check q;
    int rc = serve_match(method, url, &r, &id, &page);

    if (rc == -ENOENT)
        return serve_reply_error(c, MHD_HTTP_NOT_FOUND, "not_found",
                                 "no such path: %s", url);
    if (rc != 0)
        return not_allowed(c, method, url);
    if (r != R_PAGE && query_problem(c, r, &q) != NULL)
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request", "%s",
                                 q.problem);
    if (!serve_role_allows(who, r, method))
        return serve_reply_error(c, MHD_HTTP_FORBIDDEN, "forbidden",
                                 "operator %s is a %s: %s %s is not allowed",
                                 who->op.name, park_role_name(who->op.role),
                                 method, url);
    switch (r) {
    case R_PAGE:
        return serve_reply_asset(c, page);
    case R_HEALTH:
        return status(o, c, true);
    case R_STATUS:
        return status(o, c, false);
    case R_TIERS:
        return tiers(o, c);
    case R_JOBS_LIST:
        return jobs_list(o, c);
    case R_JOBS_ADD:
        return jobs_enqueue(o, who, c, body, len);
    case R_JOBS_CHECK:
        return jobs_check(o, c, body, len);
    case R_JOB:
        return serve_arg(c, "wait") != NULL ? serve_wait_job(c, id)
                                            : serve_job_show(o, c, id);
    case R_JOB_CANCEL:
        return jobs_cancel(o, who, c, id);
    case R_PARK_LIST:
        return serve_park_list(o, c);
    case R_PARK_RESOLVE_ALL:
        return serve_park_resolve_all(o, who, c, body, len);
    case R_PARK:
        return serve_park_show(o, c, id);
    case R_PARK_RESOLVE:
        return serve_park_resolve_one(o, who, c, id, body, len);
    case R_METRICS:
        return serve_metrics(o, c, serve_store_now(o));
    case R_REPORT:
        return report(o, c);
    case R_JOB_RETRY:
        return jobs_retry(o, who, c, id, body, len);
    case R_ME:
        return serve_me(who, c);
    case R_AUDIT:
        return serve_audit(o, c, serve_store_now(o));
    }
    return MHD_NO; /* not reached: every route is above */
}

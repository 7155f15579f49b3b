/* api_park.c: the routes of park items: list, show, resolve one, resolve
 * every item a filter matches, each through park/'s one set of rules (a
 * tool call's item through park/tool.c's), with its audit row. */
#include "serve/internal.h"

#include <errno.h>
#include <string.h>

#include "common/json.h"
#include "park/park.h"
#include "queue/park.h"
#include "view/view.h"

/* Adds "job_name" and "job_key" to each item of list (the park items of
 * items, in order), so that the page can search them: one read of a job
 * for each run of items of one job. */
static int
add_job_names(q_db *db, const struct q_park_item *items, size_t n, cJSON *list)
{
    struct q_job job = {0};
    int64_t have = 0;
    cJSON *o = list->child;
    int rc = 0;

    for (size_t i = 0; i < n && o != NULL; i++, o = o->next) {
        if (items[i].job_id != have) {
            q_job_cleanup(&job);
            /* A job pruned since the list was read has no name. */
            if ((rc = q_job_get(db, items[i].job_id, &job)) == -ENOENT)
                rc = 0;
            else if (rc != 0)
                break;
            have = items[i].job_id;
        }
        json_add_string(o, "job_name", job.name);
        json_add_string(o, "job_key", job.key);
    }
    q_job_cleanup(&job);
    return rc;
}

enum MHD_Result
serve_park_list(const struct serve_opts *o, struct MHD_Connection *c)
{
    const char *state = serve_arg(c, "state"), *job = serve_arg(c, "job_id");
    const char *names = serve_arg(c, "job_names");
    struct q_park_filter f = {.reason = serve_arg(c, "reason"),
                              .tier = serve_arg(c, "tier")};
    struct q_park_item *items = NULL;
    size_t n = 0;
    int rc;

    if (state != NULL && strcmp(state, "open") != 0 &&
        strcmp(state, "all") != 0)
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request",
                                 "state must be open or all");
    if (job != NULL && (f.job_id = serve_whole(job, strlen(job))) < 1)
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request",
                                 "job_id must be a job id");
    if (names != NULL && strcmp(names, "true") != 0 &&
        strcmp(names, "false") != 0)
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request",
                                 "job_names must be true or false");
    f.all = state != NULL && strcmp(state, "all") == 0;
    /* The items and their jobs' names from one moment, and one read lock
     * for them all instead of one a job (10,000 for as many items). */
    if ((rc = q_read_begin(o->db)) != 0)
        return serve_storage_error(c, rc, "list park items");
    if ((rc = q_park_list(o->db, &f, &items, &n)) != 0) {
        q_read_end(o->db);
        return serve_storage_error(c, rc, "list park items");
    }
    cJSON *out = view_park_list(items, n);
    /* The page's search reads them; by default the list is park list's. */
    if (names != NULL && strcmp(names, "true") == 0)
        rc = add_job_names(o->db, items, n, out);
    q_read_end(o->db);
    q_park_items_free(items, n);
    if (rc != 0) {
        cJSON_Delete(out);
        return serve_storage_error(c, rc, "read the park items' jobs");
    }
    return serve_reply_json(c, MHD_HTTP_OK, out);
}

enum MHD_Result
serve_park_show(const struct serve_opts *o, struct MHD_Connection *c,
                int64_t id)
{
    cJSON *out = NULL;
    int rc = view_park_item(o->db, id, &out);

    if (rc == -ENOENT)
        return serve_reply_error(c, MHD_HTTP_NOT_FOUND, "not_found",
                                 "no park item %lld", (long long)id);
    if (rc != 0)
        return serve_storage_error(c, rc, "read the park item");
    return serve_reply_json(c, MHD_HTTP_OK, out);
}

/* Reads a resolution's body (all: a bulk one, with its filter) into *d
 * and *f, *doc holding the text they borrow, as of the store's now; a
 * named operator's "by" is its name (a body without one takes it). True
 * when it was refused (a bad body, or a "by" that is not the caller's):
 * *ret is the answer, and nothing is left to free. */
static bool
decision_refused(const struct serve_opts *o, const struct serve_caller *who,
                 struct MHD_Connection *c, const char *body, size_t len,
                 bool all, cJSON **doc, struct park_decision *d,
                 struct q_park_filter *f, enum MHD_Result *ret)
{
    char err[256];

    *d = (struct park_decision){.by = who->mode == SERVE_NAMED ? who->op.name
                                                               : NULL};
    if (serve_read_decision(o->cfg, body, len, all, doc, d, f, err,
                            sizeof(err)) != 0) {
        *ret = serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request", "%s",
                                 err);
        return true;
    }
    if (serve_by_refused(who, d->by, c, ret)) {
        cJSON_Delete(*doc);
        *doc = NULL;
        return true;
    }
    d->now = serve_store_now(o);
    return false;
}

enum MHD_Result
serve_park_resolve_one(const struct serve_opts *o,
                       const struct serve_caller *who, struct MHD_Connection *c,
                       int64_t id, const char *body, size_t len)
{
    struct park_decision d;
    struct q_park_filter f = {0};
    struct park_audit a = {0};
    enum MHD_Result ret;
    cJSON *doc = NULL, *out;
    char err[256];
    int rc;

    if (decision_refused(o, who, c, body, len, false, &doc, &d, &f, &ret))
        return ret;
    /* A tool call's item: approve/reject only there, edited arguments
     * checked against the tool's parameters (park/tool.c). */
    if ((rc = park_tool_check(o->db, id, &d, err, sizeof(err))) == -EINVAL) {
        cJSON_Delete(doc);
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request",
                                 "park item %lld: %s", (long long)id, err);
    }
    if (rc == 0) {
        serve_audit_by(who, d.now, &a);
        rc = park_resolve_audited(o->db, id, &d, &a);
    }
    cJSON_Delete(doc);
    if (rc == -ENOENT)
        return serve_reply_error(c, MHD_HTTP_NOT_FOUND, "not_found",
                                 "no park item %lld", (long long)id);
    if (rc == -EALREADY)
        return serve_conflict_resolved(o, c, id);
    if (rc == -EINVAL)
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request",
                                 "tier: park item %lld is an http step's, "
                                 "which has no tiers",
                                 (long long)id);
    if (rc != 0)
        return serve_storage_error(c, rc, "resolve the park item");
    out = cJSON_CreateObject();
    cJSON_AddNumberToObject(out, "id", (double)id);
    cJSON_AddStringToObject(out, "resolution", park_how_name(d.how));
    return serve_reply_json(c, MHD_HTTP_OK, out);
}

enum MHD_Result
serve_park_resolve_all(const struct serve_opts *o,
                       const struct serve_caller *who, struct MHD_Connection *c,
                       const char *body, size_t len)
{
    struct park_decision d;
    struct q_park_filter f = {0};
    struct park_audit a = {0};
    enum MHD_Result ret;
    cJSON *doc = NULL, *out;
    int64_t n = 0;
    int rc;

    if (decision_refused(o, who, c, body, len, true, &doc, &d, &f, &ret))
        return ret;
    serve_audit_by(who, d.now, &a);
    rc = park_resolve_matching_audited(o->db, &f, &d, &n, &a);
    cJSON_Delete(doc);
    if (rc != 0)
        return serve_storage_error(c, rc, "resolve the park items");
    out = cJSON_CreateObject();
    cJSON_AddNumberToObject(out, "resolved", (double)n);
    cJSON_AddStringToObject(out, "resolution", park_how_name(d.how));
    return serve_reply_json(c, MHD_HTTP_OK, out);
}

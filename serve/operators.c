/* operators.c: what `stepq serve` does with who made a request: the
 * routes GET /v1/me and GET /v1/audit, the audit row's who and source,
 * a resolution's "by" held to the operator's name, and the 409 of a
 * resolution that lost a race, naming who won it. */
#include "serve/internal.h"

#include <errno.h>
#include <string.h>

#include "common/clock.h"
#include "queue/audit.h"
#include "queue/park.h"
#include "view/view.h"

static const char *
caller_name(const struct serve_caller *who)
{
    return who->mode == SERVE_NAMED    ? who->op.name
           : who->mode == SERVE_SHARED ? "token"
                                       : "anonymous";
}

void
serve_audit_by(const struct serve_caller *who, int64_t now,
               struct park_audit *a)
{
    a->who = caller_name(who);
    a->source = who->addr;
    a->now = now;
}

bool
serve_by_refused(const struct serve_caller *who, const char *by,
                 struct MHD_Connection *c, enum MHD_Result *ret)
{
    if (who->mode != SERVE_NAMED || strcmp(by, who->op.name) == 0)
        return false;
    *ret = serve_reply_error(c, MHD_HTTP_FORBIDDEN, "by_mismatch",
                             "by is %s, but this token is operator %s's: "
                             "leave by out, or give your own name",
                             by, who->op.name);
    return true;
}

enum MHD_Result
serve_conflict_resolved(const struct serve_opts *o, struct MHD_Connection *c,
                        int64_t id)
{
    struct q_park_item it = {0};
    enum MHD_Result ret;

    if (q_park_get(o->db, id, &it) == 0 && it.resolved_by != NULL)
        ret = serve_reply_error(c, MHD_HTTP_CONFLICT, "conflict",
                                "park item %lld is already resolved by %s "
                                "(%s)",
                                (long long)id, it.resolved_by,
                                it.resolution ? it.resolution : "?");
    else
        ret = serve_reply_error(c, MHD_HTTP_CONFLICT, "conflict",
                                "park item %lld is already resolved (or its "
                                "job is no longer parked)",
                                (long long)id);
    q_park_item_cleanup(&it);
    return ret;
}

enum MHD_Result
serve_me(const struct serve_caller *who, struct MHD_Connection *c)
{
    static const char *const modes[] = {"none", "token", "operators"};
    cJSON *o = cJSON_CreateObject();

    if (who->mode == SERVE_NAMED)
        cJSON_AddStringToObject(o, "name", who->op.name);
    else
        cJSON_AddNullToObject(o, "name");
    cJSON_AddStringToObject(o, "role", park_role_name(who->op.role));
    cJSON_AddStringToObject(o, "mode", modes[who->mode]);
    return serve_reply_json(c, MHD_HTTP_OK, o);
}

enum MHD_Result
serve_audit(const struct serve_opts *o, struct MHD_Connection *c, int64_t now)
{
    const char *since =
        MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "since");
    struct q_audit_filter f = {.since = now - 86400000};
    cJSON *out = NULL;

    if (since != NULL && clock_parse_since(since, now, &f.since) != 0)
        return serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request",
                                 "since must be a span (90m, 24h, 7d) or an "
                                 "RFC 3339 time");
    if (view_audit(o->db, &f, &out) != 0)
        return serve_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable",
                                 "cannot read the audit trail; try again");
    return serve_reply_json(c, MHD_HTTP_OK, out);
}

/* tool.c: the park items of an agent step's tool calls (worker/agent*.c):
 * a call waiting for approval, a question for a human, a side effect in
 * doubt. Their request shows the tool, the call id, the arguments and
 * the tool's parameters; an operator approves (the arguments as they are,
 * or edited and checked against the parameters), rejects (the note is the
 * model's result), or answers with done (the output is the result). The
 * worker reads the resolution back from the item.
 */
#include "park/park.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "park/internal.h"
#include "queue/park.h"
#include "spec/spec.h"

cJSON *
park__tool_request(const struct q_park_item *it)
{
    cJSON *req = it->request ? cJSON_Parse(it->request) : NULL;

    if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(req, "call_id")) &&
        cJSON_IsString(cJSON_GetObjectItemCaseSensitive(req, "tool")))
        return req;
    cJSON_Delete(req);
    return NULL;
}

/* Checks d against item it (req: its tool request, or NULL when it is
 * not a tool call's). */
static int
check_item(const struct q_park_item *it, const cJSON *req,
           const struct park_decision *d, char *err, size_t len)
{
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(req, "parameters");
    cJSON *args;
    int rc;

    (void)it;
    if ((d->how == PARK_APPROVE || d->how == PARK_REJECT) && req == NULL) {
        snprintf(err, len,
                 "approve and reject go with a tool call's park item "
                 "(approval, question or in_doubt of an agent step)");
        return -EINVAL;
    }
    if (d->args == NULL)
        return 0;
    if ((args = cJSON_Parse(d->args)) == NULL || !cJSON_IsObject(args)) {
        cJSON_Delete(args);
        snprintf(err, len, "args: not a JSON object");
        return -EINVAL;
    }
    rc = params != NULL ? spec_schema_validate(params, args, "args", err, len)
                        : 0;
    cJSON_Delete(args);
    return rc;
}

int
park_tool_check(q_db *db, int64_t id, const struct park_decision *d, char *err,
                size_t len)
{
    struct q_park_item it;
    cJSON *req;
    int rc = q_park_get(db, id, &it);

    if (rc != 0)
        return rc;
    req = park__tool_request(&it);
    rc = check_item(&it, req, d, err, len);
    cJSON_Delete(req);
    q_park_item_cleanup(&it);
    return rc;
}

int
park__tool_decision(const struct q_park_item *it, const struct park_decision *d,
                    struct park_decision *eff, const char **answer)
{
    char err[256];
    cJSON *req = park__tool_request(it);
    int rc = check_item(it, req, d, err, sizeof(err));

    *eff = *d;
    *answer = NULL;
    if (rc == 0 && req != NULL &&
        (d->how == PARK_APPROVE || d->how == PARK_REJECT ||
         d->how == PARK_DONE)) {
        /* The step goes on where it stood: the worker reads the
         * resolution back from the item. */
        *answer = d->how == PARK_APPROVE ? d->args
                  : d->how == PARK_DONE  ? (d->output ? d->output : "")
                                         : NULL;
        eff->how = PARK_RETRY;
        eff->tier = NULL;
    }
    cJSON_Delete(req);
    return rc;
}

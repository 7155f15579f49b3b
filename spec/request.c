/* request.c: a chat step's own request checked (docs/reference.md "Job
 * file"): an object with messages that each have a role, none of the
 * options stepq cannot honour as a job's, and its "degrade". Unknown
 * fields of the request are the endpoint's: only these are read.
 */
#include "spec/internal.h"

#include <stdbool.h>
#include <stdint.h>

#include "common/json.h"

static const char *const degrade_keys[] = {"max_tokens", "drop_tools",
                                           "keep_last_messages", NULL};

/* Options of a chat body stepq cannot honour as a job's: a stream is the
 * tier's or the step's to ask for (their "stream", which stepq reads as it
 * comes), and stepq keeps an answer's first choice, so several choices
 * would pay for answers nobody reads. */
static int
check_honoured(const cJSON *req, const char *path, char *err, size_t len)
{
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(req, "stream");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(req, "n");
    char p[PATH_LEN];

    if (stream != NULL && !cJSON_IsFalse(stream))
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "request.stream"),
                         "a stream is asked for by the step's \"stream\" "
                         "or the tier's, not in the request: leave it out "
                         "(or false)");
    if (n != NULL && !(cJSON_IsNumber(n) && n->valuedouble == 1))
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "request.n"),
                         "stepq keeps one choice of an answer: leave \"n\" "
                         "out (or 1)");
    return 0;
}

int
spec__check_request(const cJSON *req, const char *path, char *err, size_t len)
{
    char p[PATH_LEN], q[PATH_LEN];
    const cJSON *msgs;
    int rc, i = 0;

    if (!cJSON_IsObject(req))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "request"),
                         "must be an object");
    if ((rc = check_honoured(req, path, err, len)) != 0)
        return rc;
    msgs = cJSON_GetObjectItemCaseSensitive(req, "messages");
    if (msgs == NULL || !cJSON_IsArray(msgs) || msgs->child == NULL)
        return json_fail(
            err, len, json_path_key(p, sizeof(p), path, "request.messages"),
            msgs == NULL ? "missing" : "must be a non-empty array");
    for (const cJSON *m = msgs->child; m != NULL; m = m->next, i++) {
        if (cJSON_IsObject(m) &&
            cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "role")))
            continue;
        json_path_key(p, sizeof(p), path, "request.messages");
        return json_fail(err, len, json_path_index(q, sizeof(q), p, i),
                         cJSON_IsObject(m) ? "needs a string \"role\""
                                           : "must be an object");
    }
    return 0;
}

int
spec__check_degrade(const cJSON *d, const char *path, char *err, size_t len)
{
    int64_t n = 0;
    bool b = false;
    int rc;

    if ((rc = json_check_object(d, path, degrade_keys, err, len)) ||
        (rc = json_get_int(d, "max_tokens", 1, 10000000, path, &n, err, len)) ||
        (rc = json_get_bool(d, "drop_tools", path, &b, err, len)) ||
        (rc = json_get_int(d, "keep_last_messages", 1, 100000, path, &n, err,
                           len)))
        return rc;
    return 0;
}

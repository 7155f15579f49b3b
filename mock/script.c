/* script.c: parsing and validation of mock scripts (format in mock.h). */
#include "mock/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/httptext.h"
#include "common/json.h"
#include "common/xalloc.h"
#include "mock/batch_internal.h"

#define MAX_MS       3600000   /* one hour */
#define MAX_OVERSIZE 268435456 /* 256 MiB */

#define ROUTE_KEYS                                                             \
    "model", "content", "finish_reason", "completion_tokens", "latency_ms",    \
        "jitter_ms", "rpm", "rpm_window_ms", "allowance_tokens",               \
        "context_tokens", "storm", "answers", "loop", "limit",                 \
        "require_headers", "require_query", "exact", "unauthorized", "batch",  \
        "tool_turns", "echo_tool_results", "api"

static const char *const top_keys[] = {"seed", "routes", ROUTE_KEYS, NULL};
static const char *const route_keys[] = {"path", ROUTE_KEYS, NULL};
static const char *const storm_keys[] = {"status", "requests", "seconds",
                                         "after", NULL};
static const char *const answer_keys[] = {
    "status",  "headers",        "body",
    "content", "finish_reason",  "delay_ms",
    "fault",   "oversize_bytes", "completion_tokens",
    "count",   "tool_calls",     NULL};

static const char *const fault_names[] = {
    [MOCK_FAULT_NONE] = NULL,
    [MOCK_FAULT_HANG] = "hang",
    [MOCK_FAULT_CLOSE] = "close",
    [MOCK_FAULT_CLOSE_MID_BODY] = "close_mid_body",
    [MOCK_FAULT_TRUNCATE] = "truncate",
    [MOCK_FAULT_INVALID_JSON] = "invalid_json",
    [MOCK_FAULT_EMPTY] = "empty",
    [MOCK_FAULT_DRIP] = "drip",
    [MOCK_FAULT_BAD_CHUNKED] = "bad_chunked",
    [MOCK_FAULT_BAD_STATUS] = "bad_status",
    [MOCK_FAULT_HUGE_HEADERS] = "huge_headers",
    [MOCK_FAULT_STALL] = "stall",
};

const char *
mock_fault_name(enum mock_fault f)
{
    if ((size_t)f >= STEPQ_ARRAY_LEN(fault_names))
        return NULL;
    return fault_names[f];
}

/* text_or_json copies a member that may be a string (taken as is) or any
 * other JSON value (serialized). Absent leaves *out NULL. */
static int
text_or_json(const cJSON *obj, const char *key, const char *path, char **out,
             char *err, size_t len)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    char p[512];

    if (v == NULL)
        return 0;
    if (cJSON_IsNull(v))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, key),
                         "must be a string or a JSON value, not null");
    if (cJSON_IsString(v))
        *out = xstrdup(v->valuestring);
    else
        *out = json_print(v);
    return 0;
}

static int
dup_string(const cJSON *obj, const char *key, const char *path, char **out,
           char *err, size_t len)
{
    const char *s = NULL;
    int rc = json_get_string(obj, key, false, path, &s, err, len);

    if (rc == 0 && s != NULL)
        *out = xstrdup(s);
    return rc;
}

/* parse_pairs reads the object member key of obj: names and string values
 * (header names when headers, which must be tokens). Response headers
 * (answer) may not set what the mock frames the answer with. */
static int
parse_pairs(const cJSON *obj, const char *key, const char *path, bool headers,
            bool answer, struct mock_header **out, size_t *nout, char *err,
            size_t len)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(obj, key);
    char p[512], q[512];
    size_t n = 0;

    if (h == NULL)
        return 0;
    json_path_key(p, sizeof(p), path, key);
    if (!cJSON_IsObject(h))
        return json_fail(err, len, p, "must be an object of strings");
    n = (size_t)cJSON_GetArraySize(h);
    *out = xcalloc(n ? n : 1, sizeof(**out));
    for (const cJSON *it = h->child; it != NULL; it = it->next) {
        json_path_key(q, sizeof(q), p, it->string);
        if (headers && !httptext_is_token(it->string))
            return json_fail(err, len, q, "not a valid header name");
        if (!headers && it->string[0] == '\0')
            return json_fail(err, len, q, "must not be empty");
        if (!cJSON_IsString(it))
            return json_fail(err, len, q, "must be a string");
        if (strpbrk(it->valuestring, "\r\n") != NULL)
            return json_fail(err, len, q, "must not contain CR or LF");
        if (answer && (strcasecmp(it->string, "content-length") == 0 ||
                       strcasecmp(it->string, "transfer-encoding") == 0 ||
                       strcasecmp(it->string, "connection") == 0))
            return json_fail(err, len, q, "is set by the mock");
        (*out)[*nout].name = xstrdup(it->string);
        (*out)[*nout].value = xstrdup(it->valuestring);
        (*nout)++;
    }
    return 0;
}

static int
parse_headers(const cJSON *obj, const char *path, struct mock_answer *a,
              char *err, size_t len)
{
    return parse_pairs(obj, "headers", path, true, true, &a->headers,
                       &a->nheaders, err, len);
}

static int
parse_fault(const cJSON *obj, const char *path, enum mock_fault *out, char *err,
            size_t len)
{
    const char *s = NULL;
    char p[512];
    int rc = json_get_string(obj, "fault", false, path, &s, err, len);

    if (rc != 0 || s == NULL)
        return rc;
    for (size_t i = 1; i < STEPQ_ARRAY_LEN(fault_names); i++) {
        if (strcmp(s, fault_names[i]) == 0) {
            *out = (enum mock_fault)i;
            return 0;
        }
    }
    return json_fail(err, len, json_path_key(p, sizeof(p), path, "fault"),
                     "must be one of hang, close, close_mid_body, truncate, "
                     "invalid_json, empty, drip, bad_chunked, huge_headers, "
                     "bad_status (got \"%s\")",
                     s);
}

/* answer_fits refuses fields an answer could not carry out: a body for a
 * status that has none, and padding of a body the mock does not make. */
static int
answer_fits(const struct mock_answer *a, const char *path, char *err,
            size_t len)
{
    char p[256];
    bool bodiless = a->status == 204 || a->status == 304;
    bool made = a->body == NULL && (a->status == 0 || a->status < 300);

    if (bodiless && (a->body != NULL || a->content != NULL))
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path,
                                       a->body != NULL ? "body" : "content"),
                         "a %d answer has no body", a->status);
    if (a->tool_calls != NULL && !made)
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "tool_calls"),
                         "go into the chat answer the mock makes, not a "
                         "\"body\" given or a %d",
                         a->body != NULL ? 200 : a->status);
    if (a->oversize > 0 && (bodiless || !made))
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "oversize_bytes"),
                         "pads the body the mock makes for a 2xx answer, "
                         "not a \"body\" given or a %d",
                         a->body != NULL ? 200 : a->status);
    return 0;
}

static int
parse_answer(const cJSON *obj, const char *path, struct mock_answer *a,
             char *err, size_t len)
{
    int64_t status = 0;
    int rc;

    a->delay_ms = -1;
    a->oversize = -1;
    a->completion_tokens = -1;
    a->count = 1;
    if ((rc = json_check_object(obj, path, answer_keys, err, len)) != 0 ||
        (rc = json_get_int(obj, "status", 200, 599, path, &status, err, len)) !=
            0 ||
        (rc = parse_headers(obj, path, a, err, len)) != 0 ||
        (rc = text_or_json(obj, "body", path, &a->body, err, len)) != 0 ||
        (rc = text_or_json(obj, "content", path, &a->content, err, len)) != 0 ||
        (rc = dup_string(obj, "finish_reason", path, &a->finish_reason, err,
                         len)) != 0 ||
        (rc = json_get_int(obj, "delay_ms", 0, MAX_MS, path, &a->delay_ms, err,
                           len)) != 0 ||
        (rc = parse_fault(obj, path, &a->fault, err, len)) != 0 ||
        (rc = json_get_int(obj, "oversize_bytes", 1, MAX_OVERSIZE, path,
                           &a->oversize, err, len)) != 0 ||
        (rc = json_get_int(obj, "completion_tokens", 0, 1000000000, path,
                           &a->completion_tokens, err, len)) != 0 ||
        (rc = json_get_int(obj, "count", 1, 1000000, path, &a->count, err,
                           len)) != 0 ||
        (rc = mock__tools_parse(obj, path, false, &a->tool_calls, err, len)))
        return rc;
    a->status = (int)status;
    return answer_fits(a, path, err, len);
}

static int
parse_storm(const cJSON *obj, const char *path, struct mock_route *r, char *err,
            size_t len)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(obj, "storm");
    int64_t status = 503;
    double seconds = 0;
    char p[512];
    int rc;

    if (s == NULL)
        return 0;
    json_path_key(p, sizeof(p), path, "storm");
    if ((rc = json_check_object(s, p, storm_keys, err, len)) != 0 ||
        (rc = json_get_int(s, "status", 400, 599, p, &status, err, len)) != 0 ||
        (rc = json_get_int(s, "requests", 1, 1000000000, p, &r->storm_requests,
                           err, len)) != 0 ||
        (rc = json_get_number(s, "seconds", 0.001, 86400, p, &seconds, err,
                              len)) != 0 ||
        (rc = json_get_int(s, "after", 0, 1000000000, p, &r->storm_after, err,
                           len)) != 0)
        return rc;
    if (r->storm_requests == 0 && seconds == 0)
        return json_fail(err, len, p, "needs \"requests\" or \"seconds\"");
    r->storm_status = (int)status;
    r->storm_ms = (int64_t)(seconds * 1000 + 0.5);
    if (seconds > 0 && r->storm_ms == 0)
        r->storm_ms = 1;
    return 0;
}

static int
parse_answers(const cJSON *obj, const char *path, struct mock_route *r,
              char *err, size_t len)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(obj, "answers");
    char p[512], q[512];
    int i = 0, rc;

    if (arr == NULL)
        return 0;
    json_path_key(p, sizeof(p), path, "answers");
    if (!cJSON_IsArray(arr))
        return json_fail(err, len, p, "must be an array of answers");
    r->nanswers = 0;
    r->answers =
        xcalloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*r->answers));
    for (const cJSON *it = arr->child; it != NULL; it = it->next, i++) {
        json_path_index(q, sizeof(q), p, i);
        r->nanswers++;
        if ((rc = parse_answer(it, q, &r->answers[i], err, len)) != 0)
            return rc;
    }
    return 0;
}

/* parse_unauthorized reads the answer to a request that lacks a required
 * header (default status 401). */
static int
parse_unauthorized(const cJSON *obj, const char *path, struct mock_route *r,
                   char *err, size_t len)
{
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(obj, "unauthorized");
    char p[512];
    int rc;

    if (u == NULL)
        return 0;
    r->unauthorized = xcalloc(1, sizeof(*r->unauthorized));
    json_path_key(p, sizeof(p), path, "unauthorized");
    if ((rc = parse_answer(u, p, r->unauthorized, err, len)) != 0)
        return rc;
    if (r->unauthorized->status == 0)
        r->unauthorized->status = 401;
    return 0;
}

/* "api": "openai" (the default), "anthropic" or "gemini". */
static int
parse_api(const cJSON *obj, const char *path, struct mock_route *r, char *err,
          size_t len)
{
    static const char *const names[] = {[MOCK_API_OPENAI] = "openai",
                                        [MOCK_API_ANTHROPIC] = "anthropic",
                                        [MOCK_API_GEMINI] = "gemini"};
    const char *api = NULL;
    char p[512];
    int rc;

    if ((rc = json_get_string(obj, "api", false, path, &api, err, len)) != 0 ||
        api == NULL)
        return rc;
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(names); i++) {
        if (strcmp(api, names[i]) == 0) {
            r->api = (enum mock_api)i;
            return 0;
        }
    }
    return json_fail(err, len, json_path_key(p, sizeof(p), path, "api"),
                     "must be openai, anthropic or gemini");
}

static int
parse_route(const cJSON *obj, const char *path, const char *const *keys,
            struct mock_route *r, char *err, size_t len)
{
    const char *rpath = NULL;
    int64_t rpm = 0, rpm_window_ms = 60000;
    char p[512];
    int rc;

    r->completion_tokens = -1;
    r->storm_start = -1;
    mock__batch_conf_init(&r->batch);
    if ((rc = json_check_object(obj, path, keys, err, len)) != 0)
        return rc;
    if (keys == route_keys) {
        if ((rc = json_get_string(obj, "path", true, path, &rpath, err, len)) !=
            0)
            return rc;
        if (rpath[0] != '/')
            return json_fail(err, len,
                             json_path_key(p, sizeof(p), path, "path"),
                             "must start with /");
        r->path = xstrdup(rpath);
        /* "/free/" and "/free" are the same prefix. */
        for (size_t n = strlen(r->path); n > 0 && r->path[n - 1] == '/'; n--)
            r->path[n - 1] = '\0';
    } else {
        r->path = xstrdup("");
    }
    if ((rc = dup_string(obj, "model", path, &r->model, err, len)) != 0 ||
        (rc = text_or_json(obj, "content", path, &r->content, err, len)) != 0 ||
        (rc = dup_string(obj, "finish_reason", path, &r->finish_reason, err,
                         len)) != 0 ||
        (rc = json_get_int(obj, "completion_tokens", 0, 1000000000, path,
                           &r->completion_tokens, err, len)) != 0 ||
        (rc = json_get_int(obj, "latency_ms", 0, MAX_MS, path, &r->latency_ms,
                           err, len)) != 0 ||
        (rc = json_get_int(obj, "jitter_ms", 0, MAX_MS, path, &r->jitter_ms,
                           err, len)) != 0 ||
        (rc = json_get_int(obj, "rpm", 1, 1000000, path, &rpm, err, len)) !=
            0 ||
        (rc = json_get_int(obj, "rpm_window_ms", 1, 86400000, path,
                           &rpm_window_ms, err, len)) != 0 ||
        (rc = mock_limit_parse(obj, path, &r->limit, err, len)) != 0 ||
        (rc = json_get_int(obj, "allowance_tokens", 1, INT64_C(1) << 50, path,
                           &r->allowance_tokens, err, len)) != 0 ||
        (rc = json_get_int(obj, "context_tokens", 1, 1000000000, path,
                           &r->context_tokens, err, len)) != 0 ||
        (rc = parse_storm(obj, path, r, err, len)) != 0 ||
        (rc = parse_answers(obj, path, r, err, len)) != 0 ||
        (rc = json_get_bool(obj, "loop", path, &r->loop, err, len)) != 0 ||
        (rc = json_get_bool(obj, "exact", path, &r->exact, err, len)) != 0 ||
        (rc = parse_pairs(obj, "require_headers", path, true, false,
                          &r->req_headers, &r->nreq_headers, err, len)) != 0 ||
        (rc = parse_pairs(obj, "require_query", path, false, false,
                          &r->req_query, &r->nreq_query, err, len)) != 0 ||
        (rc = parse_unauthorized(obj, path, r, err, len)) != 0 ||
        (rc = mock__batch_conf_parse(obj, path, &r->batch, err, len)) != 0 ||
        (rc = mock__tools_parse(obj, path, true, &r->tool_turns, err, len)) ||
        (rc = json_get_bool(obj, "echo_tool_results", path,
                            &r->echo_tool_results, err, len)))
        return rc;
    if ((rc = parse_api(obj, path, r, err, len)) != 0)
        return rc;
    if (r->exact && keys != route_keys)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "exact"),
                         "only a route of \"routes\" has a path to match");
    if (r->limit.shape != MOCK_SHAPE_NONE &&
        (rpm > 0 ||
         cJSON_GetObjectItemCaseSensitive(obj, "rpm_window_ms") != NULL))
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path,
                                       rpm > 0 ? "rpm" : "rpm_window_ms"),
                         "cannot be combined with \"limit\" (use "
                         "limit.rpm and limit.window_ms)");
    if (rpm > 0)
        mock_limit_legacy(&r->limit, rpm, rpm_window_ms);
    return 0;
}

/* parse_error names the line and column of a JSON syntax error. */
static int
parse_error(const char *text, const char *at, char *err, size_t len)
{
    int line = 1, col = 1;

    if (at == NULL)
        return json_fail(err, len, "script", "not valid JSON");
    for (const char *c = text; c < at && *c; c++) {
        if (*c == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return json_fail(err, len, "script", "not valid JSON (line %d, column %d)",
                     line, col);
}

int
mock_script_parse(const char *text, struct mock_script **out, char *err,
                  size_t len)
{
    struct mock_script *s = xcalloc(1, sizeof(*s));
    cJSON *root = NULL;
    const cJSON *routes = NULL;
    const char *end = NULL;
    int64_t seed = 1;
    char p[512], q[512];
    int rc = 0, n = 0;

    if (text == NULL)
        text = "{}";
    /* A NUL in a string would cut a path, a body or a header short. */
    if ((rc = json_text_check(text, strlen(text), err, len)) != 0)
        goto fail;
    root = cJSON_ParseWithOpts(text, &end, true);
    if (root == NULL) {
        rc = parse_error(text, end, err, len);
        goto fail;
    }
    if ((rc = json_check_object(root, "", top_keys, err, len)) != 0 ||
        (rc = json_get_int(root, "seed", 0, INT64_C(1) << 53, "", &seed, err,
                           len)) != 0)
        goto fail;
    s->seed = (uint64_t)seed;
    routes = cJSON_GetObjectItemCaseSensitive(root, "routes");
    if (routes != NULL && !cJSON_IsArray(routes)) {
        rc = json_fail(err, len, "routes", "must be an array of routes");
        goto fail;
    }
    n = routes ? cJSON_GetArraySize(routes) : 0;
    s->routes = xcalloc((size_t)n + 1, sizeof(*s->routes));
    for (int i = 0; i < n; i++) {
        s->nroutes++;
        json_path_index(p, sizeof(p), "routes", i);
        rc = parse_route(cJSON_GetArrayItem(routes, i), p, route_keys,
                         &s->routes[i], err, len);
        if (rc != 0)
            goto fail;
        for (int j = 0; j < i; j++) {
            if (strcmp(s->routes[j].path, s->routes[i].path) == 0) {
                rc = json_fail(err, len, json_path_key(q, sizeof(q), p, "path"),
                               "same path as routes[%d]", j);
                goto fail;
            }
        }
    }
    s->nroutes++;
    if ((rc = parse_route(root, "", top_keys, &s->routes[n], err, len)) != 0)
        goto fail;
    cJSON_Delete(root);
    *out = s;
    return 0;
fail:
    cJSON_Delete(root);
    mock_script_free(s);
    return rc;
}

static void
pairs_free(struct mock_header *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(h[i].name);
        free(h[i].value);
    }
    free(h);
}

static void
answer_free(struct mock_answer *a)
{
    pairs_free(a->headers, a->nheaders);
    free(a->body);
    free(a->content);
    free(a->finish_reason);
    cJSON_Delete(a->tool_calls);
}

void
mock_script_free(struct mock_script *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nroutes; i++) {
        struct mock_route *r = &s->routes[i];
        for (size_t j = 0; j < r->nanswers; j++)
            answer_free(&r->answers[j]);
        free(r->answers);
        if (r->unauthorized != NULL)
            answer_free(r->unauthorized);
        free(r->unauthorized);
        pairs_free(r->req_headers, r->nreq_headers);
        pairs_free(r->req_query, r->nreq_query);
        free(r->path);
        free(r->model);
        free(r->content);
        free(r->finish_reason);
        mock_limit_cleanup(&r->limit);
        mock__batch_conf_cleanup(&r->batch);
        cJSON_Delete(r->tool_turns);
    }
    free(s->routes);
    free(s);
}

int
mock_script_check(const char *script, char *err, size_t len)
{
    struct mock_script *s = NULL;
    int rc = mock_script_parse(script, &s, err, len);

    mock_script_free(s);
    return rc;
}

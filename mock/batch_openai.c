/* batch_openai.c: OpenAI's Batch API, as the mock serves it.
 *
 * POST /v1/batches makes a batch from an uploaded JSONL file (one
 * {"custom_id", "method", "url", "body"} a line; batch_files.c has the
 * Files API), GET /v1/batches lists them (newest first, with their
 * metadata, so a client can find its batch again), GET /v1/batches/ID
 * retrieves and POST .../cancel cancels one. A line that does not fit (no
 * custom_id, a duplicate, another url) makes the batch fail validation with
 * the lines listed in "errors", as OpenAI does. Errors are OpenAI's
 * {"error": {...}} objects.
 */
#include "mock/batch_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

#define MAX_ERRORS 100 /* validation errors listed for one batch */
#define DAY_MS     86400000

static void
fail(struct mock_bctx *x, int status, const char *msg, const char *code)
{
    mock__openai_fail(x, status, msg, code);
}

/* ---- the batch object ---------------------------------------------------- */

static void
add_time(cJSON *o, const struct mock_bctx *x, const char *name, bool set,
         int64_t t)
{
    if (set)
        cJSON_AddNumberToObject(o, name, (double)mock__batch_wall_s(x->e, t));
    else
        cJSON_AddNullToObject(o, name);
}

/* status_of is the batch status OpenAI shows for st. */
static const char *
status_of(const struct mock_batch *b, const struct mock_bstate *st)
{
    static const char *const names[] = {[MOCK_BPHASE_VALIDATING] = "validating",
                                        [MOCK_BPHASE_FAILED] = "failed",
                                        [MOCK_BPHASE_IN_PROGRESS] =
                                            "in_progress",
                                        [MOCK_BPHASE_FINALIZING] = "finalizing",
                                        [MOCK_BPHASE_CANCELLING] = "cancelling",
                                        [MOCK_BPHASE_ENDED] = NULL};

    if (st->phase != MOCK_BPHASE_ENDED)
        return names[st->phase];
    if (b->cancel_at >= 0)
        return "cancelled";
    return st->n[MOCK_BOUT_EXPIRED] > 0 ? "expired" : "completed";
}

/* batch_json is OpenAI's batch object for b at x->now; it also notes the
 * batch in x's log member. */
static cJSON *
batch_json(struct mock_bctx *x, const struct mock_batch *b)
{
    const struct mock_batch_conf *c = &b->route->batch;
    struct mock_bstate st;
    cJSON *o = cJSON_CreateObject(), *rc = cJSON_CreateObject();
    const char *status;
    char id[80];
    bool ended, failed;

    mock__batch_state(b, x->now, &st);
    status = status_of(b, &st);
    ended = st.phase == MOCK_BPHASE_ENDED;
    failed = st.phase == MOCK_BPHASE_FAILED;
    cJSON_AddStringToObject(o, "id", b->id);
    cJSON_AddStringToObject(o, "object", "batch");
    cJSON_AddStringToObject(o, "endpoint", b->endpoint);
    if (failed)
        cJSON_AddItemToObject(o, "errors", cJSON_Duplicate(b->errors, 1));
    else
        cJSON_AddNullToObject(o, "errors");
    cJSON_AddStringToObject(o, "input_file_id", b->input_file_id);
    cJSON_AddStringToObject(o, "completion_window", "24h");
    cJSON_AddStringToObject(o, "status", status);
    snprintf(id, sizeof(id), "file-%s-output", b->id);
    json_add_string(o, "output_file_id",
                    ended && st.n[MOCK_BOUT_SUCCEEDED] > 0 ? id : NULL);
    snprintf(id, sizeof(id), "file-%s-errors", b->id);
    json_add_string(o, "error_file_id",
                    ended && mock__batch_failed(&st) > 0 ? id : NULL);
    add_time(o, x, "created_at", true, b->created);
    add_time(o, x, "in_progress_at", !failed && x->now >= st.t0, st.t0);
    add_time(o, x, "expires_at", true,
             b->created + (c->expire_ms >= 0 ? c->expire_ms : DAY_MS));
    add_time(o, x, "finalizing_at",
             !failed && st.reason == MOCK_BEND_NATURAL &&
                 x->now >= st.t0 + c->delay_ms,
             st.t0 + c->delay_ms);
    add_time(o, x, "completed_at", ended && strcmp(status, "completed") == 0,
             st.end);
    add_time(o, x, "failed_at", failed, st.end);
    add_time(o, x, "expired_at", ended && strcmp(status, "expired") == 0,
             st.end);
    add_time(o, x, "cancelling_at", b->cancel_at >= 0, b->cancel_at);
    add_time(o, x, "cancelled_at", ended && b->cancel_at >= 0, st.end);
    cJSON_AddNumberToObject(rc, "total", (double)b->nitems);
    cJSON_AddNumberToObject(rc, "completed", (double)st.n[MOCK_BOUT_SUCCEEDED]);
    cJSON_AddNumberToObject(rc, "failed", (double)mock__batch_failed(&st));
    cJSON_AddItemToObject(o, "request_counts", rc);
    if (b->metadata != NULL)
        cJSON_AddItemToObject(o, "metadata", cJSON_Duplicate(b->metadata, 1));
    else
        cJSON_AddNullToObject(o, "metadata");
    cJSON_AddStringToObject(x->log, "id", b->id);
    cJSON_AddStringToObject(x->log, "status", status);
    cJSON_AddNumberToObject(x->log, "items", (double)b->nitems);
    return o;
}

/* ---- create -------------------------------------------------------------- */

static bool
metadata_ok(const cJSON *m)
{
    if (m == NULL || cJSON_IsNull(m))
        return true;
    if (!cJSON_IsObject(m) || cJSON_GetArraySize(m) > 16)
        return false;
    for (const cJSON *it = m->child; it != NULL; it = it->next) {
        if (strlen(it->string) > 64 || !cJSON_IsString(it) ||
            strlen(it->valuestring) > 512)
            return false;
    }
    return true;
}

static void
add_error(cJSON *data, const char *code, const char *msg, const char *param,
          int line)
{
    cJSON *e = cJSON_CreateObject();

    if (cJSON_GetArraySize(data) >= MAX_ERRORS) {
        cJSON_Delete(e);
        return;
    }
    cJSON_AddStringToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", msg);
    json_add_string(e, "param", param);
    if (line > 0)
        cJSON_AddNumberToObject(e, "line", line);
    else
        cJSON_AddNullToObject(e, "line");
    cJSON_AddItemToArray(data, e);
}

/* check_line validates one input line (dup: its custom_id was used on an
 * earlier line); a problem is listed in data. */
static void
check_line(const cJSON *o, const struct mock_batch *b, bool dup, int line,
           cJSON *data)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "custom_id");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "method");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "url");
    const cJSON *body = cJSON_GetObjectItemCaseSensitive(o, "body");

    if (!cJSON_IsString(id) || id->valuestring[0] == '\0')
        add_error(data, "missing_required_parameter",
                  "Missing required parameter: 'custom_id'.", "custom_id",
                  line);
    else if (dup)
        add_error(data, "duplicate_custom_id",
                  "The custom_id for this request is a duplicate of another "
                  "request. The custom_id parameter must be unique for each "
                  "request in a batch.",
                  "custom_id", line);
    else if (!cJSON_IsString(m) || strcmp(m->valuestring, "POST") != 0)
        add_error(data, "invalid_method", "The method must be 'POST'.",
                  "method", line);
    else if (!cJSON_IsString(u) || strcmp(u->valuestring, b->endpoint) != 0)
        add_error(data, "mismatched_endpoint",
                  "The URL provided for this request does not match the "
                  "batch endpoint.",
                  "url", line);
    else if (!cJSON_IsObject(body))
        add_error(data, "missing_required_parameter",
                  "Missing required parameter: 'body'.", "body", line);
}

/* next_line parses the next non-empty line of [*p, end) (its 1-based
 * number in *line) and moves *p past it; NULL at the end. The upload
 * checked that every non-empty line is a JSON object. Caller deletes. */
static cJSON *
next_line(const char **p, const char *end, int *line)
{
    while (*p < end) {
        const char *nl = memchr(*p, '\n', (size_t)(end - *p));
        size_t n = (size_t)((nl ? nl : end) - *p);
        const char *at = *p;
        cJSON *o;
        (*line)++;
        *p = nl ? nl + 1 : end;
        if (n > 0 && at[n - 1] == '\r')
            n--;
        if (n > 0 && (o = json_parse_exact(at, n)) != NULL)
            return o;
    }
    return NULL;
}

/* dups marks the lines (in order, n at most) whose custom_id an earlier
 * line has; sorted, so a large file costs n log n, not n squared. Caller
 * frees. */
static bool *
dups(const struct mock_bfile *f, size_t n)
{
    char **ids = xcalloc(n ? n : 1, sizeof(*ids));
    const char *p = f->data;
    bool *dup;
    size_t k = 0;
    int line = 0;
    cJSON *o;

    while (k < n && (o = next_line(&p, f->data + f->len, &line)) != NULL) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "custom_id");
        ids[k++] = cJSON_IsString(id) ? xstrdup(id->valuestring) : NULL;
        cJSON_Delete(o);
    }
    dup = mock__batch_dups((const char *const *)ids, k);
    for (size_t i = 0; i < k; i++)
        free(ids[i]);
    free(ids);
    return dup;
}

/* fill reads the input file's lines into b's items (room for n); problems
 * go to b->errors (the batch then fails validation). */
static void
fill(struct mock_batch *b, const struct mock_bfile *f, size_t n)
{
    cJSON *data = cJSON_CreateArray(), *o;
    const char *p = f->data;
    bool *dup = dups(f, n);
    size_t k = 0;
    int line = 0;

    while (k < n && (o = next_line(&p, f->data + f->len, &line)) != NULL) {
        int before = cJSON_GetArraySize(data);
        check_line(o, b, dup[k++], line, data);
        if (cJSON_GetArraySize(data) == before) {
            struct mock_bitem *it = &b->items[b->nitems++];
            it->custom_id =
                xstrdup(cJSON_GetObjectItem(o, "custom_id")->valuestring);
            it->body = json_print(cJSON_GetObjectItem(o, "body"));
            it->fate =
                mock__batch_fate(&b->route->batch, it->custom_id, b->nitems);
            b->bytes += strlen(it->body) + strlen(it->custom_id);
        }
        cJSON_Delete(o);
    }
    free(dup);
    if (b->route->batch.fail_validation)
        add_error(data, "invalid_request",
                  "The batch failed validation (the mock's script says so).",
                  NULL, 0);
    if (b->nitems == 0 && cJSON_GetArraySize(data) == 0)
        add_error(data, "empty_file", "The input file has no requests.", NULL,
                  0);
    if (cJSON_GetArraySize(data) > 0) {
        b->errors = cJSON_CreateObject();
        cJSON_AddStringToObject(b->errors, "object", "list");
        cJSON_AddItemToObject(b->errors, "data", data);
    } else {
        cJSON_Delete(data);
    }
}

/* lines_of counts the lines of f that are not empty. */
static size_t
lines_of(const struct mock_bfile *f)
{
    size_t n = 0;
    bool empty = true;

    for (size_t i = 0; i < f->len; i++) {
        if (f->data[i] == '\n') {
            n += !empty;
            empty = true;
        } else if (f->data[i] != '\r') {
            empty = false;
        }
    }
    return n + !empty;
}

/* Answers the request's own problems (its JSON, a missing or unsupported
 * parameter, bad metadata) with a 400 and returns true; false when it has
 * none. */
static bool
create_refused(struct mock_bctx *x, const cJSON *ep, const cJSON *cw,
               const cJSON *md, const char *missing)
{
    char msg[400];

    if (!cJSON_IsObject(x->json)) {
        fail(x, 400, "We could not parse the JSON body of your request.", NULL);
    } else if (missing != NULL) {
        snprintf(msg, sizeof(msg), "Missing required parameter: '%s'.",
                 missing);
        fail(x, 400, msg, "missing_required_parameter");
    } else if (strcmp(ep->valuestring, "/v1/chat/completions") != 0) {
        snprintf(msg, sizeof(msg),
                 "Invalid value: '%.200s'. Supported values are: "
                 "'/v1/chat/completions'.",
                 ep->valuestring);
        fail(x, 400, msg, "invalid_value");
    } else if (strcmp(cw->valuestring, "24h") != 0) {
        fail(x, 400,
             "Invalid value for 'completion_window'. Supported "
             "values are: '24h'.",
             "invalid_value");
    } else if (!metadata_ok(md)) {
        fail(x, 400,
             "Invalid 'metadata': at most 16 pairs, keys of at most "
             "64 characters and string values of at most 512.",
             "invalid_value");
    } else {
        return false;
    }
    return true;
}

/* The uploaded input file id names, when it can make a batch here; else
 * NULL, the refusal answered (unknown, not for batches, too many lines,
 * the mock full). */
static struct mock_bfile *
create_input(struct mock_bctx *x, const char *id)
{
    struct mock_bstore *s = mock__bstore(x->e);
    struct mock_bfile *f = mock__bfile_find(x, id);
    char msg[400];

    if (f == NULL) {
        snprintf(msg, sizeof(msg), "No such File object: %.200s", id);
        fail(x, 404, msg, NULL);
    } else if (strcmp(f->purpose, "batch") != 0) {
        fail(x, 400,
             "The input file must be uploaded with purpose "
             "'batch'.",
             "invalid_file_purpose");
    } else if (lines_of(f) > (size_t)x->r->batch.max_items) {
        snprintf(msg, sizeof(msg),
                 "The input file has more requests than this endpoint takes "
                 "in one batch (%" PRId64 ").",
                 x->r->batch.max_items);
        fail(x, 400, msg, "batch_too_large");
    } else if (s->nbatches >= MOCK_BSTORE_MAX_BATCHES ||
               s->bytes + f->len > MOCK_BSTORE_MAX_BYTES) {
        fail(x, 413, "The mock holds no more batches (1000, 64 MiB).",
             "batch_too_large");
    } else {
        return f;
    }
    return NULL;
}

/* create answers POST /v1/batches: the request's own problems and the caps
 * are 4xx answers; the input lines are checked by fill. */
static void
create(struct mock_bctx *x)
{
    struct mock_bstore *s = mock__bstore(x->e);
    const cJSON *fid =
        cJSON_GetObjectItemCaseSensitive(x->json, "input_file_id");
    const cJSON *ep = cJSON_GetObjectItemCaseSensitive(x->json, "endpoint");
    const cJSON *cw =
        cJSON_GetObjectItemCaseSensitive(x->json, "completion_window");
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(x->json, "metadata");
    const char *missing = !cJSON_IsString(fid)  ? "input_file_id"
                          : !cJSON_IsString(ep) ? "endpoint"
                          : !cJSON_IsString(cw) ? "completion_window"
                                                : NULL;
    struct mock_bfile *f;
    struct mock_batch *b;

    mock__batch_log(x, "openai", "create");
    if (create_refused(x, ep, cw, md, missing) ||
        (f = create_input(x, fid->valuestring)) == NULL)
        return;
    if ((b = mock__batch_new(x, MOCK_BAPI_OPENAI, lines_of(f))) == NULL)
        return;
    b->input_file_id = xstrdup(f->id);
    b->endpoint = xstrdup(ep->valuestring);
    if (cJSON_IsObject(md))
        b->metadata = cJSON_Duplicate(md, 1);
    fill(b, f, lines_of(f));
    s->bytes += b->bytes;
    /* A create is answered with the batch as it stands just before it
     * starts, as the providers do ("validating", "in_progress"), however
     * short the script's timeline: the next request sees it move on. */
    x->now = b->created - 1;
    mock__batch_reply(x, 200, batch_json(x, b));
}

/* ---- retrieve, list, cancel --------------------------------------------- */

static struct mock_batch *
batch_or_404(struct mock_bctx *x)
{
    struct mock_batch *b = mock__batch_find(x, MOCK_BAPI_OPENAI, x->id);
    char msg[300];

    if (b == NULL) {
        snprintf(msg, sizeof(msg), "No batch found with id '%.200s'.", x->id);
        fail(x, 404, msg, NULL);
    }
    return b;
}

/* list answers GET /v1/batches: newest first, after the "after" cursor. */
static void
list(struct mock_bctx *x)
{
    struct mock_bstore *s = mock__bstore(x->e);
    cJSON *o = cJSON_CreateObject(), *data = cJSON_CreateArray();
    const char *after = NULL;
    char buf[64], first[48] = "", last[48] = "";
    long limit = 20;
    bool skipping, more = false;

    if (mock__query_value(x->rq->query, "limit", buf, sizeof(buf)))
        limit = strtol(buf, NULL, 10);
    if (limit < 1 || limit > 100) {
        cJSON_Delete(o);
        cJSON_Delete(data);
        fail(x, 400, "Invalid 'limit': must be between 1 and 100.",
             "invalid_value");
        return;
    }
    if (mock__query_value(x->rq->query, "after", buf, sizeof(buf)))
        after = buf;
    skipping = after != NULL;
    for (struct mock_batch *b = s->batches; b != NULL; b = b->next) {
        if (b->api != MOCK_BAPI_OPENAI || b->route != x->r)
            continue;
        if (skipping) {
            skipping = strcmp(b->id, after) != 0;
            continue;
        }
        if (cJSON_GetArraySize(data) == limit) {
            more = true;
            break;
        }
        if (first[0] == '\0')
            snprintf(first, sizeof(first), "%s", b->id);
        snprintf(last, sizeof(last), "%s", b->id);
        cJSON_AddItemToArray(data, batch_json(x, b));
        cJSON_DeleteItemFromObject(x->log, "id");
        cJSON_DeleteItemFromObject(x->log, "status");
        cJSON_DeleteItemFromObject(x->log, "items");
    }
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddItemToObject(o, "data", data);
    json_add_string(o, "first_id", first[0] ? first : NULL);
    json_add_string(o, "last_id", last[0] ? last : NULL);
    cJSON_AddBoolToObject(o, "has_more", more);
    cJSON_AddNumberToObject(x->log, "batches", cJSON_GetArraySize(data));
    mock__batch_reply(x, 200, o);
}

/* cancel takes a cancel of a live batch (an ended one is a 400). */
static void
cancel(struct mock_bctx *x, struct mock_batch *b)
{
    struct mock_bstate st;
    char msg[200];

    mock__batch_state(b, x->now, &st);
    if (st.phase == MOCK_BPHASE_ENDED || st.phase == MOCK_BPHASE_FAILED) {
        snprintf(msg, sizeof(msg), "Cannot cancel a batch with status '%s'.",
                 status_of(b, &st));
        fail(x, 400, msg, NULL);
        return;
    }
    if (b->cancel_at < 0)
        b->cancel_at = x->now;
    mock__batch_reply(x, 200, batch_json(x, b));
}

void
mock__openai_batches(struct mock_bctx *x)
{
    bool get = strcmp(x->rq->method, "GET") == 0;
    bool post = strcmp(x->rq->method, "POST") == 0;
    struct mock_batch *b;

    if (x->id == NULL && post) {
        create(x);
    } else if (x->id == NULL && get) {
        mock__batch_log(x, "openai", "list");
        list(x);
    } else if ((x->verb == NULL && get) ||
               (x->verb != NULL && strcmp(x->verb, "cancel") == 0 && post)) {
        mock__batch_log(x, "openai", x->verb ? "cancel" : "retrieve");
        if ((b = batch_or_404(x)) == NULL)
            return;
        if (x->verb != NULL)
            cancel(x, b);
        else
            mock__batch_reply(x, 200, batch_json(x, b));
    } else {
        mock__batch_log(x, "openai", "unknown");
        mock__openai_invalid_url(x);
    }
}

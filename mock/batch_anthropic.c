/* batch_anthropic.c: Anthropic's Message Batches API, as the mock serves it.
 *
 * POST /v1/messages/batches takes {"requests": [{"custom_id", "params"}]}
 * and answers a message_batch; GET /v1/messages/batches lists them (newest
 * first), GET .../ID retrieves one, POST .../ID/cancel cancels it and,
 * once it has ended, GET .../ID/results serves the JSONL of results by
 * custom_id: a succeeded item carries a message with usage, an errored one
 * the error, and canceled and expired ones their type. As Anthropic
 * documents, request_counts show every item as processing until the whole
 * batch has ended. Errors are Anthropic's {"type": "error", ...} objects.
 */
#include "mock/batch_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

#define DAY_MS 86400000

static void
fail(struct mock_bctx *x, int status, const char *msg)
{
    x->status = status;
    x->body = mock__anthropic_error(mock__anthropic_type(status), msg);
}

static void
add_wall(cJSON *o, const struct mock_bctx *x, const char *name, bool set,
         int64_t t)
{
    if (set)
        json_add_time(o, name, t + x->e->wall_offset);
    else
        cJSON_AddNullToObject(o, name);
}

/* batch_json is Anthropic's message_batch for b at x->now; it also notes
 * the batch in x's log member. */
static cJSON *
batch_json(struct mock_bctx *x, const struct mock_batch *b)
{
    const struct mock_batch_conf *c = &b->route->batch;
    const cJSON *host =
        cJSON_GetObjectItemCaseSensitive(x->rq->headers, "host");
    struct mock_bstate st;
    cJSON *o = cJSON_CreateObject(), *rc = cJSON_CreateObject();
    const char *status;
    bool ended;
    char *url;
    size_t n;

    mock__batch_state(b, x->now, &st);
    ended = st.phase == MOCK_BPHASE_ENDED;
    status = ended                                ? "ended"
             : st.phase == MOCK_BPHASE_CANCELLING ? "canceling"
                                                  : "in_progress";
    cJSON_AddStringToObject(o, "id", b->id);
    cJSON_AddStringToObject(o, "type", "message_batch");
    cJSON_AddStringToObject(o, "processing_status", status);
    /* Items leave "processing" only once the whole batch has ended. */
    cJSON_AddNumberToObject(rc, "processing", ended ? 0 : (double)b->nitems);
    cJSON_AddNumberToObject(rc, "succeeded",
                            ended ? (double)st.n[MOCK_BOUT_SUCCEEDED] : 0);
    cJSON_AddNumberToObject(rc, "errored",
                            ended ? (double)st.n[MOCK_BOUT_ERRORED] : 0);
    cJSON_AddNumberToObject(rc, "canceled",
                            ended ? (double)st.n[MOCK_BOUT_CANCELED] : 0);
    cJSON_AddNumberToObject(rc, "expired",
                            ended ? (double)st.n[MOCK_BOUT_EXPIRED] : 0);
    cJSON_AddItemToObject(o, "request_counts", rc);
    add_wall(o, x, "ended_at", ended, st.end);
    add_wall(o, x, "created_at", true, b->created);
    add_wall(o, x, "expires_at", true,
             b->created + (c->expire_ms >= 0 ? c->expire_ms : DAY_MS));
    cJSON_AddNullToObject(o, "archived_at");
    add_wall(o, x, "cancel_initiated_at", b->cancel_at >= 0, b->cancel_at);
    if (ended) {
        const char *h = cJSON_IsString(host) ? host->valuestring : "127.0.0.1";
        n = strlen(h) + strlen(x->coll) + strlen(b->id) + 32;
        url = xmalloc(n);
        snprintf(url, n, "http://%s%s/%s/results", h, x->coll, b->id);
        cJSON_AddStringToObject(o, "results_url", url);
        free(url);
    } else {
        cJSON_AddNullToObject(o, "results_url");
    }
    cJSON_AddStringToObject(x->log, "id", b->id);
    cJSON_AddStringToObject(x->log, "status", status);
    cJSON_AddNumberToObject(x->log, "items", (double)b->nitems);
    return o;
}

/* ---- create -------------------------------------------------------------- */

static bool
custom_id_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

/* request_problem checks requests[i] the way the API does (dup: its
 * custom_id is one of an earlier request); NULL when it is fine, else the
 * message, written into msg. */
static const char *
request_problem(int i, const cJSON *rq, bool dup, char *msg, size_t len)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(rq, "custom_id");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(rq, "params");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(p, "model");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(p, "max_tokens");
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(p, "messages");
    const char *what = NULL;

    if (!cJSON_IsString(id))
        what = "custom_id: Field required";
    else if (!custom_id_ok(id->valuestring))
        what = "custom_id: String should match pattern "
               "'^[a-zA-Z0-9_-]{1,64}$'";
    else if (!cJSON_IsObject(p))
        what = "params: Field required";
    else if (!cJSON_IsString(m))
        what = "params.model: Field required";
    else if (!cJSON_IsNumber(mt) || mt->valuedouble < 1)
        what = "params.max_tokens: Field required (an integer of at least "
               "1)";
    else if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) == 0)
        what = "params.messages: Field required (at least one message)";
    if (what == NULL && dup)
        what = "custom_id: must be unique within the batch";
    if (what == NULL)
        return NULL;
    snprintf(msg, len, "requests.%d.%s", i, what);
    return msg;
}

/* create answers POST /v1/messages/batches: every request is checked
 * before anything is kept, and one problem refuses the whole batch. */
static void
create(struct mock_bctx *x)
{
    struct mock_bstore *s = mock__bstore(x->e);
    const cJSON *reqs = cJSON_GetObjectItemCaseSensitive(x->json, "requests");
    struct mock_batch *b;
    const char **ids, *bad = NULL;
    bool *dup;
    size_t bytes = x->rq->body_len;
    char msg[300];
    int n = cJSON_IsArray(reqs) ? cJSON_GetArraySize(reqs) : 0, i = 0;

    mock__batch_log(x, "anthropic", "create");
    if (!cJSON_IsObject(x->json)) {
        fail(x, 400, "The request body must be a JSON object.");
        return;
    }
    if (!cJSON_IsArray(reqs) || n == 0) {
        fail(x, 400,
             cJSON_IsArray(reqs) ? "requests: List should have at least 1 item"
                                 : "requests: Field required");
        return;
    }
    if (n > x->r->batch.max_items) {
        snprintf(msg, sizeof(msg),
                 "requests: this endpoint takes at most %" PRId64
                 " requests in one batch",
                 x->r->batch.max_items);
        fail(x, 400, msg);
        return;
    }
    ids = xcalloc((size_t)n, sizeof(*ids));
    for (const cJSON *it = reqs->child; it != NULL; it = it->next, i++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "custom_id");
        ids[i] = cJSON_IsString(id) ? id->valuestring : NULL;
    }
    dup = mock__batch_dups(ids, (size_t)n);
    i = 0;
    for (const cJSON *it = reqs->child; it != NULL && bad == NULL;
         it = it->next, i++)
        bad = request_problem(i, it, dup[i], msg, sizeof(msg));
    free(ids);
    free(dup);
    if (bad != NULL) {
        fail(x, 400, msg);
        return;
    }
    if (x->r->batch.fail_validation) {
        fail(x, 400,
             "requests: the batch failed validation (the mock's "
             "script says so)");
        return;
    }
    if (s->nbatches >= MOCK_BSTORE_MAX_BATCHES ||
        s->bytes + bytes > MOCK_BSTORE_MAX_BYTES) {
        fail(x, 413, "The mock holds no more batches (1000, 64 MiB).");
        return;
    }
    if ((b = mock__batch_new(x, MOCK_BAPI_ANTHROPIC, (size_t)n)) == NULL)
        return;
    for (const cJSON *it = reqs->child; it != NULL; it = it->next) {
        struct mock_bitem *item = &b->items[b->nitems++];
        item->custom_id =
            xstrdup(cJSON_GetObjectItem(it, "custom_id")->valuestring);
        item->body = json_print(cJSON_GetObjectItem(it, "params"));
        item->fate = mock__batch_fate(&x->r->batch, item->custom_id, b->nitems);
    }
    b->bytes = bytes;
    s->bytes += bytes;
    /* A create is answered with the batch as it stands just before it
     * starts, as the providers do ("validating", "in_progress"), however
     * short the script's timeline: the next request sees it move on. */
    x->now = b->created - 1;
    mock__batch_reply(x, 200, batch_json(x, b));
}

/* ---- results ------------------------------------------------------------- */

/* message converts item i's chat completion into an Anthropic message. */
static cJSON *
message(struct mock_bctx *x, const struct mock_batch *b, size_t i)
{
    cJSON *chat = mock__batch_chat(x->e, b, i), *m = cJSON_CreateObject();
    cJSON *content = cJSON_CreateArray(), *text = cJSON_CreateObject();
    cJSON *usage = cJSON_CreateObject();
    const cJSON *choice = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(chat, "choices"), 0);
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(choice, "message");
    const cJSON *fin =
        cJSON_GetObjectItemCaseSensitive(choice, "finish_reason");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(chat, "usage");
    char id[96];

    snprintf(id, sizeof(id), "msg_%s_%zu", b->id, i + 1);
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddStringToObject(m, "type", "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddItemToObject(
        m, "model",
        cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(chat, "model"), 1));
    cJSON_AddStringToObject(text, "type", "text");
    cJSON_AddItemToObject(
        text, "text",
        cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(msg, "content"), 1));
    cJSON_AddItemToArray(content, text);
    cJSON_AddItemToObject(m, "content", content);
    cJSON_AddStringToObject(m, "stop_reason",
                            mock__anthropic_tool_use(msg, content) ? "tool_use"
                            : cJSON_IsString(fin) &&
                                    strcmp(fin->valuestring, "length") == 0
                                ? "max_tokens"
                                : "end_turn");
    cJSON_AddNullToObject(m, "stop_sequence");
    cJSON_AddItemToObject(
        usage, "input_tokens",
        cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens"),
                        1));
    cJSON_AddItemToObject(
        usage, "output_tokens",
        cJSON_Duplicate(
            cJSON_GetObjectItemCaseSensitive(u, "completion_tokens"), 1));
    cJSON_AddItemToObject(m, "usage", usage);
    cJSON_Delete(chat);
    return m;
}

static cJSON *
result_line(struct mock_bctx *x, const struct mock_batch *b, size_t i,
            enum mock_bout out)
{
    static const char *const types[] = {[MOCK_BOUT_SUCCEEDED] = "succeeded",
                                        [MOCK_BOUT_ERRORED] = "errored",
                                        [MOCK_BOUT_CANCELED] = "canceled",
                                        [MOCK_BOUT_EXPIRED] = "expired"};
    cJSON *o = cJSON_CreateObject(), *r = cJSON_CreateObject();
    int status = b->route->batch.error_status;

    cJSON_AddStringToObject(o, "custom_id", b->items[i].custom_id);
    cJSON_AddStringToObject(r, "type", types[out]);
    if (out == MOCK_BOUT_SUCCEEDED) {
        cJSON_AddItemToObject(r, "message", message(x, b, i));
    } else if (out == MOCK_BOUT_ERRORED) {
        char *body = mock__anthropic_error(
            mock__anthropic_type(status),
            status >= 500 ? "Internal server error" : "Invalid request");
        cJSON_AddItemToObject(r, "error", cJSON_Parse(body));
        free(body);
    }
    cJSON_AddItemToObject(o, "result", r);
    return o;
}

/* results serves an ended batch's JSONL, one line an item, in order. */
static void
results(struct mock_bctx *x, const struct mock_batch *b)
{
    struct mock_bstate st;
    struct xbuf out = {0};
    char msg[200];

    mock__batch_state(b, x->now, &st);
    if (st.phase != MOCK_BPHASE_ENDED) {
        snprintf(msg, sizeof(msg),
                 "Message Batch %s has not yet ended; its results are "
                 "available once processing_status is ended.",
                 b->id);
        fail(x, 400, msg);
        return;
    }
    for (size_t i = 0; i < b->nitems; i++) {
        cJSON *line = result_line(x, b, i, mock__batch_item(b, &st, i, x->now));
        char *s = json_print(line);
        cJSON_Delete(line);
        xbuf_put(&out, s, strlen(s));
        xbuf_lit(&out, "\n");
        free(s);
    }
    cJSON_AddStringToObject(x->log, "id", b->id);
    cJSON_AddNumberToObject(x->log, "items", (double)b->nitems);
    x->status = 200;
    x->body = out.p != NULL ? out.p : xstrdup("");
    x->ctype = "application/x-jsonl";
}

/* ---- list, retrieve, cancel ---------------------------------------------- */

static void
list(struct mock_bctx *x)
{
    cJSON *o = cJSON_CreateObject(), *data = cJSON_CreateArray();
    char after[64], before[64], buf[32], first[48] = "", last[48] = "";
    bool has_after, has_before, more = false, skipping;
    long limit = 20;

    if (mock__query_value(x->rq->query, "limit", buf, sizeof(buf)))
        limit = strtol(buf, NULL, 10);
    has_after =
        mock__query_value(x->rq->query, "after_id", after, sizeof(after));
    has_before =
        mock__query_value(x->rq->query, "before_id", before, sizeof(before));
    if (limit < 1 || limit > 1000) {
        cJSON_Delete(o);
        cJSON_Delete(data);
        fail(x, 400, "limit: Input should be between 1 and 1000");
        return;
    }
    /* Newest first: after_id pages toward older batches; before_id returns
     * the ones newer than it. */
    skipping = has_after;
    for (struct mock_batch *b = mock__bstore(x->e)->batches; b; b = b->next) {
        if (b->api != MOCK_BAPI_ANTHROPIC || b->route != x->r)
            continue;
        if (has_before && strcmp(b->id, before) == 0)
            break;
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
    }
    cJSON_DeleteItemFromObject(x->log, "id");
    cJSON_DeleteItemFromObject(x->log, "status");
    cJSON_DeleteItemFromObject(x->log, "items");
    cJSON_AddItemToObject(o, "data", data);
    cJSON_AddBoolToObject(o, "has_more", more);
    json_add_string(o, "first_id", first[0] ? first : NULL);
    json_add_string(o, "last_id", last[0] ? last : NULL);
    cJSON_AddNumberToObject(x->log, "batches", cJSON_GetArraySize(data));
    mock__batch_reply(x, 200, o);
}

void
mock__anthropic_batches(struct mock_bctx *x)
{
    bool get = strcmp(x->rq->method, "GET") == 0;
    bool post = strcmp(x->rq->method, "POST") == 0;
    const char *verb = x->verb ? x->verb : "";
    struct mock_batch *b;
    char msg[300];

    if (x->id == NULL && post) {
        create(x);
        return;
    }
    if (x->id == NULL && get) {
        mock__batch_log(x, "anthropic", "list");
        list(x);
        return;
    }
    if (x->id == NULL ||
        !((x->verb == NULL && get) || (strcmp(verb, "cancel") == 0 && post) ||
          (strcmp(verb, "results") == 0 && get))) {
        mock__batch_log(x, "anthropic", "unknown");
        fail(x, 404, "Not Found");
        return;
    }
    mock__batch_log(x, "anthropic", x->verb ? x->verb : "retrieve");
    if ((b = mock__batch_find(x, MOCK_BAPI_ANTHROPIC, x->id)) == NULL) {
        snprintf(msg, sizeof(msg), "message_batch %.200s not found", x->id);
        cJSON_AddStringToObject(x->log, "id", x->id);
        fail(x, 404, msg);
        return;
    }
    if (strcmp(verb, "results") == 0) {
        results(x, b);
        return;
    }
    if (strcmp(verb, "cancel") == 0 && b->cancel_at < 0) {
        struct mock_bstate st;
        mock__batch_state(b, x->now, &st);
        if (st.phase != MOCK_BPHASE_ENDED)
            b->cancel_at = x->now;
    }
    mock__batch_reply(x, 200, batch_json(x, b));
}

/* batch.c: the batch APIs of the mock, shared part.
 *
 * A batch lives in memory (struct mock_bstore on the engine) and has no
 * timer: where it stands is computed from the loop clock each time it is
 * asked (mock__batch_state), so a batch needs no handle and a test's poll
 * sees exactly the script's timeline. Item i of n is done at
 * t0 + delay_ms * (i + 1) / n, t0 being the end of validation; an expiry or
 * an honoured cancel cuts the items not done by then. The provider shapes
 * are in batch_openai.c (files, /v1/batches) and batch_anthropic.c
 * (/v1/messages/batches); this file parses the route's "batch" object,
 * routes a request to them, and keeps the store within its caps.
 */
#include "mock/batch_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

#define MAX_MS      86400000 /* a day: the longest batch timeline */
#define MAX_IDS     10000    /* custom_ids listed in error_ids/expire_ids */
#define MAX_BATCHES 1000     /* live batches a route may allow */
#define MAX_ITEMS   100000   /* items a route may allow in one batch */

static const char *const batch_keys[] = {
    "delay_ms",    "validate_ms",     "finalize_ms",
    "cancel_ms",   "expire_ms",       "error_every",
    "error_ids",   "error_status",    "expire_every",
    "expire_ids",  "fail_validation", "honor_cancel",
    "max_batches", "max_items",       NULL};

void
mock__batch_conf_init(struct mock_batch_conf *c)
{
    memset(c, 0, sizeof(*c));
    c->expire_ms = -1;
    c->error_status = 500;
    c->honor_cancel = true;
    c->max_batches = 100;
    c->max_items = 10000;
}

void
mock__batch_conf_cleanup(struct mock_batch_conf *c)
{
    for (size_t i = 0; i < c->nerror_ids; i++)
        free(c->error_ids[i]);
    for (size_t i = 0; i < c->nexpire_ids; i++)
        free(c->expire_ids[i]);
    free(c->error_ids);
    free(c->expire_ids);
    c->error_ids = c->expire_ids = NULL;
    c->nerror_ids = c->nexpire_ids = 0;
}

static int
parse_ids(const cJSON *obj, const char *key, const char *path, char ***out,
          size_t *n, char *err, size_t len)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);
    char p[512], q[512];
    int i = 0;

    if (a == NULL)
        return 0;
    json_path_key(p, sizeof(p), path, key);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > MAX_IDS)
        return json_fail(err, len, p,
                         "must be an array of at most %d "
                         "custom_id strings",
                         MAX_IDS);
    *out = xcalloc((size_t)cJSON_GetArraySize(a) + 1, sizeof(**out));
    for (const cJSON *it = a->child; it != NULL; it = it->next, i++) {
        if (!cJSON_IsString(it) || it->valuestring[0] == '\0')
            return json_fail(err, len, json_path_index(q, sizeof(q), p, i),
                             "must be a non-empty string");
        (*out)[(*n)++] = xstrdup(it->valuestring);
    }
    return 0;
}

int
mock__batch_conf_parse(const cJSON *obj, const char *path,
                       struct mock_batch_conf *c, char *err, size_t len)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(obj, "batch");
    int64_t status = c->error_status;
    char p[512];
    int rc;

    if (b == NULL)
        return 0;
    json_path_key(p, sizeof(p), path, "batch");
    if ((rc = json_check_object(b, p, batch_keys, err, len)) != 0 ||
        (rc = json_get_int(b, "delay_ms", 0, MAX_MS, p, &c->delay_ms, err,
                           len)) != 0 ||
        (rc = json_get_int(b, "validate_ms", 0, MAX_MS, p, &c->validate_ms, err,
                           len)) != 0 ||
        (rc = json_get_int(b, "finalize_ms", 0, MAX_MS, p, &c->finalize_ms, err,
                           len)) != 0 ||
        (rc = json_get_int(b, "cancel_ms", 0, MAX_MS, p, &c->cancel_ms, err,
                           len)) != 0 ||
        (rc = json_get_int(b, "expire_ms", 0, MAX_MS, p, &c->expire_ms, err,
                           len)) != 0 ||
        (rc = json_get_int(b, "error_every", 1, MAX_ITEMS, p, &c->error_every,
                           err, len)) != 0 ||
        (rc = json_get_int(b, "expire_every", 1, MAX_ITEMS, p, &c->expire_every,
                           err, len)) != 0 ||
        (rc = json_get_int(b, "error_status", 400, 599, p, &status, err,
                           len)) != 0 ||
        (rc = parse_ids(b, "error_ids", p, &c->error_ids, &c->nerror_ids, err,
                        len)) != 0 ||
        (rc = parse_ids(b, "expire_ids", p, &c->expire_ids, &c->nexpire_ids,
                        err, len)) != 0 ||
        (rc = json_get_bool(b, "fail_validation", p, &c->fail_validation, err,
                            len)) != 0 ||
        (rc = json_get_bool(b, "honor_cancel", p, &c->honor_cancel, err,
                            len)) != 0 ||
        (rc = json_get_int(b, "max_batches", 1, MAX_BATCHES, p, &c->max_batches,
                           err, len)) != 0 ||
        (rc = json_get_int(b, "max_items", 1, MAX_ITEMS, p, &c->max_items, err,
                           len)) != 0)
        return rc;
    c->error_status = (int)status;
    return 0;
}

static bool
listed(char *const *ids, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(ids[i], id) == 0)
            return true;
    }
    return false;
}

enum mock_bfate
mock__batch_fate(const struct mock_batch_conf *c, const char *custom_id,
                 size_t index)
{
    if (listed(c->expire_ids, c->nexpire_ids, custom_id) ||
        (c->expire_every > 0 && index % (size_t)c->expire_every == 0))
        return MOCK_BFATE_EXPIRE;
    if (listed(c->error_ids, c->nerror_ids, custom_id) ||
        (c->error_every > 0 && index % (size_t)c->error_every == 0))
        return MOCK_BFATE_ERROR;
    return MOCK_BFATE_OK;
}

struct dup_key {
    const char *id;
    size_t i;
};

static int
dup_cmp(const void *a, const void *b)
{
    const struct dup_key *x = a, *y = b;
    int c = strcmp(x->id, y->id);

    return c != 0 ? c : (x->i > y->i) - (x->i < y->i);
}

bool *
mock__batch_dups(const char *const *ids, size_t n)
{
    struct dup_key *k = xcalloc(n ? n : 1, sizeof(*k));
    bool *dup = xcalloc(n ? n : 1, sizeof(*dup));
    size_t m = 0;

    for (size_t i = 0; i < n; i++) {
        if (ids[i] != NULL)
            k[m++] = (struct dup_key){ids[i], i};
    }
    qsort(k, m, sizeof(*k), dup_cmp);
    for (size_t i = 1; i < m; i++)
        dup[k[i].i] = strcmp(k[i].id, k[i - 1].id) == 0;
    free(k);
    return dup;
}

/* ---- the timeline -------------------------------------------------------- */

static int64_t
start_of(const struct mock_batch *b)
{
    return b->created +
           (b->api == MOCK_BAPI_OPENAI ? b->route->batch.validate_ms : 0);
}

int64_t
mock__batch_item_done(const struct mock_batch *b, size_t i)
{
    return start_of(b) +
           b->route->batch.delay_ms * (int64_t)(i + 1) / (int64_t)b->nitems;
}

enum mock_bout
mock__batch_item(const struct mock_batch *b, const struct mock_bstate *st,
                 size_t i, int64_t now)
{
    enum mock_bout cut = st->reason == MOCK_BEND_CANCELLED ? MOCK_BOUT_CANCELED
                                                           : MOCK_BOUT_EXPIRED;
    int64_t done = mock__batch_item_done(b, i);

    if (b->items[i].fate != MOCK_BFATE_EXPIRE && done < st->cut && done <= now)
        return b->items[i].fate == MOCK_BFATE_ERROR ? MOCK_BOUT_ERRORED
                                                    : MOCK_BOUT_SUCCEEDED;
    return now >= st->end ? cut : MOCK_BOUT_PROCESSING;
}

void
mock__batch_state(const struct mock_batch *b, int64_t now,
                  struct mock_bstate *st)
{
    const struct mock_batch_conf *c = &b->route->batch;
    bool openai = b->api == MOCK_BAPI_OPENAI;
    int64_t natural, expiry = INT64_MAX, cancel = INT64_MAX;

    memset(st, 0, sizeof(*st));
    st->t0 = start_of(b);
    st->cut = INT64_MAX;
    if (b->errors != NULL) {
        st->end = b->created + c->validate_ms;
        st->phase = now < st->end ? MOCK_BPHASE_VALIDATING : MOCK_BPHASE_FAILED;
        return;
    }
    natural = st->t0 + c->delay_ms + (openai ? c->finalize_ms : 0);
    st->end = natural;
    if (c->expire_ms >= 0)
        expiry = b->created + c->expire_ms;
    if (b->cancel_at >= 0 && c->honor_cancel)
        cancel = b->cancel_at;
    if (cancel < natural && cancel <= expiry) {
        st->cut = cancel;
        st->end = cancel + c->cancel_ms;
        st->reason = MOCK_BEND_CANCELLED;
    } else if (expiry < natural) {
        st->cut = st->end = expiry;
        st->reason = MOCK_BEND_EXPIRED;
    }
    for (size_t i = 0; i < b->nitems; i++)
        st->n[mock__batch_item(b, st, i, now)]++;
    if (now >= st->end)
        st->phase = MOCK_BPHASE_ENDED;
    else if (b->cancel_at >= 0 && now >= b->cancel_at)
        st->phase = MOCK_BPHASE_CANCELLING;
    else if (now < st->t0)
        st->phase = MOCK_BPHASE_VALIDATING;
    else if (openai && now >= st->t0 + c->delay_ms)
        st->phase = MOCK_BPHASE_FINALIZING;
    else
        st->phase = MOCK_BPHASE_IN_PROGRESS;
}

/* ---- the store ----------------------------------------------------------- */

struct mock_bstore *
mock__bstore(struct mock_engine *e)
{
    if (e->batches == NULL)
        e->batches = xcalloc(1, sizeof(*e->batches));
    return e->batches;
}

static void
batch_free(struct mock_batch *b)
{
    for (size_t i = 0; i < b->nitems; i++) {
        free(b->items[i].custom_id);
        free(b->items[i].body);
    }
    free(b->items);
    free(b->input_file_id);
    free(b->endpoint);
    cJSON_Delete(b->metadata);
    cJSON_Delete(b->errors);
    free(b);
}

void
mock__bstore_free(struct mock_bstore *s)
{
    struct mock_batch *b, *nb;
    struct mock_bfile *f, *nf;

    if (s == NULL)
        return;
    for (b = s->batches; b != NULL; b = nb) {
        nb = b->next;
        batch_free(b);
    }
    for (f = s->files; f != NULL; f = nf) {
        nf = f->next;
        free(f->filename);
        free(f->purpose);
        free(f->data);
        free(f);
    }
    free(s);
}

/* live counts the batches of route r that have not ended. */
static size_t
live(struct mock_bstore *s, const struct mock_route *r, int64_t now)
{
    struct mock_bstate st;
    size_t n = 0;

    for (struct mock_batch *b = s->batches; b != NULL; b = b->next) {
        if (b->route != r)
            continue;
        mock__batch_state(b, now, &st);
        n += st.phase != MOCK_BPHASE_ENDED && st.phase != MOCK_BPHASE_FAILED;
    }
    return n;
}

struct mock_batch *
mock__batch_new(struct mock_bctx *x, enum mock_bapi api, size_t n)
{
    struct mock_bstore *s = mock__bstore(x->e);
    struct mock_batch *b;
    char msg[200];

    if (live(s, x->r, x->now) >= (size_t)x->r->batch.max_batches) {
        snprintf(msg, sizeof(msg),
                 "Too many batches in progress: this endpoint takes at most "
                 "%" PRId64 " at a time.",
                 x->r->batch.max_batches);
        x->status = 429;
        x->body = api == MOCK_BAPI_OPENAI
                      ? mock__error_body(msg, "invalid_request_error",
                                         "batch_limit_exceeded")
                      : mock__anthropic_error("rate_limit_error", msg);
        return NULL;
    }
    b = xcalloc(1, sizeof(*b));
    b->api = api;
    b->route = x->r;
    b->created = x->now;
    b->cancel_at = -1;
    b->items = xcalloc(n ? n : 1, sizeof(*b->items));
    snprintf(b->id, sizeof(b->id), "%s%06" PRIu64,
             api == MOCK_BAPI_OPENAI ? "batch_mock" : "msgbatch_mock",
             ++s->next_id);
    b->next = s->batches;
    s->batches = b;
    s->nbatches++;
    return b;
}

struct mock_batch *
mock__batch_find(struct mock_bctx *x, enum mock_bapi api, const char *id)
{
    struct mock_bstore *s = mock__bstore(x->e);

    for (struct mock_batch *b = s->batches; b != NULL; b = b->next) {
        if (b->api == api && b->route == x->r && strcmp(b->id, id) == 0)
            return b;
    }
    return NULL;
}

/* ---- shared pieces ------------------------------------------------------- */

int64_t
mock__batch_wall_s(const struct mock_engine *e, int64_t t)
{
    return (t + e->wall_offset) / 1000;
}

cJSON *
mock__batch_chat(struct mock_engine *e, const struct mock_batch *b, size_t i)
{
    const struct mock_bitem *it = &b->items[i];
    cJSON *req = cJSON_Parse(it->body), *chat;
    int64_t tokens = 0;
    char id[96], *s;

    s = mock__chat_body(e, b->route, NULL, req, (int64_t)strlen(it->body) / 4,
                        &tokens);
    chat = cJSON_Parse(s);
    free(s);
    cJSON_Delete(req);
    if (chat == NULL)
        abort(); /* mock__chat_body prints with cJSON: always JSON */
    snprintf(id, sizeof(id), "chatcmpl-%s-%zu", b->id, i + 1);
    cJSON_ReplaceItemInObject(chat, "id", cJSON_CreateString(id));
    cJSON_ReplaceItemInObject(chat, "created",
                              cJSON_CreateNumber((double)mock__batch_wall_s(
                                  e, mock__batch_item_done(b, i))));
    return chat;
}

void
mock__batch_log(struct mock_bctx *x, const char *api, const char *op)
{
    x->log = cJSON_CreateObject();
    cJSON_AddStringToObject(x->log, "api", api);
    cJSON_AddStringToObject(x->log, "op", op);
}

void
mock__batch_reply(struct mock_bctx *x, int status, cJSON *o)
{
    x->status = status;
    x->body = json_print(o);
    cJSON_Delete(o);
}

size_t
mock__batch_failed(const struct mock_bstate *st)
{
    return st->n[MOCK_BOUT_ERRORED] + st->n[MOCK_BOUT_EXPIRED] +
           st->n[MOCK_BOUT_CANCELED];
}

void
mock__openai_fail(struct mock_bctx *x, int status, const char *msg,
                  const char *code)
{
    x->status = status;
    x->body = mock__error_body(msg, "invalid_request_error", code);
}

void
mock__openai_invalid_url(struct mock_bctx *x)
{
    char msg[512];

    snprintf(msg, sizeof(msg), "Invalid URL (%s %.400s)", x->rq->method,
             x->rq->path);
    mock__openai_fail(x, 404, msg, NULL);
}

char *
mock__anthropic_error(const char *type, const char *message)
{
    cJSON *root = cJSON_CreateObject(), *err = cJSON_CreateObject();
    char *s;

    cJSON_AddStringToObject(root, "type", "error");
    cJSON_AddStringToObject(err, "type", type);
    cJSON_AddStringToObject(err, "message", message);
    cJSON_AddItemToObject(root, "error", err);
    s = json_print(root);
    cJSON_Delete(root);
    return s;
}

const char *
mock__anthropic_type(int status)
{
    switch (status) {
    case 400:
        return "invalid_request_error";
    case 401:
        return "authentication_error";
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 413:
        return "request_too_large";
    case 429:
        return "rate_limit_error";
    case 529:
        return "overloaded_error";
    default:
        return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

/* ---- routing ------------------------------------------------------------- */

/* seg_before returns the start of the segment that ends at end (a '/' or
 * the string's end) in path, or NULL when none. */
static const char *
seg_before(const char *path, const char *end)
{
    const char *p = end;

    if (p <= path)
        return NULL;
    while (p > path && p[-1] != '/')
        p--;
    return p > path ? p : NULL;
}

static bool
seg_is(const char *seg, const char *end, const char *name)
{
    size_t n = strlen(name);
    return seg != NULL && (size_t)(end - seg) == n &&
           strncmp(seg, name, n) == 0;
}

bool
mock__batch_answer(struct mock_engine *e, struct mock_route *r,
                   const struct mock_request *rq, int64_t now,
                   struct mock_reply *out, int *status, char **body,
                   const char **ctype)
{
    struct mock_bctx x = {.e = e, .r = r, .rq = rq, .now = now};
    const char *segs[3], *ends[3], *end = rq->path + strlen(rq->path);
    char *copy = NULL, *id = NULL, *verb = NULL;
    int n = 0, k = -1;
    bool files = false, anthropic = false;

    /* The collection ("batches" or "files") is one of the last three
     * segments: the collection, an id, a verb. */
    while (end > rq->path && end[-1] == '/')
        end--;
    for (; n < 3; n++) {
        segs[n] = seg_before(rq->path, end);
        ends[n] = end;
        if (segs[n] == NULL)
            break;
        end = segs[n] - 1;
    }
    for (int i = n - 1; i >= 0 && k < 0; i--) {
        if (seg_is(segs[i], ends[i], "batches") ||
            seg_is(segs[i], ends[i], "files"))
            k = i;
    }
    if (k < 0)
        return false;
    files = seg_is(segs[k], ends[k], "files");
    anthropic =
        !files && segs[k] - 1 > rq->path &&
        seg_is(seg_before(rq->path, segs[k] - 1), segs[k] - 1, "messages");
    copy = xstrndup(rq->path, (size_t)(ends[k] - rq->path));
    if (k >= 1)
        id = xstrndup(segs[k - 1], (size_t)(ends[k - 1] - segs[k - 1]));
    if (k >= 2)
        verb = xstrndup(segs[k - 2], (size_t)(ends[k - 2] - segs[k - 2]));
    x.coll = copy;
    x.id = id;
    x.verb = verb;
    x.json = out->request_json;
    if (anthropic)
        mock__anthropic_batches(&x);
    else if (files)
        mock__openai_files(&x);
    else
        mock__openai_batches(&x);
    free(copy);
    free(id);
    free(verb);
    *status = x.status;
    *body = x.body;
    *ctype = x.ctype;
    out->batch_log = x.log;
    return true;
}

/* batch_apply.c: the provider's answers to a batch's calls, and its
 * results applied to the runs that wait in it: each item's answer, found
 * by its custom_id, goes through classify and decide like a realtime
 * answer (worker__answer), costed at the tier's price (the batch price)
 * from its usage, in its own ledger row; an item that errored, expired or
 * was cancelled is an answer that failed, and its step leaves the batch
 * tier for the step's other tiers. */
#include "worker/batch_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "queue/batch.h"

/* A listing reads at most this many pages looking for a batch. */
#define FIND_PAGES 10

static int
by_id(const void *a, const void *b)
{
    return strcmp(((const struct http_batch_result *)a)->custom_id,
                  ((const struct http_batch_result *)b)->custom_id);
}

static const struct http_batch_result *
result_of(const struct wbatch *b, int64_t attempt_id)
{
    struct http_batch_result key = {0};
    char cid[32];

    batch__custom_id(attempt_id, cid, sizeof(cid));
    key.custom_id = cid;
    return bsearch(&key, b->res, b->nres, sizeof(*b->res), by_id);
}

/* The answer an item that did not succeed stands for: a 503 whose error
 * names what happened (classify: server_error; never billed). */
static void
failed_answer(const char *what, struct http_response *res)
{
    char body[256];

    snprintf(body, sizeof(body),
             "{\"error\":{\"type\":\"%s\",\"message\":\"the batch item was "
             "not answered: %s\"}}",
             what, what);
    res->status = 503;
    res->body = xstrdup(body);
    res->body_len = strlen(body);
}

void
worker__batch_priced(struct run *r, const struct price_usage *u,
                     const struct q_attempt_result *ar)
{
    const struct config_tier *t = cur_tier(r);
    int64_t nusd = 0;

    if (t == NULL || !t->batch_mode || !ar->priced || ar->cost_estimated ||
        !price_usage_is_complete(u) ||
        price_cost(&t->realtime_price, u, &nusd) != 0)
        return;
    if (q_batch_item_settle(r->w->db, r->attempt_id, nusd) != 0)
        log_warn("job %lld: cannot keep the realtime price of its batch item",
                 (long long)r->job.id);
}

/* Acts on r's item: res as its answer, in the open turn. */
static void
answer_item(struct run *r, struct http_response *res, bool ok)
{
    int ti = r->batch_ti;

    worker__batch_leave(r);
    r->wake_at = 0;
    r->cur_tier = ti;
    r->send_id = 0;
    /* Not ok: the step goes on on its other tiers, not in a batch again. */
    if (!ok)
        r->switched[ti] = true;
    worker__hold(r, res);
    r->from_batch = true;
    worker__answer(r);
    r->from_batch = false;
}

static void
apply_one(struct wbatch *b, struct run *r)
{
    const struct http_batch_result *x = result_of(b, r->attempt_id);
    struct http_response res = {0};
    static const char *const names[] = {"batch_succeeded", "batch_errored",
                                        "batch_expired", "batch_cancelled"};

    if (x == NULL) {
        failed_answer("batch_missing", &res);
    } else if (x->kind == HTTP_BATCH_SUCCEEDED ||
               x->kind == HTTP_BATCH_ERRORED) {
        res.status = x->status;
        res.body = xstrdup(x->body ? x->body : "");
        res.body_len = strlen(res.body);
    } else {
        failed_answer(names[x->kind], &res);
    }
    answer_item(r, &res, x != NULL && x->kind == HTTP_BATCH_SUCCEEDED);
    http_response_cleanup(&res);
}

void
batch__apply(struct wbatch *b, int64_t now)
{
    struct worker *w = b->w;
    struct q_batch_item *items = NULL;
    size_t n = 0, left = 0;

    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (r->batch == b && !run_has_left(r))
            apply_one(b, r);
    }
    if (q_batch_items(w->db, b->id, &items, &n) != 0)
        return;
    for (size_t i = 0; i < n; i++)
        left += !items[i].finished;
    free(items);
    /* Every item answered: the batch is done. Items of jobs another
     * worker holds now are applied by that worker, which reads the
     * results itself. */
    if (left == 0 && batch__set(b, Q_BATCH_DONE, now) != 0)
        log_warn("batch %lld: cannot mark it done", (long long)b->id);
}

void
batch__late(struct run *r)
{
    struct http_response res = {0};

    failed_answer("batch_late", &res);
    answer_item(r, &res, false);
    http_response_cleanup(&res);
}

void
batch__give_back(struct wbatch *b, int64_t now)
{
    struct worker *w = b->w;

    log_warn("tier %s: batch %lld was not sent; its steps go on without it",
             wb_tier(b)->name, (long long)b->id);
    b->phase = WB_APPLIED;
    b->nres = 0;
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        struct http_response res = {0};
        if (r->batch != b || run_has_left(r))
            continue;
        failed_answer("batch_not_submitted", &res);
        answer_item(r, &res, false);
        http_response_cleanup(&res);
    }
    if (batch__set(b, Q_BATCH_DONE, now) != 0)
        log_warn("batch %lld: cannot mark it done", (long long)b->id);
}

/* The provider knows b as id: kept, and polled from now on. */
static void
known(struct wbatch *b, const char *id, int64_t now)
{
    free(b->provider_id);
    b->provider_id = xstrdup(id);
    cJSON_Delete(b->bodies);
    b->bodies = NULL;
    if (batch__set(b, Q_BATCH_SUBMITTED, now) != 0)
        log_warn("batch %lld: cannot keep its provider id %s", (long long)b->id,
                 id);
    log_info("tier %s: batch %lld is %s at the provider", wb_tier(b)->name,
             (long long)b->id, id);
    b->phase = WB_POLL;
    b->next_at = now + wb_tier(b)->batch.poll_ms;
}

/* Whether a listed batch is b. OpenAI's carries b's key in its metadata.
 * Anthropic's batches carry no metadata: one created no earlier than a
 * minute before b was recorded, with as many items, that the store
 * knows under no other record, is taken for it. */
static bool
is_it(const struct wbatch *b, const struct http_batch_status *s)
{
    struct q_batch *rows = NULL;
    size_t n = 0;
    bool taken = false;

    if (wb_tier(b)->batch.api == CONFIG_BATCH_OPENAI)
        return s->key != NULL && strcmp(s->key, b->key) == 0;
    if (s->created_at < b->created_at - 60000 || s->total != b->items)
        return false;
    if (q_batches_open(b->w->db, wb_tier(b)->name, &rows, &n) != 0)
        return false;
    for (size_t i = 0; i < n; i++)
        taken |= rows[i].provider_id != NULL && rows[i].id != b->id &&
                 strcmp(rows[i].provider_id, s->id) == 0;
    q_batches_free(rows, n);
    return !taken;
}

/* A page of the provider's list: b found, or the next page, or b was
 * never created (its items go back). */
static void
on_list(struct wbatch *b, const cJSON *root, int64_t now)
{
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data"), *e;
    const cJSON *more = cJSON_GetObjectItemCaseSensitive(root, "has_more");
    const cJSON *last = cJSON_GetObjectItemCaseSensitive(root, "last_id");
    int api = wb_tier(b)->batch.api;

    cJSON_ArrayForEach(e, data)
    {
        struct http_batch_status s;
        bool found;
        if (http_batch_status_read(api, e, &s) != 0)
            continue;
        found = is_it(b, &s);
        if (found)
            known(b, s.id, now);
        http_batch_status_cleanup(&s);
        if (found)
            return;
    }
    if (cJSON_IsTrue(more) && cJSON_IsString(last) && ++b->pages < FIND_PAGES) {
        free(b->after);
        b->after = xstrdup(last->valuestring);
        b->next_at = now;
        return;
    }
    batch__give_back(b, now);
}

/* The batch object of a poll: still running, or ended (its results are
 * fetched next), or failed before it ran (its items go back). */
static void
on_status(struct wbatch *b, const cJSON *root, int64_t now)
{
    struct http_batch_status s;

    if (http_batch_status_read(wb_tier(b)->batch.api, root, &s) != 0) {
        b->next_at = now + wb_tier(b)->batch.poll_ms;
        return;
    }
    if (!s.ended) {
        b->next_at = now + wb_tier(b)->batch.poll_ms;
    } else if (s.failed) {
        batch__give_back(b, now);
    } else if (wb_tier(b)->batch.api == CONFIG_BATCH_OPENAI) {
        free(b->out_file);
        free(b->err_file);
        b->out_file = s.output_file_id;
        b->err_file = s.error_file_id;
        s.output_file_id = s.error_file_id = NULL;
        b->phase = b->out_file ? WB_FETCH_OUT : WB_FETCH_ERR;
        b->next_at = now;
    } else {
        b->phase = WB_FETCH_ANT;
        b->next_at = now;
    }
    http_batch_status_cleanup(&s);
}

/* The results are all in: sorted by custom_id and applied. */
static void
results_in(struct wbatch *b, int64_t now)
{
    qsort(b->res, b->nres, sizeof(*b->res), by_id);
    b->phase = WB_APPLIED;
    if (batch__set(b, Q_BATCH_ENDED, now) != 0)
        log_warn("batch %lld: cannot mark it ended", (long long)b->id);
    batch__apply(b, now);
}

static void
on_results(struct wbatch *b, const struct http_response *res, int64_t now)
{
    http_batch_results_read(wb_tier(b)->batch.api, res->body, res->body_len,
                            &b->res, &b->nres, &b->capres);
    if (b->phase == WB_FETCH_OUT && b->err_file != NULL) {
        b->phase = WB_FETCH_ERR;
        b->next_at = now;
        return;
    }
    results_in(b, now);
}

/* A call that failed: a create that may have reached the provider is
 * looked for before anything else; an upload that failed sent no batch;
 * anything else is asked again after the poll interval. */
static void
on_failure(struct wbatch *b, const struct http_response *res, int64_t now)
{
    log_warn("tier %s: batch %lld: a call failed: %s %d", wb_tier(b)->name,
             (long long)b->id,
             res->error != HTTP_ERR_NONE ? http_error_name(res->error) : "HTTP",
             res->status);
    if (b->phase == WB_UPLOAD) {
        batch__give_back(b, now);
        return;
    }
    if (b->phase == WB_CREATE) {
        b->phase = WB_FIND;
        b->next_at = now;
        return;
    }
    b->next_at = now + wb_tier(b)->batch.poll_ms;
}

void
batch__on_answer(struct wbatch *b, struct http_response *res, int64_t now)
{
    cJSON *root = NULL;
    const cJSON *id;

    if (res->error != HTTP_ERR_NONE || res->status < 200 || res->status > 299) {
        on_failure(b, res, now);
        return;
    }
    if (b->phase == WB_FETCH_OUT || b->phase == WB_FETCH_ERR ||
        b->phase == WB_FETCH_ANT) {
        on_results(b, res, now);
        return;
    }
    root = json_parse_exact(res->body, res->body_len);
    id = cJSON_GetObjectItemCaseSensitive(root, "id");
    switch (b->phase) {
    case WB_UPLOAD:
        if (!cJSON_IsString(id)) {
            batch__give_back(b, now);
            break;
        }
        b->file_id = xstrdup(id->valuestring);
        b->phase = WB_CREATE;
        b->next_at = now;
        break;
    case WB_CREATE:
        if (cJSON_IsString(id))
            known(b, id->valuestring, now);
        else
            on_failure(b, res, now);
        break;
    case WB_FIND:
        on_list(b, root, now);
        break;
    default:
        on_status(b, root, now);
        break;
    }
    cJSON_Delete(root);
}

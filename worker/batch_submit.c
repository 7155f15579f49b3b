/* batch_submit.c: gathering the steps of a tier in batch mode and
 * recording them as one batch before anything is sent: the batch first
 * (its key, the metadata that finds it again at the provider), then each
 * step's attempt in the ledger and its item, with its budgets reserved
 * like a realtime send's; and the calls of a batch in hand built for its
 * provider (http/batch.c has the bodies). */
#include "worker/batch_internal.h"
#include "worker/money.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "queue/batch.h"

#define CALL_TIMEOUT_MS 120000

void
worker__batch_gather(struct run *r, int ti, int64_t now)
{
    struct worker *w = r->w;

    r->batch_ti = ti;
    r->batch = NULL;
    worker__run_to(r, WORKER_RUN_GATHERING);
    r->admit_since = 0;
    r->wake_at = WORKER_BATCH_WAKE;
    if (w->gather_since[ti] == 0)
        w->gather_since[ti] = now;
    worker__kick(w);
}

/* Records r's item of batch b: its budgets, its attempt, its item. Returns
 * 0; -E2BIG when it would pass the step's max_total_tokens (the job has
 * failed); -EDQUOT when a budget cannot cover it (r goes elsewhere); or a
 * storage error (r is given back). */
static int
record_item(struct wbatch *b, struct run *r, int64_t now)
{
    struct worker *w = b->w;
    const struct config_tier *t = wb_tier(b);
    cJSON *body = worker__chat_body(r);
    int64_t est, at = 0;
    char why[256];
    struct q_attempt_start st;
    int rc;

    cJSON_DeleteItemFromObjectCaseSensitive(body, "model");
    cJSON_AddStringToObject(body, "model", t->model);
    est = worker__estimate_tokens(body, &r->input_tokens);
    if (worker__over_max_total(r, est, why, sizeof(why))) {
        cJSON_Delete(body);
        worker__batch_leave(r);
        worker__fail_job(r, why);
        return -E2BIG;
    }
    if ((rc = worker__budget_reserve(r, t, r->input_tokens, est, now, &at, why,
                                     sizeof(why))) != 0) {
        cJSON_Delete(body);
        return rc;
    }
    free(r->body);
    r->body = json_print(body);
    r->body_len = strlen(r->body);
    worker__sha256_hex(r->body, r->body_len, r->sha);
    st = (struct q_attempt_start){.job_id = r->job.id,
                                  .step = r->step,
                                  .worker = w->id,
                                  .tier = t->name,
                                  .request_sha256 = r->sha,
                                  .est_tokens = est,
                                  .started_at = now,
                                  .route = r->route[0] ? r->route : NULL};
    cJSON_Delete(body);
    /* A store that defers the record writes its id at the commit: the
     * item is linked to it then (batch__link). */
    if ((rc = q_attempt_begin(w->db, &st, &r->attempt_id, &r->attempt_no)) !=
        0) {
        worker__budget_settle(r, 0, now);
        return rc;
    }
    r->attempt_est = est;
    r->send_id = 0;
    r->send_est = est;
    r->sent_at = now;
    r->cur_tier = b->ti;
    (*sends_on(r, b->ti))++;
    r->batch = b;
    worker__run_to(r, WORKER_RUN_BATCHED);
    b->items++;
    return 0;
}

void
batch__submit(struct worker *w, int ti, int64_t now)
{
    const struct config_tier *t = &w->cfg->tiers[ti];
    struct wbatch *b;
    char key[128];
    int64_t id = 0;
    int rc;

    w->gather_since[ti] = 0;
    snprintf(key, sizeof(key), "%.80s-%llu-%lld", w->id,
             (unsigned long long)++w->batch_seq, (long long)now);
    for (char *p = key; *p != '\0'; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '-'))
            *p = '_';
    }
    /* Recorded before it is sent: a crash from here on leaves a batch
     * without a provider id, which is looked up before anything is sent
     * again (WB_TAKE, WB_FIND). */
    rc = q_batch_create(w->db, t->name,
                        t->batch.api == CONFIG_BATCH_OPENAI ? "openai"
                                                            : "anthropic",
                        key, w->id, now + w->lease_ms, now, &id);
    if (rc != 0) {
        log_warn("tier %s: cannot record a batch; its steps go on later",
                 t->name);
        for (struct run *r = w->runs; r != NULL; r = r->next) {
            if (r->state == WORKER_RUN_GATHERING && r->batch_ti == ti) {
                worker__batch_leave(r);
                worker__give_back(r, now + 1000);
            }
        }
        return;
    }
    b = batch__new(w, id, ti, key);
    b->fresh = true;
    b->created_at = now;
    b->bodies = cJSON_CreateArray();
    b->phase = WB_LINK;
    b->next_at = WORKER_BATCH_WAKE;
    for (struct run *r = w->runs; r != NULL; r = r->next) {
        if (r->state != WORKER_RUN_GATHERING || r->batch_ti != ti)
            continue;
        if (b->items >= t->batch.max_items) {
            w->gather_since[ti] = now; /* the rest: the next batch */
            continue;
        }
        rc = record_item(b, r, now);
        if (rc == -EDQUOT) {
            /* Its budget cannot cover it in the batch: another tier. */
            worker__batch_leave(r);
            r->switched[ti] = true;
            worker__attempt(r);
        } else if (rc != 0 && rc != -E2BIG) {
            worker__batch_leave(r);
            worker__unrecorded(r, rc);
        }
    }
    log_info("tier %s: batch %lld recorded with %lld items", t->name,
             (long long)id, (long long)b->items);
    /* Its record waits for the disk: after a power loss that undid it, the
     * items would be sent again without anyone looking for the batch. */
    if (b->items > 0 && q_tx_durable(w->db) != 0)
        log_warn("tier %s: batch %lld not known to be on disk", t->name,
                 (long long)id);
}

void
batch__link(struct wbatch *b, int64_t now)
{
    struct worker *w = b->w;
    char cid[32];

    for (struct run *r = w->runs; r != NULL; r = r->next) {
        cJSON *item, *req;
        int rc;
        if (r->batch != b || run_has_left(r))
            continue;
        if (r->attempt_id <= 0) { /* the lease was lost at the record */
            worker__batch_leave(r);
            worker__unrecorded(r, -EBUSY);
            continue;
        }
        rc = q_batch_item_add(w->db, b->id, r->attempt_id, r->job.id, r->step);
        req = rc == 0 ? cJSON_Parse(r->body) : NULL;
        if (req == NULL) {
            /* Not an item: its attempt, never sent, is settled as in
             * doubt by whoever takes the job next. */
            worker__batch_leave(r);
            worker__give_back(r, now + 1000);
            continue;
        }
        batch__custom_id(r->attempt_id, cid, sizeof(cid));
        item = cJSON_CreateObject();
        cJSON_AddStringToObject(item, "custom_id", cid);
        cJSON_AddItemToObject(item, "request", req);
        cJSON_AddItemToArray(b->bodies, item);
    }
    b->phase =
        wb_tier(b)->batch.api == CONFIG_BATCH_OPENAI ? WB_UPLOAD : WB_CREATE;
    b->next_at = now;
    b->items = cJSON_GetArraySize(b->bodies); /* as the store counts them */
    b->renew_at = now + w->lease_ms / 3;
    if (cJSON_GetArraySize(b->bodies) == 0)
        batch__give_back(b, now);
    worker__kick(w);
}

/* The OpenAI JSONL upload, or Anthropic's create, of b's items. */
static void
submit_body(struct wbatch *b, struct http_batch_item **items, size_t *n)
{
    const cJSON *it;
    size_t i = 0;

    *n = (size_t)cJSON_GetArraySize(b->bodies);
    *items = xcalloc(*n + 1, sizeof(**items));
    cJSON_ArrayForEach(it, b->bodies)
    {
        (*items)[i].custom_id =
            cJSON_GetObjectItemCaseSensitive(it, "custom_id")->valuestring;
        (*items)[i].request = cJSON_GetObjectItemCaseSensitive(it, "request");
        i++;
    }
}

/* The path and body of b's phase; *body NULL for a GET. */
static int
call_of(struct wbatch *b, char *path, size_t plen, char **body, size_t *blen,
        char **ctype)
{
    bool openai = wb_tier(b)->batch.api == CONFIG_BATCH_OPENAI;
    struct http_batch_item *items = NULL;
    size_t n = 0;

    *body = NULL;
    *ctype = NULL;
    switch (b->phase) {
    case WB_UPLOAD:
        submit_body(b, &items, &n);
        http_batch_openai_upload(items, n, b->key, body, blen, ctype);
        snprintf(path, plen, "/files");
        break;
    case WB_CREATE:
        if (openai) {
            *body = http_batch_openai_create(b->file_id, b->key);
            snprintf(path, plen, "/batches");
        } else {
            submit_body(b, &items, &n);
            *body = http_batch_anthropic_create(items, n);
            snprintf(path, plen, "/messages/batches");
        }
        *blen = strlen(*body);
        *ctype = xstrdup("application/json");
        break;
    case WB_FIND:
        snprintf(path, plen, "%s?limit=100%s%s",
                 openai ? "/batches" : "/messages/batches",
                 b->after ? (openai ? "&after=" : "&after_id=") : "",
                 b->after ? b->after : "");
        break;
    case WB_POLL:
        snprintf(path, plen, "%s/%s", openai ? "/batches" : "/messages/batches",
                 b->provider_id);
        break;
    case WB_FETCH_OUT:
    case WB_FETCH_ERR:
        snprintf(path, plen, "/files/%s/content",
                 b->phase == WB_FETCH_OUT ? b->out_file : b->err_file);
        break;
    case WB_FETCH_ANT:
        snprintf(path, plen, "/messages/batches/%s/results", b->provider_id);
        break;
    default:
        return -EINVAL;
    }
    free(items);
    return 0;
}

int
batch__request(struct wbatch *b, struct http_request *req)
{
    char path[512], err[512], *body = NULL, *ctype = NULL;
    size_t blen = 0;
    int rc;

    if ((rc = call_of(b, path, sizeof(path), &body, &blen, &ctype)) != 0)
        return rc;
    rc = http_tier_call(wb_tier(b), body ? "POST" : "GET", path, ctype, body,
                        blen, CALL_TIMEOUT_MS, req, err, sizeof(err));
    if (rc != 0)
        log_warn("tier %s: batch %lld: %s", wb_tier(b)->name, (long long)b->id,
                 err);
    free(body);
    free(ctype);
    return rc;
}

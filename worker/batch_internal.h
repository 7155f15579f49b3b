/* batch_internal.h: what the batch files of worker/ share (batch.c: the
 * batches in hand, their calls and the tick; batch_submit.c: gathering and
 * recording a batch and its items; batch_apply.c: the answers of the
 * provider, results applied to the runs by custom_id). Private to them. */
#ifndef STEPQ_WORKER_BATCH_INTERNAL_H
#define STEPQ_WORKER_BATCH_INTERNAL_H

#include "worker/batch.h"

/* What a batch in hand does next: each a call to the provider, made when
 * its tier's pace admits it. */
enum wb_phase {
    WB_LINK,      /* recorded; its items are linked once the ids are in */
    WB_UPLOAD,    /* OpenAI: POST /files, the JSONL of its items */
    WB_CREATE,    /* POST /batches or /messages/batches */
    WB_TAKE,      /* recorded, not known to be sent: take its lease */
    WB_FIND,      /* list the provider's batches to find it */
    WB_POLL,      /* GET the batch */
    WB_FETCH_OUT, /* OpenAI: its output file */
    WB_FETCH_ERR, /* OpenAI: its error file */
    WB_FETCH_ANT, /* Anthropic: its results */
    WB_APPLIED,   /* results in hand, applied to the runs that wait */
};

struct wbatch {
    struct wbatch *next;
    struct worker *w;
    int64_t id; /* the store's */
    int ti;     /* its config tier */
    char key[128];
    char *provider_id; /* owned; NULL until known */
    int64_t created_at;
    int64_t items;
    enum wb_phase phase;
    int64_t next_at;         /* the next call is due then */
    int64_t renew_at;        /* its lease is renewed then, while sent */
    bool fresh;              /* recorded in the open turn */
    bool pending;            /* req admitted, sent after the commit */
    struct http_request req; /* owned while pending */
    int64_t send_id;         /* the tier's send of the call */
    http_call *call;
    cJSON *bodies;  /* owned: [{custom_id, request}] until submitted */
    char *file_id;  /* owned: OpenAI's uploaded input */
    char *after;    /* owned: the list's next page starts after it */
    int pages;      /* pages of the list read */
    char *out_file; /* owned: OpenAI's output file */
    char *err_file; /* owned: OpenAI's error file */
    struct http_batch_result *res; /* owned, sorted by custom_id once */
    size_t nres, capres;
};

/* The tier of b. */
static inline const struct config_tier *
wb_tier(const struct wbatch *b)
{
    return &b->w->cfg->tiers[b->ti];
}

/* batch__custom_id writes the custom_id of attempt id ("a<id>"). */
void batch__custom_id(int64_t attempt_id, char *buf, size_t len);
/* batch__submit records the gathering of tier ti as a batch: the batch,
 * then each run's attempt and item (batch_submit.c). */
void batch__submit(struct worker *w, int ti, int64_t now);
/* batch__link, in a turn after the one that recorded b committed (the
 * attempts' ids are known then on every store): each run's item
 * recorded and its request kept for the submission (batch_submit.c). */
void batch__link(struct wbatch *b, int64_t now);
/* batch__request builds the call of b's phase into *req. Returns 0, or
 * -EINVAL (logged) (batch_submit.c). */
int batch__request(struct wbatch *b, struct http_request *req);
/* batch__on_answer acts on the answer to b's call, in the open turn
 * (batch_apply.c). */
void batch__on_answer(struct wbatch *b, struct http_response *res, int64_t now);
/* batch__apply applies b's results to the runs waiting in it, and marks
 * b done once every item's attempt has a result (batch_apply.c). */
void batch__apply(struct wbatch *b, int64_t now);
/* batch__late: the deadline of r's job passed while it waited in b: its
 * item is answered as failed (batch_late) and decide ends the step
 * (batch_apply.c). */
void batch__late(struct run *r);
/* batch__give_back: b was never sent (nor found at the provider): each
 * run waiting in it gets its item back, as not sent (batch_apply.c). */
void batch__give_back(struct wbatch *b, int64_t now);
/* batch__set stores b's state (and provider id) as held by this worker.
 * Returns q_batch_set's result (batch.c). */
int batch__set(struct wbatch *b, int state, int64_t now);
/* batch__new adds a batch in hand to w (batch.c). */
struct wbatch *batch__new(struct worker *w, int64_t id, int ti,
                          const char *key);

#endif

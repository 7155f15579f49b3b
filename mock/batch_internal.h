/* batch_internal.h: the mock's batch APIs, what batch.c, batch_files.c,
 * batch_openai.c and batch_anthropic.c share, and the few calls the rest
 * of mock/ makes into them (the script's batch settings, the answer's
 * dispatch, freeing the store). Private to mock/. */
#ifndef STEPQ_MOCK_BATCH_INTERNAL_H
#define STEPQ_MOCK_BATCH_INTERNAL_H

#include "mock/internal.h"

/* What the store keeps at most, whatever the script says: the bytes of
 * uploads and batch items, uploaded files, and batches (ended ones too;
 * a mock run is finite, so nothing is evicted: above these, refusals). */
#define MOCK_BSTORE_MAX_BYTES   (64u << 20)
#define MOCK_BSTORE_MAX_FILES   256
#define MOCK_BSTORE_MAX_BATCHES 1000

enum mock_bapi {
    MOCK_BAPI_OPENAI = 0, /* files + /v1/batches */
    MOCK_BAPI_ANTHROPIC,  /* /v1/messages/batches */
};

/* What the script made of an item when the batch was created. */
enum mock_bfate {
    MOCK_BFATE_OK = 0,
    MOCK_BFATE_ERROR,  /* answered with the route's batch.error_status */
    MOCK_BFATE_EXPIRE, /* never processed: expired (or canceled) at the end */
};

/* Where an item stands at a given time. */
enum mock_bout {
    MOCK_BOUT_PROCESSING = 0,
    MOCK_BOUT_SUCCEEDED,
    MOCK_BOUT_ERRORED,
    MOCK_BOUT_CANCELED,
    MOCK_BOUT_EXPIRED,
    MOCK_BOUT_COUNT,
};

/* Where a batch stands. Transitions, all driven by time and cancel:
 * VALIDATING -> FAILED (OpenAI, validation failed) or IN_PROGRESS ->
 * FINALIZING (OpenAI) -> ENDED; a cancel makes any of the live phases
 * CANCELLING -> ENDED. */
enum mock_bphase {
    MOCK_BPHASE_VALIDATING = 0,
    MOCK_BPHASE_FAILED,
    MOCK_BPHASE_IN_PROGRESS,
    MOCK_BPHASE_FINALIZING,
    MOCK_BPHASE_CANCELLING,
    MOCK_BPHASE_ENDED,
};

/* Why a batch ended: its items ran out, its window ran out, or a cancel. */
enum mock_bend {
    MOCK_BEND_NATURAL = 0,
    MOCK_BEND_EXPIRED,
    MOCK_BEND_CANCELLED,
};

struct mock_bitem {
    char *custom_id; /* owned */
    char *body;      /* owned: the request ("body" or "params"), compact */
    enum mock_bfate fate;
};

struct mock_batch {
    struct mock_batch *next; /* newest first */
    enum mock_bapi api;
    char id[48];
    struct mock_route *route; /* borrowed: the script outlives its batches */
    char *input_file_id;      /* owned (OpenAI) */
    char *endpoint;           /* owned (OpenAI) */
    cJSON *metadata;          /* owned; NULL when none */
    cJSON *errors;            /* owned: OpenAI validation errors; NULL: ok */
    struct mock_bitem *items; /* owned array */
    size_t nitems;
    int64_t created;   /* loop ms */
    int64_t cancel_at; /* loop ms of the cancel; -1: none */
    size_t bytes;      /* counted against the store's cap */
};

struct mock_bfile {
    struct mock_bfile *next;
    char id[48];
    const struct mock_route *route; /* borrowed */
    char *filename, *purpose;       /* owned */
    char *data;                     /* owned: as uploaded, NUL added */
    size_t len;
    int64_t created; /* loop ms */
};

struct mock_bstore {
    struct mock_bfile *files;
    struct mock_batch *batches;
    size_t nfiles, nbatches, bytes;
    uint64_t next_id;
};

/* A batch at one moment (mock__batch_state). */
struct mock_bstate {
    enum mock_bphase phase;
    enum mock_bend reason;
    int64_t t0;  /* items start (after validation) */
    int64_t cut; /* items not done before this are not done at all */
    int64_t end; /* the batch ends (or ended) here */
    size_t n[MOCK_BOUT_COUNT];
};

/* The request being answered by a batch endpoint, and the answer. */
struct mock_bctx {
    struct mock_engine *e;
    struct mock_route *r;
    const struct mock_request *rq;
    const cJSON *json; /* the parsed body, borrowed; may be NULL */
    int64_t now;
    const char *coll;  /* the path up to the collection ("/x/v1/batches") */
    const char *id;    /* the segment after it, or NULL */
    const char *verb;  /* the segment after the id ("cancel"), or NULL */
    int status;        /* out */
    char *body;        /* out, owned */
    const char *ctype; /* out: content type; NULL: JSON */
    cJSON *log;        /* out, owned: the log line's "batch" member */
};

/* mock__batch_conf_init sets c to the defaults. */
void mock__batch_conf_init(struct mock_batch_conf *c);
/* mock__batch_conf_parse reads the optional "batch" member of route object
 * obj at path into c. Returns 0 or -EINVAL with "PATH.batch...: why". */
STEPQ_MUST_CHECK int mock__batch_conf_parse(const cJSON *obj, const char *path,
                                            struct mock_batch_conf *c,
                                            char *err, size_t len);
/* mock__batch_conf_cleanup frees the conf's lists. */
void mock__batch_conf_cleanup(struct mock_batch_conf *c);
/* mock__batch_answer answers rq when its path is a batch endpoint (kind
 * "batch"): sets *status, *body (owned), *ctype and out->batch_log, and
 * returns true. False (nothing set) for any other path. */
bool mock__batch_answer(struct mock_engine *e, struct mock_route *r,
                        const struct mock_request *rq, int64_t now,
                        struct mock_reply *out, int *status, char **body,
                        const char **ctype);
/* mock__bstore_free frees every file and batch; NULL is a no-op. */
void mock__bstore_free(struct mock_bstore *s);

/* Shared by batch_openai.c and batch_anthropic.c (batch.c). */
/* mock__batch_state computes where b stands at now. */
void mock__batch_state(const struct mock_batch *b, int64_t now,
                       struct mock_bstate *st);
/* mock__batch_item returns where item i of b stands at now, after st. */
enum mock_bout mock__batch_item(const struct mock_batch *b,
                                const struct mock_bstate *st, size_t i,
                                int64_t now);
/* mock__batch_item_done returns the loop ms item i is done (if it is). */
int64_t mock__batch_item_done(const struct mock_batch *b, size_t i);
/* mock__batch_fate decides item custom_id's fate (1-based index). */
enum mock_bfate mock__batch_fate(const struct mock_batch_conf *c,
                                 const char *custom_id, size_t index);
/* mock__batch_dups marks, for n custom_ids (NULL: none), each one that an
 * earlier one repeats, sorting a copy (n log n). Caller frees. */
bool *mock__batch_dups(const char *const *ids, size_t n);
/* mock__batch_chat returns the chat completion item i of b gets (usage as
 * the chat endpoint computes it, id and created fixed by the item), parsed.
 * Caller deletes. */
cJSON *mock__batch_chat(struct mock_engine *e, const struct mock_batch *b,
                        size_t i);
/* mock__batch_new adds an empty batch of api on x's route to the store,
 * with a fresh id and items room for n. Returns it (owned by the store) or
 * NULL when the route's max_batches are live (x gets the refusal). */
struct mock_batch *mock__batch_new(struct mock_bctx *x, enum mock_bapi api,
                                   size_t n);
/* mock__batch_find returns x's route's batch id of api, or NULL. */
struct mock_batch *mock__batch_find(struct mock_bctx *x, enum mock_bapi api,
                                    const char *id);
/* mock__bstore returns the engine's store, made on first use. */
struct mock_bstore *mock__bstore(struct mock_engine *e);
/* mock__batch_wall_s is loop ms t as Unix seconds of the wall clock. */
int64_t mock__batch_wall_s(const struct mock_engine *e, int64_t t);
/* mock__batch_log starts x->log with the api and operation. */
void mock__batch_log(struct mock_bctx *x, const char *api, const char *op);
/* mock__batch_reply sets x's answer to status and the printed o (deleted). */
void mock__batch_reply(struct mock_bctx *x, int status, cJSON *o);
/* mock__batch_failed counts the items that go to an OpenAI error file. */
size_t mock__batch_failed(const struct mock_bstate *st);
/* mock__openai_fail sets x's answer to an OpenAI invalid_request_error. */
void mock__openai_fail(struct mock_bctx *x, int status, const char *msg,
                       const char *code);
/* mock__openai_invalid_url answers a method and path OpenAI has not: 404. */
void mock__openai_invalid_url(struct mock_bctx *x);
/* mock__bfile_find returns x's route's uploaded file id, or NULL
 * (batch_files.c). */
struct mock_bfile *mock__bfile_find(struct mock_bctx *x, const char *id);
/* mock__openai_files answers /v1/files (batch_files.c). */
void mock__openai_files(struct mock_bctx *x);
/* mock__openai_batches answers /v1/batches (batch_openai.c). */
void mock__openai_batches(struct mock_bctx *x);
/* mock__anthropic_batches answers /v1/messages/batches (batch_anthropic.c). */
void mock__anthropic_batches(struct mock_bctx *x);

#endif

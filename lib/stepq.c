/* stepq.c: libstepq, the public enqueue API (include/stepq.h), a thin
 * facade over spec/ (validation) and queue/ (storage). */
#include "include/stepq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/xalloc.h"
#include "queue/queue.h"
#include "spec/spec.h"

struct stepq {
    q_db *db;
};

int
stepq_open(const char *path, stepq **out, char *err, size_t errlen)
{
    char where[4200]; /* the location, password masked: a longest path */
    q_db *db = NULL;
    int rc;

    if (path == NULL || out == NULL) {
        snprintf(err, errlen, "stepq_open: path and out are required");
        return -EINVAL;
    }
    /* A program enqueues into a database `stepq init` made: a mistyped
     * path must not leave a new empty queue behind that no worker reads. */
    rc = q_open_existing(path, NULL, &db);
    /* Messages name the location with any password masked. */
    path = q_location_redact(path, where, sizeof(where));
    switch (rc) {
    case 0:
        break;
    case -ENOENT:
        snprintf(err, errlen,
                 "no stepq database at %s (create it with `stepq init`)", path);
        return rc;
    case -ESTALE:
        snprintf(err, errlen,
                 "the database at %s is from an older stepq: run `stepq "
                 "init` to migrate it",
                 path);
        return rc;
    case -ENOTSUP:
        snprintf(err, errlen,
                 "the database at %s was made by a newer stepq; upgrade "
                 "stepq",
                 path);
        return rc;
    case -EAGAIN:
        snprintf(err, errlen, "the database at %s stayed locked", path);
        return rc;
    case -EINVAL:
    case -EPROTONOSUPPORT:
        snprintf(err, errlen,
                 "%s: not a database location this stepq can open (%s)", path,
                 q_location_kinds());
        return -EINVAL;
    default:
        snprintf(err, errlen, "cannot open the database at %s", path);
        return rc;
    }
    *out = xcalloc(1, sizeof(**out));
    (*out)->db = db;
    return 0;
}

/* The store's time: this host's clock plus the store's offset. */
static int64_t
store_now(const stepq *q)
{
    return clock_now_ms() + q_clock_offset(q->db);
}

/* Enqueues text through spec/'s one enqueue path: ids and duplicates
 * (may be NULL) get up to cap results, *n (may be NULL) the count. */
static int
enqueue(stepq *q, const char *text, const cJSON *input, const char *key,
        int64_t *ids, bool *dups, size_t cap, size_t *n, char *err,
        size_t errlen)
{
    struct q_enqueue_opts over = {.key = key};
    struct spec_enqueue_opts o = {
        .db = q->db, .now = store_now(q), .input = input, .over = &over};
    const struct q_enqueue_result *res;
    spec_enqueue *e = spec_enqueue_new(&o);
    size_t got = 0;
    int rc;

    /* Jobs are validated and written as they are read, in batches, in one
     * transaction: memory holds a batch, not every parsed job. */
    rc = spec_enqueue_text(e, text, strlen(text), err, errlen);
    res = spec_enqueue_results(e, &got, NULL);
    for (size_t i = 0; rc == 0 && i < got && i < cap; i++) {
        if (ids != NULL)
            ids[i] = res[i].id;
        if (dups != NULL)
            dups[i] = res[i].duplicate;
    }
    if (rc == 0 && n != NULL)
        *n = got;
    spec_enqueue_free(e);
    return rc;
}

int
stepq_enqueue_input(stepq *q, const char *job_json, const char *input_json,
                    const char *key, int64_t *id, bool *duplicate, char *err,
                    size_t errlen)
{
    cJSON *input = NULL;
    int rc;

    if (q == NULL || job_json == NULL) {
        snprintf(err, errlen, "stepq_enqueue: handle and job are required");
        return -EINVAL;
    }
    if (key != NULL && (rc = spec_key_check(key, err, errlen)) != 0)
        return rc;
    if (input_json != NULL &&
        (rc = spec_input_parse(input_json, strlen(input_json), &input, err,
                               errlen)) != 0)
        return rc;
    rc = enqueue(q, job_json, input, key, id, duplicate, 1, NULL, err, errlen);
    cJSON_Delete(input);
    return rc;
}

int
stepq_enqueue(stepq *q, const char *job_json, const char *key, int64_t *id,
              bool *duplicate, char *err, size_t errlen)
{
    return stepq_enqueue_input(q, job_json, NULL, key, id, duplicate, err,
                               errlen);
}

int
stepq_enqueue_many(stepq *q, const char *jobs_json, int64_t *ids,
                   bool *duplicates, size_t cap, size_t *n, char *err,
                   size_t errlen)
{
    if (q == NULL || jobs_json == NULL) {
        snprintf(err, errlen, "stepq_enqueue_many: handle and jobs required");
        return -EINVAL;
    }
    return enqueue(q, jobs_json, NULL, NULL, ids, duplicates, cap, n, err,
                   errlen);
}

int
stepq_job_state(stepq *q, int64_t id, char *buf, size_t len)
{
    struct q_job job = {0};
    int rc;

    if (q == NULL || buf == NULL || len == 0)
        return -EINVAL;
    if ((rc = q_job_get(q->db, id, &job)) != 0)
        return rc;
    snprintf(buf, len, "%s", q_job_state_name(job.state));
    q_job_cleanup(&job);
    return 0;
}

void
stepq_close(stepq *q)
{
    if (q == NULL)
        return;
    q_close(q->db);
    free(q);
}

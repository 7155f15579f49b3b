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

int
stepq_enqueue(stepq *q, const char *job_json, const char *key, int64_t *id,
              bool *duplicate, char *err, size_t errlen)
{
    struct q_enqueue_opts opts = {.key = key};
    struct q_enqueue_result res;
    struct spec_job *spec = NULL;
    struct q_job_new row;
    int rc;

    if (q == NULL || job_json == NULL) {
        snprintf(err, errlen, "stepq_enqueue: handle and job are required");
        return -EINVAL;
    }
    if (key != NULL && (rc = spec_key_check(key, err, errlen)) != 0)
        return rc;
    rc = spec_parse(job_json, strlen(job_json), NULL, &spec, err, errlen);
    if (rc != 0)
        return rc;
    spec_job_row(spec, &row);
    rc = q_enqueue(q->db, &row, 1, &opts, store_now(q), &res);
    spec_job_free(spec);
    if (rc != 0) {
        snprintf(err, errlen, "cannot write the job to the database");
        return rc;
    }
    if (id != NULL)
        *id = res.id;
    if (duplicate != NULL)
        *duplicate = res.duplicate;
    return 0;
}

int
stepq_enqueue_many(stepq *q, const char *jobs_json, int64_t *ids,
                   bool *duplicates, size_t cap, size_t *n, char *err,
                   size_t errlen)
{
    struct spec_store k = {0};
    spec_stream *s;
    int rc;

    if (q == NULL || jobs_json == NULL) {
        snprintf(err, errlen, "stepq_enqueue_many: handle and jobs required");
        return -EINVAL;
    }
    /* Jobs are validated and written as they are read, in batches, in one
     * transaction: memory holds a batch, not every parsed job. */
    k.db = q->db;
    k.now = store_now(q);
    s = spec_stream_new(NULL, SPEC_BATCH_JOBS, spec_store_batch, &k);
    rc = spec_stream_feed(s, jobs_json, strlen(jobs_json), err, errlen);
    if (rc == 0)
        rc = spec_stream_end(s, err, errlen);
    spec_stream_free(s);
    if (rc == 0)
        rc = spec_store_end(&k, true);
    if (k.store_rc != 0)
        snprintf(err, errlen, "cannot write the jobs to the database");
    if (rc == 0) {
        for (size_t i = 0; i < k.n && i < cap; i++) {
            if (ids != NULL)
                ids[i] = k.res[i].id;
            if (duplicates != NULL)
                duplicates[i] = k.res[i].duplicate;
        }
        if (n != NULL)
            *n = k.n;
    }
    spec_store_cleanup(&k);
    return rc;
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

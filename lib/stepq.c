/* stepq.c: libstepq, the public API (include/stepq.h), a thin facade over
 * spec/ (validation, the one enqueue path), queue/ (storage) and park/ (a
 * job's cancel, as `jobs cancel` does it). Reading a job (state, output,
 * wait) is in job.c.
 *
 * The library never writes to its host's standard error: the log lines of
 * the rooms below go to a sink that keeps the first error of the call in
 * progress, on its thread, and a failing call puts it in err. */
#include "include/stepq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "lib/internal.h"
#include "park/park.h"
#include "queue/queue.h"
#include "spec/spec.h"

/* The first error logged on this thread since lib__begin: the detail a
 * store gives where it detects a failure (sqlite3_errmsg, libpq's). */
static _Thread_local char detail[512];

static void
keep_detail(enum log_level level, const char *msg, void *arg)
{
    (void)arg;
    if (level <= LOG_LEVEL_WARN && detail[0] == '\0')
        snprintf(detail, sizeof(detail), "%s", msg);
}

void
lib__begin(char *err, size_t errlen)
{
    log_set_sink(keep_detail, NULL);
    detail[0] = '\0';
    if (err != NULL && errlen > 0)
        err[0] = '\0';
}

int
lib__fail(int rc, char *err, size_t errlen)
{
    size_t n;

    if (rc == 0 || rc == -EINVAL || err == NULL || errlen == 0)
        return rc;
    if (err[0] == '\0')
        snprintf(err, errlen, "%s", stepq_strerror(rc));
    n = strlen(err);
    if (detail[0] != '\0' && n + 3 < errlen)
        snprintf(err + n, errlen - n, " (%s)", detail);
    return rc;
}

const char *
stepq_strerror(int rc)
{
    switch (rc) {
    case 0:
        return "success";
    case -EINVAL:
        return "invalid argument or job";
    case -ENOENT:
        return "no such database, job or step";
    case -EALREADY:
        return "the job has already ended";
    case -ENODATA:
        return "no output";
    case -ETIMEDOUT:
        return "timed out waiting for the job";
    case -ESTALE:
        return "the database is from an older stepq: run `stepq init`";
    case -ENOTSUP:
        return "the database was made by a newer stepq";
    case -EAGAIN:
        return "the database stayed locked: try again";
    case -EIO:
        return "the database cannot be read or written";
    default:
        return "unknown error";
    }
}

void
stepq_free(void *p)
{
    free(p);
}

int
stepq_open(const char *path, stepq **out, char *err, size_t errlen)
{
    char where[4200]; /* the location, password masked: a longest path */
    q_db *db = NULL;
    int rc;

    lib__begin(err, errlen);
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
        return lib__fail(rc, err, errlen);
    case -ESTALE:
        snprintf(err, errlen,
                 "the database at %s is from an older stepq: run `stepq "
                 "init` to migrate it",
                 path);
        return lib__fail(rc, err, errlen);
    case -ENOTSUP:
        snprintf(err, errlen,
                 "the database at %s was made by a newer stepq; upgrade "
                 "stepq",
                 path);
        return lib__fail(rc, err, errlen);
    case -EAGAIN:
        snprintf(err, errlen, "the database at %s stayed locked", path);
        return lib__fail(rc, err, errlen);
    case -EINVAL:
    case -EPROTONOSUPPORT:
        snprintf(err, errlen,
                 "%s: not a database location this stepq can open (%s)", path,
                 q_location_kinds());
        return -EINVAL;
    default:
        snprintf(err, errlen, "cannot open the database at %s", path);
        return lib__fail(rc, err, errlen);
    }
    *out = xcalloc(1, sizeof(**out));
    (*out)->db = db;
    return 0;
}

int64_t
lib__now(const stepq *q)
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
        .db = q->db, .now = lib__now(q), .input = input, .over = &over};
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

    lib__begin(err, errlen);
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
    return lib__fail(rc, err, errlen);
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
    lib__begin(err, errlen);
    if (q == NULL || jobs_json == NULL) {
        snprintf(err, errlen, "stepq_enqueue_many: handle and jobs required");
        return -EINVAL;
    }
    return lib__fail(
        enqueue(q, jobs_json, NULL, NULL, ids, duplicates, cap, n, err, errlen),
        err, errlen);
}

int
stepq_cancel(stepq *q, int64_t id, const char *by, char *err, size_t errlen)
{
    struct park_audit a = {.who = by != NULL ? by : "lib", .source = "lib"};
    int rc;

    lib__begin(err, errlen);
    if (q == NULL) {
        snprintf(err, errlen, "stepq_cancel: a handle is required");
        return -EINVAL;
    }
    a.now = lib__now(q);
    /* The path of `stepq jobs cancel`: the job's open park items close
     * with it, and the audit trail records who cancelled. */
    rc = park_cancel_job_audited(q->db, id, by, &a);
    if (rc == -EINVAL)
        snprintf(err, errlen,
                 "stepq_cancel: by must be a name: UTF-8 text without "
                 "control characters");
    else if (rc == -ENOENT)
        snprintf(err, errlen, "no job %lld", (long long)id);
    else if (rc == -EALREADY)
        snprintf(err, errlen, "job %lld has already ended", (long long)id);
    return lib__fail(rc, err, errlen);
}

void
stepq_close(stepq *q)
{
    if (q == NULL)
        return;
    q_close(q->db);
    free(q);
}

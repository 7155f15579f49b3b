/* enqueue.c: the one enqueue path: a stream's batches written into a
 * store inside one transaction, opened at the first batch and committed
 * at the end: all jobs or none. `stepq enqueue`, `POST /v1/jobs`,
 * libstepq and schedules all come here; the one file of spec/ that
 * writes to a store.
 */
#include "spec/spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/xalloc.h"

struct spec_enqueue {
    struct spec_enqueue_opts o;
    struct q_enqueue_opts over; /* o.over's copy, its run_at made absolute */
    const char **tiers;         /* owned array; the names are cfg's */
    struct spec_opts vopts;     /* each input's validation */
    spec_stream *stream;        /* the input being read */
    bool array;                 /* an earlier input was an array */
    bool in_tx;
    struct q_enqueue_result *res; /* owned: one per job written */
    size_t n, cap;
    int store_rc; /* the storage error that stopped it; 0: none */
};

const char **
spec_tier_names(const struct config *cfg)
{
    const char **names;

    if (cfg == NULL || cfg->ntiers == 0)
        return NULL;
    names = xcalloc(cfg->ntiers, sizeof(*names));
    for (size_t i = 0; i < cfg->ntiers; i++)
        names[i] = cfg->tiers[i].name;
    return names;
}

/* Writes one batch inside the enqueue's transaction. */
static int
on_batch(void *ctx, struct spec_batch *b)
{
    struct spec_enqueue *e = ctx;
    int rc = 0;

    if (e->o.over != NULL && e->o.over->key != NULL && e->n + b->n > 1)
        return -E2BIG; /* the message is written by the caller */
    if (e->o.db == NULL && (rc = e->o.open(e->o.ctx, &e->o.db, &e->o.now)))
        return rc;
    /* A run_at given as a span counts from the enqueue's time, the
     * store's, known from here on. */
    if (e->o.over != NULL && e->o.has_run_after && !e->over.has_run_at) {
        e->over.has_run_at = true;
        e->over.run_at = e->o.now + e->o.run_after_ms;
    }
    for (size_t i = 0; i < b->n; i++) {
        if (b->jobs[i]->run_after_ms >= 0)
            b->rows[i].run_at = e->o.now + b->jobs[i]->run_after_ms;
    }
    if (!e->in_tx && (rc = q_tx_begin(e->o.db)) == 0)
        e->in_tx = true;
    if (e->n + b->n > e->cap) {
        e->cap = (e->n + b->n) * 2;
        e->res = xrealloc(e->res, e->cap * sizeof(*e->res));
    }
    if (rc == 0)
        rc = q_enqueue(e->o.db, b->rows, b->n, e->o.over ? &e->over : NULL,
                       e->o.now, e->res + e->n);
    if (rc != 0) {
        e->store_rc = rc;
        return rc;
    }
    e->n += b->n;
    return 0;
}

spec_enqueue *
spec_enqueue_new(const struct spec_enqueue_opts *o)
{
    struct spec_enqueue *e = xcalloc(1, sizeof(*e));
    struct spec_opts *vopts = &e->vopts;

    e->o = *o;
    if (o->over != NULL)
        e->over = *o->over;
    e->tiers = spec_tier_names(o->cfg);
    vopts->tiers = e->tiers;
    vopts->ntiers = e->tiers != NULL ? o->cfg->ntiers : 0;
    vopts->input = o->input;
    vopts->schedule = o->schedule;
    vopts->tools = o->cfg != NULL ? &o->cfg->tools : NULL;
    vopts->hooks = o->cfg != NULL ? &o->cfg->hooks : NULL;
    e->stream = spec_stream_new(vopts, SPEC_BATCH_JOBS, on_batch, e);
    return e;
}

/* The message of a batch's failure, which the stream does not write. */
static int
failed(struct spec_enqueue *e, int rc, char *err, size_t errlen)
{
    if (rc == -E2BIG) {
        snprintf(err, errlen,
                 "--key applies to a single job, the input has more than "
                 "one");
        return -EINVAL;
    }
    if (e->store_rc != 0)
        snprintf(err, errlen, "cannot write the jobs to the database");
    return rc;
}

int
spec_enqueue_feed(spec_enqueue *e, const char *data, size_t len, char *err,
                  size_t errlen)
{
    int rc = spec_stream_feed(e->stream, data, len, err, errlen);

    return rc != 0 ? failed(e, rc, err, errlen) : 0;
}

int
spec_enqueue_end(spec_enqueue *e, char *err, size_t errlen)
{
    int rc = spec_stream_end(e->stream, err, errlen);

    if (rc != 0)
        return failed(e, rc, err, errlen);
    if (!e->in_tx)
        return 0;
    if (e->o.before_commit != NULL &&
        (rc = e->o.before_commit(e->o.ctx, e->o.db, e->res, e->n)) != 0) {
        e->store_rc = rc; /* spec_enqueue_free rolls it back */
        return failed(e, rc, err, errlen);
    }
    e->in_tx = false;
    /* A failed commit is rolled back by the store. */
    if ((rc = q_tx_commit(e->o.db)) != 0) {
        e->store_rc = rc;
        return failed(e, rc, err, errlen);
    }
    return 0;
}

int
spec_enqueue_next(spec_enqueue *e, char *err, size_t errlen)
{
    int rc = spec_stream_end(e->stream, err, errlen);

    if (rc != 0)
        return failed(e, rc, err, errlen);
    e->array = e->array || spec_stream_is_array(e->stream);
    spec_stream_free(e->stream);
    e->stream = spec_stream_new(&e->vopts, SPEC_BATCH_JOBS, on_batch, e);
    return 0;
}

int
spec_enqueue_text(spec_enqueue *e, const char *text, size_t len, char *err,
                  size_t errlen)
{
    int rc = spec_enqueue_feed(e, text, len, err, errlen);

    return rc != 0 ? rc : spec_enqueue_end(e, err, errlen);
}

const struct q_enqueue_result *
spec_enqueue_results(const spec_enqueue *e, size_t *n, bool *many)
{
    *n = e->n;
    if (many != NULL)
        *many = e->array || spec_stream_is_array(e->stream) || e->n > 1;
    return e->res;
}

bool
spec_enqueue_store_failed(const spec_enqueue *e)
{
    return e->store_rc != 0;
}

void
spec_enqueue_free(spec_enqueue *e)
{
    if (e == NULL)
        return;
    if (e->in_tx)
        q_tx_rollback(e->o.db);
    spec_stream_free(e->stream);
    free(e->tiers);
    free(e->res);
    free(e);
}

/* sink.c: a stream's batches written into a store inside one transaction,
 * opened at the first batch and ended by spec_store_end: all jobs or
 * none. What `stepq enqueue`, `POST /v1/jobs` and libstepq share; the
 * one file of spec/ that writes to a store.
 */
#include "spec/spec.h"

#include <stdlib.h>

#include "common/xalloc.h"

int
spec_store_batch(void *ctx, struct spec_batch *b)
{
    struct spec_store *k = ctx;
    int rc = k->in_tx ? 0 : q_tx_begin(k->db);

    if (k->n + b->n > k->cap) {
        k->cap = (k->n + b->n) * 2;
        k->res = xrealloc(k->res, k->cap * sizeof(*k->res));
    }
    if (rc == 0) {
        k->in_tx = true;
        rc = q_enqueue(k->db, b->rows, b->n, k->over, k->now, k->res + k->n);
    }
    if (rc != 0) {
        k->store_rc = rc;
        return rc;
    }
    k->n += b->n;
    return 0;
}

int
spec_store_end(struct spec_store *k, bool commit)
{
    int rc = 0;

    if (!k->in_tx)
        return 0;
    k->in_tx = false;
    if (!commit) {
        q_tx_rollback(k->db);
        return 0;
    }
    /* A failed commit is rolled back by the store. */
    if ((rc = q_tx_commit(k->db)) != 0)
        k->store_rc = rc;
    return rc;
}

void
spec_store_cleanup(struct spec_store *k)
{
    if (k->in_tx) {
        k->in_tx = false;
        q_tx_rollback(k->db);
    }
    free(k->res);
    k->res = NULL;
    k->n = k->cap = 0;
}

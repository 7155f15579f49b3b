/* pending.c: TEMPORARY. The calls of queue/pg/ that other files will
 * define (ledger.c, tiers.c, park.c, stats.c: h-pgrest; copy.c: h-copy)
 * fail -ENOSYS here so the library links meanwhile. Whoever writes one of
 * those files deletes its part below (and this file with the last). */
#include "queue/pg/internal.h"

#include <errno.h>

/* ---- copy.c (h-copy) --------------------------------------------------- */

int
q__pg_copy_count(q_db *db, const struct q__table *t, int64_t *n)
{
    (void)db, (void)t, (void)n;
    return -ENOSYS;
}

int
q__pg_copy_clear(q_db *db, const struct q__table *t)
{
    (void)db, (void)t;
    return -ENOSYS;
}

int
q__pg_copy_out(q_db *db, const struct q__table *t, q__row_fn fn, void *arg)
{
    (void)db, (void)t, (void)fn, (void)arg;
    return -ENOSYS;
}

int
q__pg_copy_in(q_db *db, const struct q__table *t, const struct q__value *vals)
{
    (void)db, (void)t, (void)vals;
    return -ENOSYS;
}

int
q__pg_copy_end(q_db *db, const struct q__table *t)
{
    (void)db, (void)t;
    return -ENOSYS;
}

/* pending.c: TEMPORARY. The calls of queue/pg/ that other files will
 * define (ledger.c, tiers.c, park.c, stats.c: h-pgrest; copy.c: h-copy)
 * fail -ENOSYS here so the library links meanwhile. Whoever writes one of
 * those files deletes its part below (and this file with the last). */
#include "queue/pg/internal.h"

#include <errno.h>

/* ---- ledger.c (h-pgrest) ---------------------------------------------- */

int
q__pg_steps_get(q_db *db, int64_t job_id, struct q_step **out, size_t *n)
{
    (void)db, (void)job_id, (void)out, (void)n;
    return -ENOSYS;
}

int
q__pg_step_set(q_db *db, int64_t job_id, int index, enum q_step_state state,
               const char *tier, const char *output, int64_t add_tokens)
{
    (void)db, (void)job_id, (void)index, (void)state, (void)tier;
    (void)output, (void)add_tokens;
    return -ENOSYS;
}

int
q__pg_attempt_begin(q_db *db, const struct q_attempt_start *a, int64_t *id,
                    int *attempt)
{
    (void)db, (void)a, (void)id, (void)attempt;
    return -ENOSYS;
}

int
q__pg_attempt_finish(q_db *db, int64_t id, const struct q_attempt_result *r)
{
    (void)db, (void)id, (void)r;
    return -ENOSYS;
}

int
q__pg_attempts_list(q_db *db, int64_t job_id, int step, struct q_attempt **out,
                    size_t *n)
{
    (void)db, (void)job_id, (void)step, (void)out, (void)n;
    return -ENOSYS;
}

/* ---- tiers.c (h-pgrest) ------------------------------------------------ */

int
q__pg_tier_load(q_db *db, const char *tier, int64_t now,
                const struct q_tier_window *w, struct q_tier_state *out)
{
    (void)db, (void)tier, (void)now, (void)w, (void)out;
    return -ENOSYS;
}

int
q__pg_tier_store(q_db *db, const char *tier, const struct q_tier_state *st)
{
    (void)db, (void)tier, (void)st;
    return -ENOSYS;
}

int
q__pg_tier_send_add(q_db *db, const char *tier, int64_t at, int64_t tokens,
                    bool probe, int64_t expires_at, int64_t *id)
{
    (void)db, (void)tier, (void)at, (void)tokens, (void)probe;
    (void)expires_at, (void)id;
    return -ENOSYS;
}

int
q__pg_tier_send_done(q_db *db, int64_t id, int64_t tokens, int64_t done_at,
                     int64_t *old_tokens)
{
    (void)db, (void)id, (void)tokens, (void)done_at, (void)old_tokens;
    return -ENOSYS;
}

int
q__pg_tier_send_drop(q_db *db, int64_t id, int64_t *old_tokens)
{
    (void)db, (void)id, (void)old_tokens;
    return -ENOSYS;
}

int
q__pg_tier_prune(q_db *db, const char *tier, int64_t before)
{
    (void)db, (void)tier, (void)before;
    return -ENOSYS;
}

/* ---- park.c (h-pgrest) ------------------------------------------------- */

int
q__pg_park_add(q_db *db, const struct q_park_new *p, int64_t *id)
{
    (void)db, (void)p, (void)id;
    return -ENOSYS;
}

int
q__pg_park_get(q_db *db, int64_t id, struct q_park_item *out)
{
    (void)db, (void)id, (void)out;
    return -ENOSYS;
}

int
q__pg_park_list(q_db *db, const struct q_park_filter *f,
                struct q_park_item **out, size_t *n)
{
    (void)db, (void)f, (void)out, (void)n;
    return -ENOSYS;
}

int
q__pg_park_close(q_db *db, int64_t id, const struct q_park_close *c)
{
    (void)db, (void)id, (void)c;
    return -ENOSYS;
}

int
q__pg_job_requeue_parked(q_db *db, int64_t job_id, int64_t now)
{
    (void)db, (void)job_id, (void)now;
    return -ENOSYS;
}

int
q__pg_job_fail_parked(q_db *db, int64_t job_id, const char *error, int64_t now)
{
    (void)db, (void)job_id, (void)error, (void)now;
    return -ENOSYS;
}

int
q__pg_step_reset(q_db *db, int64_t job_id, int index,
                 const struct q_step_reset *r)
{
    (void)db, (void)job_id, (void)index, (void)r;
    return -ENOSYS;
}

/* ---- stats.c (h-pgrest) ------------------------------------------------ */

int
q__pg_stats_attempts(q_db *db, struct q_attempt_group **out, size_t *n)
{
    (void)db, (void)out, (void)n;
    return -ENOSYS;
}

int
q__pg_stats_park_open(q_db *db, size_t limit, struct q_park_brief **out,
                      size_t *n)
{
    (void)db, (void)limit, (void)out, (void)n;
    return -ENOSYS;
}

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

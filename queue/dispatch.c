/* dispatch.c: every storage call of queue.h, passed on to the table of
 * the backend that opened the store (db->ops, queue/internal.h). The
 * calls with a meaning of their own here (q_close of NULL, a backend with
 * no clock or wake-up channel) come first. */
#include "queue/queue.h"

#include <errno.h>

#include "queue/internal.h"
#include "queue/park.h"
#include "queue/report.h"
#include "queue/sched.h"
#include "queue/tiers.h"

int
q_close(q_db *db)
{
    return db != NULL ? db->ops->close(db) : 0;
}

int64_t
q_clock_offset(const q_db *db)
{
    return db->clock_offset_ms;
}

bool
q_lock_in_line(const q_db *db)
{
    return db->lock_in_line;
}

void
q_lock_waits(const q_db *db, struct q_lock_waits *out)
{
    *out = db->lock_waits;
}

int
q_clock_sync(q_db *db)
{
    return db->ops->clock_sync != NULL ? db->ops->clock_sync(db) : 0;
}

int
q_wake_fd(q_db *db)
{
    return db->ops->wake_fd != NULL ? db->ops->wake_fd(db) : -ENOTSUP;
}

int
q_wake_take(q_db *db, unsigned *events)
{
    return db->ops->wake_take != NULL ? db->ops->wake_take(db, events)
                                      : -ENOTSUP;
}

int
q_db_version(q_db *db, int *out)
{
    return db->ops->db_version(db, out);
}

int
q_read_begin(q_db *db)
{
    return db->ops->read_begin(db);
}

void
q_read_end(q_db *db)
{
    db->ops->read_end(db);
}

int
q_tx_begin(q_db *db)
{
    return db->ops->tx_begin(db);
}

int
q_tx_commit(q_db *db)
{
    return db->ops->tx_commit(db);
}

void
q_tx_rollback(q_db *db)
{
    db->ops->tx_rollback(db);
}

int
q_tx_durable(q_db *db)
{
    return db->ops->tx_durable != NULL ? db->ops->tx_durable(db) : 0;
}

int
q_enqueue(q_db *db, const struct q_job_new *jobs, size_t n,
          const struct q_enqueue_opts *opts, int64_t now,
          struct q_enqueue_result *res)
{
    return db->ops->enqueue(db, jobs, n, opts, now, res);
}

int
q_job_get(q_db *db, int64_t id, struct q_job *out)
{
    return db->ops->job_get(db, id, out);
}

int
q_jobs_list(q_db *db, int state, int64_t after, size_t limit,
            struct q_job **out, size_t *n)
{
    return db->ops->jobs_list(db, state, after, limit, out, n);
}

int
q_counts(q_db *db, int64_t counts[Q_JOB_NSTATES], int64_t *park_open)
{
    return db->ops->counts(db, counts, park_open);
}

int
q_claim(q_db *db, const char *worker, int64_t now, int64_t lease_ms, size_t max,
        struct q_job **out, size_t *n)
{
    return db->ops->claim(db, worker, now, lease_ms, max, out, n);
}

int
q_extend(q_db *db, int64_t id, const char *worker, int64_t until, int64_t now)
{
    return db->ops->extend(db, id, worker, until, now);
}

int
q_release(q_db *db, int64_t id, const char *worker, int64_t run_at, int64_t now)
{
    return db->ops->release(db, id, worker, run_at, now);
}

int
q_complete(q_db *db, int64_t id, const char *worker, int64_t now)
{
    return db->ops->complete(db, id, worker, now);
}

int
q_fail(q_db *db, int64_t id, const char *worker, const char *error, int64_t now)
{
    return db->ops->fail(db, id, worker, error, now);
}

int
q_park_job(q_db *db, int64_t id, const char *worker, int64_t now)
{
    return db->ops->park_job(db, id, worker, now);
}

int
q_cancel(q_db *db, int64_t id, int64_t now)
{
    return db->ops->cancel(db, id, now);
}

int
q_next_due(q_db *db, int64_t now, int64_t *at)
{
    return db->ops->next_due(db, now, at);
}

int
q_reclaim(q_db *db, int64_t now, int64_t *n)
{
    return db->ops->reclaim(db, now, n);
}

int
q_steps_get(q_db *db, int64_t job_id, struct q_step **out, size_t *n)
{
    return db->ops->steps_get(db, job_id, out, n);
}

int
q_step_set(q_db *db, int64_t job_id, const char *worker, int index,
           enum q_step_state state, const char *tier, const char *output,
           int64_t add_tokens)
{
    return db->ops->step_set(db, job_id, worker, index, state, tier, output,
                             add_tokens);
}

int
q_attempt_begin(q_db *db, const struct q_attempt_start *a, int64_t *id,
                int *attempt)
{
    return db->ops->attempt_begin(db, a, id, attempt);
}

int
q_attempt_finish(q_db *db, int64_t id, const struct q_attempt_result *r)
{
    return db->ops->attempt_finish(db, id, r);
}

int
q_job_cost(q_db *db, int64_t job_id, int64_t *nusd)
{
    return db->ops->job_cost(db, job_id, nusd);
}

int
q_attempts_list(q_db *db, int64_t job_id, int step, struct q_attempt **out,
                size_t *n)
{
    return db->ops->attempts_list(db, job_id, step, out, n);
}

int
q_tier_load(q_db *db, const char *tier, struct q_tier_state *out)
{
    return db->ops->tier_load(db, tier, out);
}

int
q_tier_store(q_db *db, const char *tier, const struct q_tier_state *st)
{
    return db->ops->tier_store(db, tier, st);
}

int
q_tier_event_add(q_db *db, const char *tier, int64_t at, const char *event)
{
    if (tier == NULL || tier[0] == '\0' || event == NULL || event[0] == '\0')
        return -EINVAL;
    return db->ops->tier_event_add(db, tier, at, event);
}

int
q_park_add(q_db *db, const struct q_park_new *p, int64_t *id)
{
    return db->ops->park_add(db, p, id);
}

int
q_park_get(q_db *db, int64_t id, struct q_park_item *out)
{
    return db->ops->park_get(db, id, out);
}

int
q_park_list(q_db *db, const struct q_park_filter *f, struct q_park_item **out,
            size_t *n)
{
    return db->ops->park_list(db, f, out, n);
}

int
q_park_close(q_db *db, int64_t id, const struct q_park_close *c)
{
    return db->ops->park_close(db, id, c);
}

int
q_job_wake(q_db *db, int64_t job_id, int64_t now)
{
    return db->ops->job_wake(db, job_id, now);
}

int
q_job_requeue_parked(q_db *db, int64_t job_id, int64_t now, int64_t run_at,
                     int64_t deadline_at)
{
    return db->ops->job_requeue_parked(db, job_id, now, run_at, deadline_at);
}

int
q_job_end_parked(q_db *db, int64_t job_id, enum q_job_state state,
                 const char *error, int64_t now)
{
    if (state != Q_JOB_FAILED && state != Q_JOB_SUCCEEDED)
        return -EINVAL;
    return db->ops->job_end_parked(db, job_id, state, error, now);
}

int
q_step_reset(q_db *db, int64_t job_id, int index, const struct q_step_reset *r)
{
    return db->ops->step_reset(db, job_id, index, r);
}

int
q_job_retry(q_db *db, const struct q_retry_new *r, int64_t *id)
{
    return db->ops->job_retry(db, r, id);
}

int
q_retries_list(q_db *db, int64_t job_id, struct q_retry **out, size_t *n)
{
    return db->ops->retries_list(db, job_id, out, n);
}

int
q_stats_attempts(q_db *db, struct q_attempt_group **out, size_t *n)
{
    return db->ops->stats_attempts(db, out, n);
}

int
q_stats_latency(q_db *db, struct q_latency_group **out, size_t *n)
{
    return db->ops->stats_latency(db, out, n);
}

int
q_stats_workers(q_db *db, struct q_worker_brief **out, size_t *n)
{
    return db->ops->stats_workers(db, out, n);
}

int
q_stats_oldest_due(q_db *db, int64_t now, int64_t *run_at)
{
    return db->ops->stats_oldest_due(db, now, run_at);
}

int
q_stats_park_open(q_db *db, size_t limit, struct q_park_brief **out, size_t *n)
{
    return db->ops->stats_park_open(db, limit, out, n);
}

int
q_sched_get(q_db *db, const char *name, struct q_sched *out)
{
    return db->ops->sched_get(db, name, out);
}

int
q_sched_list(q_db *db, struct q_sched **out, size_t *n)
{
    return db->ops->sched_list(db, out, n);
}

int
q_sched_note(q_db *db, const char *name, int64_t done, int64_t slot,
             int64_t job_id, int64_t now)
{
    return db->ops->sched_note(db, name, done, slot, job_id, now);
}

int
q_sched_claim(q_db *db, const char *name, int64_t slot, int64_t now)
{
    return db->ops->sched_claim(db, name, slot, now);
}

int
q_sched_pause(q_db *db, const char *name, bool paused, int64_t now)
{
    return db->ops->sched_pause(db, name, paused, now);
}

int
q_report_jobs(q_db *db, int64_t since, int64_t counts[Q_JOB_NSTATES])
{
    return db->ops->report_jobs(db, since, counts);
}

int
q_report_tiers(q_db *db, int64_t since, struct q_report_tier **out, size_t *n)
{
    return db->ops->report_tiers(db, since, out, n);
}

int
q_report_failures(q_db *db, int64_t since, size_t limit,
                  struct q_report_failure **out, size_t *n)
{
    return db->ops->report_failures(db, since, limit, out, n);
}

int
q_report_failed(q_db *db, int64_t since, size_t limit, struct q_job **out,
                size_t *n)
{
    return db->ops->report_failed(db, since, limit, out, n);
}

int
q_report_keyed(q_db *db, const char *prefix, int64_t since, size_t limit,
               struct q_job **out, size_t *n)
{
    if (prefix == NULL || prefix[0] == '\0')
        return -EINVAL;
    return db->ops->report_keyed(db, prefix, since, limit, out, n);
}

int
q_report_slowest(q_db *db, int64_t since, size_t limit, struct q_job **out,
                 size_t *n)
{
    return db->ops->report_slowest(db, since, limit, out, n);
}

int
q_report_costliest(q_db *db, int64_t since, size_t limit,
                   struct q_report_job **out, size_t *n)
{
    return db->ops->report_costliest(db, since, limit, out, n);
}

int
q_job_by_key(q_db *db, const char *key, struct q_job *out)
{
    return db->ops->job_by_key(db, key, out);
}

/* sched.h: what every worker shares of each schedule (the slots done,
 * the last one fired, paused), and the claims of work that has no job.
 * Part of queue/'s contract (see queue/queue.h for the conventions
 * every call follows). */
#ifndef STEPQ_QUEUE_SCHED_H
#define STEPQ_QUEUE_SCHED_H

#include "queue/queue.h"

/* ---- schedules: what every worker shares of each one ----------------- */

/* The stored state of one schedule of the config (named there; the cron
 * expression, zone and job stay in the config). Times are ms. name is
 * owned; release with q_sched_cleanup(). */
struct q_sched {
    char *name;
    bool paused;
    int64_t since;       /* first seen: its slots before this are not its */
    int64_t done_until;  /* every slot at or before this was fired or passed */
    int64_t last_slot;   /* the latest slot fired (0: none yet) */
    int64_t last_job_id; /* the job of that slot (0: none yet) */
    int64_t updated_at;  /* the latest now it was noted or paused at */
};

/* q_sched_get reads the state of schedule name. Returns 0 with *out set
 * (caller cleans it up), -ENOENT when it has none yet, -EINVAL for a
 * NULL or empty name, or the storage error. */
STEPQ_MUST_CHECK int q_sched_get(q_db *db, const char *name,
                                 struct q_sched *out);
/* q_sched_list reads every schedule's state, by name (bytewise). *n may
 * be 0 (then *out is NULL). Caller owns *out; free with q_scheds_free(). */
STEPQ_MUST_CHECK int q_sched_list(q_db *db, struct q_sched **out, size_t *n);
/* q_sched_note records progress of schedule name at now: creates its row
 * when missing (since and done_until now, not paused); then moves
 * done_until to done unless it is past it already; and when job_id > 0
 * and slot is later than last_slot, sets last_slot and last_job_id. One
 * statement, in a transaction or not; safe to call from many workers at
 * once: state only moves forward. Returns 0, -EINVAL for a NULL or empty
 * name, or the storage error. */
STEPQ_MUST_CHECK int q_sched_note(q_db *db, const char *name, int64_t done,
                                  int64_t slot, int64_t job_id, int64_t now);
/* q_sched_claim takes slot (ms) of schedule name for this caller at now:
 * moves done_until to slot if it was before it (creating the row as
 * q_sched_note does, with done_until slot), in one statement, so that of
 * many workers claiming one slot exactly one gets 0; the others get
 * -EALREADY (done_until was at or past slot already). For work that has
 * no job to dedupe it, such as the daily report hook. Returns 0,
 * -EALREADY, or the storage error. */
STEPQ_MUST_CHECK int q_sched_claim(q_db *db, const char *name, int64_t slot,
                                   int64_t now);
/* q_sched_pause pauses or resumes schedule name at now (creating its row
 * as q_sched_note does). Resuming a paused one moves done_until to now
 * (unless it is past it already), so the slots that passed while it was
 * paused are not caught up; resuming one that is not paused moves
 * nothing (its slots to catch up stay). Returns 0, -EINVAL for a NULL or
 * empty name, or the storage error. */
STEPQ_MUST_CHECK int q_sched_pause(q_db *db, const char *name, bool paused,
                                   int64_t now);
/* q_sched_cleanup frees what s owns; q_scheds_free frees n and the array
 * (NULL is a no-op). */
void q_sched_cleanup(struct q_sched *s);
void q_scheds_free(struct q_sched *s, size_t n);

#endif

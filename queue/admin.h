/* admin.h: a whole store at once: copying it into another (`stepq
 * copy`), its backup and its retention (`stepq backup`, `stepq prune`).
 * Part of queue/'s contract (see queue/queue.h for the conventions
 * every call follows). */
#ifndef STEPQ_QUEUE_ADMIN_H
#define STEPQ_QUEUE_ADMIN_H

#include "queue/queue.h"

/* ---- copying a whole store (`stepq copy`) ----------------------------- */

/* What q_copy copied, by table. */
struct q_copy_counts {
    int64_t jobs, steps, attempts, park, tiers, schedules, tier_events, budgets;
    int64_t retries, operators, audit, batches, batch_items;
};

/* q_copy copies every job, step, attempt, park item, tier state (with
 * its events), schedule state, budget window, job retry, operator, audit
 * row and batch (with its items) of from into to, ids kept, in one transaction
 * of to. Unless force, to must hold no row of any of them (-EEXIST: nothing
 * copied); with force, what to holds is replaced. counts may be NULL. Returns
 * 0, -EEXIST, or the errors of either store (to unchanged). */
STEPQ_MUST_CHECK int q_copy(q_db *from, q_db *to, bool force,
                            struct q_copy_counts *counts);

/* ---- backup and retention --------------------------------------------- */

/* What q_backup wrote. */
struct q_backup_info {
    int64_t bytes; /* the size of the file written */
    bool copied;   /* made by q_copy (a store that is not SQLite) */
};

/* q_backup writes a consistent copy of the whole store, as it was at one
 * moment, to the SQLite file dest while other processes go on using the
 * store: into dest.tmp (created 0600; one left by a backup that was
 * killed is replaced), flushed to disk, then renamed to dest; a -wal and
 * -shm beside dest are removed first. A backend with a snapshot copy of
 * its own (SQLite) makes it in one read transaction, which holds up no
 * writer; any other store is copied with q_copy into a new SQLite file,
 * its source read inside q_copy's transaction (which on PostgreSQL holds
 * the store's write lock, so workers wait for it). Unless force, dest
 * must not exist (-EEXIST: nothing written). Not inside a transaction.
 * info may be NULL. Returns 0, -EINVAL (an empty dest, or a transaction
 * open), -EEXIST, or -EIO (logged; no dest.tmp is left, dest is
 * untouched). */
STEPQ_MUST_CHECK int q_backup(q_db *db, const char *dest, bool force,
                              struct q_backup_info *info);

/* What q_prune removes: each time 0 removes nothing of its kind. Jobs
 * "finished" are succeeded, failed or cancelled; a job with an open park
 * item is never touched, nor its rows. */
struct q_prune {
    int64_t jobs_before;     /* finished jobs last changed before this go,
                                with their steps, attempts and park items;
                                so do tier events (breaker openings) */
    int64_t bodies_before;   /* the kept bodies of attempts of finished jobs
                                last changed before this are dropped */
    int64_t budgets_before;  /* budget windows last written before this go,
                                but never one of a schedule run (window
                                NAME:SLOT) whose job schedule:NAME:SLOT is
                                not finished */
    int64_t bodies_from_job; /* bodies only of jobs with this id or a
                                larger one: a caller going in steps passes
                                the last step's bodies_job */
    int64_t limit;           /* most jobs, and most bodies, per call; 0: all */
    bool dry_run;            /* count only: change nothing (limit unused) */
};

/* What q_prune removed, or would remove (dry_run). */
struct q_prune_counts {
    int64_t jobs, steps, attempts, park, bodies;
    int64_t bodies_job; /* the largest id of a job whose bodies went; 0 */
    int64_t tier_events, budgets;
};

/* q_prune removes what p names in one write transaction (or, dry_run,
 * only counts it, in none), and fills *out (may be NULL). A caller
 * pruning a big store in steps calls it with a limit, each time with
 * bodies_from_job the last call's bodies_job, until it returns fewer
 * than limit jobs and bodies, so that no transaction holds the store
 * long and no step reads again what the steps before it pruned. Returns 0,
 * -EINVAL (a negative time or limit), or the storage error (nothing removed).
 */
STEPQ_MUST_CHECK int q_prune(q_db *db, const struct q_prune *p,
                             struct q_prune_counts *out);
/* The longest window of a budget of time (a month: 30 days), plus a day:
 * a budget window written longer ago than this has ended. */
#define Q_BUDGET_WINDOW_MAX_MS (31LL * 24 * 3600 * 1000)
/* q_prune_plan fills *p for keeping finished jobs with their rows for
 * jobs_ms and the bodies of their attempts for bodies_ms at now, 0
 * meaning "keep": the budget windows go with the jobs, but not before
 * the longest window has ended. limit and dry_run are left 0. */
void q_prune_plan(int64_t jobs_ms, int64_t bodies_ms, int64_t now,
                  struct q_prune *p);

#endif

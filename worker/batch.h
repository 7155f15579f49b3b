/* batch.h: a tier in batch mode as the rest of worker/ sees it (batch.c,
 * batch_submit.c, batch_apply.c; what those three share among themselves
 * is in worker/batch_internal.h). */
#ifndef STEPQ_WORKER_BATCH_H
#define STEPQ_WORKER_BATCH_H

#include "worker/internal.h"

/* Far in the future: the wake time of a run in a batch (it holds no slot
 * and is woken by its batch, not by the tick). */
#define WORKER_BATCH_WAKE (INT64_MAX / 4)

/* worker__batch_takes: whether the step of r goes to batch tier ti now
 * (a replayable chat step without side effects whose slack, the time
 * left before the deadline less what the rest of the job needs, allows
 * the batch's expected time, with room in this worker's batches); when
 * not, why says why (batch.c). */
bool worker__batch_takes(const struct run *r, int ti, int64_t slack, char *why,
                         size_t len);
/* worker__batch_gather puts r in tier ti's gathering: it waits, holding
 * no slot, for the next batch of that tier (batch_submit.c). */
void worker__batch_gather(struct run *r, int ti, int64_t now);
/* worker__batch_leave takes r out of its gathering or its batch (in
 * memory only; nothing is written). NULL-safe in effect: a run in
 * neither is left as is (batch.c). */
void worker__batch_leave(struct run *r);
/* worker__batch_join: the step's last attempt a has no result; when it is
 * an item of a batch still open, r waits in that batch (loaded from the
 * store when this worker does not hold it) and true is returned; else
 * false, and the caller settles the attempt as in doubt (batch.c). */
bool worker__batch_join(struct run *r, const struct q_attempt *a);
/* worker__batch_due: whether a batch tier has a gathering to send or a
 * batch a call to make at now (the tick then opens a turn) (batch.c). */
bool worker__batch_due(const struct worker *w, int64_t now);
/* worker__batch_tick, in the tick's turn: records the gatherings that are
 * full or old enough as batches, admits the batch calls that are due
 * through their tier's pace, and frees the batches no run waits on.
 * Returns the earliest time something is due (at most next) (batch.c). */
int64_t worker__batch_tick(struct worker *w, int64_t now, int64_t next);
/* worker__batch_flush sends the batch calls the turn admitted, once it
 * has committed; committed false drops them (batch.c). */
void worker__batch_flush(struct worker *w, bool committed);
/* worker__batch_priced keeps, for the report, what the usage u of r's
 * batch item (costed in ar at the batch price) would have cost at its
 * tier's realtime price: nothing without a complete usage and a price
 * (batch_apply.c). */
void worker__batch_priced(struct run *r, const struct price_usage *u,
                          const struct q_attempt_result *ar);
/* worker__batch_room is how many runs this worker's batches may hold at
 * once, all batch tiers together (0: no tier in batch mode) (batch.c). */
int64_t worker__batch_room(const struct worker *w);
/* worker__batches_free frees every batch in hand (after the loop) (batch.c). */
void worker__batches_free(struct worker *w);

#endif

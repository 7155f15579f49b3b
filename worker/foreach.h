/* foreach.h: declarations private to worker/ for a foreach step
 * (foreach.c), entered from run.c and told by leave.c when a job leaves;
 * and the step commit of answer.c that it ends with. */
#ifndef STEPQ_WORKER_FOREACH_H
#define STEPQ_WORKER_FOREACH_H

#include <stdint.h>

struct run;

/* worker__foreach_enter runs the current step, a foreach's, once per
 * element: each element a job of its own, made up to the step's
 * parallelism and read back by its key; the job is given back while they
 * run and goes on with their outputs in order once all ended (foreach.c). */
void worker__foreach_enter(struct run *r);
/* worker__foreach_ended: the job of r left this worker succeeded, failed
 * or parked; when it is a foreach step's element, that step's job is
 * made due now, to look at its elements (foreach.c). */
void worker__foreach_ended(const struct run *r);
/* worker__commit_step commits output (borrowed) as the current step's,
 * adding add_tokens to its count, and enters the next step; the job is
 * given back when the write fails (answer.c). */
void worker__commit_step(struct run *r, const char *output, int64_t add_tokens);

#endif

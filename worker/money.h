/* money.h: declarations private to worker/ for money: the budgets a
 * send reserves and settles (budget.c) and what an answer costs
 * (cost.c). Included by the files of the loop that admit, send and
 * settle; the rest of worker/ sees only worker/internal.h. */
#ifndef STEPQ_WORKER_MONEY_H
#define STEPQ_WORKER_MONEY_H

#include "worker/internal.h"

/* ---- budgets in money (budget.c) ------------------------------------ */

/* worker__budget_reserve reserves the worst case of a send of input
 * tokens (est in all, max_tokens included) on tier t for run r: on every
 * budget of the config that covers the tier and the job, and within the
 * job's max_cost_usd. Nothing is reserved for a tier without a price.
 * Returns 0 (r->holds has what was reserved); -EDQUOT when a budget or
 * the job's cap cannot cover it (nothing reserved; *retry_at the end of
 * the budget's window, INT64_MAX when none comes before the deadline or
 * for the job's cap; why says which and how much); or a storage error. */
int worker__budget_reserve(struct run *r, const struct config_tier *t,
                           int64_t input, int64_t est, int64_t now,
                           int64_t *retry_at, char *why, size_t len);
/* worker__budget_settle settles what r's send reserved: cost_nusd is what
 * it cost (-1: unknown, the whole reservation counts as spent; 0 for a
 * send that never went out). */
void worker__budget_settle(struct run *r, int64_t cost_nusd, int64_t now);

/* worker__cost_answer sets ar's cost (priced, cost_nusd, cost_estimated)
 * for res, an answer from tier t (NULL: an http step, no cost): from u,
 * the usage it reported, when complete; else the worst case of the send
 * (send_input tokens in, send_est in all) when it was cut short after
 * going out; else 0 when it was not billed (an error answer, or never
 * reached the endpoint); else request (req_bytes) and answer bytes / 4,
 * estimated. A tier without a price leaves ar unpriced (cost.c). */
void worker__cost_answer(const struct config_tier *t,
                         const struct http_response *res,
                         const struct price_usage *u, int64_t req_bytes,
                         int64_t send_input, int64_t send_est,
                         struct q_attempt_result *ar);
/* worker__cost_worst sets ar's cost to the worst case of a send of input
 * tokens in, est in all (input plus max_tokens), estimated: what an
 * attempt that may have been billed without saying for what costs. */
void worker__cost_worst(const struct config_tier *t, int64_t input, int64_t est,
                        struct q_attempt_result *ar);

/* worker__http_price_tier is the tier whose price an http step is charged:
 * the first of its `tiers` with a price, or NULL (cost.c). Borrowed. */
const struct config_tier *worker__http_price_tier(const struct run *r);
/* worker__cost_http sets ar's cost for res, the answer to an http step
 * priced by tier t (NULL: no cost): t's per_request for a 2xx answer, and
 * as an estimate for one cut short after the request went out; 0 for an
 * error answer or one that never reached the endpoint (cost.c). */
void worker__cost_http(const struct config_tier *t,
                       const struct http_response *res,
                       struct q_attempt_result *ar);

#endif

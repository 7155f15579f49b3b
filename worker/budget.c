/* budget.c: budgets in money before a send and after its answer
 * (docs/reference.md "Budgets"). Before a send on a priced tier, its
 * worst case (the input estimate and all of max_tokens at the tier's
 * price) is reserved on every budget that covers the tier and the job, in
 * the store every worker shares, and checked against the job's own
 * max_cost_usd; the answer turns the reservation into what the send cost.
 * Nothing is sent that a budget cannot cover. A send whose answer never
 * comes (a worker that died) keeps its reservation as spent: a budget
 * errs on the side of sending less.
 */
#include "worker/internal.h"
#include "worker/money.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/price.h"
#include "common/xalloc.h"
#include "queue/tiers.h"

/* Whether budget b covers tier t. */
static bool
covers_tier(const struct config_budget *b, const struct config_tier *t)
{
    for (size_t i = 0; i < b->ntiers; i++) {
        if (strcmp(b->tiers[i], t->name) == 0)
            return true;
    }
    return b->tiers == NULL;
}

/* Writes b's window for run r at now into buf, and when it ends into
 * *ends_at (INT64_MAX: never); false when b does not cover r's job (per
 * schedule run: a job that is no slot of the schedule). */
static bool
window_of(const struct config_budget *b, const struct run *r, int64_t now,
          char *buf, size_t len, int64_t *ends_at)
{
    const char *key = r->job.key;
    size_t plen = strlen(SPEC_SCHEDULE_KEY_PREFIX);

    if (b->per == CONFIG_BUDGET_WINDOW)
        return config_budget_window(b, now, buf, len, ends_at);
    /* A slot's job has the key "schedule:NAME:SLOT". */
    if (key == NULL || !spec_key_reserved(key))
        return false;
    if (b->schedule != NULL &&
        (strncmp(key + plen, b->schedule, strlen(b->schedule)) != 0 ||
         key[plen + strlen(b->schedule)] != ':'))
        return false;
    snprintf(buf, len, "%s", key + plen);
    *ends_at = INT64_MAX;
    return true;
}

/* What the job's attempts cost so far (priced ones), or -1 when the
 * ledger cannot be read. */
static int64_t
job_spent(struct run *r)
{
    int64_t sum = 0;

    return q_job_cost(r->w->db, r->job.id, &sum) == 0 ? sum : -1;
}

void
worker__budget_settle(struct run *r, int64_t cost_nusd, int64_t now)
{
    const struct config *cfg = r->w->cfg;

    for (size_t i = 0; i < r->nholds; i++) {
        const struct budget_hold *h = &r->holds[i];
        int64_t spent = cost_nusd < 0 ? h->amount : cost_nusd;
        if (q_budget_settle(r->w->db, cfg->budgets[h->budget].name, h->window,
                            h->amount, spent, now) != 0)
            log_warn("job %lld: cannot settle budget %s", (long long)r->job.id,
                     cfg->budgets[h->budget].name);
    }
    free(r->holds);
    r->holds = NULL;
    r->nholds = 0;
}

/* Reserves worst on budget bi for r, adding the hold. */
static int
reserve_one(struct run *r, int bi, const char *window, int64_t worst,
            int64_t now)
{
    const struct config_budget *b = &r->w->cfg->budgets[bi];
    int rc =
        q_budget_reserve(r->w->db, b->name, window, b->limit_nusd, worst, now);

    if (rc != 0)
        return rc;
    r->holds = xrealloc(r->holds, (r->nholds + 1) * sizeof(*r->holds));
    r->holds[r->nholds].budget = bi;
    snprintf(r->holds[r->nholds].window, sizeof(r->holds[0].window), "%s",
             window);
    r->holds[r->nholds].amount = worst;
    r->nholds++;
    return 0;
}

int
worker__budget_reserve(struct run *r, const struct config_tier *t,
                       int64_t input, int64_t est, int64_t now,
                       int64_t *retry_at, char *why, size_t len)
{
    const struct config *cfg = r->w->cfg;
    int64_t worst = 0, cap = r->spec->max_cost_nusd, spent;

    /* A send whose answer was never acted on (none is known to leave one)
     * keeps what it reserved as spent. */
    if (r->nholds > 0)
        worker__budget_settle(r, -1, now);
    if (price_worst_case(&t->price, input, est - input, &worst) != 0)
        return 0; /* no price: no cost to hold */
    if (cap >= 0 && ((spent = job_spent(r)) < 0 || spent + worst > cap)) {
        snprintf(why, len,
                 "%s: budget (the job's max_cost_usd $%.6g: $%.6g spent, this "
                 "send may cost $%.6g)",
                 t->name, price_usd(cap), price_usd(spent > 0 ? spent : 0),
                 price_usd(worst));
        *retry_at = INT64_MAX;
        return -EDQUOT;
    }
    for (size_t i = 0; i < cfg->nbudgets; i++) {
        const struct config_budget *b = &cfg->budgets[i];
        char window[128];
        int64_t ends_at = INT64_MAX;
        int rc;
        if (!covers_tier(b, t) ||
            !window_of(b, r, now, window, sizeof(window), &ends_at))
            continue;
        if ((rc = reserve_one(r, (int)i, window, worst, now)) == 0)
            continue;
        worker__budget_settle(r, 0, now); /* what was held goes back */
        if (rc != -EDQUOT)
            return rc;
        snprintf(why, len,
                 "%s: budget (%s: $%.6g for %s, this send may cost $%.6g)",
                 t->name, b->name, price_usd(b->limit_nusd), window,
                 price_usd(worst));
        *retry_at = ends_at;
        return -EDQUOT;
    }
    return 0;
}

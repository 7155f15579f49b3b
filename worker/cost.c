/* cost.c: what an attempt cost, for its ledger row (docs/reference.md
 * "Prices"), by the same rules as the tokens it is charged (spent_tokens
 * in answer.c): an answer's usage when it reports one, else an estimate,
 * which the row marks as such; an http step's, per request, at the price
 * of the first tier of its `tiers` that has one.
 */
#include "worker/internal.h"
#include "worker/money.h"

#include "common/price.h"

void
worker__cost_worst(const struct config_tier *t, int64_t input, int64_t est,
                   struct q_attempt_result *ar)
{
    int64_t nusd = 0;

    if (t == NULL ||
        price_worst_case(&t->price, input, est - input, &nusd) != 0)
        return;
    ar->priced = true;
    ar->cost_estimated = true;
    ar->cost_nusd = nusd;
}

void
worker__cost_answer(const struct config_tier *t,
                    const struct http_response *res,
                    const struct price_usage *u, int64_t req_bytes,
                    int64_t send_input, int64_t send_est,
                    struct q_attempt_result *ar)
{
    struct price_usage guess = {req_bytes / 4, (int64_t)res->body_len / 4, 0,
                                0};
    int64_t nusd = 0;

    if (t == NULL || !t->price.set)
        return;
    if (price_usage_is_complete(u) && price_cost(&t->price, u, &nusd) == 0) {
        ar->priced = true;
        ar->cost_nusd = nusd;
        return;
    }
    /* Cut short after the request went out: it may have been billed for
     * all it asked for, as an attempt in doubt is. */
    if (res->error == HTTP_ERR_TIMEOUT || res->error == HTTP_ERR_RESET ||
        res->error == HTTP_ERR_TOO_LARGE) {
        worker__cost_worst(t, send_input, send_est, ar);
        return;
    }
    ar->priced = true;
    /* Never reached the endpoint, or an error answer: not billed. */
    if (res->error != HTTP_ERR_NONE || res->status < 200 || res->status > 299)
        return;
    /* A success without usage: request and answer, bytes / 4, at the
     * input and output prices. */
    if (price_cost(&t->price, &guess, &nusd) == 0) {
        ar->cost_estimated = true;
        ar->cost_nusd = nusd;
    }
}

const struct config_tier *
worker__http_price_tier(const struct run *r)
{
    const struct spec_step *s = cur_spec(r);

    for (const cJSON *c = s->tiers ? s->tiers->child : NULL; c != NULL;
         c = c->next) {
        int ti = worker__tier_index(r->w, c->valuestring);
        if (ti >= 0 && r->w->cfg->tiers[ti].price.set)
            return &r->w->cfg->tiers[ti];
    }
    return NULL;
}

void
worker__cost_http(const struct config_tier *t, const struct http_response *res,
                  struct q_attempt_result *ar)
{
    if (t == NULL || !t->price.set)
        return;
    ar->priced = true;
    /* Cut short after the request went out: it may have been billed. */
    if (res->error == HTTP_ERR_TIMEOUT || res->error == HTTP_ERR_RESET ||
        res->error == HTTP_ERR_TOO_LARGE) {
        ar->cost_estimated = true;
        ar->cost_nusd = t->price.per_request;
        return;
    }
    /* Never reached the endpoint, or an error answer: not billed. */
    if (res->error != HTTP_ERR_NONE || res->status < 200 || res->status > 299)
        return;
    ar->cost_nusd = t->price.per_request;
}

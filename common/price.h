/* price.h: what an attempt cost, in nano-dollars (1e-9 USD), from a tier's
 * declared price (docs/reference.md "Prices") and the usage its answer
 * reported, or from an estimate when it reported none.
 *
 * Money is an int64_t count of nano-dollars everywhere below the views:
 * sums are exact, whatever their order, and a budget can compare them
 * without float drift. Only views turn them into dollars. Pure: no I/O,
 * no clock, no allocation.
 */
#ifndef STEPQ_COMMON_PRICE_H
#define STEPQ_COMMON_PRICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/defs.h"

#define PRICE_NUSD_PER_USD INT64_C(1000000000)
/* The largest price a config may declare, per million tokens or per
 * request: $1,000 (with the token cap below, sums stay within int64). */
#define PRICE_MAX_USD 1000
/* Usage counts above this (a trillion tokens) are read as this. */
#define PRICE_MAX_TOKENS INT64_C(1000000000000)

/* A tier's price, in nano-dollars per million tokens (per request for
 * per_request). set: the config declared one; a tier without it has no
 * cost (NULL in the ledger), not a cost of 0. */
struct price {
    bool set;
    int64_t input;       /* input not read from or written to a cache */
    int64_t output;      /* output, reasoning included */
    int64_t cache_read;  /* input read from the provider's cache */
    int64_t cache_write; /* input written to it (Anthropic bills this) */
    int64_t per_request; /* each billed request */
};

/* What an answer said it used, one shape for every provider
 * (http/http.h reads OpenAI's, Anthropic's and Gemini's). input counts
 * all input, cached included; cache_read and cache_write are parts of
 * it. -1: not said. */
struct price_usage {
    int64_t input;
    int64_t output;
    int64_t cache_read;
    int64_t cache_write;
};

/* price_usage_none is a usage with nothing said. */
#define PRICE_USAGE_NONE ((struct price_usage){-1, -1, -1, -1})

/* price_usage_is_complete reports whether u has both input and output
 * counts: enough to price an answer from what it said. */
bool price_usage_is_complete(const struct price_usage *u);

/* price_cost sets *nusd to what u costs at p: uncached input, cache reads,
 * cache writes and output at their prices, plus per_request, rounded to
 * the nearest nano-dollar once. Counts are clamped to [0,
 * PRICE_MAX_TOKENS] and the cached parts to the input. Returns 0; -ENOENT
 * when p is not set; -EINVAL when u is not complete. *nusd untouched on
 * failure. */
STEPQ_MUST_CHECK int price_cost(const struct price *p,
                                const struct price_usage *u, int64_t *nusd);

/* price_worst_case sets *nusd to the most a send of input_tokens (an
 * estimate) asking for at most max_tokens can cost at p: all input
 * uncached, all max_tokens generated, plus per_request. It is what a
 * budget reserves before a send, and what an attempt that may have been
 * billed without saying for what is charged. Returns 0; -ENOENT when p is
 * not set. */
STEPQ_MUST_CHECK int price_worst_case(const struct price *p,
                                      int64_t input_tokens, int64_t max_tokens,
                                      int64_t *nusd);

/* price_from_usd converts a price in dollars (finite, 0 to PRICE_MAX_USD,
 * checked by the caller) to nano-dollars, rounded to the nearest. */
int64_t price_from_usd(double usd);

/* price_usd is nusd in dollars, for JSON and metrics (exact enough to
 * print: a double holds every nano-dollar below $9M). */
double price_usd(int64_t nusd);

/* price_format writes nusd as dollars for people: "$0.00042", "$12.5",
 * "$0" (no trailing zeros, at most 9 decimals, exact). Returns buf. */
const char *price_format(int64_t nusd, char *buf, size_t len);

#endif

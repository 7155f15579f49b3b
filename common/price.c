/* price.c: an attempt's cost from a price and a usage, in integer
 * nano-dollars.
 *
 * A price is nano-dollars per million tokens, so the exact cost of n
 * tokens is n * p / 1e6 nano-dollars, which is rarely whole. Each part is
 * split into whole millions (q * p, exact) and the rest (r * p, r below a
 * million); the rests of all parts are added before the one division, so
 * the attempt is rounded once. With counts capped at PRICE_MAX_TOKENS
 * (q <= 1e6) and prices at PRICE_MAX_USD (p <= 1e12), q * p <= 1e18 and
 * the four rests sum below 4e18: nothing overflows int64.
 */
#include "common/price.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MTOK INT64_C(1000000)

static int64_t
clamp(int64_t v, int64_t hi)
{
    return v < 0 ? 0 : v > hi ? hi : v;
}

bool
price_usage_is_complete(const struct price_usage *u)
{
    return u->input >= 0 && u->output >= 0;
}

/* Adds n tokens at p per million: whole millions to *whole, the rest (in
 * nano-dollars times a million) to *rest. */
static void
part(int64_t n, int64_t p, int64_t *whole, int64_t *rest)
{
    *whole += (n / MTOK) * p;
    *rest += (n % MTOK) * p;
}

static int64_t
total(const struct price *p, int64_t in, int64_t read, int64_t write,
      int64_t out)
{
    int64_t whole = 0, rest = 0;

    part(in, p->input, &whole, &rest);
    part(read, p->cache_read, &whole, &rest);
    part(write, p->cache_write, &whole, &rest);
    part(out, p->output, &whole, &rest);
    return whole + (rest + MTOK / 2) / MTOK + p->per_request;
}

int
price_cost(const struct price *p, const struct price_usage *u, int64_t *nusd)
{
    int64_t in, read, write;

    if (!p->set)
        return -ENOENT;
    if (!price_usage_is_complete(u))
        return -EINVAL;
    in = clamp(u->input, PRICE_MAX_TOKENS);
    read = clamp(u->cache_read, in);
    write = clamp(u->cache_write, in - read);
    *nusd = total(p, in - read - write, read, write,
                  clamp(u->output, PRICE_MAX_TOKENS));
    return 0;
}

int
price_worst_case(const struct price *p, int64_t input_tokens,
                 int64_t max_tokens, int64_t *nusd)
{
    if (!p->set)
        return -ENOENT;
    *nusd = total(p, clamp(input_tokens, PRICE_MAX_TOKENS), 0, 0,
                  clamp(max_tokens, PRICE_MAX_TOKENS));
    return 0;
}

int64_t
price_from_usd(double usd)
{
    return (int64_t)llround(usd * (double)PRICE_NUSD_PER_USD);
}

double
price_usd(int64_t nusd)
{
    return (double)nusd / (double)PRICE_NUSD_PER_USD;
}

const char *
price_format(int64_t nusd, char *buf, size_t len)
{
    uint64_t a = nusd < 0 ? (uint64_t)0 - (uint64_t)nusd : (uint64_t)nusd;
    char frac[16];
    size_t n;

    snprintf(frac, sizeof(frac), "%09llu",
             (unsigned long long)(a % (uint64_t)PRICE_NUSD_PER_USD));
    n = strlen(frac);
    while (n > 0 && frac[n - 1] == '0')
        frac[--n] = '\0';
    snprintf(buf, len, "%s$%llu%s%s", nusd < 0 ? "-" : "",
             (unsigned long long)(a / (uint64_t)PRICE_NUSD_PER_USD),
             n > 0 ? "." : "", frac);
    return buf;
}

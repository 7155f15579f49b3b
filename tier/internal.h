/* internal.h: what tier.c and pace.c (library stepq_tier)
 * share; nothing else includes it. tier.h is the public header. */
#ifndef STEPQ_TIER_INTERNAL_H
#define STEPQ_TIER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "queue/queue.h"
#include "queue/tiers.h"
#include "tier/tier.h"

/* The request bucket: one request costs 60000/rate ms of "theoretical
 * arrival time" (GCRA); the bucket holds burst requests. A send admitted
 * now reaches the endpoint a loop turn later, and that delay varies: the
 * guard keeps half a request (at most 50 ms) of the burst unused, so a
 * send that arrives early still finds a token. It lowers the first burst,
 * not the pace. */
struct tier__bucket {
    double cost_ms; /* what this request costs */
    double cap_ms;  /* what the bucket holds, less the guard */
};

/* tier__request_bucket fills b for the request bucket of tier t in state
 * st; false when no request rate is known (requests are not paced). */
bool tier__request_bucket(const struct config_tier *t,
                          const struct q_tier_state *st,
                          struct tier__bucket *b);

/* tier__token_bucket fills b for a request of est_tokens from the token
 * bucket; false when no token rate is known. */
bool tier__token_bucket(const struct config_tier *t,
                        const struct q_tier_state *st, int64_t est_tokens,
                        struct tier__bucket *b);

/* tier__bucket_ready_at is when the bucket whose theoretical arrival time
 * is tat takes the request: now, or the ms it must wait for. */
int64_t tier__bucket_ready_at(double tat, const struct tier__bucket *b,
                              int64_t now);

/* tier__bucket_take returns the bucket's theoretical arrival time after it
 * took the request at now. */
double tier__bucket_take(double tat, const struct tier__bucket *b, int64_t now);

/* tier__pace_down lowers st's pace after a 429 despite pacing. learn: no
 * rpm is declared and the answer named no limit: the rate the endpoint
 * took of st's recent sends (its usage less its flight, both without
 * the refused send) becomes the ceiling. */
void tier__pace_down(const struct config_tier *t, struct q_tier_state *st,
                     bool learn, int64_t now);

/* tier__pace_up gives back pace for the time since the last answer; with
 * learn (as above) past a ceiling learned from 429s while the tier is
 * busy. */
void tier__pace_up(const struct config_tier *t, struct q_tier_state *st,
                   bool learn, int64_t now);

/* tier__ramp_full reports whether a tier with no rate known has as many
 * sends in flight as its ramp allows now (pace.c). */
bool tier__ramp_full(const struct config_tier *t, const struct q_tier_state *st,
                     int64_t now);

/* tier__learn_limits keeps the limits o's headers said, when believable. */
void tier__learn_limits(struct q_tier_state *st, const struct tier_outcome *o);

/* What a tier used and has in flight (use.c). */
/* tier__usage_add counts requests and tokens (negative: a correction)
 * into u, in the second of at (ms). A second newer than u's newest moves
 * the window on (the seconds it passes start empty); one already past
 * the window is not counted. Counts stay within [0, UINT32_MAX]. */
void tier__usage_add(struct q_tier_usage *u, int64_t at, int64_t requests,
                     int64_t tokens);

/* tier__usage_sum gives the requests and tokens u counted in the last
 * window_ms (whole seconds, at most Q_TIER_USAGE_SLOTS) up to now (ms). */
void tier__usage_sum(const struct q_tier_usage *u, int64_t now,
                     int64_t window_ms, int64_t *requests, int64_t *tokens);

/* tier__usage_since gives the requests u counted in the last window_ms
 * (as tier__usage_sum) and the span they were sent in: from the start of
 * the first second in the window with any to now, at least 1000 ms. */
void tier__usage_since(const struct q_tier_usage *u, int64_t now,
                       int64_t window_ms, int64_t *requests, int64_t *span_ms);

/* tier__flight_add counts a send in flight until expires_at (ms), and
 * as the half-open probe when probe; tier__flight_end takes it out again
 * (one that expired is gone already). Both drop what expired by now. */
void tier__flight_add(struct q_tier_flight *f, int64_t expires_at, bool probe,
                      int64_t now);
void tier__flight_end(struct q_tier_flight *f, int64_t expires_at, bool probe,
                      int64_t now);

/* tier__flight_prune drops what expired by now. */
void tier__flight_prune(struct q_tier_flight *f, int64_t now);

/* tier__flight_count is how many sends of f are in flight at now. */
int64_t tier__flight_count(const struct q_tier_flight *f, int64_t now);

#endif

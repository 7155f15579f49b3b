/* choose.c: choosing a step's tier, in its order of preference: the
 * candidates in order (FIFO within a pass over the waiting runs), an
 * earlier tier that is only paced waited for while the step's slack and
 * the tier's spill allow, a walled, failing or unaffordable one passed
 * over, each send's budgets reserved before its tier admits it, and the
 * route the attempt records of why its tier was chosen. */
#include "worker/internal.h"
#include "worker/money.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "queue/tiers.h"
#include "tier/tier.h"
#include "worker/batch.h"

/* Fills idx with the step's candidate tiers in order; returns how many. */
static size_t
candidates(const struct run *r, int *idx)
{
    const struct spec_step *s = cur_spec(r);
    const struct config *cfg = r->w->cfg;
    size_t n = 0;

    if (r->wait_tier >= 0 || r->pin_tier >= 0) {
        idx[0] = r->wait_tier >= 0 ? r->wait_tier : r->pin_tier;
        return 1;
    }
    if (s->tiers == NULL) {
        for (size_t i = 0; i < cfg->ntiers; i++)
            idx[n++] = (int)i;
        return n;
    }
    for (const cJSON *c = s->tiers->child; c != NULL; c = c->next) {
        int ti = worker__tier_index(r->w, c->valuestring);
        if (ti >= 0)
            idx[n++] = ti;
    }
    return n;
}

/* Writes into why the step's tiers that this worker's config lacks
 * ("tiers not in this worker's config: ghost"), or nothing when it names
 * none (a job enqueued under another config). */
void
worker__unknown_tiers(const struct run *r, char *why, size_t len)
{
    const struct spec_step *s = cur_spec(r);
    size_t used = 0;

    why[0] = '\0';
    for (const cJSON *c = s->tiers ? s->tiers->child : NULL; c != NULL;
         c = c->next) {
        int k;
        if (worker__tier_index(r->w, c->valuestring) >= 0 || used >= len)
            continue;
        k = snprintf(why + used, len - used, "%s%s",
                     used ? ", " : "tiers not in this worker's config: ",
                     c->valuestring);
        if (k > 0)
            used += (size_t)k;
    }
}

/* What the rest of the job is expected to take from now: one attempt of
 * this step and of each step after it, at the latency this worker has
 * seen of its tiers (the slowest), at least 1 s an attempt. */
static int64_t
rest_ms(const struct run *r)
{
    const struct worker *w = r->w;
    int64_t per = 1000;

    for (size_t i = 0; i < w->cfg->ntiers; i++) {
        if (w->latency_ms[i] > per)
            per = w->latency_ms[i];
    }
    return per * (int64_t)(r->spec->nsteps - r->step);
}

/* Whether the step waits for tier t, which paces it until v->retry_at,
 * rather than going on to a later tier: as long as the wait leaves the
 * rest of the job its time before the deadline, and within the tier's
 * spill setting. When not, why says why (for the attempt's route). */
static bool
waits_for(const struct run *r, const struct config_tier *t,
          const struct tier_verdict *v, int64_t now, char *why, size_t len)
{
    int64_t wait = v->retry_at - now;
    int64_t slack = r->job.deadline_at - now - rest_ms(r);
    int64_t waited = r->admit_since > 0 ? now - r->admit_since : 0;

    if (t->spill_after_ms == 0) {
        snprintf(why, len, "%s: %s (spill: now)", t->name, v->reason);
        return false;
    }
    if (wait > slack) {
        snprintf(why, len,
                 "%s: %s (a wait of %.1f s would miss the deadline: %.1f s "
                 "left, the rest of the job needs about %.1f s)",
                 t->name, v->reason, (double)wait / 1000,
                 (double)(r->job.deadline_at - now) / 1000,
                 (double)rest_ms(r) / 1000);
        return false;
    }
    if (t->spill_after_ms > 0 && waited + wait > t->spill_after_ms) {
        snprintf(why, len, "%s: %s (waited %.1f s; spill after %.1f s)",
                 t->name, v->reason, (double)waited / 1000,
                 (double)t->spill_after_ms / 1000);
        return false;
    }
    return true;
}

/* Appends "; text" (or text) to the route. */
static void
route_add(struct run *r, const char *text)
{
    size_t used = strlen(r->route);

    /* a route cut at its size still says the first reasons */
    if (used + 3 < sizeof(r->route) &&
        snprintf(r->route + used, sizeof(r->route) - used, "%s%s",
                 used ? "; " : "", text) < 0)
        r->route[used] = '\0';
}

/* Gives back what tier t's admission of send took (its bucket, its place
 * in flight, its allowance): the send will not go. */
static void
unadmit(struct run *r, const struct config_tier *t, int64_t send, int64_t est,
        int64_t now)
{
    if (tier_unsent(r->w->db, t, send, est, now, now) != 0)
        log_warn("job %lld: cannot give back an admission to %s",
                 (long long)r->job.id, t->name);
}

/* Admits the send on tier ti: the tier first (tier_admit), then its
 * budgets (worker__budget_reserve), so that a run waiting for a paced
 * tier writes no reservation at each look; what the tier gave goes back
 * when a budget says no. A budget's no is a verdict with reason "budget"
 * (btext says which and how much). Returns 0 with *v set, or a storage
 * error (the tier is skipped). */
static int
admit(struct run *r, int ti, int64_t est, int64_t now, struct tier_verdict *v,
      int64_t *send, char *btext, size_t blen)
{
    const struct config_tier *t = &r->w->cfg->tiers[ti];
    int64_t at = INT64_MAX;
    int rc = tier_admit(r->w->db, t, now, est, *sends_on(r, ti) > 0, v, send);

    if (rc != 0 || !v->admitted)
        return rc;
    rc = worker__budget_reserve(r, t, r->input_tokens, est, now, &at, btext,
                                blen);
    if (rc == 0)
        return 0;
    unadmit(r, t, *send, est, now);
    *send = 0;
    if (rc == -EDQUOT) {
        *v = (struct tier_verdict){.reason = "budget", .retry_at = at};
        r->budget_refused = true;
        return 0;
    }
    return rc;
}

/* What worker__choose_tier learns from the tiers that did not admit. */
struct choice {
    int64_t *retry_at; /* the earliest a tier will admit */
    char *why;         /* each tier's reason, "; " between them */
    size_t whylen, used;
    bool waiting; /* a preferred tier, only paced, is waited for */
};

/* Notes a tier t that did not admit (verdict v): its no for this pass,
 * its retry time and reason, and either a wait for it (it is only paced
 * and others follow it, more) or the route's word of why it was passed
 * over (btext: a budget's, if any). */
static void
passed_over(struct run *r, const struct config_tier *t,
            const struct tier_verdict *v, struct tier_no *no, int64_t now,
            bool more, const char *btext, struct choice *c)
{
    char text[256];

    /* The allowance depends on the step (headroom above degrade_at for a
     * step already on the tier), a budget on the job and the send: not
     * the same no for all. */
    if (strcmp(v->reason, "allowance") != 0 && strcmp(v->reason, "budget") != 0)
        *no = (struct tier_no){
            .pass = r->w->pass, .reason = v->reason, .retry_at = v->retry_at};
    if (v->retry_at < *c->retry_at)
        *c->retry_at = v->retry_at;
    if (c->used < c->whylen) {
        int k = snprintf(c->why + c->used, c->whylen - c->used, "%s%s: %s",
                         c->used ? "; " : "", t->name, v->reason);
        if (k > 0)
            c->used += (size_t)k;
    }
    if (tier_reason_is_pace(v->reason) && more) {
        if (waits_for(r, t, v, now, text, sizeof(text))) {
            /* Preferred and only paced: this tier's retry_at, not the
             * earliest of the ones after it. */
            *c->retry_at = v->retry_at;
            c->waiting = true;
        } else {
            route_add(r, text);
        }
    } else if (btext[0] != '\0') {
        route_add(r, btext);
    } else {
        snprintf(text, sizeof(text), "%s: %s", t->name, v->reason);
        route_add(r, text);
    }
}

/* Admits the request on the first candidate tier that takes it, in the
 * order of preference: an earlier tier that is only paced is waited for
 * (waits_for) instead of going on to a later one. Returns the tier index,
 * or -1 with *retry_at (INT64_MAX: no tier left) and a description of why
 * in why. r->route says what the chosen tier was preferred over. */
int
worker__choose_tier(struct run *r, int64_t est, int64_t now, int64_t *retry_at,
                    char *why, size_t whylen)
{
    struct worker *w = r->w;
    int *idx = xcalloc(w->cfg->ntiers + 1, sizeof(int));
    size_t n = candidates(r, idx);
    struct choice c = {.retry_at = retry_at, .why = why, .whylen = whylen};
    int chosen = -1;

    *retry_at = INT64_MAX;
    why[0] = '\0';
    r->route[0] = '\0';
    r->budget_refused = false;
    for (size_t i = 0; i < n && chosen < 0 && !c.waiting; i++) {
        const struct config_tier *t = &w->cfg->tiers[idx[i]];
        struct tier_verdict v;
        int64_t send = 0;
        struct tier_no *no = &w->refused[idx[i]];
        char btext[256] = "";
        if (r->switched[idx[i]]) {
            char text[160];
            snprintf(text, sizeof(text), "%s: left after its answer", t->name);
            route_add(r, text);
            continue;
        }
        if (t->batch_mode) {
            char text[256];
            if (worker__batch_takes(r, idx[i],
                                    r->job.deadline_at - now - rest_ms(r), text,
                                    sizeof(text))) {
                chosen = idx[i];
                break;
            }
            route_add(r, text);
            continue;
        }
        if (no->pass == w->pass) {
            v = (struct tier_verdict){.admitted = false,
                                      .probe = false,
                                      .reason = no->reason,
                                      .retry_at = no->retry_at};
        } else if (admit(r, idx[i], est, now, &v, &send, btext,
                         sizeof(btext)) != 0) {
            continue;
        }
        if (v.admitted) {
            chosen = idx[i];
            r->send_id = send;
            r->send_est = est < 0 ? 0 : est; /* what tier_admit charged */
            break;
        }
        passed_over(r, t, &v, no, now, n > 1, btext, &c);
    }
    free(idx);
    return chosen;
}

/* Other tiers of the step that admit now or within the slack. */
int
worker__tiers_left(const struct run *r, int64_t est, int64_t now, int64_t slack)
{
    struct worker *w = r->w;
    int *idx = xcalloc(w->cfg->ntiers + 1, sizeof(int));
    size_t n = candidates(r, idx);
    int left = 0;

    for (size_t i = 0; i < n; i++) {
        struct q_tier_state st;
        struct tier_verdict v;
        if (idx[i] == r->cur_tier || r->switched[idx[i]] ||
            w->cfg->tiers[idx[i]].batch_mode)
            continue;
        if (tier_snapshot(w->db, &w->cfg->tiers[idx[i]], now, false, &st) != 0)
            continue;
        tier_evaluate(&w->cfg->tiers[idx[i]], &st, now, est, false, &v);
        if (v.admitted || v.retry_at - now <= slack)
            left++;
    }
    free(idx);
    return left;
}

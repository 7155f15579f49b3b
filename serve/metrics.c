/* metrics.c: GET /metrics, the store's numbers in Prometheus' text
 * exposition format (version 0.0.4), every name stepq_*: jobs by state,
 * open park items by reason, attempts by tier, outcome and decision,
 * request latency per tier, tokens and cost (USD) per tier (these four
 * from the ledger's running totals, which prunes leave as they were),
 * each tier's shared state, the oldest due job
 * and the workers holding leases. Read from the store on every scrape:
 * what every worker on every host did, not one process's counters; only
 * the waits for the store's locks are this process's own. */
#include "serve/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/price.h"
#include "common/xalloc.h"
#include "queue/report.h"
#include "queue/tiers.h"
#include "tier/tier.h"

/* A label value as the format wants it: \, " and newline escaped. */
static void
label(FILE *f, const char *v)
{
    for (; v != NULL && *v != '\0'; v++) {
        if (*v == '\\' || *v == '"')
            fprintf(f, "\\%c", *v);
        else if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

static void
head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Seconds since the epoch of a time in ms (0 stays 0). */
static double
secs(int64_t ms)
{
    return (double)ms / 1000.0;
}

static int
jobs_and_park(const struct serve_opts *o, FILE *f)
{
    int64_t counts[Q_JOB_NSTATES], park_open = 0;
    struct q_park_brief *pb = NULL;
    const char *reasons[64];
    int64_t nby[64];
    size_t np = 0, nr = 0;
    int rc;

    if ((rc = q_counts(o->db, counts, &park_open)) != 0 ||
        (rc = q_stats_park_open(o->db, 0, &pb, &np)) != 0)
        return rc;
    head(f, "stepq_jobs", "gauge", "Jobs by state.");
    for (int i = 0; i < Q_JOB_NSTATES; i++)
        fprintf(f, "stepq_jobs{state=\"%s\"} %lld\n", q_job_state_name(i),
                (long long)counts[i]);
    for (size_t i = 0; i < np; i++) {
        const char *r = pb[i].reason ? pb[i].reason : "unknown";
        size_t k = 0;
        while (k < nr && strcmp(reasons[k], r) != 0)
            k++;
        if (k == nr && nr < 64) {
            reasons[nr] = r;
            nby[nr++] = 0;
        }
        if (k < nr)
            nby[k]++;
    }
    head(f, "stepq_park_open", "gauge", "Open park items by reason.");
    for (size_t k = 0; k < nr; k++) {
        fputs("stepq_park_open{reason=\"", f);
        label(f, reasons[k]);
        fprintf(f, "\"} %lld\n", (long long)nby[k]);
    }
    q_park_briefs_free(pb, np);
    return 0;
}

/* Both NULL, or the same text. */
static bool
same_text(const char *a, const char *b)
{
    return a == NULL || b == NULL ? a == b : strcmp(a, b) == 0;
}

/* The same series: tier, outcome and decision (reasons are summed). */
static bool
same_series(const struct q_attempt_group *x, const struct q_attempt_group *y)
{
    return same_text(x->tier, y->tier) && same_text(x->outcome, y->outcome) &&
           same_text(x->decision, y->decision);
}

/* The groups hold ended attempts only (queue/report.h: outcome is never
 * NULL): an attempt in flight is stepq_jobs{state="running"}'s, a gauge,
 * not a series of this counter that would drop when it ends. */
static void
attempt_series(FILE *f, const struct q_attempt_group *g, size_t n)
{
    head(f, "stepq_attempts_total", "counter",
         "Attempts ended since the store began (kept across prunes) by "
         "tier (empty: an http step), outcome and decision (none: ended "
         "without one, as a cancelled attempt).");
    for (size_t i = 0; i < n; i++) {
        int64_t sum = 0;
        size_t first = 0;
        while (!same_series(&g[first], &g[i]))
            first++;
        if (first < i)
            continue; /* summed with its first group */
        for (size_t k = i; k < n; k++)
            sum += same_series(&g[k], &g[i]) ? g[k].count : 0;
        fputs("stepq_attempts_total{tier=\"", f);
        label(f, g[i].tier);
        fputs("\",outcome=\"", f);
        label(f, g[i].outcome);
        fputs("\",decision=\"", f);
        label(f, g[i].decision ? g[i].decision : "none");
        fprintf(f, "\"} %lld\n", (long long)sum);
    }
}

/* Tokens, or money when money is true, by tier, from the groups (ordered
 * by tier, so a tier's groups are together). Money is printed from
 * integer nano-dollars, exact; a tier whose attempts have no price is not
 * listed. */
static void
tier_sums(FILE *f, const struct q_attempt_group *g, size_t n, bool money)
{
    for (size_t i = 0, k; i < n; i = k) {
        int64_t tokens = 0, priced = 0, nusd = 0;
        for (k = i; k < n && same_text(g[k].tier, g[i].tier); k++) {
            tokens += g[k].tokens;
            priced += g[k].priced;
            nusd += g[k].cost_nusd;
        }
        if (money && priced == 0)
            continue;
        fputs(money ? "stepq_cost_usd_total{tier=\""
                    : "stepq_tokens_total{tier=\"",
              f);
        label(f, g[i].tier);
        if (money)
            fprintf(f, "\"} %lld.%09lld\n",
                    (long long)(nusd / PRICE_NUSD_PER_USD),
                    (long long)(nusd % PRICE_NUSD_PER_USD));
        else
            fprintf(f, "\"} %lld\n", (long long)tokens);
    }
}

/* The attempts, tokens and money since the store began: the ledger's
 * running totals, a few rows read whatever its size, kept across prunes
 * so these counters never drop. */
static int
attempts(const struct serve_opts *o, FILE *f)
{
    struct q_attempt_group *g = NULL;
    size_t n = 0;
    int rc = q_stats_attempts(o->db, &g, &n);

    if (rc != 0)
        return rc;
    attempt_series(f, g, n);
    head(f, "stepq_tokens_total", "counter",
         "Tokens the attempts used since the store began, by tier (empty: "
         "an http step): as reported, else estimated.");
    tier_sums(f, g, n, false);
    head(f, "stepq_cost_usd_total", "counter",
         "What the attempts cost in USD since the store began, by tier, at "
         "the tier's price; tiers whose attempts have no price are not "
         "listed.");
    tier_sums(f, g, n, true);
    q_attempt_groups_free(g, n);
    return 0;
}

/* Each budget per window of time, in the window it is in now: its limit
 * and what is spent and reserved of it. Budgets per schedule run have a
 * window per run and are in the report instead. */
static int
budgets(const struct serve_opts *o, FILE *f, int64_t now)
{
    static const char *const names[3] = {"stepq_budget_limit_usd",
                                         "stepq_budget_spent_usd",
                                         "stepq_budget_reserved_usd"};
    static const char *const helps[3] = {
        "A budget's limit in USD, for its current window.",
        "What settled sends cost of a budget's current window, in USD.",
        "The worst cases of sends still out, reserved of a budget's current "
        "window, in USD."};
    struct q_budget *b = NULL;
    size_t n = 0;
    int64_t v[3];
    int rc = o->cfg->nbudgets > 0 ? q_budgets_list(o->db, 0, &b, &n) : 0;

    for (int m = 0; rc == 0 && m < 3 && o->cfg->nbudgets > 0; m++) {
        head(f, names[m], "gauge", helps[m]);
        for (size_t i = 0; i < o->cfg->nbudgets; i++) {
            const struct config_budget *cb = &o->cfg->budgets[i];
            char win[64];
            int64_t ends = 0;
            if (!config_budget_window(cb, now, win, sizeof(win), &ends))
                continue;
            v[0] = cb->limit_nusd;
            v[1] = v[2] = 0;
            for (size_t k = 0; k < n; k++) {
                if (strcmp(b[k].name, cb->name) == 0 &&
                    strcmp(b[k].window, win) == 0) {
                    v[1] = b[k].spent_nusd;
                    v[2] = b[k].reserved_nusd;
                }
            }
            fprintf(f, "%s{budget=\"", names[m]);
            label(f, cb->name);
            fprintf(f, "\"} %lld.%09lld\n",
                    (long long)(v[m] / PRICE_NUSD_PER_USD),
                    (long long)(v[m] % PRICE_NUSD_PER_USD));
        }
    }
    q_budgets_free(b, n);
    return rc;
}

static int
latency(const struct serve_opts *o, FILE *f)
{
    static const int64_t bounds[Q_LATENCY_NBUCKETS] = Q_LATENCY_BOUNDS_MS;
    struct q_latency_group *g = NULL;
    size_t n = 0;
    int rc = q_stats_latency(o->db, &g, &n);

    if (rc != 0)
        return rc;
    head(f, "stepq_request_latency_seconds", "histogram",
         "Latency of finished chat requests by tier, since the store began "
         "(kept across prunes).");
    for (size_t i = 0; i < n; i++) {
        for (int b = 0; b < Q_LATENCY_NBUCKETS; b++) {
            fputs("stepq_request_latency_seconds_bucket{tier=\"", f);
            label(f, g[i].tier);
            fprintf(f, "\",le=\"%g\"} %lld\n", secs(bounds[b]),
                    (long long)g[i].le[b]);
        }
        fputs("stepq_request_latency_seconds_bucket{tier=\"", f);
        label(f, g[i].tier);
        fprintf(f, "\",le=\"+Inf\"} %lld\n", (long long)g[i].count);
        fputs("stepq_request_latency_seconds_sum{tier=\"", f);
        label(f, g[i].tier);
        fprintf(f, "\"} %.3f\n", secs(g[i].sum_ms));
        fputs("stepq_request_latency_seconds_count{tier=\"", f);
        label(f, g[i].tier);
        fprintf(f, "\"} %lld\n", (long long)g[i].count);
    }
    q_latency_groups_free(g, n);
    return 0;
}

/* One gauge per tier: name, help, and the value of each tier's state. */
struct tier_gauge {
    const char *name, *help;
    double (*value)(const struct config_tier *t, const struct q_tier_state *s,
                    int64_t now);
};

static double
g_pace(const struct config_tier *t, const struct q_tier_state *s, int64_t now)
{
    (void)now;
    return tier_rate_rpm(t, s);
}

static double
g_limited(const struct config_tier *t, const struct q_tier_state *s,
          int64_t now)
{
    (void)t;
    return s->limited_until > now ? secs(s->limited_until) : 0;
}

static double
g_exhausted(const struct config_tier *t, const struct q_tier_state *s,
            int64_t now)
{
    (void)t;
    return s->exhausted_until > now ? secs(s->exhausted_until) : 0;
}

static double
g_flight(const struct config_tier *t, const struct q_tier_state *s, int64_t now)
{
    (void)t;
    (void)now;
    return (double)s->in_flight;
}

static double
g_requests(const struct config_tier *t, const struct q_tier_state *s,
           int64_t now)
{
    (void)t;
    (void)now;
    return (double)s->window_requests;
}

static double
g_tokens(const struct config_tier *t, const struct q_tier_state *s, int64_t now)
{
    (void)t;
    (void)now;
    return (double)s->window_tokens;
}

static double
g_allowance(const struct config_tier *t, const struct q_tier_state *s,
            int64_t now)
{
    (void)t;
    (void)now;
    return (double)s->allowance_used;
}

static const struct tier_gauge gauges[] = {
    {"stepq_tier_pace_rpm", "The pace in force, requests per minute.", g_pace},
    {"stepq_tier_limited_until_seconds",
     "End of a throttle stop (unix time), 0 when none.", g_limited},
    {"stepq_tier_exhausted_until_seconds",
     "End of a quota wall (unix time), 0 when none.", g_exhausted},
    {"stepq_tier_in_flight", "Requests in flight, all workers together.",
     g_flight},
    {"stepq_tier_requests_last_minute", "Requests sent in the last minute.",
     g_requests},
    {"stepq_tier_tokens_last_minute",
     "Estimated tokens sent in the last minute.", g_tokens},
    {"stepq_tier_allowance_used_tokens",
     "Tokens used in the current allowance window.", g_allowance},
};

static int
tiers(const struct serve_opts *o, FILE *f, int64_t now)
{
    size_t nt = o->cfg->ntiers, ng = sizeof(gauges) / sizeof(gauges[0]);
    struct q_tier_state *st = xcalloc(nt ? nt : 1, sizeof(*st));
    static const enum q_breaker states[] = {Q_BREAKER_CLOSED, Q_BREAKER_OPEN,
                                            Q_BREAKER_HALF_OPEN};
    int rc = 0;

    for (size_t i = 0; i < nt && rc == 0; i++)
        rc = tier_snapshot(o->db, &o->cfg->tiers[i], now, true, &st[i]);
    if (rc != 0) {
        free(st);
        return rc;
    }
    head(f, "stepq_tier_breaker", "gauge",
         "1 for the state each tier's breaker is in.");
    for (size_t i = 0; i < nt; i++) {
        for (size_t k = 0; k < 3; k++) {
            fputs("stepq_tier_breaker{tier=\"", f);
            label(f, o->cfg->tiers[i].name);
            fprintf(f, "\",state=\"%s\"} %d\n", q_breaker_name(states[k]),
                    st[i].breaker == states[k]);
        }
    }
    for (size_t g = 0; g < ng; g++) {
        head(f, gauges[g].name, "gauge", gauges[g].help);
        for (size_t i = 0; i < nt; i++) {
            fprintf(f, "%s{tier=\"", gauges[g].name);
            label(f, o->cfg->tiers[i].name);
            fprintf(f, "\"} %.17g\n",
                    gauges[g].value(&o->cfg->tiers[i], &st[i], now));
        }
    }
    free(st);
    return 0;
}

static int
queue_and_workers(const struct serve_opts *o, FILE *f, int64_t now)
{
    struct q_worker_brief *w = NULL;
    int64_t due = 0;
    size_t n = 0;
    int rc;

    if ((rc = q_stats_oldest_due(o->db, now, &due)) != 0 ||
        (rc = q_stats_workers(o->db, &w, &n)) != 0)
        return rc;
    head(f, "stepq_oldest_due_job_age_seconds", "gauge",
         "How long the oldest queued job that is due has waited.");
    fprintf(f, "stepq_oldest_due_job_age_seconds %.3f\n",
            due > 0 && now > due ? secs(now - due) : 0.0);
    head(f, "stepq_worker_jobs_held", "gauge",
         "Running jobs each worker holds.");
    for (size_t i = 0; i < n; i++) {
        fputs("stepq_worker_jobs_held{worker=\"", f);
        label(f, w[i].worker);
        fprintf(f, "\"} %lld\n", (long long)w[i].held);
    }
    head(f, "stepq_worker_lease_until_seconds", "gauge",
         "The latest end of a worker's leases (unix time): each heartbeat "
         "moves it on.");
    for (size_t i = 0; i < n; i++) {
        fputs("stepq_worker_lease_until_seconds{worker=\"", f);
        label(f, w[i].worker);
        fprintf(f, "\"} %.3f\n", secs(w[i].lease_until));
    }
    q_worker_briefs_free(w, n);
    return 0;
}

/* This process's own waits for the store's locks (q_lock_waits), the
 * one series not read from the store: what the other processes on a
 * SQLite file cost serve's requests. Workers say theirs at exit. */
static void
lock_waits(const struct serve_opts *o, FILE *f)
{
    struct q_lock_waits w;

    q_lock_waits(o->db, &w);
    head(f, "stepq_store_lock_waits_total", "counter",
         "Times this serve process waited for a lock other processes held "
         "on the SQLite file (0 on PostgreSQL).");
    fprintf(f, "stepq_store_lock_waits_total %lld\n", (long long)w.count);
    head(f, "stepq_store_lock_wait_seconds_total", "counter",
         "Time this serve process spent waiting for those locks.");
    fprintf(f, "stepq_store_lock_wait_seconds_total %.6f\n",
            (double)w.total_us / 1e6);
    head(f, "stepq_store_lock_wait_longest_seconds", "gauge",
         "The longest of those waits since serve started; one reaching "
         "the bound (5 s) runs out.");
    fprintf(f, "stepq_store_lock_wait_longest_seconds %.6f\n",
            (double)w.longest_us / 1e6);
    head(f, "stepq_store_lock_waits_ran_out_total", "counter",
         "Waits that ran out (the request was answered 503).");
    fprintf(f, "stepq_store_lock_waits_ran_out_total %lld\n",
            (long long)w.ran_out);
}

enum MHD_Result
serve_metrics(const struct serve_opts *o, struct MHD_Connection *c, int64_t now)
{
    struct MHD_Response *r;
    enum MHD_Result ok;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc;

    if (f == NULL)
        return MHD_NO;
    /* Every series of one scrape from one moment of the store. */
    if ((rc = q_read_begin(o->db)) == 0) {
        rc = jobs_and_park(o, f);
        rc = rc ? rc : attempts(o, f);
        rc = rc ? rc : budgets(o, f, now);
        rc = rc ? rc : latency(o, f);
        rc = rc ? rc : tiers(o, f, now);
        rc = rc ? rc : queue_and_workers(o, f, now);
        q_read_end(o->db);
    }
    lock_waits(o, f); /* after the reads: their own waits count */
    fclose(f);
    if (rc != 0) {
        free(text);
        return serve_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable",
                                 "cannot read the metrics from the database");
    }
    r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8");
    ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

/* limit.c: the mock's rate limiters, shaped the way providers document
 * theirs, and the headers they answer with.
 *
 * A route's "limit" meters requests (rpm) and estimated tokens (tpm) with one
 * of three shapes:
 *   - token_bucket: a bucket of `burst` units refilled continuously at
 *     limit/60 per second (Anthropic documents this; OpenAI enforces 60,000
 *     RPM as 1,000 per second). Kept as a GCRA "theoretical arrival time", so
 *     the state is one number and the arithmetic has no drift.
 *   - fixed_window: limit per window aligned to the Unix epoch (a minute
 *     resets at :00), so it needs wall-clock time.
 *   - sliding_window: limit in any window_ms, from a log of admitted units.
 * A request is admitted only when every meter admits it; only then is it
 * taken from each. The meters never look at what stepq does: they model the
 * providers.
 */
#include "mock/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json.h"
#include "common/xalloc.h"

static const char *const limit_keys[] = {
    "shape",        "rpm",       "tpm",     "burst",
    "burst_tokens", "window_ms", "headers", NULL};

static const char *const shape_names[] = {
    [MOCK_SHAPE_NONE] = NULL,
    [MOCK_SHAPE_TOKEN_BUCKET] = "token_bucket",
    [MOCK_SHAPE_FIXED_WINDOW] = "fixed_window",
    [MOCK_SHAPE_SLIDING_WINDOW] = "sliding_window",
};

static const char *const style_names[] = {
    [MOCK_HDR_OPENAI] = "openai",
    [MOCK_HDR_ANTHROPIC] = "anthropic",
    [MOCK_HDR_NONE] = "none",
};

static int
pick(const cJSON *obj, const char *key, const char *path,
     const char *const *names, size_t n, const char *choices, int *out,
     char *err, size_t len)
{
    const char *s = NULL;
    char p[512];
    int rc = json_get_string(obj, key, false, path, &s, err, len);

    if (rc != 0 || s == NULL)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (names[i] != NULL && strcmp(s, names[i]) == 0) {
            *out = (int)i;
            return 0;
        }
    }
    return json_fail(err, len, json_path_key(p, sizeof(p), path, key),
                     "must be one of %s (got \"%s\")", choices, s);
}

static void
meter_init(struct mock_meter *m, int64_t limit, int64_t burst)
{
    memset(m, 0, sizeof(*m));
    m->limit = limit;
    m->burst = burst;
    m->win_idx = -1;
}

int
mock_limit_parse(const cJSON *obj, const char *path, struct mock_limit *l,
                 char *err, size_t len)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "limit");
    int64_t rpm = 0, tpm = 0, burst = 0, tburst = 0, window = 60000;
    int shape = MOCK_SHAPE_NONE, style = MOCK_HDR_OPENAI;
    bool bucket;
    char p[512], q[512];
    int rc;

    if (v == NULL)
        return 0;
    json_path_key(p, sizeof(p), path, "limit");
    if (!cJSON_IsObject(v))
        return json_fail(err, len, p, "must be an object");
    if ((rc = json_check_object(v, p, limit_keys, err, len)) != 0 ||
        (rc = pick(v, "shape", p, shape_names, STEPQ_ARRAY_LEN(shape_names),
                   "token_bucket, fixed_window, sliding_window", &shape, err,
                   len)) != 0 ||
        (rc = pick(v, "headers", p, style_names, STEPQ_ARRAY_LEN(style_names),
                   "openai, anthropic, none", &style, err, len)) != 0 ||
        (rc = json_get_int(v, "rpm", 1, 100000000, p, &rpm, err, len)) != 0 ||
        (rc = json_get_int(v, "tpm", 1, INT64_C(1000000000000), p, &tpm, err,
                           len)) != 0 ||
        (rc = json_get_int(v, "burst", 1, 100000000, p, &burst, err, len)) !=
            0 ||
        (rc = json_get_int(v, "burst_tokens", 1, INT64_C(1000000000000), p,
                           &tburst, err, len)) != 0 ||
        (rc = json_get_int(v, "window_ms", 1, 86400000, p, &window, err,
                           len)) != 0)
        return rc;
    if (shape == MOCK_SHAPE_NONE)
        return json_fail(err, len, json_path_key(q, sizeof(q), p, "shape"),
                         "missing (token_bucket, fixed_window or "
                         "sliding_window)");
    if (rpm == 0 && tpm == 0)
        return json_fail(err, len, p, "needs \"rpm\" or \"tpm\"");
    bucket = shape == MOCK_SHAPE_TOKEN_BUCKET;
    if (!bucket && (burst > 0 || tburst > 0))
        return json_fail(err, len,
                         json_path_key(q, sizeof(q), p,
                                       burst > 0 ? "burst" : "burst_tokens"),
                         "only for shape token_bucket");
    if (bucket && cJSON_GetObjectItemCaseSensitive(v, "window_ms") != NULL)
        return json_fail(err, len, json_path_key(q, sizeof(q), p, "window_ms"),
                         "only for fixed_window and sliding_window (a "
                         "token bucket refills per minute)");
    if (bucket && burst > 0 && rpm == 0)
        return json_fail(err, len, json_path_key(q, sizeof(q), p, "burst"),
                         "needs \"rpm\"");
    if (bucket && tburst > 0 && tpm == 0)
        return json_fail(err, len,
                         json_path_key(q, sizeof(q), p, "burst_tokens"),
                         "needs \"tpm\"");
    /* The default bucket holds one second's worth, at least one unit. */
    if (burst == 0)
        burst = rpm / 60 > 0 ? rpm / 60 : 1;
    if (tburst == 0)
        tburst = tpm / 60 > 0 ? tpm / 60 : 1;
    l->shape = (enum mock_shape)shape;
    l->headers = (enum mock_hstyle)style;
    l->window_ms = bucket ? 60000 : window;
    meter_init(&l->req, rpm, burst);
    meter_init(&l->tok, tpm, tburst);
    return 0;
}

void
mock_limit_legacy(struct mock_limit *l, int64_t rpm, int64_t window_ms)
{
    l->shape = MOCK_SHAPE_SLIDING_WINDOW;
    l->headers = MOCK_HDR_OPENAI;
    l->legacy = true;
    l->window_ms = window_ms;
    meter_init(&l->req, rpm, rpm);
    meter_init(&l->tok, 0, 0);
}

void
mock_limit_cleanup(struct mock_limit *l)
{
    free(l->req.log);
    free(l->tok.log);
    l->req.log = l->tok.log = NULL;
}

/* ---- meters ------------------------------------------------------------- */

/* A meter's view at one moment: units the next request may still take and
 * the ms until the meter is back to its initial (full) state. */
struct view {
    int64_t remaining;
    int64_t reset_ms;
};

static double
per_unit_ms(const struct mock_meter *m)
{
    return 60000.0 / (double)m->limit;
}

static void
slide(struct mock_meter *m, int64_t now, int64_t window)
{
    while (m->n > 0 && m->log[m->head].t <= now - window) {
        m->sum -= m->log[m->head].cost;
        m->head = (m->head + 1) % m->cap;
        m->n--;
    }
}

static void
roll(struct mock_meter *m, int64_t wall, int64_t window)
{
    int64_t idx = wall / window;

    if (idx != m->win_idx) {
        m->win_idx = idx;
        m->used = 0;
    }
}

/* capacity is the most one request may cost and still pass some day. */
static int64_t
capacity(const struct mock_limit *l, const struct mock_meter *m)
{
    return l->shape == MOCK_SHAPE_TOKEN_BUCKET ? m->burst : m->limit;
}

/* probe reports whether cost units may be taken now; otherwise *retry_ms is
 * the wait until they may (ignoring later requests). */
static bool
probe(const struct mock_limit *l, struct mock_meter *m, int64_t now,
      int64_t wall, int64_t cost, int64_t *retry_ms)
{
    switch (l->shape) {
    case MOCK_SHAPE_TOKEN_BUCKET: {
        double t = per_unit_ms(m), tat = m->tat > (double)now ? m->tat : now;
        double over = tat + (double)cost * t - (double)now - m->burst * t;
        /* A whisker of tolerance keeps float rounding from refusing a
         * request that arrives exactly on time. */
        if (over <= 1e-6)
            return true;
        *retry_ms = (int64_t)ceil(over - 1e-6);
        return false;
    }
    case MOCK_SHAPE_FIXED_WINDOW:
        roll(m, wall, l->window_ms);
        if (m->used + cost <= m->limit)
            return true;
        *retry_ms = (m->win_idx + 1) * l->window_ms - wall;
        return false;
    case MOCK_SHAPE_SLIDING_WINDOW: {
        int64_t freed = 0;
        slide(m, now, l->window_ms);
        if (m->sum + cost <= m->limit)
            return true;
        for (size_t i = 0; i < m->n; i++) {
            const struct mock_slot *s = &m->log[(m->head + i) % m->cap];
            freed += s->cost;
            if (m->sum - freed + cost <= m->limit) {
                *retry_ms = s->t + l->window_ms - now;
                break;
            }
        }
        return false;
    }
    case MOCK_SHAPE_NONE:
        break;
    }
    return true;
}

static void
take(const struct mock_limit *l, struct mock_meter *m, int64_t now,
     int64_t cost)
{
    switch (l->shape) {
    case MOCK_SHAPE_TOKEN_BUCKET:
        m->tat = (m->tat > (double)now ? m->tat : (double)now) +
                 (double)cost * per_unit_ms(m);
        break;
    case MOCK_SHAPE_FIXED_WINDOW:
        m->used += cost;
        break;
    case MOCK_SHAPE_SLIDING_WINDOW:
        if (m->n == m->cap) {
            /* Grow the ring, unrolled so the oldest entry is first. */
            size_t cap = m->cap ? m->cap * 2 : 16;
            struct mock_slot *log = xcalloc(cap, sizeof(*log));
            for (size_t i = 0; i < m->n; i++)
                log[i] = m->log[(m->head + i) % m->cap];
            free(m->log);
            m->log = log;
            m->cap = cap;
            m->head = 0;
        }
        m->log[(m->head + m->n) % m->cap] =
            (struct mock_slot){.t = now, .cost = cost};
        m->n++;
        m->sum += cost;
        break;
    case MOCK_SHAPE_NONE:
        break;
    }
}

static struct view
view(const struct mock_limit *l, const struct mock_meter *m, int64_t now,
     int64_t wall)
{
    struct view v = {0, 0};

    switch (l->shape) {
    case MOCK_SHAPE_TOKEN_BUCKET: {
        double t = per_unit_ms(m), debt = m->tat - (double)now;
        if (debt < 0)
            debt = 0;
        v.remaining = (int64_t)floor((m->burst * t - debt) / t + 1e-9);
        v.reset_ms = (int64_t)ceil(debt - 1e-6);
        break;
    }
    case MOCK_SHAPE_FIXED_WINDOW:
        v.remaining =
            m->win_idx == wall / l->window_ms ? m->limit - m->used : m->limit;
        v.reset_ms = v.remaining == m->limit
                         ? 0
                         : (m->win_idx + 1) * l->window_ms - wall;
        break;
    case MOCK_SHAPE_SLIDING_WINDOW:
        v.remaining = m->limit - m->sum;
        if (m->n > 0)
            v.reset_ms =
                m->log[(m->head + m->n - 1) % m->cap].t + l->window_ms - now;
        break;
    case MOCK_SHAPE_NONE:
        break;
    }
    if (v.remaining < 0)
        v.remaining = 0;
    if (v.reset_ms < 0)
        v.reset_ms = 0;
    return v;
}

bool
mock_limit_admit(struct mock_limit *l, int64_t now, int64_t wall,
                 int64_t tokens, struct mock_limit_result *res)
{
    int64_t rwait = 0, twait = 0;
    bool rok = true, tok = true;

    memset(res, 0, sizeof(*res));
    res->tokens = tokens;
    if (l->req.limit > 0)
        rok = probe(l, &l->req, now, wall, 1, &rwait);
    if (l->tok.limit > 0) {
        if (tokens > capacity(l, &l->tok)) {
            /* No wait will ever let it through: providers answer "Request
             * too large" instead of a time to wait. */
            res->too_large = true;
            tok = false;
        } else {
            tok = probe(l, &l->tok, now, wall, tokens, &twait);
        }
    }
    res->admitted = rok && tok;
    if (res->admitted) {
        if (l->req.limit > 0)
            take(l, &l->req, now, 1);
        if (l->tok.limit > 0)
            take(l, &l->tok, now, tokens);
    } else {
        /* Report what refused: requests first, as OpenAI does. */
        res->by_tokens = rok;
        res->retry_ms = rwait > twait ? rwait : twait;
        if (res->retry_ms < 1 && !res->too_large)
            res->retry_ms = 1;
    }
    return res->admitted;
}

/* ---- headers ------------------------------------------------------------ */

void
mock_go_duration(int64_t ms, char *buf, size_t len)
{
    int64_t h = ms / 3600000, m = ms / 60000 % 60, s = ms % 60000;
    char out[64], frac[8];
    int off = 0, fl;

    if (ms <= 0) {
        snprintf(buf, len, "0s");
        return;
    }
    if (ms < 1000) {
        snprintf(buf, len, "%" PRId64 "ms", ms);
        return;
    }
    /* out holds any int64 (at most 25 characters); buf gets what fits. */
    if (h > 0)
        off = snprintf(out, sizeof(out), "%" PRId64 "h", h);
    if (h > 0 || m > 0)
        off +=
            snprintf(out + off, sizeof(out) - (size_t)off, "%" PRId64 "m", m);
    fl = snprintf(frac, sizeof(frac), ".%03d", (int)(s % 1000));
    while (fl > 1 && frac[fl - 1] == '0')
        frac[--fl] = '\0';
    if (fl == 1)
        frac[0] = '\0';
    snprintf(out + off, sizeof(out) - (size_t)off, "%" PRId64 "%ss", s / 1000,
             frac);
    snprintf(buf, len, "%s", out);
}

/* rfc3339_after writes wall + ms, rounded up to a whole second (a client
 * that waits until then is never early), as "2026-12-01T08:15:03Z". */
static void
rfc3339_after(int64_t wall, int64_t ms, char *buf, size_t len)
{
    time_t t = (time_t)((wall + ms + 999) / 1000);
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void
put(struct mock_extra *x, int *n, int max, const char *name, int64_t v,
    const char *unit)
{
    if (*n >= max)
        return;
    x[*n].name = name;
    snprintf(x[*n].value, sizeof(x[*n].value), "%" PRId64 "%s", v, unit);
    (*n)++;
}

static void
put_str(struct mock_extra *x, int *n, int max, const char *name, const char *s)
{
    if (*n >= max)
        return;
    x[*n].name = name;
    snprintf(x[*n].value, sizeof(x[*n].value), "%s", s);
    (*n)++;
}

int
mock_limit_headers(const struct mock_limit *l,
                   const struct mock_limit_result *res, int64_t now,
                   int64_t wall, struct mock_extra *x, int max)
{
    const struct mock_meter *ms[2] = {&l->req, &l->tok};
    static const char *const oa[2][3] = {
        {"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests",
         "x-ratelimit-reset-requests"},
        {"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens",
         "x-ratelimit-reset-tokens"}};
    static const char *const an[2][3] = {
        {"anthropic-ratelimit-requests-limit",
         "anthropic-ratelimit-requests-remaining",
         "anthropic-ratelimit-requests-reset"},
        {"anthropic-ratelimit-tokens-limit",
         "anthropic-ratelimit-tokens-remaining",
         "anthropic-ratelimit-tokens-reset"}};
    int64_t secs = (res->retry_ms + 999) / 1000;
    char buf[64];
    int n = 0;

    if (l->headers == MOCK_HDR_NONE)
        return 0;
    if (l->legacy) {
        /* Route-level "rpm": the headers it always sent, on 429s only. */
        if (res->admitted)
            return 0;
        secs = secs < 1 ? 1 : secs;
        put(x, &n, max, "Retry-After", secs, "");
        put(x, &n, max, "X-RateLimit-Limit-Requests", l->req.limit, "");
        put(x, &n, max, "X-RateLimit-Remaining-Requests", 0, "");
        put(x, &n, max, "X-RateLimit-Reset-Requests", secs, "s");
        return n;
    }
    for (int i = 0; i < 2; i++) {
        const struct mock_meter *m = ms[i];
        const char *const *names =
            l->headers == MOCK_HDR_OPENAI ? oa[i] : an[i];
        struct view v;
        if (m->limit == 0)
            continue;
        v = view(l, m, now, wall);
        put(x, &n, max, names[0], m->limit, "");
        put(x, &n, max, names[1], v.remaining, "");
        if (l->headers == MOCK_HDR_OPENAI)
            mock_go_duration(v.reset_ms, buf, sizeof(buf));
        else
            rfc3339_after(wall, v.reset_ms, buf, sizeof(buf));
        put_str(x, &n, max, names[2], buf);
    }
    if (!res->admitted && !res->too_large) {
        put(x, &n, max, "retry-after", secs < 1 ? 1 : secs, "");
        if (l->headers == MOCK_HDR_OPENAI)
            put(x, &n, max, "retry-after-ms", res->retry_ms, "");
    }
    return n;
}

char *
mock_limit_message(const struct mock_limit *l,
                   const struct mock_limit_result *res, int64_t now,
                   int64_t wall, const char *model)
{
    const struct mock_meter *m = res->by_tokens ? &l->tok : &l->req;
    const char *unit = res->by_tokens ? "tokens" : "requests";
    char per[32], wait[32], msg[512];
    int64_t used = m->limit;

    mock_go_duration(res->retry_ms, wait, sizeof(wait));
    if (l->window_ms == 60000) {
        snprintf(per, sizeof(per), "per min (%s)",
                 res->by_tokens ? "TPM" : "RPM");
    } else {
        char w[24];
        mock_go_duration(l->window_ms, w, sizeof(w));
        snprintf(per, sizeof(per), "per %s", w);
    }
    if (l->legacy) {
        snprintf(msg, sizeof(msg),
                 "Rate limit reached for requests per min (RPM): Limit %" PRId64
                 ", Used %" PRId64 ", Requested 1. Please try again in %" PRId64
                 "s.",
                 m->limit, m->limit,
                 (res->retry_ms + 999) / 1000 < 1
                     ? 1
                     : (res->retry_ms + 999) / 1000);
    } else if (res->too_large) {
        snprintf(msg, sizeof(msg),
                 "Request too large for %s in organization org-mock on "
                 "tokens %s: Limit %" PRId64 ", Requested %" PRId64
                 ". The input or output tokens must be reduced in order to "
                 "run successfully.",
                 model, per, m->limit, res->tokens);
    } else if (l->headers == MOCK_HDR_ANTHROPIC) {
        snprintf(msg, sizeof(msg),
                 "This request would exceed the rate limit for your "
                 "organization of %" PRId64 " %s %s. Please try again in %s.",
                 m->limit, unit, per, wait);
    } else {
        if (res->by_tokens)
            used = m->limit - view(l, m, now, wall).remaining;
        snprintf(msg, sizeof(msg),
                 "Rate limit reached for %s in organization org-mock on %s "
                 "%s: Limit %" PRId64 ", Used %" PRId64 ", Requested %" PRId64
                 ". Please try again in %s.",
                 model, unit, per, m->limit, used,
                 res->by_tokens ? res->tokens : 1, wait);
    }
    return xstrdup(msg);
}

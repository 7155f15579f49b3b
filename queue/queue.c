/* queue.c: the backend-neutral part of the storage contract: opening by
 * location (which backend serves it; a location's password is masked in
 * redact.c), the names of states, releasing what
 * the contract's calls return, and the rules every backend shares (what
 * of a raw body the ledger keeps). The storage itself is a backend's:
 * queue/sqlite/ today.
 */
#include "queue/queue.h"
#include "queue/park.h"
#include "queue/report.h"
#include "queue/sched.h"
#include "queue/tiers.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/location.h"
#include "common/log.h"
#include "queue/internal.h"

static const char *const job_states[Q_JOB_NSTATES] = {
    "queued", "running", "succeeded", "failed", "parked", "cancelled"};

static const char *const step_states[Q_STEP_NSTATES] = {
    "pending", "running", "succeeded", "failed", "parked", "skipped"};

const char *
q_job_state_name(enum q_job_state s)
{
    return (unsigned)s < Q_JOB_NSTATES ? job_states[s] : "unknown";
}

int
q_job_state_from_name(const char *name, enum q_job_state *out)
{
    for (int i = 0; i < Q_JOB_NSTATES; i++) {
        if (strcmp(name, job_states[i]) == 0) {
            *out = (enum q_job_state)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *
q_step_state_name(enum q_step_state s)
{
    return (unsigned)s < Q_STEP_NSTATES ? step_states[s] : "unknown";
}

static const char *const breaker_names[] = {"closed", "open", "half_open"};

const char *
q_breaker_name(enum q_breaker b)
{
    return (unsigned)b < 3 ? breaker_names[b] : "unknown";
}

/* ---- opening by location ---------------------------------------------- */

static bool
has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* is_pg: a libpq URI ("postgresql://..." or "postgres://...", the bare
 * "postgresql://" leaving everything to the PG* environment variables) or
 * libpq's keyword form ("host=/tmp dbname=x"). */
static bool
is_pg(const char *location)
{
    return has_prefix(location, "postgresql://") ||
           has_prefix(location, "postgres://") ||
           location_is_keywords(location);
}

const char *
q_location_kinds(void)
{
    return STEPQ_WITH_PG ? "a file path, sqlite:PATH or a postgresql:// URL"
                         : "a file path or sqlite:PATH";
}

/* open_location picks the backend: "sqlite:PATH" or a plain PATH is
 * SQLite, a libpq location PostgreSQL; any other "scheme://..." names a
 * backend this build does not have. */
static int
open_location(const char *location, const struct q_open_opts *opts, bool create,
              q_db **out)
{
    static const char sqlite_scheme[] = "sqlite:";
    char where[256];

    if (location == NULL || location[0] == '\0')
        return -EINVAL;
    if (has_prefix(location, sqlite_scheme)) {
        location += sizeof(sqlite_scheme) - 1;
        if (location[0] == '\0')
            return -EINVAL;
        return q__sqlite_open(location, opts, create, 0, out);
    }
    if (is_pg(location)) {
#if STEPQ_WITH_PG
        return q__pg_open(location, opts, create, out);
#else
        log_error("%s: this stepq was built without PostgreSQL "
                  "(STEPQ_WITH_PG=OFF): it opens %s",
                  q_location_redact(location, where, sizeof(where)),
                  q_location_kinds());
        return -EPROTONOSUPPORT;
#endif
    }
    if (!location_is_path(location)) {
        log_info("%s: no storage backend for this location in this build "
                 "(it opens %s)",
                 q_location_redact(location, where, sizeof(where)),
                 q_location_kinds());
        return -EPROTONOSUPPORT;
    }
    return q__sqlite_open(location, opts, create, 0, out);
}

int
q_open(const char *location, const struct q_open_opts *opts, q_db **out)
{
    return open_location(location, opts, true, out);
}

int
q_open_existing(const char *location, const struct q_open_opts *opts,
                q_db **out)
{
    return open_location(location, opts, false, out);
}

/* ---- rules every backend shares ---------------------------------------- */

int
q__version_check(const char *where, int have)
{
    if (have == 0)
        return -ENOENT;
    if (have > q_schema_version()) {
        log_error("%s: schema version %d is newer than this stepq knows "
                  "(%d); upgrade stepq",
                  where, have, q_schema_version());
        return -ENOTSUP;
    }
    if (have < q_schema_version()) {
        log_info("%s: schema version %d, this stepq needs %d", where, have,
                 q_schema_version());
        return -ESTALE;
    }
    return 0;
}

int
q__claim_check(const char *worker, int64_t lease_ms, size_t *max)
{
    if (worker == NULL || worker[0] == '\0' || *max == 0 || lease_ms <= 0)
        return -EINVAL;
    if (*max > 256)
        *max = 256;
    return 0;
}

struct q__enqueue_row
q__enqueue_row(const struct q_job_new *j, const struct q_enqueue_opts *o,
               int64_t now)
{
    struct q__enqueue_row r = {
        .key = o && o->key ? o->key : j->key,
        .prio = o && o->has_priority ? o->priority : j->priority,
        .run_at = o && o->has_run_at ? o->run_at : j->run_at,
    };

    if (r.run_at <= 0)
        r.run_at = now;
    return r;
}

void
q__tier_underive(struct q_tier_state *st)
{
    st->window_requests = st->window_tokens = 0;
    st->in_flight = 0;
    st->probe_in_flight = false;
}

bool
q__append(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size - *len)
        return false;
    *len += (size_t)n;
    return true;
}

size_t
q__body_keep(const char *body, size_t len, int64_t max)
{
    size_t keep = len;

    if (body == NULL)
        return 0;
    if ((int64_t)keep > max) {
        keep = max > 0 ? (size_t)max : 0;
        /* Cut on a character boundary so the kept text stays UTF-8. */
        while (keep > 0 && ((unsigned char)body[keep] & 0xC0) == 0x80)
            keep--;
    }
    return keep;
}

/* ---- releasing results ------------------------------------------------- */

void
q_job_cleanup(struct q_job *job)
{
    if (job == NULL)
        return;
    free(job->name);
    free(job->key);
    free(job->lease_owner);
    free(job->spec);
    free(job->error);
    free(job->input);
    q_steps_free(job->steps, job->nsteps);
    memset(job, 0, sizeof(*job));
}

void
q__array_free(void *v, size_t n, size_t elem, q__clean_fn clean)
{
    for (size_t i = 0; v != NULL && i < n; i++)
        clean((char *)v + i * elem);
    free(v);
}

void
q__job_clean(void *e)
{
    q_job_cleanup(e);
}

void
q_jobs_free(struct q_job *jobs, size_t n)
{
    q__array_free(jobs, n, sizeof(*jobs), q__job_clean);
}

void
q__step_clean(void *e)
{
    struct q_step *st = e;

    free(st->tier);
    free(st->output);
    free(st->pin_tier);
}

void
q_steps_free(struct q_step *steps, size_t n)
{
    q__array_free(steps, n, sizeof(*steps), q__step_clean);
}

void
q__attempt_clean(void *e)
{
    struct q_attempt *a = e;

    free(a->tier);
    free(a->request_sha256);
    free(a->outcome);
    free(a->reason);
    free(a->decision);
    free(a->body);
    free(a->route);
    free(a->kind);
    free(a->call_id);
    free(a->tool);
    free(a->args);
    free(a->batch_provider_id);
}

void
q_attempts_free(struct q_attempt *a, size_t n)
{
    q__array_free(a, n, sizeof(*a), q__attempt_clean);
}

void
q_park_item_cleanup(struct q_park_item *it)
{
    if (it == NULL)
        return;
    free(it->step_name);
    free(it->reason);
    free(it->request_sha256);
    free(it->request);
    free(it->error);
    free(it->tier);
    free(it->resolution);
    free(it->resolved_by);
    free(it->note);
    free(it->answer);
    memset(it, 0, sizeof(*it));
}

void
q__park_clean(void *e)
{
    q_park_item_cleanup(e);
}

void
q_park_items_free(struct q_park_item *items, size_t n)
{
    q__array_free(items, n, sizeof(*items), q__park_clean);
}

void
q__retry_clean(void *e)
{
    struct q_retry *r = e;

    free(r->by);
    free(r->prior_error);
}

void
q_retries_free(struct q_retry *r, size_t n)
{
    q__array_free(r, n, sizeof(*r), q__retry_clean);
}

void
q__group_clean(void *e)
{
    struct q_attempt_group *g = e;

    free(g->tier);
    free(g->outcome);
    free(g->reason);
    free(g->decision);
}

void
q_attempt_groups_free(struct q_attempt_group *g, size_t n)
{
    q__array_free(g, n, sizeof(*g), q__group_clean);
}

void
q__latency_clean(void *e)
{
    free(((struct q_latency_group *)e)->tier);
}

void
q_latency_groups_free(struct q_latency_group *g, size_t n)
{
    q__array_free(g, n, sizeof(*g), q__latency_clean);
}

void
q__worker_clean(void *e)
{
    free(((struct q_worker_brief *)e)->worker);
}

void
q_worker_briefs_free(struct q_worker_brief *w, size_t n)
{
    q__array_free(w, n, sizeof(*w), q__worker_clean);
}

void
q__brief_clean(void *e)
{
    struct q_park_brief *p = e;

    free(p->job_name);
    free(p->step);
    free(p->reason);
    free(p->error);
    free(p->tier);
}

void
q_park_briefs_free(struct q_park_brief *p, size_t n)
{
    q__array_free(p, n, sizeof(*p), q__brief_clean);
}

void
q_sched_cleanup(struct q_sched *s)
{
    if (s == NULL)
        return;
    free(s->name);
    s->name = NULL;
}

void
q__sched_clean(void *e)
{
    q_sched_cleanup(e);
}

void
q_scheds_free(struct q_sched *s, size_t n)
{
    q__array_free(s, n, sizeof(*s), q__sched_clean);
}

void
q__report_tier_clean(void *e)
{
    free(((struct q_report_tier *)e)->tier);
}

void
q_report_tiers_free(struct q_report_tier *t, size_t n)
{
    q__array_free(t, n, sizeof(*t), q__report_tier_clean);
}

void
q__report_failure_clean(void *e)
{
    struct q_report_failure *f = e;

    free(f->outcome);
    free(f->reason);
    free(f->tier);
    free(f->body);
}

void
q__report_job_clean(void *e)
{
    struct q_report_job *j = e;

    free(j->name);
    free(j->key);
}

void
q_report_jobs_free(struct q_report_job *j, size_t n)
{
    q__array_free(j, n, sizeof(*j), q__report_job_clean);
}

void
q_report_failures_free(struct q_report_failure *f, size_t n)
{
    q__array_free(f, n, sizeof(*f), q__report_failure_clean);
}

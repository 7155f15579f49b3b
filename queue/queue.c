/* queue.c: the backend-neutral part of the storage contract: opening by
 * location (which backend serves it), the names of states, releasing what
 * the contract's calls return, and the rules every backend shares (what
 * of a raw body the ledger keeps). The storage itself is a backend's:
 * queue/sqlite/ today.
 */
#include "queue/queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* A location is "sqlite:PATH" or a plain PATH (SQLite); any other
 * "scheme://..." names a backend this build does not have. */
static int
backend_path(const char *location, const char **path)
{
    static const char sqlite_scheme[] = "sqlite:";
    size_t n = sizeof(sqlite_scheme) - 1;

    if (location == NULL || location[0] == '\0')
        return -EINVAL;
    if (strncmp(location, sqlite_scheme, n) == 0) {
        *path = location + n;
        return (*path)[0] != '\0' ? 0 : -EINVAL;
    }
    if (strstr(location, "://") != NULL) {
        log_info("%s: no storage backend for this location in this build "
                 "(it has sqlite:PATH)",
                 location);
        return -EPROTONOSUPPORT;
    }
    *path = location;
    return 0;
}

int
q_open(const char *location, const struct q_open_opts *opts, q_db **out)
{
    const char *path = NULL;
    int rc = backend_path(location, &path);

    return rc != 0 ? rc : q__sqlite_open(path, opts, true, 0, out);
}

int
q_open_existing(const char *location, const struct q_open_opts *opts,
                q_db **out)
{
    const char *path = NULL;
    int rc = backend_path(location, &path);

    return rc != 0 ? rc : q__sqlite_open(path, opts, false, 0, out);
}

/* ---- rules every backend shares ---------------------------------------- */

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

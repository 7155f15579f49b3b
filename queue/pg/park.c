/* park.c: PostgreSQL storage of park items and the primitives a
 * resolution is made of (park/ composes them): close an item, re-queue or
 * fail a parked job, reset a parked step. Each call is one statement; the
 * meaning is the SQLite backend's (queue/sqlite/park.c). */
#include "queue/pg/internal.h"

#include <errno.h>

#include "queue/park.h"

int
q__pg_park_add(q_db *db, const struct q_park_new *p, int64_t *id)
{
    struct q__pg_params pp = {0};
    int64_t got;
    int rc;

    q__pg_p_int(&pp, p->job_id);
    q__pg_p_int(&pp, p->step);
    q__pg_p_text(&pp, p->step_name);
    q__pg_p_text(&pp, p->reason);
    q__pg_p_int(&pp, p->attempts);
    q__pg_p_text(&pp, p->request_sha256);
    q__pg_p_text(&pp, p->request);
    q__pg_p_text(&pp, p->error);
    q__pg_p_text(&pp, p->tier);
    q__pg_p_int(&pp, p->parked_at);
    rc = q__pg_select_one(q__pg(db), ST_PARK_ADD, &pp, sizeof(got),
                          q__pg_read_ints, &got, "parking a step");
    if (rc == 0)
        *id = got;
    return rc == -ENOENT ? -EIO : rc; /* RETURNING gave no row */
}

static void
read_park(const PGresult *res, int r, void *elem)
{
    struct q_park_item *p = elem;

    p->id = q__pg_int(res, r, 0);
    p->job_id = q__pg_int(res, r, 1);
    p->step = (int)q__pg_int(res, r, 2);
    p->step_name = q__pg_text(res, r, 3);
    p->reason = q__pg_text(res, r, 4);
    p->attempts = (int)q__pg_int(res, r, 5);
    p->request_sha256 = q__pg_text(res, r, 6);
    p->request = q__pg_text(res, r, 7);
    p->error = q__pg_text(res, r, 8);
    p->tier = q__pg_text(res, r, 9);
    p->parked_at = q__pg_int(res, r, 10);
    p->open = q__pg_int(res, r, 11) != 0;
    p->resolution = q__pg_text(res, r, 12);
    p->resolved_by = q__pg_text(res, r, 13);
    p->resolved_at = q__pg_int(res, r, 14);
    p->note = q__pg_text(res, r, 15);
    p->answer = q__pg_text(res, r, 16);
}

int
q__pg_park_get(q_db *db, int64_t id, struct q_park_item *out)
{
    struct q__pg_params p = {0};

    q__pg_p_int(&p, id);
    return q__pg_select_one(q__pg(db), ST_PARK_GET, &p, sizeof(*out), read_park,
                            out, "reading a park item");
}

int
q__pg_park_list(q_db *db, const struct q_park_filter *f,
                struct q_park_item **out, size_t *n)
{
    struct q__pg_params p = {0};
    void *v = NULL;
    int rc;

    q__pg_p_bool(&p, f->all);
    q__pg_p_text(&p, f->reason);
    q__pg_p_text(&p, f->tier);
    q__pg_p_int(&p, f->job_id);
    q__pg_p_int(&p, f->resolved_since > 0 ? f->resolved_since : 0);
    rc = q__pg_select(q__pg(db), ST_PARK_LIST, &p, sizeof(struct q_park_item),
                      read_park, &v, n, "listing park items");
    if (rc == 0)
        *out = v;
    return rc;
}

int
q__pg_park_close(q_db *db, int64_t id, const struct q_park_close *c)
{
    struct q__pg_params p = {0};
    int64_t got[2]; /* items closed, whether id exists */
    int rc;

    if (c == NULL || c->resolution == NULL)
        return -EINVAL;
    q__pg_p_int(&p, id);
    q__pg_p_text(&p, c->resolution);
    q__pg_p_text(&p, c->by);
    q__pg_p_int(&p, c->now);
    q__pg_p_text(&p, c->note);
    q__pg_p_text(&p, c->answer);
    rc = q__pg_select_one(q__pg(db), ST_PARK_CLOSE, &p, sizeof(got),
                          q__pg_read_ints, got, "resolving a park item");
    if (rc == 0 && got[0] == 0)
        rc = got[1] != 0 ? -EALREADY : -ENOENT;
    return rc;
}

/* Moves parked job job_id to state at now (queued: due at run_at, its
 * deadline at deadline_at; failed: with error; succeeded). */
static int
leave_parked(q_db *db, int64_t job_id, enum q_job_state state,
             const char *error, int64_t now, int64_t run_at,
             int64_t deadline_at, const char *what)
{
    struct q__pg_params p = {0};
    int rc;

    q__pg_p_int(&p, job_id);
    q__pg_p_int(&p, state);
    q__pg_p_text(&p, error);
    if (state == Q_JOB_QUEUED)
        q__pg_p_int(&p, run_at);
    else
        q__pg_p_text(&p, NULL); /* run_at kept */
    q__pg_p_int(&p, now);
    if (state == Q_JOB_QUEUED)
        q__pg_p_int(&p, deadline_at);
    else
        q__pg_p_text(&p, NULL); /* deadline kept */
    rc = q__pg_select_one(q__pg(db), ST_JOB_LEAVE_PARKED, &p, 0, NULL, NULL,
                          what);
    return rc == -ENOENT ? -EALREADY : rc; /* not parked */
}

int
q__pg_job_requeue_parked(q_db *db, int64_t job_id, int64_t now, int64_t run_at,
                         int64_t deadline_at)
{
    return leave_parked(db, job_id, Q_JOB_QUEUED, NULL, now, run_at,
                        deadline_at, "re-queueing a parked job");
}

int
q__pg_job_wake(q_db *db, int64_t job_id, int64_t now)
{
    struct q__pg_params p = {0};
    int rc;

    q__pg_p_int(&p, job_id);
    q__pg_p_int(&p, now);
    rc = q__pg_select_one(q__pg(db), ST_JOB_WAKE, &p, 0, NULL, NULL,
                          "waking a queued job");
    return rc == -ENOENT ? -EALREADY : rc; /* not queued, or due */
}

int
q__pg_job_end_parked(q_db *db, int64_t job_id, enum q_job_state state,
                     const char *error, int64_t now)
{
    return leave_parked(db, job_id, state, error, now, 0, 0,
                        "ending a parked job");
}

int
q__pg_step_reset(q_db *db, int64_t job_id, int index,
                 const struct q_step_reset *r)
{
    struct q__pg_params p = {0};

    q__pg_p_int(&p, job_id);
    q__pg_p_int(&p, index);
    q__pg_p_int(&p, r->state);
    q__pg_p_text(&p, r->output);
    q__pg_p_int(&p, r->reset_after);
    q__pg_p_text(&p, r->pin_tier);
    return q__pg_run(q__pg(db), ST_STEP_RESET, &p, NULL,
                     "resetting a parked step");
}

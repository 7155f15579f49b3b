/* audit.c: the audit trail's one write (park_audit), shared by the CLI
 * and `stepq serve`: a row of the store's audit table (q_audit_add) says
 * who made a write, what and from where, and goes in the transaction of
 * that write (park_audited); and the writes both front ends make, with
 * their rows. */
#include "park/park.h"

#include <errno.h>
#include <stdlib.h>

#include "queue/audit.h"
#include "queue/park.h"

int
park_audit(q_db *db, const struct park_audit *a)
{
    struct q_audit_new row = {.at = a->now,
                              .who = a->who,
                              .action = a->action,
                              .job_id = a->job_id,
                              .park_id = a->park_id,
                              .source = a->source};
    char *detail = NULL;
    int rc;

    if (a->detail != NULL && !cJSON_IsObject(a->detail))
        return -EINVAL;
    detail = a->detail != NULL ? cJSON_PrintUnformatted(a->detail) : NULL;
    row.detail = detail != NULL ? detail : "{}";
    rc = q_audit_add(db, &row);
    free(detail);
    return rc;
}

int
park_audited(q_db *db, int rc, const struct park_audit *a)
{
    if (rc == 0)
        rc = park_audit(db, a);
    if (rc == 0)
        return q_tx_commit(db);
    q_tx_rollback(db);
    return rc;
}

/* The detail every resolution records: how, by whom, the note, the
 * tier. */
static cJSON *
decision_detail(const struct park_decision *d)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "resolution", park_how_name(d->how));
    cJSON_AddStringToObject(o, "by", d->by);
    if (d->note != NULL)
        cJSON_AddStringToObject(o, "note", d->note);
    if (d->tier != NULL)
        cJSON_AddStringToObject(o, "tier", d->tier);
    return o;
}

int
park_resolve_audited(q_db *db, int64_t id, const struct park_decision *d,
                     const struct park_audit *by)
{
    struct park_audit a = *by;
    struct q_park_item it = {0};
    cJSON *detail = decision_detail(d);
    int rc;

    a.action = "park.resolve";
    a.park_id = id;
    a.detail = detail;
    if ((rc = q_tx_begin(db)) == 0) {
        rc = q_park_get(db, id, &it);
        a.job_id = it.job_id;
        if (rc == 0)
            rc = park_resolve(db, id, d);
        rc = park_audited(db, rc, &a);
    }
    q_park_item_cleanup(&it);
    cJSON_Delete(detail);
    return rc;
}

int
park_resolve_matching_audited(q_db *db, const struct q_park_filter *f,
                              const struct park_decision *d, int64_t *n,
                              const struct park_audit *by)
{
    struct park_audit a = *by;
    cJSON *detail = decision_detail(d), *m;
    int64_t got = 0;
    int rc;

    m = cJSON_AddObjectToObject(detail, "matching");
    if (f->reason != NULL)
        cJSON_AddStringToObject(m, "reason", f->reason);
    if (f->tier != NULL)
        cJSON_AddStringToObject(m, "tier", f->tier);
    if (f->job_id > 0)
        cJSON_AddNumberToObject(m, "job_id", (double)f->job_id);
    a.action = "park.resolve_all";
    a.job_id = f->job_id;
    a.detail = detail;
    if ((rc = q_tx_begin(db)) == 0) {
        rc = park_resolve_matching(db, f, d, &got);
        cJSON_AddNumberToObject(detail, "resolved", (double)got);
        rc = park_audited(db, rc, &a);
    }
    if (rc == 0)
        *n = got;
    cJSON_Delete(detail);
    return rc;
}

int
park_cancel_job_audited(q_db *db, int64_t job_id, const char *by_name,
                        const struct park_audit *by)
{
    struct park_audit a = *by;
    cJSON *detail = cJSON_CreateObject();
    int rc;

    if (by_name != NULL)
        cJSON_AddStringToObject(detail, "by", by_name);
    a.action = "job.cancel";
    a.job_id = job_id;
    a.detail = detail;
    if ((rc = q_tx_begin(db)) == 0)
        rc = park_audited(db, park_cancel_job(db, job_id, by_name, a.now), &a);
    cJSON_Delete(detail);
    return rc;
}

int
park_retry_job_audited(q_db *db, int64_t job_id, const struct park_retry *r,
                       struct park_retried *out, char *err, size_t len,
                       const struct park_audit *by)
{
    struct park_audit a = *by;
    cJSON *detail = cJSON_CreateObject();
    int rc;

    cJSON_AddStringToObject(detail, "by", r->by);
    if (r->from != NULL)
        cJSON_AddStringToObject(detail, "from", r->from);
    if (r->force_side_effects)
        cJSON_AddBoolToObject(detail, "force_side_effects", true);
    a.action = "job.retry";
    a.job_id = job_id;
    a.detail = detail;
    if ((rc = q_tx_begin(db)) == 0)
        rc = park_audited(db, park_retry_job(db, job_id, r, out, err, len), &a);
    cJSON_Delete(detail);
    return rc;
}

int
park_audit_enqueued(q_db *db, const struct q_enqueue_result *res, size_t n,
                    const struct park_audit *by)
{
    struct park_audit a = *by;
    cJSON *detail = cJSON_CreateObject();
    size_t fresh = 0;
    int rc;

    for (size_t i = 0; i < n; i++)
        fresh += !res[i].duplicate;
    cJSON_AddNumberToObject(detail, "jobs", (double)n);
    cJSON_AddNumberToObject(detail, "new", (double)fresh);
    if (n > 1) {
        cJSON_AddNumberToObject(detail, "first_id", (double)res[0].id);
        cJSON_AddNumberToObject(detail, "last_id", (double)res[n - 1].id);
    }
    a.action = "enqueue";
    a.job_id = n == 1 ? res[0].id : 0;
    a.detail = detail;
    rc = park_audit(db, &a);
    cJSON_Delete(detail);
    return rc;
}

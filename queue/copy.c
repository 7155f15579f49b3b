/* copy.c: q_copy, copying a whole store into another one (`stepq copy`),
 * neutral to the backend. The tables are described here once, column
 * for column as queue/sqlite/schema.c makes them (the PostgreSQL schema
 * uses the same names); each backend reads and writes rows of a described
 * table as values (the copy_* entries of struct q__ops). The whole copy is
 * one transaction of the target, so a copy that fails leaves it as it was.
 */
#include "queue/admin.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "queue/internal.h"

#define I Q__COL_INT
#define R Q__COL_REAL
#define T Q__COL_TEXT

static const struct q__column job_cols[] = {
    {"id", I},          {"name", T},        {"key", T},
    {"state", I},       {"priority", I},    {"run_at", I},
    {"deadline_at", I}, {"created_at", I},  {"updated_at", I},
    {"lease_owner", T}, {"lease_until", I}, {"claims", I},
    {"spec", T},        {"error", T},       {"input", T},
};

static const struct q__column step_cols[] = {
    {"job_id", I}, {"idx", I},         {"state", I},
    {"tier", T},   {"attempts", I},    {"tokens", I},
    {"output", T}, {"reset_after", I}, {"pin_tier", T},
};

static const struct q__column attempt_cols[] = {
    {"id", I},
    {"job_id", I},
    {"step", I},
    {"attempt", I},
    {"tier", T},
    {"worker", T},
    {"request_sha256", T},
    {"est_tokens", I},
    {"started_at", I},
    {"finished_at", I},
    {"status", I},
    {"outcome", T},
    {"reason", T},
    {"decision", T},
    {"delay_ms", I},
    {"latency_ms", I},
    {"tokens", I},
    {"body", T},
    {"masked", I},
    {"route", T},
    {"cost_nusd", I},
    {"cost_estimated", I},
    {"kind", T},
    {"call_id", T},
    {"tool", T},
    {"args", T},
};

static const struct q__column park_cols[] = {
    {"id", I},
    {"job_id", I},
    {"step", I},
    {"step_name", T},
    {"reason", T},
    {"attempts", I},
    {"request_sha256", T},
    {"request", T},
    {"error", T},
    {"tier", T},
    {"parked_at", I},
    {"state", T},
    {"resolution", T},
    {"resolved_by", T},
    {"resolved_at", I},
    {"note", T},
    {"answer", T},
};

static const struct q__column tier_cols[] = {
    {"name", T},          {"breaker", T},         {"failures", I},
    {"open_until", I},    {"exhausted_until", I}, {"exhausted_reason", T},
    {"limited_until", I}, {"allowance_used", I},  {"allowance_since", I},
    {"config_hash", T},   {"req_tat", R},         {"tok_tat", R},
    {"pace", R},          {"pace_down_at", I},    {"pace_up_at", I},
    {"learned_rpm", I},   {"learned_tpm", I},     {"doubt", I},
    {"usage", T},         {"flight", T},
};

static const struct q__column sched_cols[] = {
    {"name", T},      {"paused", I},      {"since", I},      {"done_until", I},
    {"last_slot", I}, {"last_job_id", I}, {"updated_at", I},
};

static const struct q__column event_cols[] = {
    {"id", I},
    {"tier", T},
    {"at", I},
    {"event", T},
};

static const struct q__column budget_cols[] = {
    {"name", T},          {"win", T},        {"spent_nusd", I},
    {"reserved_nusd", I}, {"updated_at", I},
};

static const struct q__column retry_cols[] = {
    {"id", I},          {"job_id", I},     {"from_step", I},
    {"retried_by", T},  {"retried_at", I}, {"prior_state", I},
    {"prior_error", T},
};

static const struct q__column operator_cols[] = {
    {"name", T},       {"role", T},       {"token_sha256", T},
    {"created_at", I}, {"rotated_at", I},
};

static const struct q__column audit_cols[] = {
    {"id", I},     {"at", I},      {"who", T},    {"action", T},
    {"job_id", I}, {"park_id", I}, {"source", T}, {"detail", T},
};

static const struct q__column batch_cols[] = {
    {"id", I},          {"tier", T},       {"api", T},        {"key", T},
    {"provider_id", T}, {"state", I},      {"items", I},      {"worker", T},
    {"lease_until", I}, {"created_at", I}, {"updated_at", I},
};

static const struct q__column batch_item_cols[] = {
    {"attempt_id", I}, {"batch_id", I},      {"job_id", I},
    {"step", I},       {"realtime_nusd", I},
};

/* The ledger's running totals (Q__TOTALS_*), which count the attempts a
 * prune removed too: the target ends with the source's. */
static const struct q__column total_cols[] = {
    {"shard", I},    {"tier", T},      {"outcome", T},    {"reason", T},
    {"decision", T}, {"bucket", I},    {"attempts", I},   {"tokens", I},
    {"priced", I},   {"cost_nusd", I}, {"lat_sum_ms", I},
};

#undef I
#undef R
#undef T

#define TABLE(n, order, cols, serial)                                          \
    {                                                                          \
        n, order, cols, STEPQ_ARRAY_LEN(cols), serial, false                   \
    }

/* Parents first: a row's references are in the target before it is. */
static const struct q__table tables[] = {
    TABLE("jobs", "id", job_cols, true),
    TABLE("steps", "job_id, idx", step_cols, false),
    TABLE("attempts", "id", attempt_cols, true),
    TABLE("park", "id", park_cols, true),
    TABLE("tiers", "name", tier_cols, false),
    TABLE("schedules", "name", sched_cols, false),
    TABLE("tier_events", "id", event_cols, true),
    TABLE("budgets", "name, win", budget_cols, false),
    TABLE("job_retries", "id", retry_cols, true),
    TABLE("operators", "name", operator_cols, false),
    TABLE("audit", "id", audit_cols, true),
    TABLE("batches", "id", batch_cols, true),
    TABLE("batch_items", "attempt_id", batch_item_cols, false),
    {"attempt_totals", "shard, tier, outcome, reason, decision, bucket",
     total_cols, STEPQ_ARRAY_LEN(total_cols), false, true},
};

#define NTABLES STEPQ_ARRAY_LEN(tables)

/* ---- the SQL every backend runs on a described table ------------------- */

/* add_cols appends t's column names, comma-separated. */
static bool
add_cols(const struct q__table *t, char *buf, size_t size, size_t *len)
{
    bool ok = true;

    for (size_t i = 0; ok && i < t->ncols; i++)
        ok = q__append(buf, size, len, "%s%s", i ? ", " : "", t->cols[i].name);
    return ok;
}

size_t
q__copy_nkeys(const struct q__table *t)
{
    size_t n = 1;

    for (const char *p = t->order_by; *p != '\0'; p++)
        n += *p == ',';
    return n;
}

/* add_after appends the condition of a page after a row: its order_by
 * columns, as a row value, greater than the parameters. */
static bool
add_after(const struct q__table *t, char mark, char *buf, size_t size,
          size_t *len)
{
    size_t n = q__copy_nkeys(t);
    bool ok = q__append(buf, size, len, " WHERE (%s) > (", t->order_by);

    for (size_t i = 0; ok && i < n; i++)
        ok = q__append(buf, size, len, "%s%c%zu", i ? ", " : "", mark, i + 1);
    return ok && q__append(buf, size, len, ")");
}

int
q__copy_sql(const struct q__table *t, enum q__copy_stmt k, char mark, char *buf,
            size_t size)
{
    size_t len = 0;
    bool ok = size > 0;

    /* Only the table's own constant identifiers go into the text; every
     * value is a parameter. */
    switch (k) {
    case Q__COPY_COUNT:
        ok = ok &&
             q__append(buf, size, &len, "SELECT count(*) FROM %s", t->name);
        break;
    case Q__COPY_CLEAR:
        ok = ok && q__append(buf, size, &len, "DELETE FROM %s", t->name);
        break;
    case Q__COPY_SELECT:
    case Q__COPY_FIRST:
    case Q__COPY_NEXT:
        ok = ok && q__append(buf, size, &len, "SELECT ") &&
             add_cols(t, buf, size, &len) &&
             q__append(buf, size, &len, " FROM %s", t->name);
        if (k == Q__COPY_NEXT)
            ok = ok && add_after(t, mark, buf, size, &len);
        ok = ok && q__append(buf, size, &len, " ORDER BY %s", t->order_by);
        if (k != Q__COPY_SELECT)
            ok = ok && q__append(buf, size, &len, " LIMIT %c%zu", mark,
                                 k == Q__COPY_FIRST ? 1 : q__copy_nkeys(t) + 1);
        break;
    case Q__COPY_INSERT:
        ok = ok && q__append(buf, size, &len, "INSERT INTO %s (", t->name) &&
             add_cols(t, buf, size, &len) &&
             q__append(buf, size, &len, ") VALUES (");
        for (size_t i = 0; ok && i < t->ncols; i++)
            ok = q__append(buf, size, &len, "%s%c%zu", i ? ", " : "", mark,
                           i + 1);
        ok = ok && q__append(buf, size, &len, ")");
        break;
    default:
        ok = false;
    }
    return ok ? 0 : -EINVAL;
}

/* ---- q_copy ------------------------------------------------------------ */

/* What the row callback needs: where a row goes and how many went. */
struct sink {
    q_db *to;
    const struct q__table *t;
    int64_t n;
};

static int
put_row(void *arg, const struct q__value *vals)
{
    struct sink *k = arg;
    int rc = k->to->ops->copy_in(k->to, k->t, vals);

    if (rc == 0)
        k->n++;
    return rc;
}

/* is_empty sets *empty to whether to holds no row of any table. */
static int
is_empty(q_db *to, bool *empty)
{
    int64_t n = 0;
    int rc;

    for (size_t i = 0; i < NTABLES; i++) {
        if ((rc = to->ops->copy_count(to, &tables[i], &n)) != 0)
            return rc;
        if (n > 0) {
            *empty = false;
            return 0;
        }
    }
    *empty = true;
    return 0;
}

/* clear deletes every row of to, children first. */
static int
clear(q_db *to)
{
    int rc;

    for (size_t i = NTABLES; i-- > 0;) {
        if ((rc = to->ops->copy_clear(to, &tables[i])) != 0)
            return rc;
    }
    return 0;
}

/* copy_tables streams every table of from into to, parents first, and
 * records how many rows each took in n[]. */
static int
copy_tables(q_db *from, q_db *to, int64_t n[NTABLES])
{
    int rc;

    for (size_t i = 0; i < NTABLES; i++) {
        struct sink k = {.to = to, .t = &tables[i]};

        /* What the target's triggers made of the copied rows goes: the
         * source's rows stand for more (attempts pruned before). */
        if (tables[i].derived &&
            (rc = to->ops->copy_clear(to, &tables[i])) != 0)
            return rc;
        if ((rc = from->ops->copy_out(from, &tables[i], put_row, &k)) != 0)
            return rc;
        /* Every table gets its end, so a backend that batches rows can
         * write the last batch; serial ids move past the copied ones. */
        if ((rc = to->ops->copy_end(to, &tables[i])) != 0)
            return rc;
        n[i] = k.n;
    }
    return 0;
}

int
q_copy(q_db *from, q_db *to, bool force, struct q_copy_counts *counts)
{
    int64_t n[NTABLES] = {0};
    bool empty = true;
    int rc;

    if (from == NULL || to == NULL || from == to)
        return -EINVAL;
    /* The source in a transaction too: SQLite then holds its write lock,
     * so no worker changes it during the copy (PostgreSQL reads each page
     * as committed when it is read: the workers should be stopped). It
     * is only read, then rolled back. */
    if ((rc = q_tx_begin(from)) != 0)
        return rc;
    if ((rc = q_tx_begin(to)) != 0)
        goto out_from;
    if (!force && (rc = is_empty(to, &empty)) == 0 && !empty)
        rc = -EEXIST;
    if (rc == 0 && force)
        rc = clear(to);
    if (rc == 0)
        rc = copy_tables(from, to, n);
    if (rc == 0)
        rc = q_tx_commit(to);
    else
        q_tx_rollback(to);
out_from:
    q_tx_rollback(from);
    if (rc == 0 && counts != NULL) {
        *counts = (struct q_copy_counts){.jobs = n[0],
                                         .steps = n[1],
                                         .attempts = n[2],
                                         .park = n[3],
                                         .tiers = n[4],
                                         .schedules = n[5],
                                         .tier_events = n[6],
                                         .budgets = n[7],
                                         .retries = n[8],
                                         .operators = n[9],
                                         .audit = n[10],
                                         .batches = n[11],
                                         .batch_items = n[12]};
    }
    return rc;
}

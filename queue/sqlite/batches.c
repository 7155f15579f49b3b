/* batches.c: SQLite storage of the batches of a tier in batch mode
 * (tables batches and batch_items; store.c has the SQL). Each call needs
 * no transaction of its own: outside one it commits by itself, inside
 * one it joins it. */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <stdlib.h>

#include "queue/batch.h"

int
q__sqlite_batch_create(q_db *base, const char *tier, const char *api,
                       const char *key, const char *worker, int64_t lease_until,
                       int64_t now, int64_t *id)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s;
    int rc;

    if ((s = q__stmt(db, ST_BATCH_CREATE)) == NULL)
        return -EIO;
    q__bind_text(s, 1, tier);
    q__bind_text(s, 2, api);
    q__bind_text(s, 3, key);
    q__bind_text(s, 4, worker);
    sqlite3_bind_int64(s, 5, lease_until);
    sqlite3_bind_int64(s, 6, now);
    if ((rc = q__run_done(db, s, "recording a batch")) != 0)
        return rc;
    if (sqlite3_changes(db->h) == 0)
        return -EEXIST;
    *id = sqlite3_last_insert_rowid(db->h);
    return 0;
}

int
q__sqlite_batch_item_add(q_db *base, int64_t batch_id, int64_t attempt_id,
                         int64_t job_id, int step)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s;
    int64_t other = 0;
    int rc;

    if ((s = q__stmt(db, ST_BATCH_ITEM_ADD)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, batch_id);
    sqlite3_bind_int64(s, 2, attempt_id);
    sqlite3_bind_int64(s, 3, job_id);
    sqlite3_bind_int(s, 4, step);
    if ((rc = q__run_done(db, s, "recording a batch item")) != 0)
        return rc;
    if (sqlite3_changes(db->h) == 0) {
        rc = q__sqlite_batch_of_attempt(base, attempt_id, &other);
        return rc == 0 ? -EEXIST : rc;
    }
    if ((s = q__stmt(db, ST_BATCH_COUNT_ITEM)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, batch_id);
    return q__run_done(db, s, "counting a batch item");
}

int
q__sqlite_batch_set(q_db *base, int64_t id, const struct q_batch_set *b)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s;
    int rc;

    if ((s = q__stmt(db, ST_BATCH_SET)) == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, id);
    q__bind_text(s, 2, b->worker);
    sqlite3_bind_int64(s, 3, b->lease_until);
    sqlite3_bind_int(s, 4, b->state);
    q__bind_text(s, 5, b->provider_id);
    sqlite3_bind_int64(s, 6, b->now);
    if ((rc = q__run_done(db, s, "updating a batch")) != 0)
        return rc;
    return sqlite3_changes(db->h) > 0 ? 0 : -EBUSY;
}

static void
read_batch(sqlite3_stmt *s, void *elem)
{
    struct q_batch *b = elem;

    b->id = sqlite3_column_int64(s, 0);
    b->tier = q__col_text(s, 1);
    b->api = q__col_text(s, 2);
    b->key = q__col_text(s, 3);
    b->provider_id = q__col_text(s, 4);
    b->state = sqlite3_column_int(s, 5);
    b->items = sqlite3_column_int64(s, 6);
    b->worker = q__col_text(s, 7);
    b->lease_until = sqlite3_column_int64(s, 8);
    b->created_at = sqlite3_column_int64(s, 9);
    b->updated_at = sqlite3_column_int64(s, 10);
}

int
q__sqlite_batches_open(q_db *base, const char *tier, struct q_batch **out,
                       size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_BATCHES_OPEN);
    void *v = NULL;
    int rc;

    if (s == NULL)
        return -EIO;
    q__bind_text(s, 1, tier);
    rc = q__rows(db, s, sizeof(struct q_batch), read_batch, q__batch_clean, &v,
                 n, "reading batches");
    if (rc == 0)
        *out = v;
    return rc;
}

static void
read_item(sqlite3_stmt *s, void *elem)
{
    struct q_batch_item *it = elem;

    it->attempt_id = sqlite3_column_int64(s, 0);
    it->job_id = sqlite3_column_int64(s, 1);
    it->step = sqlite3_column_int(s, 2);
    it->finished = sqlite3_column_int(s, 3) != 0;
}

static void
no_clean(void *elem)
{
    (void)elem;
}

int
q__sqlite_batch_items(q_db *base, int64_t batch_id, struct q_batch_item **out,
                      size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_BATCH_ITEMS);
    void *v = NULL;
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, batch_id);
    rc = q__rows(db, s, sizeof(struct q_batch_item), read_item, no_clean, &v, n,
                 "reading a batch's items");
    if (rc == 0)
        *out = v;
    return rc;
}

int
q__sqlite_batch_of_attempt(q_db *base, int64_t attempt_id, int64_t *batch_id)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_BATCH_OF_ATTEMPT);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, attempt_id);
    rc = q__step_row(db, s, "finding an attempt's batch");
    if (rc == 0)
        *batch_id = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return rc;
}

int
q__sqlite_batch_item_settle(q_db *base, int64_t attempt_id,
                            int64_t realtime_nusd)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_BATCH_ITEM_SETTLE);
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, attempt_id);
    sqlite3_bind_int64(s, 2, realtime_nusd);
    if ((rc = q__run_done(db, s, "settling a batch item")) != 0)
        return rc;
    return sqlite3_changes(db->h) > 0 ? 0 : -ENOENT;
}

static void
read_report(sqlite3_stmt *s, void *elem)
{
    struct q_report_batch *r = elem;

    r->tier = q__col_text(s, 0);
    r->items = sqlite3_column_int64(s, 1);
    r->cost_nusd = sqlite3_column_int64(s, 2);
    r->realtime_nusd = sqlite3_column_int64(s, 3);
}

int
q__sqlite_report_batches(q_db *base, int64_t since, struct q_report_batch **out,
                         size_t *n)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_REPORT_BATCHES);
    void *v = NULL;
    int rc;

    if (s == NULL)
        return -EIO;
    sqlite3_bind_int64(s, 1, since);
    rc = q__rows(db, s, sizeof(struct q_report_batch), read_report,
                 q__report_batch_clean, &v, n, "reporting batches");
    if (rc == 0)
        *out = v;
    return rc;
}

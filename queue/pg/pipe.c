/* pipe.c: the connection's pipeline. Commands are queued on the
 * connection (libpq's pipeline mode) with a record of what each one is,
 * and read back in order at the next sync:
 *  - a round trip (q__pg_run) queues what is pending (the RELEASEs of
 *    savepoints that ended well, a lazy BEGIN with the store's write lock,
 *    SAVEPOINTs), a first-use PREPARE and the statement, then syncs and
 *    reads every result up to the sync;
 *  - a deferred write (q__pg_defer) waits here, its parameters copied,
 *    with the transaction level it was made in: it rides in the next
 *    round trip of the transaction (at the latest its COMMIT), so a loop
 *    turn's writes whose results nobody waits for cost no round trip of
 *    their own. Its failure is the transaction's: the round trip that
 *    reads it returns that error, and the commit fails;
 *  - a savepoint level goes to the server only with a round trip made
 *    inside it. A level of only waiting writes needs none: ended well,
 *    its writes become its parent's; rolled back, they are dropped
 *    unsent. So a worker's admission or settle (a level each) whose tier
 *    row is kept costs no SAVEPOINT and no RELEASE.
 */
#include "queue/pg/internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

/* Deferred writes kept before a round trip is forced: they are sent in
 * one go and their results read at its sync (the server's answers wait
 * in the socket buffers until then: small, but not unbounded). */
#define DEFER_MAX 512
/* Waiting writes of the outermost level sent ahead (q__pg_push) once
 * this many are kept, and commands sent but not read before a sync is
 * forced. */
#define PUSH_MIN 32
#define SENT_MAX 2048

/* A deferred write not handed to libpq yet: its statement, its
 * parameters (copied: the caller's may be gone when it is sent), its
 * answer, and the level it belongs to. */
struct q__pg_pending {
    const struct q__pg_sql *sql;
    int n;
    char *v[Q__PG_MAX_PARAMS]; /* owned copies; NULL: SQL NULL */
    struct q__pg_sent rec;     /* what, answer, id, out */
    int level;
};

/* The store's write lock, taken by every transaction in the round trip of
 * its BEGIN: write transactions on one store (a worker's turn, a park
 * resolution, a copy) run their statements one at a time, as SQLite's
 * BEGIN IMMEDIATE makes them. Without it, turns that lock rows in
 * different orders (a job, a tier, a send) deadlocked: 4 hosts hit one
 * in seconds. Single statements outside a transaction (enqueue from
 * other programs, reads) do not take it.
 *
 * It is a session lock, let go in the COMMIT's own round trip just
 * before the COMMIT (ST_STORE_UNLOCK, store.c): the next host's
 * statements run while this commit waits for its WAL flush, and their
 * commits share that flush (4 processes claiming one job at a time took
 * turns at about one fsync each). This stays free of deadlocks: a
 * transaction takes row locks only while it holds the store lock, and
 * one that let it go takes none, so no two wait for each other.
 *
 * What a committing transaction wrote is not visible yet to the next,
 * so every read that decides a write locks what it reads, and every
 * write locks what such a read locks: a tier's row is read FOR UPDATE
 * (tiers.c); each write of a job's progress locks the job's row
 * (ledger.c), so a claim of an expired lease skips a job whose progress
 * is still committing; and the claim of an expired lease reads the
 * job's steps only after its lock (jobs.c), as its snapshot may predate
 * a commit that ended just before. A job another transaction made
 * queued, parked, finished or cancelled had its row written in that
 * transaction: a claim re-checks the newest version it locks.
 *
 * Its statements are ST_STORE_LOCK (prepared at its first use: it is
 * planned once a session, not once a transaction) and ST_STORE_UNLOCK
 * (sql.c). */

/* Whether the next command opens the outermost transaction (and so
 * takes the lock). */
static bool
store_lock_due(const struct q__pg *db)
{
    return db->tx_sent == 0 && db->tx_depth > 0;
}

static bool
is_prepared(const struct q__pg *db, const struct q__pg_sql *sql)
{
    for (int i = 0; i < db->nprepared; i++) {
        if (db->prepared[i] == sql)
            return true;
    }
    return false;
}

/* A PREPARE that failed (or was skipped after a failure) made nothing. */
static void
unprepare(struct q__pg *db, const struct q__pg_sql *sql)
{
    for (int i = 0; i < db->nprepared; i++) {
        if (db->prepared[i] == sql) {
            db->prepared[i] = db->prepared[--db->nprepared];
            return;
        }
    }
}

static void
note(struct q__pg *db, enum q__pg_cmd kind, const struct q__pg_sql *sql,
     const char *what)
{
    if (db->nsent == db->sent_cap) {
        db->sent_cap = db->sent_cap ? db->sent_cap * 2 : 32;
        db->sent = xrealloc(db->sent, db->sent_cap * sizeof(*db->sent));
    }
    db->sent[db->nsent++] =
        (struct q__pg_sent){kind, sql, what, NULL, 0, {NULL, NULL}, ++db->seq};
}

static bool
plain(struct q__pg *db, const char *text, enum q__pg_cmd kind, const char *what)
{
    if (!PQsendQueryParams(db->conn, text, 0, NULL, NULL, NULL, NULL, 0))
        return false;
    note(db, kind, NULL, what);
    return true;
}

/* Queues the text of plain statement st (never prepared). */
static bool
plain_st(struct q__pg *db, enum q__pg_stmt_id st, const char *what)
{
    return plain(db, q__pg_stmt(st)->text, Q__PG_CMD_PLAIN, what);
}

/* Queues sql with its n parameters v as kind (a first use prepares it
 * in the same round trip), noted. */
static bool
queue_sql(struct q__pg *db, const struct q__pg_sql *sql, int n,
          const char *const *v, enum q__pg_cmd kind, const char *what)
{
    PGconn *c = db->conn;
    bool ok;

    if (is_prepared(db, sql)) {
        ok = PQsendQueryPrepared(c, sql->name, n, v, NULL, NULL, 0);
    } else if (db->nprepared < Q__PG_MAX_PREPARED) {
        ok = PQsendPrepare(c, sql->name, sql->text, 0, NULL);
        if (ok) {
            note(db, Q__PG_CMD_PREPARE, sql, what);
            db->prepared[db->nprepared++] = sql;
            ok = PQsendQueryPrepared(c, sql->name, n, v, NULL, NULL, 0);
        }
    } else {
        ok = PQsendQueryParams(c, sql->text, n, NULL, v, NULL, NULL, 0);
    }
    if (ok)
        note(db, kind, sql, what);
    return ok;
}

/* Queues sql as a deferred write whose result rec's answer reads. */
static bool
queue_answered(struct q__pg *db, const struct q__pg_sql *sql, int n,
               const char *const *v, const struct q__pg_sent *rec)
{
    struct q__pg_sent *last;

    if (!queue_sql(db, sql, n, v, Q__PG_CMD_DEFERRED, rec->what))
        return false;
    last = &db->sent[db->nsent - 1];
    last->answer = rec->answer;
    last->id = rec->id;
    last->out[0] = rec->out[0];
    last->out[1] = rec->out[1];
    return true;
}

bool
q__pg_queue(struct q__pg *db, enum q__pg_stmt_id st,
            const struct q__pg_params *p, q__pg_answer_fn answer, void *out0,
            void *out1, const char *what)
{
    const struct q__pg_sql *sql = q__pg_stmt(st);
    struct q__pg_sent rec = {Q__PG_CMD_DEFERRED, sql, what, answer, 0,
                             {out0, out1},       0};

    return queue_answered(db, sql, p->n, p->v, &rec);
}

static void
free_pending(struct q__pg_pending *h)
{
    for (int i = 0; i < h->n; i++)
        free(h->v[i]);
}

/* Queues the waiting writes from *next on that belong to levels up to
 * level (they are in level order: see q__pg_pending_merge). */
static bool
queue_pending(struct q__pg *db, int level, size_t *next)
{
    bool ok = true;

    for (; ok && *next < db->npending && db->pending[*next].level <= level;
         (*next)++) {
        struct q__pg_pending *h = &db->pending[*next];

        ok = queue_answered(db, h->sql, h->n, (const char *const *)h->v,
                            &h->rec);
    }
    return ok;
}

/* Queues the pending RELEASEs, the waiting writes and the levels they
 * belong to (each level's SAVEPOINT before its own writes; the store lock
 * when the outermost level opens), the plain commands and the statement
 * (sql may be NULL: then the last plain command) as kind, each noted.
 * Levels count as sent once queued: their failure leaves the transaction
 * aborted, which its end finds. Waiting writes are handed over (or, on
 * a failed send, dropped with the transaction) either way. */
static bool
queue_all(struct q__pg *db, const char *const *texts, int ntexts,
          const struct q__pg_sql *sql, const struct q__pg_params *p,
          enum q__pg_cmd kind, const char *what)
{
    size_t next = 0;
    bool ok = true;

    while (ok && db->tx_release > 0) {
        if ((ok = plain_st(db, ST_RELEASE, what)))
            db->tx_release--;
    }
    ok = ok && queue_pending(db, db->tx_sent, &next);
    while (ok && db->tx_sent < db->tx_depth) {
        bool outer = db->tx_sent == 0;
        ok = plain_st(db, outer ? ST_BEGIN : ST_SAVEPOINT, what) &&
             (!outer || (queue_sql(db, q__pg_stmt(ST_STORE_LOCK), 0, NULL,
                                   Q__PG_CMD_PLAIN, what) &&
                         q__pg_tiers_prefetch(db, sql, p)));
        if (!ok)
            break; /* the send failed: the level is not on the server */
        db->tx_sent++;
        if (db->tx_sent < Q__PG_MAX_LEVELS)
            db->level_seq[db->tx_sent] = db->seq;
        ok = queue_pending(db, db->tx_sent, &next);
    }
    q__pg_pending_drop(db, 0);
    for (int i = 0; ok && i < ntexts; i++)
        ok = plain(db, texts[i],
                   sql == NULL && i == ntexts - 1 ? kind : Q__PG_CMD_PLAIN,
                   what);
    if (!ok || sql == NULL)
        return ok;
    return queue_sql(db, sql, p ? p->n : 0, p ? p->v : NULL, kind, what);
}

/* Logs a deferred write's "changed nothing" answer (rc): its caller has
 * returned, and its transaction goes on. */
static void
said(const struct q__pg *db, const struct q__pg_sent *cmd, int rc)
{
    const char *meant = rc == -EBUSY      ? "the lease was lost"
                        : rc == -EALREADY ? "it was done already"
                        : rc == -ENOENT   ? "there is none"
                                          : "it failed";

    if (rc != 0)
        log_warn("%s: %s %lld: %s; nothing changed", db->where, cmd->what,
                 (long long)cmd->id, meant);
}

/* Waits until libpq has the next result in hand, at most answer_wait_ms:
 * a server stopped (SIGSTOP, a hung host) keeps its socket open and its
 * kernel acknowledges what is sent, so neither TCP nor libpq would ever
 * give up. False when the wait ran out: the connection is lost then
 * (q__pg_hung). A socket error is left to PQgetResult to report. */
static bool
answer_due(struct q__pg *db, const char *what)
{
    int64_t end = clock_mono_ms() + db->answer_wait_ms;

    if (db->answer_wait_ms <= 0)
        return true;
    while (PQisBusy(db->conn)) {
        struct pollfd p = {.fd = PQsocket(db->conn), .events = POLLIN};
        int64_t left = end - clock_mono_ms();
        if (left <= 0) {
            q__pg_hung(db, what);
            return false;
        }
        if ((poll(&p, 1, (int)left) < 0 && errno != EINTR) ||
            !PQconsumeInput(db->conn))
            return true;
    }
    return true;
}

/* Reads every queued command's results up to the sync. The first failure
 * is the round trip's (logged with what its own command was doing);
 * *res gets the result of the Q__PG_CMD_LAST command when it succeeded. */
static int
read_all(struct q__pg *db, PGresult **res, const char *what)
{
    size_t item = 0;
    uint64_t failed = 0; /* the failed command's seq (0: none known) */
    int rc = 0, nulls = 0;
    PGresult *keep = NULL;

    while (PQstatus(db->conn) == CONNECTION_OK) {
        PGresult *r;
        const struct q__pg_sent *cmd =
            item < db->nsent ? &db->sent[item] : NULL;
        ExecStatusType st;

        if (!answer_due(db, cmd ? cmd->what : what)) {
            rc = -EIO;
            break;
        }
        r = PQgetResult(db->conn);

        if (r == NULL) { /* the end of one command's results */
            if (++nulls > 1)
                break; /* nothing more queued (a failed send) */
            item++;
            continue;
        }
        nulls = 0;
        st = PQresultStatus(r);
        if (st == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            break;
        }
        if (st == PGRES_FATAL_ERROR || st == PGRES_PIPELINE_ABORTED) {
            if (st == PGRES_FATAL_ERROR && rc == 0) {
                rc = q__pg_error(db, r, cmd ? cmd->what : what);
                failed = cmd != NULL ? cmd->seq : 0;
            }
            if (cmd != NULL && cmd->kind == Q__PG_CMD_PREPARE)
                unprepare(db, cmd->sql);
        } else if (cmd != NULL && cmd->kind == Q__PG_CMD_LAST && res) {
            PQclear(keep);
            keep = r;
            continue;
        } else if (cmd != NULL && cmd->answer != NULL) {
            said(db, cmd, cmd->answer(r, cmd->out[0], cmd->out[1]));
        }
        PQclear(r);
    }
    db->nsent = 0;
    if (rc == 0 && PQstatus(db->conn) != CONNECTION_OK)
        rc = q__pg_error(db, NULL, what);
    if (rc != 0 && db->tx_sent > 0 && db->tx_rc == 0) {
        db->tx_rc = rc;
        db->fail_seq = failed;
    }
    if (rc != 0 || res == NULL) {
        PQclear(keep);
        return rc;
    }
    *res = keep;
    return 0;
}

/* A send that failed: libpq's error, logged; what was queued before it
 * is read up to a sync when the connection still works (its results
 * still come), and the transaction counts as aborted. */
static int
send_failed(struct q__pg *db, const char *what)
{
    int rc = q__pg_error(db, NULL, what);

    if (!db->broken && PQpipelineSync(db->conn))
        (void)read_all(db, NULL, what);
    db->nsent = 0;
    /* Writes that waited for this round trip were dropped with it: the
     * transaction cannot commit, even one nothing of which was sent. */
    if (db->tx_depth > 0 && db->tx_rc == 0) {
        db->tx_rc = rc;
        db->fail_seq = 0; /* not known: before any level */
    }
    return rc;
}

int
q__pg_round_trip(struct q__pg *db, const char *const *texts, int ntexts,
                 const struct q__pg_sql *sql, const struct q__pg_params *p,
                 PGresult **res, const char *what)
{
    int rc;

    if ((rc = q__pg_usable(db)) != 0)
        return rc;
    /* Tier rows stored since the last round trip go first: what follows
     * may read them (tiers.c). */
    if (db->tx_depth > 0 && (rc = q__pg_tiers_write(db)) != 0)
        return rc;
    if (!queue_all(db, texts, ntexts, sql, p, Q__PG_CMD_LAST, what))
        return send_failed(db, what);
    if (!PQpipelineSync(db->conn))
        return send_failed(db, what);
    return read_all(db, res, what);
}

/* Keeps sql (p already clean) waiting as a deferred write of the open
 * level, with rec's answer; a full wait list is sent in a round trip of
 * its own. */
static int
keep_pending(struct q__pg *db, const struct q__pg_sql *sql,
             const struct q__pg_params *p, const struct q__pg_sent *rec)
{
    struct q__pg_pending *h;
    int rc;

    if ((rc = q__pg_usable(db)) != 0)
        return rc;
    if (db->npending == db->pending_cap) {
        db->pending_cap = db->pending_cap ? db->pending_cap * 2 : 32;
        db->pending =
            xrealloc(db->pending, db->pending_cap * sizeof(*db->pending));
    }
    h = &db->pending[db->npending++];
    h->sql = sql;
    h->n = p != NULL ? p->n : 0;
    for (int i = 0; i < h->n; i++)
        h->v[i] = p->v[i] != NULL ? xstrdup(p->v[i]) : NULL;
    h->rec = *rec;
    h->level = db->tx_depth;
    if (db->npending >= DEFER_MAX)
        return q__pg_flush(db, rec->what);
    return q__pg_push(db, rec->what);
}

int
q__pg_push(struct q__pg *db, const char *what)
{
    size_t next = 0;
    bool ok = true;

    if (db->tx_depth != 1 || db->tx_sent != 1 || db->broken || db->tx_rc != 0 ||
        db->npending < PUSH_MIN)
        return 0;
    while (ok && db->tx_release > 0) {
        if ((ok = plain_st(db, ST_RELEASE, what)))
            db->tx_release--;
    }
    ok = ok && queue_pending(db, 1, &next);
    q__pg_pending_drop(db, 0);
    if (!ok || PQflush(db->conn) != 0)
        return send_failed(db, what);
    return db->nsent >= SENT_MAX ? q__pg_flush(db, what) : 0;
}

void
q__pg_pending_drop(struct q__pg *db, int level)
{
    while (db->npending > 0 && db->pending[db->npending - 1].level >= level)
        free_pending(&db->pending[--db->npending]);
}

void
q__pg_pending_merge(struct q__pg *db, int level)
{
    for (size_t i = db->npending; i > 0 && db->pending[i - 1].level >= level;
         i--)
        db->pending[i - 1].level = level - 1;
}

bool
q__pg_pending_any(const struct q__pg *db)
{
    return db->npending > 0;
}

/* Runs sql now (res: its result, caller PQclear()s it) or, with rec,
 * queues it; text parameters PostgreSQL cannot hold (not UTF-8) are
 * scrubbed first. */
static int
send_clean(struct q__pg *db, const struct q__pg_sql *sql,
           const struct q__pg_params *p, PGresult **res,
           const struct q__pg_sent *rec, const char *what)
{
    struct q__pg_params clean;
    char *owned[Q__PG_MAX_PARAMS] = {NULL};
    int rc;

    if (p != NULL && q__pg_scrub_params(p, &clean, owned))
        p = &clean;
    if (rec != NULL)
        rc = keep_pending(db, sql, p, rec);
    else
        rc = q__pg_round_trip(db, NULL, 0, sql, p, res, what);
    for (int i = 0; i < Q__PG_MAX_PARAMS; i++)
        free(owned[i]);
    return rc;
}

int
q__pg_run_sql(struct q__pg *db, const struct q__pg_sql *sql,
              const struct q__pg_params *p, PGresult **res, const char *what)
{
    return send_clean(db, sql, p, res, NULL, what);
}

int
q__pg_write(struct q__pg *db, enum q__pg_stmt_id st,
            const struct q__pg_params *p, bool defer, q__pg_answer_fn answer,
            void *out0, void *out1, int64_t id, const char *what)
{
    const struct q__pg_sql *sql = q__pg_stmt(st);
    struct q__pg_sent rec = {Q__PG_CMD_DEFERRED, sql, what, answer, id,
                             {out0, out1},       0};
    PGresult *r = NULL;
    int rc;

    if (defer && db->tx_depth > 0)
        return send_clean(db, sql, p, NULL, &rec, what);
    rc = send_clean(db, sql, p, answer != NULL ? &r : NULL, NULL, what);
    if (rc == 0 && answer != NULL)
        rc = answer(r, out0, out1);
    PQclear(r);
    return rc;
}

int
q__pg_defer(struct q__pg *db, enum q__pg_stmt_id st,
            const struct q__pg_params *p, const char *what)
{
    return q__pg_write(db, st, p, true, NULL, NULL, NULL, 0, what);
}

int
q__pg_flush(struct q__pg *db, const char *what)
{
    if (db->nsent == 0 && db->npending == 0 && !q__pg_tiers_dirty(db))
        return 0;
    return q__pg_round_trip(db, NULL, 0, NULL, NULL, NULL, what);
}

int
q__pg_exec(struct q__pg *db, const char *sql, const char *what)
{
    const char *lock = q__pg_stmt(ST_STORE_LOCK)->text;
    const char *begin = q__pg_stmt(ST_BEGIN)->text;
    const char *savepoint = q__pg_stmt(ST_SAVEPOINT)->text;
    const char *release = q__pg_stmt(ST_RELEASE)->text;
    char *text;
    size_t len = strlen(sql) + strlen(lock) + 1 +
                 16 * (size_t)(db->tx_depth + db->tx_release + 1);
    size_t off = 0;
    PGresult *r;
    int rc = 0;

    if ((rc = q__pg_usable(db)) != 0 || (rc = q__pg_flush(db, what)) != 0)
        return rc;
    /* Several statements in one text need the simple protocol, which
     * pipeline mode does not speak: leave it for this one call. */
    text = xmalloc(len);
    for (; db->tx_release > 0; db->tx_release--)
        off += (size_t)snprintf(text + off, len - off, "%s;", release);
    if (store_lock_due(db))
        off += (size_t)snprintf(text + off, len - off, "%s;%s;", begin, lock);
    for (int i = db->tx_sent + store_lock_due(db); i < db->tx_depth; i++)
        off += (size_t)snprintf(text + off, len - off, "%s;",
                                i == 0 ? begin : savepoint);
    snprintf(text + off, len - off, "%s", sql);
    if (!PQexitPipelineMode(db->conn)) {
        free(text);
        return q__pg_error(db, NULL, what);
    }
    r = PQexec(db->conn, text);
    free(text);
    /* One command, for the levels it opened (undo_level, store.c). */
    ++db->seq;
    for (int i = db->tx_sent + 1; i <= db->tx_depth && i < Q__PG_MAX_LEVELS;
         i++)
        db->level_seq[i] = db->seq;
    if (PQresultStatus(r) != PGRES_COMMAND_OK &&
        PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = q__pg_error(db, r, what);
    PQclear(r);
    if (PQtransactionStatus(db->conn) == PQTRANS_INTRANS ||
        PQtransactionStatus(db->conn) == PQTRANS_INERROR)
        db->tx_sent = db->tx_depth;
    if (PQstatus(db->conn) == CONNECTION_OK && !PQenterPipelineMode(db->conn) &&
        rc == 0)
        rc = q__pg_error(db, NULL, what);
    return rc;
}

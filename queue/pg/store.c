/* store.c: the PostgreSQL connection: opening (session settings, the
 * clock offset, the schema check), error mapping by SQLSTATE,
 * reconnecting after a lost connection, transaction levels (the pipeline
 * that carries the commands is pipe.c, the LISTEN connection wake.c). */
#include "queue/pg/internal.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#define RETRY_FIRST_MS 100
#define RETRY_MAX_MS   5000

/* ---- errors ------------------------------------------------------------ */

/* Copies msg onto one line (libpq's and the server's messages may have
 * several). */
static void
one_line(const char *msg, char *line, size_t size)
{
    size_t n = 0;

    for (const char *c = msg; *c != '\0' && n + 1 < size; c++)
        line[n++] = *c == '\n' ? ' ' : *c;
    while (n > 0 && line[n - 1] == ' ')
        n--;
    line[n] = '\0';
}

void
q__pg_log(const struct q__pg *db, const char *what, const char *msg)
{
    char line[512];

    one_line(msg, line, sizeof(line));
    log_error("%s: %s: %s", db->where, what, line);
}

/* Marks the connection lost (logged once, at the loss) and starts the
 * reconnect backoff. */
static void
lost(struct q__pg *db, const char *what, const char *msg)
{
    char line[512];

    db->nsent = 0; /* their results will never come */
    if (db->broken)
        return;
    one_line(msg, line, sizeof(line));
    log_error("%s: %s: connection lost (%s); reconnecting", db->where, what,
              line);
    db->broken = true;
    db->retry_ms = RETRY_FIRST_MS;
    db->retry_at = clock_mono_ms() + db->retry_ms;
}

void
q__pg_hung(struct q__pg *db, const char *what)
{
    char msg[128];

    snprintf(msg, sizeof(msg),
             "no answer from the server in %d ms: it hangs or the network "
             "does",
             db->answer_wait_ms);
    lost(db, what, msg);
}

static bool
state_is(const char *state, const char *code)
{
    return state != NULL && strcmp(state, code) == 0;
}

/* Maps a failed result (r may be NULL: libpq's own failure) to the
 * contract's error, logging it once with what was being done. */
int
q__pg_error(struct q__pg *db, const PGresult *r, const char *what)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = r ? PQresultErrorMessage(r) : "";

    if (msg[0] == '\0')
        msg = PQerrorMessage(db->conn);
    /* Class 08 (connection exception) and the server shutting the
     * session down (57P01..57P03) lose the connection. */
    if (PQstatus(db->conn) == CONNECTION_BAD ||
        (state != NULL && strncmp(state, "08", 2) == 0) ||
        (state != NULL && strncmp(state, "57P0", 4) == 0)) {
        lost(db, what, msg);
        return -EIO;
    }
    q__pg_log(db, what, msg);
    if (state_is(state, "55P03") || state_is(state, "40001") ||
        state_is(state, "40P01"))
        return -EAGAIN; /* lock wait ran out, serialization, deadlock */
    if (state_is(state, "23505"))
        return -EEXIST;
    return -EIO;
}

/* ---- the session -------------------------------------------------------- */

/* Settings every session gets, then pipeline mode (what q__pg_run
 * needs). lock_wait_ms is our own integer, not input text. Commits are
 * synchronous whatever opts->durable, the server's or the role's setting
 * say: an attempt must survive a crash of the server before its request
 * leaves, or a restarted server would let it be sent twice. Prepared
 * statements keep one generic plan: every statement here is an index
 * lookup whatever its parameters, and left to choose, the server plans
 * the claim afresh on every call (its generic plan looks costlier with
 * LIMIT $2 unknown), about 0.8 ms each time. */
static int
session_setup(struct q__pg *db)
{
    char sql[160];
    PGresult *r;
    int rc = 0;

    snprintf(sql, sizeof(sql),
             "SET lock_timeout = %d; SET synchronous_commit = on;"
             " SET plan_cache_mode = force_generic_plan",
             db->lock_wait_ms);
    r = PQexec(db->conn, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        rc = q__pg_error(db, r, "setting up the session");
    PQclear(r);
    if (rc == 0 && !PQenterPipelineMode(db->conn)) {
        q__pg_log(db, "entering pipeline mode", PQerrorMessage(db->conn));
        rc = -EIO;
    }
    db->nprepared = 0;
    return rc;
}

PGconn *
q__pg_connect(const struct q__pg *db, const char *what)
{
    /* connect_timeout before dbname: the location's own wins. Without
     * one, a server that hangs would hold a reconnect for ever. */
    const char *const keys[] = {"connect_timeout", "dbname",
                                "fallback_application_name", NULL};
    const char *const vals[] = {"10", db->conninfo, "stepq", NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);

    if (c != NULL && PQstatus(c) == CONNECTION_OK)
        return c;
    q__pg_log(db, what, c ? PQerrorMessage(c) : "out of memory");
    PQfinish(c);
    return NULL;
}

/* q__pg_usable makes a lost connection usable again when nothing of a
 * transaction is on it: PQreset after the backoff (-EIO before it, and
 * while a sent transaction is still open). */
int
q__pg_usable(struct q__pg *db)
{
    int64_t now;

    if (!db->broken)
        return 0;
    now = clock_mono_ms();
    /* Not inside a transaction that lost something with the connection
     * (its commit must fail, not go on in a new session). */
    if (db->tx_sent > 0 || (db->tx_depth > 0 && db->tx_rc != 0) ||
        db->read_open || now < db->retry_at)
        return -EIO;
    PQreset(db->conn);
    db->nsent = 0;
    if (PQstatus(db->conn) != CONNECTION_OK || session_setup(db) != 0) {
        db->retry_ms =
            db->retry_ms * 2 < RETRY_MAX_MS ? db->retry_ms * 2 : RETRY_MAX_MS;
        db->retry_at = clock_mono_ms() + db->retry_ms;
        log_debug("%s: reconnecting failed; next try in %lld ms", db->where,
                  (long long)db->retry_ms);
        return -EIO;
    }
    db->broken = false;
    db->retry_ms = RETRY_FIRST_MS;
    log_warn("%s: reconnected to the database", db->where);
    return 0;
}

/* ---- transactions ------------------------------------------------------ */

/* Levels are lazy: entering one sends nothing; the next statement carries
 * its BEGIN (or SAVEPOINT), so a level with no statement costs no round
 * trip. Inner levels are savepoints: one that fails undoes only its own
 * work and the caller's group commit goes on. */
int
q__pg_tx_enter(struct q__pg *db)
{
    int rc;

    if (db->tx_depth == 0 && db->read_open) {
        log_error("%s: a write transaction inside a read snapshot", db->where);
        return -EINVAL;
    }
    if (db->tx_depth == 0 && (rc = q__pg_usable(db)) != 0)
        return rc;
    if (db->tx_depth == 0)
        q__pg_tiers_forget(db);
    else if ((rc = q__pg_tiers_mark(db, db->tx_depth + 1)) != 0)
        return rc;
    db->tx_depth++;
    return 0;
}

/* Ends the outermost level that reached the server. */
static int
finish(struct q__pg *db, int rc)
{
    const char *unlock = q__pg_stmt(ST_STORE_UNLOCK)->text;
    const char *commit[] = {unlock, q__pg_stmt(ST_COMMIT)->text};
    /* ROLLBACK does not let a session lock go: the unlock follows it. */
    const char *rollback[] = {q__pg_stmt(ST_ROLLBACK)->text, unlock};
    int err;

    db->tx_release = 0; /* COMMIT and ROLLBACK end every savepoint */
    if (rc != 0) {
        (void)q__pg_round_trip(db, rollback, 2, NULL, NULL, NULL,
                               "rolling back");
        return rc;
    }
    /* A transaction an earlier round trip's error aborted does not get
     * here (q__pg_tx_leave rolls it back); one whose commit round trip
     * fails stops at its first failure, which is err, and its COMMIT is
     * not run. */
    err = q__pg_round_trip(db, commit, 2, NULL, NULL, NULL, "committing");
    /* A commit that failed before its unlock (an earlier statement's
     * error skips the rest) left the transaction open and the lock held:
     * the rollback ends both. One that failed in the COMMIT itself ran the
     * unlock and ended the transaction, and one whose BEGIN never left
     * took neither: there is nothing to end, and a round trip would open
     * a transaction anew (q__pg_round_trip sends the levels not sent). */
    if (err != 0 && !db->broken &&
        PQtransactionStatus(db->conn) != PQTRANS_IDLE)
        (void)q__pg_round_trip(db, rollback, 2, NULL, NULL, NULL,
                               "rolling back");
    return err;
}

/* Rolls back the innermost savepoint, which reached the server (its own
 * writes still waiting were dropped unsent: q__pg_tx_leave). A command
 * that failed before the savepoint (a deferred write of an outer level,
 * or of a level released since, read only now; the SAVEPOINT itself; a
 * send that failed) is not this level's to undo: the transaction stays
 * failed, and its commit fails. */
static int
undo_level(struct q__pg *db)
{
    const char *undo[] = {q__pg_stmt(ST_ROLLBACK_TO)->text,
                          q__pg_stmt(ST_RELEASE)->text};
    uint64_t since = db->tx_depth < Q__PG_MAX_LEVELS
                         ? db->level_seq[db->tx_depth]
                         : UINT64_MAX;
    int err;

    if (db->tx_rc != 0 && db->fail_seq <= since)
        return db->tx_rc;
    err = q__pg_round_trip(db, undo, 2, NULL, NULL, NULL,
                           "rolling back a savepoint");
    if (err == 0) {
        db->tx_rc = 0; /* the savepoint's failure is undone */
        db->fail_seq = 0;
    }
    return err;
}

int
q__pg_tx_leave(struct q__pg *db, int rc)
{
    bool reached;
    int err = 0;

    if (db->tx_depth <= 0)
        return rc ? rc : -EINVAL;
    /* A lost connection lost the level: a statement of it failed, even
     * one whose BEGIN was not acknowledged yet, and it cannot commit. A
     * transaction an error left aborted (a statement, or a send that
     * failed and took waiting writes with it) cannot either. */
    if (db->broken && rc == 0)
        rc = -EIO;
    if (db->tx_depth == 1 && rc == 0 && db->tx_rc != 0)
        rc = db->tx_rc;
    /* Tier rows kept and not written yet are the commit's to write. */
    if (db->tx_depth == 1 && rc == 0 && q__pg_tiers_dirty(db))
        rc = q__pg_tiers_write(db);
    /* A level rolling back keeps nothing it stored (its rows are put back
     * as it found them once it is undone: nothing may write them before)
     * and sends none of its waiting writes; one ending well leaves them
     * to its parent. */
    if (rc != 0) {
        q__pg_tiers_forget(db);
        q__pg_pending_drop(db, db->tx_depth);
    } else if (db->tx_depth > 1) {
        q__pg_pending_merge(db, db->tx_depth);
    }
    /* A level that never reached the server has nothing to end there
     * (an inner level's waiting writes are its parent's now), unless it
     * is the transaction and has writes waiting for its commit. */
    reached = db->tx_depth <= db->tx_sent ||
              (db->tx_depth == 1 && q__pg_pending_any(db));
    if (!reached || db->broken) {
        /* nothing to send */
    } else if (db->tx_depth > 1 && rc == 0) {
        db->tx_release++; /* sent with the next command: no round trip */
    } else if (db->tx_depth > 1) {
        err = undo_level(db);
    } else {
        err = finish(db, rc);
    }
    if (rc != 0 && db->tx_depth > 1)
        q__pg_tiers_undo(db, db->tx_depth);
    db->tx_depth--;
    if (db->tx_sent > db->tx_depth)
        db->tx_sent = db->tx_depth;
    /* What the level left its parent may go ahead now (q__pg_push); a
     * send that fails is the transaction's, which its commit finds, not
     * this level's. */
    if (db->tx_depth == 1 && rc == 0 && err == 0)
        (void)q__pg_push(db, "writing ahead");
    if (db->tx_depth == 0) {
        db->tx_rc = db->tx_release = 0;
        db->fail_seq = 0;
        q__pg_tiers_ended(db, rc == 0 && err == 0);
    }
    return rc ? rc : err;
}

int
q__pg_tx_begin(q_db *db)
{
    return q__pg_tx_enter(q__pg(db));
}

int
q__pg_tx_commit(q_db *db)
{
    if (q__pg(db)->tx_depth <= 0)
        return -EINVAL;
    return q__pg_tx_leave(q__pg(db), 0);
}

void
q__pg_tx_rollback(q_db *db)
{
    if (q__pg(db)->tx_depth > 0)
        (void)q__pg_tx_leave(q__pg(db), -ECANCELED);
}

/* A read snapshot is a REPEATABLE READ transaction: its reads see the
 * database as of its first statement. It takes no store lock (it writes
 * nothing), and a connection lost inside it is not made anew until it
 * ends (q__pg_usable): reads after the loss fail rather than read a
 * second state. */
int
q__pg_read_begin(q_db *d)
{
    const char *begin[] = {q__pg_stmt(ST_BEGIN_READ)->text};
    struct q__pg *db = q__pg(d);
    int rc;

    if (db->read_depth > 0 || db->tx_depth > 0) {
        db->read_depth++;
        return 0;
    }
    rc = q__pg_round_trip(db, begin, 1, NULL, NULL, NULL,
                          "starting a read snapshot");
    if (rc != 0)
        return rc;
    db->read_depth = 1;
    db->read_open = true;
    return 0;
}

void
q__pg_read_end(q_db *d)
{
    struct q__pg *db = q__pg(d);
    const char *end[] = {q__pg_stmt(ST_COMMIT)->text};

    if (db->read_depth == 0 || --db->read_depth > 0 || !db->read_open)
        return;
    db->read_open = false;
    if (!db->broken)
        (void)q__pg_round_trip(db, end, 1, NULL, NULL, NULL,
                               "ending a read snapshot");
}

/* ---- versions, the clock ------------------------------------------------ */

/* Runs a one-value statement into *v. */
static int
one_int(struct q__pg *db, enum q__pg_stmt_id st, int64_t *v, const char *what)
{
    PGresult *r = NULL;
    int rc = q__pg_run(db, st, NULL, &r, what);

    if (rc == 0)
        *v = PQntuples(r) > 0 ? q__pg_int(r, 0, 0) : 0;
    PQclear(r);
    return rc;
}

int
q__pg_db_version(q_db *d, int *out)
{
    struct q__pg *db = q__pg(d);
    int64_t has = 0, v = 0;
    int rc = one_int(db, ST_HAS_SCHEMA, &has, "reading the schema version");

    if (rc == 0 && has)
        rc = one_int(db, ST_SCHEMA_VERSION, &v, "reading the schema version");
    if (rc == 0)
        *out = (int)v;
    return rc;
}

int
q__pg_clock_sync(q_db *d)
{
    struct q__pg *db = q__pg(d);
    int64_t t0 = clock_now_ms(), at = 0, t1;
    int rc = one_int(db, ST_CLOCK, &at, "reading the database's clock");

    t1 = clock_now_ms();
    if (rc == 0)
        db->base.clock_offset_ms = at - (t0 + (t1 - t0) / 2);
    return rc;
}

/* ---- opening and closing ------------------------------------------------- */

/* The check of every open but `stepq init`'s (as SQLite's). */
static int
check_existing(struct q__pg *db)
{
    int have = 0, rc;

    if ((rc = q__pg_db_version(&db->base, &have)) != 0)
        return rc;
    return q__version_check(db->where, have);
}

int
q__pg_open(const char *conninfo, const struct q_open_opts *opts, bool create,
           q_db **out)
{
    static const struct q_open_opts defaults = {
        .durable = false, .lock_wait_ms = 5000, .keep_body_bytes = 65536};
    struct q__pg *db;
    char where[512], *err = NULL;
    PQconninfoOption *parsed;
    int rc;

    assert(q__pg_sql_missing() < 0); /* every statement has its SQL */
    if (opts == NULL)
        opts = &defaults;
    q_location_redact(conninfo, where, sizeof(where));
    /* libpq's parse error may quote the location: say only that it is
     * not one. */
    if ((parsed = PQconninfoParse(conninfo, &err)) == NULL) {
        /* libpq's message may quote part of a value (a bad %XX escape in
         * a password): only where the problem lies is said. */
        log_error("%s: libpq cannot read this location (a parameter it "
                  "does not know, or a bad %%XX escape or quote)",
                  where);
        PQfreemem(err);
        return -EINVAL;
    }
    PQconninfoFree(parsed);
    db = xcalloc(1, sizeof(*db));
    db->base.ops = &q__pg_ops;
    db->base.lock_in_line = true;
    db->conninfo = xstrdup(conninfo);
    db->where = xstrdup(where);
    db->keep_body_bytes = opts->keep_body_bytes;
    db->lock_wait_ms = opts->lock_wait_ms > 0 ? opts->lock_wait_ms : 5000;
    db->answer_wait_ms = opts->answer_wait_ms > 0 ? opts->answer_wait_ms : 0;
    db->retry_ms = RETRY_FIRST_MS;
    if ((db->conn = q__pg_connect(db, "cannot connect")) == NULL) {
        rc = -EIO;
        goto fail;
    }
    if ((rc = session_setup(db)) != 0 || (rc = q__pg_clock_sync(&db->base)) ||
        (rc = create ? q__pg_migrate(db) : check_existing(db)) != 0)
        goto fail;
    *out = &db->base;
    return 0;
fail:
    q__pg_close(&db->base);
    return rc;
}

int
q__pg_close(q_db *d)
{
    struct q__pg *db = q__pg(d);

    if (db == NULL)
        return 0;
    /* Rolling back sends none of the writes waiting (their answers would
     * write to callers that may be gone). */
    while (db->tx_depth > 0)
        q__pg_tx_rollback(d);
    while (db->read_depth > 0)
        q__pg_read_end(d);
    q__pg_pending_drop(db, 0);
    free(db->pending);
    PQfinish(db->conn);
    PQfinish(db->listen);
    free(db->sent);
    free(db->saved);
    free(db->schema);
    free(db->conninfo);
    free(db->where);
    free(db);
    return 0;
}

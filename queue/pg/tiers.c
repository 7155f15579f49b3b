/* tiers.c: PostgreSQL storage of the tier state every worker shares: the
 * tiers row (breaker, walls, pacing) and the send log (tier_sends). Each
 * call is one statement; the meaning is the SQLite backend's
 * (queue/sqlite/tiers.c). Inside a transaction a row read or stored is
 * kept (not read again), and stores and prunes of a kept row wait to be
 * written together by the transaction's next round trip (pipe.c). */
#include "queue/pg/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"

/* The stored row (absent: the defaults of a tier never used) and the
 * sends in flight, in one statement. They are read from the log's index
 * only when $3 asks, the breaker is not closed, the tier is in doubt, or
 * a quota wall just ended (which puts it in doubt): then the one request
 * out matters. The conditions are quals with no column of tier_sends in
 * them, so the planner makes them a one-time filter in front of the
 * scan. */
static const struct q__pg_sql tier_load_sql = {
    "q_tiers_load",
    "SELECT t.breaker, t.failures, t.open_until, t.exhausted_until,"
    " t.exhausted_reason, t.limited_until, t.allowance_used,"
    " t.allowance_since, t.config_hash, t.req_tat, t.tok_tat, t.pace,"
    " t.pace_down_at, t.pace_up_at, t.learned_rpm, t.learned_tpm, t.doubt,"
    " (t.name IS NOT NULL)::int, t.usage, f.n, f.probe"
    " FROM (SELECT $1::text AS name) q"
    " LEFT JOIN tiers t ON t.name = q.name"
    " CROSS JOIN LATERAL (SELECT count(*) AS n, coalesce(max(s.probe), 0)"
    "   AS probe FROM tier_sends s WHERE s.tier = q.name"
    "   AND s.expires_at > $2::bigint"
    "   AND ($3::boolean OR coalesce(t.breaker, 'closed') <> 'closed'"
    "   OR coalesce(t.doubt, 1) <> 0"
    "   OR (t.exhausted_until > 0 AND t.exhausted_until <= $2::bigint))) f"};

/* A load inside a transaction is the read of a read-modify-write (the
 * worker's admission: load, decide, log the send, store). The store's
 * write lock that every transaction takes first (store.c) makes it
 * atomic across hosts, as SQLite's write transaction does: another host
 * admitting waits for our commit, and this statement's snapshot is taken
 * after the lock was granted, so it sees that commit. */
/* $1 tier, $2 at, $3 event: deferred as the state it goes with. */
static const struct q__pg_sql tier_event_sql = {
    "q_tier_event_add", "INSERT INTO tier_events (tier, at, event)"
                        " VALUES ($1::text, $2::bigint, $3::text)"};

static const struct q__pg_sql tier_store_sql = {
    "q_tiers_store",
    "INSERT INTO tiers (name, breaker, failures, open_until,"
    " exhausted_until, exhausted_reason, limited_until, allowance_used,"
    " allowance_since, config_hash, req_tat, tok_tat, pace, pace_down_at,"
    " pace_up_at, learned_rpm, learned_tpm, doubt, usage)"
    " VALUES ($1::text, $2::text, $3::bigint, $4::bigint, $5::bigint,"
    " $6::text, $7::bigint, $8::bigint, $9::bigint, $10::text,"
    " $11::double precision, $12::double precision, $13::double precision,"
    " $14::bigint, $15::bigint, $16::bigint, $17::bigint, $18::bigint,"
    " $19::text)"
    " ON CONFLICT (name) DO UPDATE SET"
    " breaker = excluded.breaker, failures = excluded.failures,"
    " open_until = excluded.open_until,"
    " exhausted_until = excluded.exhausted_until,"
    " exhausted_reason = excluded.exhausted_reason,"
    " limited_until = excluded.limited_until,"
    " allowance_used = excluded.allowance_used,"
    " allowance_since = excluded.allowance_since,"
    " config_hash = excluded.config_hash, req_tat = excluded.req_tat,"
    " tok_tat = excluded.tok_tat, pace = excluded.pace,"
    " pace_down_at = excluded.pace_down_at,"
    " pace_up_at = excluded.pace_up_at, learned_rpm = excluded.learned_rpm,"
    " learned_tpm = excluded.learned_tpm, doubt = excluded.doubt,"
    " usage = excluded.usage"};

/* A send's id comes from the table's own sequence, taken ahead
 * (q__pg_take_id), so that logging a send is a write nobody waits for. */
static const struct q__pg_sql send_add_sql = {
    "q_tiers_send_add",
    "INSERT INTO tier_sends (id, tier, at, tokens, probe, expires_at)"
    " VALUES ($1::bigint, $2::text, $3::bigint, $4::bigint, $5::bigint,"
    " $6::bigint)"};

/* An answered send leaves the log; its charge comes back when asked. */
static const struct q__pg_sql send_end_sql = {
    "q_tiers_send_end",
    "DELETE FROM tier_sends WHERE id = $1::bigint RETURNING tokens"};

static const struct q__pg_sql prune_sql = {
    "q_tiers_prune", "DELETE FROM tier_sends WHERE tier = $1::text"
                     " AND expires_at < $2::bigint"};

static void
copy_col(const PGresult *res, int r, int c, char *buf, size_t len)
{
    snprintf(buf, len, "%s",
             q__pg_null(res, r, c) ? "" : PQgetvalue(res, r, c));
}

/* Reads the row of tier_load_sql into the q_tier_state at elem: the
 * stored fields (a tier with no row keeps the defaults of one never
 * used: pace 1, in doubt) and the sends in flight. */
static void
read_tier(const PGresult *res, int r, void *elem)
{
    struct q_tier_state *st = elem;
    const char *b = PQgetvalue(res, r, 0);

    st->pace = 1.0;
    st->doubt = true;
    if (q__pg_int(res, r, 17) != 0) {
        for (int i = 0; i < 3; i++) {
            if (strcmp(b, q_breaker_name((enum q_breaker)i)) == 0)
                st->breaker = (enum q_breaker)i;
        }
        st->failures = (int)q__pg_int(res, r, 1);
        st->open_until = q__pg_int(res, r, 2);
        st->exhausted_until = q__pg_int(res, r, 3);
        copy_col(res, r, 4, st->exhausted_reason, sizeof(st->exhausted_reason));
        st->limited_until = q__pg_int(res, r, 5);
        st->allowance_used = q__pg_int(res, r, 6);
        st->allowance_since = q__pg_int(res, r, 7);
        copy_col(res, r, 8, st->config_hash, sizeof(st->config_hash));
        st->req_tat = q__pg_real(res, r, 9);
        st->tok_tat = q__pg_real(res, r, 10);
        st->pace = q__pg_real(res, r, 11);
        st->pace_down_at = q__pg_int(res, r, 12);
        st->pace_up_at = q__pg_int(res, r, 13);
        st->learned_rpm = q__pg_int(res, r, 14);
        st->learned_tpm = q__pg_int(res, r, 15);
        st->doubt = q__pg_int(res, r, 16) != 0;
        q__usage_parse(q__pg_null(res, r, 18) ? NULL : PQgetvalue(res, r, 18),
                       &st->usage);
    }
    st->in_flight = q__pg_int(res, r, 19);
    st->probe_in_flight = q__pg_int(res, r, 20) != 0;
}

/* tier_load_sql's parameters for a load of tier at now, counting the
 * sends in flight when inflight asks. */
static void
load_params(struct q__pg_params *p, const char *tier, int64_t now,
            bool inflight)
{
    q__pg_p_text(p, tier);
    q__pg_p_int(p, now);
    q__pg_p_bool(p, inflight);
}

/* ---- tier rows kept for the open transaction ---------------------- */

static struct q__pg_tier_row *
row_of(struct q__pg *pg, const char *tier)
{
    for (int i = 0; i < pg->tiers.n; i++) {
        if (strcmp(pg->tiers.rows[i].name, tier) == 0)
            return &pg->tiers.rows[i];
    }
    return NULL;
}

/* Keeps st's row fields as tier's row for the rest of the transaction,
 * dirty when they are a store's (to be written), clean when read. Returns
 * the row, or NULL when none is kept (no transaction, a name too long, a
 * full cache): then a store is written now. */
static struct q__pg_tier_row *
keep_row(struct q__pg *pg, const char *tier, const struct q_tier_state *st,
         bool dirty)
{
    struct q__pg_tier_row *row = row_of(pg, tier);

    if (pg->tx_depth == 0 || strlen(tier) >= sizeof(row->name))
        return NULL;
    if (row == NULL && pg->tiers.n < Q__PG_TIER_CACHE) {
        row = &pg->tiers.rows[pg->tiers.n++];
        *row = (struct q__pg_tier_row){0};
        snprintf(row->name, sizeof(row->name), "%s", tier);
    }
    if (row != NULL) {
        row->st = *st;
        row->dirty = dirty;
    }
    return row;
}

/* A load that needs only the row: the sends in flight not asked for, and
 * none of the states in which tier_load_sql counts them anyway (so they
 * are 0, as the statement would say). The row is the one read
 * or stored earlier in this transaction: under the store's write lock
 * (pipe.c) no other process writes it before the commit. */
static bool
row_kept(struct q__pg *pg, const char *tier, int64_t now, bool inflight,
         struct q_tier_state *out)
{
    const struct q__pg_tier_row *row;

    if (pg->tx_depth == 0 || inflight || (row = row_of(pg, tier)) == NULL)
        return false;
    if (row->st.breaker != Q_BREAKER_CLOSED || row->st.doubt ||
        (row->st.exhausted_until > 0 && row->st.exhausted_until <= now))
        return false;
    *out = row->st;
    out->window_requests = out->window_tokens = 0;
    out->in_flight = 0;
    out->probe_in_flight = false;
    return true;
}

/* p's values point into usage (Q__USAGE_TEXT bytes), which must live
 * until p is handed on (a deferred write copies them). */
static void
store_params(struct q__pg_params *p, const char *tier,
             const struct q_tier_state *st, char *usage)
{
    q__pg_p_text(p, tier);
    q__pg_p_text(p, q_breaker_name(st->breaker));
    q__pg_p_int(p, st->failures);
    q__pg_p_int(p, st->open_until);
    q__pg_p_int(p, st->exhausted_until);
    q__pg_p_text(p, st->exhausted_reason[0] ? st->exhausted_reason : NULL);
    q__pg_p_int(p, st->limited_until);
    q__pg_p_int(p, st->allowance_used);
    q__pg_p_int(p, st->allowance_since);
    q__pg_p_text(p, st->config_hash[0] ? st->config_hash : NULL);
    q__pg_p_real(p, st->req_tat);
    q__pg_p_real(p, st->tok_tat);
    q__pg_p_real(p, st->pace);
    q__pg_p_int(p, st->pace_down_at);
    q__pg_p_int(p, st->pace_up_at);
    q__pg_p_int(p, st->learned_rpm);
    q__pg_p_int(p, st->learned_tpm);
    q__pg_p_int(p, st->doubt);
    q__usage_format(&st->usage, usage, Q__USAGE_TEXT);
    q__pg_p_text(p, usage[0] ? usage : NULL);
}

static int
prune_now(struct q__pg *pg, const char *tier, int64_t before)
{
    struct q__pg_params p = {0};

    q__pg_p_text(&p, tier);
    q__pg_p_int(&p, before);
    return q__pg_defer(pg, &prune_sql, &p, "pruning tier sends");
}

/* A row's writes are marked done before they wait: a full wait list
 * runs a round trip, which comes back here. */
int
q__pg_tiers_write(struct q__pg *pg)
{
    int rc = 0;

    for (int i = 0; rc == 0 && i < pg->tiers.n; i++) {
        struct q__pg_tier_row *row = &pg->tiers.rows[i];
        struct q__pg_params p = {0};
        char usage[Q__USAGE_TEXT];
        int64_t before = row->prune_before;
        bool dirty = row->dirty;

        row->dirty = false;
        row->prune_before = 0;
        if (dirty) {
            store_params(&p, row->name, &row->st, usage);
            rc = q__pg_defer(pg, &tier_store_sql, &p, "writing tier state");
        }
        if (rc == 0 && before != 0)
            rc = prune_now(pg, row->name, before);
    }
    return rc;
}

bool
q__pg_tiers_dirty(const struct q__pg *pg)
{
    for (int i = 0; i < pg->tiers.n; i++) {
        if (pg->tiers.rows[i].dirty || pg->tiers.rows[i].prune_before != 0)
            return true;
    }
    return false;
}

int
q__pg_tiers_mark(struct q__pg *pg, int level)
{
    if (level >= Q__PG_MAX_LEVELS)
        return q__pg_tiers_write(pg);
    if (pg->saved == NULL)
        pg->saved = xcalloc(Q__PG_MAX_LEVELS, sizeof(*pg->saved));
    pg->saved[level].n = pg->tiers.n; /* only the rows in use */
    memcpy(pg->saved[level].rows, pg->tiers.rows,
           (size_t)pg->tiers.n * sizeof(pg->tiers.rows[0]));
    return 0;
}

void
q__pg_tiers_undo(struct q__pg *pg, int level)
{
    if (level < Q__PG_MAX_LEVELS && pg->saved != NULL) {
        pg->tiers.n = pg->saved[level].n;
        memcpy(pg->tiers.rows, pg->saved[level].rows,
               (size_t)pg->tiers.n * sizeof(pg->tiers.rows[0]));
    } else
        pg->tiers.n = 0; /* what it stored was written before it began;
                            rows read are read again */
}

void
q__pg_tiers_forget(struct q__pg *pg)
{
    pg->tiers.n = 0;
}

void
q__pg_tiers_ended(struct q__pg *pg, bool committed)
{
    if (committed) {
        pg->nrecent = pg->tiers.n;
        for (int i = 0; i < pg->tiers.n; i++)
            memcpy(pg->recent[i], pg->tiers.rows[i].name,
                   sizeof(pg->recent[i]));
    }
    pg->tiers.n = 0;
}

/* A read ahead's answer: the row, kept unless the transaction has one
 * already (one stored before its first round trip). */
static int
prefetched(const PGresult *res, void *db, void *name)
{
    struct q__pg *pg = db;
    struct q_tier_state st = {0};

    if (PQntuples(res) == 1 && row_of(pg, name) == NULL) {
        read_tier(res, 0, &st);
        (void)keep_row(pg, name, &st, false);
    }
    return 0;
}

bool
q__pg_tiers_prefetch(struct q__pg *pg, const struct q__pg_sql *sql,
                     const struct q__pg_params *next)
{
    for (int i = 0; i < pg->nrecent; i++) {
        struct q__pg_params p = {0};

        /* The round trip's own statement reads this one (and keeps it). */
        if (sql == &tier_load_sql && next != NULL && next->v[0] != NULL &&
            strcmp(next->v[0], pg->recent[i]) == 0)
            continue;
        /* The row only, without what a kept row is used without
         * (row_kept). */
        load_params(&p, pg->recent[i], 0, false);
        if (!q__pg_queue(pg, &tier_load_sql, &p, prefetched, pg, pg->recent[i],
                         "reading tier state ahead"))
            return false;
    }
    return true;
}

int
q__pg_tier_load(q_db *db, const char *tier, int64_t now, bool inflight,
                struct q_tier_state *out)
{
    struct q__pg *pg = q__pg(db);
    struct q__pg_params p = {0};
    struct q_tier_state st;
    int rc;

    if (row_kept(pg, tier, now, inflight, out))
        return 0;
    load_params(&p, tier, now, inflight);
    rc = q__pg_select_one(pg, &tier_load_sql, &p, sizeof(st), read_tier, &st,
                          "reading tier state");
    if (rc == 0) {
        (void)keep_row(pg, tier, &st, false);
        *out = st;
    }
    return rc == -ENOENT ? -EIO : rc; /* the query always gives a row */
}

int
q__pg_tier_store(q_db *db, const char *tier, const struct q_tier_state *st)
{
    struct q__pg_params p = {0};
    char usage[Q__USAGE_TEXT];

    /* Kept: written by the transaction's next round trip. */
    if (keep_row(q__pg(db), tier, st, true) != NULL)
        return 0;
    store_params(&p, tier, st, usage);
    return q__pg_defer(q__pg(db), &tier_store_sql, &p, "writing tier state");
}

int
q__pg_tier_event_add(q_db *db, const char *tier, int64_t at, const char *event)
{
    struct q__pg_params p = {0};

    /* Written by the transaction's next round trip, with its turn. */
    q__pg_p_text(&p, tier);
    q__pg_p_int(&p, at);
    q__pg_p_text(&p, event);
    return q__pg_defer(q__pg(db), &tier_event_sql, &p,
                       "recording a tier event");
}

int
q__pg_tier_send_add(q_db *db, const char *tier, int64_t at, int64_t tokens,
                    bool probe, int64_t expires_at, int64_t *id)
{
    struct q__pg *pg = q__pg(db);
    struct q__pg_params p = {0};
    int64_t got = 0;
    int rc;

    if ((rc = q__pg_take_id(pg, "tier_sends", &pg->send_ids, &got)) != 0)
        return rc;
    q__pg_p_int(&p, got);
    q__pg_p_text(&p, tier);
    q__pg_p_int(&p, at);
    q__pg_p_int(&p, tokens);
    q__pg_p_int(&p, probe);
    q__pg_p_int(&p, expires_at);
    if ((rc = q__pg_defer(pg, &send_add_sql, &p, "logging a tier send")) == 0)
        *id = got;
    return rc;
}

/* send_end_sql's answer: what was charged (into *old_tokens, may be
 * NULL); -ENOENT for no such send. */
static int
ended(const PGresult *res, void *old_tokens, void *unused)
{
    int64_t got = 0;

    (void)unused;
    if (PQntuples(res) == 0)
        return -ENOENT;
    q__pg_read_ints(res, 0, &got);
    if (old_tokens != NULL)
        *(int64_t *)old_tokens = got;
    return 0;
}

/* With old_tokens NULL, nothing waits for the result inside a
 * transaction: it rides in the next round trip (queue.h). */
int
q__pg_tier_send_end(q_db *db, int64_t id, int64_t *old_tokens)
{
    struct q__pg_params p = {0};

    q__pg_p_int(&p, id);
    return q__pg_write(q__pg(db), &send_end_sql, &p, old_tokens == NULL, ended,
                       old_tokens, NULL, id, "ending a tier send");
}

/* Inside a transaction a prune of a kept tier waits for the row's write
 * (the latest one asked for deletes what the earlier ones would have):
 * what it deletes had expired, so no load counts it. */
int
q__pg_tier_prune(q_db *db, const char *tier, int64_t before)
{
    struct q__pg *pg = q__pg(db);
    struct q__pg_tier_row *row = pg->tx_depth > 0 ? row_of(pg, tier) : NULL;

    if (row == NULL)
        return prune_now(pg, tier, before);
    if (before > row->prune_before)
        row->prune_before = before;
    return 0;
}

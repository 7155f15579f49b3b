/* tiers.c: PostgreSQL storage of the tier state every worker shares: the
 * tiers row (breaker, walls, pacing, usage, sends in flight). Each call is
 * one statement; the meaning is the SQLite backend's
 * (queue/sqlite/tiers.c). Inside a transaction a row read or stored is
 * kept (not read again), and the stores of a kept row wait to be written
 * together by the transaction's next round trip (pipe.c). */
#include "queue/pg/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"
#include "queue/tiers.h"

static void
copy_col(const PGresult *res, int r, int c, char *buf, size_t len)
{
    snprintf(buf, len, "%s",
             q__pg_null(res, r, c) ? "" : PQgetvalue(res, r, c));
}

/* Reads row r of ST_TIER_GET or ST_TIER_LOCK into the q_tier_state at
 * elem. */
static void
read_tier(const PGresult *res, int r, void *elem)
{
    struct q_tier_state *st = elem;
    const char *b = PQgetvalue(res, r, 0);

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
    q__usage_parse(q__pg_null(res, r, 17) ? NULL : PQgetvalue(res, r, 17),
                   &st->usage);
    q__flight_parse(q__pg_null(res, r, 18) ? NULL : PQgetvalue(res, r, 18),
                    &st->flight);
}

/* A tier with no row: the defaults of one never used (pace 1, in
 * doubt). */
static void
tier_defaults(struct q_tier_state *st)
{
    memset(st, 0, sizeof(*st));
    st->pace = 1.0;
    st->doubt = true;
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
        q__tier_underive(&row->st);
        row->dirty = dirty;
    }
    return row;
}

/* The row of tier read or stored earlier in this transaction: under the
 * store's write lock (pipe.c) no other process writes it before the
 * commit. */
static bool
row_kept(struct q__pg *pg, const char *tier, struct q_tier_state *out)
{
    const struct q__pg_tier_row *row;

    if (pg->tx_depth == 0 || (row = row_of(pg, tier)) == NULL)
        return false;
    *out = row->st;
    return true;
}

/* Texts a store's parameters point into, which must live until the
 * parameters are handed on (a deferred write copies them). */
struct tier_texts {
    char usage[Q__USAGE_TEXT], flight[Q__FLIGHT_TEXT];
};

static void
store_params(struct q__pg_params *p, const char *tier,
             const struct q_tier_state *st, struct tier_texts *tx)
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
    q__usage_format(&st->usage, tx->usage, sizeof(tx->usage));
    q__pg_p_text(p, tx->usage[0] ? tx->usage : NULL);
    q__flight_format(&st->flight, tx->flight, sizeof(tx->flight));
    q__pg_p_text(p, tx->flight[0] ? tx->flight : NULL);
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
        struct tier_texts tx;

        if (!row->dirty)
            continue;
        row->dirty = false;
        store_params(&p, row->name, &row->st, &tx);
        rc = q__pg_defer(pg, ST_TIER_PUT, &p, "writing tier state");
    }
    return rc;
}

bool
q__pg_tiers_dirty(const struct q__pg *pg)
{
    for (int i = 0; i < pg->tiers.n; i++) {
        if (pg->tiers.rows[i].dirty)
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
    struct q_tier_state st;

    /* No row yet: left to q__pg_tier_load, which makes one to lock. */
    if (row_of(pg, name) == NULL && PQntuples(res) == 1) {
        tier_defaults(&st);
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
        if (sql == q__pg_stmt(ST_TIER_LOCK) && next != NULL &&
            next->v[0] != NULL && strcmp(next->v[0], pg->recent[i]) == 0)
            continue;
        q__pg_p_text(&p, pg->recent[i]);
        if (!q__pg_queue(pg, ST_TIER_LOCK, &p, prefetched, pg, pg->recent[i],
                         "reading tier state ahead"))
            return false;
    }
    return true;
}

/* Inside a transaction the load locks the row (ST_TIER_LOCK: sql.c says
 * why), and a tier with no row yet gets one first (ST_TIER_ROW), so that
 * there is a row to lock. */
int
q__pg_tier_load(q_db *db, const char *tier, struct q_tier_state *out)
{
    struct q__pg *pg = q__pg(db);
    struct q__pg_params p = {0};
    struct q_tier_state st;
    bool lock = pg->tx_depth > 0;
    int rc;

    if (row_kept(pg, tier, out))
        return 0;
    tier_defaults(&st);
    q__pg_p_text(&p, tier);
    rc = q__pg_select_one(pg, lock ? ST_TIER_LOCK : ST_TIER_GET, &p, sizeof(st),
                          read_tier, &st, "reading tier state");
    if (rc == -ENOENT && lock &&
        (rc = q__pg_run(pg, ST_TIER_ROW, &p, NULL, "adding a tier row")) == 0)
        rc = q__pg_select_one(pg, ST_TIER_LOCK, &p, sizeof(st), read_tier, &st,
                              "reading tier state");
    if (rc == -ENOENT) {
        tier_defaults(&st);
        rc = 0;
    }
    if (rc == 0) {
        (void)keep_row(pg, tier, &st, false);
        *out = st;
    }
    return rc;
}

int
q__pg_tier_store(q_db *db, const char *tier, const struct q_tier_state *st)
{
    struct q__pg_params p = {0};
    struct tier_texts tx;

    /* Kept: written by the transaction's next round trip. */
    if (keep_row(q__pg(db), tier, st, true) != NULL)
        return 0;
    store_params(&p, tier, st, &tx);
    return q__pg_defer(q__pg(db), ST_TIER_PUT, &p, "writing tier state");
}

int
q__pg_tier_event_add(q_db *db, const char *tier, int64_t at, const char *event)
{
    struct q__pg_params p = {0};

    /* Written by the transaction's next round trip, with its turn. */
    q__pg_p_text(&p, tier);
    q__pg_p_int(&p, at);
    q__pg_p_text(&p, event);
    return q__pg_defer(q__pg(db), ST_TIER_EVENT_ADD, &p,
                       "recording a tier event");
}

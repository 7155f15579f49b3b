/* tiers.c: SQLite storage of the tier state every worker shares: the
 * tiers row (breaker, walls, pacing, usage, sends in flight). */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "queue/tiers.h"

static void
copy_col(sqlite3_stmt *s, int i, char *buf, size_t len)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(buf, len, "%s", t ? (const char *)t : "");
}

void
q__tier_rows_forget(struct q__sqlite *db)
{
    db->ntier_rows = 0;
    db->ntier_undo = 0;
}

/* The row of tier kept for the open transaction, or NULL. */
static struct q__tier_row *
row_find(struct q__sqlite *db, const char *tier)
{
    /* SQLite may have ended the transaction itself after an error: then
     * the rows are not kept either. */
    if (db->tx_depth == 0 || sqlite3_get_autocommit(db->h))
        return NULL;
    for (size_t i = 0; i < db->ntier_rows; i++) {
        if (strcmp(db->tier_rows[i].name, tier) == 0)
            return &db->tier_rows[i];
    }
    return NULL;
}

/* Keeps st as tier's row for the rest of the open transaction (none
 * open, a name too long or no room left: NULL, not kept). */
static struct q__tier_row *
row_keep(struct q__sqlite *db, const char *tier, const struct q_tier_state *st)
{
    struct q__tier_row *r;

    if (db->tx_depth == 0 || sqlite3_get_autocommit(db->h) ||
        strlen(tier) >= sizeof(r->name))
        return NULL;
    if ((r = row_find(db, tier)) == NULL) {
        if (db->ntier_rows == Q__TIER_ROWS)
            return NULL;
        r = &db->tier_rows[db->ntier_rows++];
        snprintf(r->name, sizeof(r->name), "%s", tier);
        r->dirty = false;
        r->undo_level = 0;
    }
    r->st = *st;
    q__tier_underive(&r->st);
    return r;
}

static int
row_write(struct q__sqlite *db, const char *tier, const struct q_tier_state *st)
{
    sqlite3_stmt *s = q__stmt(db, ST_TIER_PUT);
    char usage[Q__USAGE_TEXT], flight[Q__FLIGHT_TEXT];

    if (s == NULL)
        return -EIO;
    q__bind_text(s, 1, tier);
    q__bind_text(s, 2, q_breaker_name(st->breaker));
    sqlite3_bind_int(s, 3, st->failures);
    sqlite3_bind_int64(s, 4, st->open_until);
    sqlite3_bind_int64(s, 5, st->exhausted_until);
    q__bind_text(s, 6, st->exhausted_reason[0] ? st->exhausted_reason : NULL);
    sqlite3_bind_int64(s, 7, st->limited_until);
    sqlite3_bind_int64(s, 8, st->allowance_used);
    sqlite3_bind_int64(s, 9, st->allowance_since);
    q__bind_text(s, 10, st->config_hash[0] ? st->config_hash : NULL);
    sqlite3_bind_double(s, 11, st->req_tat);
    sqlite3_bind_double(s, 12, st->tok_tat);
    sqlite3_bind_double(s, 13, st->pace);
    sqlite3_bind_int64(s, 14, st->pace_down_at);
    sqlite3_bind_int64(s, 15, st->pace_up_at);
    sqlite3_bind_int64(s, 16, st->learned_rpm);
    sqlite3_bind_int64(s, 17, st->learned_tpm);
    sqlite3_bind_int(s, 18, st->doubt);
    q__usage_format(&st->usage, usage, sizeof(usage));
    q__bind_text(s, 19, usage[0] ? usage : NULL);
    q__flight_format(&st->flight, flight, sizeof(flight));
    q__bind_text(s, 20, flight[0] ? flight : NULL);
    return q__run_done(db, s, "writing tier state");
}

int
q__tier_rows_flush(struct q__sqlite *db)
{
    int rc;

    if (sqlite3_get_autocommit(db->h))
        return 0; /* SQLite rolled back: nothing of it is to be written */
    for (size_t i = 0; i < db->ntier_rows; i++) {
        struct q__tier_row *r = &db->tier_rows[i];
        if (!r->dirty)
            continue;
        if ((rc = row_write(db, r->name, &r->st)) != 0)
            return rc;
        r->dirty = false;
    }
    return 0;
}

void
q__tier_rows_level_end(struct q__sqlite *db, int level, bool rollback)
{
    size_t kept = 0;

    /* A level's entries are the last ones: its stores came after its
     * parent's. Rolled back, each puts its row back; ended well, each
     * becomes the parent's, unless the parent has its own for the row
     * (which holds the older state). */
    for (size_t i = 0; i < db->ntier_undo; i++) {
        struct q__tier_undo *u = &db->tier_undo[i];
        struct q__tier_row *r = &db->tier_rows[u->row];

        if (u->level != level) {
            db->tier_undo[kept++] = *u;
            continue;
        }
        if (rollback) {
            r->st = u->st;
            r->dirty = u->dirty;
            r->undo_level = u->undo_level;
        } else if (u->undo_level == level - 1) {
            r->undo_level = level - 1;
        } else {
            u->level = level - 1;
            r->undo_level = level - 1;
            db->tier_undo[kept++] = *u;
        }
    }
    db->ntier_undo = kept;
}

/* Notes what r is before the first store into it at the open level, so
 * that a rollback of that level can put it back. */
static void
row_undo_note(struct q__sqlite *db, struct q__tier_row *r)
{
    struct q__tier_undo *u;

    if (r->undo_level == db->tx_depth)
        return;
    if (db->ntier_undo == db->tier_undo_cap) {
        db->tier_undo_cap = db->tier_undo_cap ? 2 * db->tier_undo_cap : 16;
        db->tier_undo =
            xrealloc(db->tier_undo, db->tier_undo_cap * sizeof(*db->tier_undo));
    }
    u = &db->tier_undo[db->ntier_undo++];
    u->level = db->tx_depth;
    u->row = (size_t)(r - db->tier_rows);
    u->undo_level = r->undo_level;
    u->dirty = r->dirty;
    u->st = r->st;
    r->undo_level = db->tx_depth;
}

/* Reads tier's row into *st (a tier never stored: its defaults). Inside a
 * transaction, a row read or written before in it is not read again
 * (struct q__sqlite). */
static int
row_read(struct q__sqlite *db, const char *tier, struct q_tier_state *out)
{
    struct q__tier_row *kept = row_find(db, tier);
    struct q_tier_state st;
    sqlite3_stmt *s;
    int rc;

    if (kept != NULL) {
        *out = kept->st;
        return 0;
    }
    if ((s = q__stmt(db, ST_TIER_GET)) == NULL)
        return -EIO;
    memset(&st, 0, sizeof(st));
    st.pace = 1.0;
    st.doubt = true; /* a tier never used: its state is unknown */
    q__bind_text(s, 1, tier);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        const unsigned char *b = sqlite3_column_text(s, 0);
        for (int i = 0; i < 3 && b != NULL; i++) {
            if (strcmp((const char *)b, q_breaker_name((enum q_breaker)i)) == 0)
                st.breaker = (enum q_breaker)i;
        }
        st.failures = sqlite3_column_int(s, 1);
        st.open_until = sqlite3_column_int64(s, 2);
        st.exhausted_until = sqlite3_column_int64(s, 3);
        copy_col(s, 4, st.exhausted_reason, sizeof(st.exhausted_reason));
        st.limited_until = sqlite3_column_int64(s, 5);
        st.allowance_used = sqlite3_column_int64(s, 6);
        st.allowance_since = sqlite3_column_int64(s, 7);
        copy_col(s, 8, st.config_hash, sizeof(st.config_hash));
        st.req_tat = sqlite3_column_double(s, 9);
        st.tok_tat = sqlite3_column_double(s, 10);
        st.pace = sqlite3_column_double(s, 11);
        st.pace_down_at = sqlite3_column_int64(s, 12);
        st.pace_up_at = sqlite3_column_int64(s, 13);
        st.learned_rpm = sqlite3_column_int64(s, 14);
        st.learned_tpm = sqlite3_column_int64(s, 15);
        st.doubt = sqlite3_column_int(s, 16) != 0;
        q__usage_parse((const char *)sqlite3_column_text(s, 17), &st.usage);
        q__flight_parse((const char *)sqlite3_column_text(s, 18), &st.flight);
    } else if (rc != SQLITE_DONE) {
        return q__db_err(db, "reading tier state");
    }
    sqlite3_reset(s);
    row_keep(db, tier, &st);
    *out = st;
    return 0;
}

int
q__sqlite_tier_load(q_db *base, const char *tier, struct q_tier_state *out)
{
    return row_read(q__sqlite(base), tier, out);
}

int
q__sqlite_tier_store(q_db *base, const char *tier,
                     const struct q_tier_state *st)
{
    struct q__sqlite *db = q__sqlite(base);
    struct q__tier_row *r = row_find(db, tier);
    int rc;

    /* Inside a transaction the row is written before its COMMIT, once
     * however often it is stored (q__tier_rows_flush). */
    if (r == NULL && db->tx_depth > 0) {
        struct q_tier_state cur;
        if ((rc = row_read(db, tier, &cur)) != 0)
            return rc;
        r = row_find(db, tier);
    }
    if (r != NULL) {
        row_undo_note(db, r);
        row_keep(db, tier, st);
        r->dirty = true;
        return 0;
    }
    /* Not kept (no transaction, a long name, no room): written now; a
     * rollback undoes it in the database. */
    return row_write(db, tier, st);
}

int
q__sqlite_tier_event_add(q_db *base, const char *tier, int64_t at,
                         const char *event)
{
    struct q__sqlite *db = q__sqlite(base);
    sqlite3_stmt *s = q__stmt(db, ST_TIER_EVENT_ADD);

    if (s == NULL)
        return -EIO;
    q__bind_text(s, 1, tier);
    sqlite3_bind_int64(s, 2, at);
    q__bind_text(s, 3, event);
    return q__run_done(db, s, "recording a tier event");
}

/* wake.c: waking idle workers: a second connection that LISTENs on the
 * channels the schema's triggers notify (queue/pg/schema.c). Channels are
 * the database's; a notification's payload names the schema it came
 * from, and only the store's own count. */
#include "queue/pg/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

/* Gives up the LISTEN connection (a later q__pg_wake_fd opens another).
 * One the caller may be polling (polled) is only marked lost: its socket
 * must stay open until the caller has stopped polling it (libuv's rule),
 * so it is closed by the next q__pg_wake_fd or q__pg_close. */
static int
drop_listen(struct q__pg *db, const char *what, bool polled)
{
    q__pg_log(db, what, PQerrorMessage(db->listen));
    if (polled) {
        db->listen_lost = true;
    } else {
        PQfinish(db->listen);
        db->listen = NULL;
    }
    return -EIO;
}

/* A second connection, never in a transaction, so notifications arrive
 * while the first one works. */
int
q__pg_wake_fd(q_db *d)
{
    struct q__pg *db = q__pg(d);
    PGresult *r;
    bool ok;

    if (db->listen != NULL && db->listen_lost) {
        PQfinish(db->listen); /* the caller stopped polling it */
        db->listen = NULL;
        db->listen_lost = false;
    }
    if (db->listen != NULL)
        return PQsocket(db->listen);
    if ((db->listen = q__pg_connect(db, "opening the wake channel")) == NULL)
        return -EIO;
    r = PQexec(db->listen, q__pg_stmt(ST_LISTEN)->text);
    ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    if (ok) {
        free(db->schema);
        db->schema = xstrdup(PQgetvalue(r, 0, 0));
    }
    PQclear(r);
    if (!ok)
        return drop_listen(db, "opening the wake channel", false);
    return PQsocket(db->listen);
}

/* Whether payload (the schema, or "schema:tier") is the store's. */
static bool
ours(const struct q__pg *db, const char *payload)
{
    size_t n = strlen(db->schema);

    return strncmp(payload, db->schema, n) == 0 &&
           (payload[n] == '\0' || payload[n] == ':');
}

int
q__pg_wake_take(q_db *d, unsigned *events)
{
    struct q__pg *db = q__pg(d);
    unsigned got = 0;
    PGnotify *n;

    if (db->listen == NULL || db->listen_lost)
        return -EIO;
    if (!PQconsumeInput(db->listen) || PQstatus(db->listen) != CONNECTION_OK)
        return drop_listen(db, "wake channel lost", true);
    while ((n = PQnotifies(db->listen)) != NULL) {
        if (!ours(db, n->extra))
            ; /* another schema's */
        else if (strcmp(n->relname, "stepq_jobs") == 0)
            got |= Q_WAKE_JOBS;
        else if (strcmp(n->relname, "stepq_tiers") == 0)
            got |= Q_WAKE_TIERS;
        PQfreemem(n);
    }
    *events |= got;
    return 0;
}

/* wake.c: waking idle workers: a second connection that LISTENs on the
 * channels the schema's triggers notify (queue/pg/schema.c). */
#include "queue/pg/internal.h"

#include <errno.h>
#include <string.h>

/* A second connection, never in a transaction, so notifications arrive
 * while the first one works. */
int
q__pg_wake_fd(q_db *d)
{
    struct q__pg *db = q__pg(d);
    PGresult *r;

    if (db->listen != NULL)
        return PQsocket(db->listen);
    if ((db->listen = q__pg_connect(db, "opening the wake channel")) == NULL)
        return -EIO;
    r = PQexec(db->listen, "LISTEN stepq_jobs; LISTEN stepq_tiers");
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        q__pg_log(db, "opening the wake channel", PQerrorMessage(db->listen));
        PQclear(r);
        PQfinish(db->listen);
        db->listen = NULL;
        return -EIO;
    }
    PQclear(r);
    return PQsocket(db->listen);
}

int
q__pg_wake_take(q_db *d, unsigned *events)
{
    struct q__pg *db = q__pg(d);
    unsigned got = 0;
    PGnotify *n;

    if (db->listen == NULL)
        return -EIO;
    if (!PQconsumeInput(db->listen) || PQstatus(db->listen) != CONNECTION_OK) {
        q__pg_log(db, "wake channel lost", PQerrorMessage(db->listen));
        PQfinish(db->listen);
        db->listen = NULL;
        return -EIO;
    }
    while ((n = PQnotifies(db->listen)) != NULL) {
        if (strcmp(n->relname, "stepq_jobs") == 0)
            got |= Q_WAKE_JOBS;
        else if (strcmp(n->relname, "stepq_tiers") == 0)
            got |= Q_WAKE_TIERS;
        PQfreemem(n);
    }
    *events |= got;
    return 0;
}

/* pg_absent.c: TEMPORARY stand-in for the PostgreSQL backend (queue/pg/),
 * which is written on another branch, so that this branch links. Deleted
 * when the backend is merged. */
#include "queue/internal.h"

#include <errno.h>

#include "common/log.h"

int
q__pg_open(const char *conninfo, const struct q_open_opts *opts, bool create,
           q_db **out)
{
    char where[512];

    (void)opts;
    (void)create;
    (void)out;
    log_info("%s: PostgreSQL backend not built yet",
             q_location_redact(conninfo, where, sizeof(where)));
    return -EPROTONOSUPPORT;
}

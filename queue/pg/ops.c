/* ops.c: the PostgreSQL backend's table of the contract's calls, which
 * queue/queue.c calls through for a store q__pg_open opened. */
#include "queue/pg/internal.h"

#define Q__PG_ENTRY(ret, name, params) .name = q__pg_##name,
const struct q__ops q__pg_ops = {
    Q__OPS(Q__PG_ENTRY, Q__OP_NONE).clock_sync = q__pg_clock_sync,
    .wake_fd = q__pg_wake_fd,
    .wake_take = q__pg_wake_take,
};

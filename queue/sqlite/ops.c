/* ops.c: the SQLite backend's table of functions (struct q__ops), what
 * queue.c calls through for a store q__sqlite_open opened. Entries left
 * NULL are not needed for a file on this machine: its clock is the host's
 * and workers find work by its due time, not by a wake-up channel. */
#include "queue/sqlite/internal.h"

#define Q__SQLITE_ENTRY(ret, name, params) .name = q__sqlite_##name,
const struct q__ops q__sqlite_ops = {
    Q__OPS(Q__SQLITE_ENTRY, Q__OP_NONE).tx_durable = q__sqlite_tx_durable,
    .backup = q__sqlite_backup,
};

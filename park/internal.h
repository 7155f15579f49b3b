/* internal.h: declarations private to park/ (not a public interface). */
#ifndef STEPQ_PARK_INTERNAL_H
#define STEPQ_PARK_INTERNAL_H

#include "queue/queue.h"

/* park_step opens its savepoint through this pointer (q_tx_begin unless a
 * test replaces it, as beanstalkd's falloc), so tests can fail it. */
extern int (*park__tx_begin)(q_db *db);

#endif

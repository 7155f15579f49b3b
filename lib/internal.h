/* internal.h: what lib/'s files share (stepq.c, job.c), and nothing
 * outside lib/ includes. */
#ifndef STEPQ_LIB_INTERNAL_H
#define STEPQ_LIB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "include/stepq.h"
#include "queue/queue.h"

struct stepq {
    q_db *db;
};

/* lib__begin starts a call of the API: log lines of the rooms below go to
 * the call's detail (never to the host's standard error), and err (may be
 * NULL with errlen 0) is emptied. */
void lib__begin(char *err, size_t errlen);

/* lib__fail ends a call that returns rc: for a failure other than
 * -EINVAL (whose err the check wrote), err gets stepq_strerror(rc) when
 * nothing more precise was written, then the detail logged where the
 * failure was detected, in parentheses. Returns rc. */
int lib__fail(int rc, char *err, size_t errlen);

/* lib__now is the store's time: this host's clock plus the store's
 * offset. */
int64_t lib__now(const stepq *q);

#endif

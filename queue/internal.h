/* internal.h: what the backend-neutral part of queue/ (queue.c) and the
 * backends (queue/sqlite/) share. Not a public interface. */
#ifndef STEPQ_QUEUE_INTERNAL_H
#define STEPQ_QUEUE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "queue/queue.h"

/* q__sqlite_open opens the SQLite database at path: create true makes the
 * file (mode 0600) and migrates it to version target (0: the latest);
 * create false opens only an existing database at this build's version.
 * The errors of q_open and q_open_existing. Caller owns *out. */
int q__sqlite_open(const char *path, const struct q_open_opts *opts,
                   bool create, int target, q_db **out);

/* q__body_keep is how many bytes of body (len bytes) the ledger keeps when
 * it keeps at most max: cut back to a UTF-8 character boundary. */
size_t q__body_keep(const char *body, size_t len, int64_t max);

/* Releasing the elements of result arrays: q__array_free calls clean on
 * each of the n elements (elem bytes each) of v, then frees v; NULL is a
 * no-op. The cleaners free one element's owned strings (the public
 * q_*_free functions are these over their arrays). */
typedef void (*q__clean_fn)(void *elem);
void q__array_free(void *v, size_t n, size_t elem, q__clean_fn clean);
void q__job_clean(void *e);
void q__step_clean(void *e);
void q__attempt_clean(void *e);
void q__park_clean(void *e);
void q__group_clean(void *e);
void q__brief_clean(void *e);

#endif

/* audit.h: the named operators of `stepq serve` and the audit trail of
 * every write. Part of queue/'s contract (see queue/queue.h for the
 * conventions every call follows). */
#ifndef STEPQ_QUEUE_AUDIT_H
#define STEPQ_QUEUE_AUDIT_H

#include "queue/queue.h"

/* ---- operators and the audit trail ------------------------------------ */

/* A named operator of `stepq serve`: a role and the SHA-256 of its token
 * (64 lowercase hex digits); the token itself is never stored. */
struct q_operator {
    char *name;         /* owned */
    char *role;         /* owned: "viewer", "resolver" or "admin" */
    char *token_sha256; /* owned */
    int64_t created_at;
    int64_t rotated_at; /* the token's last change (created_at at first) */
};

/* q_operator_add stores operator op (strings borrowed) with created_at and
 * rotated_at now. Returns 0, -EEXIST when the name is taken (nothing
 * changed), -EINVAL for an empty name, role or hash, or the storage
 * error. */
STEPQ_MUST_CHECK int q_operator_add(q_db *db, const char *name,
                                    const char *role, const char *token_sha256,
                                    int64_t now);
/* q_operator_rotate replaces operator name's token hash (rotated_at now):
 * the old token matches nothing from this commit on. Returns 0, -ENOENT
 * for an unknown name, -EINVAL as q_operator_add, or the storage error. */
STEPQ_MUST_CHECK int q_operator_rotate(q_db *db, const char *name,
                                       const char *token_sha256, int64_t now);
/* q_operator_remove deletes operator name. Returns 0, -ENOENT, or the
 * storage error. */
STEPQ_MUST_CHECK int q_operator_remove(q_db *db, const char *name);
/* q_operators_list reads every operator, by name. Caller owns *out (NULL
 * when *n is 0); free with q_operators_free (NULL is a no-op). */
STEPQ_MUST_CHECK int q_operators_list(q_db *db, struct q_operator **out,
                                      size_t *n);
void q_operators_free(struct q_operator *o, size_t n);

/* One row of the audit trail as written: a write made through `stepq
 * serve` or the CLI. Strings are borrowed. */
struct q_audit_new {
    int64_t at;         /* ms */
    const char *who;    /* operator name, or the OS user on the CLI */
    const char *action; /* "enqueue", "park.resolve", "job.cancel", ... */
    int64_t job_id;     /* 0: none */
    int64_t park_id;    /* 0: none */
    const char *source; /* the client's address, or "cli" */
    const char *detail; /* a JSON object as text */
};

/* One row of the audit trail as listed; strings owned (q_audits_free). */
struct q_audit {
    int64_t id;     /* set when listed */
    int64_t at;     /* ms */
    char *who;      /* operator name, or the OS user on the CLI */
    char *action;   /* "enqueue", "park.resolve", "job.cancel", ... */
    int64_t job_id; /* 0: none */
    int64_t park_id;
    char *source; /* the client's address, or "cli" */
    char *detail; /* a JSON object as text */
};

/* Which audit rows q_audit_list reads: at or after since; job_id or
 * park_id (0: any) narrow it to one job's or one item's. */
struct q_audit_filter {
    int64_t since;
    int64_t job_id;
    int64_t park_id;
};

/* q_audit_add appends a. Returns 0,
 * -EINVAL for an empty who, action or source, or a NULL detail, or the
 * storage error. Inside a q_tx_* transaction it joins it, so the row
 * goes with the write it records. */
STEPQ_MUST_CHECK int q_audit_add(q_db *db, const struct q_audit_new *a);
/* q_audit_list reads the rows f matches, oldest first (by id). Caller owns
 * *out (q_audits_free; NULL when *n is 0). */
STEPQ_MUST_CHECK int q_audit_list(q_db *db, const struct q_audit_filter *f,
                                  struct q_audit **out, size_t *n);
void q_audits_free(struct q_audit *a, size_t n);

#endif

/* qfix.c: the queue contract fixture (see qfix.h). */
#include "tests/support/qfix.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/xalloc.h"
#include "queue/report.h"
#include "queue/tiers.h"
#include "tests/support/pgfix.h"
#include "tests/support/support.h"

char *qfix_dir;
char *qfix_location;

/* What the queue stores as the job's text: opaque to it. */
static const char job_text[] =
    "{\"name\":\"j\",\"steps\":[{\"name\":\"a\",\"request\":{}}]}";

void
qfix_setup(void)
{
    qfix_dir = tmpdir_new();
    qfix_location = pgfix_db_new(qfix_dir, "q.db", true);
}

void
qfix_teardown(void)
{
    free(qfix_location);
    qfix_location = NULL;
    tmpdir_remove(qfix_dir);
    qfix_dir = NULL;
}

q_db *
qfix_open(const struct q_open_opts *opts)
{
    q_db *db = NULL;

    ck_assert_int_eq(q_open(qfix_location, opts, &db), 0);
    return db;
}

struct q_job_new
qfix_job(const char *name, const char *key, int prio)
{
    struct q_job_new j = {
        .name = name,
        .key = key,
        .priority = prio,
        .deadline_s = 3600,
        .text = job_text,
    };
    return j;
}

int64_t
qfix_add(q_db *db, const char *name, const char *key, int prio, int64_t now)
{
    struct q_job_new j = qfix_job(name, key, prio);
    struct q_enqueue_result r;

    ck_assert_int_eq(q_enqueue(db, &j, 1, NULL, now, &r), 0);
    return r.id;
}

enum q_job_state
qfix_state(q_db *db, int64_t id)
{
    struct q_job j = {0};
    enum q_job_state st;

    ck_assert_int_eq(q_job_get(db, id, &j), 0);
    st = j.state;
    q_job_cleanup(&j);
    return st;
}

int64_t
qfix_count(q_db *db, enum q_job_state st)
{
    int64_t counts[Q_JOB_NSTATES], park;

    ck_assert_int_eq(q_counts(db, counts, &park), 0);
    return counts[st];
}

void
qfix_claim_one(q_db *db, int64_t id, const char *worker, int64_t now,
               int64_t lease_ms)
{
    struct q_job *got = NULL;
    size_t n = 0;

    ck_assert_int_eq(q_claim(db, worker, now, lease_ms, 1, &got, &n), 0);
    ck_assert_int_eq(got[0].id, id);
    q_jobs_free(got, n);
}

void
qfix_wait_children(const pid_t *pids, int n)
{
    for (int i = 0; i < n; i++) {
        int st;
        ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "child %d failed (status %d)", i, st);
    }
}

void
qfix_same_flight(const struct q_tier_flight *a, const struct q_tier_flight *b)
{
    ck_assert_int_eq(a->n, b->n);
    ck_assert_int_eq(a->probe_until, b->probe_until);
    for (int i = 0; i < a->n; i++) {
        ck_assert_int_eq(a->at[i], b->at[i]);
        ck_assert_uint_eq(a->count[i], b->count[i]);
    }
}

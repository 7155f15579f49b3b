/* test_totals.c: the ledger's running totals of ENDED attempts (schema 18,
 * attempt_totals), which q_stats_attempts, q_stats_latency and /metrics
 * read. After a mix of attempts (finished ok and priced, failed outcomes,
 * an http step's, in flight, cancelled, retried, in doubt and settled),
 * they equal what the ledger's own GROUP BY over its ended attempts says,
 * compared as text with the queries run on the store; an attempt in
 * flight is not in them, and one that ends adds its share once; a prune
 * removes attempts and leaves them as they were; the migration from
 * version 17 fills them from the ended attempts there; a
 * copy carries them (the source's count pruned attempts the target never
 * sees); and concurrent writers lose nothing (on PostgreSQL, each
 * group spread over rows by attempt id). Runs on SQLite and
 * (test_totals_pg) PostgreSQL.
 */
#include "tests/support/support.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "queue/admin.h"
#include "queue/internal.h"
#include "queue/park.h"
#include "queue/report.h"
#include "queue/sqlite/internal.h"
#include "tests/support/pgfix.h"
#include "tests/support/qfix.h"

/* What the ledger itself says of its ended attempts, as the totals count
 * them. */
#define LEDGER_GROUPS                                                          \
    "SELECT tier, outcome, reason, decision, count(*),"                        \
    " sum(coalesce(tokens, est_tokens)), count(cost_nusd),"                    \
    " coalesce(sum(cost_nusd), 0) FROM attempts WHERE outcome IS NOT NULL"     \
    " GROUP BY tier, outcome, reason, decision"

/* Appends printf-style text (a line's worth) to b. */
__attribute__((format(printf, 2, 3))) static void
add(struct xbuf *b, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    ck_assert(n >= 0 && (size_t)n < sizeof(line));
    xbuf_put(b, line, (size_t)n);
}

static int
cmp_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts the lines of text (owned; replaced) so that stores that list
 * rows in different orders compare equal. */
static char *
sorted(char *text)
{
    char *lines[512], *save = NULL, *out = xcalloc(1, strlen(text) + 2);
    size_t n = 0, len = 0;

    for (char *l = strtok_r(text, "\n", &save); l != NULL && n < 512;
         l = strtok_r(NULL, "\n", &save))
        lines[n++] = l;
    qsort(lines, n, sizeof(lines[0]), cmp_line);
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(out + len, "%s\n", lines[i]);
    free(text);
    return out;
}

/* Runs sql on the store at loc: its rows as lines of values joined by
 * '|', NULL as nothing (what psql -A -t prints), sorted. */
static char *
query(const char *loc, const char *sql)
{
    struct xbuf b = {0};
    sqlite3 *h = NULL;
    sqlite3_stmt *s = NULL;
    char *out = NULL;

    if (strncmp(loc, "sqlite:", 7) != 0) {
        ck_assert_int_eq(pgfix_query(loc, sql, &out), 0);
        return sorted(out);
    }
    ck_assert_int_eq(sqlite3_open(loc + 7, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK);
    while (sqlite3_step(s) == SQLITE_ROW) {
        for (int c = 0; c < sqlite3_column_count(s); c++) {
            const unsigned char *v = sqlite3_column_text(s, c);
            add(&b, "%s%s", c ? "|" : "", v ? (const char *)v : "");
        }
        add(&b, "\n");
    }
    sqlite3_finalize(s);
    sqlite3_close(h);
    return sorted(b.p ? b.p : xstrdup(""));
}

static const char *
str(const char *s)
{
    return s ? s : "";
}

/* q_stats_attempts as LEDGER_GROUPS prints, sorted. */
static char *
groups(q_db *db)
{
    struct q_attempt_group *g = NULL;
    struct xbuf b = {0};
    size_t n = 0;

    ck_assert_int_eq(q_stats_attempts(db, &g, &n), 0);
    for (size_t i = 0; i < n; i++)
        add(&b, "%s|%s|%s|%s|%lld|%lld|%lld|%lld\n", str(g[i].tier),
            str(g[i].outcome), str(g[i].reason), str(g[i].decision),
            (long long)g[i].count, (long long)g[i].tokens,
            (long long)g[i].priced, (long long)g[i].cost_nusd);
    q_attempt_groups_free(g, n);
    return sorted(b.p ? b.p : xstrdup(""));
}

/* q_stats_latency as Q__LATENCY_SELECT prints, sorted. */
static char *
latency(q_db *db)
{
    struct q_latency_group *g = NULL;
    struct xbuf b = {0};
    size_t n = 0;

    ck_assert_int_eq(q_stats_latency(db, &g, &n), 0);
    for (size_t i = 0; i < n; i++) {
        add(&b, "%s|%lld|%lld", g[i].tier, (long long)g[i].count,
            (long long)g[i].sum_ms);
        for (int k = 0; k < Q_LATENCY_NBUCKETS; k++)
            add(&b, "|%lld", (long long)g[i].le[k]);
        add(&b, "\n");
    }
    q_latency_groups_free(g, n);
    return sorted(b.p ? b.p : xstrdup(""));
}

/* The totals of db (at loc) are the ledger's, groups and latency. */
static void
assert_totals_are_the_ledger(q_db *db, const char *loc)
{
    char *want = query(loc, LEDGER_GROUPS), *got = groups(db);

    ck_assert_str_eq(got, want);
    free(want);
    free(got);
    want = query(loc, Q__LATENCY_SELECT);
    got = latency(db);
    ck_assert_str_eq(got, want);
    free(want);
    free(got);
}

/* ---- a night's mix of attempts ---------------------------------------- */

static int64_t
begin(q_db *db, int64_t job, const char *worker, const char *tier, int64_t est)
{
    struct q_attempt_start s = {.job_id = job,
                                .worker = worker,
                                .tier = tier,
                                .request_sha256 = "x",
                                .est_tokens = est,
                                .started_at = T0};
    int64_t id = 0;
    int num = 0;

    ck_assert_int_eq(q_attempt_begin(db, &s, &id, &num), 0);
    return id;
}

static void
finish(q_db *db, int64_t id, const char *outcome, const char *reason,
       const char *decision, int64_t latency_ms, int64_t tokens, bool priced)
{
    struct q_attempt_result r = {.status = 200,
                                 .outcome = outcome,
                                 .reason = reason,
                                 .decision = decision,
                                 .latency_ms = latency_ms,
                                 .tokens = tokens,
                                 .finished_at = T0 + 10,
                                 .priced = priced,
                                 .cost_nusd = priced ? tokens * 1000 : 0};

    ck_assert_int_eq(q_attempt_finish(db, id, &r), 0);
}

/* A job claimed by worker w, returning its id. */
static int64_t
claimed(q_db *db, const char *name, const char *w)
{
    int64_t id = qfix_add(db, name, NULL, 0, T0);

    qfix_claim_one(db, id, w, T0, 60000);
    return id;
}

/* Fills db with the mix; returns how many of the 8 attempts it recorded
 * ended (all but d's). Jobs a, b, c and f end finished (prunable); d
 * stays in flight. */
static int
fill(q_db *db)
{
    int64_t a = claimed(db, "a", "w"), b, c, d, e, f, id;
    struct q_retry_new rn = {.expect = Q_JOB_FAILED, .by = "ana"};

    finish(db, begin(db, a, "w", "free", 30), "server_error", "http_500",
           "retry", 700, 0, true);
    finish(db, begin(db, a, "w", "free", 30), "ok", NULL, "commit", 90, 41,
           true);
    finish(db, begin(db, a, "w", "local", 30), "soft_throttle", "rpm", "retry",
           130000, 7, false);
    ck_assert_int_eq(q_complete(db, a, "w", T0 + 20), 0);
    b = claimed(db, "b", "w");
    finish(db, begin(db, b, "w", NULL, 5), "ok", NULL, "commit", 60, 5, false);
    ck_assert_int_eq(q_complete(db, b, "w", T0 + 20), 0);
    c = claimed(db, "c", "w"); /* cancelled with its attempt in flight */
    (void)begin(db, c, "w", "free", 12);
    ck_assert_int_eq(q_cancel(db, c, T0 + 30), 0);
    f = claimed(db, "f", "w"); /* its worker died; another settles it */
    id = begin(db, f, "w", "free", 13);
    ck_assert_int_eq(q_reclaim(db, T0 + 60001, NULL), 0);
    qfix_claim_one(db, f, "w2", T0 + 60002, 60000);
    finish(db, id, "unknown", "in_doubt", "park", 2600, 13, true);
    ck_assert_int_eq(q_complete(db, f, "w2", T0 + 60003), 0);
    d = claimed(db, "d", "w"); /* in flight, or in doubt after a crash */
    (void)begin(db, d, "w", "free", 9);
    e = claimed(db, "e", "w"); /* failed with an attempt open, retried */
    (void)begin(db, e, "w", "local", 11);
    ck_assert_int_eq(q_fail(db, e, "w", "gave up", T0 + 40), 0);
    rn.job_id = e;
    rn.now = rn.run_at = T0 + 50;
    rn.deadline_at = T0 + 3600000;
    ck_assert_int_eq(q_job_retry(db, &rn, &id), 0);
    return 7;
}

/* The attempts count of all groups. */
static int64_t
total_attempts(q_db *db)
{
    struct q_attempt_group *g = NULL;
    size_t n = 0;
    int64_t sum = 0;

    ck_assert_int_eq(q_stats_attempts(db, &g, &n), 0);
    for (size_t i = 0; i < n; i++)
        sum += g[i].count;
    q_attempt_groups_free(g, n);
    return sum;
}

START_TEST(test_totals_are_the_ledgers_aggregate)
{
    q_db *db = qfix_open(NULL);
    char *lat;

    ck_assert_int_eq(total_attempts(db), 0);
    ck_assert_int_eq(fill(db), 7);
    assert_totals_are_the_ledger(db, qfix_location);
    ck_assert_int_eq(total_attempts(db), 7);
    /* not two empty answers: free's 3 attempts with a latency (one past
     * 2.5 s), local's one past the last bucket */
    lat = latency(db);
    ck_assert_str_eq(lat, "free|3|3390|1|1|1|2|2|3|3|3|3|3\n"
                          "local|1|130000|0|0|0|0|0|0|0|0|0|0\n");
    free(lat);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* An attempt in flight has no share (no row at all, not one taken away
 * later): when it ends its share is added once; a later change to an
 * ended attempt (none of stepq's writers makes one: by hand here) moves
 * its share from the old group to the new. */
START_TEST(test_an_attempt_counts_once_it_ends)
{
    q_db *db = qfix_open(NULL);
    int64_t id = begin(db, claimed(db, "g", "w"), "w", "free", 9);
    char *rows = query(qfix_location, "SELECT count(*) FROM attempt_totals");

    ck_assert_str_eq(rows, "0\n");
    free(rows);
    ck_assert_int_eq(total_attempts(db), 0);
    finish(db, id, "ok", NULL, "commit", 90, 41, true);
    rows = query(qfix_location, "SELECT count(*), sum(attempts), sum(tokens),"
                                " sum(lat_sum_ms) FROM attempt_totals");
    ck_assert_str_eq(rows, "1|1|41|90\n");
    free(rows);
    free(query(qfix_location, "UPDATE attempts SET outcome = 'timeout',"
                              " tokens = 50, latency_ms = 3000"));
    assert_totals_are_the_ledger(db, qfix_location);
    ck_assert_int_eq(total_attempts(db), 1);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* Everything finished goes; the totals stay as they were, and new
 * attempts count on from them. */
START_TEST(test_prune_leaves_the_totals)
{
    q_db *db = qfix_open(NULL);
    struct q_prune p = {.jobs_before = T0 + 3600000};
    struct q_prune_counts c = {0};
    char *g0, *l0, *g1, *l1, *ledger;

    (void)fill(db);
    g0 = groups(db);
    l0 = latency(db);
    ck_assert_int_eq(q_prune(db, &p, &c), 0);
    ck_assert_int_eq(c.jobs, 4);
    ck_assert_int_eq(c.attempts, 6);
    ck_assert_str_eq(g1 = groups(db), g0);
    ck_assert_str_eq(l1 = latency(db), l0);
    ledger = query(qfix_location, "SELECT count(*) FROM attempts");
    ck_assert_str_eq(ledger, "2\n");
    finish(db, begin(db, claimed(db, "g", "w"), "w", "free", 1), "ok", NULL,
           "commit", 90, 41, true);
    ck_assert_int_eq(total_attempts(db), 8);
    free(g0);
    free(l0);
    free(g1);
    free(l1);
    free(ledger);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A store at version 17 with attempts: the migration to 18 fills the
 * totals from them, and the triggers keep them after. */
START_TEST(test_migration_backfills_from_the_ledger)
{
    q_db *db = NULL;

    if (pgfix_backend_is_pg()) {
        db = qfix_open(NULL);
        (void)fill(db);
        ck_assert_int_eq(q_close(db), 0);
        ck_assert_int_eq(
            pgfix_query(qfix_location,
                        "DROP FUNCTION stepq_attempt_totals() CASCADE;"
                        " DROP TABLE attempt_totals;"
                        " UPDATE stepq_schema SET version = 17",
                        NULL),
            0);
    } else {
        ck_assert_int_eq(q__open_version(qfix_location + 7, 17, &db), 0);
        (void)fill(db);
        ck_assert_int_eq(q_close(db), 0);
    }
    ck_assert_int_eq(q_open_existing(qfix_location, NULL, &db), -ESTALE);
    db = qfix_open(NULL);
    assert_totals_are_the_ledger(db, qfix_location);
    ck_assert_int_eq(total_attempts(db), 7);
    finish(db, begin(db, claimed(db, "g", "w"), "w", "free", 1), "ok", NULL,
           "commit", 90, 41, true);
    assert_totals_are_the_ledger(db, qfix_location);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

/* A pruned store copied (to PostgreSQL in test_totals_pg, and back): the
 * target's totals are the source's, not those of the attempts it got. */
START_TEST(test_copy_carries_the_totals)
{
    char *loc_b = pgfix_db_new(qfix_dir, "b.db", true), *g0, *l0, *g, *l;
    char loc_c[1024];
    q_db *a = qfix_open(NULL), *b = NULL, *c = NULL;
    struct q_prune p = {.jobs_before = T0 + 3600000};

    snprintf(loc_c, sizeof(loc_c), "sqlite:%s/c.db", qfix_dir);
    (void)fill(a);
    ck_assert_int_eq(q_prune(a, &p, NULL), 0);
    g0 = groups(a);
    l0 = latency(a);
    ck_assert_int_eq(q_open(loc_b, NULL, &b), 0);
    ck_assert_int_eq(q_copy(a, b, false, NULL), 0);
    ck_assert_str_eq(g = groups(b), g0);
    free(g);
    ck_assert_str_eq(l = latency(b), l0);
    free(l);
    ck_assert_int_eq(q_open(loc_c, NULL, &c), 0);
    ck_assert_int_eq(q_copy(b, c, false, NULL), 0);
    ck_assert_str_eq(g = groups(c), g0);
    free(g);
    ck_assert_int_eq(total_attempts(c), 7);
    free(g0);
    free(l0);
    free(loc_b);
    ck_assert_int_eq(q_close(c), 0);
    ck_assert_int_eq(q_close(b), 0);
    ck_assert_int_eq(q_close(a), 0);
}
END_TEST

/* One writer of the concurrent test: 25 jobs claimed (whichever come),
 * each with an attempt recorded in one transaction and, in the next,
 * finished as another is recorded. Inside a transaction an attempt's id
 * is written at the commit: id and num live here until then. */
static void
writer(int k)
{
    char w[8];
    q_db *db = qfix_open(NULL);
    struct q_attempt_start st = {.worker = w, .request_sha256 = "x"};
    int64_t id = 0, next = 0;
    int num = 0;

    snprintf(w, sizeof(w), "w%d", k);
    for (int i = 0; i < 25; i++) {
        struct q_job *j = NULL;
        size_t n = 0;
        ck_assert_int_eq(q_claim(db, w, T0, 60000, 1, &j, &n), 0);
        ck_assert_uint_eq(n, 1);
        st.job_id = j[0].id;
        st.tier = k % 2 ? "free" : "local";
        ck_assert_int_eq(q_tx_begin(db), 0);
        ck_assert_int_eq(q_attempt_begin(db, &st, &id, &num), 0);
        ck_assert_int_eq(q_tx_commit(db), 0);
        ck_assert_int_gt(id, 0);
        ck_assert_int_eq(q_tx_begin(db), 0);
        finish(db, id, i % 3 ? "ok" : "timeout", NULL, "commit", 20 * i, i,
               true);
        st.tier = "free";
        ck_assert_int_eq(q_attempt_begin(db, &st, &next, &num), 0);
        ck_assert_int_eq(q_tx_commit(db), 0);
        q_jobs_free(j, n);
    }
    ck_assert_int_eq(q_close(db), 0);
}

/* Four processes, each its own connection, record and finish attempts in
 * transactions at once: the totals are the ledger's, nothing lost. On
 * PostgreSQL a group's shares are spread over more than one row (of 16, by
 * attempt id). */
START_TEST(test_concurrent_writers_lose_nothing)
{
    pid_t pids[4];
    q_db *db = qfix_open(NULL);
    char *shards;

    for (int i = 0; i < 100; i++)
        (void)qfix_add(db, "n", NULL, 0, T0);
    ck_assert_int_eq(q_close(db), 0);
    for (int k = 0; k < 4; k++) {
        if ((pids[k] = fork()) == 0) {
            writer(k);
            _exit(0);
        }
    }
    qfix_wait_children(pids, 4);
    db = qfix_open(NULL);
    assert_totals_are_the_ledger(db, qfix_location);
    ck_assert_int_eq(total_attempts(db), 100); /* the 100 in flight: 0 */
    if (pgfix_backend_is_pg()) {
        shards = query(qfix_location,
                       "SELECT count(DISTINCT shard) > 1 FROM attempt_totals");
        ck_assert_str_eq(shards, "t\n");
        free(shards);
    }
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("totals");
    TCase *tc = tcase_create("totals");

    tcase_add_checked_fixture(tc, qfix_setup, qfix_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_totals_are_the_ledgers_aggregate);
    tcase_add_test(tc, test_an_attempt_counts_once_it_ends);
    tcase_add_test(tc, test_prune_leaves_the_totals);
    tcase_add_test(tc, test_migration_backfills_from_the_ledger);
    tcase_add_test(tc, test_copy_carries_the_totals);
    tcase_add_test(tc, test_concurrent_writers_lose_nothing);
    suite_add_tcase(s, tc);
    return s;
}

/* test_lib.c: libstepq's bulk enqueue (stepq_enqueue_many), as a program
 * links it: every job of an array or of JSON lines in one transaction,
 * ids in input order, keys deduplicated, and a bad job anywhere, after
 * many batches went in, leaving nothing written. On SQLite, and on
 * PostgreSQL as test_lib_pg. */
#include "tests/support/support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/xalloc.h"
#include "include/stepq.h"
#include "tests/support/pgfix.h"

/* The store of the test: a file in its folder, or a schema of the run's
 * PostgreSQL cluster (the suite's _pg run). */
static char *loc;

/* count jobs as an array (keys b0, b1, ...), job number bad (0-based;
 * -1: none) one with no steps. Caller frees. */
static char *
array_of(int count, int bad)
{
    size_t cap = (size_t)count * 160 + 4, len = 1;
    char *t = xmalloc(cap);

    t[0] = '[';
    for (int i = 0; i < count; i++)
        len += (size_t)snprintf(
            t + len, cap - len,
            i == bad ? "%s{\"name\":\"n\",\"key\":\"b%d\"}"
                     : "%s{\"name\":\"n\",\"key\":\"b%d\",\"steps\":[{\"name\":"
                       "\"a\",\"request\":{\"messages\":[{\"role\":\"user\"}]}}"
                       "]}",
            i ? ",\n" : "", i);
    strcpy(t + len, "]");
    return t;
}

static stepq *
open_fresh(void)
{
    stepq *q = NULL;
    char err[256];

    loc = pgfix_db_new(NULL, "q.db", false);
    fixture_init(loc);
    ck_assert_int_eq(stepq_open(loc, &q, err, sizeof(err)), 0);
    return q;
}

START_TEST(test_many_bad_job_late_writes_nothing)
{
    char *t = array_of(5000, 4998), err[256], state[32];
    stepq *q = open_fresh();
    size_t n = 12345;

    ck_assert_int_eq(
        stepq_enqueue_many(q, t, NULL, NULL, 0, &n, err, sizeof(err)), -EINVAL);
    ck_assert_str_eq(err, "job 4998: steps: missing");
    ck_assert_uint_eq(n, 12345);
    ck_assert_int_eq(stepq_job_state(q, 1, state, sizeof(state)), -ENOENT);
    stepq_close(q);
    ck_assert_int_eq(run_job_count(loc), 0);
    free(loc);
    free(t);
}
END_TEST

START_TEST(test_many_ids_in_order_and_deduplicated)
{
    char *t = array_of(4500, -1), err[256];
    int64_t *ids = xcalloc(4500, sizeof(*ids));
    bool *dup = xcalloc(4500, sizeof(*dup));
    stepq *q = open_fresh();
    size_t n = 0;

    /* The second time every key exists, and cap takes the first 1200. */
    for (int round = 0; round < 2; round++) {
        size_t cap = round ? 1200 : 4500;
        ck_assert_int_eq(
            stepq_enqueue_many(q, t, ids, dup, cap, &n, err, sizeof(err)), 0);
        ck_assert_uint_eq(n, 4500);
        ck_assert_int_eq(ids[0], 1);
        ck_assert_int_eq(ids[4499] - ids[0], 4499);
        ck_assert(dup[1100] == (round == 1));
        ck_assert(!dup[4100]);
    }
    stepq_close(q);
    ck_assert_int_eq(run_job_count(loc), 4500);
    free(loc);
    free(ids);
    free(dup);
    free(t);
}
END_TEST

/* Two handles on one store, as two threads or processes would hold: a
 * duplicate on one, a job from the other, then the first writes again and
 * sees the other's job (its read of the existing key left no snapshot
 * behind to make every later write fail at once with -EAGAIN). */
START_TEST(test_handle_writes_after_a_duplicate)
{
    static const char job[] = "{\"name\":\"n\",\"steps\":[{\"name\":\"a\","
                              "\"request\":{\"messages\":[{\"role\":"
                              "\"user\"}]}}]}";
    stepq *a = open_fresh(), *b = NULL;
    char err[256] = "", state[32];
    int64_t id = 0;
    bool dup = false;

    ck_assert_int_eq(stepq_open(loc, &b, err, sizeof(err)), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(
            stepq_enqueue(a, job, "d", &id, &dup, err, sizeof(err)), 0);
    ck_assert(dup);
    ck_assert_int_eq(stepq_enqueue(b, job, "e", &id, &dup, err, sizeof(err)),
                     0);
    ck_assert_int_eq(stepq_job_state(a, id, state, sizeof(state)), 0);
    ck_assert_str_eq(state, "queued");
    ck_assert_msg(stepq_enqueue(a, job, "f", &id, &dup, err, sizeof(err)) == 0,
                  "%s", err);
    ck_assert(!dup);
    /* a key given apart from the job follows a job file's rules */
    ck_assert_int_eq(
        stepq_enqueue(a, job, "k\xff", &id, &dup, err, sizeof(err)), -EINVAL);
    ck_assert_str_eq(err, "key: not valid UTF-8");
    stepq_close(b);
    stepq_close(a);
    ck_assert_int_eq(run_job_count(loc), 3);
    free(loc);
}
END_TEST

/* The longest key a job may have (1,024 bytes) is stored and deduplicated
 * on every store, even one that does not compress (PostgreSQL's index
 * takes about 2,700 bytes a row); a longer one is bad input, on every
 * store alike. */
START_TEST(test_longest_key_deduplicated)
{
    static const char job[] = "{\"name\":\"n\",\"steps\":[{\"name\":\"a\","
                              "\"request\":{\"messages\":[{\"role\":"
                              "\"user\"}]}}]}";
    char key[1026], err[256] = "";
    stepq *q = open_fresh();
    uint32_t x = 12345;
    int64_t id = 0;
    bool dup = true;

    for (size_t i = 0; i < sizeof(key) - 1; i++) {
        x = x * 1103515245u + 12345u; /* letters and digits at random */
        key[i] =
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                [(x >> 16) % 62];
    }
    key[1024] = '\0';
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(stepq_enqueue(q, job, key, &id, &dup, err, sizeof(err)) ==
                          0,
                      "%s", err);
        ck_assert(dup == (i == 1));
        ck_assert_int_eq(id, 1);
    }
    key[1024] = 'z';
    key[1025] = '\0';
    ck_assert_int_eq(stepq_enqueue(q, job, key, &id, &dup, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, "key: longer than 1024 bytes");
    stepq_close(q);
    ck_assert_int_eq(run_job_count(loc), 1);
    free(loc);
}
END_TEST

/* stepq_enqueue_input: the input is stored with the job and what its
 * templates read; a template naming what the input lacks is refused, and
 * so is an input that is not JSON, with nothing written. */
START_TEST(test_enqueue_input)
{
    static const char job[] =
        "{\"name\":\"n\",\"steps\":[{\"name\":\"a\",\"request\":{"
        "\"messages\":[{\"role\":\"user\",\"content\":\"{{input.t}}\"}]}}]}";
    stepq *q = open_fresh();
    struct run_result r;
    int64_t id = 0;
    bool dup = true;
    char err[256];
    cJSON *shown;

    ck_assert_int_eq(stepq_enqueue_input(q, job, "{\"u\":1}", NULL, &id, &dup,
                                         err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, "steps[0].request.messages[0].content: {{input.t}}: "
                          "no t in the input");
    ck_assert_int_eq(stepq_enqueue_input(q, job, "{\"t\":", NULL, &id, &dup,
                                         err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "input is not valid JSON"));
    ck_assert_int_eq(run_job_count(loc), 0);
    ck_assert_msg(stepq_enqueue_input(q, job, "{\"t\":\"hi\"}", NULL, &id, &dup,
                                      err, sizeof(err)) == 0,
                  "%s", err);
    ck_assert(!dup);
    stepq_close(q);
    ck_assert_int_eq(RUN(&r, NULL, "--db", loc, "jobs", "show", "1", "--json"),
                     0);
    ck_assert_ptr_nonnull(shown = cJSON_Parse(r.out));
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(shown, "input"), "t")
            ->valuestring,
        "hi");
    cJSON_Delete(shown);
    run_result_free(&r);
    free(loc);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("lib");
    TCase *tc = tcase_create("enqueue_many");

    tcase_add_checked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_many_bad_job_late_writes_nothing);
    tcase_add_test(tc, test_many_ids_in_order_and_deduplicated);
    tcase_add_test(tc, test_handle_writes_after_a_duplicate);
    tcase_add_test(tc, test_longest_key_deduplicated);
    tcase_add_test(tc, test_enqueue_input);
    suite_add_tcase(s, tc);
    return s;
}

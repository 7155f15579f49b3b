/* test_park_resolve.c: park's resolution rules, on a real SQLite store
 * (no worker): which decisions are valid (the same rules for the CLI, an
 * HTTP API and programs), what each resolution does to the job and step,
 * and that a resolution is all or nothing. The CLI and the worker end to
 * end are in test_park.c. */
#include "tests/support/support.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "park/park.h"
#include "queue/park.h"
#include "queue/queue.h"
#include "tests/support/qfix.h"

/* ---- valid decisions ------------------------------------------------ */

static const struct check_row {
    struct park_decision d;
    bool bulk;
    const char *want; /* NULL: valid; else a part of the reason */
} checks[] = {
    {{.how = PARK_RETRY, .by = "bo"}, false, NULL},
    {{.how = PARK_RETRY, .tier = "local", .by = "bo"}, false, NULL},
    {{.how = PARK_RETRY, .tier = "paid", .by = "bo"},
     false,
     "no tier named paid"},
    {{.how = PARK_SKIP, .tier = "local", .by = "bo"},
     false,
     "tier goes with retry"},
    {{.how = PARK_RETRY, .tier = "local", .by = "bo"}, true, "per item"},
    {{.how = PARK_DONE, .output = "ok", .output_len = 2, .by = "bo"},
     false,
     NULL},
    {{.how = PARK_DONE, .by = "bo"}, true, "done is per item"},
    {{.how = PARK_FAIL, .output = "x", .output_len = 1, .by = "bo"},
     false,
     "output goes with done"},
    {{.how = PARK_DONE, .output = "a\0b", .output_len = 3, .by = "bo"},
     false,
     "not UTF-8 text"},
    {{.how = PARK_DONE, .output = "\xff", .output_len = 1, .by = "bo"},
     false,
     "not UTF-8 text"},
    {{.how = PARK_SKIP, .by = ""}, false, "who"},
    {{.how = PARK_SKIP, .by = "  "}, false, "who"},
    {{.how = PARK_SKIP, .by = "q\xff"}, false, "by must be UTF-8 text"},
    {{.how = PARK_SKIP, .by = "ops\x1b[2J"}, false, "control characters"},
    {{.how = PARK_SKIP, .by = "bo", .note = "l1\nl2\tok"}, false, NULL},
    {{.how = PARK_SKIP, .by = "bo", .note = "l1\r\a"}, false, "the note"},
    {{.how = PARK_SKIP, .by = "bo", .note = "\xed\xa0\x80"}, false, "the note"},
    {{.how = PARK_FAIL, .by = "bo"}, true, NULL},
};

START_TEST(test_decision_rules)
{
    static const char cfg_text[] = "{\"tiers\":[{\"name\":\"local\",\"base_"
                                   "url\":\"http://127.0.0.1:1/v1\","
                                   "\"model\":\"m\"}]}";
    const struct check_row *row = &checks[_i];
    struct config *cfg = NULL;
    char err[256] = "";
    int rc;

    ck_assert_int_eq(config_parse(cfg_text, sizeof(cfg_text) - 1, NULL, &cfg,
                                  err, sizeof(err)),
                     0);
    rc = park_decision_check(&row->d, row->bulk, cfg, err, sizeof(err));
    if (row->want == NULL)
        ck_assert_msg(rc == 0, "row %d refused: %s", _i, err);
    else
        ck_assert_msg(rc == -EINVAL && strstr(err, row->want) != NULL,
                      "row %d: rc %d, err \"%s\", want \"%s\"", _i, rc, err,
                      row->want);
    config_free(cfg);
}
END_TEST

START_TEST(test_how_names_round_trip)
{
    enum park_how h;

    for (int i = PARK_RETRY; i <= PARK_FAIL; i++) {
        ck_assert_int_eq(park_how_from_name(park_how_name(i), &h), 0);
        ck_assert_int_eq(h, i);
    }
    ck_assert_int_eq(park_how_from_name("later", &h), -EINVAL);
}
END_TEST

/* ---- what a resolution does ----------------------------------------- */

/* A job with steps 0 and 1, step 1 parked after two attempts. */
static int64_t
parked_job(q_db *db, const char *name)
{
    int64_t id = qfix_add(db, name, NULL, 0, T0), aid, pid;
    struct q_attempt_start a = {.job_id = id,
                                .step = 1,
                                .worker = "w",
                                .tier = "free",
                                .request_sha256 = "x",
                                .started_at = T0};
    struct q_park_new p = {.job_id = id,
                           .step = 1,
                           .step_name = "post",
                           .reason = "hard_quota",
                           .attempts = 1,
                           .tier = "free",
                           .parked_at = T0};
    int num;

    qfix_claim_one(db, id, "w", T0, 60000);
    ck_assert_int_eq(q_attempt_begin(db, &a, &aid, &num), 0);
    ck_assert_int_eq(q_attempt_begin(db, &a, &aid, &num), 0);
    ck_assert_int_eq(q_park_add(db, &p, &pid), 0);
    ck_assert_int_eq(q_park_job(db, id, "w", T0), 0);
    return pid;
}

/* Step index of job as stored (owned strings: free with step_drop). */
static struct q_step
step_of(q_db *db, int64_t job, int index)
{
    struct q_step *v = NULL, out = {0};
    size_t n = 0;

    ck_assert_int_eq(q_steps_get(db, job, &v, &n), 0);
    for (size_t i = 0; i < n; i++) {
        if (v[i].index == index) {
            out = v[i];
            v[i].tier = v[i].output = v[i].pin_tier = NULL;
        }
    }
    q_steps_free(v, n);
    return out;
}

static void
step_drop(struct q_step *st)
{
    free(st->tier);
    free(st->output);
    free(st->pin_tier);
}

static enum q_step_state
step_state(q_db *db, int64_t job, int index)
{
    struct q_step st = step_of(db, job, index);

    step_drop(&st);
    return st.state;
}

START_TEST(test_retry_counts_afresh_on_the_pinned_tier)
{
    q_db *db = qfix_open(NULL);
    int64_t item = parked_job(db, "a");
    struct park_decision d = {
        .how = PARK_RETRY, .tier = "local", .by = "bo", .now = T0 + 9};
    struct q_step st;

    ck_assert_int_eq(park_resolve(db, item, &d), 0);
    ck_assert_int_eq(qfix_state(db, 1), Q_JOB_QUEUED);
    st = step_of(db, 1, 1);
    ck_assert_int_eq(st.state, Q_STEP_PENDING);
    ck_assert_int_eq(st.reset_after,
                     2); /* the ledger's count, not the item's */
    ck_assert_str_eq(st.pin_tier, "local");
    step_drop(&st);
    ck_assert_int_eq(park_resolve(db, item, &d), -EALREADY);
    ck_assert_int_eq(park_resolve(db, 99, &d), -ENOENT);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_done_records_output_and_fail_names_who)
{
    q_db *db = qfix_open(NULL);
    int64_t a = parked_job(db, "a"), b = parked_job(db, "b");
    struct park_decision done = {.how = PARK_DONE,
                                 .output = "posted by hand",
                                 .by = "bo",
                                 .now = T0 + 9};
    struct park_decision fail = {
        .how = PARK_FAIL, .by = "bo", .note = "not tonight", .now = T0 + 9};
    struct q_job j = {0};
    struct q_step st;

    ck_assert_int_eq(park_resolve(db, a, &done), 0);
    st = step_of(db, 1, 1);
    ck_assert_int_eq(st.state, Q_STEP_SUCCEEDED);
    ck_assert_str_eq(st.output, "posted by hand");
    step_drop(&st);
    ck_assert_int_eq(park_resolve(db, b, &fail), 0);
    ck_assert_int_eq(q_job_get(db, 2, &j), 0);
    ck_assert_int_eq(j.state, Q_JOB_FAILED);
    ck_assert_ptr_nonnull(strstr(j.error, "failed by bo"));
    ck_assert_ptr_nonnull(strstr(j.error, "not tonight"));
    q_job_cleanup(&j);
    ck_assert_int_eq(step_state(db, 2, 1), Q_STEP_FAILED);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_resolution_of_a_cancelled_job_changes_nothing)
{
    q_db *db = qfix_open(NULL);
    int64_t item = parked_job(db, "a");
    struct park_decision d = {.how = PARK_SKIP, .by = "bo", .now = T0 + 9};
    struct q_park_item it;

    ck_assert_int_eq(q_cancel(db, 1, T0 + 1), 0);
    ck_assert_int_eq(park_resolve(db, item, &d), -EALREADY);
    ck_assert_int_eq(q_park_get(db, item, &it), 0);
    ck_assert(it.open); /* rolled back: the item is still open */
    q_park_item_cleanup(&it);
    ck_assert_int_eq(qfix_state(db, 1), Q_JOB_CANCELLED);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_cancel_closes_the_jobs_open_items)
{
    q_db *db = qfix_open(NULL);
    int64_t item = parked_job(db, "a"), other = parked_job(db, "b");
    struct park_decision d = {.how = PARK_SKIP, .by = "bo", .now = T0 + 9};
    struct q_park_item it;

    ck_assert_int_eq(park_cancel_job(db, 1, "al\x1b[2J", T0 + 1), -EINVAL);
    ck_assert_int_eq(qfix_state(db, 1), Q_JOB_PARKED);
    ck_assert_int_eq(park_cancel_job(db, 1, "al", T0 + 1), 0);
    ck_assert_int_eq(qfix_state(db, 1), Q_JOB_CANCELLED);
    ck_assert_int_eq(q_park_get(db, item, &it), 0);
    ck_assert(!it.open);
    ck_assert_str_eq(it.resolution, "cancel");
    ck_assert_str_eq(it.resolved_by, "al");
    q_park_item_cleanup(&it);
    ck_assert_int_eq(park_resolve(db, item, &d), -EALREADY);
    ck_assert_int_eq(park_cancel_job(db, 1, "al", T0 + 2), -EALREADY);
    ck_assert_int_eq(park_cancel_job(db, 99, "al", T0 + 2), -ENOENT);
    /* The other job's item is left as it was. */
    ck_assert_int_eq(q_park_get(db, other, &it), 0);
    ck_assert(it.open);
    q_park_item_cleanup(&it);
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

START_TEST(test_matching_resolves_what_the_filter_takes)
{
    q_db *db = qfix_open(NULL);
    struct park_decision d = {.how = PARK_SKIP, .by = "bo", .now = T0 + 9};
    struct q_park_filter f = {.tier = "free"}, none = {.tier = "local"};
    int64_t n = -1;

    parked_job(db, "a");
    parked_job(db, "b");
    ck_assert_int_eq(park_resolve_matching(db, &none, &d, &n), 0);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(park_resolve_matching(db, &f, &d, &n), 0);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(qfix_state(db, 1), Q_JOB_QUEUED);
    ck_assert_int_eq(step_state(db, 2, 1), Q_STEP_SKIPPED);
    ck_assert_int_eq(park_resolve_matching(db, &f, &d, &n), 0);
    ck_assert_int_eq(n, 0); /* nothing open any more */
    ck_assert_int_eq(q_close(db), 0);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("park: resolution");
    TCase *rules = tcase_create("rules");
    TCase *resolve = tcase_create("resolve");

    tcase_add_loop_test(rules, test_decision_rules, 0,
                        (int)(sizeof(checks) / sizeof(checks[0])));
    tcase_add_test(rules, test_how_names_round_trip);
    suite_add_tcase(s, rules);
    tcase_add_checked_fixture(resolve, qfix_setup, qfix_teardown);
    tcase_add_test(resolve, test_retry_counts_afresh_on_the_pinned_tier);
    tcase_add_test(resolve, test_done_records_output_and_fail_names_who);
    tcase_add_test(resolve, test_resolution_of_a_cancelled_job_changes_nothing);
    tcase_add_test(resolve, test_cancel_closes_the_jobs_open_items);
    tcase_add_test(resolve, test_matching_resolves_what_the_filter_takes);
    suite_add_tcase(s, resolve);
    return s;
}

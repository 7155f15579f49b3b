/* test_lib_jobs.c: libstepq after the enqueue, as a program uses it: wait
 * for a job a real `stepq work` runs against the mock, read the output of
 * its steps, learn why a failed one has none, cancel a job (the path and
 * audit row of `stepq jobs cancel`), and errors given as text, never
 * printed. Built twice: linked with libstepq.so (test_lib_jobs) and with
 * libstepq.a (test_lib_jobs_static); on SQLite, and on PostgreSQL as
 * test_lib_jobs_pg. */
#include "tests/support/support.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "include/stepq.h"
#include "tests/support/e2e.h"

#define TWO_STEPS                                                              \
    "{\"name\":\"j\",\"steps\":[{\"name\":\"a\",\"request\":{\"messages\":"    \
    "[{\"role\":\"user\",\"content\":\"hello\"}]}},{\"name\":\"b\","           \
    "\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"bye\"}]}}]}"

static stepq *
open_lib(void)
{
    stepq *q = NULL;
    char err[512];

    ck_assert_msg(stepq_open(e2e_db, &q, err, sizeof(err)) == 0, "%s", err);
    return q;
}

static int64_t
enqueue(stepq *q, const char *job)
{
    int64_t id = 0;
    char err[512];

    ck_assert_msg(stepq_enqueue(q, job, NULL, &id, NULL, err, sizeof(err)) == 0,
                  "%s", err);
    return id;
}

/* Runs the queue dry with a real worker, then waits for job id through
 * the library: it must have ended in want. */
static void
drain_then_wait(stepq *q, int64_t id, const char *want)
{
    char err[512], state[16] = "";

    free(e2e_drain());
    ck_assert_msg(
        stepq_wait(q, id, 5000, state, sizeof(state), err, sizeof(err)) == 0,
        "%s", err);
    ck_assert_str_eq(state, want);
}

/* The job's steps ran; their outputs are read by name, the last one as
 * the job's result, and a name the job lacks is -ENOENT saying so. */
START_TEST(test_wait_then_read_outputs)
{
    stepq *q;
    char err[512], state[16] = "", *out = NULL;
    int64_t id;

    e2e_start("{}", "");
    q = open_lib();
    id = enqueue(q, TWO_STEPS);
    ck_assert_int_eq(
        stepq_wait(q, id, 0, state, sizeof(state), err, sizeof(err)),
        -ETIMEDOUT);
    ck_assert_str_eq(err, "job 1 is still queued after 0 ms");
    ck_assert_int_eq(stepq_job_output(q, id, "a", &out, err, sizeof(err)),
                     -ENODATA);
    ck_assert_str_eq(err, "job 1 is queued: a has no output");
    drain_then_wait(q, id, "succeeded");
    ck_assert_int_eq(stepq_job_output(q, id, "a", &out, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(strstr(out, "mock reply to: hello"));
    stepq_free(out);
    ck_assert_int_eq(stepq_job_output(q, id, NULL, &out, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(strstr(out, "mock reply to: bye"));
    stepq_free(out);
    out = NULL;
    ck_assert_int_eq(stepq_job_output(q, id, "c", &out, err, sizeof(err)),
                     -ENOENT);
    ck_assert_str_eq(err, "job 1 has no step c");
    ck_assert_int_eq(stepq_job_output(q, 9, NULL, &out, err, sizeof(err)),
                     -ENOENT);
    ck_assert_str_eq(err, "no job 9");
    ck_assert_ptr_null(out);
    stepq_close(q);
}
END_TEST

/* A job that failed has no output; err says so with the job's error. */
START_TEST(test_failed_job_output_says_why)
{
    stepq *q;
    char err[1024], *out = NULL;
    int64_t id;

    e2e_start_file("free-400-unknown-parameter.json", "");
    q = open_lib();
    id = enqueue(q, E2E_CHAT_JOB("\"tiers\":[\"free\"],", ""));
    drain_then_wait(q, id, "failed");
    ck_assert_int_eq(stepq_job_output(q, id, NULL, &out, err, sizeof(err)),
                     -ENODATA);
    ck_assert_msg(strncmp(err, "job 1 is failed (", 17) == 0, "%s", err);
    ck_assert_msg(strstr(err, "unknown parameter frob") != NULL, "%s", err);
    ck_assert_ptr_nonnull(strstr(err, "): no step has an output"));
    ck_assert_ptr_null(out);
    stepq_close(q);
}
END_TEST

/* stepq_wait returns when another process ends the job: a child waits
 * (its own handle, opened after the fork) while this process cancels the
 * job with the real binary. */
START_TEST(test_wait_sees_another_process)
{
    stepq *q;
    struct run_result r;
    int fds[2], status = -1;
    int64_t id;
    pid_t pid;
    char c;

    e2e_init();
    q = open_lib();
    id = enqueue(q, TWO_STEPS);
    stepq_close(q);
    ck_assert_int_eq(pipe(fds), 0);
    ck_assert_int_ge(pid = fork(), 0);
    if (pid == 0) {
        char state[16] = "", err[512];
        stepq *cq = NULL;
        int rc = stepq_open(e2e_db, &cq, err, sizeof(err));
        if (rc == 0 && write(fds[1], "w", 1) == 1)
            rc = stepq_wait(cq, id, 30000, state, sizeof(state), err,
                            sizeof(err));
        stepq_close(cq);
        _exit(rc == 0 && strcmp(state, "cancelled") == 0 ? 0 : 1);
    }
    close(fds[1]);
    ck_assert_int_eq(read(fds[0], &c, 1), 1);
    close(fds[0]);
    ck_assert_int_eq(RUN(&r, NULL, "jobs", "cancel", "1"), 0);
    run_result_free(&r);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* The audit row of a job.cancel by libstepq, or NULL. Caller frees the
 * array (*all). */
static const cJSON *
cancel_row(cJSON **all)
{
    struct run_result r;
    const cJSON *row;

    ck_assert_int_eq(RUN(&r, NULL, "audit", "--json"), 0);
    ck_assert_ptr_nonnull(*all = cJSON_Parse(r.out));
    run_result_free(&r);
    cJSON_ArrayForEach(row, *all)
    {
        if (strcmp(e2e_str(row, "action"), "job.cancel") == 0)
            return row;
    }
    return NULL;
}

START_TEST(test_cancel_as_jobs_cancel)
{
    stepq *q;
    char err[512], state[16];
    const cJSON *row;
    cJSON *all;
    int64_t id, other;

    e2e_init();
    q = open_lib();
    id = enqueue(q, TWO_STEPS);
    other = enqueue(q, TWO_STEPS);
    ck_assert_int_eq(stepq_cancel(q, other, "bad\001", err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "by must be a name"));
    ck_assert_int_eq(stepq_cancel(q, id, "ops", err, sizeof(err)), 0);
    ck_assert_int_eq(stepq_job_state(q, id, state, sizeof(state)), 0);
    ck_assert_str_eq(state, "cancelled");
    ck_assert_int_eq(stepq_job_state(q, other, state, sizeof(state)), 0);
    ck_assert_str_eq(state, "queued");
    ck_assert_int_eq(stepq_cancel(q, id, NULL, err, sizeof(err)), -EALREADY);
    ck_assert_str_eq(err, "job 1 has already ended");
    ck_assert_int_eq(stepq_cancel(q, 77, NULL, err, sizeof(err)), -ENOENT);
    ck_assert_str_eq(err, "no job 77");
    stepq_close(q);
    ck_assert_ptr_nonnull(row = cancel_row(&all));
    ck_assert_str_eq(e2e_str(row, "who"), "ops");
    ck_assert_str_eq(e2e_str(row, "source"), "lib");
    ck_assert_str_eq(e2e_str(cJSON_GetObjectItem(row, "detail"), "by"), "ops");
    cJSON_Delete(all);
}
END_TEST

/* A store that fails says why in err, with the store's own words, and
 * nothing reaches the program's standard error. */
START_TEST(test_errors_are_text_not_printed)
{
    static const char text[] = "this is not a database, but it is long "
                               "enough that SQLite reads its header\n";
    char err[512],
        *path = tmpdir_write(e2e_dir, "not-a-db", text, sizeof(text) - 1);
    int saved = dup(2), fd;
    stepq *q = NULL;
    struct stat st;
    int rc;

    fd = open("stderr.txt", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    dup2(fd, 2);
    rc = stepq_open(path, &q, err, sizeof(err));
    dup2(saved, 2);
    close(saved);
    ck_assert_int_eq(fstat(fd, &st), 0);
    close(fd);
    ck_assert_int_eq(rc, -EIO);
    ck_assert_ptr_null(q);
    ck_assert_msg(strstr(err, "cannot open the database at") == err, "%s", err);
    ck_assert_msg(strstr(err, "(") != NULL, "no detail: %s", err);
    ck_assert_int_eq(st.st_size, 0);
    free(path);
}
END_TEST

START_TEST(test_strerror_names_every_code)
{
    static const int codes[] = {0,        -EINVAL,    -ENOENT, -EALREADY,
                                -ENODATA, -ETIMEDOUT, -ESTALE, -ENOTSUP,
                                -EAGAIN,  -EIO};

    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        const char *t = stepq_strerror(codes[i]);
        ck_assert_str_ne(t, "unknown error");
        for (size_t k = 0; k < i; k++)
            ck_assert_str_ne(t, stepq_strerror(codes[k]));
    }
    ck_assert_str_eq(stepq_strerror(-EPIPE), "unknown error");
    ck_assert_str_eq(stepq_strerror(12345), "unknown error");
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("lib_jobs");
    TCase *tc = tcase_create("jobs");

    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_wait_then_read_outputs);
    tcase_add_test(tc, test_failed_job_output_says_why);
    tcase_add_test(tc, test_wait_sees_another_process);
    tcase_add_test(tc, test_cancel_as_jobs_cancel);
    tcase_add_test(tc, test_errors_are_text_not_printed);
    tcase_add_test(tc, test_strerror_names_every_code);
    suite_add_tcase(s, tc);
    return s;
}

/* test_cli.c: the stepq binary as users and scripts run it: exit codes,
 * messages naming the problem, JSON shapes, and bad input changing
 * nothing. Each test runs in its own temporary directory. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/xalloc.h"

#define CHAT_STEP(name)                                                        \
    "{\"name\":\"" name "\",\"request\":{\"messages\":[{\"role\":\"user\","    \
    "\"content\":\"hi\"}]}}"
#define GOOD_JOB(key)                                                          \
    "{\"name\":\"n\",\"key\":\"" key "\",\"steps\":[" CHAT_STEP("a") "]}"

struct bad_input {
    const char *name;
    const char *input;
    const char *want;
};

static const struct bad_input bad_inputs[] = {
    {"not json", "{nope", "not valid JSON"},
    {"wrong type", "{\"name\":[],\"steps\":[]}", "name: must be a string"},
    {"empty steps", "{\"name\":\"n\",\"steps\":[]}",
     "steps: must not be empty"},
    {"unknown kind",
     "{\"name\":\"n\",\"steps\":[{\"name\":\"a\",\"kind\":\"ftp\"}]}",
     "steps[0].kind"},
    {"misspelt field",
     "{\"name\":\"n\",\"steps\":[{\"name\":\"a\",\"side_efects\":true,"
     "\"request\":{\"messages\":[{\"role\":\"user\"}]}}]}",
     "steps[0].side_efects: unknown field"},
    {"duplicate step names",
     "{\"name\":\"n\",\"steps\":[" CHAT_STEP("a") "," CHAT_STEP("a") "]}",
     "steps[1].name: duplicate step name a"},
    {"template later step",
     "{\"name\":\"n\",\"steps\":[{\"name\":\"a\",\"request\":{\"messages\":["
     "{\"role\":\"user\",\"content\":\"{{steps.b.output}}\"}]}}," CHAT_STEP(
         "b") "]}",
     "which runs later"},
    {"missing request", "{\"name\":\"n\",\"steps\":[{\"name\":\"a\"}]}",
     "steps[0].request: missing"},
    {"invalid utf-8", "{\"name\":\"\xfe\",\"steps\":[" CHAT_STEP("a") "]}",
     "not valid UTF-8"},
    {"one bad job in an array",
     "[" GOOD_JOB("k1") ",{\"name\":\"n\",\"steps\":[{\"name\":\"a\"}]}]",
     "job 1: steps[0].request: missing"},
    {"one bad job in lines", GOOD_JOB("k1") "\n{\"name\":\"n\"}\n",
     "line 2: steps: missing"},
    /* C strings end at a NUL: "k\u0000x" would be stored as the key "k",
     * a duplicate of another job's, and a field name "side_effects\u0000"
     * would read as side_effects. */
    {"escaped NUL in a key", "[" GOOD_JOB("k") "," GOOD_JOB("k\\u0000x") "]",
     "job 1: a NUL character (\\u0000) at byte 20"},
    {"escaped NUL in a field name",
     "{\"name\":\"n\",\"steps\":[{\"name\":\"a\",\"side_effects\\u0000\":"
     "false,\"request\":{\"messages\":[{\"role\":\"user\"}]}}]}",
     "a NUL character"},
    {"raw control byte in a string",
     "{\"name\":\"n\x01\",\"steps\":[" CHAT_STEP("a") "]}",
     "a control character (0x01) at byte 10"},
    {"a day february lacks",
     "{\"name\":\"n\",\"run_at\":\"2026-02-30T00:00:00Z\",\"steps\":"
     "[" CHAT_STEP("a") "]}",
     "run_at"},
    {"a year before the epoch",
     "{\"name\":\"n\",\"run_at\":\"0000-01-01T00:00:00Z\",\"steps\":"
     "[" CHAT_STEP("a") "]}",
     "run_at"},
    {"a tier named twice",
     "{\"name\":\"n\",\"steps\":[{\"name\":\"a\",\"tiers\":[\"x\",\"x\"],"
     "\"request\":{\"messages\":[{\"role\":\"user\"}]}}]}",
     "steps[0].tiers[1]: tier x named twice"},
    {"truncated", "{\"name\":\"n\",", "not valid JSON (near byte 11)"},
};

START_TEST(test_bad_job_exit_2_nothing_written)
{
    const struct bad_input *c = &bad_inputs[_i];
    struct run_result r;

    ck_assert_int_eq(RUN(&r, c->input, "enqueue", "-", "--db", FIXTURE_DB), 2);
    ck_assert_msg(strstr(r.err, c->want) != NULL, "%s: stderr \"%s\"", c->name,
                  r.err);
    ck_assert_str_eq(r.out, "");
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 0);
}
END_TEST

START_TEST(test_huge_and_deep_inputs_refused)
{
    size_t n = 10 * 1024 * 1024;
    char *big = xmalloc(n + 256), *p;
    struct run_result r;
    int len = snprintf(big, 256,
                       "{\"name\":\"n\",\"steps\":[{\"name\":\"a\","
                       "\"request\":{\"messages\":[{\"role\":\"user\","
                       "\"content\":\"");

    memset(big + len, 'x', n);
    strcpy(big + len + n, "\"}]}}]}");
    p = tmpdir_write(fixture_dir, "big.json", big, strlen(big));
    ck_assert_int_eq(RUN(&r, NULL, "enqueue", p, "--db", FIXTURE_DB), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "larger than the limit"));
    run_result_free(&r);
    free(p);
    memset(big, '[', 200000);
    big[200000] = '\0';
    ck_assert_int_eq(RUN(&r, big, "enqueue", "--db", FIXTURE_DB), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "not valid JSON"));
    run_result_free(&r);
    free(big);
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 0);
}
END_TEST

/* The input is read in pieces and written batch by batch inside one
 * transaction: a bad line near the end of a long input, after many
 * batches went in, still leaves nothing written. */
START_TEST(test_long_input_with_a_late_bad_line_writes_nothing)
{
    char *t = job_lines(5000, 4999);
    char *p = tmpdir_write(fixture_dir, "late.jsonl", t, strlen(t));
    struct run_result r;

    ck_assert_int_eq(RUN(&r, NULL, "enqueue", p, "--db", FIXTURE_DB), 2);
    ck_assert_msg(strstr(r.err, "line 4999: steps: missing") != NULL, "%s",
                  r.err);
    ck_assert_str_eq(r.out, "");
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 0);
    ck_assert_int_eq(RUN(&r, t, "enqueue", "--key", "x", "--db", FIXTURE_DB),
                     2);
    ck_assert_ptr_nonnull(strstr(r.err, "--key applies to a single job"));
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 0);
    free(p);
    free(t);
}
END_TEST

/* A long JSON array from stdin, pretty-printed across lines, goes in
 * whole, ids in input order; again, every key is a duplicate. */
START_TEST(test_long_array_streamed_in_order)
{
    char *t = job_lines(3000, 0), *arr = xmalloc(2 * strlen(t) + 16);
    char *q = arr;
    struct run_result r;

    *q++ = '[';
    for (const char *l = t; *l != '\0'; l++) {
        if (*l == '\n' && l[1] == '\0')
            break;
        *q++ = *l == '\n' ? ',' : *l;
        if (*l == ',' || *l == '\n')
            *q++ = '\n'; /* lines inside each element and between them */
    }
    strcpy(q, "]");
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(RUN(&r, arr, "enqueue", "--json", "--db", FIXTURE_DB),
                         0);
        cJSON *o = cJSON_Parse(r.out);
        ck_assert_int_eq(cJSON_GetArraySize(o), 3000);
        cJSON *last = cJSON_GetArrayItem(o, 2999);
        ck_assert_int_eq(cJSON_GetObjectItem(last, "id")->valueint, 3000);
        ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(last, "duplicate")) ==
                  (round == 1));
        cJSON_Delete(o);
        run_result_free(&r);
    }
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 3000);
    free(arr);
    free(t);
}
END_TEST

/* A producer that writes slowly (a pipe left open) holds no lock: input
 * that can stall is gathered to its end before anything is written, so
 * another enqueue goes in meanwhile (it would wait out its 5 s for the
 * write lock and fail otherwise), and the first still goes in whole once
 * its input ends. */
START_TEST(test_slow_producer_holds_no_lock)
{
    char *t = job_lines(3000, 0);
    size_t len = strlen(t), off = 0;
    struct run_result r;
    int in[2], status;
    pid_t pid;

    ck_assert_int_eq(pipe(in), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(in[0], 0);
        dup2(null, 1);
        close(in[0]);
        close(in[1]);
        execl(stepq_bin(), "stepq", "enqueue", "--db", FIXTURE_DB,
              (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    /* All but a pipe's buffer has been read once this returns: many
     * batches' worth. */
    while (off < len) {
        ssize_t n = write(in[1], t + off, len - off);
        ck_assert_int_gt(n, 0);
        off += (size_t)n;
    }
    nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    ck_assert_int_eq(
        RUN(&r, GOOD_JOB("meanwhile"), "enqueue", "--db", FIXTURE_DB), 0);
    ck_assert_str_eq(r.out, "1\n");
    run_result_free(&r);
    close(in[1]);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 3001);
    free(t);
}
END_TEST

/* Piped input longer than what is gathered in memory (4 MiB) goes
 * through a spool file in $TMPDIR and in whole; with no place for the
 * spool file, the error names it and nothing is written. */
START_TEST(test_long_piped_input_spooled)
{
    char *t = job_lines(50000, 0);
    struct run_result r;

    ck_assert_uint_gt(strlen(t), 4u << 20);
    ck_assert_int_eq(setenv("TMPDIR", "/nonexistent-stepq", 1), 0);
    ck_assert_int_eq(RUN(&r, t, "enqueue", "--db", FIXTURE_DB), 1);
    ck_assert_msg(strstr(r.err, "enqueue: stdin: cannot make a spool file in "
                                "/nonexistent-stepq") != NULL &&
                      strstr(r.err, "nothing was enqueued") != NULL,
                  "%s", r.err);
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 0);
    ck_assert_int_eq(setenv("TMPDIR", fixture_dir, 1), 0);
    ck_assert_int_eq(RUN(&r, t, "enqueue", "--json", "--db", FIXTURE_DB), 0);
    cJSON *o = cJSON_Parse(r.out);
    ck_assert_int_eq(cJSON_GetArraySize(o), 50000);
    ck_assert_int_eq(
        cJSON_GetObjectItem(cJSON_GetArrayItem(o, 49999), "id")->valueint,
        50000);
    cJSON_Delete(o);
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 50000);
    free(t);
}
END_TEST

START_TEST(test_enqueue_prints_ids_and_dedupes)
{
    struct run_result r;

    ck_assert_int_eq(RUN(&r, GOOD_JOB("k1"), "enqueue", "--db", FIXTURE_DB), 0);
    ck_assert_str_eq(r.out, "1\n");
    run_result_free(&r);
    ck_assert_int_eq(
        RUN(&r, GOOD_JOB("k1"), "--db", FIXTURE_DB, "enqueue", "--json"), 0);
    ck_assert_str_eq(r.out, "{\"id\":1,\"duplicate\":true}\n");
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, "[" GOOD_JOB("k2") "," GOOD_JOB("k1") "]",
                         "enqueue", "--json", "--db=" FIXTURE_DB),
                     0);
    ck_assert_str_eq(r.out, "[{\"id\":2,\"duplicate\":false},"
                            "{\"id\":1,\"duplicate\":true}]\n");
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, GOOD_JOB("k3") "\n" GOOD_JOB("k4") "\n", "enqueue",
                         "--json", "--db", FIXTURE_DB),
                     0);
    ck_assert_str_eq(r.out, "[{\"id\":3,\"duplicate\":false},"
                            "{\"id\":4,\"duplicate\":false}]\n");
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 4);
}
END_TEST

START_TEST(test_enqueue_flags_override_and_validate)
{
    struct run_result r;
    cJSON *o;

    ck_assert_int_eq(RUN(&r, GOOD_JOB("k1"), "enqueue", "--key", "other",
                         "--priority", "7", "--run-at", "2030-01-02T03:04:05Z",
                         "--db", FIXTURE_DB),
                     0);
    run_result_free(&r);
    ck_assert_int_eq(
        RUN(&r, NULL, "jobs", "show", "1", "--json", "--db", FIXTURE_DB), 0);
    o = cJSON_Parse(r.out);
    ck_assert_str_eq(cJSON_GetObjectItem(o, "key")->valuestring, "other");
    ck_assert_int_eq(cJSON_GetObjectItem(o, "priority")->valueint, 7);
    ck_assert_str_eq(cJSON_GetObjectItem(o, "run_at")->valuestring,
                     "2030-01-02T03:04:05Z");
    cJSON_Delete(o);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, GOOD_JOB("k"), "enqueue", "--priority", "high",
                         "--db", FIXTURE_DB),
                     2);
    ck_assert_ptr_nonnull(strstr(r.err, "--priority"));
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, GOOD_JOB("k"), "enqueue", "--run-at", "soon",
                         "--db", FIXTURE_DB),
                     2);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, "[" GOOD_JOB("a") "," GOOD_JOB("b") "]", "enqueue",
                         "--key", "x", "--db", FIXTURE_DB),
                     2);
    run_result_free(&r);
    ck_assert_int_eq(
        RUN(&r, NULL, "enqueue", "missing.json", "--db", FIXTURE_DB), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "missing.json: no such file"));
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "enqueue", ".", "--db", FIXTURE_DB), 2);
    ck_assert_ptr_nonnull(strstr(r.err, ".: a folder, not a job file"));
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 1);
}
END_TEST

START_TEST(test_jobs_show_json_shape)
{
    struct run_result r;
    cJSON *o, *step;
    const char *job = "{\"name\":\"nightly\",\"steps\":[" CHAT_STEP(
        "a") "," CHAT_STEP("b") "]}";

    ck_assert_int_eq(RUN(&r, job, "enqueue", "--db", FIXTURE_DB), 0);
    run_result_free(&r);
    ck_assert_int_eq(
        RUN(&r, NULL, "jobs", "show", "1", "--json", "--db", FIXTURE_DB), 0);
    o = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "id")->valueint, 1);
    ck_assert_str_eq(cJSON_GetObjectItem(o, "name")->valuestring, "nightly");
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(o, "key")));
    ck_assert_str_eq(cJSON_GetObjectItem(o, "state")->valuestring, "queued");
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(o, "error")));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "steps")), 2);
    step = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "steps"), 1);
    ck_assert_str_eq(cJSON_GetObjectItem(step, "name")->valuestring, "b");
    ck_assert_str_eq(cJSON_GetObjectItem(step, "state")->valuestring,
                     "pending");
    ck_assert_int_eq(cJSON_GetObjectItem(step, "attempts")->valueint, 0);
    ck_assert(cJSON_IsArray(cJSON_GetObjectItem(step, "history")));
    cJSON_Delete(o);
    run_result_free(&r);
}
END_TEST

START_TEST(test_jobs_list_and_filters)
{
    struct run_result r;
    cJSON *o, *first;

    ck_assert_int_eq(RUN(&r, GOOD_JOB("a") "\n" GOOD_JOB("b") "\n", "enqueue",
                         "--db", FIXTURE_DB),
                     0);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "jobs", "cancel", "2", "--db", FIXTURE_DB),
                     0);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "jobs", "list", "--json", "--state",
                         "queued", "--db", FIXTURE_DB),
                     0);
    o = cJSON_Parse(r.out);
    ck_assert_int_eq(cJSON_GetArraySize(o), 1);
    first = cJSON_GetArrayItem(o, 0);
    ck_assert_int_eq(cJSON_GetObjectItem(first, "id")->valueint, 1);
    ck_assert_str_eq(cJSON_GetObjectItem(first, "key")->valuestring, "a");
    ck_assert_ptr_nonnull(cJSON_GetObjectItem(first, "created_at"));
    ck_assert_ptr_nonnull(cJSON_GetObjectItem(first, "updated_at"));
    cJSON_Delete(o);
    run_result_free(&r);
    ck_assert_int_eq(
        RUN(&r, NULL, "jobs", "list", "--state", "done", "--db", FIXTURE_DB),
        2);
    ck_assert_ptr_nonnull(strstr(r.err, "--state"));
    run_result_free(&r);
}
END_TEST

/* A transcript: each command in turn, with its exit code and, where
 * set, what its stderr must name. */
static const struct exit_step {
    const char *input;
    const char *argv[7];
    int want;
    const char *err;
} exit_steps[] = {
    {GOOD_JOB("a"), {"enqueue", "--db", FIXTURE_DB}, 0, NULL},
    {NULL, {"jobs", "show", "42", "--db", FIXTURE_DB}, 3, "no job 42"},
    {NULL, {"jobs", "show", "x1", "--db", FIXTURE_DB}, 2, NULL},
    {NULL, {"jobs", "cancel", "1", "--json", "--db", FIXTURE_DB}, 0, NULL},
    {NULL, {"jobs", "cancel", "1", "--db", FIXTURE_DB}, 4, NULL},
    {NULL, {"jobs", "cancel", "9", "--db", FIXTURE_DB}, 3, NULL},
    {NULL, {"frobnicate"}, 2, NULL},
    {NULL, {"status", "--bogus"}, 2, "--bogus"},
    {NULL, {"status", "--db"}, 2, NULL},
    /* a misspelt reason filter is refused, not an empty match */
    {NULL,
     {"park", "list", "--reason", "hardquota", "--db", FIXTURE_DB},
     2,
     "--reason hardquota"},
    {NULL,
     {"park", "list", "--reason", "in_doubt", "--db", FIXTURE_DB},
     0,
     NULL},
    /* A config named but missing or bad is exit 2 even where the command
     * would not read it. */
    {NULL,
     {"status", "--config", "no-such.json", "--db", FIXTURE_DB},
     2,
     "no-such.json"},
    {NULL,
     {"jobs", "list", "--config", FIXTURE_DB, "--db", FIXTURE_DB},
     2,
     NULL},
    {NULL,
     {"status", "--config", "/", "--db", FIXTURE_DB},
     2,
     "a folder, not a config file"},
    /* a key given apart from the job follows a job file's rules */
    {GOOD_JOB("z"),
     {"enqueue", "--key", "k\x01", "--db", FIXTURE_DB},
     2,
     "--key: must not hold control characters"},
    {GOOD_JOB("z"),
     {"enqueue", "--key", "k\xff", "--db", FIXTURE_DB},
     2,
     "--key: not valid UTF-8"},
    {NULL, {"jobs", "show", "2", "--db", FIXTURE_DB}, 3, NULL},
};

START_TEST(test_exit_codes)
{
    for (size_t i = 0; i < sizeof(exit_steps) / sizeof(exit_steps[0]); i++) {
        const struct exit_step *c = &exit_steps[i];
        struct run_result r;

        ck_assert_msg(run_cmd(&r, c->input, c->argv) == c->want,
                      "stepq %s %s: exit %d", c->argv[0],
                      c->argv[1] ? c->argv[1] : "", r.status);
        ck_assert_msg(c->err == NULL || strstr(r.err, c->err) != NULL,
                      "stepq %s: stderr \"%s\"", c->argv[0], r.err);
        run_result_free(&r);
    }
}
END_TEST

START_TEST(test_help_on_every_command)
{
    static const char *const cmds[][3] = {
        {"--help", NULL, NULL},      {"init", "--help", NULL},
        {"enqueue", "--help", NULL}, {"jobs", "--help", NULL},
        {"jobs", "show", "--help"},  {"status", "--help", NULL},
        {"tiers", "--help", NULL},   {"policy", "--help", NULL},
        {"mock", "--help", NULL},    {"park", "--help", NULL},
        {"park", "list", "--help"},  {"work", "--help", NULL},
        {"demo", "--help", NULL},
    };
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        struct run_result r;
        ck_assert_msg(run_args(&r, cmds[i]) == 0, "%s %s: exit %d", cmds[i][0],
                      cmds[i][1] ? cmds[i][1] : "", r.status);
        ck_assert_msg(strstr(r.out, "usage:") != NULL, "%s: no usage",
                      cmds[i][0]);
        run_result_free(&r);
    }
}
END_TEST

/* The build's allocator serves the program's malloc: mimalloc when the
 * build links it (the Debug and release builds), the C library's under the
 * sanitizers. */
START_TEST(test_version_names_the_allocator_in_use)
{
#ifdef STEPQ_EXPECT_MIMALLOC
    const char *want = "\nallocator: mimalloc ";
#else
    const char *want = "\nallocator: libc\n";
#endif
    struct run_result r;

    ck_assert_int_eq(RUN_ARGS(&r, "--version"), 0);
    ck_assert_msg(strncmp(r.out, "stepq ", 6) == 0, "out: %s", r.out);
    ck_assert_msg(strstr(r.out, want) != NULL, "out: %s", r.out);
    run_result_free(&r);
}
END_TEST

START_TEST(test_db_and_config_resolution)
{
    struct run_result r;
    struct stat st;

    /* $STEPQ_DB */
    setenv("STEPQ_DB", "env.db", 1);
    ck_assert_int_eq(RUN(&r, NULL, "init"), 0);
    run_result_free(&r);
    ck_assert_int_eq(stat("env.db", &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    unsetenv("STEPQ_DB");
    /* config "db" is relative to the config's folder */
    ck_assert_int_eq(mkdir("conf", 0700), 0);
    free(
        tmpdir_write(fixture_dir, "conf/stepq.json", "{\"db\": \"c.db\"}", 14));
    ck_assert_int_eq(RUN(&r, NULL, "init", "--config", "conf/stepq.json"), 0);
    run_result_free(&r);
    ck_assert_int_eq(stat("conf/c.db", &st), 0);
    /* no config, no env: ./stepq.db */
    ck_assert_int_eq(RUN(&r, NULL, "init"), 0);
    run_result_free(&r);
    ck_assert_int_eq(stat("stepq.db", &st), 0);
    /* a bad config names the problem and exits 2 */
    free(tmpdir_write(fixture_dir, "bad.json", "{\"tiers\":[{\"name\":\"f\"}]}",
                      24));
    ck_assert_int_eq(RUN(&r, NULL, "status", "--config", "bad.json"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "tiers[0].base_url: missing"));
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "status", "--config", "nope.json"), 2);
    run_result_free(&r);
    /* so does a classify rule that does not compile, for every command */
    free(tmpdir_write(
        fixture_dir, "rule.json",
        "{\"classify\":[{\"body\":\"(\",\"outcome\":\"refused\"}]}", 47));
    ck_assert_int_eq(RUN(&r, NULL, "status", "--config", "rule.json"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "classify[0].body"));
    run_result_free(&r);
}
END_TEST

START_TEST(test_tier_names_checked_against_config)
{
    struct run_result r;
    const char *cfg = "{\"tiers\":[{\"name\":\"free\",\"base_url\":"
                      "\"http://127.0.0.1:1/v1\",\"model\":\"m\"}]}";
    const char *job = "{\"name\":\"n\",\"steps\":[{\"name\":\"a\",\"tiers\":"
                      "[\"paid\"],\"request\":{\"messages\":[{\"role\":"
                      "\"user\"}]}}]}";

    free(tmpdir_write(fixture_dir, "stepq.json", cfg, strlen(cfg)));
    ck_assert_int_eq(RUN(&r, job, "enqueue", "--db", FIXTURE_DB), 2);
    ck_assert_ptr_nonnull(
        strstr(r.err, "steps[0].tiers[0]: no tier named paid"));
    run_result_free(&r);
}
END_TEST

START_TEST(test_example_job_files_validate)
{
    static const char *const files[] = {"examples/nightly-changelog.json"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char *p = source_path(files[i]);
        struct run_result r;
        ck_assert_msg(RUN(&r, NULL, "enqueue", p, "--db", FIXTURE_DB) == 0,
                      "%s: %s", files[i], r.err);
        run_result_free(&r);
        free(p);
    }
}
END_TEST

START_TEST(test_c_example_enqueues_through_libstepq)
{
    const char *bin = getenv("STEPQ_EXAMPLE_ENQUEUE");
    char *job = source_path("examples/nightly-changelog.json");
    char cmd[4096];
    FILE *p;
    char line[64] = "";

    ck_assert_ptr_nonnull(bin);
    snprintf(cmd, sizeof(cmd),
             "'%s' " FIXTURE_DB " '%s' && '%s' " FIXTURE_DB " '%s'", bin, job,
             bin, job);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), p));
    ck_assert_str_eq(line, "1\n");
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), p));
    ck_assert_str_eq(line, "1 (duplicate)\n");
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 1);
    free(job);
}
END_TEST

START_TEST(test_tiers_json_shape)
{
    struct run_result r;
    cJSON *o, *t;
    const char *cfg = "{\"tiers\":[{\"name\":\"free\",\"base_url\":"
                      "\"http://127.0.0.1:1/v1\",\"model\":\"m\",\"rpm\":2},"
                      "{\"name\":\"local\",\"base_url\":"
                      "\"http://127.0.0.1:2/v1\",\"model\":\"l\"}]}";

    free(tmpdir_write(fixture_dir, "stepq.json", cfg, strlen(cfg)));
    ck_assert_int_eq(RUN(&r, NULL, "tiers", "--json", "--db", FIXTURE_DB), 0);
    o = cJSON_Parse(r.out);
    ck_assert_int_eq(cJSON_GetArraySize(o), 2);
    t = cJSON_GetArrayItem(o, 1);
    ck_assert_str_eq(cJSON_GetObjectItem(t, "name")->valuestring, "local");
    ck_assert_str_eq(cJSON_GetObjectItem(t, "breaker")->valuestring, "closed");
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(t, "open_until")));
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(t, "exhausted_until")));
    ck_assert_int_eq(cJSON_GetObjectItem(t, "rpm_used")->valueint, 0);
    ck_assert_int_eq(cJSON_GetObjectItem(t, "tpm_used")->valueint, 0);
    ck_assert_int_eq(cJSON_GetObjectItem(t, "allowance_used")->valueint, 0);
    ck_assert_int_eq(cJSON_GetObjectItem(t, "in_flight")->valueint, 0);
    cJSON_Delete(o);
    run_result_free(&r);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *in = tcase_create("input");
    TCase *out = tcase_create("output");

    tcase_add_checked_fixture(in, fixture_setup_db, fixture_teardown);
    tcase_set_timeout(in, 60);
    tcase_add_loop_test(in, test_bad_job_exit_2_nothing_written, 0,
                        (int)(sizeof(bad_inputs) / sizeof(bad_inputs[0])));
    tcase_add_test(in, test_huge_and_deep_inputs_refused);
    tcase_add_test(in, test_enqueue_flags_override_and_validate);
    tcase_add_test(in, test_long_input_with_a_late_bad_line_writes_nothing);
    tcase_add_test(in, test_long_array_streamed_in_order);
    tcase_add_test(in, test_slow_producer_holds_no_lock);
    tcase_add_test(in, test_long_piped_input_spooled);
    tcase_add_test(in, test_tier_names_checked_against_config);
    tcase_add_test(in, test_db_and_config_resolution);
    tcase_add_test(in, test_example_job_files_validate);
    suite_add_tcase(s, in);

    tcase_add_checked_fixture(out, fixture_setup_db, fixture_teardown);
    tcase_set_timeout(out, 60);
    tcase_add_test(out, test_enqueue_prints_ids_and_dedupes);
    tcase_add_test(out, test_jobs_show_json_shape);
    tcase_add_test(out, test_jobs_list_and_filters);
    tcase_add_test(out, test_exit_codes);
    tcase_add_test(out, test_help_on_every_command);
    tcase_add_test(out, test_version_names_the_allocator_in_use);
    tcase_add_test(out, test_c_example_enqueues_through_libstepq);
    tcase_add_test(out, test_tiers_json_shape);
    suite_add_tcase(s, out);
    return s;
}

/* test_policy_cases.c: `stepq policy check` run as a real process on the
 * shipped case tables (the files in tests/cases/), on failing and bad input,
 * and with a config of user rules. */
#include "tests/support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/xalloc.h"

/* ---- stepq policy check ---- */

static int
count_cases(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;
    cJSON *root;
    int count;

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    rewind(f);
    buf = xmalloc((size_t)n + 1);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    root = cJSON_Parse(buf);
    ck_assert_ptr_nonnull(root);
    count = cJSON_GetArraySize(root);
    cJSON_Delete(root);
    free(buf);
    return count;
}

static const char *const tables[] = {
    "tests/cases/seed-cases.json", "tests/cases/provider-errors.json",
    "tests/cases/gateway-errors.json", "tests/cases/native-protocols.json"};

START_TEST(test_cli_table_passes)
{
    char *dir = tmpdir_new();
    char *cfg = tmpdir_write(dir, "stepq.json", "{}", 2);
    char *path = source_path(tables[_i]);
    int n = count_cases(path);
    const char *argv[] = {"policy", "check", path, "--config", cfg, NULL};
    struct run_result res;
    char want[64];

    ck_assert_int_gt(n, 0);
    run_stepq(argv, NULL, &res);
    snprintf(want, sizeof(want), "\n%d passed, 0 failed\n", n);
    ck_assert_msg(res.status == 0, "exit %d\n%s%s", res.status, res.out,
                  res.err);
    ck_assert_msg(strstr(res.out, want) != NULL, "%s", res.out);
    ck_assert_ptr_null(strstr(res.out, "FAIL "));
    run_result_free(&res);
    free(path);
    free(cfg);
    tmpdir_remove(dir);
}
END_TEST

static const char failing_table[] =
    "[{\"name\": \"good\", \"response\": {\"status\": 500, \"body\": "
    "\"internal\"}, \"want\": {\"outcome\": \"server_error\", "
    "\"decision\": \"backoff_retry\"}, \"note\": \"ignored\"},\n"
    " {\"name\": \"bad one\", \"response\": {\"status\": 429, \"headers\": "
    "{\"retry-after\": 3}, \"body\": \"rate limit\"}, \"step\": "
    "{\"slack_s\": 90}, \"want\": {\"outcome\": \"ok\", \"decision\": "
    "\"commit\", \"reason\": \"none\", \"wait_s\": [0, 0]}}]";

START_TEST(test_cli_failing_case)
{
    char *dir = tmpdir_new();
    char *cfg = tmpdir_write(dir, "stepq.json", "{}", 2);
    char *cases =
        tmpdir_write(dir, "cases.json", failing_table, strlen(failing_table));
    const char *argv[] = {"--config", cfg, "policy", "check", cases, NULL};
    struct run_result res;

    run_stepq(argv, NULL, &res);
    ck_assert_int_eq(res.status, 1);
    ck_assert_msg(strstr(res.out, "PASS good\n") != NULL, "%s", res.out);
    ck_assert_msg(strstr(res.out, "FAIL bad one: got outcome=soft_throttle "
                                  "reason=rate_limit decision="
                                  "backoff_retry wait_s=3.000, want "
                                  "outcome=ok reason=none decision=commit "
                                  "wait_s=[0, 0]\n") != NULL,
                  "%s", res.out);
    ck_assert_msg(strstr(res.out, "1 passed, 1 failed\n") != NULL, "%s",
                  res.out);
    run_result_free(&res);
    free(cases);
    free(cfg);
    tmpdir_remove(dir);
}
END_TEST

struct badfile {
    const char *text; /* NULL: the file does not exist */
    const char *args; /* "": policy check FILE; else these args */
    const char *err;  /* expected in stderr */
};

static const struct badfile badfiles[] = {
    {"[{\"name\": \"x\",", "", "not valid JSON (line 1, column"},
    {"{}", "", "must be a JSON array"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200}, \"want\": "
     "{\"outcome\": \"ok\"}}, {\"name\": \"b\", \"response\": {\"status\": "
     "\"429\"}, \"want\": {\"outcome\": \"ok\"}}]",
     "", "[1].response.status"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200}, \"want\": "
     "{\"outcome\": \"fine\"}}]",
     "", "[0].want.outcome: unknown outcome"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200}, \"want\": "
     "{\"outcome\": \"ok\", \"decision\": \"retry\"}}]",
     "", "[0].want.decision"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200}, \"want\": "
     "{\"outcome\": \"ok\", \"wait_s\": [3, 1]}}]",
     "", "[0].want.wait_s"},
    {"[{\"name\": \"a\", \"response\": {\"transport_error\": \"dns\"}, "
     "\"want\": {\"outcome\": \"ok\"}}]",
     "", "[0].response.transport_error"},
    {"[{\"name\": \"a\", \"response\": {}, \"want\": {\"outcome\": "
     "\"ok\"}}]",
     "", "[0].response.status: missing"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200, "
     "\"transport_error\": \"reset\"}, \"want\": {\"outcome\": \"ok\"}}]",
     "", "[0].response: status and transport_error"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200, \"headers\": "
     "{\"x\": [1]}}, \"want\": {\"outcome\": \"ok\"}}]",
     "", "[0].response.headers.x"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200}, \"step\": "
     "{\"breaker\": \"ajar\"}, \"want\": {\"outcome\": \"ok\"}}]",
     "", "[0].step.breaker"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200}, \"step\": "
     "{\"replayable\": \"yes\"}, \"want\": {\"outcome\": \"ok\"}}]",
     "", "[0].step.replayable"},
    {"[{\"response\": {\"status\": 200}, \"want\": {\"outcome\": \"ok\"}}]", "",
     "[0].name"},
    {"[{\"name\": \"a\", \"response\": {\"status\": 200}}]", "",
     "[0].want: missing"},
    {"[{\"name\": \"a\", \"now\": \"yesterday\", \"response\": {\"status\": "
     "200}, \"want\": {\"outcome\": \"ok\"}}]",
     "", "[0].now"},
    {"[3]", "", "[0]: must be an object"},
    {NULL, "", "no such file"},
    {"[]", "policy", "usage: stepq policy check"},
    {"[]", "policy frob", "unknown subcommand 'frob'"},
    {"[]", "policy check", "missing CASES.json"},
    {"[]", "policy check a b", "unexpected argument"},
    {"[]", "policy check --nope", "unknown option --nope"},
};

START_TEST(test_cli_bad_input_exits_2)
{
    const struct badfile *b = &badfiles[_i];
    char *dir = tmpdir_new();
    char *cfg = tmpdir_write(dir, "stepq.json", "{}", 2);
    char *cases = b->text
                      ? tmpdir_write(dir, "c.json", b->text, strlen(b->text))
                      : tmpdir_join(dir, "missing.json");
    const char *argv[8] = {"--config", cfg, "policy", "check", cases, NULL};
    char args[64];
    struct run_result res;

    if (b->args[0] != '\0') {
        int n = 2;
        snprintf(args, sizeof(args), "%s", b->args);
        for (char *t = strtok(args, " "); t != NULL; t = strtok(NULL, " "))
            argv[n++] = t;
        argv[n] = NULL;
    }
    run_stepq(argv, NULL, &res);
    ck_assert_msg(res.status == 2, "exit %d: %s", res.status, res.err);
    ck_assert_msg(strstr(res.err, b->err) != NULL, "stderr: %s", res.err);
    ck_assert_str_eq(res.out, "");
    run_result_free(&res);
    free(cases);
    free(cfg);
    tmpdir_remove(dir);
}
END_TEST

START_TEST(test_cli_help)
{
    const char *argv1[] = {"policy", "--help", NULL};
    const char *argv2[] = {"policy", "check", "--help", NULL};
    struct run_result res;

    run_stepq(argv1, NULL, &res);
    ck_assert_int_eq(res.status, 0);
    ck_assert_ptr_nonnull(strstr(res.out, "usage: stepq policy check"));
    run_result_free(&res);
    run_stepq(argv2, NULL, &res);
    ck_assert_int_eq(res.status, 0);
    ck_assert_ptr_nonnull(strstr(res.out, "N passed, M failed"));
    run_result_free(&res);
}
END_TEST

static const char rule_table[] =
    "[{\"name\": \"llama 500\", \"now\": \"2026-11-30T03:40:00Z\", "
    "\"response\": {\"status\": 500, \"body\": {\"error\": \"slot busy\"}}, "
    "\"want\": {\"outcome\": \"soft_throttle\", \"reason\": \"busy\"}},"
    " {\"name\": \"short wait is a wall\", \"response\": {\"status\": 429, "
    "\"headers\": {\"retry-after\": \"3\"}, \"body\": \"rate limit\"}, "
    "\"want\": {\"outcome\": \"hard_quota\", \"reason\": \"long_wait\"}}]";

START_TEST(test_cli_applies_config)
{
    static const char conf[] =
        "{\"policy\": {\"switch_wait_s\": 2},"
        " \"classify\": [{\"status\": 500, \"body\": \"slot busy\","
        " \"outcome\": \"soft_throttle\", \"reason\": \"busy\"}]}";
    static const char bad[] =
        "{\"classify\": [{\"body\": \"(\", \"outcome\": \"ok\"}]}";
    char *dir = tmpdir_new();
    char *cfg = tmpdir_write(dir, "stepq.json", conf, strlen(conf));
    char *badcfg = tmpdir_write(dir, "bad.json", bad, strlen(bad));
    char *empty = tmpdir_write(dir, "empty.json", "{}", 2);
    char *cases = tmpdir_write(dir, "c.json", rule_table, strlen(rule_table));
    const char *argv[] = {"policy", "check", cases, "--config", cfg, NULL};
    struct run_result res;

    run_stepq(argv, NULL, &res);
    ck_assert_msg(res.status == 0, "%s%s", res.out, res.err);
    ck_assert_ptr_nonnull(strstr(res.out, "2 passed, 0 failed"));
    run_result_free(&res);
    argv[4] = empty;
    run_stepq(argv, NULL, &res);
    ck_assert_int_eq(res.status, 1);
    ck_assert_ptr_nonnull(strstr(res.out, "0 passed, 2 failed"));
    run_result_free(&res);
    argv[4] = badcfg;
    run_stepq(argv, NULL, &res);
    ck_assert_int_eq(res.status, 2);
    ck_assert_msg(strstr(res.err, "classify[0].body: ") != NULL, "%s", res.err);
    run_result_free(&res);
    free(cases);
    free(empty);
    free(badcfg);
    free(cfg);
    tmpdir_remove(dir);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("policy_cases");
    TCase *tc;

    tc = tcase_create("cli");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_cli_table_passes, 0,
                        (int)(sizeof(tables) / sizeof(tables[0])));
    tcase_add_test(tc, test_cli_failing_case);
    tcase_add_loop_test(tc, test_cli_bad_input_exits_2, 0,
                        (int)(sizeof(badfiles) / sizeof(badfiles[0])));
    tcase_add_test(tc, test_cli_help);
    tcase_add_test(tc, test_cli_applies_config);
    suite_add_tcase(s, tc);
    return s;
}

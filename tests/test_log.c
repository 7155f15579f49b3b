/* test_log.c: the attempt line of `stepq work` (common/log.c), which
 * scripts parse: byte for byte what cJSON prints for the same object,
 * whatever the strings hold. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/file.h"
#include "common/json.h"
#include "common/log.h"
#include "tests/support/support.h"

/* log_attempt's line, read back from stderr redirected to a file. */
static char *
line_of(const struct attempt_log *a)
{
    char *dir = tmpdir_new(), *path = tmpdir_join(dir, "err");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600), saved;
    FILE *f;
    char *out = calloc(1, 1 << 16);
    size_t n;

    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    log_attempt(a);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);
    f = fopen(path, "r");
    n = fread(out, 1, (1 << 16) - 1, f);
    out[n] = '\0';
    fclose(f);
    free(path);
    tmpdir_remove(dir);
    return out;
}

/* What the line was when it was built with cJSON. */
static char *
cjson_line(const struct attempt_log *a)
{
    cJSON *o = cJSON_CreateObject();
    char *s, *line;

    cJSON_AddNumberToObject(o, "job", (double)a->job);
    json_add_string(o, "step", a->step);
    cJSON_AddNumberToObject(o, "attempt", a->attempt);
    json_add_string(o, "tier", a->tier);
    if (a->status > 0)
        cJSON_AddNumberToObject(o, "status", a->status);
    else
        cJSON_AddNullToObject(o, "status");
    json_add_string(o, "outcome", a->outcome);
    json_add_string(o, "reason", a->reason);
    json_add_string(o, "decision", a->decision);
    cJSON_AddNumberToObject(o, "delay_ms", (double)a->delay_ms);
    cJSON_AddNumberToObject(o, "latency_ms", (double)a->latency_ms);
    if (a->error != NULL)
        cJSON_AddStringToObject(o, "transport_error", a->error);
    if (a->body != NULL) {
        char *copy = strndup(a->body, a->body_len);
        json_utf8_scrub(copy, strlen(copy));
        cJSON_AddStringToObject(o, "body", copy);
        free(copy);
    } else {
        cJSON_AddNullToObject(o, "body");
    }
    s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    line = malloc(strlen(s) + 2);
    sprintf(line, "%s\n", s);
    free(s);
    return line;
}

static void
assert_same(const struct attempt_log *a)
{
    char *got = line_of(a), *want = cjson_line(a);
    cJSON *parsed = cJSON_Parse(got);

    ck_assert_str_eq(got, want);
    ck_assert_ptr_nonnull(parsed);
    cJSON_Delete(parsed);
    free(got);
    free(want);
}

START_TEST(test_success_line)
{
    struct attempt_log a = {.job = 42,
                            .step = "draft",
                            .attempt = 1,
                            .tier = "primary",
                            .status = 200,
                            .outcome = "success",
                            .reason = "ok",
                            .decision = "commit",
                            .latency_ms = 17};

    assert_same(&a);
    a.job = 3000000000LL; /* ids past 32 bits print whole */
    a.delay_ms = 3600000;
    assert_same(&a);
}
END_TEST

/* Every byte that must be escaped, quotes and backslashes, UTF-8 kept,
 * invalid UTF-8 replaced, a body cut at a NUL, a transport error. */
START_TEST(test_hostile_strings)
{
    static const char body[] = "{\"error\":\"slow \\ down\"}\n\t\r\b\f\x01\x1f"
                               "\x7f caf\xc3\xa9 \xff\xfe end\0after";
    char ctl[33];
    struct attempt_log a = {.job = 7,
                            .step = "st\"ep\\",
                            .attempt = 3,
                            .tier = NULL,
                            .status = 0,
                            .outcome = "transport",
                            .reason = "timeout",
                            .decision = "backoff_retry",
                            .delay_ms = 1500,
                            .latency_ms = 60000,
                            .error = "timeout\n",
                            .body = body,
                            .body_len = sizeof(body) - 1};

    for (int i = 0; i < 32; i++)
        ctl[i] = (char)(i + 1 < 32 ? i + 1 : ' ');
    ctl[32] = '\0';
    assert_same(&a);
    a.reason = ctl;
    a.status = 503;
    a.body = "";
    a.body_len = 0;
    assert_same(&a);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("attempt_line");

    tcase_add_test(tc, test_success_line);
    tcase_add_test(tc, test_hostile_strings);
    suite_add_tcase(s, tc);
    return s;
}

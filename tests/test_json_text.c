/* test_json_text.c: json_text_check (common/json.c), the check every job
 * and config passes before it is parsed: a NUL byte, a raw control
 * character or an escaped NUL is refused at its offset, wherever it falls
 * in the eight-byte words the check reads, and nothing else is; and
 * json_parse_whole, which takes one value and nothing after it. */
#include <check.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "tests/support/support.h"

#define FILL 40 /* bytes of plain text around what is placed */

/* A byte or a text placed at each offset 0 to 23 of FILL bytes of 'a'. */
static const struct text_case {
    const char *what;
    size_t len;
    int refused_at; /* -1: accepted; else the offset of the problem within
                       what */
} cases[] = {
    {"\0", 1, 0},          {"\x01", 1, 0},     {"\x0b", 1, 0},
    {"\x1f", 1, 0},        {"\t", 1, -1},      {"\n", 1, -1},
    {"\r", 1, -1},         {" ", 1, -1},       {"\x7f", 1, -1},
    {"\xc3\xa9", 2, -1},   {"\xff", 1, -1},    {"\\u0000", 6, 0},
    {"\\U0000", 6, -1},    {"\\u00001", 7, 0}, {"\\\\u0000", 7, -1},
    {"\\\\\\u0000", 8, 2}, {"\\\"", 2, -1},    {"\\u0001", 6, -1},
};

START_TEST(test_refused_where_it_is)
{
    const struct text_case *c = &cases[_i];

    for (size_t at = 0; at < 24; at++) {
        char buf[FILL + 16], err[160] = "", want[32];
        size_t n = FILL + c->len;
        int rc;

        memset(buf, 'a', sizeof(buf));
        memcpy(buf + at, c->what, c->len);
        rc = json_text_check(buf, n, err, sizeof(err));
        if (c->refused_at < 0) {
            ck_assert_msg(rc == 0, "case %d at %zu: refused: %s", _i, at, err);
            continue;
        }
        snprintf(want, sizeof(want), "at byte %zu", at + (size_t)c->refused_at);
        ck_assert_msg(rc == -EINVAL && strstr(err, want) != NULL,
                      "case %d at %zu: rc %d, \"%s\", want \"%s\"", _i, at, rc,
                      err, want);
    }
}
END_TEST

/* The end of the text is the end: a NUL or an escape cut by n is not read. */
START_TEST(test_reads_only_n_bytes)
{
    char err[160];

    ck_assert_int_eq(json_text_check("abc\0", 3, err, sizeof(err)), 0);
    ck_assert_int_eq(json_text_check("ab\\u0000", 7, err, sizeof(err)), 0);
    ck_assert_int_eq(json_text_check("", 0, err, sizeof(err)), 0);
}
END_TEST

/* A job file and a config are one JSON value and white space: text after
 * the value is refused where it starts, not read as a second document. */
static const struct whole_case {
    const char *text, *want; /* want NULL: parsed */
} wholes[] = {
    {"{\"a\":1}", NULL},
    {" {\"a\":1}\r\n\t ", NULL},
    {"{\"a\":1} x", "config is not valid JSON (extra text at byte 8)"},
    {"{\"a\":1}{\"b\":2}", "config is not valid JSON (extra text at byte 7)"},
    {"{\"a\":", "config is not valid JSON (near byte 4)"},
};

START_TEST(test_whole_value_only)
{
    const struct whole_case *c = &wholes[_i];
    cJSON *root = NULL;
    char err[160] = "";
    int rc = json_parse_whole(c->text, strlen(c->text), "config is ", &root,
                              err, sizeof(err));

    if (c->want == NULL) {
        ck_assert_msg(rc == 0 && root != NULL, "%s: %s", c->text, err);
    } else {
        ck_assert_int_eq(rc, -EINVAL);
        ck_assert_str_eq(err, c->want);
    }
    cJSON_Delete(root);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("json_text");
    TCase *tc = tcase_create("check");

    tcase_add_loop_test(tc, test_refused_where_it_is, 0,
                        (int)(sizeof(cases) / sizeof(cases[0])));
    tcase_add_test(tc, test_reads_only_n_bytes);
    tcase_add_loop_test(tc, test_whole_value_only, 0,
                        (int)(sizeof(wholes) / sizeof(wholes[0])));
    suite_add_tcase(s, tc);
    return s;
}

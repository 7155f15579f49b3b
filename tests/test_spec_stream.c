/* test_spec_stream.c: bulk input validated as it is read (spec_stream):
 * the same jobs and messages whatever the size of the pieces, batches in
 * input order, a bad job late in the input stopping the stream with its
 * line or index named, and a callback's failure passed through. */
#include "tests/support/support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "spec/spec.h"

#define CHAT(name)                                                             \
    "{\"name\":\"" name "\",\"request\":{\"messages\":[{\"role\":\"user\","    \
    "\"content\":\"a \\\"quoted\\\" [brace} \\\\\"}]}}"
#define JOB(name) "{\"name\":\"" name "\",\"steps\":[" CHAT("s") "]}"

/* What the batches brought: job names in order, batch sizes, and a
 * failure to return at job number fail_at (0: none). */
struct seen {
    char names[64][8];
    size_t n, batches, firsts[64];
    size_t fail_at;
};

static int
on_batch(void *ctx, struct spec_batch *b)
{
    struct seen *s = ctx;

    s->firsts[s->batches++] = b->first;
    for (size_t i = 0; i < b->n; i++) {
        ck_assert_str_eq(b->rows[i].name, b->jobs[i]->name);
        ck_assert_ptr_eq(b->rows[i].text, b->jobs[i]->text);
        snprintf(s->names[s->n++], sizeof(s->names[0]), "%s", b->jobs[i]->name);
        if (s->fail_at != 0 && s->n == s->fail_at)
            return -EIO;
    }
    return 0;
}

/* Feeds text in pieces of piece bytes, then ends the stream. */
static int
feed(const char *text, size_t piece, size_t batch, struct seen *s, char *err,
     size_t errlen)
{
    spec_stream *st = spec_stream_new(NULL, batch, on_batch, s);
    size_t len = strlen(text);
    int rc = 0;

    for (size_t at = 0; rc == 0 && at < len; at += piece)
        rc = spec_stream_feed(st, text + at,
                              len - at < piece ? len - at : piece, err, errlen);
    if (rc == 0)
        rc = spec_stream_end(st, err, errlen);
    spec_stream_free(st);
    return rc;
}

static const char *const inputs[] = {
    "[" JOB("a") ",\n  " JOB("b") " , " JOB("c") "]\n",
    JOB("a") "\n\n" JOB("b") "\r\n" JOB("c"),
    "\n  {\n \"name\": \"a\",\n \"steps\": [" CHAT("s") "]\n}\n",
    /* A UTF-8 byte order mark first (some editors write one) is skipped. */
    "\xEF\xBB\xBF" JOB("a"),
    "\xEF\xBB\xBF[" JOB("a") "," JOB("b") "," JOB("c") "]",
    /* Pretty-printed jobs one after another (issue 42: "line 51: not
     * valid JSON" for a valid line), and JSON lines after one of them. */
    "{\n \"name\": \"a\",\n \"steps\": [" CHAT(
        "s") "]\n}\n"
             "{\n \"name\": \"b\",\n \"steps\": [\n  " CHAT(
                 "s") "\n ]\n}\n\n" JOB("c") "\n",
};
static const size_t counts[] = {3, 3, 1, 1, 3, 3};
static const size_t pieces[] = {1, 2, 7, 64, 100000};

START_TEST(test_pieces_of_any_size_give_the_same_jobs)
{
    size_t in = (size_t)_i / 5, piece = pieces[_i % 5];
    struct seen s = {0};
    char err[256] = "";

    ck_assert_msg(feed(inputs[in], piece, 2, &s, err, sizeof(err)) == 0,
                  "input %zu piece %zu: %s", in, piece, err);
    ck_assert_uint_eq(s.n, counts[in]);
    ck_assert_str_eq(s.names[0], "a");
    ck_assert_str_eq(s.names[s.n - 1], s.n == 3 ? "c" : "a");
}
END_TEST

START_TEST(test_batches_in_input_order)
{
    char text[4096] = "[";
    struct seen s = {0};
    char err[256];

    for (int i = 0; i < 10; i++)
        snprintf(text + strlen(text), sizeof(text) - strlen(text), "%s%s",
                 i ? "," : "", JOB("j"));
    strcat(text, "]");
    ck_assert_int_eq(feed(text, 50, 3, &s, err, sizeof(err)), 0);
    ck_assert_uint_eq(s.n, 10);
    ck_assert_uint_eq(s.batches, 4);
    ck_assert_uint_eq(s.firsts[0], 0);
    ck_assert_uint_eq(s.firsts[3], 9);
}
END_TEST

/* Messages name the job, wherever the pieces cut the input. */
static const struct {
    const char *input, *want;
} bad[] = {
    {JOB("a") "\n" JOB("b") "\n{\"name\":\"c\"}\n" JOB("d"),
     "line 3: steps: missing"},
    {"\n\n{\"name\":1}\n" JOB("b"), "line 3: name: must be a string"},
    /* A pretty-printed job is named by the line it starts on. */
    {"{\n \"name\": \"a\",\n \"steps\": [" CHAT("s") "]\n}\n{\n \"name\": "
                                                     "\"b\"\n}\n",
     "line 5: steps: missing"},
    {JOB("a") "\n{\n \"name\": \"b\",\n \"steps\": [" CHAT("s") "]\n",
     "line 2: not valid JSON"},
    {JOB("a") "\n" JOB("b") " " JOB("c"), "line 2: not valid JSON (extra text"},
    {"{\"name\":1}", "name: must be a string"},
    {"[" JOB("a") "," JOB("b") ",{\"name\":\"c\",\"steps\":[]}]",
     "job 2: steps: must not be empty"},
    {"[" JOB("a") ",]", "not valid JSON"},
    {"[" JOB("a") " " JOB("b") "]", "not valid JSON"},
    {"[" JOB("a"), "not valid JSON"},
    {"[" JOB("a") "] x", "extra text"},
    {JOB("a") " " JOB("b"), "extra text"},
    {"[]", "no job in the input"},
    {" \n ", "no job in the input"},
    {"{nope", "not valid JSON"},
};

START_TEST(test_bad_input_named_whatever_the_pieces)
{
    size_t c = (size_t)_i / 3, piece = pieces[_i % 3 + 1];
    struct seen s = {0};
    char err[256] = "";

    ck_assert_int_eq(feed(bad[c].input, piece, 2, &s, err, sizeof(err)),
                     -EINVAL);
    ck_assert_msg(strstr(err, bad[c].want) != NULL, "case %zu piece %zu: %s", c,
                  piece, err);
}
END_TEST

START_TEST(test_callback_failure_stops_the_stream)
{
    const char *text = JOB("a") "\n" JOB("b") "\n" JOB("c") "\n" JOB("d");
    struct seen s = {.fail_at = 2};
    char err[256];

    ck_assert_int_eq(feed(text, 5, 2, &s, err, sizeof(err)), -EIO);
    ck_assert_uint_eq(s.n, 2);
}
END_TEST

/* A job larger than the limit is refused before the stream holds it
 * whole, in an array and on a line. */
START_TEST(test_job_over_the_limit_refused_early)
{
    size_t n = SPEC_JOB_MAX_BYTES + 10;
    char *big = xmalloc(n + 64);
    struct seen s = {0};
    char err[256];

    for (int k = 0; k < 2; k++) {
        strcpy(big, k ? "[{\"name\":\"" : "{\"name\":\"");
        memset(big + strlen(big), 'x', n);
        big[n] = '\0';
        ck_assert_int_eq(feed(big, 65536, 2, &s, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "larger than the limit"));
    }
    free(big);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("spec_stream");
    TCase *tc = tcase_create("stream");

    tcase_add_loop_test(tc, test_pieces_of_any_size_give_the_same_jobs, 0,
                        (int)(sizeof(inputs) / sizeof(inputs[0])) * 5);
    tcase_add_test(tc, test_batches_in_input_order);
    tcase_add_loop_test(tc, test_bad_input_named_whatever_the_pieces, 0,
                        (int)(sizeof(bad) / sizeof(bad[0])) * 3);
    tcase_add_test(tc, test_callback_failure_stops_the_stream);
    tcase_add_test(tc, test_job_over_the_limit_refused_early);
    suite_add_tcase(s, tc);
    return s;
}

/* test_policy_parse.c: the header parsers against malformed values, and
 * classify on hostile bodies (binary, bad UTF-8, truncated, a MiB of text). */
#include "tests/support/support.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "policy/policy.h"
#include "tests/test_policy_support.h"

/* ---- header parsers against malformed values ---- */

enum pkind { DUR, RA, DATE };

struct prow {
    enum pkind kind;
    const char *in;
    int rc;
    int64_t want;
};

static const struct prow prows[] = {
    {DUR, "6m0s", 0, 360000},
    {DUR, "1.5s", 0, 1500},
    {DUR, "20ms", 0, 20},
    {DUR, "2m59.56s", 0, 179560},
    {DUR, "9m38.016s", 0, 578016},
    {DUR, "1h2m3s", 0, 3723000},
    {DUR, " 7.66s ", 0, 7660},
    {DUR, "0", 0, 0},
    {DUR, "1500us", 0, 2},
    {DUR, "99999999999999999999999h", 0, POLICY_MAX_WAIT_MS},
    {DUR, "", -EINVAL, 0},
    {DUR, "-1s", -EINVAL, 0},
    {DUR, "5", -EINVAL, 0},
    {DUR, "1.5", -EINVAL, 0},
    {DUR, "s", -EINVAL, 0},
    {DUR, "abc", -EINVAL, 0},
    {DUR, "1x", -EINVAL, 0},
    {DUR, "1s garbage", -EINVAL, 0},
    {DUR, "1e3s", -EINVAL, 0},
    {DUR, "1 s", -EINVAL, 0},
    {DUR, "2 seconds", -EINVAL, 0},
    {DUR, "1.s", -EINVAL, 0},
    {DUR, "5sec", -EINVAL, 0},
    {RA, "20", 0, 20000},
    {RA, " 3 ", 0, 3000},
    {RA, "0", 0, 0},
    {RA, "1.5", 0, 1500},
    {RA, "99999999999999999999", 0, POLICY_MAX_WAIT_MS},
    {RA, "Mon, 30 Nov 2026 03:41:00 GMT", 0, 60000},
    {RA, "Sun, 06 Nov 1994 08:49:37 GMT", 0, 0},
    {RA, "Monday, 30-Nov-26 03:40:05 GMT", 0, 5000},
    {RA, "Mon Nov 30 03:40:09 2026", 0, 9000},
    {RA, "Mon, 30 Nov 9999 03:40:00 GMT", 0, POLICY_MAX_WAIT_MS},
    {RA, "-1", -EINVAL, 0},
    {RA, "", -EINVAL, 0},
    {RA, "soon", -EINVAL, 0},
    {RA, "20s", -EINVAL, 0},
    {RA, "1e3", -EINVAL, 0},
    {RA, "Mon, 32 Nov 2026 03:40:00 GMT", -EINVAL, 0},
    {RA, "Mon, 30 Foo 2026 03:40:00 GMT", -EINVAL, 0},
    {RA, "Mon, 30 Nov 2026 25:40:00 GMT", -EINVAL, 0},
    {RA, "Mon, 30 Nov 2026 03:40:00 GMT junk", -EINVAL, 0},
    {RA, "Mon, 30 Nov 2026 03:40:00 PST", -EINVAL, 0},
    {RA, "Mon, 30 Nov 1969 03:40:00 GMT", -EINVAL, 0},
    {DATE, "Sun, 06 Nov 1994 08:49:37 GMT", 0, 784111777000},
    {DATE, "Sunday, 06-Nov-94 08:49:37 GMT", 0, 784111777000},
    {DATE, "Sun Nov  6 08:49:37 1994", 0, 784111777000},
    {DATE, "Sun, 06 Nov 1994 08:49:37", -EINVAL, 0},
    {DATE, "Sun, -6 Nov 1994 08:49:37 GMT", -EINVAL, 0},
    {DATE, "Sun, 06 November 1994 08:49:37 GMT", -EINVAL, 0},
    {DATE, "Sun, 06 Nov 1994 08:60:37 GMT", -EINVAL, 0},
    {DATE, "Sun, 06 Nov 1994 08:49:61 GMT", -EINVAL, 0},
    {DATE, "Sun, 00 Nov 1994 08:49:37 GMT", -EINVAL, 0},
    {DATE, "Sun, 06 Nov 10000 08:49:37 GMT", -EINVAL, 0},
    {DATE, "Sun, 06 Nov 1994 -8:49:37 GMT", -EINVAL, 0},
    {DUR, "-0", -EINVAL, 0},
};

START_TEST(test_header_parser)
{
    const struct prow *r = &prows[_i];
    int64_t got = -42;
    int rc = -1;

    if (r->kind == DUR)
        rc = policy_parse_duration(r->in, &got);
    else if (r->kind == RA)
        rc = policy_parse_retry_after(r->in, NOW, &got);
    else
        rc = policy_parse_http_date(r->in, &got);
    ck_assert_msg(rc == r->rc, "'%s': rc %d", r->in, rc);
    if (r->rc == 0)
        ck_assert_msg(got == r->want, "'%s': got %lld", r->in, (long long)got);
    else
        ck_assert_msg(got == -42, "'%s': out touched on failure", r->in);
}
END_TEST

START_TEST(test_parsers_take_null)
{
    int64_t v = 7;

    ck_assert_int_eq(policy_parse_duration(NULL, &v), -EINVAL);
    ck_assert_int_eq(policy_parse_retry_after(NULL, NOW, &v), -EINVAL);
    ck_assert_int_eq(policy_parse_http_date(NULL, &v), -EINVAL);
    ck_assert_int_eq(v, 7);
}
END_TEST

START_TEST(test_malformed_counts_ignored)
{
    struct policy_header h[] = {
        {"x-ratelimit-remaining-requests", "-3"},
        {"x-ratelimit-remaining-tokens", "99999999999999999999999"},
        {"anthropic-ratelimit-tokens-reset", "2026-13-45T99:00:00Z"},
        {"anthropic-ratelimit-requests-reset",
         "2026-11-30T03:40:00Z 2026-11-30T03:40:00Z 2026-11-30T03:40:00Z "},
        {"retry-after-ms", "abc"},
        {"x-ratelimit-reset", "-1"},
        {NULL, "x"},
        {"retry-after", NULL},
    };
    struct policy_class c;

    classify_one(429, h, 8, "", NULL, &c);
    ck_assert_int_eq(c.outcome, POLICY_SOFT_THROTTLE);
    ck_assert_int_eq(c.remaining_requests, -1);
    ck_assert_int_eq(c.remaining_tokens, INT64_MAX);
    ck_assert_int_eq(c.tokens_reset_at_ms, -1);
    ck_assert_int_eq(c.requests_reset_at_ms, -1);
    ck_assert_int_eq(c.wait_ms, -1);
}
END_TEST

/* ---- hostile bodies ---- */

enum hbody {
    EMPTY,
    BINARY,
    BAD_UTF8,
    TRUNC_JSON,
    MIB_TEXT,
    MIB_OPEN,
    MIB_NEST,
    MIB_ERROR,
    HBODY_COUNT
};

static char *
make_body(enum hbody kind, size_t *len)
{
    size_t mib = 1024 * 1024;
    char *b = xmalloc(mib + 16);

    switch (kind) {
    case EMPTY:
        *len = 0;
        break;
    case BINARY:
        for (size_t i = 0; i < 4096; i++)
            b[i] = (char)(i * 7 % 256);
        *len = 4096;
        break;
    case BAD_UTF8:
        memcpy(b, "{\"error\":\"\xff\xfe\xc0\xaf rate limit\xed\xa0\x80\"}",
               27);
        *len = 27;
        break;
    case TRUNC_JSON:
        memcpy(b, "{\"choices\":[{\"message\":{\"content\":\"hel", 38);
        *len = 38;
        break;
    case MIB_TEXT:
        memset(b, 'a', mib);
        *len = mib;
        break;
    case MIB_OPEN:
        memset(b, '[', mib);
        *len = mib;
        break;
    case MIB_NEST:
        for (size_t i = 0; i + 5 <= mib; i += 5)
            memcpy(b + i, "{\"a\":", 5);
        *len = mib - mib % 5;
        break;
    default:
        for (size_t i = 0; i + 9 <= mib; i += 9)
            memcpy(b + i, "{\"error\":", 9);
        *len = mib - mib % 9;
        break;
    }
    return b;
}

START_TEST(test_hostile_body)
{
    static const int statuses[] = {200, 429, 500};
    struct config_rule r[] = {{0, "zzz$", "x-a", "b", "ok", NULL}};
    policy_rules *rules = rules_of(r, 1);
    struct policy_config cfg;
    size_t len = 0;
    char *body = make_body((enum hbody)_i, &len);

    policy_config_init(&cfg, NULL, rules);
    for (size_t s = 0; s < 3; s++) {
        struct policy_input in = {.status = statuses[s]};
        struct policy_streak st = {0, 0};
        struct policy_class c;
        classify_raw(&in, body, len, &cfg, &st, &c);
        ck_assert_int_lt(c.outcome, POLICY_OUTCOME_COUNT);
        ck_assert_int_eq(c.rule, -1);
        if (statuses[s] != 200)
            ck_assert(c.outcome != POLICY_OK && c.reason != NULL);
    }
    free(body);
    policy_rules_free(rules);
}
END_TEST

START_TEST(test_wall_word_after_nul)
{
    static const char body[] = "\0\0\0{\"error\":\"insufficient_quota\"}";
    struct policy_input in = {.status = 429};
    struct policy_class c;

    classify_raw(&in, body, sizeof(body) - 1, NULL, NULL, &c);
    ck_assert_int_eq(c.outcome, POLICY_HARD_QUOTA);
    /* and a NULL body with a length is read as empty */
    in.body = NULL;
    in.body_len = 99;
    in.now_ms = NOW;
    policy_classify(&in, NULL, NULL, &c);
    ck_assert_int_eq(c.outcome, POLICY_SOFT_THROTTLE);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("policy_parse");
    TCase *tc;

    tc = tcase_create("parsers");
    tcase_add_loop_test(tc, test_header_parser, 0,
                        (int)(sizeof(prows) / sizeof(prows[0])));
    tcase_add_test(tc, test_parsers_take_null);
    tcase_add_test(tc, test_malformed_counts_ignored);
    suite_add_tcase(s, tc);

    tc = tcase_create("hostile_bodies");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_hostile_body, 0, HBODY_COUNT);
    tcase_add_test(tc, test_wall_word_after_nul);
    suite_add_tcase(s, tc);
    return s;
}

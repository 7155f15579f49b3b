/* test_mock_limits.c: the mock's limiter shapes over real HTTP.
 *
 * Each test starts the real `stepq mock` with a "limit" script and talks to
 * it over loopback: a token bucket gives its burst and then 429s until it
 * refills, a fixed window resets on its epoch-aligned boundary, a sliding
 * window frees one slot at a time, and every answer carries the headers of
 * the provider style asked for. Waits poll with deadlines; none is fixed.
 */
#include "tests/support/support.h"

#include <ctype.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/file.h"
#include "mock/internal.h"
#include "tests/support/httpcl.h"
#include "tests/support/mockproc.h"

#define BIG_BODY(n)                                                            \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"                  \
    "\"max_tokens\":" #n "}"

static int64_t
hnum(const struct reply *r, const char *name)
{
    const char *v = hdr(r, name);
    char *end = NULL;
    long long n;

    ck_assert_msg(v != NULL, "no header %s", name);
    n = strtoll(v, &end, 10);
    ck_assert_msg(end != v && *end == '\0', "%s: not a number: %s", name, v);
    return (int64_t)n;
}

/* go_ms parses a Go duration as OpenAI sends it ("120ms", "1.5s", "6m0s")
 * and fails the test on anything else. */
static int64_t
go_ms(const char *s)
{
    double total = 0;
    const char *p = s;

    ck_assert_ptr_nonnull(s);
    ck_assert_msg(*s != '\0', "empty duration");
    while (*p) {
        char *end;
        double v = strtod(p, &end);
        ck_assert_msg(end != p && isdigit((unsigned char)*p), "bad: %s", s);
        double unit = 0;
        size_t skip = 1;
        if (strncmp(end, "ms", 2) == 0) {
            unit = 1;
            skip = 2;
        } else if (*end == 'h') {
            unit = 3600000;
        } else if (*end == 'm') {
            unit = 60000;
        } else if (*end == 's') {
            unit = 1000;
        }
        ck_assert_msg(unit > 0, "bad duration unit: %s", s);
        total += v * unit;
        p = end + skip;
    }
    return (int64_t)(total + 0.5);
}

/* until_ok repeats path every 10 ms until a 200 or 5 s pass (every other
 * answer must be a 429). Returns the monotonic time the 200 was received. */
static int64_t
until_ok(int port, const char *path)
{
    int64_t deadline = clock_mono_ms() + 5000;
    struct reply r = {0};

    for (;;) {
        chat(port, path, &r);
        if (r.status == 200)
            break;
        ck_assert_int_eq(r.status, 429);
        reply_free(&r);
        ck_assert_msg(clock_mono_ms() < deadline, "no 200 within 5 s");
        poll(NULL, 0, 10);
    }
    reply_free(&r);
    return clock_mono_ms();
}

/* ---- token bucket -------------------------------------------------------- */

START_TEST(test_bucket_burst_then_refusal_then_refill)
{
    /* 60 rpm: one request a second, three held. */
    int port = mockproc_fixture_start("limit_bucket_rpm60_burst3.json");
    struct reply r;
    int64_t wait_ms, t429, t_ok;

    for (int i = 0; i < 3; i++) {
        chat(port, CHAT, &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_int_eq(hnum(&r, "x-ratelimit-remaining-requests"), 2 - i);
        reply_free(&r);
    }
    chat(port, CHAT, &r);
    t429 = clock_mono_ms();
    ck_assert_int_eq(r.status, 429);
    wait_ms = hnum(&r, "retry-after-ms");
    ck_assert(wait_ms > 0 && wait_ms <= 1000);
    ck_assert_int_eq(hnum(&r, "retry-after"), 1);
    reply_free(&r);
    /* One unit comes back 1/rate after the first send, not sooner. */
    t_ok = until_ok(port, CHAT);
    ck_assert_int_ge(t_ok - t429, wait_ms - 15);
    /* And only one: the next request is refused again. */
    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 429);
    reply_free(&r);
}
END_TEST

START_TEST(test_bucket_default_burst_is_one_second)
{
    /* 180 rpm holds 3; a fourth at once is refused. */
    int port = mockproc_fixture_start("limit_bucket_rpm180.json");
    struct reply r;
    int ok = 0;

    for (int i = 0; i < 4; i++) {
        chat(port, CHAT, &r);
        ok += r.status == 200;
        if (i == 3) {
            ck_assert_int_eq(r.status, 429);
            ck_assert_int_le(hnum(&r, "retry-after-ms"), 334);
        }
        reply_free(&r);
    }
    ck_assert_int_eq(ok, 3);
}
END_TEST

START_TEST(test_bucket_openai_headers_on_success_and_429)
{
    int port = mockproc_fixture_start("limit_bucket_rpm60_burst1.json");
    struct reply r;
    cJSON *j;

    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(hnum(&r, "x-ratelimit-limit-requests"), 60);
    ck_assert_int_eq(hnum(&r, "x-ratelimit-remaining-requests"), 0);
    ck_assert_int_le(go_ms(hdr(&r, "x-ratelimit-reset-requests")), 1000);
    ck_assert_int_ge(go_ms(hdr(&r, "x-ratelimit-reset-requests")), 900);
    ck_assert_ptr_null(hdr(&r, "retry-after"));
    ck_assert_ptr_null(hdr(&r, "x-ratelimit-limit-tokens"));
    reply_free(&r);
    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 429);
    ck_assert_int_eq(hnum(&r, "x-ratelimit-remaining-requests"), 0);
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "error.type"), "requests");
    ck_assert_str_eq(jstr(j, "error.code"), "rate_limit_exceeded");
    ck_assert(cJSON_IsNull(jget(j, "error.param")));
    ck_assert_ptr_nonnull(
        strstr(jstr(j, "error.message"), "requests per min (RPM): Limit 60"));
    ck_assert_ptr_nonnull(strstr(jstr(j, "error.message"), "try again in"));
    cJSON_Delete(j);
    reply_free(&r);
}
END_TEST

START_TEST(test_bucket_tokens_meter_and_too_large)
{
    /* Each request costs its prompt (bytes / 4) plus max_tokens. */
    int port = mockproc_fixture_start("limit_bucket_tpm60000.json");
    struct reply r;
    cJSON *j;

    req(port, "POST", CHAT, NULL, BIG_BODY(400), &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(hnum(&r, "x-ratelimit-limit-tokens"), 60000);
    ck_assert_int_le(hnum(&r, "x-ratelimit-remaining-tokens"), 600);
    ck_assert_ptr_null(hdr(&r, "x-ratelimit-limit-requests"));
    reply_free(&r);
    req(port, "POST", CHAT, NULL, BIG_BODY(400), &r);
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
    req(port, "POST", CHAT, NULL, BIG_BODY(400), &r);
    ck_assert_int_eq(r.status, 429);
    j = body_json(&r);
    ck_assert_str_eq(jstr(j, "error.type"), "tokens");
    cJSON_Delete(j);
    ck_assert_int_gt(hnum(&r, "retry-after-ms"), 0);
    reply_free(&r);
    /* More than the bucket holds can never pass: no wait is offered. */
    req(port, "POST", CHAT, NULL, BIG_BODY(2000), &r);
    ck_assert_int_eq(r.status, 429);
    ck_assert_ptr_null(hdr(&r, "retry-after"));
    j = body_json(&r);
    ck_assert_ptr_nonnull(strstr(jstr(j, "error.message"), "too large"));
    cJSON_Delete(j);
    reply_free(&r);
}
END_TEST

/* ---- fixed window ---------------------------------------------------------
 */

START_TEST(test_fixed_window_resets_at_the_boundary)
{
    int port = mockproc_fixture_start("limit_fixed_rpm2_1s.json");
    struct reply r = {0};
    int64_t reset, wall, boundary, t_ok;
    int n = 0;

    /* Use up a window (a boundary may pass meanwhile: keep going). */
    do {
        reply_free(&r);
        chat(port, CHAT, &r);
        ck_assert_int_lt(++n, 8);
    } while (r.status == 200);
    ck_assert_int_eq(r.status, 429);
    reset = go_ms(hdr(&r, "x-ratelimit-reset-requests"));
    wall = clock_now_ms() + reset;
    boundary = clock_mono_ms() + reset;
    /* Windows are aligned to the epoch: the reset names a whole second. */
    ck_assert_int_le(wall % 1000 < 500 ? wall % 1000 : 1000 - wall % 1000, 20);
    ck_assert_int_eq(hnum(&r, "retry-after-ms"), reset);
    reply_free(&r);
    t_ok = until_ok(port, CHAT);
    ck_assert_int_ge(t_ok, boundary - 20);
    /* A fresh window holds the whole limit at once, then refuses. */
    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 429);
    reply_free(&r);
}
END_TEST

START_TEST(test_fixed_window_anthropic_headers)
{
    int port = mockproc_fixture_start("limit_fixed_rpm1_anthropic.json");
    struct reply r[2];
    int64_t reset[2];
    cJSON *j;

    for (int i = 0; i < 2; i++) {
        chat(port, CHAT, &r[i]);
        ck_assert_int_eq(hnum(&r[i], "anthropic-ratelimit-requests-limit"), 1);
        ck_assert_int_eq(hnum(&r[i], "anthropic-ratelimit-requests-remaining"),
                         0);
        ck_assert_msg(
            clock_parse_utc(hdr(&r[i], "anthropic-ratelimit-requests-reset"),
                            &reset[i]) == 0,
            "reset is not RFC 3339");
        /* The minute resets at :00. */
        ck_assert_int_eq(reset[i] % 60000, 0);
        ck_assert_ptr_null(hdr(&r[i], "x-ratelimit-limit-requests"));
    }
    ck_assert_int_eq(r[0].status, 200);
    ck_assert_int_eq(r[1].status, 429);
    ck_assert_int_ge(hnum(&r[1], "retry-after"), 1);
    ck_assert_int_le(hnum(&r[1], "retry-after"), 60);
    ck_assert_ptr_null(hdr(&r[1], "retry-after-ms"));
    j = body_json(&r[1]);
    ck_assert_str_eq(jstr(j, "type"), "error");
    ck_assert_str_eq(jstr(j, "error.type"), "rate_limit_error");
    ck_assert_ptr_nonnull(strstr(jstr(j, "error.message"), "rate limit"));
    cJSON_Delete(j);
    for (int i = 0; i < 2; i++)
        reply_free(&r[i]);
}
END_TEST

START_TEST(test_anthropic_tokens_headers)
{
    int port = mockproc_fixture_start("limit_bucket_anthropic_tokens.json");
    struct reply r;
    int64_t reset;

    req(port, "POST", CHAT, NULL, BIG_BODY(400), &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(hnum(&r, "anthropic-ratelimit-requests-limit"), 60);
    ck_assert_int_eq(hnum(&r, "anthropic-ratelimit-tokens-limit"), 60000);
    ck_assert_int_le(hnum(&r, "anthropic-ratelimit-tokens-remaining"), 600);
    ck_assert_int_eq(
        clock_parse_utc(hdr(&r, "anthropic-ratelimit-tokens-reset"), &reset),
        0);
    /* Full again within a second or so, never in the past. */
    ck_assert_int_ge(reset, clock_now_ms() - 100);
    ck_assert_int_le(reset, clock_now_ms() + 2000);
    ck_assert_ptr_null(hdr(&r, "x-ratelimit-limit-tokens"));
    reply_free(&r);
}
END_TEST

/* ---- sliding window -------------------------------------------------------
 */

START_TEST(test_sliding_window_frees_one_slot_at_a_time)
{
    int port = mockproc_fixture_start("limit_sliding_rpm2_400ms.json");
    struct reply r;
    int64_t t_first, t_ok;

    chat(port, CHAT, &r);
    t_first = clock_mono_ms();
    ck_assert_int_eq(hnum(&r, "x-ratelimit-remaining-requests"), 1);
    reply_free(&r);
    poll(NULL, 0, 100); /* spread the two sends apart */
    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(hnum(&r, "x-ratelimit-remaining-requests"), 0);
    reply_free(&r);
    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 429);
    ck_assert_int_le(hnum(&r, "retry-after-ms"), 400);
    reply_free(&r);
    t_ok = until_ok(port, CHAT);
    ck_assert_int_ge(t_ok - t_first, 400 - 15);
    /* The second slot frees later: right now there is none. */
    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 429);
    reply_free(&r);
}
END_TEST

START_TEST(test_headers_none_sends_none)
{
    int port = mockproc_fixture_start("limit_sliding_headers_none.json");
    struct reply r;

    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_null(hdr(&r, "x-ratelimit-limit-requests"));
    reply_free(&r);
    chat(port, CHAT, &r);
    ck_assert_int_eq(r.status, 429);
    ck_assert_ptr_null(hdr(&r, "retry-after"));
    ck_assert_ptr_null(hdr(&r, "x-ratelimit-remaining-requests"));
    reply_free(&r);
}
END_TEST

START_TEST(test_routes_limit_apart_and_log_counts)
{
    int port = mockproc_fixture_start("limit_routes_a_b.json");
    const char *paths[] = {"/a" CHAT, "/a" CHAT, "/b" CHAT, "/b" CHAT};
    int want[] = {200, 429, 200, 200};
    struct reply r;
    char *lp = tmpdir_join(mockproc_dir, "log.jsonl"), *text = NULL;
    char *save = NULL;
    size_t len = 0;
    int i = 0;

    for (i = 0; i < 4; i++) {
        chat(port, paths[i], &r);
        ck_assert_int_eq(r.status, want[i]);
        reply_free(&r);
    }
    ck_assert_int_eq(mockproc_stop(&mockproc_mp), 0);
    ck_assert_int_eq(file_read_all(lp, 1 << 20, &text, &len), 0);
    i = 0;
    for (char *l = strtok_r(text, "\n", &save); l != NULL;
         l = strtok_r(NULL, "\n", &save), i++) {
        cJSON *j = cJSON_Parse(l);
        ck_assert_ptr_nonnull(j);
        ck_assert_str_eq(jstr(j, "route"), i < 2 ? "/a" : "/b");
        ck_assert_int_eq((int)jnum(j, "status"), want[i]);
        ck_assert_str_eq(jstr(j, "kind"),
                         want[i] == 429 ? "rate_limit" : "chat");
        ck_assert_double_gt(jnum(j, "ts_ms"), 1.7e12);
        cJSON_Delete(j);
    }
    ck_assert_int_eq(i, 4);
    free(text);
    free(lp);
}
END_TEST

/* ---- formats and bad specs ------------------------------------------------
 */

static const struct {
    int64_t ms;
    const char *want;
} durations[] = {
    {0, "0s"},
    {1, "1ms"},
    {120, "120ms"},
    {1000, "1s"},
    {1500, "1.5s"},
    {8640, "8.64s"},
    {60000, "1m0s"},
    {360000, "6m0s"},
    {179560, "2m59.56s"},
    {3600000, "1h0m0s"},
    {3723004, "1h2m3.004s"},
};

START_TEST(test_go_durations)
{
    char buf[32];

    mock_go_duration(durations[_i].ms, buf, sizeof(buf));
    ck_assert_str_eq(buf, durations[_i].want);
    ck_assert_int_eq(go_ms(buf), durations[_i].ms);
}
END_TEST

static const struct {
    const char *script, *want;
} bad_limits[] = {
    {"{\"routes\": [{\"path\": \"/a\", \"limit\": {\"shape\": \"leaky\", "
     "\"rpm\": 5}}]}",
     "routes[0].limit.shape: must be one of token_bucket"},
    {"{\"limit\": {\"rpm\": 5}}", "limit.shape: missing"},
    {"{\"limit\": {\"shape\": \"token_bucket\"}}", "limit: needs \"rpm\""},
    {"{\"limit\": {\"shape\": \"fixed_window\", \"rpm\": 5, \"burst\": 2}}",
     "limit.burst: only for shape token_bucket"},
    {"{\"limit\": {\"shape\": \"token_bucket\", \"rpm\": 5, "
     "\"window_ms\": 100}}",
     "limit.window_ms: only for"},
    {"{\"limit\": {\"shape\": \"token_bucket\", \"rpm\": 0}}",
     "limit.rpm: must be between"},
    {"{\"limit\": {\"shape\": \"sliding_window\", \"rpm\": 5, "
     "\"headers\": \"azure\"}}",
     "limit.headers: must be one of openai, anthropic, none"},
    {"{\"rpm\": 5, \"limit\": {\"shape\": \"token_bucket\", \"rpm\": 5}}",
     "rpm: cannot be combined with \"limit\""},
    {"{\"limit\": {\"shape\": \"token_bucket\", \"rpm\": 5, \"brust\": 1}}",
     "limit.brust: unknown field"},
    {"{\"limit\": \"fast\"}", "limit: must be an object"},
    {"{\"limit\": {\"shape\": \"token_bucket\", \"tpm\": 5, "
     "\"burst\": 3}}",
     "limit.burst: needs \"rpm\""},
};

START_TEST(test_bad_limit_exits_2_naming_path)
{
    char *sp = tmpdir_write(mockproc_dir, "bad.json", bad_limits[_i].script,
                            strlen(bad_limits[_i].script));
    const char *argv[] = {"mock", "--check", "--script", sp, NULL};
    struct run_result res;

    run_stepq(argv, NULL, &res);
    ck_assert_int_eq(res.status, 2);
    ck_assert_msg(strstr(res.err, bad_limits[_i].want) != NULL,
                  "stderr lacks \"%s\": %s", bad_limits[_i].want, res.err);
    run_result_free(&res);
    free(sp);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("mock_limits");
    TCase *bucket = tcase_create("token_bucket");
    TCase *windows = tcase_create("windows");
    TCase *spec = tcase_create("spec");
    TCase *all[] = {bucket, windows, spec};

    tcase_add_test(bucket, test_bucket_burst_then_refusal_then_refill);
    tcase_add_test(bucket, test_bucket_default_burst_is_one_second);
    tcase_add_test(bucket, test_bucket_openai_headers_on_success_and_429);
    tcase_add_test(bucket, test_bucket_tokens_meter_and_too_large);
    tcase_add_test(windows, test_fixed_window_resets_at_the_boundary);
    tcase_add_test(windows, test_fixed_window_anthropic_headers);
    tcase_add_test(windows, test_anthropic_tokens_headers);
    tcase_add_test(windows, test_sliding_window_frees_one_slot_at_a_time);
    tcase_add_test(windows, test_headers_none_sends_none);
    tcase_add_test(windows, test_routes_limit_apart_and_log_counts);
    tcase_add_loop_test(spec, test_go_durations, 0,
                        (int)(sizeof(durations) / sizeof(durations[0])));
    tcase_add_loop_test(spec, test_bad_limit_exits_2_naming_path, 0,
                        (int)(sizeof(bad_limits) / sizeof(bad_limits[0])));
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        tcase_add_checked_fixture(all[i], mockproc_setup, mockproc_teardown);
        tcase_set_timeout(all[i], 20);
        suite_add_tcase(s, all[i]);
    }
    return s;
}

/* test_price.c: what an attempt costs (common/price.c) from the usage each
 * provider's answer reports (http/build.c http_usage_read), and the
 * tier's "price" in the config: what it accepts and refuses.
 */
#include "tests/support/support.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/config.h"
#include "common/price.h"
#include "http/http.h"

#define TIER(extra)                                                            \
    "{\"tiers\":[{\"name\":\"t\",\"base_url\":\"https://h.example/v1\","       \
    "\"model\":\"m\"" extra "}]}"

/* $0.15 and $0.60 per million in and out, cache reads $0.075, writes
 * $0.1875: 150, 600, 75 and 187.5 nano-dollars a token. */
static const struct price P = {true,     150000000, 600000000,
                               75000000, 187500000, 0};

/* ---- usage, one row per provider shape ---------------------------------- */

struct shape {
    const char *what;
    const char *body;
    struct price_usage want;
    int rc;       /* of price_cost */
    int64_t nusd; /* when rc is 0 */
};

static const struct shape shapes[] = {
    {"openai chat, cached prompt",
     "{\"choices\":[],\"usage\":{\"prompt_tokens\":1000,"
     "\"completion_tokens\":200,\"total_tokens\":1200,"
     "\"prompt_tokens_details\":{\"cached_tokens\":400}}}",
     {1000, 200, 400, -1},
     0,
     600 * 150 + 400 * 75 + 200 * 600},
    {"openai chat, nothing cached",
     "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3}}",
     {10, 3, -1, -1},
     0,
     10 * 150 + 3 * 600},
    {"openai responses",
     "{\"usage\":{\"input_tokens\":1000,\"output_tokens\":10,"
     "\"input_tokens_details\":{\"cached_tokens\":200}}}",
     {1000, 10, 200, -1},
     0,
     800 * 150 + 200 * 75 + 10 * 600},
    {"anthropic, cache read and written",
     "{\"usage\":{\"input_tokens\":100,\"output_tokens\":50,"
     "\"cache_read_input_tokens\":1000,"
     "\"cache_creation_input_tokens\":500}}",
     {1600, 50, 1000, 500},
     0,
     100 * 150 + 1000 * 75 + 93750 + 50 * 600},
    {"anthropic, no cache",
     "{\"usage\":{\"input_tokens\":7,\"output_tokens\":5,"
     "\"cache_read_input_tokens\":0,\"cache_creation_input_tokens\":0}}",
     {7, 5, 0, 0},
     0,
     7 * 150 + 5 * 600},
    {"gemini, cached and thinking",
     "{\"usageMetadata\":{\"promptTokenCount\":1000,"
     "\"candidatesTokenCount\":100,\"thoughtsTokenCount\":50,"
     "\"cachedContentTokenCount\":600,\"totalTokenCount\":1150}}",
     {1000, 150, 600, -1},
     0,
     400 * 150 + 600 * 75 + 150 * 600},
    {"gemini, tool prompt",
     "{\"usageMetadata\":{\"promptTokenCount\":10,"
     "\"toolUsePromptTokenCount\":5,\"candidatesTokenCount\":1}}",
     {15, 1, -1, -1},
     0,
     15 * 150 + 600},
    {"deepseek cache hits",
     "{\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":10,"
     "\"prompt_cache_hit_tokens\":40,\"prompt_cache_miss_tokens\":60}}",
     {100, 10, 40, -1},
     0,
     60 * 150 + 40 * 75 + 10 * 600},
    {"cached above the prompt is the prompt",
     "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":0,"
     "\"prompt_tokens_details\":{\"cached_tokens\":50}}}",
     {10, 0, 50, -1},
     0,
     10 * 75},
    {"no usage", "{\"choices\":[]}", {-1, -1, -1, -1}, -EINVAL, 0},
    {"usage not an object", "{\"usage\":7}", {-1, -1, -1, -1}, -EINVAL, 0},
    {"prompt only",
     "{\"usage\":{\"prompt_tokens\":5}}",
     {5, -1, -1, -1},
     -EINVAL,
     0},
    {"counts that are not counts",
     "{\"usage\":{\"prompt_tokens\":-3,\"completion_tokens\":1.5}}",
     {-1, -1, -1, -1},
     -EINVAL,
     0},
    {"a trillion tokens at most",
     "{\"usage\":{\"prompt_tokens\":1e15,\"completion_tokens\":0}}",
     {INT64_C(1000000000000000), 0, -1, -1},
     0,
     INT64_C(150000000000000)},
};

START_TEST(test_cost_from_each_usage_shape)
{
    const struct shape *s = &shapes[_i];
    cJSON *root = cJSON_Parse(s->body);
    struct price_usage u;
    int64_t nusd = -42;

    ck_assert_ptr_nonnull(root);
    http_usage_read(root, &u);
    ck_assert_msg(memcmp(&u, &s->want, sizeof(u)) == 0,
                  "%s: got %lld %lld %lld %lld", s->what, (long long)u.input,
                  (long long)u.output, (long long)u.cache_read,
                  (long long)u.cache_write);
    ck_assert_int_eq(price_cost(&P, &u, &nusd), s->rc);
    ck_assert_int_eq(nusd, s->rc == 0 ? s->nusd : -42);
    cJSON_Delete(root);
}
END_TEST

/* A chat answer carries the same usage, and a total when it says none. */
START_TEST(test_chat_answer_carries_usage)
{
    const char *b = "{\"choices\":[{\"message\":{\"content\":\"x\"}}],"
                    "\"usage\":{\"input_tokens\":3,\"output_tokens\":2,"
                    "\"cache_read_input_tokens\":4}}";
    struct http_chat_answer a;

    ck_assert_int_eq(http_chat_parse(b, strlen(b), &a), 0);
    ck_assert_int_eq(a.usage.input, 7);
    ck_assert_int_eq(a.usage.cache_read, 4);
    ck_assert_int_eq(a.total_tokens, 9);
    http_chat_answer_cleanup(&a);
}
END_TEST

/* ---- arithmetic ------------------------------------------------------- */

/* The attempt is rounded once, half up: two half nano-dollars make one. */
START_TEST(test_cost_is_rounded_once)
{
    struct price half = {.set = true, .input = 500000, .output = 500000};
    struct price one_half = {.set = true, .input = 1500000};
    struct price_usage u = {1, 1, 0, 0};
    int64_t n = 0;

    ck_assert_int_eq(price_cost(&half, &u, &n), 0);
    ck_assert_int_eq(n, 1);
    u = (struct price_usage){3, 0, -1, -1};
    ck_assert_int_eq(price_cost(&one_half, &u, &n), 0);
    ck_assert_int_eq(n, 5); /* 4.5 */
    u = (struct price_usage){2500000, 0, -1, -1};
    ck_assert_int_eq(price_cost(&one_half, &u, &n), 0);
    ck_assert_int_eq(n, 3750000);
}
END_TEST

START_TEST(test_no_price_no_cost)
{
    struct price none = {0};
    struct price_usage u = {1, 1, 0, 0};
    int64_t n = -1;

    ck_assert_int_eq(price_cost(&none, &u, &n), -ENOENT);
    ck_assert_int_eq(price_worst_case(&none, 1, 1, &n), -ENOENT);
    ck_assert_int_eq(n, -1);
}
END_TEST

/* What a budget reserves: all input uncached, all of max_tokens, the
 * request's own price. */
START_TEST(test_worst_case_is_input_and_max_tokens)
{
    struct price p = P;
    int64_t n = 0;

    p.per_request = 1000000; /* $0.001 */
    ck_assert_int_eq(price_worst_case(&p, 1000, 500, &n), 0);
    ck_assert_int_eq(n, 1000 * 150 + 500 * 600 + 1000000);
    ck_assert_int_eq(price_worst_case(&p, -1, 0, &n), 0);
    ck_assert_int_eq(n, 1000000);
}
END_TEST

START_TEST(test_format_is_exact)
{
    char b[32];

    ck_assert_str_eq(price_format(0, b, sizeof(b)), "$0");
    ck_assert_str_eq(price_format(1450000, b, sizeof(b)), "$0.00145");
    ck_assert_str_eq(price_format(INT64_C(12500000000), b, sizeof(b)), "$12.5");
    ck_assert_str_eq(price_format(1, b, sizeof(b)), "$0.000000001");
    ck_assert_str_eq(price_format(-2000000000, b, sizeof(b)), "-$2");
    ck_assert(price_usd(1450000) == 0.00145);
}
END_TEST

/* ---- the config ---------------------------------------------------------- */

START_TEST(test_config_price_read_in_nano_dollars)
{
    const char *t = TIER(",\"price\":{\"input_per_mtok\":0.15,"
                         "\"output_per_mtok\":0.6,"
                         "\"cached_input_per_mtok\":0.075,"
                         "\"per_request\":0.002}");
    struct config *cfg = NULL;
    char err[256];

    ck_assert_int_eq(config_parse(t, strlen(t), NULL, &cfg, err, sizeof(err)),
                     0);
    ck_assert(cfg->tiers[0].price.set);
    ck_assert_int_eq(cfg->tiers[0].price.input, 150000000);
    ck_assert_int_eq(cfg->tiers[0].price.output, 600000000);
    ck_assert_int_eq(cfg->tiers[0].price.cache_read, 75000000);
    ck_assert_int_eq(cfg->tiers[0].price.cache_write, 150000000); /* input */
    ck_assert_int_eq(cfg->tiers[0].price.per_request, 2000000);
    config_free(cfg);
}
END_TEST

/* No price is no cost; "price": {} is a free tier: everything $0. */
START_TEST(test_config_price_absent_or_free)
{
    const char *none = TIER(""), *free_tier = TIER(",\"price\":{}");
    struct config *a = NULL, *b = NULL;
    char err[256];

    ck_assert_int_eq(
        config_parse(none, strlen(none), NULL, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(
        config_parse(free_tier, strlen(free_tier), NULL, &b, err, sizeof(err)),
        0);
    ck_assert(!a->tiers[0].price.set);
    ck_assert(b->tiers[0].price.set);
    ck_assert_int_eq(b->tiers[0].price.output, 0);
    config_free(a);
    config_free(b);
}
END_TEST

struct bad {
    const char *extra;
    const char *want;
};

static const struct bad bad_prices[] = {
    {",\"price\":{\"cached_per_mtok\":1}",
     "tiers[0].price.cached_per_mtok: unknown field"},
    {",\"price\":{\"input_per_mtok\":-0.1}",
     "tiers[0].price.input_per_mtok: must be between 0 and 1000"},
    {",\"price\":{\"output_per_mtok\":\"0.6\"}",
     "tiers[0].price.output_per_mtok: must be a number"},
    {",\"price\":{\"per_request\":1001}",
     "tiers[0].price.per_request: must be between 0 and 1000"},
    {",\"price\":0.15", "tiers[0].price: must be an object"},
};

/* A config with tier t and budgets (the JSON array's members). */
#define BUDGETS(members)                                                       \
    "{\"tiers\":[{\"name\":\"t\",\"base_url\":\"https://h.example/v1\","       \
    "\"model\":\"m\"}],\"budgets\":[" members "]}"

static const struct bad bad_budgets[] = {
    {BUDGETS("{\"name\":\"b\"}"), "budgets[0].usd: missing"},
    {BUDGETS("{\"name\":\"b\",\"usd\":-1}"),
     "budgets[0].usd: must be between 0 and"},
    {BUDGETS("{\"name\":\"b\",\"usd\":1,\"per\":\"fortnight\"}"),
     "budgets[0].per: must be hour, day, week, month or schedule_run"},
    {BUDGETS("{\"name\":\"b\",\"usd\":1,\"tiers\":[\"paid\"]}"),
     "budgets[0].tiers[0]: must name a tier of the config"},
    {BUDGETS("{\"name\":\"b\",\"usd\":1,\"tiers\":[]}"),
     "budgets[0].tiers: must be a non-empty array"},
    {BUDGETS("{\"name\":\"b\",\"usd\":1,\"schedule\":\"n\"}"),
     "budgets[0].schedule: only with \"per\": \"schedule_run\""},
    {BUDGETS("{\"name\":\"b\",\"usd\":1,\"per\":\"schedule_run\","
             "\"schedule\":\"n\"}"),
     "budgets[0].schedule: must name a schedule of the config"},
    {BUDGETS("{\"name\":\"b\",\"usd\":1},{\"name\":\"b\",\"usd\":2}"),
     "budgets[1]: duplicate budget name b"},
    {BUDGETS("{\"name\":\"b\",\"usd\":1,\"cap\":2}"),
     "budgets[0].cap: unknown field"},
};

START_TEST(test_config_bad_budget_refused_with_path)
{
    char err[512];
    struct config *cfg = NULL;
    const char *text = bad_budgets[_i].extra;

    ck_assert_int_eq(
        config_parse(text, strlen(text), NULL, &cfg, err, sizeof(err)),
        -EINVAL);
    ck_assert_msg(strstr(err, bad_budgets[_i].want) != NULL,
                  "want \"%s\", got \"%s\"", bad_budgets[_i].want, err);
    ck_assert_ptr_null(cfg);
}
END_TEST

/* A budget's window of time starts on the epoch's grid: a day at UTC
 * midnight; one per schedule run has none. */
START_TEST(test_config_budget_read_with_its_window)
{
    const char *text =
        BUDGETS("{\"name\":\"d\",\"usd\":2.5,\"tiers\":[\"t\"]},"
                "{\"name\":\"r\",\"usd\":1,\"per\":\"schedule_run\"}");
    struct config *cfg = NULL;
    char err[256], win[64];
    int64_t ends = 0;

    ck_assert_int_eq(
        config_parse(text, strlen(text), NULL, &cfg, err, sizeof(err)), 0);
    ck_assert_uint_eq(cfg->nbudgets, 2);
    ck_assert_int_eq(cfg->budgets[0].limit_nusd, 2500000000);
    ck_assert_uint_eq(cfg->budgets[0].ntiers, 1);
    ck_assert_ptr_null(cfg->budgets[1].tiers); /* every tier */
    /* 2026-12-06T13:00:00Z */
    ck_assert(config_budget_window(&cfg->budgets[0], INT64_C(1796562000000),
                                   win, sizeof(win), &ends));
    ck_assert_str_eq(win, "2026-12-06T00:00:00Z");
    ck_assert_int_eq(ends, INT64_C(1796601600000));
    ck_assert(
        !config_budget_window(&cfg->budgets[1], 0, win, sizeof(win), &ends));
    config_free(cfg);
}
END_TEST

START_TEST(test_config_bad_price_refused_with_path)
{
    char text[512], err[512];
    struct config *cfg = NULL;

    snprintf(text, sizeof(text), TIER("%s"), bad_prices[_i].extra);
    ck_assert_int_eq(
        config_parse(text, strlen(text), NULL, &cfg, err, sizeof(err)),
        -EINVAL);
    ck_assert_msg(strstr(err, bad_prices[_i].want) != NULL,
                  "want \"%s\", got \"%s\"", bad_prices[_i].want, err);
    ck_assert_ptr_null(cfg);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("price");
    TCase *usage = tcase_create("usage"), *math = tcase_create("math"),
          *config = tcase_create("config");
    TCase *all[] = {usage, math, config};

    tcase_add_loop_test(usage, test_cost_from_each_usage_shape, 0,
                        (int)STEPQ_ARRAY_LEN(shapes));
    tcase_add_test(usage, test_chat_answer_carries_usage);
    tcase_add_test(math, test_cost_is_rounded_once);
    tcase_add_test(math, test_no_price_no_cost);
    tcase_add_test(math, test_worst_case_is_input_and_max_tokens);
    tcase_add_test(math, test_format_is_exact);
    tcase_add_test(config, test_config_price_read_in_nano_dollars);
    tcase_add_test(config, test_config_price_absent_or_free);
    tcase_add_loop_test(config, test_config_bad_price_refused_with_path, 0,
                        (int)STEPQ_ARRAY_LEN(bad_prices));
    tcase_add_loop_test(config, test_config_bad_budget_refused_with_path, 0,
                        (int)STEPQ_ARRAY_LEN(bad_budgets));
    tcase_add_test(config, test_config_budget_read_with_its_window);
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(all); i++) {
        tcase_set_timeout(all[i], 20);
        suite_add_tcase(s, all[i]);
    }
    return s;
}

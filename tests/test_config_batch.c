/* test_config_batch.c: a tier's batch mode in the config
 * (docs/reference.md "Batches"): what "mode", "batch" and
 * "realtime_price" read into, their defaults, and every bad value refused
 * with its JSON path named, in the config and by the CLI (exit 2); and
 * the batch APIs' bodies built and read (http/batch.c). */
#include "tests/support/support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/defs.h"
#include "http/http.h"

#define TIER(extra)                                                            \
    "{\"tiers\":[{\"name\":\"cheap\",\"base_url\":\"http://127.0.0.1:1/v1\","  \
    "\"model\":\"m\"" extra "}]}"
#define BATCH(fields)                                                          \
    ",\"mode\":\"batch\",\"batch\":{\"api\":\"openai\"" fields "}"

static struct config *
parse(const char *text)
{
    struct config *cfg = NULL;
    char err[512];

    ck_assert_msg(
        config_parse(text, strlen(text), NULL, &cfg, err, sizeof(err)) == 0,
        "%s", err);
    return cfg;
}

START_TEST(test_batch_defaults)
{
    struct config *cfg =
        parse(TIER(BATCH("") ",\"price\":{\"input_per_mtok\":1,"
                             "\"output_per_mtok\":2}"));
    const struct config_tier *t = &cfg->tiers[0];

    ck_assert(t->batch_mode);
    ck_assert_int_eq(t->batch.api, CONFIG_BATCH_OPENAI);
    ck_assert_int_eq(t->batch.max_items, 1000);
    ck_assert_int_eq(t->batch.gather_ms, 60000);
    ck_assert_int_eq(t->batch.poll_ms, 60000);
    ck_assert_int_eq(t->batch.window_ms, 86400000);
    ck_assert_int_eq(t->batch.expect_ms, 86400000);
    /* the realtime price: twice the batch price unless declared */
    ck_assert(t->realtime_price.set);
    ck_assert_int_eq(t->realtime_price.input, 2 * t->price.input);
    ck_assert_int_eq(t->realtime_price.output, 2 * t->price.output);
    config_free(cfg);
}
END_TEST

START_TEST(test_batch_fields_read)
{
    struct config *cfg = parse(TIER(
        ",\"mode\":\"batch\",\"batch\":{\"api\":\"anthropic\",\"max_items\":"
        "5,\"gather_s\":0.5,\"poll_s\":2,\"expect_s\":3600,"
        "\"completion_window\":\"24h\"},\"price\":{\"input_per_mtok\":1},"
        "\"realtime_price\":{\"input_per_mtok\":3}"));
    const struct config_tier *t = &cfg->tiers[0];

    ck_assert_int_eq(t->batch.api, CONFIG_BATCH_ANTHROPIC);
    ck_assert_int_eq(t->batch.max_items, 5);
    ck_assert_int_eq(t->batch.gather_ms, 500);
    ck_assert_int_eq(t->batch.poll_ms, 2000);
    ck_assert_int_eq(t->batch.expect_ms, 3600000);
    ck_assert_int_eq(t->realtime_price.input, 3 * t->price.input);
    config_free(cfg);
    cfg = parse(TIER(",\"mode\":\"realtime\""));
    ck_assert(!cfg->tiers[0].batch_mode);
    config_free(cfg);
}
END_TEST

struct bad {
    const char *extra;
    const char *want;
};

static const struct bad bad_batches[] = {
    {",\"mode\":\"bulk\"",
     "tiers[0].mode: must be \"realtime\" or \"batch\" (got \"bulk\")"},
    {",\"mode\":\"batch\"", "tiers[0].batch: a tier in batch mode needs it"},
    {",\"batch\":{\"api\":\"openai\"}",
     "tiers[0].batch: only a tier with \"mode\": \"batch\" takes it"},
    {",\"realtime_price\":{}",
     "tiers[0].realtime_price: only a tier with \"mode\": \"batch\""},
    {",\"mode\":\"batch\",\"batch\":[]",
     "tiers[0].batch: must be an object with \"api\""},
    {BATCH(",\"apii\":1"), "tiers[0].batch.apii: unknown field"},
    {",\"mode\":\"batch\",\"batch\":{}", "tiers[0].batch.api: missing"},
    {",\"mode\":\"batch\",\"batch\":{\"api\":\"gemini\"}",
     "tiers[0].batch.api: must be \"openai\" or \"anthropic\" (got "
     "\"gemini\")"},
    {BATCH(",\"max_items\":0"), "tiers[0].batch.max_items: must be"},
    {BATCH(",\"max_items\":50001"), "tiers[0].batch.max_items: must be"},
    {BATCH(",\"gather_s\":-1"), "tiers[0].batch.gather_s: must be"},
    {BATCH(",\"poll_s\":0"), "tiers[0].batch.poll_s: must be"},
    {BATCH(",\"expect_s\":90000"), "tiers[0].batch.expect_s: must be"},
    {BATCH(",\"completion_window\":\"48h\""),
     "tiers[0].batch.completion_window: must be \"24h\""},
    {BATCH("") ",\"realtime_price\":{\"input_per_mtok\":1}",
     "tiers[0].realtime_price: needs the tier's \"price\""},
    {BATCH("") ",\"price\":{},\"realtime_price\":{\"input\":1}",
     "tiers[0].realtime_price.input: unknown field"},
};

START_TEST(test_bad_batch_refused_with_path)
{
    char text[768], err[512];
    struct config *cfg = NULL;

    snprintf(text, sizeof(text), TIER("%s"), bad_batches[_i].extra);
    ck_assert_int_eq(
        config_parse(text, strlen(text), NULL, &cfg, err, sizeof(err)),
        -EINVAL);
    ck_assert_msg(strstr(err, bad_batches[_i].want) != NULL,
                  "want \"%s\", got \"%s\"", bad_batches[_i].want, err);
    ck_assert_ptr_null(cfg);
}
END_TEST

/* The CLI refuses such a config with exit 2, naming the field. */
START_TEST(test_cli_refuses_bad_batch)
{
    const char *text = TIER(BATCH(",\"poll_s\":0"));
    struct run_result r;

    free(tmpdir_write(fixture_dir, "bad.json", text, strlen(text)));
    ck_assert_int_eq(RUN(&r, NULL, "--config", "bad.json", "tiers"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "tiers[0].batch.poll_s"));
    run_result_free(&r);
}
END_TEST

/* ---- the bodies ---------------------------------------------------------- */

START_TEST(test_anthropic_params_from_a_chat_request)
{
    cJSON *req = cJSON_Parse(
        "{\"model\":\"m\",\"temperature\":0.5,\"stop\":\"END\",\"messages\":["
        "{\"role\":\"system\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":\"hi\"}]}");
    struct http_batch_item it = {"a7", req};
    char *body = http_batch_anthropic_create(&it, 1);
    cJSON *o = cJSON_Parse(body);
    const cJSON *p = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(o, "requests"), 0), "params");

    ck_assert_str_eq(cJSON_GetObjectItem(p, "system")->valuestring, "be brief");
    ck_assert_int_eq(cJSON_GetObjectItem(p, "max_tokens")->valueint, 1024);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(p, "messages")), 1);
    ck_assert_str_eq(
        cJSON_GetArrayItem(cJSON_GetObjectItem(p, "stop_sequences"), 0)
            ->valuestring,
        "END");
    ck_assert_ptr_null(cJSON_GetObjectItem(p, "stop"));
    cJSON_Delete(o);
    free(body);
    cJSON_Delete(req);
}
END_TEST

/* Each kind of result of either provider, read by custom_id; an
 * Anthropic message becomes a chat completion with its usage. */
START_TEST(test_results_read)
{
    static const char openai[] =
        "{\"custom_id\":\"a1\",\"response\":{\"status_code\":200,\"body\":"
        "{\"choices\":[]}},\"error\":null}\n"
        "{\"custom_id\":\"a2\",\"response\":{\"status_code\":500,\"body\":"
        "{\"error\":{}}},\"error\":null}\n"
        "{\"custom_id\":\"a3\",\"response\":null,\"error\":{\"code\":"
        "\"batch_expired\"}}\n"
        "not json\n"
        "{\"custom_id\":\"a4\",\"response\":null,\"error\":{\"code\":"
        "\"batch_cancelled\"}}\n";
    static const char anthropic[] =
        "{\"custom_id\":\"b1\",\"result\":{\"type\":\"succeeded\",\"message\":"
        "{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],\"stop_reason\":"
        "\"max_tokens\",\"usage\":{\"input_tokens\":3,\"output_tokens\":4}}}}"
        "\n{\"custom_id\":\"b2\",\"result\":{\"type\":\"errored\",\"error\":"
        "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}}}\n"
        "{\"custom_id\":\"b3\",\"result\":{\"type\":\"expired\"}}";
    struct http_batch_result *r = NULL;
    size_t n = 0, cap = 0;
    struct http_chat_answer a;

    http_batch_results_read(CONFIG_BATCH_OPENAI, openai, strlen(openai), &r, &n,
                            &cap);
    http_batch_results_read(CONFIG_BATCH_ANTHROPIC, anthropic,
                            strlen(anthropic), &r, &n, &cap);
    ck_assert_uint_eq(n, 7);
    ck_assert_int_eq(r[0].kind, HTTP_BATCH_SUCCEEDED);
    ck_assert_int_eq(r[1].kind, HTTP_BATCH_ERRORED);
    ck_assert_int_eq(r[1].status, 500);
    ck_assert_int_eq(r[2].kind, HTTP_BATCH_EXPIRED);
    ck_assert_int_eq(r[3].kind, HTTP_BATCH_CANCELLED);
    ck_assert_str_eq(r[4].custom_id, "b1");
    ck_assert_int_eq(http_chat_parse(r[4].body, strlen(r[4].body), &a), 0);
    ck_assert_str_eq(a.content, "hi");
    ck_assert_str_eq(a.finish_reason, "length");
    ck_assert_int_eq(a.total_tokens, 7);
    http_chat_answer_cleanup(&a);
    ck_assert_int_eq(r[5].status, 529);
    ck_assert_int_eq(r[6].kind, HTTP_BATCH_EXPIRED);
    http_batch_results_free(r, n);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("config and bodies: batch mode");
    TCase *config = tcase_create("config");
    TCase *cli = tcase_create("cli");
    TCase *bodies = tcase_create("bodies");

    tcase_add_test(config, test_batch_defaults);
    tcase_add_test(config, test_batch_fields_read);
    tcase_add_loop_test(config, test_bad_batch_refused_with_path, 0,
                        (int)STEPQ_ARRAY_LEN(bad_batches));
    suite_add_tcase(s, config);
    tcase_add_checked_fixture(cli, fixture_setup, fixture_teardown);
    tcase_add_test(cli, test_cli_refuses_bad_batch);
    suite_add_tcase(s, cli);
    tcase_add_test(bodies, test_anthropic_params_from_a_chat_request);
    tcase_add_test(bodies, test_results_read);
    suite_add_tcase(s, bodies);
    return s;
}

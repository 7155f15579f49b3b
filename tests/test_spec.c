/* test_spec.c: every rule of docs/reference.md "Job file", as a table. */
#include "tests/support/support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queue/queue.h"
#include "spec/spec.h"

#define CHAT(name)                                                             \
    "{\"name\":\"" name "\",\"request\":{\"messages\":[{\"role\":\"user\","    \
    "\"content\":\"hi\"}]}}"
#define JOB(steps) "{\"name\":\"j\",\"steps\":[" steps "]}"
/* An http step named p with this url (JSON text) and more members of
 * "http" (rest: "" or ",\"headers\":{...}"). */
#define HTTP(url, rest)                                                        \
    "{\"name\":\"p\",\"kind\":\"http\",\"http\":{\"url\":"                     \
    "\"" url "\"" rest "}}"
#define HEADERS(h) ",\"headers\":{" h "}"
#define LOCAL      "http://127.0.0.1:9/c"

struct bad_case {
    const char *name;
    const char *json;
    const char *want; /* substring of the error */
};

static const struct bad_case bad[] = {
    {"not json", "{\"name\": ", "not valid JSON"},
    {"trailing text", JOB(CHAT("a")) " x", "extra text"},
    {"not an object", "[1,2]", "must be a JSON object"},
    {"name missing", "{\"steps\":[" CHAT("a") "]}", "name: missing"},
    {"name wrong type", "{\"name\":5,\"steps\":[" CHAT("a") "]}",
     "name: must be a string"},
    {"name empty", "{\"name\":\"\",\"steps\":[" CHAT("a") "]}",
     "name: must not be empty"},
    {"steps missing", "{\"name\":\"j\"}", "steps: missing"},
    {"steps empty", JOB(""), "steps: must not be empty"},
    {"steps not array", "{\"name\":\"j\",\"steps\":{}}",
     "steps: must be an array"},
    {"unknown top field",
     "{\"name\":\"j\",\"prio\":1,\"steps\":[" CHAT("a") "]}",
     "prio: unknown field"},
    {"misspelt side_effects",
     JOB("{\"name\":\"a\",\"side_effect\":true,\"request\":{\"messages\":[{"
         "\"role\":\"user\"}]}}"),
     "steps[0].side_effect: unknown field"},
    {"unknown kind",
     JOB("{\"name\":\"a\",\"kind\":\"grpc\",\"request\":{\"messages\":[{"
         "\"role\":\"user\"}]}}"),
     "steps[0].kind: must be \"chat\" or \"http\""},
    {"request missing", JOB(CHAT("a") ",{\"name\":\"b\"}"),
     "steps[1].request: missing"},
    {"request not object", JOB("{\"name\":\"a\",\"request\":[]}"),
     "steps[0].request: must be an object"},
    {"messages missing", JOB("{\"name\":\"a\",\"request\":{}}"),
     "steps[0].request.messages: missing"},
    {"message without role",
     JOB("{\"name\":\"a\",\"request\":{\"messages\":[{\"content\":\"x\"}]}}"),
     "steps[0].request.messages[0]: needs a string \"role\""},
    {"duplicate step", JOB(CHAT("a") "," CHAT("a")),
     "steps[1].name: duplicate step name a"},
    {"step name missing", JOB("{\"request\":{\"messages\":[]}}"),
     "steps[0].name: missing"},
    {"template later step",
     JOB("{\"name\":\"a\",\"request\":{\"messages\":[{\"role\":\"user\","
         "\"content\":\"{{steps.b.output}}\"}]}}," CHAT("b")),
     "steps[0].request.messages[0].content: template names step b, which "
     "runs later"},
    {"template unknown step",
     JOB(CHAT("a") ",{\"name\":\"b\",\"request\":{\"messages\":[{\"role\":"
                   "\"user\",\"content\":\"x {{steps.zz.output}}\"}]}}"),
     "template names unknown step zz"},
    {"template own step",
     JOB("{\"name\":\"a\",\"request\":{\"messages\":[{\"role\":\"user\","
         "\"content\":\"{{steps.a.output}}\"}]}}"),
     "template names its own step a"},
    {"template malformed",
     JOB(CHAT("a") ",{\"name\":\"b\",\"request\":{\"messages\":[{\"role\":"
                   "\"user\",\"content\":\"{{steps.a}}\"}]}}"),
     "bad template"},
    {"duplicate field in request",
     JOB("{\"name\":\"a\",\"request\":{\"messages\":[{\"role\":\"user\","
         "\"content\":\"x\"}],\"messages\":[]}}"),
     "steps[0].request: messages: duplicate field"},
    {"duplicate field deep in an http body",
     JOB("{\"name\":\"p\",\"kind\":\"http\",\"http\":{\"url\":"
         "\"http://h/x\",\"body\":{\"a\":[{\"k\":1,\"k\":2}]}}}"),
     "steps[0].http.body.a[0]: k: duplicate field"},
    {"duplicate field in a large object",
     JOB("{\"name\":\"p\",\"kind\":\"http\",\"http\":{\"url\":"
         "\"http://h/x\",\"body\":{\"a\":1,\"b\":2,\"c\":3,\"d\":4,"
         "\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9,\"c\":10}}}"),
     "steps[0].http.body: c: duplicate field"},
    {"template with spaces",
     JOB(CHAT("a") ",{\"name\":\"b\",\"request\":{\"messages\":[{\"role\":"
                   "\"user\",\"content\":\"{{ steps.a.output }}\"}]}}"),
     "steps[1].request.messages[0].content: bad template near \"{{ "
     "steps.a.output }}\": write {{steps.NAME.output}}, without spaces"},
    {"http without http", JOB("{\"name\":\"p\",\"kind\":\"http\"}"),
     "steps[0].http: missing"},
    {"http bad method",
     JOB("{\"name\":\"p\",\"kind\":\"http\",\"http\":{\"method\":\"FETCH\","
         "\"url\":\"http://127.0.0.1/\"}}"),
     "steps[0].http.method: must be GET"},
    {"http bad url",
     JOB("{\"name\":\"p\",\"kind\":\"http\",\"http\":{\"url\":\"ftp://x\"}}"),
     "steps[0].http.url: must start with http"},
    {"http header not string",
     JOB("{\"name\":\"p\",\"kind\":\"http\",\"http\":{\"url\":\"http://"
         "127.0.0.1/\",\"headers\":{\"X-A\":1}}}"),
     "steps[0].http.headers.X-A: must be a string"},
    {"http header injection",
     JOB("{\"name\":\"p\",\"kind\":\"http\",\"http\":{\"url\":\"http://"
         "127.0.0.1/\",\"headers\":{\"X-A\":\"a\\r\\nB: c\"}}}"),
     "steps[0].http.headers.X-A: must not hold CR, LF or other control "
     "characters"},
    /* Framing headers: curl writes them from the body; a second copy from
     * the job made the request malformed. */
    {"http header Content-Length",
     JOB(HTTP(LOCAL, HEADERS("\"Content-Length\":\"5\""))),
     "steps[0].http.headers.Content-Length: Content-Length is set by stepq"},
    {"http header Transfer-Encoding in any case",
     JOB(CHAT("a") "," CHAT("b") "," HTTP(
         LOCAL, HEADERS("\"X-A\":\"1\",\"transfer-encoding\":"
                        "\"chunked\""))),
     "steps[2].http.headers.transfer-encoding: Transfer-Encoding is set by "
     "stepq"},
    {"http header Connection",
     JOB(HTTP(LOCAL, HEADERS("\"Connection\":\"close\""))),
     "steps[0].http.headers.Connection: Connection is set by stepq"},
    {"http header name not a token",
     JOB(HTTP(LOCAL, HEADERS("\"X(A)\":\"1\""))),
     "steps[0].http.headers.X(A): not a valid header name"},
    {"http header value control character",
     JOB(HTTP(LOCAL, HEADERS("\"X-A\":\"a\\u0001b\""))),
     "steps[0].http.headers.X-A: must not hold CR, LF or other control"},
    {"http header same name in another case",
     JOB(HTTP(LOCAL, HEADERS("\"X-A\":\"1\",\"x-a\":\"2\""))),
     "steps[0].http.headers.x-a: same header as X-A"},
    {"http header env: without a name",
     JOB(HTTP(LOCAL, HEADERS("\"Authorization\":\"env:\""))),
     "steps[0].http.headers.Authorization: env: must be followed by a "
     "variable name"},
    {"http header env: with a bad name",
     JOB(HTTP(LOCAL, HEADERS("\"Authorization\":\"env: KEY\""))),
     "steps[0].http.headers.Authorization: env: must be followed by a "
     "variable name"},
    /* URLs: what curl would send as it is, or refuse, only at send time. */
    {"http url CR LF", JOB(HTTP("http://127.0.0.1/a\\r\\nX: y", "")),
     "steps[0].http.url: must not hold spaces, control characters or '#'"},
    {"http url LF", JOB(HTTP("http://127.0.0.1/a\\nb", "")),
     "steps[0].http.url: must not hold spaces"},
    {"http url space", JOB(HTTP("http://127.0.0.1/a b", "")),
     "steps[0].http.url: must not hold spaces"},
    {"http url fragment", JOB(HTTP("http://127.0.0.1/a#b", "")),
     "steps[0].http.url: must not hold spaces, control characters or '#'"},
    {"http url angle bracket", JOB(HTTP("http://127.0.0.1/<a>", "")),
     "steps[0].http.url: '<' must be percent-encoded (%3C)"},
    {"http url non-ASCII", JOB(HTTP("http://127.0.0.1/caf\xc3\xa9", "")),
     "steps[0].http.url: byte 0xC3 must be percent-encoded (%C3)"},
    {"http url bad escape", JOB(HTTP("http://127.0.0.1/a%zz", "")),
     "steps[0].http.url: '%' must start an escape such as %20"},
    {"http url no host", JOB(HTTP("http:///x", "")),
     "steps[0].http.url: needs a host"},
    {"http url only a port", JOB(HTTP("https://:8080/x", "")),
     "steps[0].http.url: needs a host"},
    {"http url only userinfo", JOB(HTTP("http://user@/x", "")),
     "steps[0].http.url: needs a host"},
    {"http url port too large", JOB(HTTP("http://127.0.0.1:99999/x", "")),
     "steps[0].http.url: port must be 1 to 65535"},
    {"http url port zero", JOB(HTTP("http://127.0.0.1:0/x", "")),
     "steps[0].http.url: port must be 1 to 65535"},
    {"http url port not a number", JOB(HTTP("http://127.0.0.1:http/x", "")),
     "steps[0].http.url: port must be 1 to 65535"},
    {"http url port empty", JOB(HTTP("http://127.0.0.1:/x", "")),
     "steps[0].http.url: port must be 1 to 65535"},
    {"http url bad IPv6", JOB(HTTP("http://[::1/x", "")),
     "steps[0].http.url: bad IPv6 address in the host"},
    {"http url template in host",
     JOB(CHAT("a") "," HTTP("http://{{steps.a.output}}/x", "")),
     "steps[1].http.url: a template may fill the path or the query, not the "
     "host or port"},
    {"http url template in port",
     JOB(CHAT("a") "," HTTP("http://127.0.0.1:{{steps.a.output}}/x", "")),
     "steps[1].http.url: a template may fill the path or the query"},
    {"http url space after a template",
     JOB(CHAT("a") "," HTTP("http://127.0.0.1/{{steps.a.output}} x", "")),
     "steps[1].http.url: must not hold spaces"},
    {"http unknown field",
     JOB("{\"name\":\"p\",\"kind\":\"http\",\"http\":{\"url\":\"http://"
         "127.0.0.1/\",\"verb\":\"POST\"}}"),
     "steps[0].http.verb: unknown field"},
    {"chat with http",
     JOB("{\"name\":\"a\",\"http\":{\"url\":\"http://x/\"},\"request\":{"
         "\"messages\":[{\"role\":\"user\"}]}}"),
     "steps[0].http: only for steps of kind \"http\""},
    {"stream on an http step",
     JOB("{\"name\":\"p\",\"kind\":\"http\",\"stream\":true,\"http\":{"
         "\"url\":\"http://127.0.0.1/\"}}"),
     "steps[0].stream: only for steps of kind \"chat\""},
    {"stream not bool",
     JOB("{\"name\":\"a\",\"stream\":\"yes\",\"request\":{\"messages\":"
         "[{\"role\":\"user\"}]}}"),
     "steps[0].stream: must be true or false"},
    {"replayable not bool",
     JOB("{\"name\":\"a\",\"replayable\":\"yes\",\"request\":{\"messages\":"
         "[{\"role\":\"user\"}]}}"),
     "steps[0].replayable: must be true or false"},
    {"max_attempts zero",
     JOB("{\"name\":\"a\",\"max_attempts\":0,\"request\":{\"messages\":[{"
         "\"role\":\"user\"}]}}"),
     "steps[0].max_attempts: must be between 1 and 100"},
    {"max_attempts fraction",
     JOB("{\"name\":\"a\",\"max_attempts\":1.5,\"request\":{\"messages\":[{"
         "\"role\":\"user\"}]}}"),
     "steps[0].max_attempts: must be a whole number"},
    {"token_budget negative",
     JOB("{\"name\":\"a\",\"token_budget\":-1,\"request\":{\"messages\":[{"
         "\"role\":\"user\"}]}}"),
     "steps[0].token_budget: must be between"},
    {"token_budget zero",
     JOB("{\"name\":\"a\",\"token_budget\":0,\"request\":{\"messages\":[{"
         "\"role\":\"user\"}]}}"),
     "steps[0].token_budget: must be between 1 and"},
    {"max_total_tokens zero",
     JOB("{\"name\":\"a\",\"max_total_tokens\":0,\"request\":{"
         "\"messages\":[{\"role\":\"user\"}]}}"),
     "steps[0].max_total_tokens: must be between 1 and"},
    {"max_total_tokens not a number",
     JOB("{\"name\":\"a\",\"max_total_tokens\":\"9k\",\"request\":{"
         "\"messages\":[{\"role\":\"user\"}]}}"),
     "steps[0].max_total_tokens: must be a whole number"},
    {"timeout_s zero",
     JOB("{\"name\":\"a\",\"timeout_s\":0,\"request\":{\"messages\":[{"
         "\"role\":\"user\"}]}}"),
     "steps[0].timeout_s: must be between"},
    {"timeout_s on http too long",
     JOB("{\"name\":\"p\",\"kind\":\"http\",\"timeout_s\":100000,"
         "\"http\":{\"url\":\"http://127.0.0.1:9/c\"}}"),
     "steps[0].timeout_s: must be between"},
    {"expect_json not strings",
     JOB("{\"name\":\"a\",\"expect_json\":[1],\"request\":{\"messages\":[{"
         "\"role\":\"user\"}]}}"),
     "steps[0].expect_json[0]: must be a non-empty string"},
    {"tiers empty",
     JOB("{\"name\":\"a\",\"tiers\":[],\"request\":{\"messages\":[{\"role\":"
         "\"user\"}]}}"),
     "steps[0].tiers: must not be empty"},
    {"degrade unknown field",
     JOB("{\"name\":\"a\",\"degrade\":{\"max_token\":5},\"request\":{"
         "\"messages\":[{\"role\":\"user\"}]}}"),
     "steps[0].degrade.max_token: unknown field"},
    {"idempotency_key empty",
     JOB("{\"name\":\"a\",\"idempotency_key\":\"\",\"request\":{\"messages\":"
         "[{\"role\":\"user\"}]}}"),
     "steps[0].idempotency_key: must not be empty"},
    {"idempotency_key with a newline",
     JOB("{\"name\":\"a\",\"idempotency_key\":\"a\\nb\",\"request\":{"
         "\"messages\":"
         "[{\"role\":\"user\"}]}}"),
     "steps[0].idempotency_key: must be printable text"},
    {"run_at not a time",
     "{\"name\":\"j\",\"run_at\":\"tomorrow\",\"steps\":[" CHAT("a") "]}",
     "run_at: must be an RFC 3339 time"},
    {"deadline zero",
     "{\"name\":\"j\",\"deadline_s\":0,\"steps\":[" CHAT("a") "]}",
     "deadline_s: must be between"},
    {"max_cost_usd negative",
     "{\"name\":\"j\",\"max_cost_usd\":-1,\"steps\":[" CHAT("a") "]}",
     "max_cost_usd: must be between"},
    {"max_cost_usd text",
     "{\"name\":\"j\",\"max_cost_usd\":\"1\",\"steps\":[" CHAT("a") "]}",
     "max_cost_usd: must be a number"},
    {"priority string",
     "{\"name\":\"j\",\"priority\":\"high\",\"steps\":[" CHAT("a") "]}",
     "priority: must be a whole number"},
    {"run_at span back",
     "{\"name\":\"j\",\"run_at\":\"-5m\",\"steps\":[" CHAT("a") "]}",
     "run_at: must be an RFC 3339 time"},
    {"run_at span unit",
     "{\"name\":\"j\",\"run_at\":\"+5w\",\"steps\":[" CHAT("a") "]}",
     "or a span from the enqueue such as +90s"},
    {"on_done not a string",
     "{\"name\":\"j\",\"on_done\":1,\"steps\":[" CHAT("a") "]}",
     "on_done: must be a string"},
    {"key empty", "{\"name\":\"j\",\"key\":\"\",\"steps\":[" CHAT("a") "]}",
     "key: must not be empty"},
    {"key control character",
     "{\"name\":\"j\",\"key\":\"a\\u0001b\",\"steps\":[" CHAT("a") "]}",
     "key: must not hold control characters"},
    {"key newline",
     "{\"name\":\"j\",\"key\":\"a\\nb\",\"steps\":[" CHAT("a") "]}",
     "key: must not hold control characters"},
    {"duplicate field",
     "{\"name\":\"j\",\"name\":\"k\",\"steps\":[" CHAT("a") "]}",
     "name: duplicate field"},
    {"invalid utf-8", "{\"name\":\"j\xff\",\"steps\":[" CHAT("a") "]}",
     "not valid UTF-8"},
    {"overlong utf-8", "{\"name\":\"\xc0\xaf\",\"steps\":[" CHAT("a") "]}",
     "not valid UTF-8"},
    {"surrogate utf-8", "{\"name\":\"\xed\xa0\x80\",\"steps\":[" CHAT("a") "]}",
     "not valid UTF-8"},
};

START_TEST(test_refuses_bad_job)
{
    const struct bad_case *c = &bad[_i];
    struct spec_job *spec = NULL;
    char err[512] = "";
    int rc =
        spec_parse(c->json, strlen(c->json), NULL, &spec, err, sizeof(err));

    ck_assert_msg(rc == -EINVAL, "%s: accepted", c->name);
    ck_assert_ptr_null(spec);
    ck_assert_msg(strstr(err, c->want) != NULL, "%s: got \"%s\", want \"%s\"",
                  c->name, err, c->want);
}
END_TEST

/* http steps that must still pass: templates where the worker fills them
 * (path, query, header values), and the URLs and headers curl sends. */
static const char *const good_http[] = {
    JOB(CHAT("a") "," HTTP("http://127.0.0.1:9/c/{{steps.a.output}}", "")),
    JOB(CHAT("a") "," HTTP("https://h.example/c?q={{steps.a.output}}&n=1", "")),
    JOB(CHAT("my step") "," HTTP("http://h/{{steps.my step.output}}", "")),
    JOB(CHAT("a") "," HTTP(LOCAL,
                           HEADERS("\"X-Prev\":\"{{steps.a.output}}\""))),
    JOB(HTTP("http://[::1]:65535/a%20b?x=1;y=(2)", "")),
    JOB(HTTP("https://user:pw@h.example:1/~a/b-c_d.e", "")),
    JOB(HTTP(LOCAL, HEADERS("\"Authorization\":\"env:COMMENTS_TOKEN\","
                            "\"Content-Type\":\"text/csv\","
                            "\"Idempotency-Key\":\"k\",\"Host\":\"h\""))),
};

START_TEST(test_accepts_http_step)
{
    const char *json = good_http[_i];
    struct spec_job *s = NULL;
    char err[512] = "";

    ck_assert_msg(spec_parse(json, strlen(json), NULL, &s, err, sizeof(err)) ==
                      0,
                  "row %d: %s", _i, err);
    spec_job_free(s);
}
END_TEST

START_TEST(test_defaults_follow_kind)
{
    const char *json =
        JOB(CHAT("a") ",{\"name\":\"p\",\"kind\":\"http\",\"http\":{\"url\":"
                      "\"http://127.0.0.1:9/c\",\"body\":{\"t\":\"{{steps.a."
                      "output}}\"}}}");
    struct spec_job *s = NULL;
    char err[256];

    ck_assert_int_eq(spec_parse(json, strlen(json), NULL, &s, err, sizeof(err)),
                     0);
    ck_assert_uint_eq(s->nsteps, 2);
    ck_assert(s->steps[0].replayable && !s->steps[0].side_effects);
    ck_assert(!s->steps[1].replayable && s->steps[1].side_effects);
    ck_assert_int_eq(s->steps[0].max_attempts, 3);
    /* docs/reference.md: one request is planned to fit 8000 tokens; no spend
     * cap and no step timeout unless given (the tier's, else 60 s, applies). */
    ck_assert_int_eq(s->steps[0].token_budget, 8000);
    ck_assert_int_eq(s->steps[0].max_total_tokens, 0);
    ck_assert(s->steps[0].timeout_s == 0);
    ck_assert_int_eq(s->steps[1].token_budget, 8000);
    ck_assert_int_eq(s->deadline_s, 3600);
    ck_assert_int_eq(s->run_at, 0);
    ck_assert_ptr_null(s->key);
    spec_job_free(s);
}
END_TEST

START_TEST(test_budget_fields_read)
{
    const char *json =
        JOB("{\"name\":\"a\",\"token_budget\":4000,\"max_total_tokens\":"
            "12000,\"timeout_s\":2.5,\"request\":{\"messages\":[{\"role\":"
            "\"user\"}]}},{\"name\":\"p\",\"kind\":\"http\",\"timeout_s\":"
            "90,\"http\":{\"url\":\"http://127.0.0.1:9/c\"}}");
    struct spec_job *s = NULL;
    char err[256];

    ck_assert_int_eq(spec_parse(json, strlen(json), NULL, &s, err, sizeof(err)),
                     0);
    ck_assert_int_eq(s->steps[0].token_budget, 4000);
    ck_assert_int_eq(s->steps[0].max_total_tokens, 12000);
    ck_assert_double_eq(s->steps[0].timeout_s, 2.5);
    ck_assert_double_eq(s->steps[1].timeout_s, 90);
    spec_job_free(s);
}
END_TEST

START_TEST(test_unknown_tier_refused_when_config_names_tiers)
{
    const char *names[] = {"free", "local"};
    struct spec_opts o = {.tiers = names, .ntiers = 2};
    const char *json =
        JOB("{\"name\":\"a\",\"tiers\":[\"local\",\"paid\"],\"request\":{"
            "\"messages\":[{\"role\":\"user\"}]}}");
    struct spec_job *s = NULL;
    char err[256];

    ck_assert_int_eq(spec_parse(json, strlen(json), &o, &s, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, "steps[0].tiers[1]: no tier named paid in the "
                          "config");
    ck_assert_int_eq(spec_parse(json, strlen(json), NULL, &s, err, sizeof(err)),
                     0);
    spec_job_free(s);
}
END_TEST

START_TEST(test_huge_job_refused)
{
    size_t n = 10 * 1024 * 1024;
    char *big = malloc(n + 256);
    struct spec_job *s = NULL;
    char err[256];
    int len = sprintf(big, "{\"name\":\"j\",\"steps\":[{\"name\":\"a\","
                           "\"request\":{\"messages\":[{\"role\":\"user\","
                           "\"content\":\"");
    memset(big + len, 'x', n);
    strcpy(big + len + n, "\"}]}}]}");
    ck_assert_int_eq(spec_parse(big, strlen(big), NULL, &s, err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "larger than the limit"));
    free(big);
}
END_TEST

/* A key is at most SPEC_KEY_MAX_BYTES, in a job file and given apart
 * (--key, libstepq) alike: every store can index it. */
START_TEST(test_key_length_bounded)
{
    char key[SPEC_KEY_MAX_BYTES + 2], job[SPEC_KEY_MAX_BYTES + 256], err[256];
    struct spec_job *s = NULL;

    for (int extra = 0; extra < 2; extra++) {
        memset(key, 'k', sizeof(key));
        key[SPEC_KEY_MAX_BYTES + extra] = '\0';
        snprintf(job, sizeof(job),
                 "{\"name\":\"j\",\"key\":\"%s\",\"steps\":"
                 "[" CHAT("a") "]}",
                 key);
        ck_assert_int_eq(
            spec_parse(job, strlen(job), NULL, &s, err, sizeof(err)),
            extra ? -EINVAL : 0);
        ck_assert_int_eq(spec_key_check(key, err, sizeof(err)),
                         extra ? -EINVAL : 0);
        if (extra)
            ck_assert_str_eq(err, "key: longer than 1024 bytes");
        spec_job_free(s);
        s = NULL;
    }
}
END_TEST

/* A job stored by an older stepq, whose key breaks today's rules (its
 * length, a control character), still reads: it must still run. */
START_TEST(test_stored_key_still_reads)
{
    static const char job[] = "{\"name\":\"j\",\"key\":\"a\\u0001b\","
                              "\"steps\":[" CHAT("a") "]}";
    struct spec_opts opts = {.stored = true};
    struct spec_job *s = NULL;
    char err[256];

    ck_assert_int_eq(spec_parse(job, strlen(job), &opts, &s, err, sizeof(err)),
                     0);
    ck_assert_str_eq(s->key, "a\001b");
    spec_job_free(s);
}
END_TEST

START_TEST(test_deep_nesting_refused)
{
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 1);
    struct spec_job *s = NULL;
    char err[256];

    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2 * depth] = '\0';
    ck_assert_int_eq(spec_parse(deep, 2 * depth, NULL, &s, err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "not valid JSON"));
    free(deep);
}
END_TEST

START_TEST(test_many_names_the_bad_job)
{
    const char *arr =
        "[" JOB(CHAT("a")) "," JOB(CHAT("a")) ",{\"name\":"
                                              "\"x\",\"steps\":[]}]";
    const char *lines = JOB(CHAT("a")) "\n\n" JOB(CHAT("b")) "\n{\"name\":1}\n";
    struct spec_job **v = NULL;
    size_t n = 0;
    char err[256];

    ck_assert_int_eq(
        spec_parse_many(arr, strlen(arr), NULL, &v, &n, err, sizeof(err)),
        -EINVAL);
    ck_assert_str_eq(err, "job 2: steps: must not be empty");
    ck_assert_int_eq(
        spec_parse_many(lines, strlen(lines), NULL, &v, &n, err, sizeof(err)),
        -EINVAL);
    ck_assert_str_eq(err, "line 4: name: must be a string");
}
END_TEST

START_TEST(test_many_accepts_array_and_lines)
{
    const char *arr = "[" JOB(CHAT("a")) "," JOB(CHAT("b")) "]";
    const char *lines =
        JOB(CHAT("a")) "\n" JOB(CHAT("b")) "\n" JOB(CHAT("c")) "\n";
    struct spec_job **v = NULL;
    size_t n = 0;
    char err[256];

    ck_assert_int_eq(
        spec_parse_many(arr, strlen(arr), NULL, &v, &n, err, sizeof(err)), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(v[1]->steps[0].name, "b");
    spec_jobs_free(v, n);
    ck_assert_int_eq(
        spec_parse_many(lines, strlen(lines), NULL, &v, &n, err, sizeof(err)),
        0);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(v[2]->steps[0].name, "c");
    spec_jobs_free(v, n);
}
END_TEST

/* ---- templates and conditions at run time (path.c, when.c) -------- */

/* A job of step "a" and step "b" whose request holds content and whose
 * condition is when (NULL: none), with input; b filled or evaluated from
 * a's output OUT_A. */
#define OUT_A                                                                  \
    "```json\n{\"kind\":\"bug\",\"labels\":[\"ui\",\"x\"],\"n\":3}\n```"

static struct spec_job *
job_b(const char *content, const char *when)
{
    char text[1024], err[256];
    struct spec_job *j = NULL;

    snprintf(text, sizeof(text),
             "{\"name\":\"t\",\"input\":{\"who\":\"ana\",\"ids\":[4,5]},"
             "\"steps\":[{\"name\":\"a\",\"request\":{\"messages\":[{"
             "\"role\":\"user\"}]}},{\"name\":\"b\"%s%s,\"request\":{"
             "\"messages\":[{\"role\":\"user\",\"content\":%s}]}}]}",
             when ? ",\"when\":" : "", when ? when : "", content);
    ck_assert_msg(spec_parse(text, strlen(text), NULL, &j, err, sizeof(err)) ==
                      0,
                  "%s", err);
    return j;
}

static const struct fill_case {
    const char *content; /* JSON of the content */
    const char *want;    /* the content filled, as compact JSON; NULL: fails */
} fills[] = {
    {"\"{{steps.a.output.labels.1}}\"", "\"x\""},
    {"\"{{steps.a.output.labels}}\"", "[\"ui\",\"x\"]"},
    {"\"{{steps.a.output.n}}\"", "3"},
    {"\"n={{steps.a.output.n}} {{input.ids}}\"", "\"n=3 [4,5]\""},
    {"\"{{input}}\"", "{\"who\":\"ana\",\"ids\":[4,5]}"},
    {"\"{{input.ids.1}}\"", "5"},
    {"\"{{steps.a.output.labels.2}}\"", NULL},
    {"\"{{steps.a.output.kind.x}}\"", NULL},
    {"\"{{name}} stays\"", "\"{{name}} stays\""},
};

START_TEST(test_fill_paths_and_types)
{
    /* Each row twice: parsed per template, then with a cache. */
    const struct fill_case *c = &fills[_i / 2];
    static const char *const outputs[] = {OUT_A, NULL};
    struct spec_job *j = job_b(c->content, NULL);
    struct spec_vars v = {0};
    cJSON *out = NULL;
    char err[256], *got;
    int rc;

    if (_i % 2 == 1)
        spec_vars_init(&v);
    v.input = j->input;
    v.outputs = outputs;
    rc = spec_step_fill(j, 1, &v, &out, err, sizeof(err));
    spec_vars_cleanup(&v);

    if (c->want == NULL) {
        ck_assert_msg(rc == -ENOENT, "row %d: filled", _i);
        ck_assert_msg(strstr(err, "in the output of step a") != NULL, "%s",
                      err);
    } else {
        ck_assert_msg(rc == 0, "row %d: %s", _i, err);
        got = cJSON_PrintUnformatted(cJSON_GetObjectItem(
            cJSON_GetArrayItem(cJSON_GetObjectItem(out, "messages"), 0),
            "content"));
        ck_assert_str_eq(got, c->want);
        free(got);
    }
    cJSON_Delete(out);
    spec_job_free(j);
}
END_TEST

/* In an http step's url the input's values are percent-encoded text;
 * in its body a whole template keeps its type. */
START_TEST(test_fill_http_url_and_body)
{
    static const char text[] =
        "{\"name\":\"t\",\"input\":{\"who\":\"a/b c\",\"ids\":[4,5]},"
        "\"steps\":[{\"name\":\"p\",\"kind\":\"http\",\"http\":{\"url\":"
        "\"http://h/i/{{input.who}}?q={{input.ids}}\",\"body\":{\"ids\":"
        "\"{{input.ids}}\"}}}]}";
    struct spec_job *j = NULL;
    struct spec_vars v = {0};
    cJSON *out = NULL;
    char err[256];

    ck_assert_msg(spec_parse(text, strlen(text), NULL, &j, err, sizeof(err)) ==
                      0,
                  "%s", err);
    v.input = j->input;
    ck_assert_int_eq(spec_step_fill(j, 0, &v, &out, err, sizeof(err)), 0);
    ck_assert_str_eq(cJSON_GetObjectItem(out, "url")->valuestring,
                     "http://h/i/a%2Fb%20c?q=%5B4%2C5%5D");
    ck_assert(cJSON_IsArray(
        cJSON_GetObjectItem(cJSON_GetObjectItem(out, "body"), "ids")));
    cJSON_Delete(out);
    spec_job_free(j);
}
END_TEST

/* The string at o.key1[i].key2, or "" when there is none. */
static const char *
string_at(const cJSON *o, const char *key1, int i, const char *key2)
{
    const cJSON *v = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(o, key1), i), key2);

    return cJSON_IsString(v) ? v->valuestring : "";
}

/* Step b's "when" and body read from v (a cache when cached): rc of the
 * fill, *out the body, err why it failed. */
static int
eval_b(const struct spec_job *j, const char *const *outputs, bool cached,
       struct spec_vars *v, cJSON **out, char *err, size_t len)
{
    bool holds = false;

    *v = (struct spec_vars){0};
    if (cached)
        spec_vars_init(v);
    v->input = j->input;
    v->outputs = outputs;
    spec_when_holds(j, 1, v, &holds, err, len);
    ck_assert(holds == (outputs[0][0] == '`'));
    return spec_step_fill(j, 1, v, out, err, len);
}

/* Twenty templates and a "when" reading one output parse it once with a
 * cache (as the worker fills), filled as when each parses it alone: the
 * same body, or the same error when the output is not JSON. */
static const char *const many_outputs[][2] = {{OUT_A, NULL},
                                              {"not json", NULL}};

START_TEST(test_many_references_parse_once)
{
    char content[700] = "\"", err[2][256];
    struct spec_job *j;
    struct spec_vars v[2];
    cJSON *out[2] = {NULL, NULL};
    int rc[2];

    for (int k = 0; k < 20; k++)
        strcat(content, k % 2 ? "{{steps.a.output.n}} "
                              : "{{steps.a.output.labels.1}}/");
    j = job_b(strcat(content, "\""),
              "{\"exists\":\"{{steps.a.output.kind}}\"}");
    for (int c = 0; c < 2; c++)
        rc[c] = eval_b(j, many_outputs[_i], c == 1, &v[c], &out[c], err[c],
                       sizeof(err[c]));
    ck_assert_int_eq(rc[0], rc[1]);
    if (rc[0] == 0) {
        ck_assert(cJSON_Compare(out[0], out[1], true));
        ck_assert_str_eq(string_at(out[1], "messages", 0, "content"),
                         "x/3 x/3 x/3 x/3 x/3 x/3 x/3 x/3 x/3 x/3 ");
    } else {
        ck_assert_str_eq(err[0], err[1]);
    }
    ck_assert_uint_eq(spec_vars_parses(&v[0]), 0); /* no cache */
    ck_assert_uint_eq(spec_vars_parses(&v[1]), 1);
    for (int c = 0; c < 2; c++) {
        spec_vars_cleanup(&v[c]);
        cJSON_Delete(out[c]);
    }
    spec_job_free(j);
}
END_TEST

static const struct when_case {
    const char *when;
    bool holds;
} whens[] = {
    {"{\"eq\":[\"{{steps.a.output.kind}}\",\"bug\"]}", true},
    {"{\"ne\":[\"{{steps.a.output.kind}}\",\"bug\"]}", false},
    {"{\"eq\":[\"{{steps.a.output.labels}}\",[\"ui\",\"x\"]]}", true},
    {"{\"gt\":[\"{{steps.a.output.n}}\",2]}", true},
    {"{\"lt\":[\"{{steps.a.output.n}}\",3]}", false},
    {"{\"le\":[\"{{steps.a.output.n}}\",3]}", true},
    {"{\"ge\":[\"{{input.who}}\",\"bob\"]}", false},
    {"{\"lt\":[\"{{input.who}}\",3]}", false}, /* kinds differ */
    {"{\"in\":[\"x\",\"{{steps.a.output.labels}}\"]}", true},
    {"{\"in\":[5,\"{{input.ids}}\"]}", true},
    {"{\"in\":[\"{{input.who}}\",[\"bo\",\"cy\"]]}", false},
    {"{\"exists\":\"{{steps.a.output.nope}}\"}", false},
    {"{\"exists\":\"{{input.ids.1}}\"}", true},
    /* absent: every comparison is false, ne too */
    {"{\"ne\":[\"{{steps.a.output.nope}}\",1]}", false},
    {"{\"not\":{\"eq\":[\"{{steps.a.output.nope}}\",1]}}", true},
    {"{\"all\":[{\"exists\":\"{{input.who}}\"},{\"eq\":[1,1]}]}", true},
    {"{\"any\":[{\"eq\":[1,2]},{\"eq\":[\"{{input.who}}\",\"ana\"]}]}", true},
    {"{\"any\":[{\"eq\":[1,2]},{\"eq\":[\"a\",\"b\"]}]}", false},
};

START_TEST(test_when_operators)
{
    const struct when_case *c = &whens[_i];
    static const char *const outputs[] = {OUT_A, NULL};
    struct spec_job *j = job_b("\"x\"", c->when);
    struct spec_vars v = {.input = j->input, .outputs = outputs};
    bool holds = !c->holds;
    char why[512] = "";

    spec_when_holds(j, 1, &v, &holds, why, sizeof(why));
    ck_assert_msg(holds == c->holds, "row %d: %s", _i, c->when);
    if (!holds)
        ck_assert_msg(strncmp(why, "when was false: ", 16) == 0, "%s", why);
    spec_job_free(j);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("jobspec");
    TCase *tc = tcase_create("validation");

    tcase_add_loop_test(tc, test_refuses_bad_job, 0,
                        (int)(sizeof(bad) / sizeof(bad[0])));
    tcase_add_loop_test(tc, test_accepts_http_step, 0,
                        (int)(sizeof(good_http) / sizeof(good_http[0])));
    tcase_add_test(tc, test_defaults_follow_kind);
    tcase_add_test(tc, test_budget_fields_read);
    tcase_add_test(tc, test_unknown_tier_refused_when_config_names_tiers);
    tcase_add_test(tc, test_huge_job_refused);
    tcase_add_test(tc, test_key_length_bounded);
    tcase_add_test(tc, test_stored_key_still_reads);
    tcase_add_test(tc, test_deep_nesting_refused);
    tcase_add_test(tc, test_many_names_the_bad_job);
    tcase_add_test(tc, test_many_accepts_array_and_lines);
    suite_add_tcase(s, tc);

    tc = tcase_create("templates");
    tcase_add_loop_test(tc, test_fill_paths_and_types, 0,
                        (int)(2 * (sizeof(fills) / sizeof(fills[0]))));
    tcase_add_test(tc, test_fill_http_url_and_body);
    tcase_add_loop_test(tc, test_many_references_parse_once, 0,
                        (int)(sizeof(many_outputs) / sizeof(many_outputs[0])));
    tcase_add_loop_test(tc, test_when_operators, 0,
                        (int)(sizeof(whens) / sizeof(whens[0])));
    suite_add_tcase(s, tc);
    return s;
}

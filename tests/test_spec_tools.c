/* test_spec_tools.c: a chat step's tools at enqueue (spec/tools.c), the
 * JSON Schema subset of their parameters (spec/schema.c), and what a call's
 * arguments do: approval conditions and the http action filled
 * (spec/tool_args.c). The config's shared tools (common/config_tools.c)
 * are named from jobs. Tables, one row per rule.
 *
 * JSON in the tables is written with ' for " (q() turns it back), so a
 * row reads as the job file it stands for.
 */
#include "tests/support/support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "spec/spec.h"

/* q returns s with every ' made ". Caller frees. */
static char *
q(const char *s)
{
    char *o = strdup(s);
    for (char *c = o; *c != '\0'; c++) {
        if (*c == '\'')
            *c = '"';
    }
    return o;
}

#define PARAMS                                                                 \
    "'parameters': {'type': 'object', 'properties': {"                         \
    "'issue': {'type': 'integer', 'minimum': 1},"                              \
    "'label': {'type': 'string', 'enum': ['bug', 'p1', 'wontfix']},"           \
    "'repo': {'type': 'object', 'properties': {'owner': {'type': 'string'}}}," \
    "'tags': {'type': 'array', 'items': {'type': 'string'}, 'maxItems': 3}},"  \
    "'required': ['issue', 'label'], 'additionalProperties': false}"
#define HTTP_ACTION                                                            \
    "'action': {'http': {'method': 'POST', 'url': "                            \
    "'http://127.0.0.1:9/repos/{{args.repo.owner}}/issues/{{args.issue}}/"     \
    "labels', 'headers': {'X-Label': '{{args.label}}'}, 'body': {'labels': "   \
    "['{{args.label}}'], 'issue': '{{args.issue}}', 'all': '{{args.tags}}'}}}"
#define TOOL(name, rest) "{'name': '" name "', 'description': 'd', " rest "}"
#define ADD_LABEL        TOOL("add_label", PARAMS ", " HTTP_ACTION)
/* A job whose one chat step offers tools (a JSON array's inside) and has
 * more step members (extra: "" or ", 'max_turns': 3"). */
#define JOBT(tools, extra)                                                     \
    "{'name': 'j', 'steps': [{'name': 'a', 'request': {'messages': "           \
    "[{'role': 'user', 'content': 'go'}]}, 'tools': [" tools "]" extra "}]}"

/* The config's shared tools, for the jobs that name them. */
#define CONFIG                                                                 \
    "{'tools': [" ADD_LABEL ", " TOOL(                                         \
        "ask_owner",                                                           \
        "'parameters': {'type': 'object', 'properties': {'q': {'type': "       \
        "'string'}}}, 'action': {'ask': 'May I close {{args.q}}?'}") "]}"

static struct config *
config(void)
{
    char *text = q(CONFIG), err[512];
    struct config *c = NULL;

    ck_assert_msg(
        config_parse(text, strlen(text), NULL, &c, err, sizeof(err)) == 0, "%s",
        err);
    free(text);
    return c;
}

/* parse validates job (with ') against the config's tools when with_cfg. */
static int
parse(const char *job, bool with_cfg, struct spec_job **out, char *err,
      size_t len)
{
    struct config *c = with_cfg ? config() : NULL;
    struct spec_opts o = {.tools = c ? &c->tools : NULL};
    char *text = q(job);
    int rc = spec_parse(text, strlen(text), &o, out, err, len);

    free(text);
    config_free(c);
    return rc;
}

struct bad_case {
    const char *job;
    const char *want; /* substring of the error */
};

static const struct bad_case bad[] = {
    {JOBT("'nope'", ""), "steps[0].tools[0]: no tool named nope in the config"},
    {JOBT("'bad name!'", ""), "steps[0].tools[0]: must name a tool"},
    {JOBT("", ""), "steps[0].tools: must be a non-empty array"},
    {JOBT("'add_label', " ADD_LABEL, ""),
     "steps[0].tools[1]: tool add_label offered twice"},
    {JOBT(TOOL("x", PARAMS), ""), "steps[0].tools[0].action: missing"},
    {JOBT(TOOL("x", HTTP_ACTION), ""), "steps[0].tools[0].parameters: missing"},
    {JOBT(TOOL("x y", PARAMS ", " HTTP_ACTION), ""),
     "steps[0].tools[0].name: must be 1 to 64"},
    {JOBT(TOOL("x", PARAMS ", 'action': {}"), ""),
     "steps[0].tools[0].action: needs one of \"http\" or \"ask\""},
    {JOBT(TOOL("x", PARAMS ", 'action': {'ask': 'a', 'http': {}}"), ""),
     "steps[0].tools[0].action: needs one of"},
    {JOBT(TOOL("x", PARAMS ", 'action': {'ask': 'Why {{args.labl}}?'}"), ""),
     "steps[0].tools[0].action.ask: template {{args.labl}} names no property"},
    {JOBT(TOOL("x", PARAMS ", 'action': {'http': {'url': "
                           "'http://{{args.label}}.example/'}}"),
          ""),
     "steps[0].tools[0].action.http.url: a template may fill the path or the "
     "query, not the host"},
    {JOBT(TOOL("x", PARAMS ", 'action': {'http': {'url': 'http://h/', "
                           "'method': 'TRACE'}}"),
          ""),
     "action.http.method: must be GET"},
    {JOBT(TOOL("x", PARAMS ", 'action': {'http': {'url': 'http://h/', "
                           "'body': {'a': '{{ args.issue }}'}}}"),
          ""),
     "action.http.body.a: bad template"},
    {JOBT(TOOL("x", PARAMS ", 'action': {'http': {'url': 'http://h/', "
                           "'headers': {'Content-Length': '1'}}}"),
          ""),
     "action.http.headers.Content-Length"},
    {JOBT(TOOL("x", PARAMS ", 'action': {'ask': 'ok?'}, "
                           "'idempotency_key': 'k'"),
          ""),
     "steps[0].tools[0].idempotency_key: only for an \"http\" action"},
    {JOBT(TOOL("x", PARAMS ", " HTTP_ACTION ", 'idempotency_key': "
                           "'{{args.nope}}'"),
          ""),
     "tools[0].idempotency_key: template {{args.nope}} names no property"},
    {JOBT(TOOL("x", PARAMS ", " HTTP_ACTION ", 'needs_approval': 'maybe'"), ""),
     "tools[0].needs_approval: must be \"never\", \"always\" or a condition"},
    {JOBT(TOOL("x", PARAMS ", " HTTP_ACTION
                           ", 'needs_approval': {'arg': 'labl', 'equals': 1}"),
          ""),
     "tools[0].needs_approval.arg: labl names no property"},
    {JOBT(TOOL("x", PARAMS ", " HTTP_ACTION
                           ", 'needs_approval': {'arg': 'issue', 'gt': 'a'}"),
          ""),
     "tools[0].needs_approval.gt: must be a number"},
    {JOBT(TOOL("x", PARAMS ", " HTTP_ACTION
                           ", 'needs_approval': {'any': [{'arg': 'issue'}]}"),
          ""),
     "tools[0].needs_approval.any[0]: a condition is"},
    {JOBT(TOOL("x", "'parameters': {'type': 'string'}, " HTTP_ACTION), ""),
     "tools[0].parameters: must have \"type\": \"object\""},
    {JOBT(TOOL("x", "'parameters': {'type': 'object', 'properties': {'a': "
                    "{'type': 'string', 'pattern': '^a'}}}, 'action': "
                    "{'ask': 'q'}"),
          ""),
     "tools[0].parameters.properties.a.pattern: keyword not supported"},
    {JOBT(TOOL("x", "'parameters': {'type': 'object', 'properties': {'a': "
                    "{'type': 'strin'}}}, 'action': {'ask': 'q'}"),
          ""),
     "tools[0].parameters.properties.a.type: must be one of"},
    {JOBT(TOOL("x", "'parameters': {'type': 'object', 'required': [1]}, "
                    "'action': {'ask': 'q'}"),
          ""),
     "tools[0].parameters.required[0]: must be a property name"},
    {JOBT(TOOL("x", "'parameters': {'type': 'object', 'properties': {'a': "
                    "{'type': 'array', 'maxItems': -1}}}, 'action': "
                    "{'ask': 'q'}"),
          ""),
     "properties.a.maxItems: must be a whole number"},
    {JOBT(TOOL("x", PARAMS ", " HTTP_ACTION ", 'flavour': 1"), ""),
     "tools[0].flavour: unknown field"},
    {JOBT("'add_label'", ", 'max_turns': 0"),
     "steps[0].max_turns: must be between"},
    {JOBT("'add_label'", ", 'tool_parallelism': 65"),
     "steps[0].tool_parallelism: must be between"},
    {"{'name': 'j', 'steps': [{'name': 'a', 'max_turns': 3, 'request': "
     "{'messages': [{'role': 'user'}]}}]}",
     "steps[0].max_turns: only for a step with \"tools\""},
    {"{'name': 'j', 'steps': [{'name': 'a', 'kind': 'http', 'http': {'url': "
     "'http://h/'}, 'tools': ['add_label']}]}",
     "steps[0].tools: only for steps of kind \"chat\""},
    {"{'name': 'j', 'steps': [{'name': 'a', 'tools': ['add_label'], "
     "'request': {'messages': [{'role': 'user'}], 'tools': []}}]}",
     "steps[0].request.tools: a step with \"tools\" sends its tools itself"},
};

START_TEST(test_refuses_bad_tools)
{
    struct spec_job *j = NULL;
    char err[512] = "";

    ck_assert_int_eq(parse(bad[_i].job, true, &j, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, bad[_i].want) != NULL, "row %d: got \"%s\"", _i,
                  err);
    ck_assert_ptr_null(j);
}
END_TEST

START_TEST(test_accepts_tools_and_bounds)
{
    struct spec_job *j = NULL;
    struct spec_toolset ts;
    const struct spec_tool *t;
    struct config *c = config();
    char err[512] = "";

    ck_assert_msg(parse(JOBT("'add_label', 'ask_owner', " TOOL(
                                 "list", "'parameters': {'type': 'object'}, "
                                         "'action': {'http': {'method': "
                                         "'GET', 'url': 'http://h/l'}}, "
                                         "'replayable': true, "
                                         "'side_effects': false"),
                             ", 'max_turns': 3, 'max_tool_errors': 0"),
                        true, &j, err, sizeof(err)) == 0,
                  "%s", err);
    ck_assert_ptr_nonnull(j->steps[0].tools);
    ck_assert_int_eq(j->steps[0].max_turns, 3);
    ck_assert_int_eq(j->steps[0].max_tool_calls_per_turn, 16);
    ck_assert_int_eq(j->steps[0].tool_parallelism, 4);
    ck_assert_int_eq(j->steps[0].max_tool_errors, 0);
    ck_assert_int_eq(spec_toolset_build(j->steps[0].tools, "tools", &c->tools,
                                        &ts, err, sizeof(err)),
                     0);
    ck_assert_int_eq(ts.n, 3);
    t = spec_toolset_find(&ts, "add_label");
    ck_assert(t->shared && t->kind == SPEC_TOOL_HTTP && !t->replayable &&
              t->side_effects && t->approval == SPEC_APPROVAL_NEVER);
    t = spec_toolset_find(&ts, "ask_owner");
    ck_assert(t->kind == SPEC_TOOL_ASK && t->replayable && !t->side_effects);
    ck_assert_str_eq(t->ask, "May I close {{args.q}}?");
    t = spec_toolset_find(&ts, "list");
    ck_assert(!t->shared && t->replayable && !t->side_effects);
    ck_assert_ptr_null(spec_toolset_find(&ts, "nope"));
    spec_toolset_cleanup(&ts);
    spec_job_free(j);
    config_free(c);
}
END_TEST

/* A stored job is parsed again without the config (the worker's own may
 * differ): names are checked as names, and resolved when it runs. */
START_TEST(test_names_unchecked_without_config)
{
    struct spec_job *j = NULL;
    struct spec_toolset ts = {0};
    char err[512] = "";

    ck_assert_int_eq(parse(JOBT("'nope'", ""), false, &j, err, sizeof(err)), 0);
    ck_assert_int_eq(spec_toolset_build(j->steps[0].tools, "steps[0].tools",
                                        NULL, &ts, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err,
                     "steps[0].tools[0]: no tool named nope in the config");
    ck_assert_ptr_null(ts.tools);
    spec_job_free(j);
}
END_TEST

/* ---- the config's tools ------------------------------------------------- */

struct cfg_case {
    const char *config;
    const char *want;
};

static const struct cfg_case cfg_bad[] = {
    {"{'tools': {}}", "tools: must be an array of tools"},
    {"{'tools': [1]}", "tools[0]: must be an object"},
    {"{'tools': [{'description': 'd'}]}", "tools[0].name: missing"},
    {"{'tools': [{'name': ''}]}", "tools[0].name: must be 1 to 64"},
    {"{'tools': [{'name': 'a'}, {'name': 'a'}]}",
     "tools[1].name: duplicate tool name a"},
};

START_TEST(test_config_tools_refused)
{
    char *text = q(cfg_bad[_i].config), err[512] = "";
    struct config *c = NULL;

    ck_assert_int_eq(
        config_parse(text, strlen(text), NULL, &c, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, cfg_bad[_i].want) != NULL, "got \"%s\"", err);
    free(text);
}
END_TEST

/* A shared definition is checked whole when the config is loaded, with
 * its path in the config, and again where a job names it. */
START_TEST(test_config_tool_checked_whole)
{
    char *text = q("{'tools': [{'name': 'a', 'parameters': {'type': "
                   "'object'}, 'action': {'ask': 'q'}}, {'name': 'b', "
                   "'parameters': {'type': 'object'}, 'action': {'http': "
                   "{'url': 'ftp://h/'}}}]}"),
         err[512] = "";
    struct config *c = NULL;
    struct spec_toolset ts;
    cJSON *names = cJSON_Parse("[\"a\", \"b\"]");

    ck_assert_int_eq(
        config_parse(text, strlen(text), NULL, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(c->tools.n, 2);
    ck_assert_ptr_nonnull(config_find_tool(&c->tools, "b"));
    ck_assert_int_eq(spec_tools_check_config(c, err, sizeof(err)), -EINVAL);
    ck_assert_str_eq(err, "tools[1].action.http.url: must start with http:// "
                          "or https://");
    ck_assert_int_eq(
        spec_toolset_build(names, "tools", &c->tools, &ts, err, sizeof(err)),
        -EINVAL);
    ck_assert_str_eq(err, "tools[1] (config tool b).action.http.url: must "
                          "start with http:// or https://");
    cJSON_Delete(names);
    config_free(c);
    free(text);
}
END_TEST

/* ---- arguments against the schema --------------------------------------- */

struct schema_case {
    const char *schema;
    const char *value;
    const char *want; /* NULL: valid */
};

static const struct schema_case schemas[] = {
    {"{'type': 'string'}", "'x'", NULL},
    {"{'type': 'string'}", "3", "args: expected string, got integer"},
    {"{'type': 'integer'}", "3.5", "args: expected integer, got number"},
    {"{'type': 'number'}", "3", NULL},
    {"{'type': ['string', 'null']}", "null", NULL},
    {"{'type': ['string', 'null']}", "true",
     "args: expected string or null, got boolean"},
    {"{'type': 'string', 'nullable': true}", "null", NULL},
    {"{'type': 'array', 'items': {'type': 'string'}}", "['a', 2]",
     "args[1]: expected string, got integer"},
    {"{'type': 'array', 'minItems': 2}", "[1]",
     "args: expected at least 2 items, got 1"},
    {"{'type': 'array', 'maxItems': 1}", "[1, 2]",
     "args: expected at most 1 items, got 2"},
    {"{'type': 'object', 'properties': {'labels': {'type': 'array', "
     "'items': {'type': 'string'}}}}",
     "{'labels': ['a', 1]}", "args.labels[1]: expected string, got integer"},
    {"{'type': 'object', 'required': ['issue']}", "{}",
     "args.issue: missing (required)"},
    {"{'type': 'object', 'properties': {}, 'additionalProperties': false}",
     "{'x': 1}", "args.x: unknown property"},
    {"{'type': 'object', 'additionalProperties': {'type': 'integer'}}",
     "{'x': 'a'}", "args.x: expected integer, got string"},
    {"{'enum': ['bug', 'p1']}", "'p2'", "args: not one of the allowed values"},
    {"{'enum': ['bug', 1]}", "1", NULL},
    {"{'const': 'x'}", "'y'", "args: expected the constant value"},
    {"{'type': 'string', 'minLength': 2}", "'é'",
     "args: expected at least 2 characters, got 1"},
    {"{'type': 'string', 'maxLength': 2}", "'abc'",
     "args: expected at most 2 characters, got 3"},
    {"{'type': 'integer', 'minimum': 1, 'maximum': 10}", "0",
     "args: expected a number >= 1, got 0"},
    {"{'type': 'integer', 'maximum': 10}", "11",
     "args: expected a number <= 10, got 11"},
    {"{'anyOf': [{'type': 'string'}, {'type': 'integer'}]}", "2", NULL},
    {"{'anyOf': [{'type': 'string'}, {'type': 'integer'}]}", "true",
     "args: expected integer, got boolean"},
    {"{'type': 'object', 'description': 'annotations only', 'title': 't', "
     "'examples': [{}]}",
     "{'a': 1}", NULL},
};

START_TEST(test_schema_validates)
{
    char *st = q(schemas[_i].schema), *vt = q(schemas[_i].value), err[256];
    cJSON *s = cJSON_Parse(st), *v = cJSON_Parse(vt);
    int rc;

    ck_assert_msg(spec_schema_check(s, "parameters", err, sizeof(err)) == 0,
                  "row %d: %s", _i, err);
    err[0] = '\0';
    rc = spec_schema_validate(s, v, "args", err, sizeof(err));
    if (schemas[_i].want == NULL)
        ck_assert_msg(rc == 0, "row %d: %s", _i, err);
    else
        ck_assert_msg(rc == -EINVAL && strcmp(err, schemas[_i].want) == 0,
                      "row %d: got \"%s\"", _i, err);
    cJSON_Delete(s);
    cJSON_Delete(v);
    free(st);
    free(vt);
}
END_TEST

/* ---- approvals ------------------------------------------------------------
 */

struct approval_case {
    const char *cond; /* needs_approval, as written */
    const char *args;
    bool want;
};

static const struct approval_case approvals[] = {
    {"'never'", "{'issue': 1}", false},
    {"'always'", "{'issue': 1}", true},
    {"{'arg': 'label', 'equals': 'wontfix'}", "{'label': 'wontfix'}", true},
    {"{'arg': 'label', 'equals': 'wontfix'}", "{'label': 'bug'}", false},
    {"{'arg': 'label', 'not_equals': 'bug'}", "{}", true},
    {"{'arg': 'label', 'in': ['wontfix', 'p1']}", "{'label': 'p1'}", true},
    {"{'arg': 'label', 'in': ['wontfix', 'p1']}", "{}", false},
    {"{'arg': 'issue', 'gt': 100}", "{'issue': 101}", true},
    {"{'arg': 'issue', 'gt': 100}", "{'issue': 100}", false},
    {"{'arg': 'issue', 'gte': 100}", "{'issue': 100}", true},
    {"{'arg': 'issue', 'lt': 5}", "{'issue': '3'}", false},
    {"{'arg': 'issue', 'lte': 5}", "{'issue': 5}", true},
    {"{'arg': 'tags', 'exists': true}", "{'tags': []}", true},
    {"{'arg': 'tags[1]', 'exists': true}", "{'tags': ['a']}", false},
    {"{'arg': 'repo.owner', 'equals': 'acme'}", "{'repo': {'owner': 'acme'}}",
     true},
    {"{'any': [{'arg': 'issue', 'gt': 100}, {'arg': 'label', 'equals': "
     "'wontfix'}]}",
     "{'issue': 1, 'label': 'wontfix'}", true},
    {"{'all': [{'arg': 'issue', 'gt': 100}, {'arg': 'label', 'equals': "
     "'wontfix'}]}",
     "{'issue': 1, 'label': 'wontfix'}", false},
};

START_TEST(test_needs_approval)
{
    char job[4096], *text, err[512] = "";
    struct spec_job *j = NULL;
    struct spec_toolset ts;
    cJSON *args;

    snprintf(
        job, sizeof(job),
        JOBT(TOOL("x", PARAMS ", " HTTP_ACTION ", 'needs_approval': %s"), ""),
        approvals[_i].cond);
    ck_assert_msg(parse(job, false, &j, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(
        spec_toolset_build(j->steps[0].tools, "t", NULL, &ts, err, sizeof(err)),
        0);
    text = q(approvals[_i].args);
    args = cJSON_Parse(text);
    ck_assert_msg(spec_tool_needs_approval(&ts.tools[0], args) ==
                      approvals[_i].want,
                  "row %d", _i);
    cJSON_Delete(args);
    free(text);
    spec_toolset_cleanup(&ts);
    spec_job_free(j);
}
END_TEST

/* ---- the http action filled from the arguments --------------------------- */

/* tool_of parses ADD_LABEL (with key as its idempotency_key, if any) into
 * *ts from job *j. */
static const struct spec_tool *
tool_of(const char *extra, struct spec_job **j, struct spec_toolset *ts)
{
    char job[4096], err[512] = "";

    snprintf(job, sizeof(job),
             JOBT(TOOL("add_label", PARAMS ", " HTTP_ACTION "%s"), ""), extra);
    ck_assert_msg(parse(job, false, j, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(spec_toolset_build((*j)->steps[0].tools, "t", NULL, ts,
                                        err, sizeof(err)),
                     0);
    return &ts->tools[0];
}

static cJSON *
args(const char *text)
{
    char *t = q(text);
    cJSON *a = cJSON_Parse(t);

    free(t);
    ck_assert_ptr_nonnull(a);
    return a;
}

START_TEST(test_request_filled)
{
    struct spec_job *j = NULL;
    struct spec_toolset ts;
    const struct spec_tool *t = tool_of(
        ", 'idempotency_key': 'label-{{args.issue}}-{{args.label}}'", &j, &ts);
    cJSON *a = args("{'issue': 412, 'label': 'bug', 'repo': {'owner': "
                    "'a b/c?d'}, 'tags': ['x', 'y']}"),
          *h = NULL, *body;
    char *key = NULL, err[256] = "";

    ck_assert_msg(spec_tool_request(t, a, &h, &key, err, sizeof(err)) == 0,
                  "%s", err);
    /* In the url a value is percent-encoded: it cannot add a segment or a
     * query of its own. */
    ck_assert_str_eq(
        cJSON_GetObjectItem(h, "url")->valuestring,
        "http://127.0.0.1:9/repos/a%20b%2Fc%3Fd/issues/412/labels");
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(h, "headers"), "X-Label")
            ->valuestring,
        "bug");
    body = cJSON_GetObjectItem(h, "body");
    /* A whole template keeps the value's JSON type. */
    ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(body, "issue")));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(body, "all")), 2);
    ck_assert_str_eq(
        cJSON_GetArrayItem(cJSON_GetObjectItem(body, "labels"), 0)->valuestring,
        "bug");
    ck_assert_str_eq(key, "label-412-bug");
    free(key);
    cJSON_Delete(h);
    cJSON_Delete(a);
    spec_toolset_cleanup(&ts);
    spec_job_free(j);
}
END_TEST

/* What the model sent cannot break out: a value that is itself a template
 * is sent as written, a header value with a line break is refused, a path
 * the arguments lack is a clear failure, never a literal send. */
START_TEST(test_request_refuses_or_keeps)
{
    struct spec_job *j = NULL;
    struct spec_toolset ts;
    const struct spec_tool *t = tool_of("", &j, &ts);
    cJSON *a, *h = NULL;
    char *key = (char *)"untouched", err[256] = "";

    a = args("{'issue': 1, 'label': '{{args.issue}}', 'repo': {'owner': "
             "'o'}, 'tags': []}");
    ck_assert_int_eq(spec_tool_request(t, a, &h, &key, err, sizeof(err)), 0);
    ck_assert_ptr_null(key);
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(h, "headers"), "X-Label")
            ->valuestring,
        "{{args.issue}}");
    cJSON_Delete(h);
    cJSON_Delete(a);
    a = args("{'issue': 1, 'label': 'a\\r\\nX-Evil: 1', 'repo': {'owner': "
             "'o'}, 'tags': []}");
    ck_assert_int_eq(spec_tool_request(t, a, &h, &key, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, "headers.X-Label: the filled value holds a line "
                          "break or another control character");
    cJSON_Delete(a);
    a = args("{'issue': 1, 'label': 'bug', 'tags': []}");
    ck_assert_int_eq(spec_tool_request(t, a, &h, &key, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, "url: {{args.repo.owner}}: the call's arguments "
                          "have no such value");
    cJSON_Delete(a);
    spec_toolset_cleanup(&ts);
    spec_job_free(j);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("spec_tools");
    TCase *def = tcase_create("definitions"), *cfg = tcase_create("config");
    TCase *sch = tcase_create("schema"), *args_tc = tcase_create("arguments");

    tcase_add_loop_test(def, test_refuses_bad_tools, 0,
                        (int)(sizeof(bad) / sizeof(bad[0])));
    tcase_add_test(def, test_accepts_tools_and_bounds);
    tcase_add_test(def, test_names_unchecked_without_config);
    tcase_add_loop_test(cfg, test_config_tools_refused, 0,
                        (int)(sizeof(cfg_bad) / sizeof(cfg_bad[0])));
    tcase_add_test(cfg, test_config_tool_checked_whole);
    tcase_add_loop_test(sch, test_schema_validates, 0,
                        (int)(sizeof(schemas) / sizeof(schemas[0])));
    tcase_add_loop_test(args_tc, test_needs_approval, 0,
                        (int)(sizeof(approvals) / sizeof(approvals[0])));
    tcase_add_test(args_tc, test_request_filled);
    tcase_add_test(args_tc, test_request_refuses_or_keeps);
    suite_add_tcase(s, def);
    suite_add_tcase(s, cfg);
    suite_add_tcase(s, sch);
    suite_add_tcase(s, args_tc);
    return s;
}

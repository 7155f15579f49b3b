/* cmd_policy.c: `stepq policy check CASES.json` (docs/reference.md "Outcomes
 * and decisions"): runs a table of cases through classify and decide with the
 * config's classify rules and policy numbers.
 *
 * The whole table is validated before any case runs, so a bad file prints
 * one error naming the JSON path of the first problem and exits 2, and a
 * good one prints PASS/FAIL per case and "N passed, M failed" last.
 */
#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/json.h"
#include "common/xalloc.h"
#include "policy/policy.h"

#define CASES_MAX_BYTES ((size_t)64 * 1024 * 1024)

static const char usage[] =
    "usage: stepq policy check CASES.json\n"
    "\n"
    "Runs each case of a JSON array through classify and decide, using the\n"
    "config's \"classify\" rules and \"policy\" numbers, and prints\n"
    "'PASS name' or 'FAIL name: got X, want Y' per case and\n"
    "'N passed, M failed' last. Exit 0 when all pass, 1 when one fails,\n"
    "2 when the file is not a valid case table.\n"
    "\n"
    "A case: {\"name\": \"...\",\n"
    "  \"response\": {\"status\": 429 | \"transport_error\": \"timeout\"|"
    "\"refused\"|\"reset\"|\"tls\"|\"too_large\",\n"
    "               \"headers\": {...}, \"body\": JSON value or string,\n"
    "               \"finish_reason\": \"...\", \"parsed_ok\": bool},\n"
    "  \"step\": {\"attempts_left\": 2, \"input_tokens\": 1200, "
    "\"token_budget\": 8000,\n"
    "           \"tiers_left\": 1, \"replayable\": true, \"side_effects\": "
    "false,\n"
    "           \"idempotency_key\": false, \"slack_s\": 90},\n"
    "  \"want\": {\"outcome\": \"...\", \"decision\": \"...\", \"reason\": "
    "\"...\",\n"
    "           \"wait_s\": [min, max]}}\n"
    "Also read when present: \"now\" (RFC 3339, default: the clock), step\n"
    "\"attempts_used\", \"degraded\", \"schema_retried\", "
    "\"throttle_waits_used\",\n"
    "\"breaker\" (closed|open|half_open), \"write_may_have_happened\", "
    "\"kind\"\n"
    "(chat|http) and \"seed\". Other fields are ignored.\n";

struct pcase {
    const char *name; /* borrowed from the tree */
    struct policy_input in;
    struct policy_header *headers; /* owned array */
    char **header_values;          /* owned strings for numeric values */
    char *body;                    /* owned when printed from JSON */
    struct policy_step step;
    bool write_set;
    enum policy_outcome outcome;
    bool has_decision, has_wait;
    enum policy_action decision;
    const char *reason; /* borrowed; NULL: not checked */
    double wait_min, wait_max;
};

static void
pcase_cleanup(struct pcase *c)
{
    for (size_t i = 0; c->header_values != NULL && i < c->in.nheaders; i++)
        free(c->header_values[i]);
    free(c->header_values);
    free(c->headers);
    free(c->body);
}

static uint64_t
fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;

    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

static int
get_object(const cJSON *o, const char *key, bool required, const char *path,
           const cJSON **out, char *err, size_t len)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    char p[512];

    if (v == NULL) {
        if (required)
            return json_fail(err, len, json_path_key(p, sizeof(p), path, key),
                             "missing");
        return 0;
    }
    if (!cJSON_IsObject(v))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, key),
                         "must be an object");
    *out = v;
    return 0;
}

static int
parse_headers(const cJSON *h, const char *path, struct pcase *c, char *err,
              size_t len)
{
    const cJSON *it;
    size_t n = (size_t)cJSON_GetArraySize(h), i = 0;
    char p[512];

    c->headers = xcalloc(n + 1, sizeof(*c->headers));
    c->header_values = xcalloc(n + 1, sizeof(*c->header_values));
    cJSON_ArrayForEach(it, h)
    {
        char num[64];
        if (cJSON_IsString(it)) {
            c->headers[i].value = it->valuestring;
        } else if (cJSON_IsNumber(it)) {
            snprintf(num, sizeof(num), "%.17g", it->valuedouble);
            c->header_values[i] = xstrdup(num);
            c->headers[i].value = c->header_values[i];
        } else {
            c->in.nheaders = i;
            return json_fail(err, len,
                             json_path_key(p, sizeof(p), path, it->string),
                             "must be a string");
        }
        c->headers[i].name = it->string;
        i++;
        c->in.nheaders = i;
    }
    c->in.headers = c->headers;
    return 0;
}

static int
parse_response(const cJSON *r, const char *path, struct pcase *c, char *err,
               size_t len)
{
    const cJSON *headers = NULL, *body, *parsed;
    const char *tr = NULL, *fr = NULL;
    int64_t status = 0;
    char p[512];
    int rc;

    if ((rc = json_get_string(r, "transport_error", false, path, &tr, err,
                              len)) ||
        (rc = json_get_int(r, "status", 100, 599, path, &status, err, len)))
        return rc;
    if (tr != NULL && status != 0)
        return json_fail(err, len, path,
                         "status and transport_error exclude each other");
    if (tr != NULL && (policy_transport_from_name(tr, &c->in.transport) != 0 ||
                       c->in.transport == POLICY_TRANSPORT_NONE))
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "transport_error"),
                         "must be timeout, refused, reset, tls or too_large");
    if (tr == NULL && status == 0)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "status"),
                         "missing (or give transport_error)");
    c->in.status = (int)status;
    if ((rc = get_object(r, "headers", false, path, &headers, err, len)))
        return rc;
    if (headers != NULL &&
        (rc = parse_headers(headers,
                            json_path_key(p, sizeof(p), path, "headers"), c,
                            err, len)))
        return rc;
    body = cJSON_GetObjectItemCaseSensitive(r, "body");
    if (cJSON_IsString(body)) {
        c->in.body = body->valuestring;
        c->in.body_len = strlen(body->valuestring);
    } else if (body != NULL && !cJSON_IsNull(body)) {
        c->body = json_print(body);
        c->in.body = c->body;
        c->in.body_len = strlen(c->body);
    }
    if (!cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "finish_reason")) &&
        (rc = json_get_string(r, "finish_reason", false, path, &fr, err, len)))
        return rc;
    c->in.finish_reason = fr;
    parsed = cJSON_GetObjectItemCaseSensitive(r, "parsed_ok");
    if (parsed != NULL) {
        bool ok = false;
        if ((rc = json_get_bool(r, "parsed_ok", path, &ok, err, len)))
            return rc;
        c->in.parsed = ok ? POLICY_PARSED_YES : POLICY_PARSED_NO;
    }
    return 0;
}

static int
get_count(const cJSON *o, const char *key, const char *path, int *out,
          char *err, size_t len)
{
    int64_t v = *out;
    int rc = json_get_int(o, key, 0, 1000000, path, &v, err, len);

    if (rc == 0)
        *out = (int)v;
    return rc;
}

static int
parse_step(const cJSON *s, const char *path, struct pcase *c, char *err,
           size_t len)
{
    struct policy_step *st = &c->step;
    const char *kind = NULL, *breaker = NULL;
    const cJSON *idem;
    double slack_s = 90;
    int64_t seed = -1;
    char p[512];
    int rc;

    *st = (struct policy_step){.attempts_left = 2,
                               .attempts_used = 1,
                               .input_tokens = 1200,
                               .token_budget = 8000,
                               .tiers_left = 1,
                               .replayable = true};
    if (s == NULL)
        goto defaults;
    idem = cJSON_GetObjectItemCaseSensitive(s, "idempotency_key");
    if (cJSON_IsString(idem))
        st->idempotency_key = idem->valuestring[0] != '\0';
    else if (idem != NULL && !cJSON_IsNull(idem) &&
             (rc = json_get_bool(s, "idempotency_key", path,
                                 &st->idempotency_key, err, len)))
        return rc;
    if ((rc = get_count(s, "attempts_left", path, &st->attempts_left, err,
                        len)) ||
        (rc = get_count(s, "attempts_used", path, &st->attempts_used, err,
                        len)) ||
        (rc = json_get_int(s, "input_tokens", 0, INT64_MAX / 16, path,
                           &st->input_tokens, err, len)) ||
        (rc = json_get_int(s, "token_budget", 0, INT64_MAX / 16, path,
                           &st->token_budget, err, len)) ||
        (rc = get_count(s, "tiers_left", path, &st->tiers_left, err, len)) ||
        (rc = get_count(s, "throttle_waits_used", path,
                        &st->throttle_waits_used, err, len)) ||
        (rc =
             json_get_bool(s, "replayable", path, &st->replayable, err, len)) ||
        (rc = json_get_bool(s, "side_effects", path, &st->side_effects, err,
                            len)) ||
        (rc = json_get_bool(s, "degraded", path, &st->degraded, err, len)) ||
        (rc = json_get_bool(s, "schema_retried", path, &st->schema_retried, err,
                            len)) ||
        (rc = json_get_number(s, "slack_s", -1e9, 1e9, path, &slack_s, err,
                              len)) ||
        (rc = json_get_int(s, "seed", 0, INT64_MAX, path, &seed, err, len)) ||
        (rc = json_get_string(s, "kind", false, path, &kind, err, len)) ||
        (rc = json_get_string(s, "breaker", false, path, &breaker, err, len)))
        return rc;
    if (cJSON_GetObjectItemCaseSensitive(s, "write_may_have_happened")) {
        if ((rc = json_get_bool(s, "write_may_have_happened", path,
                                &st->write_may_have_happened, err, len)))
            return rc;
        c->write_set = true;
    }
    if (kind != NULL && strcmp(kind, "chat") != 0 && strcmp(kind, "http") != 0)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "kind"),
                         "must be chat or http");
    c->in.http_step = kind != NULL && strcmp(kind, "http") == 0;
    if (breaker != NULL && policy_breaker_from_name(breaker, &st->breaker))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "breaker"),
                         "must be closed, open or half_open");
defaults:
    st->slack_ms = (int64_t)llround(slack_s * 1000);
    st->seed = seed >= 0 ? (uint64_t)seed : fnv1a(c->name);
    return 0;
}

static int
parse_want(const cJSON *w, const char *path, struct pcase *c, char *err,
           size_t len)
{
    const char *outcome = NULL, *decision = NULL;
    const cJSON *ws;
    char p[512];
    int rc;

    if ((rc = json_get_string(w, "outcome", true, path, &outcome, err, len)) ||
        (rc = json_get_string(w, "decision", false, path, &decision, err,
                              len)) ||
        (rc = json_get_string(w, "reason", false, path, &c->reason, err, len)))
        return rc;
    if (policy_outcome_from_name(outcome, &c->outcome) != 0)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "outcome"),
                         "unknown outcome \"%s\"", outcome);
    if (decision != NULL) {
        if (policy_action_from_name(decision, &c->decision) != 0)
            return json_fail(err, len,
                             json_path_key(p, sizeof(p), path, "decision"),
                             "unknown decision \"%s\"", decision);
        c->has_decision = true;
    }
    ws = cJSON_GetObjectItemCaseSensitive(w, "wait_s");
    if (ws != NULL) {
        const cJSON *lo = cJSON_GetArrayItem(ws, 0);
        const cJSON *hi = cJSON_GetArrayItem(ws, 1);
        if (!cJSON_IsArray(ws) || cJSON_GetArraySize(ws) != 2 ||
            !cJSON_IsNumber(lo) || !cJSON_IsNumber(hi) ||
            lo->valuedouble > hi->valuedouble)
            return json_fail(err, len,
                             json_path_key(p, sizeof(p), path, "wait_s"),
                             "must be [min, max] seconds");
        c->has_wait = true;
        c->wait_min = lo->valuedouble;
        c->wait_max = hi->valuedouble;
    }
    return 0;
}

static int
parse_case(const cJSON *o, const char *path, int64_t now, struct pcase *c,
           char *err, size_t len)
{
    const cJSON *resp = NULL, *step = NULL, *want = NULL;
    const char *at = NULL;
    char p[512];
    int rc;

    if (!cJSON_IsObject(o))
        return json_fail(err, len, path, "must be an object");
    if ((rc = json_get_string(o, "name", true, path, &c->name, err, len)) ||
        (rc = json_get_string(o, "now", false, path, &at, err, len)) ||
        (rc = get_object(o, "response", true, path, &resp, err, len)) ||
        (rc = get_object(o, "step", false, path, &step, err, len)) ||
        (rc = get_object(o, "want", true, path, &want, err, len)))
        return rc;
    c->in.now_ms = now;
    if (at != NULL && clock_parse_utc(at, &c->in.now_ms) != 0)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "now"),
                         "must be an RFC 3339 time");
    if ((rc =
             parse_response(resp, json_path_key(p, sizeof(p), path, "response"),
                            c, err, len)) ||
        (rc = parse_step(step, json_path_key(p, sizeof(p), path, "step"), c,
                         err, len)) ||
        (rc = parse_want(want, json_path_key(p, sizeof(p), path, "want"), c,
                         err, len)))
        return rc;
    c->step.now_ms = c->in.now_ms;
    if (!c->write_set)
        c->step.write_may_have_happened =
            policy_write_may_have_happened(&c->in);
    return 0;
}

/* append adds " key=value" to buf (len bytes). */
static void
append(char *buf, size_t len, const char *key, const char *val)
{
    size_t n = strlen(buf);

    if (n < len)
        snprintf(buf + n, len - n, "%s%s=%s", n > 0 ? " " : "", key, val);
}

/* run_case prints one PASS or FAIL line; returns whether it passed. */
static bool
run_case(const struct pcase *c, const struct policy_config *pc)
{
    struct policy_class cls;
    struct policy_decision d;
    char got[512] = "", want[512] = "", num[64];
    double wait_s;

    policy_classify(&c->in, pc, NULL, &cls);
    policy_decide(&cls, &c->step, pc, &d);
    wait_s = (double)d.wait_ms / 1000.0;
    if (cls.outcome != c->outcome) {
        append(got, sizeof(got), "outcome", policy_outcome_name(cls.outcome));
        append(want, sizeof(want), "outcome", policy_outcome_name(c->outcome));
    }
    if (c->reason != NULL &&
        (cls.reason == NULL || strcmp(cls.reason, c->reason) != 0)) {
        append(got, sizeof(got), "reason", cls.reason ? cls.reason : "none");
        append(want, sizeof(want), "reason", c->reason);
    }
    if (c->has_decision && d.action != c->decision) {
        append(got, sizeof(got), "decision", policy_action_name(d.action));
        append(want, sizeof(want), "decision", policy_action_name(c->decision));
    }
    if (c->has_wait && (wait_s < c->wait_min || wait_s > c->wait_max)) {
        snprintf(num, sizeof(num), "%.3f", wait_s);
        append(got, sizeof(got), "wait_s", num);
        snprintf(num, sizeof(num), "[%g, %g]", c->wait_min, c->wait_max);
        append(want, sizeof(want), "wait_s", num);
    }
    if (got[0] == '\0') {
        printf("PASS %s\n", c->name);
        return true;
    }
    printf("FAIL %s: got %s, want %s\n", c->name, got, want);
    return false;
}

static void
line_col(const char *text, const char *at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (const char *p = text; p < at && *p != '\0'; p++) {
        if (*p == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static int
check(struct cli_env *env, const char *file)
{
    const struct config *cfg = NULL;
    policy_rules *rules = NULL;
    struct policy_config pc;
    struct pcase *cases = NULL;
    cJSON *root = NULL;
    char *text = NULL, err[1024];
    const char *end = NULL;
    size_t len = 0, n = 0;
    int rc, passed = 0, failed = 0, line, col;
    int64_t now = clock_now_ms();

    if ((rc = cli_config(env, &cfg)) != 0)
        return rc;
    if (policy_rules_new(cfg->rules, cfg->nrules, &rules, err, sizeof(err))) {
        cli_error("config %s: %s", cfg->path ? cfg->path : "stepq.json", err);
        return CLI_USAGE;
    }
    policy_config_init(&pc, &cfg->policy, rules);
    rc = file_read_all(file, CASES_MAX_BYTES, &text, &len);
    if (rc != 0) {
        cli_error("policy check: %s: %s", file,
                  rc == -ENOENT  ? "no such file"
                  : rc == -E2BIG ? "larger than 64 MiB"
                                 : "cannot be read");
        rc = rc == -EIO ? CLI_RUNTIME : CLI_USAGE;
        goto out;
    }
    root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (root == NULL) {
        line_col(text, end != NULL ? end : text, &line, &col);
        cli_error("policy check: %s: not valid JSON (line %d, column %d)", file,
                  line, col);
        rc = CLI_USAGE;
        goto out;
    }
    if (!cJSON_IsArray(root)) {
        cli_error("policy check: %s: must be a JSON array of cases", file);
        rc = CLI_USAGE;
        goto out;
    }
    cases = xcalloc((size_t)cJSON_GetArraySize(root) + 1, sizeof(*cases));
    for (const cJSON *it = root->child; it != NULL; it = it->next) {
        char path[32];
        json_path_index(path, sizeof(path), "", (int)n);
        rc = parse_case(it, path, now, &cases[n++], err, sizeof(err));
        if (rc != 0) {
            cli_error("policy check: %s: %s", file, err);
            rc = CLI_USAGE;
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (run_case(&cases[i], &pc))
            passed++;
        else
            failed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    rc = failed > 0 ? CLI_RUNTIME : CLI_OK;
out:
    for (size_t i = 0; i < n; i++)
        pcase_cleanup(&cases[i]);
    free(cases);
    cJSON_Delete(root);
    free(text);
    policy_rules_free(rules);
    return rc;
}

static int
check_cmd(struct cli_env *env, int argc, char **argv)
{
    const char *pos[1];
    int npos = 0, rc;

    rc = cli_parse_args(argc, argv, NULL, pos, 1, &npos, usage);
    if (rc != 0)
        return rc;
    if (npos != 1) {
        cli_error("policy check: missing CASES.json");
        fputs(usage, stderr);
        return CLI_USAGE;
    }
    return check(env, pos[0]);
}

int
cmd_policy(struct cli_env *env, int argc, char **argv)
{
    static const struct cli_sub subs[] = {{"check", check_cmd}, {NULL, NULL}};

    return cli_subcommand(env, argc, argv, subs, usage);
}

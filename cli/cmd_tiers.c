/* cmd_tiers.c: stepq tiers — each configured tier's shared state; with
 * --check, one small request to each tier and what came of it; with
 * --dry-run, that request as it would be sent, secrets masked. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/file.h"
#include "queue/queue.h"
#include "view/view.h"
#include "worker/worker.h"

static const char usage[] =
    "usage: stepq tiers [--json]\n"
    "       stepq tiers --check [--dry-run] [--tier NAME] [--request FILE]"
    " [--json]\n"
    "\n"
    "The state every worker on the database shares for each tier of the\n"
    "config: breaker (closed, open, half_open) and until when it is open,\n"
    "a quota wall and until when, the pace in force (requests per minute\n"
    "it is paced to: the declared or learned limit, lowered after 429s),\n"
    "requests and tokens sent in the last minute, allowance used, and\n"
    "requests in flight.\n"
    "\n"
    "--check sends one small chat request to each tier (--tier: that one),\n"
    "as the worker would build it (headers, query, auth), all at once, each\n"
    "bounded by its tier's timeout_s, and reports each as reachable,\n"
    "auth_failed, wrong_path, rate_limited, timeout, unreachable, error or\n"
    "not_sent, with the status and classify's outcome. It reads neither the\n"
    "database nor the tiers' shared state, and is not paced. Exit 1 when a\n"
    "tier is not reachable. --dry-run (alone, it implies --check) prints\n"
    "each request instead (method, URL, headers with the key and env:\n"
    "values masked, body) and sends nothing. Both warn of a tier whose\n"
    "gateway drops Idempotency-Key or retries by itself. --request FILE\n"
    "sends that chat request object instead of the default one message\n"
    "with max_tokens 16. Keys are never printed.\n";

static long long
num_of(const cJSON *o, const char *name)
{
    return (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(o, name));
}

static int
show_state(struct cli_env *env, const struct config *cfg, bool json)
{
    static const char *const heads[] = {
        "TIER",      "BREAKER",   "OPEN UNTIL", "EXHAUSTED UNTIL",
        "REASON",    "PACE RPM",  "RPM",        "TPM",
        "ALLOWANCE", "IN FLIGHT", "STEPS",      "PRICE IN/OUT"};
    const char *failed = "?";
    struct cli_table tab;
    const cJSON *t;
    cJSON *arr = NULL;
    q_db *db = NULL;
    int rc;

    if ((rc = cli_open_db(env, &db)) != 0)
        return rc;
    rc = view_tiers(db, cfg, cli_now(db), &arr, &failed);
    q_close(db);
    if (rc != 0) {
        cli_error("tiers: cannot read the state of tier %s", failed);
        return CLI_RUNTIME;
    }
    if (json) {
        cli_print_json(arr);
        return CLI_OK;
    }
    cli_table_init(&tab, 12, heads, "lllllrrrrrlr");
    cJSON_ArrayForEach(t, arr)
    {
        char n[5][32], steps[64], price[64] = "-";
        const cJSON *p = cJSON_GetObjectItem(t, "price");
        const char *cells[12] = {cli_json_text(t, "name"),
                                 cli_json_text(t, "breaker"),
                                 cli_json_text(t, "open_until"),
                                 cli_json_text(t, "exhausted_until"),
                                 cli_json_text(t, "exhausted_reason"),
                                 n[0],
                                 n[1],
                                 n[2],
                                 n[3],
                                 n[4],
                                 steps,
                                 price};
        snprintf(n[0], sizeof(n[0]), "%.1f",
                 cJSON_GetNumberValue(cJSON_GetObjectItem(t, "rate_rpm")));
        snprintf(n[1], sizeof(n[1]), "%lld", num_of(t, "rpm_used"));
        snprintf(n[2], sizeof(n[2]), "%lld", num_of(t, "tpm_used"));
        snprintf(n[3], sizeof(n[3]), "%lld", num_of(t, "allowance_used"));
        snprintf(n[4], sizeof(n[4]), "%lld", num_of(t, "in_flight"));
        /* dollars per million tokens, in and out */
        if (cJSON_IsObject(p))
            snprintf(
                price, sizeof(price), "$%g/$%g",
                cJSON_GetNumberValue(cJSON_GetObjectItem(p, "input_per_mtok")),
                cJSON_GetNumberValue(
                    cJSON_GetObjectItem(p, "output_per_mtok")));
        /* what a step that prefers the tier does now, and why */
        if (cJSON_IsString(cJSON_GetObjectItem(t, "refused_by")))
            snprintf(steps, sizeof(steps), "%s (%s)", cli_json_text(t, "steps"),
                     cli_json_text(t, "refused_by"));
        else
            snprintf(steps, sizeof(steps), "%s", cli_json_text(t, "steps"));
        cli_table_add(&tab, cells);
    }
    cli_table_print(&tab);
    cli_table_cleanup(&tab);
    cJSON_Delete(arr);
    return CLI_OK;
}

static void
print_dry_run(const cJSON *arr)
{
    const cJSON *t, *h;
    char *body;

    cJSON_ArrayForEach(t, arr)
    {
        printf("# tier %s\n", cli_json_text(t, "tier"));
        cJSON_ArrayForEach(h, cJSON_GetObjectItem(t, "tls"))
        {
            printf("# tls %s: %s\n", h->string, cJSON_GetStringValue(h));
        }
        if (cJSON_IsString(cJSON_GetObjectItem(t, "note")))
            printf("# note: %s\n", cli_json_text(t, "note"));
        cJSON_ArrayForEach(h, cJSON_GetObjectItem(t, "warnings"))
        {
            printf("# warning: %s\n", cJSON_GetStringValue(h));
        }
        if (cJSON_IsString(cJSON_GetObjectItem(t, "error"))) {
            printf("# not sent: %s\n\n", cli_json_text(t, "error"));
            continue;
        }
        printf("POST %s\n", cli_json_text(t, "url"));
        cJSON_ArrayForEach(h, cJSON_GetObjectItem(t, "headers"))
        {
            printf("%s: %s\n", h->string, cJSON_GetStringValue(h));
        }
        body = cJSON_PrintUnformatted(cJSON_GetObjectItem(t, "body"));
        printf("\n%s\n\n", body ? body : "");
        cJSON_free(body);
    }
}

/* num_text writes a number member, or "-" when it is null. */
static const char *
num_text(const cJSON *o, const char *name, char *buf, size_t len)
{
    const cJSON *v = cJSON_GetObjectItem(o, name);

    if (!cJSON_IsNumber(v))
        return "-";
    snprintf(buf, len, "%.0f", v->valuedouble);
    return buf;
}

static void
print_check(const cJSON *arr)
{
    const cJSON *t, *w;
    char st[32], lat[32];
    int n = 0, good = 0;

    printf("%-16s %-13s %6s %-14s %-18s %10s\n", "TIER", "RESULT", "STATUS",
           "OUTCOME", "REASON", "LATENCY MS");
    cJSON_ArrayForEach(t, arr)
    {
        printf("%-16s %-13s %6s %-14s %-18s %10s\n", cli_json_text(t, "tier"),
               cli_json_text(t, "result"),
               num_text(t, "status", st, sizeof(st)),
               cli_json_text(t, "outcome"), cli_json_text(t, "reason"),
               num_text(t, "latency_ms", lat, sizeof(lat)));
        printf("    %s\n", cli_json_text(t, "url"));
        if (cJSON_IsString(cJSON_GetObjectItem(t, "note")))
            printf("    note: %s\n", cli_json_text(t, "note"));
        cJSON_ArrayForEach(w, cJSON_GetObjectItem(t, "warnings"))
        {
            printf("    warning: %s\n", cJSON_GetStringValue(w));
        }
        if (cJSON_IsString(cJSON_GetObjectItem(t, "error")))
            printf("    %s\n", cli_json_text(t, "error"));
        n++;
        good += strcmp(cli_json_text(t, "result"), "reachable") == 0;
    }
    printf("%d of %d tiers reachable\n", good, n);
}

/* read_request reads --request FILE: a JSON object. */
static int
read_request(const char *path, cJSON **out)
{
    char *text = NULL;
    size_t len = 0;
    cJSON *j;

    if (file_read_all(path, 1024 * 1024, &text, &len) != 0) {
        cli_error("tiers: --request %s: cannot be read", path);
        return CLI_USAGE;
    }
    j = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        cli_error("tiers: --request %s: must be a JSON object (a chat request)",
                  path);
        return CLI_USAGE;
    }
    *out = j;
    return 0;
}

static int
probe(const struct config *cfg, struct worker_probe_opts *po,
      const char *request, bool json)
{
    cJSON *req = NULL, *arr = NULL;
    bool ok = false;
    int rc;

    if (request != NULL && (rc = read_request(request, &req)) != 0)
        return rc;
    po->request = req;
    rc = worker_probe(cfg, po, &arr, &ok);
    cJSON_Delete(req);
    if (rc == -ENOENT) {
        cli_error("tiers: no tier %s in the config", po->tier);
        return CLI_NOTFOUND;
    }
    if (rc == -EINVAL) {
        cli_error("tiers: %s", cfg->ntiers == 0
                                   ? "the config names no tier"
                                   : "a classify rule of the config does "
                                     "not compile");
        return CLI_USAGE;
    }
    if (rc != 0) {
        cli_error("tiers: cannot set up the HTTP client");
        return CLI_RUNTIME;
    }
    if (json)
        cli_print_json(arr);
    else if (po->dry_run)
        print_dry_run(arr);
    else
        print_check(arr);
    if (!json)
        cJSON_Delete(arr);
    return ok ? CLI_OK : CLI_RUNTIME;
}

int
cmd_tiers(struct cli_env *env, int argc, char **argv)
{
    bool json = false, check = false, dry = false;
    const char *tier = NULL, *request = NULL;
    struct cli_opt opts[] = {
        {"json", NULL, &json},       {"check", NULL, &check},
        {"dry-run", NULL, &dry},     {"tier", &tier, NULL},
        {"request", &request, NULL}, {NULL, NULL, NULL}};
    struct worker_probe_opts po = {0};
    const struct config *cfg = NULL;
    int npos = 0, rc;

    if ((rc = cli_parse_args(argc, argv, opts, NULL, 0, &npos, usage)) != 0)
        return rc;
    if (!check && !dry && (tier != NULL || request != NULL)) {
        cli_error("tiers: --tier and --request go with --check or --dry-run");
        return CLI_USAGE;
    }
    if ((rc = cli_config(env, &cfg)) != 0)
        return rc;
    if (!check && !dry)
        return show_state(env, cfg, json);
    po.tier = tier;
    po.dry_run = dry;
    return probe(cfg, &po, request, json);
}

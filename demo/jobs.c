/* jobs.c: the config and the nightly batch of `stepq demo`: one changelog
 * job per repository and one triage agent, written to DIR/jobs.jsonl and
 * enqueued the way `stepq enqueue jobs.jsonl` does it.
 */
#include "demo/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/xalloc.h"
#include "spec/spec.h"

static const char *const repos[] = {
    "api",     "web",    "cli",        "docs",   "billing", "auth",    "search",
    "mobile",  "infra",  "sdk-python", "sdk-go", "ingest",  "reports", "admin",
    "gateway", "notify", "storage",    "sched",  "metrics", "website",
};

static const char *const prs[] = {
    "fix login redirect loop",
    "bump libuv to 1.48",
    "add retry jitter to the uploader",
    "drop Python 3.8 support",
    "cache tier state per worker",
    "document the park table",
    "speed up the claim query",
    "handle 529 as overloaded",
    "stream large exports",
    "rotate API keys without restart",
    "fix a race in the heartbeat",
};

/* ---- config and jobs ---------------------------------------------------- */

int
demo__write_config(demo *d, char *err, size_t len)
{
    char text[1280], perr[256];
    int rc;

    /* Short backoffs keep the tour under half a minute; real configs keep
     * the defaults (base 1 s, cap 20 s). So does the free tier's spill
     * "now": a step the paced free tier cannot take at once goes to the
     * backup, so the tour meets every outcome in twenty seconds. A real
     * config keeps the default, where a step waits for the free tier as
     * long as its deadline allows (`bench/free_first.py`). */
    snprintf(text, sizeof(text),
             "{\n"
             "  \"db\": \"stepq.db\",\n"
             "  \"worker\": {\"concurrency\": %d, \"lease_s\": 30},\n"
             "  \"policy\": {\"backoff_base_s\": 0.2, \"backoff_cap_s\": 2},\n"
             "  \"tiers\": [\n"
             "    {\"name\": \"free\", \"base_url\": \"%s\","
             " \"model\": \"small\", \"timeout_s\": 10, \"spill\": \"now\"},\n"
             "    {\"name\": \"backup\", \"base_url\": \"%s\","
             " \"model\": \"large\", \"timeout_s\": 10},\n"
             "    {\"name\": \"agent\", \"base_url\":"
             " \"http://127.0.0.1:%d/agent/v1\", \"model\": \"small\","
             " \"timeout_s\": 10}\n"
             "  ]\n"
             "}\n",
             DEMO_CONCURRENCY, d->ep[0].url, d->ep[1].url, d->ep[0].port);
    rc = config_parse(text, strlen(text), d->paths.dir, &d->cfg, perr,
                      sizeof(perr));
    if (rc != 0) {
        snprintf(err, len, "demo config: %s", perr);
        return rc;
    }
    return demo__write_text(d->paths.config, text, err, len);
}

static cJSON *
message(const char *content)
{
    cJSON *msgs = cJSON_CreateArray();
    cJSON *m = cJSON_CreateObject();

    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(msgs, m);
    return msgs;
}

/* The tiers of a changelog job's chat steps: not "agent", whose model
 * answers with tool calls. */
static cJSON *
changelog_tiers(void)
{
    static const char *const names[] = {"free", "backup"};

    return cJSON_CreateStringArray(names, 2);
}

/* One night's changelog job for repository i: summarize the merged pull
 * requests, write the entry, post it as a comment. Every other post
 * carries an idempotency key, so a storm on the comments API shows both
 * sides of the rule: keyed posts are retried, the others parked. */
static cJSON *
make_job(const demo *d, int i, const char *date)
{
    size_t nrepos = STEPQ_ARRAY_LEN(repos), nprs = STEPQ_ARRAY_LEN(prs);
    cJSON *job = cJSON_CreateObject(), *steps = cJSON_CreateArray();
    cJSON *s, *req, *http, *body, *keys;
    char repo[48], buf[512], url[160];

    if ((size_t)i < nrepos)
        snprintf(repo, sizeof(repo), "%s", repos[i]);
    else
        snprintf(repo, sizeof(repo), "%s-%d", repos[(size_t)i % nrepos],
                 i / (int)nrepos + 1);
    snprintf(buf, sizeof(buf), "changelog-%s", repo);
    cJSON_AddStringToObject(job, "name", buf);
    snprintf(buf, sizeof(buf), "changelog-%s-%s", repo, date);
    cJSON_AddStringToObject(job, "key", buf);
    cJSON_AddItemToObject(job, "steps", steps);

    s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "name", "summarize_prs");
    snprintf(buf, sizeof(buf),
             "Summarize the pull requests merged today in %s as JSON with a "
             "\"summary\" key:\n- #%d %s\n- #%d %s\n- #%d %s",
             repo, 400 + 3 * i, prs[(size_t)i % nprs], 401 + 3 * i,
             prs[(size_t)(i + 3) % nprs], 402 + 3 * i,
             prs[(size_t)(i + 7) % nprs]);
    req = cJSON_CreateObject();
    cJSON_AddItemToObject(req, "messages", message(buf));
    cJSON_AddNumberToObject(req, "max_tokens", 300);
    cJSON_AddItemToObject(s, "request", req);
    cJSON_AddItemToObject(s, "tiers", changelog_tiers());
    keys = cJSON_CreateArray();
    cJSON_AddItemToArray(keys, cJSON_CreateString("summary"));
    cJSON_AddItemToObject(s, "expect_json", keys);
    cJSON_AddNumberToObject(s, "token_budget", 4000);
    cJSON_AddItemToArray(steps, s);

    s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "name", "write_changelog");
    snprintf(buf, sizeof(buf),
             "Write a three-line changelog entry for %s from this summary: "
             "{{steps.summarize_prs.output}}",
             repo);
    req = cJSON_CreateObject();
    cJSON_AddItemToObject(req, "messages", message(buf));
    cJSON_AddNumberToObject(req, "max_tokens", 300);
    cJSON_AddItemToObject(s, "request", req);
    cJSON_AddItemToObject(s, "tiers", changelog_tiers());
    cJSON_AddItemToArray(steps, s);

    s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "name", "post_comment");
    cJSON_AddStringToObject(s, "kind", "http");
    if (i % 2 == 1) {
        snprintf(buf, sizeof(buf), "changelog-%s-%s-comment", repo, date);
        cJSON_AddStringToObject(s, "idempotency_key", buf);
        cJSON_AddNumberToObject(s, "max_attempts", 5);
    }
    http = cJSON_CreateObject();
    cJSON_AddStringToObject(http, "method", "POST");
    snprintf(url, sizeof(url), "%s/repos/%s/comments", d->ep[2].url, repo);
    cJSON_AddStringToObject(http, "url", url);
    body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "text", "{{steps.write_changelog.output}}");
    cJSON_AddItemToObject(http, "body", body);
    cJSON_AddItemToObject(s, "http", http);
    cJSON_AddItemToArray(steps, s);
    return job;
}

/* The triage agent: a chat step whose model (the "agent" tier, scripted
 * in side.c) labels issue 412 with two calls at once (add_label, keyed
 * per label, so a resend is harmless), then asks to post a comment
 * (post_comment needs approval: it parks before it is sent, showing its
 * arguments). */
static const char agent_job[] =
    "{\"name\": \"triage-issue-412\", \"key\": \"triage-412-%s\","
    " \"steps\": [{\"name\": \"triage\", \"tiers\": [\"agent\"],"
    " \"request\": {\"messages\": [{\"role\": \"user\", \"content\":"
    " \"Triage issue 412 of api: 'login redirect loops after the 1.48 "
    "bump'. Label it, then propose a comment.\"}]},"
    " \"tools\": [{\"name\": \"add_label\", \"description\": \"Add a "
    "label to the issue\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"label\": {\"type\": \"string\"}},"
    " \"required\": [\"label\"]}, \"idempotency_key\":"
    " \"issue-412-label-{{args.label}}\", \"action\": {\"http\":"
    " {\"method\": \"POST\", \"url\":"
    " \"%s/repos/api/issues/412/labels/{{args.label}}\"}}},"
    " {\"name\": \"post_comment\", \"description\": \"Post a comment on "
    "the issue\", \"parameters\": {\"type\": \"object\", \"properties\":"
    " {\"body\": {\"type\": \"string\"}}, \"required\": [\"body\"]},"
    " \"needs_approval\": \"always\", \"action\": {\"http\": {\"method\":"
    " \"POST\", \"url\": \"%s/repos/api/issues/412/comments\", \"body\":"
    " {\"text\": \"{{args.body}}\"}}}}]}]}";

/* Appends line and a newline to *text (*used of *cap bytes, grown). */
static void
append_line(char **text, size_t *cap, size_t *used, const char *line)
{
    size_t l = strlen(line);

    if (*used + l + 2 > *cap) {
        *cap = (*used + l + 2) * 2;
        *text = xrealloc(*text, *cap);
    }
    memcpy(*text + *used, line, l);
    *used += l;
    (*text)[(*used)++] = '\n';
    (*text)[*used] = '\0';
}

/* Writes the batch to DIR/jobs.jsonl, then validates and enqueues it as
 * `stepq enqueue jobs.jsonl` does (spec/'s one enqueue path): all jobs in
 * one transaction. */
int
demo__enqueue_batch(demo *d, char *err, size_t len)
{
    spec_enqueue *e = NULL;
    q_db *db = NULL;
    size_t cap = 4096, used = 0;
    char *text = xmalloc(cap), date[32], verr[256];
    int64_t now = clock_now_ms();
    int rc;

    clock_format_utc(now, date, sizeof(date));
    date[10] = '\0';
    text[0] = '\0';
    for (int i = 0; i < d->opts.njobs; i++) {
        cJSON *job = make_job(d, i, date);
        char *line = cJSON_PrintUnformatted(job);

        append_line(&text, &cap, &used, line);
        cJSON_free(line);
        cJSON_Delete(job);
    }
    {
        char line[sizeof(agent_job) + 256];
        snprintf(line, sizeof(line), agent_job, date, d->ep[2].url,
                 d->ep[2].url);
        append_line(&text, &cap, &used, line);
    }
    if ((rc = demo__write_text(d->paths.jobs, text, err, len)) != 0)
        goto out;
    if ((rc = q_open(d->paths.db, NULL, &db)) != 0) {
        snprintf(err, len, "cannot open %s", d->paths.db);
        goto out;
    }
    /* spec/'s one enqueue path, with the demo config's tiers. */
    e = spec_enqueue_new(
        &(struct spec_enqueue_opts){.db = db, .now = now, .cfg = d->cfg});
    if ((rc = spec_enqueue_text(e, text, used, verr, sizeof(verr))) != 0)
        snprintf(err, len, "%s: %s",
                 spec_enqueue_store_failed(e) ? d->paths.db : "demo jobs",
                 verr);
out:
    spec_enqueue_free(e);
    if (q_close(db) != 0 && rc == 0) {
        snprintf(err, len, "cannot close %s", d->paths.db);
        rc = -EIO;
    }
    free(text);
    return rc;
}

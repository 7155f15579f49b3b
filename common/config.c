/* config.c: the config file: parse, validate (with the JSON path of the
 * first problem), defaults, and resolving "db" against the file's folder. */
#include "common/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/file.h"
#include "common/internal.h"
#include "common/json.h"
#include "common/location.h"
#include "common/xalloc.h"

#define CONFIG_MAX_BYTES (4 * 1024 * 1024)

static void
set_defaults(struct config *c)
{
    c->on_park_timeout_s = 10;
    c->worker.concurrency = 64;
    c->worker.lease_s = 120;
    c->worker.keep_body_bytes = 65536;
    c->worker.max_response_bytes = 4 * 1024 * 1024;
    c->worker.idle_poll_ms = 200;
    c->policy.switch_wait_s = 60;
    c->policy.escalate_after_s = 300;
    c->policy.max_throttle_waits = 20;
    c->policy.backoff_base_s = 1;
    c->policy.backoff_cap_s = 20;
}

struct config *
config_new_default(void)
{
    struct config *c = xcalloc(1, sizeof(*c));
    set_defaults(c);
    return c;
}

static int
parse_worker(const cJSON *o, struct config_worker *w, char *err, size_t len)
{
    static const char *const keys[] = {"concurrency",     "lease_s",
                                       "keep_body_bytes", "max_response_bytes",
                                       "idle_poll_ms",    NULL};
    int64_t conc = w->concurrency;
    int rc;

    if ((rc = json_check_object(o, "worker", keys, err, len)) ||
        (rc = json_get_int(o, "concurrency", 1, 100000, "worker", &conc, err,
                           len)) ||
        (rc = json_get_number(o, "lease_s", 1, 86400, "worker", &w->lease_s,
                              err, len)) ||
        (rc = json_get_int(o, "keep_body_bytes", 0, 64 * 1024 * 1024, "worker",
                           &w->keep_body_bytes, err, len)) ||
        (rc = json_get_int(o, "max_response_bytes", 1024,
                           (int64_t)1024 * 1024 * 1024, "worker",
                           &w->max_response_bytes, err, len)) ||
        (rc = json_get_int(o, "idle_poll_ms", 10, 3600000, "worker",
                           &w->idle_poll_ms, err, len)))
        return rc;
    w->concurrency = (int)conc;
    return 0;
}

static int
parse_policy(const cJSON *o, struct config_policy *p, char *err, size_t len)
{
    static const char *const keys[] = {"switch_wait_s",      "escalate_after_s",
                                       "max_throttle_waits", "backoff_base_s",
                                       "backoff_cap_s",      NULL};
    int64_t waits = p->max_throttle_waits;
    int rc;

    if ((rc = json_check_object(o, "policy", keys, err, len)) ||
        (rc = json_get_number(o, "switch_wait_s", 0, 1e7, "policy",
                              &p->switch_wait_s, err, len)) ||
        (rc = json_get_number(o, "escalate_after_s", 0, 1e7, "policy",
                              &p->escalate_after_s, err, len)) ||
        (rc = json_get_int(o, "max_throttle_waits", 0, 1000000, "policy",
                           &waits, err, len)) ||
        (rc = json_get_number(o, "backoff_base_s", 0, 1e6, "policy",
                              &p->backoff_base_s, err, len)) ||
        (rc = json_get_number(o, "backoff_cap_s", 0, 1e7, "policy",
                              &p->backoff_cap_s, err, len)))
        return rc;
    if (p->backoff_cap_s < p->backoff_base_s)
        return json_fail(err, len, "policy.backoff_cap_s",
                         "must not be below backoff_base_s");
    p->max_throttle_waits = (int)waits;
    return 0;
}

static int
parse_rule(const cJSON *o, const char *path, struct config_rule *r, char *err,
           size_t len)
{
    static const char *const keys[] = {
        "status", "body", "header", "header_value", "outcome", "reason", NULL};
    const char *body = NULL, *hname = NULL, *hvalue = NULL, *outcome = NULL;
    const char *reason = NULL;
    int64_t status = 0;
    char p[256];
    int rc;

    if ((rc = json_check_object(o, path, keys, err, len)) ||
        (rc = json_get_int(o, "status", 100, 999, path, &status, err, len)) ||
        (rc = json_get_string(o, "body", false, path, &body, err, len)) ||
        (rc = json_get_string(o, "header", false, path, &hname, err, len)) ||
        (rc = json_get_string(o, "header_value", false, path, &hvalue, err,
                              len)) ||
        (rc = json_get_string(o, "outcome", true, path, &outcome, err, len)) ||
        (rc = json_get_string(o, "reason", false, path, &reason, err, len)))
        return rc;
    if ((hname == NULL) != (hvalue == NULL))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "header"),
                         "header and header_value go together");
    r->status = (int)status;
    r->body = xstrdup(body);
    r->header_name = xstrdup(hname);
    for (char *c = r->header_name; c && *c; c++)
        *c = (char)tolower((unsigned char)*c);
    r->header_value = xstrdup(hvalue);
    r->outcome = xstrdup(outcome);
    r->reason = xstrdup(reason);
    return 0;
}

/* One schedule; dir resolves its job file. The name goes into dedupe keys
 * ("schedule:NAME:SLOT"), so it is kept to a plain alphabet. */
static int
parse_schedule(const cJSON *o, const char *path, const char *dir,
               struct config_schedule *s, char *err, size_t len)
{
    static const char *const keys[] = {"name", "cron",     "tz",
                                       "job",  "catch_up", NULL};
    static const char *const catch_ups[] = {"latest", "none", "all"};
    const char *name = NULL, *cron = NULL, *tz = NULL, *catch_up = NULL;
    const cJSON *job;
    char p[256];
    int rc, c = -1;

    if ((rc = json_check_object(o, path, keys, err, len)) ||
        (rc = json_get_string(o, "name", true, path, &name, err, len)) ||
        (rc = json_get_string(o, "cron", true, path, &cron, err, len)) ||
        (rc = json_get_string(o, "tz", false, path, &tz, err, len)) ||
        (rc = json_get_string(o, "catch_up", false, path, &catch_up, err, len)))
        return rc;
    if (name[0] == '\0' || strlen(name) > 100 ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789-_.") != strlen(name))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "name"),
                         "1 to 100 letters, digits, '-', '_' or '.'");
    for (int i = 0; catch_up != NULL && i < 3; i++)
        if (strcmp(catch_up, catch_ups[i]) == 0)
            c = i;
    if (catch_up != NULL && c < 0)
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "catch_up"),
                         "must be latest, none or all");
    job = cJSON_GetObjectItemCaseSensitive(o, "job");
    json_path_key(p, sizeof(p), path, "job");
    if (job == NULL)
        return json_fail(err, len, p, "missing (a job file or a job)");
    if (cJSON_IsString(job) && job->valuestring[0] != '\0')
        s->job_path = config__resolve_path(dir, job->valuestring);
    else if (cJSON_IsObject(job))
        s->job_text = json_print(job);
    else
        return json_fail(err, len, p, "must be a job file's path or a job");
    s->name = xstrdup(name);
    s->cron = xstrdup(cron);
    s->tz = xstrdup(tz != NULL ? tz : "UTC");
    s->catch_up = c < 0 ? CONFIG_CATCH_UP_LATEST : (enum config_catch_up)c;
    return 0;
}

static int
parse_report_hook(const cJSON *o, struct config *c, char *err, size_t len)
{
    static const char *const keys[] = {"cron", "tz", "command", NULL};
    const char *cron = NULL, *tz = NULL, *command = NULL;
    int rc;

    if ((rc = json_check_object(o, "on_report", keys, err, len)) ||
        (rc = json_get_string(o, "cron", true, "on_report", &cron, err, len)) ||
        (rc = json_get_string(o, "tz", false, "on_report", &tz, err, len)) ||
        (rc = json_get_string(o, "command", true, "on_report", &command, err,
                              len)))
        return rc;
    if (command[0] == '\0')
        return json_fail(err, len, "on_report.command", "must not be empty");
    c->on_report = xcalloc(1, sizeof(*c->on_report));
    c->on_report->cron = xstrdup(cron);
    c->on_report->tz = xstrdup(tz != NULL ? tz : "UTC");
    c->on_report->command = xstrdup(command);
    return 0;
}

/* "retention": whole days, at most 100 years; bodies cannot outlive the
 * jobs they belong to. */
static int
parse_retention(const cJSON *o, struct config_retention *r, char *err,
                size_t len)
{
    static const char *const keys[] = {"finished_jobs_days",
                                       "attempt_bodies_days", NULL};
    int64_t jobs = 0, bodies = 0;
    int rc;

    if ((rc = json_check_object(o, "retention", keys, err, len)) ||
        (rc = json_get_int(o, "finished_jobs_days", 1, 36500, "retention",
                           &jobs, err, len)) ||
        (rc = json_get_int(o, "attempt_bodies_days", 1, 36500, "retention",
                           &bodies, err, len)))
        return rc;
    if (jobs > 0 && bodies > jobs)
        return json_fail(err, len, "retention.attempt_bodies_days",
                         "%lld is more than finished_jobs_days (%lld): a "
                         "job's bodies go with the job",
                         (long long)bodies, (long long)jobs);
    r->finished_jobs_days = (int)jobs;
    r->attempt_bodies_days = (int)bodies;
    return 0;
}

static int
parse_schedules(const cJSON *v, const char *dir, struct config *c, char *err,
                size_t len)
{
    const cJSON *it;
    char p[64];
    int rc, i = 0;

    if (!cJSON_IsArray(v))
        return json_fail(err, len, "schedules", "must be an array");
    c->schedules =
        xcalloc((size_t)cJSON_GetArraySize(v) + 1, sizeof(*c->schedules));
    cJSON_ArrayForEach(it, v)
    {
        json_path_index(p, sizeof(p), "schedules", i);
        if ((rc = parse_schedule(it, p, dir, &c->schedules[i], err, len)))
            return rc;
        c->nschedules++;
        for (int k = 0; k < i; k++)
            if (strcmp(c->schedules[k].name, c->schedules[i].name) == 0)
                return json_fail(err, len, p, "duplicate schedule name %s",
                                 c->schedules[i].name);
        i++;
    }
    return 0;
}

/* "tiers": an array of tiers with distinct names. */
static int
parse_tiers(const cJSON *v, const char *dir, struct config *c, char *err,
            size_t len)
{
    const cJSON *it;
    char p[64];
    int rc, i = 0;

    if (!cJSON_IsArray(v))
        return json_fail(err, len, "tiers", "must be an array");
    c->tiers = xcalloc((size_t)cJSON_GetArraySize(v) + 1, sizeof(*c->tiers));
    cJSON_ArrayForEach(it, v)
    {
        json_path_index(p, sizeof(p), "tiers", i);
        if ((rc = config__parse_tier(it, p, dir, &c->tiers[c->ntiers], err,
                                     len)))
            return rc;
        c->ntiers++;
        for (int k = 0; k < i; k++) {
            if (strcmp(c->tiers[k].name, c->tiers[i].name) == 0)
                return json_fail(err, len, p, "duplicate tier name %s",
                                 c->tiers[i].name);
        }
        i++;
    }
    return 0;
}

/* "classify": an array of user rules. */
static int
parse_rules(const cJSON *v, struct config *c, char *err, size_t len)
{
    const cJSON *it;
    char p[64];
    int rc, i = 0;

    if (!cJSON_IsArray(v))
        return json_fail(err, len, "classify", "must be an array");
    c->rules = xcalloc((size_t)cJSON_GetArraySize(v) + 1, sizeof(*c->rules));
    cJSON_ArrayForEach(it, v)
    {
        json_path_index(p, sizeof(p), "classify", i++);
        if ((rc = parse_rule(it, p, &c->rules[c->nrules], err, len)))
            return rc;
        c->nrules++;
    }
    return 0;
}

char *
config__resolve_path(const char *dir, const char *rel)
{
    char *p;
    size_t n;

    if (rel[0] == '/' || dir == NULL || dir[0] == '\0')
        return xstrdup(rel);
    n = strlen(dir) + strlen(rel) + 2;
    p = xmalloc(n);
    snprintf(p, n, "%s/%s", dir, rel);
    return p;
}

/* The database location "db": a path (or "sqlite:PATH") is resolved
 * against the config's folder; a "scheme://..." location or libpq's
 * keyword form ("host=... dbname=...") is kept as is. */
static char *
resolve_db(const char *dir, const char *db)
{
    static const char scheme[] = "sqlite:";
    const size_t n = sizeof(scheme) - 1;
    char *path, *loc;
    size_t len;

    /* A URL or libpq's keyword form names no file: kept as written. */
    if (!location_is_path(db))
        return xstrdup(db);
    if (strncmp(db, scheme, n) != 0)
        return config__resolve_path(dir, db);
    path = config__resolve_path(dir, db + n);
    len = n + strlen(path) + 1;
    loc = xmalloc(len);
    snprintf(loc, len, "%s%s", scheme, path);
    free(path);
    return loc;
}

static int
parse_root(const cJSON *root, const char *dir, struct config *c, char *err,
           size_t len)
{
    static const char *const keys[] = {"db",
                                       "worker",
                                       "policy",
                                       "tiers",
                                       "classify",
                                       "on_park",
                                       "on_park_timeout_s",
                                       "on_done",
                                       "on_fail",
                                       "schedules",
                                       "on_report",
                                       "budgets",
                                       "tools",
                                       "retention",
                                       "hooks",
                                       NULL};
    const char *db = NULL, *on_park = NULL, *on_done = NULL, *on_fail = NULL;
    const cJSON *v;
    int rc;

    if ((rc = json_check_object(root, "", keys, err, len)) ||
        (rc = json_get_string(root, "db", false, "", &db, err, len)) ||
        (rc =
             json_get_string(root, "on_park", false, "", &on_park, err, len)) ||
        (rc =
             json_get_string(root, "on_done", false, "", &on_done, err, len)) ||
        (rc =
             json_get_string(root, "on_fail", false, "", &on_fail, err, len)) ||
        (rc = json_get_number(root, "on_park_timeout_s", 0.1, 3600, "",
                              &c->on_park_timeout_s, err, len)))
        return rc;
    if (db != NULL && db[0] == '\0')
        return json_fail(err, len, "db", "must not be empty");
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "worker")) &&
        (rc = parse_worker(v, &c->worker, err, len)))
        return rc;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "policy")) &&
        (rc = parse_policy(v, &c->policy, err, len)))
        return rc;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "tiers")) != NULL &&
        (rc = parse_tiers(v, dir, c, err, len)))
        return rc;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "classify")) != NULL &&
        (rc = parse_rules(v, c, err, len)))
        return rc;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "schedules")) != NULL &&
        (rc = parse_schedules(v, dir, c, err, len)))
        return rc;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "on_report")) != NULL &&
        (rc = parse_report_hook(v, c, err, len)))
        return rc;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "budgets")) != NULL &&
        (rc = config__parse_budgets(v, c, err, len)))
        return rc;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "tools")) != NULL &&
        (rc = config__parse_tools(v, &c->tools, err, len)))
        return rc;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "retention")) != NULL &&
        (rc = parse_retention(v, &c->retention, err, len)))
        return rc;
    c->db = db ? resolve_db(dir, db) : NULL;
    c->on_park = xstrdup(on_park);
    c->on_done = xstrdup(on_done);
    c->on_fail = xstrdup(on_fail);
    return 0;
}

int
config_parse(const char *text, size_t len, const char *dir, struct config **out,
             char *err, size_t errlen)
{
    cJSON *root = NULL, *hooks;
    struct config *c = NULL;
    int rc;

    if (!json_utf8_valid(text, len))
        return json_fail(err, errlen, "", "config is not valid UTF-8");
    if ((rc = json_parse_whole(text, len, "config is ", &root, err, errlen)) !=
        0)
        return rc;
    c = config_new_default();
    rc = parse_root(root, dir, c, err, errlen);
    hooks = cJSON_GetObjectItemCaseSensitive(root, "hooks");
    if (rc == 0 && hooks != NULL)
        rc = config__parse_hooks(hooks, &c->hooks, err, errlen);
    cJSON_Delete(root);
    if (rc != 0) {
        config_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int
config_load(const char *path, struct config **out, char *err, size_t errlen)
{
    char *text = NULL, *dir = NULL, *slash;
    char inner[512];
    size_t len = 0;
    struct config *c = NULL;
    int rc;

    rc = file_read_all(path, CONFIG_MAX_BYTES, &text, &len);
    if (rc == -E2BIG) {
        snprintf(err, errlen, "%s: config larger than %d bytes", path,
                 CONFIG_MAX_BYTES);
        return -EINVAL;
    }
    if (rc == -EISDIR) {
        snprintf(err, errlen, "%s: a folder, not a config file", path);
        return -EINVAL;
    }
    if (rc == -ENOENT) {
        snprintf(err, errlen, "%s: no such file", path);
        return rc;
    }
    /* A config that is there but cannot be read is a bad config (exit 2),
     * not a runtime error. */
    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot read (%s)", path, strerror(-rc));
        return -EINVAL;
    }
    dir = xstrdup(path);
    slash = strrchr(dir, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        dir[0] = '\0';
    rc = config_parse(text, len, dir, &c, inner, sizeof(inner));
    free(text);
    free(dir);
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", path, inner);
        return rc;
    }
    c->path = xstrdup(path);
    *out = c;
    return 0;
}

const struct config_tier *
config_find_tier(const struct config *cfg, const char *name)
{
    for (size_t i = 0; cfg != NULL && i < cfg->ntiers; i++) {
        if (strcmp(cfg->tiers[i].name, name) == 0)
            return &cfg->tiers[i];
    }
    return NULL;
}

const struct config_schedule *
config_find_schedule(const struct config *cfg, const char *name)
{
    for (size_t i = 0; cfg != NULL && i < cfg->nschedules; i++) {
        if (strcmp(cfg->schedules[i].name, name) == 0)
            return &cfg->schedules[i];
    }
    return NULL;
}

const char *
config_catch_up_name(enum config_catch_up c)
{
    return c == CONFIG_CATCH_UP_NONE  ? "none"
           : c == CONFIG_CATCH_UP_ALL ? "all"
                                      : "latest";
}

void
config_free(struct config *cfg)
{
    if (cfg == NULL)
        return;
    /* A schedule that failed half-way may hold its job's path or text. */
    for (size_t i = 0; cfg->schedules != NULL && i <= cfg->nschedules; i++) {
        free(cfg->schedules[i].name);
        free(cfg->schedules[i].cron);
        free(cfg->schedules[i].tz);
        free(cfg->schedules[i].job_path);
        free(cfg->schedules[i].job_text);
    }
    free(cfg->schedules);
    config__budgets_free(cfg);
    config__tools_free(&cfg->tools);
    if (cfg->on_report != NULL) {
        free(cfg->on_report->cron);
        free(cfg->on_report->tz);
        free(cfg->on_report->command);
        free(cfg->on_report);
    }
    for (size_t i = 0; i < cfg->ntiers; i++) {
        config__tier_cleanup(&cfg->tiers[i]);
    }
    /* A tier or rule that failed half-way may hold some strings: parse_*
     * only store them on success, so nothing past ntiers/nrules is set. */
    for (size_t i = 0; i < cfg->nrules; i++) {
        free(cfg->rules[i].body);
        free(cfg->rules[i].header_name);
        free(cfg->rules[i].header_value);
        free(cfg->rules[i].outcome);
        free(cfg->rules[i].reason);
    }
    free(cfg->tiers);
    free(cfg->rules);
    free(cfg->path);
    free(cfg->db);
    free(cfg->on_park);
    free(cfg->on_done);
    free(cfg->on_fail);
    config__hooks_free(&cfg->hooks);
    free(cfg);
}

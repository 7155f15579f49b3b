/* config.h: the stepq configuration file (docs/reference.md "Files"), parsed
 * and validated into plain structs.
 *
 * Unknown fields are refused with their JSON path, like job files.  The
 * classify rules are kept as text here; policy compiles them.
 */
#ifndef STEPQ_COMMON_CONFIG_H
#define STEPQ_COMMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/defs.h"
#include "common/price.h"

struct config_breaker {
    int failures;      /* consecutive failures that open it; default 5 */
    double cooldown_s; /* how long it stays open; default 30 */
};

/* How a tier's key (the value of $api_key_env) is sent. */
enum config_auth {
    CONFIG_AUTH_DEFAULT = 0, /* "auth" absent: Bearer when api_key_env names
                                a variable that is set, else no header */
    CONFIG_AUTH_BEARER,      /* "bearer": "Authorization: Bearer KEY"; the
                                variable must be set when sent */
    CONFIG_AUTH_HEADER,      /* "header:NAME": "NAME: KEY"; likewise */
    CONFIG_AUTH_NONE,        /* "none": no key is sent */
};

/* A name and a value of a tier's headers or query. A value "env:NAME" is
 * read from the environment when a request is built, never before. */
struct config_pair {
    char *name;  /* owned; a header name is an HTTP token */
    char *value; /* owned; no control characters */
};

#define CONFIG_MAX_PAIRS 64 /* headers, and query parameters, per tier */

/* Which protocol a tier speaks ("api"). */
enum config_api {
    CONFIG_API_OPENAI = 0, /* "openai": POST {base_url}/chat/completions */
    CONFIG_API_ANTHROPIC,  /* "anthropic": POST {base_url}/messages */
    CONFIG_API_GEMINI,     /* "gemini": POST {base_url}/models/{model}:
                              generateContent */
};

/* A tier's default max_tokens for the Anthropic Messages API, which
 * requires one, when neither the request nor the tier names one. */
#define CONFIG_ANTHROPIC_MAX_TOKENS 4096

/* A tier in batch mode (docs/reference.md "Batches"): which provider's
 * batch API it speaks, and how it gathers, submits and polls. */
enum config_batch_api {
    CONFIG_BATCH_OPENAI = 0, /* /files + /batches, JSONL, metadata */
    CONFIG_BATCH_ANTHROPIC,  /* /messages/batches */
};

struct config_batch {
    enum config_batch_api api;
    int64_t max_items; /* items in one batch; default 1000 */
    int64_t gather_ms; /* a batch is sent this long after its first item
                          (or when full); default 60 s */
    int64_t poll_ms;   /* a submitted batch is polled this often; 60 s */
    int64_t window_ms; /* completion_window ("24h": OpenAI's only one,
                          Anthropic's fixed one) */
    int64_t expect_ms; /* what a step expects a batch to take: it goes to
                          the batch only with this much slack; default
                          window_ms */
};

struct config_tier {
    char *name;        /* owned; unique */
    char *base_url;    /* owned; e.g. "http://127.0.0.1:8080/v1" */
    char *model;       /* owned */
    char *api_key_env; /* owned; NULL: no key */
    enum config_auth auth;
    char *auth_header;           /* owned; CONFIG_AUTH_HEADER's NAME, else
                                    NULL */
    struct config_pair *headers; /* owned array of nheaders */
    size_t nheaders;
    struct config_pair *query; /* owned array of nquery; appended to the
                                  URL, percent-encoded, in this order */
    size_t nquery;
    int64_t rpm;                /* requests per minute; 0 = unlimited */
    int64_t tpm;                /* tokens per minute; 0 = unlimited */
    double window_s;            /* rpm and tpm are per this many seconds;
                                   default 60 (a minute) */
    int64_t allowance_tokens;   /* tokens per allowance window; 0 = none */
    int64_t allowance_window_s; /* "minute|hour|day|week|month"; day */
    double degrade_at;          /* fraction of allowance; default 0.8 */
    int64_t burst;              /* requests the bucket holds; 0: one
                                   second's worth of the pace, at least 1 */
    int max_inflight;           /* 0 = unlimited */
    double timeout_s;           /* per request; default 60 */
    struct config_breaker breaker;
    /* How long a step waits for this tier while it is only paced, before
     * it goes to a later tier of its list: CONFIG_SPILL_DEADLINE (the
     * default) as long as the step's slack allows, 0 at once, else this
     * many ms. */
    int64_t spill_after_ms;
    struct price price;          /* "price"; price.set false: none declared */
    bool batch_mode;             /* "mode": "batch"; false: "realtime" */
    struct config_batch batch;   /* batch_mode only */
    struct price realtime_price; /* batch_mode: what the same usage costs
                                    realtime, for the report's savings;
                                    default twice price */
    /* TLS of an https:// base_url; owned paths, resolved against the
     * config's folder and checked readable when it is read. NULL: the
     * system's CAs, no client certificate. */
    char *ca_file;     /* PEM bundle trusted instead of the system's */
    char *ca_path;     /* folder of hashed CA certificates, likewise */
    char *client_cert; /* PEM client certificate (may hold the key too) */
    char *client_key;  /* PEM key of client_cert; needs client_cert */
    /* Connections to base_url's host: "http2": "auto" (false, the
     * default) offers HTTP/2 to an https:// server (ALPN) and multiplexes
     * its calls; "off" (true) pins HTTP/1.1. "max_connections": 0 none. */
    bool http1_only;
    int max_connections;
    /* The protocol (config_api.c): what the job's OpenAI-shaped request
     * is mapped to, and what its answers are read from. */
    enum config_api api;
    int64_t max_tokens; /* "max_tokens": sent when the request names none;
                           0: none (anthropic: CONFIG_ANTHROPIC_MAX_TOKENS) */
    bool stream;        /* "stream": answers come as server-sent events */
    double first_byte_timeout_s; /* no byte of the answer this long: a
                                    stall (timeout); 0: timeout_s only */
    double idle_timeout_s;       /* no byte this long once the answer has
                                    begun: a stall; 0: timeout_s only */
};

#define CONFIG_SPILL_DEADLINE (-1)

/* One user classify rule: every given condition must match. */
struct config_rule {
    int status;         /* 0: any status */
    char *body;         /* owned; POSIX extended regex, NULL: any */
    char *header_name;  /* owned; lower-case, NULL: no header condition */
    char *header_value; /* owned; regex over that header's value */
    char *outcome;      /* owned; an outcome name, checked by policy */
    char *reason;       /* owned; NULL: "rule" */
};

struct config_policy {
    double switch_wait_s;    /* default 60 */
    double escalate_after_s; /* default 300 */
    int max_throttle_waits;  /* default 20 */
    double backoff_base_s;   /* default 1 */
    double backoff_cap_s;    /* default 20 */
};

struct config_worker {
    int concurrency;            /* default 64 */
    double lease_s;             /* default 120 */
    int64_t keep_body_bytes;    /* raw bodies kept in the ledger; 65536 */
    int64_t max_response_bytes; /* larger answers are refused; 4 MiB */
    int64_t idle_poll_ms;       /* an idle worker looks for work; 200 */
};

/* What a schedule does with the slots that passed while no worker ran. */
enum config_catch_up {
    CONFIG_CATCH_UP_LATEST, /* the most recent one, once (the default) */
    CONFIG_CATCH_UP_NONE,   /* none: only a slot that is on time fires */
    CONFIG_CATCH_UP_ALL,    /* each, oldest first, at most 100 */
};

/* One schedule: a job enqueued at each slot of a cron expression. The
 * expression and zone are kept as text here; sched/ checks them. */
struct config_schedule {
    char *name;     /* owned; unique; letters, digits, '-', '_', '.' */
    char *cron;     /* owned */
    char *tz;       /* owned; "UTC" unless the config names a zone */
    char *job_path; /* owned; the job file, resolved against the config's
                       folder; NULL when the job is inline */
    char *job_text; /* owned; the inline job as JSON text, else NULL */
    enum config_catch_up catch_up;
};

/* The daily report hook: the report piped to command at each slot of
 * cron in tz (kept as text; sched/ checks them). */
struct config_report_hook {
    char *cron;    /* owned */
    char *tz;      /* owned; "UTC" unless named */
    char *command; /* owned */
};

/* A budget in money, shared by every worker on the database: what the
 * sends on its tiers may cost in one window of time, or in one run of a
 * schedule (docs/reference.md "Budgets"). */
enum config_budget_per {
    CONFIG_BUDGET_WINDOW,       /* per window_s, aligned to the Unix epoch */
    CONFIG_BUDGET_SCHEDULE_RUN, /* per slot of a schedule (its job's key) */
};

struct config_budget {
    char *name;         /* owned; unique */
    int64_t limit_nusd; /* "usd", in nano-dollars */
    enum config_budget_per per;
    int64_t window_s; /* CONFIG_BUDGET_WINDOW: 3600, 86400, ... */
    char *schedule;   /* owned; per schedule run: only this one's; NULL:
                         every schedule's */
    char **tiers;     /* owned; the tiers it covers; NULL: every tier */
    size_t ntiers;
};

/* The config's shared tool definitions ("tools", config_tools.c): each
 * an object with a unique "name", kept as given; spec/ checks the rest of
 * a definition (spec_tools_check_config) and resolves the names jobs give
 * (docs/reference.md "Tools"). */
struct config_tool {
    char *name;        /* owned */
    struct cJSON *def; /* owned: the definition, a copy */
};

struct config_tools {
    struct config_tool *v; /* owned array of n */
    size_t n;
};

/* The config's named hooks ("hooks", config_hooks.c): commands a job
 * names in its "on_done" or "on_fail" (a job cannot carry a command). */
struct config_hook {
    char *name; /* owned */
    char *cmd;  /* owned: run with /bin/sh -c, the job's JSON on stdin */
};

struct config_hooks {
    struct config_hook *v; /* owned array of n */
    size_t n;
};

/* "retention": how long finished jobs are kept, in days; 0: forever. */
struct config_retention {
    int finished_jobs_days;  /* jobs with their steps, attempts, park items */
    int attempt_bodies_days; /* the kept bodies of their attempts */
};

struct config {
    char *path;    /* owned; file it came from, NULL for defaults */
    char *db;      /* owned; resolved against the config's folder; NULL */
    char *on_park; /* owned; hook command, NULL: none */
    /* owned; hook commands told of a job a worker ended succeeded or
     * failed, with its JSON; NULL: none */
    char *on_done, *on_fail;
    double on_park_timeout_s; /* default 10 */
    struct config_worker worker;
    struct config_policy policy;
    struct config_tier *tiers; /* owned array */
    size_t ntiers;
    struct config_rule *rules; /* owned array */
    size_t nrules;
    struct config_schedule *schedules; /* owned array */
    size_t nschedules;
    struct config_budget *budgets; /* owned array */
    size_t nbudgets;
    struct config_report_hook *on_report; /* owned; NULL: none */
    struct config_tools tools;            /* "tools"; n 0: none */
    struct config_hooks hooks;            /* "hooks"; n 0: none */
    struct config_retention retention;    /* zeros: keep everything */
};

/* config_new_default returns a config with every default and no tiers.
 * Caller owns it; free with config_free(). Never fails (aborts on OOM). */
struct config *config_new_default(void);

/* config_parse validates the JSON text (len bytes) and builds a config; dir
 * is the folder relative paths ("db") are resolved against (NULL: as is).
 * Returns 0, or -EINVAL with "PATH: problem" in err. Caller owns *out. */
STEPQ_MUST_CHECK int config_parse(const char *text, size_t len, const char *dir,
                                  struct config **out, char *err,
                                  size_t errlen);

/* config_load reads and parses the file at path. Returns 0; -ENOENT when
 * the file does not exist; -EINVAL for a bad file (err names the problem,
 * prefixed with the path); -EIO when it cannot be read. */
STEPQ_MUST_CHECK int config_load(const char *path, struct config **out,
                                 char *err, size_t errlen);

/* config_find_tier returns the tier named name, or NULL. Borrowed. */
const struct config_tier *config_find_tier(const struct config *cfg,
                                           const char *name);

/* config_tier_key_header returns the header the tier's key goes in
 * ("Authorization" for bearer, the NAME of header:NAME; with the default
 * auth, the api's own: Authorization, x-api-key or x-goog-api-key), or
 * NULL when the tier sends no key. Borrowed from t. */
const char *config_tier_key_header(const struct config_tier *t);

/* config_api_name returns "openai", "anthropic" or "gemini". Static. */
const char *config_api_name(enum config_api a);

/* config_auth_name returns "bearer", "header" or "none" ("bearer" for the
 * default). Static string. */
const char *config_auth_name(enum config_auth a);

/* config_budget_window writes the window of time budget b is in at now
 * into buf (its start, RFC 3339 UTC: "2026-12-06T00:00:00Z" for a day),
 * and when it ends into *ends_at. For a budget per schedule run, which has
 * no window of time, it writes nothing and returns false. */
bool config_budget_window(const struct config_budget *b, int64_t now, char *buf,
                          size_t len, int64_t *ends_at);

/* config_find_budget returns the budget named name, or NULL. Borrowed. */
const struct config_budget *config_find_budget(const struct config *cfg,
                                               const char *name);

/* config_find_schedule returns the schedule named name, or NULL.
 * Borrowed. */
const struct config_schedule *config_find_schedule(const struct config *cfg,
                                                   const char *name);

/* config_catch_up_name is "latest", "none" or "all". */
const char *config_catch_up_name(enum config_catch_up c);

/* config_is_tool_name tells whether s is a tool's name: 1 to 64
 * letters, digits, '_' or '-' (what OpenAI and Anthropic accept). */
bool config_is_tool_name(const char *s);

/* config_find_tool returns the shared tool named name, or NULL.
 * Borrowed. */
const struct config_tool *config_find_tool(const struct config_tools *tools,
                                           const char *name);

/* config_find_hook returns the hook named name, or NULL (hooks may be
 * NULL). Borrowed. */
const struct config_hook *config_find_hook(const struct config_hooks *hooks,
                                           const char *name);

/* config_free releases cfg; NULL is a no-op. */
void config_free(struct config *cfg);

#endif

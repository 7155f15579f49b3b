/* config_tier.c: one tier of the config: where it is (base_url, model),
 * how its key is sent (auth, api_key_env), the headers and query
 * parameters every request to it carries, and its limits.
 *
 * Headers and query values are checked here, when the config is read, so
 * that a bad one is refused with its JSON path before any worker starts;
 * an "env:NAME" value is only checked for a well-formed name here, and
 * read from the environment when a request is built (http/build.c).
 */
#include "common/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/httptext.h"
#include "common/json.h"
#include "common/xalloc.h"

#define MAX_VALUE 8192 /* bytes of one header or query value */

int
config__window_seconds(const char *s, int64_t *out)
{
    static const struct {
        const char *name;
        int64_t secs;
    } w[] = {{"minute", 60},
             {"hour", 3600},
             {"day", 86400},
             {"week", 7 * 86400},
             {"month", 30 * 86400}};
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(w); i++) {
        if (strcmp(s, w[i].name) == 0) {
            *out = w[i].secs;
            return 0;
        }
    }
    return -EINVAL;
}

static void
pairs_free(struct config_pair *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(p[i].name);
        free(p[i].value);
    }
    free(p);
}

static int
check_value(const char *v, const char *path, char *err, size_t len)
{
    if (!httptext_is_field_value(v))
        return json_fail(err, len, path,
                         "must not hold CR, LF or other control characters");
    if (strlen(v) > MAX_VALUE)
        return json_fail(err, len, path, "longer than %d bytes", MAX_VALUE);
    if (strncmp(v, "env:", 4) == 0 && !httptext_is_env_name(v + 4))
        return json_fail(err, len, path,
                         "env: must be followed by a variable name");
    return 0;
}

/* Headers stepq sets itself: a tier may not replace them. */
static const char *
reserved_header(const char *name)
{
    static const char *const names[] = {"Content-Type", "Idempotency-Key"};

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(names); i++) {
        if (strcasecmp(name, names[i]) == 0)
            return names[i];
    }
    return httptext_framing_header(name);
}

/* parse_pairs reads the object member key ("headers" or "query") of o into
 * *out; headers are HTTP tokens, unique in any case, none of them set by
 * stepq or holding the key (key_header, NULL when no key is sent). */
static int
parse_pairs(const cJSON *o, const char *path, const char *key,
            const char *key_header, struct config_pair **out, size_t *nout,
            char *err, size_t len)
{
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(o, key);
    bool headers = strcmp(key, "headers") == 0;
    struct config_pair *v = NULL;
    size_t n = 0;
    char p[256], q[512];
    int rc = 0;

    if (obj == NULL)
        return 0;
    json_path_key(p, sizeof(p), path, key);
    if (!cJSON_IsObject(obj))
        return json_fail(err, len, p, "must be an object of strings");
    if (cJSON_GetArraySize(obj) > CONFIG_MAX_PAIRS)
        return json_fail(err, len, p, "more than %d entries", CONFIG_MAX_PAIRS);
    v = xcalloc((size_t)cJSON_GetArraySize(obj) + 1, sizeof(*v));
    for (const cJSON *it = obj->child; it != NULL; it = it->next) {
        json_path_key(q, sizeof(q), p, it->string);
        if (headers && !httptext_is_token(it->string))
            rc = json_fail(err, len, q, "not a valid header name");
        else if (!headers && it->string[0] == '\0')
            rc = json_fail(err, len, q, "must not be empty");
        else if (!cJSON_IsString(it))
            rc = json_fail(err, len, q, "must be a string");
        else if (headers && reserved_header(it->string) != NULL)
            rc = json_fail(err, len, q, "%s is set by stepq",
                           reserved_header(it->string));
        else if (headers && key_header != NULL &&
                 strcasecmp(it->string, key_header) == 0)
            rc = json_fail(err, len, q,
                           "the key goes in this header (api_key_env); "
                           "remove it, or set auth");
        else
            rc = check_value(it->valuestring, q, err, len);
        for (size_t i = 0; rc == 0 && headers && i < n; i++) {
            if (strcasecmp(v[i].name, it->string) == 0)
                rc = json_fail(err, len, q, "same header as %s", v[i].name);
        }
        if (rc != 0) {
            pairs_free(v, n);
            return rc;
        }
        v[n].name = xstrdup(it->string);
        v[n].value = xstrdup(it->valuestring);
        n++;
    }
    *out = v;
    *nout = n;
    return 0;
}

/* tls_path reads the optional string member key of o, a path resolved
 * against dir, into *out (caller frees): a readable regular file, or a
 * readable folder when folder is true. Checked now so that a typo is
 * refused when the config is read, naming the field, not on the first
 * send; the files are read again by each new connection's TLS setup. */
static int
tls_path(const cJSON *o, const char *path, const char *dir, const char *key,
         bool folder, char **out, char *err, size_t len)
{
    const char *v = NULL;
    char p[256], *full;
    struct stat st;
    int rc, fd;

    if ((rc = json_get_string(o, key, false, path, &v, err, len)) != 0)
        return rc;
    if (v == NULL)
        return 0;
    json_path_key(p, sizeof(p), path, key);
    if (v[0] == '\0' || !json_plain_text(v, false))
        return json_fail(err, len, p, "must be a path");
    full = config__resolve_path(dir, v);
    if (folder) {
        DIR *d = opendir(full);
        rc = d == NULL ? -errno : 0;
        if (d != NULL)
            closedir(d);
    } else {
        fd = open(full, O_RDONLY | O_CLOEXEC);
        rc = fd < 0 ? -errno : 0;
        if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)))
            rc = -EISDIR;
        if (fd >= 0)
            close(fd);
    }
    if (rc != 0) {
        json_fail(err, len, p, "cannot read %s: %s", full,
                  rc == -EISDIR ? "not a file" : strerror(-rc));
        free(full);
        return -EINVAL;
    }
    *out = full;
    return 0;
}

/* parse_conn reads "http2" ("auto" or "off") and "max_connections". */
static int
parse_conn(const cJSON *o, const char *path, struct config_tier *t, char *err,
           size_t len)
{
    const char *h2 = NULL;
    int64_t maxc = 0;
    char p[256];
    int rc;

    if ((rc = json_get_string(o, "http2", false, path, &h2, err, len)) ||
        (rc = json_get_int(o, "max_connections", 1, 100000, path, &maxc, err,
                           len)))
        return rc;
    if (h2 != NULL && strcmp(h2, "auto") != 0 && strcmp(h2, "off") != 0)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "http2"),
                         "must be \"auto\" or \"off\"");
    t->http1_only = h2 != NULL && strcmp(h2, "off") == 0;
    t->max_connections = (int)maxc;
    return 0;
}

/* parse_tls reads ca_file, ca_path, client_cert and client_key, and the
 * connection fields (parse_conn). */
static int
parse_tls(const cJSON *o, const char *path, const char *dir,
          struct config_tier *t, char *err, size_t len)
{
    char p[256];
    int rc;

    if ((rc =
             tls_path(o, path, dir, "ca_file", false, &t->ca_file, err, len)) ||
        (rc = tls_path(o, path, dir, "ca_path", true, &t->ca_path, err, len)) ||
        (rc = tls_path(o, path, dir, "client_cert", false, &t->client_cert, err,
                       len)) ||
        (rc = tls_path(o, path, dir, "client_key", false, &t->client_key, err,
                       len)) ||
        (rc = parse_conn(o, path, t, err, len)))
        return rc;
    if (t->client_key != NULL && t->client_cert == NULL)
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "client_key"),
                         "needs client_cert");
    if ((t->ca_file || t->ca_path || t->client_cert) &&
        strncmp(t->base_url, "https://", 8) != 0)
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path,
                                       t->ca_file   ? "ca_file"
                                       : t->ca_path ? "ca_path"
                                                    : "client_cert"),
                         "only for an https:// base_url");
    return 0;
}

/* parse_auth reads "auth" with api_key_env (env, may be NULL). */
/* spill: "deadline" (the default: wait for a paced tier while the step's
 * slack allows), "now" (the next tier at once), or a number of seconds
 * to wait at most. */
static int
parse_spill(const cJSON *o, const char *path, struct config_tier *t, char *err,
            size_t len)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "spill");
    char p[256];

    t->spill_after_ms = CONFIG_SPILL_DEADLINE;
    if (v == NULL ||
        (cJSON_IsString(v) && strcmp(v->valuestring, "deadline") == 0))
        return 0;
    if (cJSON_IsString(v) && strcmp(v->valuestring, "now") == 0) {
        t->spill_after_ms = 0;
        return 0;
    }
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 &&
        v->valuedouble <= 31 * 86400.0) {
        t->spill_after_ms = (int64_t)(v->valuedouble * 1000);
        return 0;
    }
    return json_fail(err, len, json_path_key(p, sizeof(p), path, "spill"),
                     "must be \"deadline\", \"now\" or a number of seconds "
                     "(0 to 2678400)");
}

static int
parse_auth(const char *auth, const char *env, const char *path,
           struct config_tier *t, char *err, size_t len)
{
    char p[256];

    json_path_key(p, sizeof(p), path, "auth");
    if (auth == NULL) {
        t->auth = CONFIG_AUTH_DEFAULT;
        return 0;
    }
    if (strcmp(auth, "bearer") == 0) {
        t->auth = CONFIG_AUTH_BEARER;
    } else if (strcmp(auth, "none") == 0) {
        t->auth = CONFIG_AUTH_NONE;
    } else if (strncmp(auth, "header:", 7) == 0) {
        if (!httptext_is_token(auth + 7))
            return json_fail(err, len, p, "header: needs a header name");
        if (reserved_header(auth + 7) != NULL)
            return json_fail(err, len, p, "%s is set by stepq",
                             reserved_header(auth + 7));
        t->auth = CONFIG_AUTH_HEADER;
    } else {
        return json_fail(err, len, p,
                         "must be bearer, header:NAME or none (got \"%s\")",
                         auth);
    }
    if (t->auth == CONFIG_AUTH_NONE && env != NULL)
        return json_fail(err, len, p,
                         "none sends no key: remove api_key_env, or choose "
                         "bearer or header:NAME");
    if (t->auth != CONFIG_AUTH_NONE && env == NULL)
        return json_fail(err, len, p, "%s needs api_key_env", auth);
    return 0;
}

/* config__parse_price reads "price" (or "realtime_price"; absent: none).
 * Every member is optional and 0 by default but for the cache prices,
 * which are the input price unless given: a provider that bills no cache
 * differently needs neither. */
int
config__parse_price(const cJSON *o, const char *path, const char *key,
                    struct price *out, char *err, size_t len)
{
    static const char *const keys[] = {
        "input_per_mtok",       "output_per_mtok", "cached_input_per_mtok",
        "cache_write_per_mtok", "per_request",     NULL};
    const cJSON *po = cJSON_GetObjectItemCaseSensitive(o, key);
    double v[5] = {0, 0, -1, -1, 0};
    char p[256];
    int rc;

    if (po == NULL)
        return 0;
    json_path_key(p, sizeof(p), path, key);
    if (!cJSON_IsObject(po))
        return json_fail(err, len, p, "must be an object of prices in USD");
    if ((rc = json_check_object(po, p, keys, err, len)) != 0)
        return rc;
    for (int i = 0; keys[i] != NULL; i++) {
        if ((rc = json_get_number(po, keys[i], 0, PRICE_MAX_USD, p, &v[i], err,
                                  len)) != 0)
            return rc;
    }
    *out = (struct price){
        .set = true,
        .input = price_from_usd(v[0]),
        .output = price_from_usd(v[1]),
        .cache_read = price_from_usd(v[2] >= 0 ? v[2] : v[0]),
        .cache_write = price_from_usd(v[3] >= 0 ? v[3] : v[0]),
        .per_request = price_from_usd(v[4]),
    };
    return 0;
}

/* The tier's name, model, base_url and api_key_env, checked as text:
 * what the stores, tables, logs and the HTTP client can take. */
static int
check_names(const char *name, const char *model, const char *url,
            const char *env, const char *path, char *err, size_t len)
{
    const char *rest, *why;
    char p[256];

    if (name[0] == '\0')
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "name"),
                         "must not be empty");
    /* Names are printed in tables and logs: no control character (an
     * escape sequence would reach the terminal), not blank. */
    if (!json_plain_text(name, false) || strspn(name, " ") == strlen(name))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "name"),
                         "must be printable text, not blank");
    /* tier/'s rows of http steps' hosts (TIER_HOST_PREFIX) */
    if (strncmp(name, "host:", 5) == 0)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "name"),
                         "must not start with \"host:\" (kept for the walls "
                         "of http steps' hosts)");
    if (model[0] == '\0' || !httptext_is_field_value(model))
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "model"),
                         "must be a name without control characters");
    /* Stores index tier names (PostgreSQL's index takes about 2,700
     * bytes a row): a longer name would be refused there alone, by work. */
    if (strlen(name) > 200)
        return json_fail(err, len, json_path_key(p, sizeof(p), path, "name"),
                         "longer than 200 bytes");
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "base_url"),
                         "must start with http:// or https://");
    if (strchr(url, '#') != NULL || !httptext_is_field_value(url) ||
        strchr(url, ' ') != NULL)
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "base_url"),
                         "must not hold spaces, control characters or '#'");
    rest = url + (url[4] == 's' ? 8 : 7);
    if ((why = httptext_authority_problem(rest, rest + strcspn(rest, "/?"))) !=
        NULL)
        return json_fail(
            err, len, json_path_key(p, sizeof(p), path, "base_url"), "%s", why);
    if (env != NULL && !httptext_is_env_name(env))
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "api_key_env"),
                         "must name an environment variable (letters, digits "
                         "and _, not starting with a digit)");
    return 0;
}

/* "breaker": {"failures", "cooldown_s"}; 5 and 30 s when absent. */
static int
parse_breaker(const cJSON *o, const char *path, struct config_tier *t,
              char *err, size_t len)
{
    static const char *const bkeys[] = {"failures", "cooldown_s", NULL};
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "breaker");
    int64_t failures = 5;
    char p[256];
    int rc;

    t->breaker.cooldown_s = 30;
    if (b != NULL) {
        json_path_key(p, sizeof(p), path, "breaker");
        if ((rc = json_check_object(b, p, bkeys, err, len)) ||
            (rc = json_get_int(b, "failures", 1, 1000000, p, &failures, err,
                               len)) ||
            (rc = json_get_number(b, "cooldown_s", 0, 1e7, p,
                                  &t->breaker.cooldown_s, err, len)))
            return rc;
    }
    t->breaker.failures = (int)failures;
    return 0;
}

/* The tier's pace and bounds: its rates and their window, allowance,
 * in-flight cap, timeout and burst, each with its default. */
static int
parse_pace(const cJSON *o, const char *path, struct config_tier *t, char *err,
           size_t len)
{
    const char *window = NULL;
    int64_t inflight = 0;
    char p[256];
    int rc;

    t->allowance_window_s = 86400;
    t->degrade_at = 0.8;
    t->timeout_s = 60;
    t->window_s = 60;
    if ((rc = json_get_int(o, "rpm", 0, 100000000, path, &t->rpm, err, len)) ||
        (rc = json_get_int(o, "tpm", 0, INT64_C(1) << 50, path, &t->tpm, err,
                           len)) ||
        (rc = json_get_int(o, "allowance_tokens", 0, INT64_C(1) << 50, path,
                           &t->allowance_tokens, err, len)) ||
        (rc = json_get_string(o, "allowance_window", false, path, &window, err,
                              len)) ||
        (rc = json_get_number(o, "degrade_at", 0.01, 1, path, &t->degrade_at,
                              err, len)) ||
        (rc = json_get_int(o, "max_inflight", 0, 1000000, path, &inflight, err,
                           len)) ||
        (rc = json_get_number(o, "timeout_s", 0.001, 86400, path, &t->timeout_s,
                              err, len)) ||
        (rc = json_get_number(o, "window_s", 0.01, 86400, path, &t->window_s,
                              err, len)) ||
        (rc =
             json_get_int(o, "burst", 1, 100000000, path, &t->burst, err, len)))
        return rc;
    if (window != NULL &&
        config__window_seconds(window, &t->allowance_window_s))
        return json_fail(err, len,
                         json_path_key(p, sizeof(p), path, "allowance_window"),
                         "must be minute, hour, day, week or month");
    t->max_inflight = (int)inflight;
    return 0;
}

/* The fields a tier may have. */
static const char *const tier_keys[] = {"name",
                                        "base_url",
                                        "model",
                                        "api_key_env",
                                        "auth",
                                        "headers",
                                        "query",
                                        "rpm",
                                        "tpm",
                                        "allowance_tokens",
                                        "allowance_window",
                                        "degrade_at",
                                        "max_inflight",
                                        "timeout_s",
                                        "breaker",
                                        "window_s",
                                        "burst",
                                        "spill",
                                        "price",
                                        "ca_file",
                                        "ca_path",
                                        "client_cert",
                                        "client_key",
                                        "http2",
                                        "max_connections",
                                        "api",
                                        "max_tokens",
                                        "stream",
                                        "first_byte_timeout_s",
                                        "idle_timeout_s",
                                        "mode",
                                        "batch",
                                        "realtime_price",
                                        NULL};

int
config__parse_tier(const cJSON *o, const char *path, const char *dir,
                   struct config_tier *t, char *err, size_t len)
{
    const char *name = NULL, *url = NULL, *model = NULL, *env = NULL;
    const char *auth = NULL;
    int rc;

    if ((rc = json_check_object(o, path, tier_keys, err, len)) ||
        (rc = json_get_string(o, "name", true, path, &name, err, len)) ||
        (rc = json_get_string(o, "base_url", true, path, &url, err, len)) ||
        (rc = json_get_string(o, "model", true, path, &model, err, len)) ||
        (rc = json_get_string(o, "api_key_env", false, path, &env, err, len)) ||
        (rc = json_get_string(o, "auth", false, path, &auth, err, len)))
        return rc;
    if (env != NULL && env[0] == '\0')
        env = NULL; /* as before: "" names no variable */
    if ((rc = check_names(name, model, url, env, path, err, len)) != 0 ||
        (rc = parse_pace(o, path, t, err, len)) != 0)
        return rc;
    if ((rc = parse_breaker(o, path, t, err, len)) != 0)
        return rc;
    if ((rc = config__parse_api(o, path, t, err, len)) != 0 ||
        (rc = parse_auth(auth, env, path, t, err, len)) != 0 ||
        (rc = parse_spill(o, path, t, err, len)) != 0 ||
        (rc = config__parse_price(o, path, "price", &t->price, err, len)) !=
            0 ||
        (rc = config__parse_batch(o, path, t, err, len)) != 0)
        return rc;
    t->auth_header = t->auth == CONFIG_AUTH_HEADER ? xstrdup(auth + 7) : NULL;
    t->api_key_env = xstrdup(env);
    if ((rc = parse_pairs(o, path, "headers", config_tier_key_header(t),
                          &t->headers, &t->nheaders, err, len)) != 0 ||
        (rc = parse_pairs(o, path, "query", NULL, &t->query, &t->nquery, err,
                          len)) != 0) {
        config__tier_cleanup(t);
        return rc;
    }
    t->name = xstrdup(name);
    t->base_url = xstrdup(url);
    t->model = xstrdup(model);
    if ((rc = parse_tls(o, path, dir, t, err, len)) != 0) {
        config__tier_cleanup(t);
        return rc;
    }
    return 0;
}

const char *
config_tier_key_header(const struct config_tier *t)
{
    switch (t->auth) {
    case CONFIG_AUTH_HEADER:
        return t->auth_header;
    case CONFIG_AUTH_NONE:
        return NULL;
    case CONFIG_AUTH_BEARER:
        return "Authorization";
    case CONFIG_AUTH_DEFAULT:
        break;
    }
    if (t->api_key_env == NULL)
        return NULL;
    /* Each protocol's own header for its key. */
    return t->api == CONFIG_API_ANTHROPIC ? "x-api-key"
           : t->api == CONFIG_API_GEMINI  ? "x-goog-api-key"
                                          : "Authorization";
}

const char *
config_auth_name(enum config_auth a)
{
    return a == CONFIG_AUTH_HEADER ? "header"
           : a == CONFIG_AUTH_NONE ? "none"
                                   : "bearer";
}

void
config__tier_cleanup(struct config_tier *t)
{
    free(t->name);
    free(t->base_url);
    free(t->model);
    free(t->api_key_env);
    free(t->auth_header);
    pairs_free(t->headers, t->nheaders);
    pairs_free(t->query, t->nquery);
    free(t->ca_file);
    free(t->ca_path);
    free(t->client_cert);
    free(t->client_key);
    t->ca_file = t->ca_path = t->client_cert = t->client_key = NULL;
    t->name = t->base_url = t->model = t->api_key_env = t->auth_header = NULL;
    t->headers = t->query = NULL;
    t->nheaders = t->nquery = 0;
}

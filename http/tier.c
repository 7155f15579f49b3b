/* tier.c: the chat completion request of a tier (declared in
 * http/http.h): its URL with the tier's query parameters, its headers,
 * its key in the header its auth names, and its body in the shape of its
 * api (OpenAI's as the job wrote it; anthropic.c and gemini.c map it),
 * asked for as a stream when the caller says so (the tier's "stream" or
 * the step's: the worker decides, once, and the request carries it).
 *
 * Values "env:NAME" (headers, query) and the key are read from the
 * environment here, when the request is built, and go only into the
 * request, whose header values http_request_cleanup wipes. Errors name the
 * tier, the field and the variable, never a value.
 */
#include "http/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/httptext.h"
#include "common/xalloc.h"
#include "http/internal.h"
#include "http/tools.h"

#define CHAT_PATH         "/chat/completions"
#define ANTHROPIC_PATH    "/messages"
#define ANTHROPIC_VERSION "2023-06-01"

/* what writes "tier NAME: FIELD" (just FIELD for an unnamed tier, as
 * http_chat_request builds one) into buf. */
static const char *
what(char *buf, size_t len, const struct config_tier *t, const char *field,
     const char *name)
{
    snprintf(buf, len, "%s%s%s%s%s", t->name && *t->name ? "tier " : "",
             t->name && *t->name ? t->name : "",
             t->name && *t->name ? ": " : "", field, name ? name : "");
    return buf;
}

/* The parts of base_url that carry a credential, as the query's
 * credential-named values do: a userinfo's password (or a userinfo that is
 * a token alone), and the values of credential-named parameters of its own
 * query. Each is called with its span in base. */
typedef void (*cred_fn)(const char *at, size_t n, void *arg);

static void
base_credentials(const char *base, cred_fn fn, void *arg)
{
    const char *rest = strstr(base, "://"), *end, *at = NULL, *q;

    if (rest == NULL)
        return;
    rest += 3;
    end = rest + strcspn(rest, "/?");
    for (const char *s = rest; s < end; s++) {
        if (*s == '@')
            at = s;
    }
    if (at != NULL) {
        const char *colon = memchr(rest, ':', (size_t)(at - rest));
        const char *from = colon != NULL ? colon + 1 : rest;
        if (at > from)
            fn(from, (size_t)(at - from), arg);
    }
    if ((q = strchr(base, '?')) == NULL)
        return;
    for (q++; *q != '\0';) {
        size_t n = strcspn(q, "&"), k = strcspn(q, "=&");
        if (k < n && httptext_is_credential_name(q, k) && n > k + 1)
            fn(q + k + 1, n - k - 1, arg);
        q += n + (q[n] == '&');
    }
}

/* Which bytes of base hide a credential (base_credentials). */
struct mask {
    const char *base;
    bool *hide; /* owned: a flag per byte of base */
};

static void
mark(const char *at, size_t n, void *arg)
{
    struct mask *m = arg;

    memset(m->hide + (at - m->base), 1, n);
}

/* Appends n bytes of base from 0, each credential replaced by "***". */
static void
put_masked(struct xbuf *url, const char *base, size_t n)
{
    struct mask m = {base, xcalloc(strlen(base) + 1, sizeof(bool))};

    base_credentials(base, mark, &m);
    for (size_t i = 0; i < n;) {
        if (!m.hide[i]) {
            xbuf_put(url, base + i, 1);
            i++;
            continue;
        }
        xbuf_put(url, "***", 3);
        while (i < n && m.hide[i])
            i++;
    }
    free(m.hide);
}

/* The URL of suffix (a path, "/chat/completions") under t's base_url,
 * with the query of http_tier_url. */
static int
tier_url(const struct config_tier *t, bool reveal, const char *suffix, bool sse,
         char **out, char *err, size_t errlen)
{
    const char *base = t->base_url, *q;
    size_t plen;
    struct xbuf url = {0}, shown = {0};
    char w[300];
    bool has_query;

    if (!http__is_http_url(base))
        return http__fail(err, errlen, -EINVAL, "%s",
                          what(w, sizeof(w), t,
                               "base_url: must be an http:// or https:// URL",
                               NULL));
    /* What is shown of the URL (reveal false) hides what base_url itself
     * carries of a credential, as it hides the query's. */
    if (!reveal) {
        put_masked(&shown, base, strlen(base));
        base = shown.p;
    }
    q = strchr(base, '?');
    plen = q != NULL ? (size_t)(q - base) : strlen(base);
    while (plen > 0 && base[plen - 1] == '/')
        plen--;
    xbuf_put(&url, base, plen);
    xbuf_put(&url, suffix, strlen(suffix));
    has_query = q != NULL;
    if (q != NULL)
        xbuf_put(&url, q, strlen(q));
    free(shown.p);
    /* Gemini streams server-sent events only when asked for them. */
    if (sse) {
        xbuf_put(&url, has_query ? "&" : "?", 1);
        xbuf_lit(&url, "alt=sse");
        has_query = true;
    }
    for (size_t i = 0; i < t->nquery; i++) {
        const struct config_pair *p = &t->query[i];
        const char *v = p->value;
        char sep = has_query ? '&' : '?';
        int rc;

        if (!reveal &&
            (strncmp(v, "env:", 4) == 0 ||
             httptext_is_credential_name(p->name, strlen(p->name)))) {
            v = NULL;
        } else if ((rc = http__resolve_value(
                        what(w, sizeof(w), t, "query.", p->name), p->value, &v,
                        err, errlen)) != 0) {
            free(url.p);
            return rc;
        }
        if (url.len == 0 ||
            (url.p[url.len - 1] != '?' && url.p[url.len - 1] != '&'))
            xbuf_put(&url, &sep, 1);
        has_query = true;
        httptext_query_escape(&url, p->name);
        xbuf_put(&url, "=", 1);
        if (v == NULL)
            xbuf_put(&url, "***", 3);
        else
            httptext_query_escape(&url, v);
    }
    *out = url.p;
    return 0;
}

/* The path of t's chat requests, after base_url's: by its api and
 * whether the answer is asked for as a stream. */
static void
put_path(struct xbuf *url, const struct config_tier *t, bool stream)
{
    /* "models/NAME" and "NAME" name the same Gemini model. */
    size_t skip = strncmp(t->model, "models/", 7) == 0 ? 7 : 0;

    switch (t->api) {
    case CONFIG_API_ANTHROPIC:
        xbuf_lit(url, ANTHROPIC_PATH);
        return;
    case CONFIG_API_GEMINI:
        xbuf_lit(url, "/models/");
        xbuf_put(url, t->model + skip, strlen(t->model) - skip);
        if (stream)
            xbuf_lit(url, ":streamGenerateContent");
        else
            xbuf_lit(url, ":generateContent");
        return;
    case CONFIG_API_OPENAI:
        break;
    }
    xbuf_lit(url, CHAT_PATH);
}

/* The URL of t's chat requests, streamed or not (http_tier_url). */
static int
chat_url(const struct config_tier *t, bool stream, bool reveal, char **out,
         char *err, size_t errlen)
{
    struct xbuf path = {0};
    int rc;

    put_path(&path, t, stream);
    xbuf_put(&path, "", 1);
    rc = tier_url(t, reveal, path.p, t->api == CONFIG_API_GEMINI && stream, out,
                  err, errlen);
    free(path.p);
    return rc;
}

int
http_tier_url(const struct config_tier *t, bool reveal, char **out, char *err,
              size_t errlen)
{
    return chat_url(t, t->stream, reveal, out, err, errlen);
}

/* add_key puts the tier's key into the header its auth names. The default
 * auth sends nothing when the variable is unset or empty (as stepq always
 * did); an explicit "bearer" or "header:NAME" fails instead. */
static int
add_key(struct http_request *r, const struct config_tier *t, char *err,
        size_t errlen)
{
    const char *hname = config_tier_key_header(t), *key;
    char w[300], *value;
    size_t klen;
    int rc;

    if (hname == NULL)
        return 0;
    key = getenv(t->api_key_env);
    if (key == NULL || *key == '\0') {
        if (t->auth == CONFIG_AUTH_DEFAULT)
            return 0;
        return http__fail(
            err, errlen, -ENOENT, "%s: environment variable %s is not set",
            what(w, sizeof(w), t, "api_key_env", NULL), t->api_key_env);
    }
    if (!httptext_is_field_value(key))
        return http__fail(
            err, errlen, -EINVAL, "%s: $%s holds control characters",
            what(w, sizeof(w), t, "api_key_env", NULL), t->api_key_env);
    klen = strlen(key);
    value = xmalloc(klen + sizeof("Bearer "));
    /* Bearer for "bearer", and for the default auth of an OpenAI tier;
     * the other apis' own headers take the key alone. */
    if (t->auth == CONFIG_AUTH_HEADER ||
        (t->auth == CONFIG_AUTH_DEFAULT && t->api != CONFIG_API_OPENAI)) {
        memcpy(value, key, klen + 1);
    } else {
        memcpy(value, "Bearer ", 7);
        memcpy(value + 7, key, klen + 1);
    }
    rc = http_request_add_header(r, hname, value);
    http__free_secret(value);
    if (rc != 0)
        return http__fail(
            err, errlen, rc, "%s",
            what(w, sizeof(w), t, "auth: not a header name", NULL));
    return 0;
}

/* add_headers adds the tier's headers, env: values read now. */
static int
add_headers(struct http_request *r, const struct config_tier *t, char *err,
            size_t errlen)
{
    char w[300];
    int rc;

    for (size_t i = 0; i < t->nheaders; i++) {
        const char *v = NULL;
        what(w, sizeof(w), t, "headers.", t->headers[i].name);
        if ((rc = http__resolve_value(w, t->headers[i].value, &v, err,
                                      errlen)) != 0)
            return rc;
        if ((rc = http_request_add_header(r, t->headers[i].name, v)) != 0)
            return http__fail(err, errlen, rc, "%s: not a valid header", w);
    }
    return 0;
}

/* The secrets of pairs (headers or query): env: values, and the values of
 * names that carry a credential. */
static void
add_pair_secrets(struct http_request *r, const struct config_pair *pairs,
                 size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = pairs[i].value;
        if (strncmp(v, "env:", 4) == 0)
            http_request_add_secret(r, getenv(v + 4));
        else if (httptext_is_credential_name(pairs[i].name,
                                             strlen(pairs[i].name)))
            http_request_add_secret(r, v);
    }
}

/* add_secrets remembers what of t's request is secret (the key, and what
 * add_pair_secrets finds), to be scrubbed from its answer. */
/* Remembers a credential of base_url (base_credentials) as a secret. */
static void
base_secret(const char *at, size_t n, void *arg)
{
    char *v = xstrndup(at, n);

    http_request_add_secret(arg, v);
    http__free_secret(v);
}

static void
add_secrets(struct http_request *r, const struct config_tier *t)
{
    base_credentials(t->base_url, base_secret, r);
    if (t->api_key_env != NULL)
        http_request_add_secret(r, getenv(t->api_key_env));
    add_pair_secrets(r, t->headers, t->nheaders);
    add_pair_secrets(r, t->query, t->nquery);
}

/* Adds tier t's headers and key (last: the config refuses a header of the
 * same name), its secrets, TLS and the timeout to r, and moves r into
 * *out. Returns 0, or the error of a header or key (r cleaned up). */
static int
finish(struct http_request *r, const struct config_tier *t, int64_t timeout_ms,
       struct http_request *out, char *err, size_t errlen)
{
    int rc;

    if ((rc = add_headers(r, t, err, errlen)) != 0 ||
        (rc = add_key(r, t, err, errlen)) != 0) {
        http_request_cleanup(r);
        return rc;
    }
    add_secrets(r, t);
    http_request_set_tls(r, t->ca_file, t->ca_path, t->client_cert,
                         t->client_key);
    r->timeout_ms = timeout_ms;
    r->http1_only = t->http1_only;
    r->max_connections = t->max_connections;
    *out = *r;
    return 0;
}

/* add_stream asks for the answer as events: "stream": true, and with
 * usage (OpenAI sends it in a last chunk only when asked). */
static void
add_stream(cJSON *body, bool usage)
{
    cJSON *so;

    cJSON_DeleteItemFromObjectCaseSensitive(body, "stream");
    cJSON_AddTrueToObject(body, "stream");
    if (!usage)
        return;
    cJSON_DeleteItemFromObjectCaseSensitive(body, "stream_options");
    so = cJSON_AddObjectToObject(body, "stream_options");
    cJSON_AddTrueToObject(so, "include_usage");
}

/* The OpenAI body: the request as the job wrote it, with the tier's
 * model and without the native protocols' "cache" flags. */
static cJSON *
openai_body(const cJSON *request, const struct config_tier *t, bool stream)
{
    cJSON *body = cJSON_Duplicate(request, true), *m, *msg;

    m = cJSON_CreateString(t->model);
    if (body == NULL || m == NULL) {
        fprintf(stderr, "stepq: out of memory\n");
        abort();
    }
    /* Replacing keeps the key where the job put it; else it goes last. */
    if (cJSON_HasObjectItem(body, "model"))
        cJSON_ReplaceItemInObjectCaseSensitive(body, "model", m);
    else
        cJSON_AddItemToObject(body, "model", m);
    if (cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(body, "cache")))
        cJSON_DeleteItemFromObjectCaseSensitive(body, "cache");
    /* The tier's cap where the job set none. */
    if (t->max_tokens > 0 && !cJSON_HasObjectItem(body, "max_tokens") &&
        !cJSON_HasObjectItem(body, "max_completion_tokens"))
        cJSON_AddNumberToObject(body, "max_tokens", (double)t->max_tokens);
    if (stream)
        add_stream(body, true);
    cJSON_ArrayForEach(msg, cJSON_GetObjectItemCaseSensitive(body, "messages"))
    {
        cJSON *tc;
        if (cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(msg, "cache")))
            cJSON_DeleteItemFromObjectCaseSensitive(msg, "cache");
        /* A Gemini thought signature (http_tool_call_extra): OpenAI and
         * most layers refuse members they do not know. */
        cJSON_ArrayForEach(tc,
                           cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"))
            cJSON_DeleteItemFromObjectCaseSensitive(tc, "extra_content");
    }
    return body;
}

/* tier_body builds the body of t's api from the job's request, asking
 * for a stream when stream. */
static int
tier_body(const cJSON *request, const struct config_tier *t, bool stream,
          cJSON **out, char *err, size_t errlen)
{
    char w[300];
    int rc;

    switch (t->api) {
    case CONFIG_API_ANTHROPIC:
        rc = http__anthropic_body(request, t, out, err, errlen);
        if (rc == 0 && stream)
            add_stream(*out, false);
        break;
    case CONFIG_API_GEMINI:
        rc = http__gemini_body(request, t, out, err, errlen);
        break;
    case CONFIG_API_OPENAI:
    default:
        *out = openai_body(request, t, stream);
        return 0;
    }
    if (rc != 0 && t->name != NULL && *t->name != '\0') {
        /* Name the tier: the same job maps on another tier's api. */
        snprintf(w, sizeof(w), "tier %s (api %s): %s", t->name,
                 config_api_name(t->api), err);
        snprintf(err, errlen, "%s", w);
    }
    return rc;
}

int
http_tier_request(const cJSON *request, const struct config_tier *t,
                  bool stream, int64_t timeout_ms, struct http_request *out,
                  char *err, size_t errlen)
{
    struct http_request r;
    cJSON *body = NULL;
    char *url = NULL, w[300];
    int rc;

    if (!cJSON_IsObject(request))
        return http__fail(err, errlen, -EINVAL, "request: must be an object");
    if (t->model == NULL || *t->model == '\0' ||
        !httptext_is_field_value(t->model))
        return http__fail(
            err, errlen, -EINVAL, "%s",
            what(w, sizeof(w), t, "model: must be a non-empty name", NULL));
    if (t->api == CONFIG_API_GEMINI && !http__gemini_model_ok(t->model))
        return http__fail(err, errlen, -EINVAL, "%s",
                          what(w, sizeof(w), t,
                               "model: the gemini api needs letters, digits, "
                               "'-', '.', '_' or '/' (it goes in the URL)",
                               NULL));
    if ((rc = chat_url(t, stream, true, &url, err, errlen)) != 0)
        return rc;
    http_request_init(&r);
    rc = http_request_set(&r, "POST", url);
    free(url);
    if (rc != 0)
        goto fail;

    if ((rc = tier_body(request, t, stream, &body, err, errlen)) != 0) {
        http_request_cleanup(&r);
        return rc;
    }
    http__set_body_json(&r, body);
    cJSON_Delete(body);

    if ((rc = http_request_add_header(&r, "Content-Type",
                                      "application/json")) != 0 ||
        (rc = http_request_add_header(&r, "Accept",
                                      stream ? "text/event-stream"
                                             : "application/json")) != 0)
        goto fail;
    /* Before the tier's headers, which may name another version. */
    if (t->api == CONFIG_API_ANTHROPIC &&
        (rc = http_request_add_header(&r, "anthropic-version",
                                      ANTHROPIC_VERSION)) != 0)
        goto fail;
    if ((rc = finish(&r, t, timeout_ms, out, err, errlen)) != 0)
        return rc;
    /* The stall watch (stream.c): chat requests only. */
    out->first_byte_ms = (int64_t)(t->first_byte_timeout_s * 1000);
    out->idle_ms = (int64_t)(t->idle_timeout_s * 1000);
    out->stream = stream;
    return 0;
fail:
    http_request_cleanup(&r);
    return http__fail(err, errlen, rc, "request: cannot be built");
}

int
http_chat_request(const cJSON *request, const char *base_url, const char *model,
                  const char *api_key_env, int64_t timeout_ms,
                  struct http_request *out, char *err, size_t errlen)
{
    /* A tier of these three fields and the default auth. The casts only
     * fit the borrowed strings into the struct; nothing writes to them. */
    struct config_tier t = {
        .name = NULL,
        .base_url = (char *)base_url,
        .model = (char *)model,
        .api_key_env =
            api_key_env != NULL && *api_key_env ? (char *)api_key_env : NULL,
    };

    if (base_url == NULL)
        return http__fail(err, errlen, -EINVAL,
                          "base_url: must be an http:// or https:// URL");
    return http_tier_request(request, &t, false, timeout_ms, out, err, errlen);
}

int
http_tier_call(const struct config_tier *t, const char *method,
               const char *path, const char *ctype, const char *body,
               size_t len, int64_t timeout_ms, struct http_request *out,
               char *err, size_t errlen)
{
    struct http_request r;
    char *url = NULL;
    int rc;

    if ((rc = tier_url(t, true, path, false, &url, err, errlen)) != 0)
        return rc;
    http_request_init(&r);
    rc = http_request_set(&r, method, url);
    free(url);
    if (rc != 0 ||
        (rc = http_request_add_header(&r, "Accept", "application/json")) != 0 ||
        (ctype != NULL &&
         (rc = http_request_add_header(&r, "Content-Type", ctype)) != 0)) {
        http_request_cleanup(&r);
        return http__fail(err, errlen, rc, "request: cannot be built");
    }
    if (body != NULL)
        http_request_set_body(&r, body, len);
    return finish(&r, t, timeout_ms, out, err, errlen);
}

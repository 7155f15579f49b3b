/* build.c: requests as owned values, the chat and http step builders,
 * and the chat answer parser (declared in http/http.h); a tier's chat
 * request is built in tier.c.
 *
 * None of this touches the network or the loop, so it is tested as plain
 * functions. Secrets (API keys, env: header values) are read from the
 * environment only here, at send time, and live only inside the request's
 * header values, which http_request_cleanup wipes.
 */
#include "http/http.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "common/httptext.h"
#include "common/json.h"
#include "common/xalloc.h"
#include "http/internal.h"

void
http__wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;

    while (n-- > 0)
        *v++ = 0;
}

void
http__free_secret(char *s)
{
    if (s != NULL) {
        http__wipe(s, strlen(s));
        free(s);
    }
}

int
http__fail(char *err, size_t len, int rc, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL && len > 0) {
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
    return rc;
}

bool
http__is_http_url(const char *s)
{
    if (s == NULL)
        return false;
    if (strncasecmp(s, "http://", 7) != 0 && strncasecmp(s, "https://", 8) != 0)
        return false;
    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch <= 0x20 || ch == 0x7f)
            return false;
    }
    return true;
}

/* ---- requests --------------------------------------------------------- */

void
http_request_init(struct http_request *r)
{
    memset(r, 0, sizeof(*r));
}

void
http_request_cleanup(struct http_request *r)
{
    if (r == NULL)
        return;
    free(r->method);
    free(r->url);
    for (size_t i = 0; i < r->nheaders; i++) {
        free(r->headers[i].name);
        http__free_secret(r->headers[i].value);
    }
    free(r->headers);
    free(r->body);
    http__secrets_free(r->secrets, r->nsecrets);
    free(r->ca_file);
    free(r->ca_path);
    free(r->client_cert);
    free(r->client_key);
    memset(r, 0, sizeof(*r));
}

void
http_request_set_tls(struct http_request *r, const char *ca_file,
                     const char *ca_path, const char *client_cert,
                     const char *client_key)
{
    free(r->ca_file);
    free(r->ca_path);
    free(r->client_cert);
    free(r->client_key);
    r->ca_file = ca_file != NULL ? xstrdup(ca_file) : NULL;
    r->ca_path = ca_path != NULL ? xstrdup(ca_path) : NULL;
    r->client_cert = client_cert != NULL ? xstrdup(client_cert) : NULL;
    r->client_key = client_key != NULL ? xstrdup(client_key) : NULL;
}

int
http_request_set(struct http_request *r, const char *method, const char *url)
{
    if (url == NULL || (method != NULL && !httptext_is_token(method)))
        return -EINVAL;
    free(r->method);
    free(r->url);
    r->method = xstrdup(method);
    r->url = xstrdup(url);
    return 0;
}

int
http_request_add_header(struct http_request *r, const char *name,
                        const char *value)
{
    if (!httptext_is_token(name) || value == NULL ||
        !httptext_is_field_value(value))
        return -EINVAL;
    for (size_t i = 0; i < r->nheaders; i++) {
        if (strcasecmp(r->headers[i].name, name) == 0) {
            http__free_secret(r->headers[i].value);
            r->headers[i].value = xstrdup(value);
            return 0;
        }
    }
    r->headers = xrealloc(r->headers, (r->nheaders + 1) * sizeof(*r->headers));
    r->headers[r->nheaders].name = xstrdup(name);
    r->headers[r->nheaders].value = xstrdup(value);
    r->nheaders++;
    return 0;
}

void
http_request_set_body(struct http_request *r, const char *body, size_t len)
{
    free(r->body);
    r->body = xmalloc(len + 1);
    if (len > 0)
        memcpy(r->body, body, len);
    r->body[len] = '\0';
    r->body_len = len;
}

const char *
http_request_header(const struct http_request *r, const char *name)
{
    for (size_t i = 0; i < r->nheaders; i++) {
        if (strcasecmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    }
    return NULL;
}

void
http__set_body_json(struct http_request *r, const cJSON *item)
{
    char *s = cJSON_PrintUnformatted(item);

    if (s == NULL) {
        fprintf(stderr, "stepq: out of memory\n");
        abort();
    }
    http_request_set_body(r, s, strlen(s));
    cJSON_free(s);
}

/* ---- env: values ------------------------------------------------------ */

int
http__resolve_value(const char *what, const char *value, const char **out,
                    char *err, size_t errlen)
{
    const char *v = value;

    if (strncmp(value, "env:", 4) == 0) {
        v = getenv(value + 4);
        if (v == NULL)
            return http__fail(err, errlen, -ENOENT,
                              "%s: environment variable %s is not set", what,
                              value + 4);
        if (!httptext_is_field_value(v))
            return http__fail(err, errlen, -EINVAL,
                              "%s: environment variable %s holds control "
                              "characters",
                              what, value + 4);
    } else if (!httptext_is_field_value(v)) {
        return http__fail(err, errlen, -EINVAL,
                          "%s: control characters in the value", what);
    }
    *out = v;
    return 0;
}

/* ---- http steps ------------------------------------------------------- */

/* The checks of an http step's fields that need no request yet. */
static int
step_fields_check(const cJSON *method, const cJSON *url, const cJSON *headers,
                  const char *idempotency_key, char *err, size_t errlen)
{
    if (method != NULL &&
        (!cJSON_IsString(method) || !httptext_is_token(method->valuestring)))
        return http__fail(err, errlen, -EINVAL,
                          "http.method: must be an HTTP method");
    if (!cJSON_IsString(url) || !http__is_http_url(url->valuestring))
        return http__fail(err, errlen, -EINVAL,
                          "http.url: must be an http:// or https:// URL");
    if (headers != NULL && !cJSON_IsObject(headers))
        return http__fail(err, errlen, -EINVAL,
                          "http.headers: must be an object");
    if (idempotency_key != NULL &&
        (*idempotency_key == '\0' || !httptext_is_field_value(idempotency_key)))
        return http__fail(err, errlen, -EINVAL,
                          "idempotency_key: must be printable text");
    return 0;
}

/* Adds the step's headers to r, each value resolved (env:), and those of
 * an env: value or a credential's name kept as secrets to scrub. */
static int
step_headers(struct http_request *r, const cJSON *headers, char *err,
             size_t errlen)
{
    const cJSON *h;
    int rc;

    cJSON_ArrayForEach(h, headers)
    {
        const char *v = NULL;
        char what[300];

        if (!cJSON_IsString(h) || !httptext_is_token(h->string))
            return http__fail(err, errlen, -EINVAL,
                              "http.headers.%s: must be a string header",
                              h->string ? h->string : "?");
        snprintf(what, sizeof(what), "http.headers.%s", h->string);
        if ((rc = http__resolve_value(what, h->valuestring, &v, err, errlen)) !=
                0 ||
            (rc = http_request_add_header(r, h->string, v)) != 0)
            return rc;
        if (strncmp(h->valuestring, "env:", 4) == 0 ||
            httptext_is_credential_name(h->string, strlen(h->string)))
            http_request_add_secret(r, v);
    }
    return 0;
}

/* Sets r's body: a string as text, anything else as JSON, with its
 * Content-Type unless the step named one. */
static int
step_body(struct http_request *r, const cJSON *body)
{
    const char *ctype = "application/json";

    if (cJSON_IsString(body)) {
        http_request_set_body(r, body->valuestring, strlen(body->valuestring));
        ctype = "text/plain; charset=utf-8";
    } else {
        http__set_body_json(r, body);
    }
    if (http_request_header(r, "Content-Type") != NULL)
        return 0;
    return http_request_add_header(r, "Content-Type", ctype);
}

int
http_step_request(const cJSON *http, const char *idempotency_key,
                  int64_t timeout_ms, struct http_request *out, char *err,
                  size_t errlen)
{
    const cJSON *method, *url, *headers, *body;
    struct http_request r;
    int rc;

    if (!cJSON_IsObject(http))
        return http__fail(err, errlen, -EINVAL, "http: must be an object");
    method = cJSON_GetObjectItemCaseSensitive(http, "method");
    url = cJSON_GetObjectItemCaseSensitive(http, "url");
    headers = cJSON_GetObjectItemCaseSensitive(http, "headers");
    body = cJSON_GetObjectItemCaseSensitive(http, "body");
    if (cJSON_IsNull(body))
        body = NULL;
    if ((rc = step_fields_check(method, url, headers, idempotency_key, err,
                                errlen)) != 0)
        return rc;
    http_request_init(&r);
    if ((rc = http_request_set(
             &r, method ? method->valuestring : (body ? "POST" : "GET"),
             url->valuestring)) != 0)
        goto fail;
    if ((rc = step_headers(&r, headers, err, errlen)) != 0) {
        http_request_cleanup(&r);
        return rc;
    }
    if ((body != NULL && (rc = step_body(&r, body)) != 0) ||
        /* The step's key wins over a header of the same name in the job. */
        (idempotency_key != NULL &&
         (rc = http_request_add_header(&r, "Idempotency-Key",
                                       idempotency_key)) != 0))
        goto fail;
    r.timeout_ms = timeout_ms;
    *out = r;
    return 0;
fail:
    http_request_cleanup(&r);
    return http__fail(err, errlen, rc, "http: cannot be built");
}

/* ---- chat answers ----------------------------------------------------- */

/* count reads a token count: a whole, finite, non-negative number. */
static int64_t
count(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    double d;

    if (!cJSON_IsNumber(v))
        return -1;
    d = v->valuedouble;
    if (!isfinite(d) || d < 0 || d > 9007199254740992.0 || floor(d) != d)
        return -1;
    return (int64_t)d;
}

/* sum is a + b, or -1 when a is not said (b not said counts 0). */
static int64_t
sum(int64_t a, int64_t b)
{
    return a < 0 ? -1 : a + (b > 0 ? b : 0);
}

static void
usage_gemini(const cJSON *m, struct price_usage *u)
{
    u->input =
        sum(count(m, "promptTokenCount"), count(m, "toolUsePromptTokenCount"));
    u->output =
        sum(count(m, "candidatesTokenCount"), count(m, "thoughtsTokenCount"));
    u->cache_read = count(m, "cachedContentTokenCount");
}

/* Anthropic's input_tokens leaves out what was read from or written to
 * the cache; OpenAI's input_tokens and prompt_tokens hold it. */
static void
usage_openai_or_anthropic(const cJSON *o, struct price_usage *u)
{
    const cJSON *det;
    int64_t read = count(o, "cache_read_input_tokens"),
            write = count(o, "cache_creation_input_tokens");

    if (cJSON_HasObjectItem(o, "prompt_tokens")) {
        u->input = count(o, "prompt_tokens");
        u->output = count(o, "completion_tokens");
        det = cJSON_GetObjectItemCaseSensitive(o, "prompt_tokens_details");
        u->cache_read = cJSON_IsObject(det)
                            ? count(det, "cached_tokens")
                            : count(o, "prompt_cache_hit_tokens");
    } else if (read >= 0 || write >= 0) {
        u->input = sum(sum(count(o, "input_tokens"), read), write);
        u->output = count(o, "output_tokens");
        u->cache_read = read;
        u->cache_write = write;
    } else {
        u->input = count(o, "input_tokens");
        u->output = count(o, "output_tokens");
        det = cJSON_GetObjectItemCaseSensitive(o, "input_tokens_details");
        u->cache_read = count(det, "cached_tokens");
    }
}

void
http_usage_read(const cJSON *root, struct price_usage *out)
{
    const cJSON *o;

    *out = PRICE_USAGE_NONE;
    if (!cJSON_IsObject(root))
        return;
    o = cJSON_GetObjectItemCaseSensitive(root, "usage");
    if (cJSON_IsObject(o)) {
        usage_openai_or_anthropic(o, out);
        return;
    }
    o = cJSON_GetObjectItemCaseSensitive(root, "usageMetadata");
    if (cJSON_IsObject(o))
        usage_gemini(o, out);
}

int
http_chat_parse(const char *body, size_t len, struct http_chat_answer *out)
{
    cJSON *root;
    int rc;

    if (body == NULL)
        return -EINVAL;
    root = json_parse_exact(body, len);
    rc = http_chat_read(root, out);
    cJSON_Delete(root);
    return rc;
}

int
http_chat_read(const cJSON *root, struct http_chat_answer *out)
{
    const cJSON *choices, *c0, *msg, *v, *usage;
    struct http_chat_answer a = {NULL, false,           NULL, -1, -1,
                                 -1,   PRICE_USAGE_NONE};

    if (!cJSON_IsObject(root))
        return -EINVAL;
    choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    c0 = cJSON_IsArray(choices) ? cJSON_GetArrayItem(choices, 0) : NULL;
    msg = cJSON_IsObject(c0) ? cJSON_GetObjectItemCaseSensitive(c0, "message")
                             : NULL;
    /* The native answers (anthropic.c, gemini.c) are read into the same
     * shape, finish reasons as their OpenAI twins. */
    if (!cJSON_IsObject(msg) && http__anthropic_read(root, &a) != 0 &&
        http__gemini_read(root, &a) != 0)
        return -EINVAL;
    if (!cJSON_IsObject(msg))
        goto usage;
    v = cJSON_GetObjectItemCaseSensitive(msg, "content");
    if (cJSON_IsString(v))
        a.content = xstrdup(v->valuestring);
    v = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
    a.has_tool_calls =
        (cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0) ||
        cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(msg, "function_call"));
    v = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
    if (cJSON_IsString(v))
        a.finish_reason = xstrdup(v->valuestring);
usage:
    usage = cJSON_GetObjectItemCaseSensitive(root, "usage");
    if (cJSON_IsObject(usage)) {
        a.prompt_tokens = count(usage, "prompt_tokens");
        a.completion_tokens = count(usage, "completion_tokens");
        a.total_tokens = count(usage, "total_tokens");
    }
    http_usage_read(root, &a.usage);
    if (a.total_tokens < 0 && price_usage_is_complete(&a.usage))
        a.total_tokens = a.usage.input + a.usage.output;
    *out = a;
    return 0;
}

void
http_chat_answer_cleanup(struct http_chat_answer *a)
{
    if (a == NULL)
        return;
    free(a->content);
    free(a->finish_reason);
    memset(a, 0, sizeof(*a));
    a->prompt_tokens = a->completion_tokens = a->total_tokens = -1;
    a->usage = PRICE_USAGE_NONE;
}

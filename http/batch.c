/* batch.c: the bodies of the two providers' batch APIs, built and
 * read (docs/reference.md "Batches"): OpenAI's JSONL input file in its
 * multipart upload and the create body with the metadata that names the
 * batch; Anthropic's create body, each chat request turned into its
 * Messages params; a batch object of either read into one status; and
 * the results of either, each item's answer turned into an OpenAI-shaped
 * chat completion so that the worker reads it as a realtime answer. */
#include "http/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"

#define CHAT_ENDPOINT      "/v1/chat/completions"
#define BOUNDARY           "stepq-batch-7c1f0e"
#define ANTHROPIC_MAX_TOKS 1024

static cJSON *
must(cJSON *item)
{
    if (item == NULL) {
        fprintf(stderr, "stepq: out of memory\n");
        abort();
    }
    return item;
}

/* ---- building ----------------------------------------------------------- */

void
http_batch_openai_upload(const struct http_batch_item *items, size_t n,
                         const char *key, char **body, size_t *len,
                         char **ctype)
{
    struct xbuf b = {0};
    char head[512];
    int k;

    k = snprintf(head, sizeof(head),
                 "--" BOUNDARY "\r\nContent-Disposition: form-data; "
                 "name=\"purpose\"\r\n\r\nbatch\r\n--" BOUNDARY
                 "\r\nContent-Disposition: form-data; name=\"file\"; "
                 "filename=\"stepq-%s.jsonl\"\r\nContent-Type: "
                 "application/jsonl\r\n\r\n",
                 key);
    xbuf_put(&b, head, (size_t)k);
    for (size_t i = 0; i < n; i++) {
        cJSON *line = must(cJSON_CreateObject());
        char *text;
        json_add_string(line, "custom_id", items[i].custom_id);
        json_add_string(line, "method", "POST");
        json_add_string(line, "url", CHAT_ENDPOINT);
        cJSON_AddItemToObject(line, "body",
                              must(cJSON_Duplicate(items[i].request, true)));
        text = json_print(line);
        xbuf_put(&b, text, strlen(text));
        xbuf_lit(&b, "\n");
        free(text);
        cJSON_Delete(line);
    }
    xbuf_lit(&b, "\r\n--" BOUNDARY "--\r\n");
    *len = b.len;
    *body = b.p;
    *ctype = xstrdup("multipart/form-data; boundary=" BOUNDARY);
}

char *
http_batch_openai_create(const char *file_id, const char *key)
{
    cJSON *o = must(cJSON_CreateObject()), *meta;
    char *text;

    json_add_string(o, "input_file_id", file_id);
    json_add_string(o, "endpoint", CHAT_ENDPOINT);
    json_add_string(o, "completion_window", "24h");
    meta = must(cJSON_AddObjectToObject(o, "metadata"));
    json_add_string(meta, HTTP_BATCH_META_KEY, key);
    text = json_print(o);
    cJSON_Delete(o);
    return text;
}

/* The system messages' text, joined by blank lines, or NULL. */
static char *
system_text(const cJSON *messages)
{
    struct xbuf b = {0};
    const cJSON *m;

    cJSON_ArrayForEach(m, messages)
    {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsString(role) || strcmp(role->valuestring, "system") != 0 ||
            !cJSON_IsString(c))
            continue;
        if (b.len > 0)
            xbuf_lit(&b, "\n\n");
        xbuf_put(&b, c->valuestring, strlen(c->valuestring));
    }
    if (b.p != NULL)
        xbuf_put(&b, "", 1);
    return b.p;
}

/* An OpenAI-shaped chat request as Anthropic's Messages params. */
static cJSON *
anthropic_params(const cJSON *req)
{
    static const char *const same[] = {"model", "temperature", "top_p", NULL};
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(req, "messages");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(req, "max_tokens");
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(req, "stop");
    cJSON *p = must(cJSON_CreateObject()), *out, *m;
    char *sys = system_text(msgs);

    if (!cJSON_IsNumber(mt))
        mt = cJSON_GetObjectItemCaseSensitive(req, "max_completion_tokens");
    for (int i = 0; same[i] != NULL; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, same[i]);
        if (v != NULL)
            cJSON_AddItemToObject(p, same[i], must(cJSON_Duplicate(v, true)));
    }
    cJSON_AddNumberToObject(p, "max_tokens",
                            cJSON_IsNumber(mt) && mt->valuedouble >= 1
                                ? mt->valuedouble
                                : ANTHROPIC_MAX_TOKS);
    if (sys != NULL)
        json_add_string(p, "system", sys);
    free(sys);
    if (cJSON_IsString(stop)) {
        cJSON *a = must(cJSON_AddArrayToObject(p, "stop_sequences"));
        cJSON_AddItemToArray(a, must(cJSON_CreateString(stop->valuestring)));
    } else if (cJSON_IsArray(stop)) {
        cJSON_AddItemToObject(p, "stop_sequences",
                              must(cJSON_Duplicate(stop, true)));
    }
    out = must(cJSON_AddArrayToObject(p, "messages"));
    cJSON_ArrayForEach(m, msgs)
    {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        cJSON *copy;
        if (cJSON_IsString(role) && strcmp(role->valuestring, "system") == 0)
            continue;
        copy = must(cJSON_CreateObject());
        cJSON_AddItemToObject(copy, "role", must(cJSON_Duplicate(role, true)));
        cJSON_AddItemToObject(
            copy, "content",
            must(cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(m, "content"),
                                 true)));
        cJSON_AddItemToArray(out, copy);
    }
    return p;
}

char *
http_batch_anthropic_create(const struct http_batch_item *items, size_t n)
{
    cJSON *o = must(cJSON_CreateObject());
    cJSON *reqs = must(cJSON_AddArrayToObject(o, "requests"));
    char *text;

    for (size_t i = 0; i < n; i++) {
        cJSON *r = must(cJSON_CreateObject());
        json_add_string(r, "custom_id", items[i].custom_id);
        cJSON_AddItemToObject(r, "params", anthropic_params(items[i].request));
        cJSON_AddItemToArray(reqs, r);
    }
    text = json_print(o);
    cJSON_Delete(o);
    return text;
}

/* ---- reading ------------------------------------------------------------- */

static char *
str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    return cJSON_IsString(v) ? xstrdup(v->valuestring) : NULL;
}

static bool
str_is(const cJSON *o, const char *key, const char *want)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    return cJSON_IsString(v) && strcmp(v->valuestring, want) == 0;
}

static int64_t
num_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
}

static void
read_openai(const cJSON *root, struct http_batch_status *s)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    const cJSON *counts =
        cJSON_GetObjectItemCaseSensitive(root, "request_counts");
    int64_t created = num_of(root, "created_at");

    s->failed = str_is(root, "status", "failed");
    s->ended = s->failed || str_is(root, "status", "completed") ||
               str_is(root, "status", "expired") ||
               str_is(root, "status", "cancelled");
    s->output_file_id = str_of(root, "output_file_id");
    s->error_file_id = str_of(root, "error_file_id");
    s->key = cJSON_IsObject(meta) ? str_of(meta, HTTP_BATCH_META_KEY) : NULL;
    s->created_at = created > 0 ? created * 1000 : 0;
    s->total = num_of(counts, "total");
}

static void
read_anthropic(const cJSON *root, struct http_batch_status *s)
{
    static const char *const parts[] = {"processing", "succeeded", "errored",
                                        "canceled",   "expired",   NULL};
    const cJSON *counts =
        cJSON_GetObjectItemCaseSensitive(root, "request_counts");
    const cJSON *created = cJSON_GetObjectItemCaseSensitive(root, "created_at");

    s->ended = str_is(root, "processing_status", "ended");
    if (cJSON_IsString(created) &&
        clock_parse_utc(created->valuestring, &s->created_at) != 0)
        s->created_at = 0;
    s->total = cJSON_IsObject(counts) ? 0 : -1;
    for (int i = 0; s->total >= 0 && parts[i] != NULL; i++) {
        int64_t v = num_of(counts, parts[i]);
        s->total = v >= 0 ? s->total + v : -1;
    }
}

int
http_batch_status_read(int api, const cJSON *root,
                       struct http_batch_status *out)
{
    struct http_batch_status s = {0};

    if (!cJSON_IsObject(root) ||
        !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "id")))
        return -EINVAL;
    s.id = str_of(root, "id");
    if (api == CONFIG_BATCH_OPENAI)
        read_openai(root, &s);
    else
        read_anthropic(root, &s);
    *out = s;
    return 0;
}

void
http_batch_status_cleanup(struct http_batch_status *s)
{
    if (s == NULL)
        return;
    free(s->id);
    free(s->output_file_id);
    free(s->error_file_id);
    free(s->key);
    memset(s, 0, sizeof(*s));
}

/* The status an Anthropic error type stands for (its documented codes). */
static int
anthropic_status(const cJSON *error)
{
    static const struct {
        const char *type;
        int status;
    } map[] = {{"invalid_request_error", 400},
               {"authentication_error", 401},
               {"permission_error", 403},
               {"not_found_error", 404},
               {"request_too_large", 413},
               {"rate_limit_error", 429},
               {"api_error", 500},
               {"overloaded_error", 529}};
    const cJSON *inner = cJSON_GetObjectItemCaseSensitive(error, "error");
    const cJSON *type =
        cJSON_GetObjectItemCaseSensitive(inner ? inner : error, "type");

    for (size_t i = 0; cJSON_IsString(type) && i < STEPQ_ARRAY_LEN(map); i++) {
        if (strcmp(map[i].type, type->valuestring) == 0)
            return map[i].status;
    }
    return 500;
}

/* An Anthropic message as an OpenAI chat completion: its text parts
 * joined as the content, max_tokens as "length", its usage kept as it
 * came (http_usage_read reads Anthropic's) with total_tokens added. */
static char *
chat_of_message(const cJSON *msg)
{
    cJSON *o = must(cJSON_CreateObject()), *choices, *c, *m, *usage;
    const cJSON *part, *u = cJSON_GetObjectItemCaseSensitive(msg, "usage");
    struct xbuf text = {0};
    char *out;

    cJSON_ArrayForEach(part, cJSON_GetObjectItemCaseSensitive(msg, "content"))
    {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (str_is(part, "type", "text") && cJSON_IsString(t))
            xbuf_put(&text, t->valuestring, strlen(t->valuestring));
    }
    xbuf_put(&text, "", 1);
    json_add_string(o, "object", "chat.completion");
    choices = must(cJSON_AddArrayToObject(o, "choices"));
    c = must(cJSON_CreateObject());
    cJSON_AddItemToArray(choices, c);
    cJSON_AddNumberToObject(c, "index", 0);
    m = must(cJSON_AddObjectToObject(c, "message"));
    json_add_string(m, "role", "assistant");
    json_add_string(m, "content", text.p);
    json_add_string(c, "finish_reason",
                    str_is(msg, "stop_reason", "max_tokens") ? "length"
                                                             : "stop");
    if (cJSON_IsObject(u)) {
        int64_t in = num_of(u, "input_tokens"),
                outn = num_of(u, "output_tokens");
        usage = must(cJSON_Duplicate(u, true));
        if (in >= 0 && outn >= 0)
            cJSON_AddNumberToObject(usage, "total_tokens", (double)(in + outn));
        cJSON_AddItemToObject(o, "usage", usage);
    }
    free(text.p);
    out = json_print(o);
    cJSON_Delete(o);
    return out;
}

static void
read_openai_line(const cJSON *line, struct http_batch_result *r)
{
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(line, "response");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(line, "error");
    const cJSON *body = cJSON_GetObjectItemCaseSensitive(res, "body");
    int64_t status = num_of(res, "status_code");

    if (cJSON_IsObject(res) && status >= 200 && status <= 299 &&
        cJSON_IsObject(body)) {
        r->kind = HTTP_BATCH_SUCCEEDED;
        r->status = (int)status;
        r->body = json_print(body);
    } else if (cJSON_IsObject(res) && status > 0) {
        r->kind = HTTP_BATCH_ERRORED;
        r->status = (int)status;
        r->body = body != NULL ? json_print(body) : xstrdup("");
    } else if (str_is(err, "code", "batch_cancelled")) {
        r->kind = HTTP_BATCH_CANCELLED;
    } else {
        r->kind = HTTP_BATCH_EXPIRED; /* batch_expired, or never run */
    }
}

static void
read_anthropic_line(const cJSON *line, struct http_batch_result *r)
{
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(line, "result");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(res, "message");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(res, "error");

    if (str_is(res, "type", "succeeded") && cJSON_IsObject(msg)) {
        r->kind = HTTP_BATCH_SUCCEEDED;
        r->status = 200;
        r->body = chat_of_message(msg);
    } else if (str_is(res, "type", "errored")) {
        r->kind = HTTP_BATCH_ERRORED;
        r->status = anthropic_status(err);
        r->body = err != NULL ? json_print(err) : xstrdup("");
    } else if (str_is(res, "type", "canceled")) {
        r->kind = HTTP_BATCH_CANCELLED;
    } else {
        r->kind = HTTP_BATCH_EXPIRED;
    }
}

void
http_batch_results_read(int api, const char *body, size_t len,
                        struct http_batch_result **out, size_t *n, size_t *cap)
{
    const char *p = body, *end = body + len;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl != NULL ? nl : end;
        cJSON *line = stop > p ? json_parse_exact(p, (size_t)(stop - p)) : NULL;
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(line, "custom_id");
        p = stop + 1;
        if (!cJSON_IsString(id)) {
            if (line != NULL)
                log_warn("a batch result without custom_id: skipped");
            cJSON_Delete(line);
            continue;
        }
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 64;
            *out = xrealloc(*out, *cap * sizeof(**out));
        }
        (*out)[*n] =
            (struct http_batch_result){.custom_id = xstrdup(id->valuestring)};
        if (api == CONFIG_BATCH_OPENAI)
            read_openai_line(line, &(*out)[*n]);
        else
            read_anthropic_line(line, &(*out)[*n]);
        (*n)++;
        cJSON_Delete(line);
    }
}

void
http_batch_results_free(struct http_batch_result *r, size_t n)
{
    for (size_t i = 0; r != NULL && i < n; i++) {
        free(r[i].custom_id);
        free(r[i].body);
    }
    free(r);
}

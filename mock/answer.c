/* answer.c: decides what the mock answers to one request.
 *
 * Everything here is driven by the script, its per-route state and the time
 * passed in, so the server in mock.c only moves bytes. Bodies are built with
 * cJSON so that whatever the script or the request contains, the JSON we send
 * is well formed (except where a fault asks for the opposite).
 */
#include "mock/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/xalloc.h"

/* A remembered Idempotency-Key and the body first sent for it. */
struct mock_idem {
    struct mock_idem *next;
    char *key;  /* owned */
    char *body; /* owned */
};

struct build {
    int status;
    char *body; /* owned */
    struct mock_extra extra[12];
    int nextra;
    const struct mock_answer *answer; /* scripted headers; may be NULL */
};

static uint64_t
next_rand(uint64_t *s)
{
    /* splitmix64: tiny, seedable, good enough for jitter. */
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static bool
ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool
is_chat(const struct mock_request *rq)
{
    return strcmp(rq->method, "POST") == 0 &&
           (ends_with(rq->path, "/chat/completions") ||
            ends_with(rq->path, "/chat/completions/"));
}

/* match returns the route with the longest path prefix that ends on a
 * segment boundary; the catch-all (last) route otherwise. */
static struct mock_route *
match(struct mock_script *s, const char *path)
{
    struct mock_route *best = &s->routes[s->nroutes - 1];
    size_t best_len = 0;

    for (size_t i = 0; i + 1 < s->nroutes; i++) {
        struct mock_route *r = &s->routes[i];
        size_t n = strlen(r->path);
        if (strncmp(path, r->path, n) != 0)
            continue;
        if (path[n] != '\0' && path[n] != '/' && path[n] != '?' && n > 0)
            continue;
        if (n >= best_len) {
            best = r;
            best_len = n;
        }
    }
    return best;
}

static bool
storm_active(struct mock_route *r, int64_t now)
{
    if (r->storm_status == 0 || r->storm_over ||
        r->requests <= (uint64_t)r->storm_after)
        return false;
    if (r->storm_start < 0)
        r->storm_start = now;
    if ((r->storm_requests > 0 && r->storm_served >= r->storm_requests) ||
        (r->storm_ms > 0 && now - r->storm_start >= r->storm_ms)) {
        r->storm_over = true;
        return false;
    }
    r->storm_served++;
    return true;
}

static const struct mock_answer *
next_answer(struct mock_route *r)
{
    const struct mock_answer *a;

    if (r->next >= r->nanswers) {
        if (!r->loop || r->nanswers == 0)
            return NULL;
        r->next = 0;
        r->next_used = 0;
    }
    a = &r->answers[r->next];
    if (++r->next_used >= a->count) {
        r->next++;
        r->next_used = 0;
    }
    return a;
}

static char *
error_body(const char *message, const char *type, const char *code)
{
    cJSON *root = cJSON_CreateObject(), *e = cJSON_CreateObject();
    char *s;

    cJSON_AddStringToObject(e, "message", message);
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNullToObject(e, "param");
    if (code != NULL)
        cJSON_AddStringToObject(e, "code", code);
    else
        cJSON_AddNullToObject(e, "code");
    cJSON_AddItemToObject(root, "error", e);
    s = json_print(root);
    cJSON_Delete(root);
    return s;
}

/* utf8_cut returns n moved back so that s[0..n) ends on a character. */
static size_t
utf8_cut(const char *s, size_t n)
{
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

/* default_content summarizes the last message so that chained steps see
 * something of their input, as a JSON object with a "summary" key (steps
 * with expect_json ["summary"] pass). */
static char *
default_content(const cJSON *req)
{
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(req, "messages");
    const cJSON *last = NULL, *c = NULL;
    cJSON *o = cJSON_CreateObject();
    char text[160], *s;
    int n = cJSON_IsArray(msgs) ? cJSON_GetArraySize(msgs) : 0;

    if (n > 0)
        last = cJSON_GetArrayItem(msgs, n - 1);
    if (cJSON_IsObject(last))
        c = cJSON_GetObjectItemCaseSensitive(last, "content");
    if (cJSON_IsString(c) && c->valuestring[0] != '\0') {
        size_t len = strlen(c->valuestring), cut = len > 80 ? 80 : len;
        cut = utf8_cut(c->valuestring, cut);
        snprintf(text, sizeof(text), "mock reply to: %.*s%s", (int)cut,
                 c->valuestring, cut < len ? "..." : "");
    } else {
        snprintf(text, sizeof(text), "mock reply (%d messages)", n);
    }
    cJSON_AddStringToObject(o, "summary", text);
    s = json_print(o);
    cJSON_Delete(o);
    return s;
}

static int64_t
request_max_tokens(const cJSON *req)
{
    const char *keys[] = {"max_completion_tokens", "max_tokens"};

    for (size_t i = 0; i < STEPQ_ARRAY_LEN(keys); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, keys[i]);
        if (cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble < 1e9)
            return (int64_t)v->valuedouble;
    }
    return 0;
}

static char *
print_chat(struct mock_engine *e, const char *model, const char *content,
           const char *finish, int64_t prompt, int64_t completion)
{
    cJSON *root = cJSON_CreateObject(), *choices = cJSON_CreateArray();
    cJSON *choice = cJSON_CreateObject(), *msg = cJSON_CreateObject();
    cJSON *usage = cJSON_CreateObject();
    char id[64], *s;

    snprintf(id, sizeof(id), "chatcmpl-mock-%06" PRIu64, e->seq);
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "object", "chat.completion");
    cJSON_AddNumberToObject(root, "created", (double)(clock_now_ms() / 1000));
    cJSON_AddStringToObject(root, "model", model);
    cJSON_AddNumberToObject(choice, "index", 0);
    cJSON_AddStringToObject(msg, "role", "assistant");
    cJSON_AddStringToObject(msg, "content", content);
    cJSON_AddItemToObject(choice, "message", msg);
    cJSON_AddNullToObject(choice, "logprobs");
    cJSON_AddStringToObject(choice, "finish_reason", finish);
    cJSON_AddItemToArray(choices, choice);
    cJSON_AddItemToObject(root, "choices", choices);
    cJSON_AddNumberToObject(usage, "prompt_tokens", (double)prompt);
    cJSON_AddNumberToObject(usage, "completion_tokens", (double)completion);
    cJSON_AddNumberToObject(usage, "total_tokens",
                            (double)(prompt + completion));
    cJSON_AddItemToObject(root, "usage", usage);
    cJSON_AddStringToObject(root, "system_fingerprint", "stepq-mock");
    s = json_print(root);
    cJSON_Delete(root);
    return s;
}

/* chat_body builds a chat completion. With oversize > 0 the content is
 * padded so the whole body is exactly oversize bytes (when it can be). */
static char *
chat_body(struct mock_engine *e, struct mock_route *r,
          const struct mock_answer *a, const cJSON *req, int64_t prompt,
          int64_t *tokens)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(req, "model");
    const char *model = cJSON_IsString(m) && m->valuestring[0] != '\0'
                            ? m->valuestring
                            : (r->model ? r->model : "mock-model");
    const char *finish = "stop";
    char *content = NULL, *body;
    int64_t completion = -1, max_tokens = request_max_tokens(req);
    enum mock_fault fault = a ? a->fault : MOCK_FAULT_NONE;
    size_t clen;

    if (a != NULL && a->content != NULL)
        content = xstrdup(a->content);
    else if (r->content != NULL)
        content = xstrdup(r->content);
    else
        content = default_content(req);
    if (a != NULL && a->finish_reason != NULL)
        finish = a->finish_reason;
    else if (r->finish_reason != NULL)
        finish = r->finish_reason;
    if (a != NULL && a->completion_tokens >= 0)
        completion = a->completion_tokens;
    else if (r->completion_tokens >= 0)
        completion = r->completion_tokens;

    clen = strlen(content);
    if (fault == MOCK_FAULT_TRUNCATE) {
        content[utf8_cut(content, clen / 2)] = '\0';
        finish = "length";
    } else if (fault == MOCK_FAULT_INVALID_JSON) {
        free(content);
        content = xstrdup("{\"summary\": \"this output stops in the mid");
    } else if (fault == MOCK_FAULT_EMPTY) {
        content[0] = '\0';
    }
    clen = strlen(content);
    if (completion < 0)
        completion = clen == 0 ? 0 : (int64_t)(clen + 3) / 4;
    /* A request that caps its output gets what a model would do: the text
     * cut at the cap and finish_reason "length". */
    if (max_tokens > 0 && completion > max_tokens) {
        size_t cut = (size_t)max_tokens * 4;
        if (cut < clen)
            content[utf8_cut(content, cut)] = '\0';
        completion = max_tokens;
        finish = "length";
    }
    body = print_chat(e, model, content, finish, prompt, completion);
    if (a != NULL && a->oversize > 0 && (size_t)a->oversize > strlen(body)) {
        /* 'x' needs no escaping, so each one adds one byte. */
        size_t base, pad;
        char *big;
        free(body);
        body = print_chat(e, model, "", finish, prompt, completion);
        base = strlen(body);
        pad = (size_t)a->oversize - base;
        free(body);
        big = xmalloc(pad + 1);
        memset(big, 'x', pad);
        big[pad] = '\0';
        body = print_chat(e, model, big, finish, prompt, completion);
        free(big);
    }
    free(content);
    *tokens = prompt + completion;
    return body;
}

static char *
generic_body(struct mock_engine *e, const struct mock_request *rq,
             int64_t oversize)
{
    cJSON *root = cJSON_CreateObject();
    char id[64], *s, *pad;
    size_t base;

    snprintf(id, sizeof(id), "mock-%06" PRIu64, e->seq);
    cJSON_AddBoolToObject(root, "ok", true);
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "method", rq->method);
    cJSON_AddStringToObject(root, "path", rq->path);
    if (rq->idempotency_key != NULL)
        cJSON_AddStringToObject(root, "idempotency_key", rq->idempotency_key);
    else
        cJSON_AddNullToObject(root, "idempotency_key");
    cJSON_AddNumberToObject(root, "received_bytes", (double)rq->body_len);
    s = json_print(root);
    if (oversize > 0 && (size_t)oversize > strlen(s)) {
        /* Measure the body with an empty "pad", then fill it: 'x' needs no
         * escaping, so each one adds one byte. */
        cJSON_AddStringToObject(root, "pad", "");
        free(s);
        s = json_print(root);
        base = strlen(s);
        if ((size_t)oversize > base) {
            free(s);
            pad = xmalloc((size_t)oversize - base + 1);
            memset(pad, 'x', (size_t)oversize - base);
            pad[(size_t)oversize - base] = '\0';
            cJSON_ReplaceItemInObject(root, "pad", cJSON_CreateString(pad));
            free(pad);
            s = json_print(root);
        }
    }
    cJSON_Delete(root);
    return s;
}

static const char *
status_text(int status)
{
    const char *s = http_status_str((enum http_status)status);
    return s == NULL || s[0] == '<' ? "Status" : s;
}

static char *
status_error_body(int status)
{
    char msg[96];

    if (status >= 500)
        return error_body(status == 503 || status == 529
                              ? "The server is overloaded or not ready yet."
                              : "The server had an error while processing "
                                "your request.",
                          "server_error", NULL);
    snprintf(msg, sizeof(msg), "mock answered %d %s", status,
             status_text(status));
    return error_body(msg, "invalid_request_error", NULL);
}

static bool
scripted_has(const struct mock_answer *a, const char *name)
{
    for (size_t i = 0; a != NULL && i < a->nheaders; i++) {
        if (strcasecmp(a->headers[i].name, name) == 0)
            return true;
    }
    return false;
}

static void
finish_head(struct mock_engine *e, struct build *b, bool keep_alive,
            bool replayed, struct mock_reply *out)
{
    const struct mock_answer *a = b->answer;
    char *head = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&head, &len);

    if (f == NULL)
        abort();
    out->status = b->status;
    out->body = b->body;
    out->body_len = strlen(b->body);
    fprintf(f, "HTTP/1.1 %d %s\r\n", b->status, status_text(b->status));
    if (!scripted_has(a, "content-type"))
        fputs("Content-Type: application/json\r\n", f);
    fprintf(f, "Content-Length: %zu\r\n", out->body_len);
    fprintf(f, "Connection: %s\r\n", keep_alive ? "keep-alive" : "close");
    if (!scripted_has(a, "x-request-id"))
        fprintf(f, "X-Request-Id: mock-%06" PRIu64 "\r\n", e->seq);
    if (replayed)
        fputs("Idempotent-Replayed: true\r\n", f);
    for (int i = 0; i < b->nextra; i++) {
        if (!scripted_has(a, b->extra[i].name))
            fprintf(f, "%s: %s\r\n", b->extra[i].name, b->extra[i].value);
    }
    for (size_t i = 0; a != NULL && i < a->nheaders; i++)
        fprintf(f, "%s: %s\r\n", a->headers[i].name, a->headers[i].value);
    fputs("\r\n", f);
    if (fclose(f) != 0 || head == NULL)
        abort();
    out->head = head;
    out->head_len = len;
}

static struct mock_idem *
idem_find(struct mock_engine *e, const char *key)
{
    for (struct mock_idem *i = e->idem; i != NULL; i = i->next) {
        if (strcmp(i->key, key) == 0)
            return i;
    }
    return NULL;
}

static const char *
model_of(const struct mock_route *r, const cJSON *req)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(req, "model");

    if (cJSON_IsString(m) && m->valuestring[0] != '\0')
        return m->valuestring;
    return r->model ? r->model : "mock-model";
}

/* limit_admit asks the route's limiter; a request costs its prompt (body
 * bytes / 4) plus the max_tokens it asks for, as providers estimate it. */
static bool
limit_admit(struct mock_engine *e, struct mock_route *r, const cJSON *req,
            int64_t prompt, int64_t now, struct mock_limit_result *res)
{
    return mock_limit_admit(&r->limit, now, now + e->wall_offset,
                            prompt + request_max_tokens(req), res);
}

/* limit_body is the 429 body in the limit's provider style. */
static char *
limit_body(struct mock_engine *e, struct mock_route *r,
           const struct mock_limit_result *res, const cJSON *req, int64_t now)
{
    char *msg = mock_limit_message(&r->limit, res, now, now + e->wall_offset,
                                   model_of(r, req));
    char *body;

    if (r->limit.headers == MOCK_HDR_ANTHROPIC) {
        cJSON *root = cJSON_CreateObject(), *err = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "type", "error");
        cJSON_AddStringToObject(err, "type", "rate_limit_error");
        cJSON_AddStringToObject(err, "message", msg);
        cJSON_AddItemToObject(root, "error", err);
        body = json_print(root);
        cJSON_Delete(root);
    } else {
        body = error_body(msg, res->by_tokens ? "tokens" : "requests",
                          "rate_limit_exceeded");
    }
    free(msg);
    return body;
}

void
mock_engine_answer(struct mock_engine *e, const struct mock_request *rq,
                   int64_t now, bool keep_alive, struct mock_reply *out)
{
    struct mock_route *r = match(e->script, rq->path);
    const struct mock_answer *a = NULL;
    struct build b = {.status = 200};
    bool chat = is_chat(rq), replayed = false;
    int64_t prompt = (int64_t)rq->body_len / 4, tokens = 0;
    struct mock_limit_result lim = {.admitted = true};
    char msg[256];

    memset(out, 0, sizeof(*out));
    e->seq++;
    e->stats->requests++;
    r->requests++;
    out->route = r->path;
    out->kind = chat ? "chat" : "generic";
    out->delay_ms = r->latency_ms;
    if (r->jitter_ms > 0)
        out->delay_ms +=
            (int64_t)(next_rand(&e->rng) % (uint64_t)(r->jitter_ms + 1));
    if (rq->body_len > 0)
        out->request_json = cJSON_ParseWithLength(rq->body, rq->body_len);
    if (chat)
        e->stats->chat++;
    else
        e->stats->generic++;

    if (storm_active(r, now)) {
        b.status = r->storm_status;
        b.body = status_error_body(b.status);
        out->kind = "storm";
        e->stats->storm++;
    } else if (r->limit.shape != MOCK_SHAPE_NONE &&
               !limit_admit(e, r, out->request_json, prompt, now, &lim)) {
        b.status = 429;
        b.body = limit_body(e, r, &lim, out->request_json, now);
        out->kind = "rate_limit";
        e->stats->rate_limited++;
    } else if (chat && r->allowance_tokens > 0 &&
               r->tokens_used >= r->allowance_tokens) {
        b.status = 429;
        b.body = error_body("You exceeded your current quota, please check "
                            "your plan and billing details.",
                            "insufficient_quota", "insufficient_quota");
        out->kind = "quota";
        e->stats->quota++;
    } else if (chat && r->context_tokens > 0 && prompt > r->context_tokens) {
        snprintf(msg, sizeof(msg),
                 "This model's maximum context length is %" PRId64
                 " tokens. However, your messages resulted in %" PRId64
                 " tokens. Please reduce the length of the messages.",
                 r->context_tokens, prompt);
        b.status = 400;
        b.body =
            error_body(msg, "invalid_request_error", "context_length_exceeded");
        out->kind = "context";
    } else {
        a = next_answer(r);
        b.answer = a;
        if (a != NULL) {
            e->stats->scripted++;
            out->kind = chat ? "chat_scripted" : "generic_scripted";
            if (a->status != 0)
                b.status = a->status;
            if (a->delay_ms > 0)
                out->delay_ms += a->delay_ms;
            out->fault = a->fault;
        }
        if (a != NULL && a->body != NULL) {
            b.body = xstrdup(a->body);
        } else if (b.status < 200 || b.status > 299) {
            b.body = status_error_body(b.status);
        } else if (chat) {
            b.body = chat_body(e, r, a, out->request_json, prompt, &tokens);
        } else if (rq->idempotency_key != NULL && a == NULL &&
                   idem_find(e, rq->idempotency_key) != NULL) {
            /* Replay the first answer for this key, as Stripe does. */
            b.body = xstrdup(idem_find(e, rq->idempotency_key)->body);
            replayed = true;
            e->stats->replays++;
        } else {
            b.body = generic_body(e, rq, a ? a->oversize : 0);
            if (rq->idempotency_key != NULL && a == NULL) {
                struct mock_idem *i = xcalloc(1, sizeof(*i));
                i->key = xstrdup(rq->idempotency_key);
                i->body = xstrdup(b.body);
                i->next = e->idem;
                e->idem = i;
            }
        }
    }
    if (out->fault == MOCK_FAULT_HANG || out->fault == MOCK_FAULT_CLOSE ||
        out->fault == MOCK_FAULT_CLOSE_MID_BODY ||
        out->fault == MOCK_FAULT_DRIP || out->fault == MOCK_FAULT_BAD_CHUNKED ||
        out->fault == MOCK_FAULT_HUGE_HEADERS)
        e->stats->faults++;
    if (out->fault != MOCK_FAULT_HANG && out->fault != MOCK_FAULT_CLOSE &&
        b.status >= 200 && b.status <= 299) {
        e->stats->ok++;
        if (tokens > 0) {
            r->tokens_used += tokens;
            e->stats->tokens += (uint64_t)tokens;
        }
    }
    if (r->limit.shape != MOCK_SHAPE_NONE && strcmp(out->kind, "storm") != 0)
        b.nextra =
            mock_limit_headers(&r->limit, &lim, now, now + e->wall_offset,
                               b.extra, (int)STEPQ_ARRAY_LEN(b.extra));
    finish_head(e, &b, keep_alive, replayed, out);
}

void
mock_engine_bad_request(struct mock_engine *e, bool too_large,
                        struct mock_reply *out)
{
    struct build b = {.status = too_large ? 413 : 400};

    memset(out, 0, sizeof(*out));
    e->seq++;
    e->stats->requests++;
    e->stats->bad_requests++;
    b.body = error_body(too_large ? "Request body too large for the mock."
                                  : "The mock could not parse this request.",
                        "invalid_request_error", NULL);
    out->route = "";
    out->kind = "bad_request";
    finish_head(e, &b, false, false, out);
}

void
mock_engine_cleanup(struct mock_engine *e)
{
    struct mock_idem *i = e->idem, *next;

    for (; i != NULL; i = next) {
        next = i->next;
        free(i->key);
        free(i->body);
        free(i);
    }
    e->idem = NULL;
    mock_script_free(e->script);
    e->script = NULL;
}

void
mock_reply_cleanup(struct mock_reply *r)
{
    free(r->head);
    free(r->body);
    cJSON_Delete(r->request_json);
    r->head = r->body = NULL;
    r->request_json = NULL;
}

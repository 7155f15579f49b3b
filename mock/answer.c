/* answer.c: decides what the mock answers to one request.
 *
 * Everything here is driven by the script, its per-route state and the time
 * passed in, so the server (mock.c, conn.c, request.c) only moves bytes:
 * route match, storm, limit, allowance, context, the scripted sequence and
 * the defaults, in that order, then the head of the reply. The bodies are
 * built in body.c.
 */
#include "mock/internal.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/xalloc.h"
#include "mock/batch_internal.h"

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
    const char *ctype;                /* static; NULL: application/json */
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
        /* An exact route takes its path alone ("/v1/" as "/v1"). */
        if (r->exact && path[n] != '\0' && strcmp(path + n, "/") != 0)
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
    fprintf(f, "HTTP/1.1 %d %s\r\n", b->status, mock__status_text(b->status));
    if (b->status == 204 || b->status == 304) {
        /* No body and no length (RFC 9110, 6.4.1): a client reads none. */
        out->body[0] = '\0';
        out->body_len = 0;
    } else {
        if (!scripted_has(a, "content-type"))
            fprintf(f, "Content-Type: %s\r\n",
                    b->ctype ? b->ctype : "application/json");
        fprintf(f, "Content-Length: %zu\r\n", out->body_len);
    }
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

/* decode writes s[0..n) percent-decoded ('+' is a space) into buf. */
static void
decode(const char *s, size_t n, char *buf, size_t len)
{
    size_t o = 0;

    for (size_t i = 0; i < n && o + 1 < len; i++) {
        if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
            isxdigit((unsigned char)s[i + 2])) {
            char hex[3] = {s[i + 1], s[i + 2], '\0'};
            buf[o++] = (char)strtol(hex, NULL, 16);
            i += 2;
        } else {
            buf[o++] = s[i] == '+' ? ' ' : s[i];
        }
    }
    buf[o] = '\0';
}

/* query_value finds parameter name in the raw query q (names and values
 * percent-decoded) and writes its value into buf. False when absent. */
bool
mock__query_value(const char *q, const char *name, char *buf, size_t len)
{
    char key[256];

    while (*q != '\0') {
        size_t n = strcspn(q, "&"), k = strcspn(q, "=&");
        decode(q, k, key, sizeof(key));
        if (strcmp(key, name) == 0) {
            if (q[k] == '=')
                decode(q + k + 1, n - k - 1, buf, len);
            else
                buf[0] = '\0';
            return true;
        }
        q += n + (q[n] == '&');
    }
    return false;
}

/* unmet checks the route's required headers, then its required query
 * parameters; it returns 0 when all are there, else 401 or 404 with why
 * (naming the header or parameter, never its value). */
static int
unmet(const struct mock_route *r, const struct mock_request *rq, char *why,
      size_t len)
{
    char val[1024];

    for (size_t i = 0; i < r->nreq_headers; i++) {
        const struct mock_header *h = &r->req_headers[i];
        const cJSON *v = NULL;
        for (const cJSON *it = rq->headers ? rq->headers->child : NULL;
             it != NULL && v == NULL; it = it->next)
            if (strcasecmp(it->string, h->name) == 0)
                v = it;
        if (v == NULL) {
            snprintf(why, len,
                     "You didn't provide an API key. This route needs it in "
                     "the %s header.",
                     h->name);
            return 401;
        }
        if (!cJSON_IsString(v) || strcmp(v->valuestring, h->value) != 0) {
            snprintf(why, len, "Incorrect API key provided in header %s.",
                     h->name);
            return 401;
        }
    }
    for (size_t i = 0; i < r->nreq_query; i++) {
        const struct mock_header *q = &r->req_query[i];
        if (!mock__query_value(rq->query ? rq->query : "", q->name, val,
                               sizeof(val)) ||
            strcmp(val, q->value) != 0) {
            snprintf(why, len,
                     "Resource not found: the query parameter %s is "
                     "missing or not the one this route serves.",
                     q->name);
            return 404;
        }
    }
    return 0;
}

/* limit_admit asks the route's limiter; a request costs its prompt (body
 * bytes / 4) plus the max_tokens it asks for, as providers estimate it. */
static bool
limit_admit(struct mock_engine *e, struct mock_route *r, const cJSON *req,
            int64_t prompt, int64_t now, struct mock_limit_result *res)
{
    return mock_limit_admit(&r->limit, now, now + e->wall_offset,
                            prompt + mock__request_max_tokens(req), res);
}

/* The route's sequence: its next scripted answer, else the default one
 * (a chat completion, or the generic endpoint's answer, an idempotency
 * key's first answer replayed as Stripe does). Returns whether it was
 * such a replay. */
static bool
sequence(struct mock_engine *e, struct mock_route *r,
         const struct mock_request *rq, int64_t prompt, struct mock_reply *out,
         struct build *b, int64_t *tokens)
{
    const struct mock_answer *a;
    bool chat = mock__is_chat(r, rq), replayed = false;

    a = next_answer(r);
    b->answer = a;
    if (a != NULL) {
        e->stats->scripted++;
        out->kind = chat ? "chat_scripted" : "generic_scripted";
        if (a->status != 0)
            b->status = a->status;
        if (a->delay_ms > 0)
            out->delay_ms += a->delay_ms;
        out->fault = a->fault;
    }
    if (a != NULL && a->body != NULL) {
        b->body = xstrdup(a->body);
    } else if (b->status < 200 || b->status > 299) {
        b->body = mock__api_error(r->api, b->status, NULL, NULL, NULL);
    } else if (chat) {
        b->body = mock__chat_body(e, r, a, out->request_json, prompt, tokens);
    } else if (rq->idempotency_key != NULL && a == NULL &&
               idem_find(e, rq->idempotency_key) != NULL) {
        /* Replay the first answer for this key, as Stripe does. */
        b->body = xstrdup(idem_find(e, rq->idempotency_key)->body);
        replayed = true;
        e->stats->replays++;
    } else {
        b->body = mock__generic_body(e, rq, a ? a->oversize : 0);
        if (rq->idempotency_key != NULL && a == NULL) {
            struct mock_idem *i = xcalloc(1, sizeof(*i));
            i->key = xstrdup(rq->idempotency_key);
            i->body = xstrdup(b->body);
            i->next = e->idem;
            e->idem = i;
        }
    }
    return replayed;
}

/* A chat answer asked for as a stream: its events (stream.c). A body
 * that is not JSON (already events, say) is sent as scripted. */
static void
stream(const struct mock_route *r, struct mock_reply *out, struct build *b)
{
    char *sse = mock__sse(r->api, b->body, out->request_json);

    if (sse == NULL)
        return;
    free(b->body);
    b->body = sse;
    b->ctype = "text/event-stream";
    out->kind = "chat_stream";
}

/* What the engine's statistics count of a reply, and the route's token
 * allowance the answer used. */
static void
count_reply(struct mock_engine *e, struct mock_route *r,
            const struct mock_reply *out, int status, int64_t tokens)
{
    if (out->fault == MOCK_FAULT_HANG || out->fault == MOCK_FAULT_CLOSE ||
        out->fault == MOCK_FAULT_CLOSE_MID_BODY ||
        out->fault == MOCK_FAULT_DRIP || out->fault == MOCK_FAULT_BAD_CHUNKED ||
        out->fault == MOCK_FAULT_HUGE_HEADERS ||
        out->fault == MOCK_FAULT_BAD_STATUS || out->fault == MOCK_FAULT_STALL)
        e->stats->faults++;
    if (out->fault != MOCK_FAULT_HANG && out->fault != MOCK_FAULT_CLOSE &&
        out->fault != MOCK_FAULT_BAD_STATUS && status >= 200 && status <= 299) {
        e->stats->ok++;
        if (tokens > 0) {
            r->tokens_used += tokens;
            e->stats->tokens += (uint64_t)tokens;
        }
    }
}

/* A gateway checks the key and the path before any limit, then a chat
 * request's shape: true with b and out->kind set when it refuses. */
static bool
gateway_refuses(struct mock_route *r, const struct mock_request *rq, bool chat,
                struct mock_reply *out, struct build *b)
{
    const struct mock_answer *a = r->unauthorized;
    const char *code = NULL;
    char msg[400];
    int refused = unmet(r, rq, msg, sizeof(msg));

    if (refused == 401) {
        b->answer = a;
        b->status = a != NULL ? a->status : 401;
        b->body =
            a != NULL && a->body != NULL
                ? xstrdup(a->body)
                : mock__api_error(r->api, 401, msg, "invalid_request_error",
                                  "invalid_api_key");
        out->kind = "unauthorized";
    } else if (refused == 404) {
        b->status = 404;
        b->body = mock__api_error(r->api, 404, msg, "invalid_request_error",
                                  "not_found");
        out->kind = "not_found";
    } else if (chat && !mock__api_request_ok(r->api, out->request_json, msg,
                                             sizeof(msg), &code)) {
        b->status = 400;
        b->body =
            mock__api_error(r->api, 400, msg, "invalid_request_error", code);
        out->kind = "invalid_request";
    } else {
        return false;
    }
    return true;
}

void
mock_engine_answer(struct mock_engine *e, const struct mock_request *rq,
                   int64_t now, bool keep_alive, struct mock_reply *out)
{
    struct mock_route *r = match(e->script, rq->path);
    struct build b = {.status = 200};
    bool chat = mock__is_chat(r, rq), replayed = false;
    int64_t prompt = (int64_t)rq->body_len / 4, tokens = 0;
    struct mock_limit_result lim = {.admitted = true};

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

    if (gateway_refuses(r, rq, chat, out, &b)) {
        /* answered: a key, a path or a request the gateway refuses */
    } else if (storm_active(r, now)) {
        b.status = r->storm_status;
        b.body = mock__api_error(r->api, b.status, NULL, NULL, NULL);
        out->kind = "storm";
        e->stats->storm++;
    } else if (!chat && mock__batch_answer(e, r, rq, now, out, &b.status,
                                           &b.body, &b.ctype)) {
        /* The batch APIs: past the gateway (key, path, storm), before the
         * limits and the sequence, which are the chat endpoint's. */
        out->kind = "batch";
        e->stats->batch++;
    } else if (r->limit.shape != MOCK_SHAPE_NONE &&
               !limit_admit(e, r, out->request_json, prompt, now, &lim)) {
        b.status = 429;
        b.body = mock__limit_body(e, r, &lim, out->request_json, now);
        out->kind = "rate_limit";
        e->stats->rate_limited++;
    } else if (chat && r->allowance_tokens > 0 &&
               r->tokens_used >= r->allowance_tokens) {
        b.status = r->api == MOCK_API_ANTHROPIC ? 400 : 429;
        b.body = mock__quota_body(r->api);
        out->kind = "quota";
        e->stats->quota++;
    } else if (chat && r->context_tokens > 0 && prompt > r->context_tokens) {
        b.status = 400;
        b.body = mock__context_body(r->api, prompt, r->context_tokens);
        out->kind = "context";
    } else {
        replayed = sequence(e, r, rq, prompt, out, &b, &tokens);
        if (chat && b.status >= 200 && b.status <= 299 &&
            mock__wants_stream(r, rq, out->request_json))
            stream(r, out, &b);
    }
    count_reply(e, r, out, b.status, tokens);
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
    b.body =
        mock__error_body(too_large ? "Request body too large for the mock."
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
    mock__bstore_free(e->batches);
    e->batches = NULL;
    mock_script_free(e->script);
    e->script = NULL;
}

void
mock_reply_cleanup(struct mock_reply *r)
{
    free(r->head);
    free(r->body);
    cJSON_Delete(r->request_json);
    cJSON_Delete(r->batch_log);
    r->head = r->body = NULL;
    r->request_json = r->batch_log = NULL;
}

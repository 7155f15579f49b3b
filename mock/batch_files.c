/* batch_files.c: OpenAI's Files API, as far as batches need it.
 *
 * POST /v1/files takes a multipart/form-data upload (purpose, file); a
 * batch's input must be a .jsonl file whose every line is a JSON object.
 * GET /v1/files/ID describes a file and GET /v1/files/ID/content serves it:
 * an upload as it came, or, once a batch has ended, its output file (one
 * line a succeeded item, the answer a chat completion with usage) or its
 * error file (errored, expired and cancelled items).
 */
#include "mock/batch_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/json.h"
#include "common/xalloc.h"

static void
fail(struct mock_bctx *x, int status, const char *msg, const char *code)
{
    mock__openai_fail(x, status, msg, code);
}

/* ---- files --------------------------------------------------------------- */

/* find returns the first needle[0..m) in hay[0..n), or NULL (memmem is
 * not POSIX). */
static const char *
find(const char *hay, size_t n, const char *needle, size_t m)
{
    for (size_t i = 0; m <= n && i <= n - m; i++) {
        if (memcmp(hay + i, needle, m) == 0)
            return hay + i;
    }
    return NULL;
}

/* disposition_param copies parameter name (name, filename) of a part's
 * headers h[0..n) into buf; false when it has none. */
static bool
disposition_param(const char *h, size_t n, const char *name, char *buf,
                  size_t len)
{
    char key[32];
    const char *p = h, *v, *q;
    size_t k = (size_t)snprintf(key, sizeof(key), "%s=\"", name);

    while ((v = find(p, n - (size_t)(p - h), key, k)) != NULL) {
        p = v + k;
        if (v > h && v[-1] != ' ' && v[-1] != ';')
            continue; /* "filename=" when looking for "name=" */
        q = memchr(p, '"', n - (size_t)(p - h));
        if (q == NULL || (size_t)(q - p) >= len)
            return false;
        memcpy(buf, p, (size_t)(q - p));
        buf[q - p] = '\0';
        return true;
    }
    return false;
}

struct upload {
    char purpose[64], filename[256];
    const char *data; /* borrowed from the request */
    size_t len;
    bool has_purpose, has_file;
};

/* parse_multipart reads the purpose and file parts of a form upload. */
static bool
parse_multipart(const struct mock_request *rq, struct upload *u)
{
    const cJSON *ct =
        cJSON_GetObjectItemCaseSensitive(rq->headers, "content-type");
    const char *b, *p = rq->body, *end = rq->body + rq->body_len;
    char delim[200];
    size_t dn;

    if (!cJSON_IsString(ct) ||
        strncasecmp(ct->valuestring, "multipart/form-data", 19) != 0 ||
        (b = strstr(ct->valuestring, "boundary=")) == NULL)
        return false;
    b += 9;
    dn =
        (size_t)snprintf(delim, sizeof(delim), "\r\n--%.*s",
                         (int)strcspn(b + (*b == '"'), "\";"), b + (*b == '"'));
    if (dn >= sizeof(delim) || dn <= 4)
        return false;
    /* The first delimiter may start the body (no CRLF before it). */
    if ((size_t)(end - p) >= dn - 2 && memcmp(p, delim + 2, dn - 2) == 0)
        p += dn - 2;
    else if ((p = find(p, (size_t)(end - p), delim, dn)) != NULL)
        p += dn;
    else
        return false;
    while (end - p >= 2 && memcmp(p, "--", 2) != 0) {
        const char *h = p + 2, *hend, *next;
        char name[64];
        if (memcmp(p, "\r\n", 2) != 0 ||
            (hend = find(h, (size_t)(end - h), "\r\n\r\n", 4)) == NULL ||
            (next = find(hend + 4, (size_t)(end - hend - 4), delim, dn)) ==
                NULL)
            return false;
        if (disposition_param(h, (size_t)(hend - h), "name", name,
                              sizeof(name))) {
            const char *v = hend + 4;
            size_t vn = (size_t)(next - v);
            if (strcmp(name, "purpose") == 0 && vn < sizeof(u->purpose)) {
                memcpy(u->purpose, v, vn);
                u->purpose[vn] = '\0';
                u->has_purpose = true;
            } else if (strcmp(name, "file") == 0) {
                if (!disposition_param(h, (size_t)(hend - h), "filename",
                                       u->filename, sizeof(u->filename)))
                    snprintf(u->filename, sizeof(u->filename), "upload");
                u->data = v;
                u->len = vn;
                u->has_file = true;
            }
        }
        p = next + dn;
    }
    return true;
}

/* jsonl_bad returns the 1-based line of data that is not a JSON object, or
 * 0 when every non-empty line is one. */
static int
jsonl_bad(const char *data, size_t len)
{
    const char *p = data, *end = data + len;
    int line = 0;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl ? nl : end) - p);
        cJSON *o;
        line++;
        if (n > 0 && p[n - 1] == '\r')
            n--;
        if (n > 0) {
            bool ok = cJSON_IsObject(o = json_parse_exact(p, n));
            cJSON_Delete(o);
            if (!ok)
                return line;
        }
        p = nl ? nl + 1 : end;
    }
    return 0;
}

/* file_json is OpenAI's file object. */
static cJSON *
file_json(const struct mock_bctx *x, const char *id, size_t bytes,
          int64_t created, const char *filename, const char *purpose)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", "file");
    cJSON_AddNumberToObject(o, "bytes", (double)bytes);
    cJSON_AddNumberToObject(o, "created_at",
                            (double)mock__batch_wall_s(x->e, created));
    cJSON_AddNullToObject(o, "expires_at");
    cJSON_AddStringToObject(o, "filename", filename);
    cJSON_AddStringToObject(o, "purpose", purpose);
    cJSON_AddStringToObject(o, "status", "processed");
    cJSON_AddNullToObject(o, "status_details");
    return o;
}

static void
upload(struct mock_bctx *x)
{
    struct mock_bstore *s = mock__bstore(x->e);
    struct upload u = {0};
    struct mock_bfile *f;
    char msg[300];
    int bad;

    mock__batch_log(x, "openai", "upload");
    if (!parse_multipart(x->rq, &u)) {
        fail(x, 400,
             "Invalid request: the body must be multipart/form-data "
             "with a boundary.",
             NULL);
        return;
    }
    if (!u.has_purpose || !u.has_file) {
        fail(x, 400,
             !u.has_file ? "Missing required parameter: 'file'."
                         : "Missing required parameter: 'purpose'.",
             "missing_required_parameter");
        return;
    }
    /* Files are kept and served as text: the replies are C strings. */
    if (memchr(u.data, '\0', u.len) != NULL ||
        !json_utf8_valid(u.data, u.len) ||
        !json_utf8_valid(u.purpose, strlen(u.purpose)) ||
        !json_utf8_valid(u.filename, strlen(u.filename))) {
        fail(x, 400, "The mock takes UTF-8 text files without NUL bytes.",
             "invalid_file_format");
        return;
    }
    if (strcmp(u.purpose, "batch") == 0) {
        size_t fl = strlen(u.filename);
        if (fl < 6 || strcmp(u.filename + fl - 6, ".jsonl") != 0) {
            fail(x, 400, "Invalid file format for Batch API. Must be .jsonl",
                 "invalid_file_format");
            return;
        }
        if ((bad = jsonl_bad(u.data, u.len)) > 0) {
            snprintf(msg, sizeof(msg),
                     "Invalid file format for Batch API: line %d is not a "
                     "JSON object.",
                     bad);
            fail(x, 400, msg, "invalid_file_format");
            return;
        }
    }
    if (s->nfiles >= MOCK_BSTORE_MAX_FILES ||
        s->bytes + u.len > MOCK_BSTORE_MAX_BYTES) {
        fail(x, 413, "The mock holds no more files (64 MiB, 256).",
             "file_too_large");
        return;
    }
    f = xcalloc(1, sizeof(*f));
    snprintf(f->id, sizeof(f->id), "file-mock%06" PRIu64, ++s->next_id);
    f->route = x->r;
    f->filename = xstrdup(u.filename);
    f->purpose = xstrdup(u.purpose);
    f->data = xmalloc(u.len + 1);
    memcpy(f->data, u.data, u.len);
    f->data[u.len] = '\0';
    f->len = u.len;
    f->created = x->now;
    f->next = s->files;
    s->files = f;
    s->nfiles++;
    s->bytes += u.len;
    cJSON_AddStringToObject(x->log, "id", f->id);
    cJSON_AddNumberToObject(x->log, "bytes", (double)u.len);
    mock__batch_reply(
        x, 200,
        file_json(x, f->id, f->len, f->created, f->filename, u.purpose));
}

struct mock_bfile *
mock__bfile_find(struct mock_bctx *x, const char *id)
{
    for (struct mock_bfile *f = mock__bstore(x->e)->files; f; f = f->next) {
        if (f->route == x->r && strcmp(f->id, id) == 0)
            return f;
    }
    return NULL;
}

/* output_line is one line of b's output or error file for item i. */
static cJSON *
output_line(struct mock_bctx *x, const struct mock_batch *b, size_t i,
            enum mock_bout out)
{
    cJSON *o = cJSON_CreateObject(), *resp, *err;
    char id[96];
    int status = b->route->batch.error_status;

    snprintf(id, sizeof(id), "batch_req_%s_%zu", b->id, i + 1);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "custom_id", b->items[i].custom_id);
    if (out == MOCK_BOUT_SUCCEEDED || out == MOCK_BOUT_ERRORED) {
        char *body = mock__status_error_body(status);
        resp = cJSON_CreateObject();
        cJSON_AddNumberToObject(resp, "status_code",
                                out == MOCK_BOUT_SUCCEEDED ? 200 : status);
        snprintf(id, sizeof(id), "req_%s_%zu", b->id, i + 1);
        cJSON_AddStringToObject(resp, "request_id", id);
        cJSON_AddItemToObject(resp, "body",
                              out == MOCK_BOUT_SUCCEEDED
                                  ? mock__batch_chat(x->e, b, i)
                                  : cJSON_Parse(body));
        free(body);
        cJSON_AddItemToObject(o, "response", resp);
        cJSON_AddNullToObject(o, "error");
        return o;
    }
    err = cJSON_CreateObject();
    cJSON_AddNullToObject(o, "response");
    if (out == MOCK_BOUT_EXPIRED) {
        cJSON_AddStringToObject(err, "code", "batch_expired");
        cJSON_AddStringToObject(err, "message",
                                "This request could not be executed before "
                                "the completion window expired.");
    } else {
        cJSON_AddStringToObject(err, "code", "batch_cancelled");
        cJSON_AddStringToObject(err, "message",
                                "This request was not executed because the "
                                "batch was cancelled.");
    }
    cJSON_AddItemToObject(o, "error", err);
    return o;
}

/* content builds an ended batch's output (errors false) or error file. */
static char *
content(struct mock_bctx *x, const struct mock_batch *b, bool errors,
        size_t *lines)
{
    struct mock_bstate st;
    struct xbuf out = {0};

    mock__batch_state(b, x->now, &st);
    *lines = 0;
    for (size_t i = 0; i < b->nitems; i++) {
        enum mock_bout o = mock__batch_item(b, &st, i, x->now);
        cJSON *line;
        char *s;
        if ((o == MOCK_BOUT_SUCCEEDED) == errors)
            continue;
        line = output_line(x, b, i, o);
        s = json_print(line);
        cJSON_Delete(line);
        xbuf_put(&out, s, strlen(s));
        xbuf_lit(&out, "\n");
        free(s);
        (*lines)++;
    }
    return out.p != NULL ? out.p : xstrdup("");
}

/* output_batch finds the ended batch whose output or error file id is. */
static struct mock_batch *
output_batch(struct mock_bctx *x, const char *id, bool *errors)
{
    char want[80];

    for (struct mock_batch *b = mock__bstore(x->e)->batches; b; b = b->next) {
        struct mock_bstate st;
        if (b->api != MOCK_BAPI_OPENAI || b->route != x->r)
            continue;
        for (int k = 0; k < 2; k++) {
            snprintf(want, sizeof(want), "file-%s-%s", b->id,
                     k ? "errors" : "output");
            if (strcmp(id, want) != 0)
                continue;
            mock__batch_state(b, x->now, &st);
            *errors = k == 1;
            if (st.phase == MOCK_BPHASE_ENDED &&
                (k ? mock__batch_failed(&st) : st.n[MOCK_BOUT_SUCCEEDED]) > 0)
                return b;
        }
    }
    return NULL;
}

static void
file_get(struct mock_bctx *x, bool want_content)
{
    struct mock_bfile *f = mock__bfile_find(x, x->id);
    struct mock_batch *b = NULL;
    struct mock_bstate st;
    bool errors = false;
    size_t lines = 0;
    char msg[300], *s, name[96];

    mock__batch_log(x, "openai", want_content ? "content" : "file");
    cJSON_AddStringToObject(x->log, "id", x->id);
    if (f == NULL && (b = output_batch(x, x->id, &errors)) == NULL) {
        snprintf(msg, sizeof(msg), "No such File object: %.200s", x->id);
        fail(x, 404, msg, NULL);
        return;
    }
    if (f != NULL && want_content) {
        x->status = 200;
        x->body = xstrdup(f->data);
        x->ctype = "application/octet-stream";
        return;
    }
    if (f != NULL) {
        mock__batch_reply(
            x, 200,
            file_json(x, f->id, f->len, f->created, f->filename, f->purpose));
        return;
    }
    s = content(x, b, errors, &lines);
    cJSON_AddNumberToObject(x->log, "items", (double)lines);
    if (want_content) {
        x->status = 200;
        x->body = s;
        x->ctype = "application/octet-stream";
        return;
    }
    snprintf(name, sizeof(name), "%s_%s.jsonl", b->id,
             errors ? "error" : "output");
    mock__batch_state(b, x->now, &st);
    mock__batch_reply(
        x, 200, file_json(x, x->id, strlen(s), st.end, name, "batch_output"));
    free(s);
}

void
mock__openai_files(struct mock_bctx *x)
{
    bool get = strcmp(x->rq->method, "GET") == 0;

    if (x->id == NULL && strcmp(x->rq->method, "POST") == 0)
        upload(x);
    else if (x->id != NULL && x->verb == NULL && get)
        file_get(x, false);
    else if (x->id != NULL && x->verb != NULL &&
             strcmp(x->verb, "content") == 0 && get)
        file_get(x, true);
    else {
        mock__batch_log(x, "openai", "unknown");
        mock__openai_invalid_url(x);
    }
}

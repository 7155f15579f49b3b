/* chat_text.c: the text of a chat answer, as a step's output: the
 * content string, or its parts of type "text" joined; text that is not
 * UTF-8 or that a NUL would cut is marked bad (never committed); and a
 * body kept as JSON text (bad bytes and NULs as '?'). Parsing only: no
 * I/O. */
#include "http/http.h"

#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

/* The text of a part of type "text", or NULL. Borrowed from part. */
static const char *
part_text(const cJSON *part)
{
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(part, "type");
    const cJSON *tx = cJSON_GetObjectItemCaseSensitive(part, "text");

    if (!cJSON_IsObject(part) || !cJSON_IsString(ty) ||
        strcmp(ty->valuestring, "text") != 0 || !cJSON_IsString(tx))
        return NULL;
    return tx->valuestring;
}

/* The text parts of content (an array) joined, or NULL when it has none.
 * Caller owns the result; free with free(). Its size is bounded by the
 * body's, which the HTTP client capped. */
static char *
join_parts(const cJSON *content)
{
    const cJSON *part;
    size_t n = 0, k = 0;
    bool any = false;
    char *out;

    cJSON_ArrayForEach(part, content)
    {
        const char *t = part_text(part);
        if (t != NULL) {
            n += strlen(t);
            any = true;
        }
    }
    if (!any)
        return NULL;
    out = xmalloc(n + 1);
    cJSON_ArrayForEach(part, content)
    {
        const char *t = part_text(part);
        if (t != NULL) {
            memcpy(out + k, t, strlen(t));
            k += strlen(t);
        }
    }
    out[k] = '\0';
    return out;
}

/* cJSON decodes an escaped NUL ("\u0000") into its C string, which ends
 * there: the text after it would be lost without a word. An answer whose
 * strings hold one (or a raw control character) anywhere is not taken as
 * text: a NUL elsewhere than in the content costs a schema_invalid, which
 * no provider has been seen to send. */
static bool
nul_cut(const char *body, size_t len)
{
    char err[128];

    return json_text_check(body, len, err, sizeof(err)) != 0;
}

/* Reads the text of a chat answer: ans (http_chat_read of root) and body,
 * the bytes root was parsed from. Text that is not UTF-8, or that a NUL
 * would cut, is marked bad: it must not become the step's output (nor
 * must the body, the output of an answer without text). Free t with
 * http_chat_text_cleanup. */
void
http_chat_text(const cJSON *root, const struct http_chat_answer *ans,
               const char *body, size_t len, struct http_chat_text *t)
{
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(choices, 0), "message");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");

    memset(t, 0, sizeof(*t));
    if (cJSON_IsArray(content)) {
        t->parts = true;
        t->joined = join_parts(content);
        t->text = t->joined;
    } else {
        t->text = ans->content;
    }
    if (t->text != NULL)
        t->bad =
            !json_utf8_valid(t->text, strlen(t->text)) || nul_cut(body, len);
    else /* the output is the body (a tool call) */
        t->bad = !json_utf8_valid(body, len);
}

/* body as text a JSON view and a C string can hold: NULL when it is
 * (UTF-8 without NUL), else an owned copy with bad bytes and NULs as '?'.
 * Free with free(). */
char *
http_as_text(const char *body, size_t len)
{
    char *t;

    if (body == NULL ||
        (json_utf8_valid(body, len) && memchr(body, '\0', len) == NULL))
        return NULL;
    t = xmalloc(len + 1);
    memcpy(t, body, len);
    t[len] = '\0';
    json_utf8_scrub(t, len);
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '\0')
            t[i] = '?';
    }
    return t;
}

void
http_chat_text_cleanup(struct http_chat_text *t)
{
    free(t->joined);
    memset(t, 0, sizeof(*t));
}

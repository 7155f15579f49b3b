/* step.c: preparing a step's request: templates, degrade, hashes, and
 * checking its output. Pure helpers of send.c and answer.c. */
#include "worker/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/xalloc.h"

static const char open_tag[] = "{{steps.";
static const char close_tag[] = ".output}}";

/* is_unreserved: a byte a URL carries as itself (RFC 3986, 2.3). */
static bool
is_unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
           c == '~';
}

/* put_value appends value to out[len..], percent-encoding every byte but
 * the unreserved ones when encode is set; returns the new length. */
static size_t
put_value(char **out, size_t *cap, size_t len, const char *value, bool encode)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t vlen = strlen(value), need = len + (encode ? 3 * vlen : vlen) + 1;

    if (need > *cap) {
        *cap = need * 2;
        *out = xrealloc(*out, *cap);
    }
    for (size_t i = 0; i < vlen; i++) {
        unsigned char c = (unsigned char)value[i];
        if (!encode || is_unreserved(c)) {
            (*out)[len++] = (char)c;
            continue;
        }
        (*out)[len++] = '%';
        (*out)[len++] = hex[c >> 4];
        (*out)[len++] = hex[c & 15];
    }
    return len;
}

/* Replaces the templates in s; returns a new string (caller frees). With
 * encode, each output is percent-encoded: it lands in a URL as one path
 * segment's or query value's text, never as its structure. */
static char *
expand_string(const char *s, const char *const *names,
              const char *const *outputs, size_t n, bool encode)
{
    size_t cap = strlen(s) + 1, len = 0;
    char *out = xmalloc(cap);
    const char *p = s;

    for (;;) {
        const char *tag = strstr(p, open_tag);
        const char *name, *end, *value = "";
        size_t piece;

        piece = tag ? (size_t)(tag - p) : strlen(p);
        if (len + piece + 1 > cap) {
            cap = (len + piece + 1) * 2;
            out = xrealloc(out, cap);
        }
        memcpy(out + len, p, piece);
        len += piece;
        if (tag == NULL)
            break;
        name = tag + sizeof(open_tag) - 1;
        end = strstr(name, close_tag);
        if (end == NULL) { /* validation refuses this; keep it literal */
            if (len + 2 + 1 > cap) {
                cap = (len + 3) * 2;
                out = xrealloc(out, cap);
            }
            memcpy(out + len, "{{", 2);
            len += 2;
            p = tag + 2;
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            if (strlen(names[i]) == (size_t)(end - name) &&
                strncmp(names[i], name, (size_t)(end - name)) == 0) {
                value = outputs[i] ? outputs[i] : "";
                break;
            }
        }
        len = put_value(&out, &cap, len, value, encode);
        p = end + sizeof(close_tag) - 1;
    }
    out[len] = '\0';
    return out;
}

/* Expands every string under node, in place. Recursion depth is bounded
 * by cJSON's nesting limit (1000) on anything parsed from JSON. */
static void
expand_node(cJSON *node, const char *const *names, const char *const *outputs,
            size_t n)
{
    if (cJSON_IsString(node) && node->valuestring != NULL &&
        strstr(node->valuestring, open_tag) != NULL) {
        char *v = expand_string(node->valuestring, names, outputs, n, false);
        cJSON_free(node->valuestring);
        node->valuestring = v;
        return;
    }
    for (cJSON *c = node->child; c != NULL; c = c->next)
        expand_node(c, names, outputs, n);
}

/* Copies item whole; out of memory aborts (CONVENTIONS 4). */
static cJSON *
copy_of(const cJSON *item)
{
    cJSON *copy = cJSON_Duplicate(item, true);

    if (copy == NULL) {
        fprintf(stderr, "stepq: out of memory copying a request\n");
        abort();
    }
    return copy;
}

cJSON *
worker__expand(const cJSON *item, const char *const *names,
               const char *const *outputs, size_t n)
{
    cJSON *copy = copy_of(item);

    expand_node(copy, names, outputs, n);
    return copy;
}

cJSON *
worker__expand_http(const cJSON *http, const char *const *names,
                    const char *const *outputs, size_t n)
{
    cJSON *copy = copy_of(http), *url;

    /* The url first, its outputs percent-encoded; what they bring in then
     * holds no template for the pass over the rest. */
    url = cJSON_GetObjectItemCaseSensitive(copy, "url");
    if (cJSON_IsString(url) && strstr(url->valuestring, open_tag) != NULL) {
        char *v = expand_string(url->valuestring, names, outputs, n, true);
        cJSON_free(url->valuestring);
        url->valuestring = v;
    }
    expand_node(copy, names, outputs, n);
    return copy;
}

/* is_role: whether message m has role role. */
static bool
is_role(const cJSON *m, const char *role)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");

    return cJSON_IsString(r) && strcmp(r->valuestring, role) == 0;
}

void
worker__degrade(cJSON *request, const cJSON *degrade)
{
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(degrade, "max_tokens");
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(degrade, "drop_tools");
    const cJSON *keep =
        cJSON_GetObjectItemCaseSensitive(degrade, "keep_last_messages");
    cJSON *msgs = cJSON_GetObjectItemCaseSensitive(request, "messages");

    if (cJSON_IsNumber(mt)) {
        static const char *const fields[] = {"max_tokens",
                                             "max_completion_tokens"};
        bool set = false;
        for (size_t i = 0; i < 2; i++) {
            cJSON *f = cJSON_GetObjectItemCaseSensitive(request, fields[i]);
            if (f == NULL)
                continue;
            set = true;
            /* Degrading lowers a limit; it never raises one. */
            if (!cJSON_IsNumber(f) || f->valuedouble > mt->valuedouble)
                cJSON_ReplaceItemInObjectCaseSensitive(
                    request, fields[i], cJSON_CreateNumber(mt->valuedouble));
        }
        if (!set)
            cJSON_AddNumberToObject(request, "max_tokens", mt->valuedouble);
    }
    if (cJSON_IsTrue(drop)) {
        cJSON_DeleteItemFromObjectCaseSensitive(request, "tools");
        cJSON_DeleteItemFromObjectCaseSensitive(request, "tool_choice");
        cJSON_DeleteItemFromObjectCaseSensitive(request, "functions");
        cJSON_DeleteItemFromObjectCaseSensitive(request, "function_call");
        /* Refused without tools by OpenAI-compatible servers. */
        cJSON_DeleteItemFromObjectCaseSensitive(request, "parallel_tool_calls");
    }
    if (cJSON_IsNumber(keep) && cJSON_IsArray(msgs)) {
        int total = cJSON_GetArraySize(msgs), lead = 0, start;
        /* Leading system messages carry the instructions: keep them. */
        while (lead < total &&
               is_role(cJSON_GetArrayItem(msgs, lead), "system"))
            lead++;
        start = total - (int)keep->valuedouble;
        /* A tool result stays with the assistant message that called for
         * it: a "tool" message without its tool_calls is refused. */
        while (start > lead && is_role(cJSON_GetArrayItem(msgs, start), "tool"))
            start--;
        for (int i = lead; i < start; i++)
            cJSON_DeleteItemFromArray(msgs, lead);
    }
}

void
worker__sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    static const char hex[] = "0123456789abcdef";

    if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1 || n != 32) {
        fprintf(stderr, "stepq: SHA-256 failed\n");
        abort();
    }
    for (unsigned i = 0; i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = '\0';
}

bool
worker__has_keys(const char *text, size_t len, const cJSON *keys)
{
    cJSON *o;
    const cJSON *k;
    bool ok;

    if (text == NULL)
        return false;
    /* Models often wrap JSON in a Markdown fence; look inside it. */
    while (len > 0 && strchr(" \t\r\n", *text) && *text) {
        text++;
        len--;
    }
    if (len >= 3 && strncmp(text, "```", 3) == 0) {
        const char *nl = memchr(text, '\n', len);
        const char *close = NULL;
        if (nl != NULL) {
            for (const char *p = text + len - 3; p > nl; p--) {
                if (strncmp(p, "```", 3) == 0) {
                    close = p;
                    break;
                }
            }
        }
        if (close != NULL) {
            len = (size_t)(close - (nl + 1));
            text = nl + 1;
        }
    }
    o = cJSON_ParseWithLength(text, len);
    ok = cJSON_IsObject(o);
    cJSON_ArrayForEach(k, keys)
    {
        if (ok && cJSON_IsString(k) &&
            cJSON_GetObjectItemCaseSensitive(o, k->valuestring) == NULL)
            ok = false;
    }
    cJSON_Delete(o);
    return ok;
}

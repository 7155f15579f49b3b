/* fuzz_expand.c: libFuzzer target for the template expander
 * (worker__expand) over arbitrary JSON.
 *
 * The result is compared, node by node, with a small reference expander
 * written from worker/internal.h's contract: in every string value, each
 * "{{steps.NAME.output}}" (NAME running to the first ".output}}") becomes
 * the output of NAME ("" when unknown or NULL), and an opening "{{steps."
 * with no close stays literal. The input must also be left unchanged. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "worker/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {"a", "summarize_prs", "s-1", ""};
static const char *const outputs[] = {"OUT-A", "a summary", NULL, "E"};
#define N (sizeof(names) / sizeof(names[0]))

/* The reference expander: a new string (caller frees), or NULL on OOM. */
static char *
reference(const char *s)
{
    static const char open[] = "{{steps.", close[] = ".output}}";
    size_t cap = strlen(s) * 2 + 64, len = 0;
    char *out = malloc(cap);

    while (out != NULL && *s != '\0') {
        const char *name = s + sizeof(open) - 1, *end, *v = "";
        if (strncmp(s, open, sizeof(open) - 1) != 0 ||
            (end = strstr(name, close)) == NULL) {
            out[len++] = *s++;
            continue;
        }
        for (size_t i = 0; i < N; i++) {
            if (strlen(names[i]) == (size_t)(end - name) &&
                strncmp(names[i], name, (size_t)(end - name)) == 0)
                v = outputs[i] ? outputs[i] : "";
        }
        if (len + strlen(v) + 1 > cap) {
            char *bigger = realloc(out, cap = (len + strlen(v) + 1) * 2);
            if (bigger == NULL) {
                free(out);
                return NULL;
            }
            out = bigger;
        }
        memcpy(out + len, v, strlen(v));
        len += strlen(v);
        s = end + sizeof(close) - 1;
    }
    if (out != NULL)
        out[len] = '\0';
    return out;
}

/* Whether got is want with every string value expanded by reference(). */
static bool
same(const cJSON *want, const cJSON *got)
{
    const cJSON *a, *b;

    if ((want->type & 0xff) != (got->type & 0xff))
        return false;
    if (cJSON_IsString(want)) {
        char *r = reference(want->valuestring);
        bool eq = r == NULL || strcmp(r, got->valuestring) == 0;
        free(r);
        return eq;
    }
    for (a = want->child, b = got->child; a != NULL && b != NULL;
         a = a->next, b = b->next) {
        if (!same(a, b))
            return false;
    }
    return a == NULL && b == NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *in, *out;
    char *before, *after;

    in = cJSON_ParseWithLength((const char *)data, size);
    if (in == NULL)
        return 0;
    before = cJSON_PrintUnformatted(in);
    out = worker__expand(in, names, outputs, N);
    if (out == NULL)
        abort();
    if (!same(in, out))
        abort(); /* differs from the reference expansion */
    after = cJSON_PrintUnformatted(in);
    if (before != NULL && after != NULL && strcmp(before, after) != 0)
        abort(); /* the input was modified */
    cJSON_free(before);
    cJSON_free(after);
    cJSON_Delete(out);
    cJSON_Delete(in);
    return 0;
}

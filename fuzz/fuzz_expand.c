/* fuzz_expand.c: libFuzzer target for templates and conditions (spec/
 * path.c, when.c) over arbitrary JSON.
 *
 * The input, parsed as JSON, becomes a field of a two-step job's second
 * request and, when it is an object, that step's "when"; the job is
 * validated (spec_from_json) with an input. A job that validates must
 * fill (spec_step_fill) without a validation error (-EINVAL: a template
 * validation let through that filling refuses; a value absent, -ENOENT,
 * is a run-time failure and allowed), and its condition evaluates
 * without failing. The input tree is left unchanged. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "spec/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char job_text[] =
    "{\"name\":\"f\",\"input\":{\"a\":[1,\"x\",{\"k\":\"v\"}],\"s\":\"t\"},"
    "\"steps\":[{\"name\":\"a\",\"request\":{\"messages\":[{\"role\":"
    "\"user\",\"content\":\"x\"}]}},{\"name\":\"b\",\"request\":{"
    "\"messages\":[{\"role\":\"user\",\"content\":\"c\"}]}}]}";

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const outputs[] = {"{\"k\":[1,2],\"s\":\"o\"}", NULL};
    static const bool skipped[] = {false, false};
    cJSON *in = cJSON_ParseWithLength((const char *)data, size), *job, *b;
    cJSON *out = NULL;
    struct spec_job *j = NULL;
    char err[1024], *before, *after;
    bool holds;
    int rc;

    if (in == NULL)
        return 0;
    before = cJSON_PrintUnformatted(in);
    job = cJSON_Parse(job_text);
    b = cJSON_GetArrayItem(cJSON_GetObjectItem(job, "steps"), 1);
    cJSON_AddItemToObject(cJSON_GetObjectItem(b, "request"), "v",
                          cJSON_Duplicate(in, true));
    if (cJSON_IsObject(in))
        cJSON_AddItemToObject(b, "when", cJSON_Duplicate(in, true));
    if (spec_from_json(job, NULL, &j, err, sizeof(err)) == 0) {
        struct spec_vars v;
        spec_vars_init(&v); /* the outputs parsed once, as the worker does */
        v.input = j->input;
        v.outputs = outputs;
        v.skipped = skipped;
        rc = spec_step_fill(j, 1, &v, &out, err, sizeof(err));
        if (rc == -EINVAL)
            abort(); /* validated, yet refused when filled */
        if (rc == 0)
            cJSON_Delete(out);
        spec_when_holds(j, 1, &v, &holds, err, sizeof(err));
        spec_vars_cleanup(&v);
        spec_job_free(j);
    }
    after = cJSON_PrintUnformatted(in);
    if (before != NULL && after != NULL && strcmp(before, after) != 0)
        abort(); /* the input was modified */
    cJSON_free(before);
    cJSON_free(after);
    cJSON_Delete(in);
    return 0;
}

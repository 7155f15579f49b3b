/* fuzz_jobspec.c: libFuzzer target for the job-file parser and validator
 * (spec_parse_many, and spec_parse for the one-job path).
 *
 * The input is passed as is, with its exact length and no terminating NUL,
 * so a read past len is an AddressSanitizer report. The first byte chooses
 * whether tier names are checked, so both validation paths run. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "queue/queue.h"
#include "spec/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const tiers[] = {"free", "local"};
    struct spec_opts opts = {tiers, 2};
    const struct spec_opts *o = NULL;
    struct spec_job **specs = NULL;
    struct spec_job *one = NULL;
    char err[256];
    size_t n = 0;
    char *copy;

    if (size > 0 && (data[0] & 1) == 1)
        o = &opts;
    /* An exact-size heap copy: reads past size land in a redzone. */
    copy = malloc(size > 0 ? size : 1);
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);

    err[0] = '\0';
    if (spec_parse_many(copy, size, o, &specs, &n, err, sizeof(err)) == 0) {
        if (n == 0)
            abort();
        for (size_t i = 0; i < n; i++) {
            if (specs[i] == NULL || specs[i]->name == NULL ||
                specs[i]->nsteps == 0 || specs[i]->text == NULL)
                abort();
        }
        spec_jobs_free(specs, n);
    } else if (err[0] == '\0') {
        abort(); /* a refusal must say why */
    }

    if (spec_parse(copy, size, o, &one, err, sizeof(err)) == 0)
        spec_job_free(one);
    free(copy);
    return 0;
}

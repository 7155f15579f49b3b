/* fuzz_jobspec.c: libFuzzer target for the job-file parser and validator
 * (spec_parse_many, and spec_parse for the one-job path), and for the
 * stream under them: the input fed to a spec_stream in pieces (of a size
 * the second byte chooses) must give what spec_parse_many gives, the same
 * answer and the same number of jobs, wherever the pieces cut it.
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

static int
count_batch(void *ctx, struct spec_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        if (b->rows[i].text != b->jobs[i]->text)
            abort();
    }
    *(size_t *)ctx += b->n;
    return 0;
}

/* Feeds copy to a stream in pieces of piece bytes; the jobs it handed on
 * in *n. */
static int
stream_in_pieces(const char *copy, size_t size, size_t piece,
                 const struct spec_opts *o, size_t *n)
{
    spec_stream *s = spec_stream_new(o, 3, count_batch, n);
    char err[256];
    int rc = 0;

    for (size_t at = 0; rc == 0 && at < size; at += piece)
        rc = spec_stream_feed(s, copy + at,
                              size - at < piece ? size - at : piece, err,
                              sizeof(err));
    if (rc == 0)
        rc = spec_stream_end(s, err, sizeof(err));
    spec_stream_free(s);
    return rc;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const tiers[] = {"free", "local"};
    struct spec_opts opts = {.tiers = tiers, .ntiers = 2};
    const struct spec_opts *o = NULL;
    struct spec_job **specs = NULL;
    struct spec_job *one = NULL;
    char err[256];
    size_t n = 0, streamed = 0;
    char *copy;
    int rc;

    if (size > 0 && (data[0] & 1) == 1)
        o = &opts;
    /* An exact-size heap copy: reads past size land in a redzone. */
    copy = malloc(size > 0 ? size : 1);
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);

    err[0] = '\0';
    rc = spec_parse_many(copy, size, o, &specs, &n, err, sizeof(err));
    if (stream_in_pieces(copy, size, size > 1 ? data[1] % 64 + 1 : 1, o,
                         &streamed) != rc ||
        (rc == 0 && streamed != n))
        abort(); /* the pieces changed the answer */
    if (rc == 0) {
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

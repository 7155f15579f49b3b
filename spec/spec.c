/* spec.c: job files as bytes: one job, a JSON array of jobs, or JSON lines,
 * each validated by spec__validate (validate.c) before any is returned;
 * and the rows handed to the queue.
 */
#include "spec/spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"
#include "spec/internal.h"

void
spec_job_free(struct spec_job *spec)
{
    if (spec == NULL)
        return;
    cJSON_Delete(spec->root);
    cJSON_Delete(spec->input_own);
    free(spec->input_text);
    free(spec->text);
    free(spec->steps);
    free(spec);
}

void
spec_jobs_free(struct spec_job **specs, size_t n)
{
    for (size_t i = 0; specs != NULL && i < n; i++)
        spec_job_free(specs[i]);
    free(specs);
}

/* Validates job (owned from here on); text is its JSON text (owned from
 * here on), or NULL to print it. */
static int
from_json(cJSON *job, char *text, const struct spec_opts *opts,
          struct spec_job **out, char *err, size_t errlen)
{
    struct spec_job *j = xcalloc(1, sizeof(*j));
    int rc;

    j->root = job;
    j->text = text;
    j->deadline_s = Q_DEADLINE_S_DEFAULT;
    rc = spec__validate(j, opts, err, errlen);
    if (rc != 0) {
        spec_job_free(j);
        return rc;
    }
    if (j->text == NULL)
        j->text = json_print(job);
    *out = j;
    return 0;
}

int
spec_from_json(cJSON *job, const struct spec_opts *opts, struct spec_job **out,
               char *err, size_t errlen)
{
    return from_json(job, NULL, opts, out, err, errlen);
}

/* utf8_valid is json_utf8_valid with a fast path for ASCII, which job
 * files mostly are: eight bytes at a time up to the first byte with its
 * high bit set (a character boundary, since all before it are ASCII),
 * then byte by byte. The byte-wise check was 7% of validating a job. */
static bool
utf8_valid(const char *text, size_t len)
{
    size_t i = 0;

    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, text + i, 8);
        if ((w & UINT64_C(0x8080808080808080)) != 0)
            break;
    }
    while (i < len && (unsigned char)text[i] < 0x80)
        i++;
    return i == len || json_utf8_valid(text + i, len - i);
}

/* Parses text that is already known to be UTF-8 and within limits. */
static int
parse_text(const char *text, size_t len, cJSON **out, char *err, size_t errlen)
{
    return json_parse_whole(text, len, "", out, err, errlen);
}

int
spec_parse(const char *text, size_t len, const struct spec_opts *opts,
           struct spec_job **out, char *err, size_t errlen)
{
    cJSON *root = NULL;
    int rc;

    if (len > SPEC_JOB_MAX_BYTES)
        return json_fail(err, errlen, "",
                         "job is %zu bytes, larger than the limit of %d", len,
                         SPEC_JOB_MAX_BYTES);
    if (!utf8_valid(text, len))
        return json_fail(err, errlen, "", "not valid UTF-8");
    if ((rc = parse_text(text, len, &root, err, errlen)) != 0)
        return rc;
    return from_json(root, xstrndup(text, len), opts, out, err, errlen);
}

/* spec_parse_many's batches: every job is kept. */
struct collect {
    struct spec_job **v;
    size_t n, cap;
};

static int
collect(void *ctx, struct spec_batch *b)
{
    struct collect *c = ctx;

    if (c->n + b->n > c->cap) {
        c->cap = (c->n + b->n) * 2;
        c->v = xrealloc(c->v, c->cap * sizeof(*c->v));
    }
    for (size_t i = 0; i < b->n; i++) {
        c->v[c->n++] = b->jobs[i];
        b->jobs[i] = NULL;
    }
    return 0;
}

int
spec_parse_many(const char *text, size_t len, const struct spec_opts *opts,
                struct spec_job ***out, size_t *n, char *err, size_t errlen)
{
    struct collect c = {NULL, 0, 0};
    spec_stream *s = spec_stream_new(opts, 64, collect, &c);
    int rc = spec_stream_feed(s, text, len, err, errlen);

    if (rc == 0)
        rc = spec_stream_end(s, err, errlen);
    spec_stream_free(s);
    if (rc != 0) {
        spec_jobs_free(c.v, c.n);
        return rc;
    }
    *out = c.v;
    *n = c.n;
    return 0;
}

void
spec_job_row(const struct spec_job *j, struct q_job_new *row)
{
    row->name = j->name;
    row->key = j->key;
    row->priority = j->priority;
    row->run_at = j->run_at;
    row->deadline_s = j->deadline_s;
    row->text = j->text;
    row->input = j->input_text;
}

int
spec_input_parse(const char *text, size_t len, cJSON **out, char *err,
                 size_t errlen)
{
    cJSON *v = NULL;
    char *compact;
    size_t n;
    int rc;

    if (!utf8_valid(text, len))
        return json_fail(err, errlen, "input", "not valid UTF-8");
    if ((rc = json_text_check(text, len, err, errlen)) != 0 ||
        (rc = json_parse_whole(text, len, "input is ", &v, err, errlen)) != 0)
        return rc;
    compact = json_print(v);
    n = strlen(compact);
    free(compact);
    if (n > SPEC_INPUT_MAX_BYTES) {
        cJSON_Delete(v);
        return json_fail(err, errlen, "input",
                         "%zu bytes as compact JSON, larger than the limit "
                         "of %d",
                         n, SPEC_INPUT_MAX_BYTES);
    }
    *out = v;
    return 0;
}

struct q_job_new *
spec_job_rows(struct spec_job *const *jobs, size_t n)
{
    struct q_job_new *rows = xcalloc(n ? n : 1, sizeof(*rows));

    for (size_t i = 0; i < n; i++)
        spec_job_row(jobs[i], &rows[i]);
    return rows;
}

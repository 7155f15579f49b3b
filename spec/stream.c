/* stream.c: bulk input read as it comes (one job, a JSON array of jobs, or
 * jobs one after another: JSON lines or pretty-printed objects), each job
 * validated as soon as its last byte is in and handed on in batches, so that
 * memory holds one job's bytes and one batch, not the input. The framing is
 * found by a scan that knows only strings and nesting; each job's own bytes are
 * then parsed by cJSON (spec_parse), which judges them.
 */
#include "spec/spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/xalloc.h"

/* The most bytes copied in at once: a long input fed whole is taken in
 * pieces, so the copy holds a job and a piece, not the input. */
#define STREAM_PIECE 65536
/* A batch is handed on at its count or once its jobs' text reaches this
 * (parsed, a job takes a few times its text): big jobs in small batches. */
#define BATCH_BYTES (2 * 1024 * 1024)

enum mode {
    M_START,      /* before the first byte that is not white space */
    M_FIRST,      /* in the first value of an input that is no array */
    M_FIRST_TAIL, /* after it: one job, or the first of JSON lines */
    M_LINES,      /* values one after another, each on a line of its own */
    M_ELEM,       /* in an array, where an element starts or ']' */
    M_ELEM_VALUE, /* in an array element */
    M_ELEM_AFTER, /* after an element: ',' or ']' */
    M_TAIL        /* after the array: white space only */
};

/* Where the end of one JSON value is: the scan resumes where the bytes
 * ran out. */
struct scan {
    size_t at;  /* next byte to look at, from the value's start */
    int depth;  /* open objects and arrays */
    bool str;   /* inside a string */
    bool esc;   /* after a backslash inside a string */
    bool begun; /* the value has a byte */
};

struct spec_stream {
    struct spec_opts opts;
    spec_batch_fn fn;
    void *ctx;
    size_t batch;
    enum mode mode;
    char *buf; /* owned: bytes not yet consumed are buf[off..len) */
    size_t off, len, cap;
    size_t pos;        /* bytes of the input before buf[0] */
    size_t line;       /* JSON lines: the line at buf[off] (1-based) */
    size_t first_line; /* the line the first value starts on */
    size_t value_line; /* M_LINES: the line the value in hand starts on */
    bool in_value;     /* M_LINES: a value's scan is under way */
    struct scan sc;
    bool elem_seen;         /* the array had an element before this one */
    bool tail_nl;           /* M_FIRST_TAIL: a newline came after the value */
    struct spec_job *first; /* the first value, validated, mode unknown */
    int first_rc;           /* its validation, deferred until the mode */
    char first_err[1024];   /* is known (for lines it gets "line N: ") */
    size_t njobs;           /* handed on so far */
    size_t batch_bytes;     /* text of the jobs in the batch */
    bool array;
    struct spec_batch b;
};

struct spec_stream *
spec_stream_new(const struct spec_opts *opts, size_t batch, spec_batch_fn fn,
                void *ctx)
{
    struct spec_stream *s = xcalloc(1, sizeof(*s));

    if (opts != NULL)
        s->opts = *opts;
    s->fn = fn;
    s->ctx = ctx;
    s->batch = batch > 0 ? batch : 1;
    s->line = 1;
    s->b.jobs = xcalloc(s->batch, sizeof(*s->b.jobs));
    s->b.rows = xcalloc(s->batch, sizeof(*s->b.rows));
    return s;
}

void
spec_stream_free(struct spec_stream *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->b.n; i++)
        spec_job_free(s->b.jobs[i]);
    spec_job_free(s->first);
    free(s->b.jobs);
    free(s->b.rows);
    free(s->buf);
    free(s);
}

size_t
spec_stream_count(const struct spec_stream *s)
{
    return s->njobs + s->b.n + (s->first != NULL);
}

bool
spec_stream_is_array(const struct spec_stream *s)
{
    return s->array;
}

/* Hands the batch on; the jobs the callback left are freed. */
static int
flush(struct spec_stream *s)
{
    int rc = 0;

    if (s->b.n == 0)
        return 0;
    for (size_t i = 0; i < s->b.n; i++)
        spec_job_row(s->b.jobs[i], &s->b.rows[i]);
    s->b.first = s->njobs;
    rc = s->fn(s->ctx, &s->b);
    for (size_t i = 0; i < s->b.n; i++) {
        spec_job_free(s->b.jobs[i]);
        s->b.jobs[i] = NULL;
    }
    s->njobs += s->b.n;
    s->b.n = 0;
    s->batch_bytes = 0;
    return rc;
}

/* Adds j, len bytes of text, to the batch. */
static int
add(struct spec_stream *s, struct spec_job *j, size_t len)
{
    s->b.jobs[s->b.n++] = j;
    s->batch_bytes += len;
    return s->b.n == s->batch || s->batch_bytes >= BATCH_BYTES ? flush(s) : 0;
}

/* Prefixes err with "job N: " or "line N: ". */
static int
prefixed(char *err, size_t errlen, const char *what, size_t n, int rc)
{
    char tmp[1024];

    snprintf(tmp, sizeof(tmp), "%s", err);
    snprintf(err, errlen, "%s %zu: %s", what, n, tmp);
    return rc;
}

static bool
blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Moves the scan of the value at buf[start] over buf[start + sc->at ..
 * len). Returns 1 with *end set at the value's end, 0 when the bytes ran
 * out first, -1 (sc->at at the byte) when no value starts there (a ',' or
 * a closing bracket first). Whether the bytes are JSON is cJSON's to say:
 * this only finds where a value would end. */
static int
scan_value(const char *buf, size_t start, size_t len, struct scan *sc,
           size_t *end)
{
    for (size_t i = start + sc->at; i < len; i++) {
        char c = buf[i];

        if (sc->str) {
            if (sc->esc) {
                sc->esc = false;
            } else if (c == '\\') {
                sc->esc = true;
            } else if (c == '"') {
                sc->str = false;
                if (sc->depth == 0)
                    return *end = i + 1, 1;
            }
            continue;
        }
        if (sc->depth == 0 && sc->begun &&
            (blank(c) || c == ',' || c == ']' || c == '}' || c == '{' ||
             c == '[' || c == '"'))
            return *end = i, 1; /* the end of a number or a word */
        if (c == '"') {
            sc->str = sc->begun = true;
        } else if (c == '{' || c == '[') {
            sc->depth++;
            sc->begun = true;
        } else if (c == '}' || c == ']') {
            if (sc->depth == 0)
                return sc->at = i - start, -1;
            if (--sc->depth == 0)
                return *end = i + 1, 1;
        } else if (sc->depth == 0 && c == ',') {
            return sc->at = i - start, -1;
        } else {
            sc->begun = true;
        }
    }
    sc->at = len - start;
    return 0;
}

static int
not_json(struct spec_stream *s, size_t at, char *err, size_t errlen)
{
    return json_fail(err, errlen, "", "not valid JSON (near byte %zu)",
                     s->pos + at);
}

static int
too_big(char *err, size_t errlen)
{
    return json_fail(err, errlen, "",
                     "job is larger than the limit of %d bytes",
                     SPEC_JOB_MAX_BYTES);
}

/* Validates buf[from..to) as one job and adds it. */
static int
take(struct spec_stream *s, size_t from, size_t to, const char *what, size_t n,
     char *err, size_t errlen)
{
    struct spec_job *j = NULL;
    int rc = spec_parse(s->buf + from, to - from, &s->opts, &j, err, errlen);

    if (rc != 0)
        return prefixed(err, errlen, what, n, rc);
    return add(s, j, to - from);
}

/* After the first value: the next job of values one after another, each
 * starting on a line of its own, JSON lines or pretty-printed objects
 * alike (a value's end is found by the scan, not by a newline). Its
 * problem is told by the line it starts on. *more: bytes are left. */
static int
next_value(struct spec_stream *s, bool eof, char *err, size_t errlen,
           bool *more)
{
    size_t end = 0;
    int r;

    if (!s->in_value) {
        while (s->off < s->len && blank(s->buf[s->off])) {
            if (s->buf[s->off] == '\n') {
                s->tail_nl = true;
                s->line++;
            }
            s->off++;
        }
        if ((*more = s->off < s->len) == false)
            return 0;
        if (!s->tail_nl)
            return prefixed(err, errlen, "line", s->line,
                            json_fail(err, errlen, "",
                                      "not valid JSON (extra text after a "
                                      "job: each job starts on a new line)"));
        memset(&s->sc, 0, sizeof(s->sc));
        s->tail_nl = false;
        s->value_line = s->line;
        s->in_value = true;
    }
    r = scan_value(s->buf, s->off, s->len, &s->sc, &end);
    if (r < 0)
        return prefixed(err, errlen, "line", s->value_line,
                        not_json(s, s->off + s->sc.at, err, errlen));
    if (r == 0 && !eof) {
        *more = false;
        if (s->len - s->off > SPEC_JOB_MAX_BYTES)
            return prefixed(err, errlen, "line", s->value_line,
                            too_big(err, errlen));
        return 0;
    }
    if (r == 0) /* cut short at the end: cJSON says why */
        end = s->len;
    for (size_t i = s->off; i < end; i++)
        s->line += s->buf[i] == '\n';
    s->in_value = false;
    r = take(s, s->off, end, "line", s->value_line, err, errlen);
    s->off = end;
    *more = s->off < s->len;
    return r;
}

/* The first value of an input that is no array is whole: validate it
 * now, and report its problem once it is known whether it is one job or
 * the first of JSON lines. */
static void
first_value(struct spec_stream *s, size_t end)
{
    size_t from = s->off;

    for (size_t i = from; i < end; i++)
        s->line += s->buf[i] == '\n';
    s->first_rc = spec_parse(s->buf + from, end - from, &s->opts, &s->first,
                             s->first_err, sizeof(s->first_err));
    s->off = end;
    s->mode = M_FIRST_TAIL;
}

/* After the first value: white space to the end is one job; a newline
 * and more is JSON lines; more on the same line is extra text. */
static int
first_tail(struct spec_stream *s, bool eof, char *err, size_t errlen,
           bool *more)
{
    while (s->off < s->len && blank(s->buf[s->off])) {
        if (s->buf[s->off] == '\n') {
            s->tail_nl = true;
            s->line++;
        }
        s->off++;
    }
    *more = false;
    if (s->off == s->len && !eof)
        return 0;
    if (s->off < s->len && !s->tail_nl)
        return json_fail(err, errlen, "",
                         "not valid JSON (extra text at byte %zu)",
                         s->pos + s->off);
    if (s->first_rc != 0) {
        snprintf(err, errlen, "%s", s->first_err);
        return s->off < s->len
                   ? prefixed(err, errlen, "line", s->first_line, -EINVAL)
                   : -EINVAL;
    }
    *more = s->off < s->len;
    s->mode = M_LINES;
    s->tail_nl = true; /* the next value starts on a line of its own */
    {
        struct spec_job *j = s->first;
        s->first = NULL;
        return add(s, j, strlen(j->text));
    }
}

/* In an array: an element's start, its end, or what follows it. */
static int
array_step(struct spec_stream *s, bool eof, char *err, size_t errlen,
           bool *more)
{
    size_t end = 0;
    int r;

    if (s->mode != M_ELEM_VALUE) {
        while (s->off < s->len && blank(s->buf[s->off]))
            s->off++;
        if (s->off == s->len) {
            *more = false;
            return eof && s->mode != M_TAIL ? not_json(s, s->off, err, errlen)
                                            : 0;
        }
    }
    *more = true;
    switch (s->mode) {
    case M_ELEM:
        if (s->buf[s->off] == ']' && !s->elem_seen) {
            s->off++;
            s->mode = M_TAIL;
            return json_fail(err, errlen, "", "no job in the input");
        }
        memset(&s->sc, 0, sizeof(s->sc));
        s->mode = M_ELEM_VALUE;
        return 0;
    case M_ELEM_VALUE:
        r = scan_value(s->buf, s->off, s->len, &s->sc, &end);
        if (r < 0)
            return not_json(s, s->off + s->sc.at, err, errlen);
        if (r == 0) {
            *more = false;
            if (s->len - s->off > SPEC_JOB_MAX_BYTES)
                return prefixed(err, errlen, "job", spec_stream_count(s),
                                too_big(err, errlen));
            return eof ? not_json(s, s->len, err, errlen) : 0;
        }
        r = take(s, s->off, end, "job", spec_stream_count(s), err, errlen);
        s->off = end;
        s->elem_seen = true;
        s->mode = M_ELEM_AFTER;
        return r;
    case M_ELEM_AFTER:
        if (s->buf[s->off] != ',' && s->buf[s->off] != ']')
            return not_json(s, s->off, err, errlen);
        s->mode = s->buf[s->off++] == ',' ? M_ELEM : M_TAIL;
        return 0;
    default: /* M_TAIL */
        return json_fail(err, errlen, "",
                         "not valid JSON (extra text at byte %zu)",
                         s->pos + s->off);
    }
}

/* Consumes what buf holds; eof: no more bytes will come. */
static int
run(struct spec_stream *s, bool eof, char *err, size_t errlen)
{
    bool more = true;
    size_t end = 0;
    int rc = 0, r;

    while (rc == 0 && more) {
        switch (s->mode) {
        case M_START:
            /* A UTF-8 byte order mark (some editors write one) starts no
             * text: skipped, as cJSON skips it in a config. */
            if (s->pos == 0 && s->off == 0) {
                if (s->len < 3 && !eof) {
                    more = false;
                    break;
                }
                if (s->len >= 3 && memcmp(s->buf, "\xEF\xBB\xBF", 3) == 0)
                    s->off = 3;
            }
            while (s->off < s->len && blank(s->buf[s->off]))
                s->line += s->buf[s->off++] == '\n';
            more = s->off < s->len;
            if (!more)
                break;
            s->array = s->buf[s->off] == '[';
            if (s->array)
                s->off++;
            memset(&s->sc, 0, sizeof(s->sc));
            s->mode = s->array ? M_ELEM : M_FIRST;
            s->first_line = s->line;
            break;
        case M_FIRST:
            r = scan_value(s->buf, s->off, s->len, &s->sc, &end);
            if (r < 0) {
                rc = not_json(s, s->off + s->sc.at, err, errlen);
                break;
            }
            if (r == 0 && !eof) {
                more = false;
                if (s->len - s->off > SPEC_JOB_MAX_BYTES)
                    rc = too_big(err, errlen);
                break;
            }
            /* A value cut short or not a value: cJSON says why. */
            first_value(s, r == 1 ? end : s->len);
            break;
        case M_FIRST_TAIL:
            rc = first_tail(s, eof, err, errlen, &more);
            break;
        case M_LINES:
            rc = next_value(s, eof, err, errlen, &more);
            break;
        default:
            rc = array_step(s, eof, err, errlen, &more);
            break;
        }
    }
    return rc;
}

/* Appends data to the bytes not yet consumed, dropping the consumed
 * ones first. */
static void
append(struct spec_stream *s, const char *data, size_t len)
{
    if (s->off > 0) {
        memmove(s->buf, s->buf + s->off, s->len - s->off);
        s->len -= s->off;
        s->pos += s->off;
        s->off = 0;
    }
    if (s->len + len + 1 > s->cap) {
        s->cap = (s->len + len + 1) * 2;
        s->buf = xrealloc(s->buf, s->cap);
    }
    memcpy(s->buf + s->len, data, len);
    s->len += len;
    s->buf[s->len] = '\0';
}

int
spec_stream_feed(struct spec_stream *s, const char *data, size_t len, char *err,
                 size_t errlen)
{
    int rc = 0;

    /* In pieces: what is kept is a copy, and one piece is enough. */
    for (size_t at = 0, n; rc == 0 && at < len; at += n) {
        n = len - at < STREAM_PIECE ? len - at : STREAM_PIECE;
        append(s, data + at, n);
        rc = run(s, false, err, errlen);
    }
    return rc;
}

int
spec_stream_end(struct spec_stream *s, char *err, size_t errlen)
{
    int rc;

    if ((rc = run(s, true, err, errlen)) != 0)
        return rc;
    if (s->mode == M_START || spec_stream_count(s) == 0)
        return json_fail(err, errlen, "", "no job in the input");
    if (s->array && s->mode != M_TAIL)
        return not_json(s, s->len, err, errlen);
    return flush(s);
}

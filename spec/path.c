/* path.c: templates as a job holds them and as a worker fills them:
 * finding each one in a string ({{steps.NAME.output.PATH}},
 * {{input.PATH}}), reading the value it names (a step's output, parsed as
 * JSON for a PATH, once per spec_vars that has a cache; the job's input),
 * and filling a step's body, where a string that is one template whole
 * keeps the value's JSON type.
 */
#include "spec/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/httptext.h"
#include "common/json.h"
#include "common/xalloc.h"

static const char steps_ns[] = "steps.";
static const char output_tag[] = ".output";

/* The length of step self's element name when q starts with it as a
 * template's ("{{issue}}", "{{issue.number}}": a foreach step's), else 0. */
static size_t
item_len(const char *q, const struct spec_job *j, size_t self)
{
    const struct spec_step *s = self < j->nsteps ? &j->steps[self] : NULL;
    size_t n;

    if (s == NULL || s->foreach_in == NULL || s->foreach_as == NULL)
        return 0;
    n = strlen(s->foreach_as);
    return strncmp(q, s->foreach_as, n) == 0 && (q[n] == '.' || q[n] == '}')
               ? n
               : 0;
}

/* Names a template may start with; text in braces that starts otherwise
 * is not one ("{{name}}" in a prompt about Mustache is sent as written). */
static bool
is_namespace(const char *q, const struct spec_job *j, size_t self)
{
    return item_len(q, j, self) > 0 || strncmp(q, steps_ns, 6) == 0 ||
           (strncmp(q, "input", 5) == 0 &&
            (q[5] == '.' || q[5] == '}' || q[5] == ' ' || q[5] == '\t')) ||
           strncmp(q, "schedule.", 9) == 0 || strncmp(q, "env.", 4) == 0;
}

/* A PATH: segments split by dots, none empty, no braces or spaces. */
static bool
path_ok(const char *p, size_t n)
{
    if (n == 0 || p[0] == '.' || p[n - 1] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        if (strchr("{} \t", p[i]) != NULL ||
            (p[i] == '.' && i + 1 < n && p[i + 1] == '.'))
            return false;
    }
    return true;
}

/* The step named name[0..n) among j's steps before self: its index in
 * *out, or -EINVAL with the reason in err. */
static int
find_step(const struct spec_job *j, size_t self, const char *name, size_t n,
          const char *at, size_t *out, char *err, size_t len)
{
    for (size_t i = 0; i < j->nsteps; i++) {
        const char *sn = j->steps[i].name;
        if (sn == NULL || strlen(sn) != n || strncmp(sn, name, n) != 0)
            continue;
        if (i == self)
            return json_fail(err, len, at, "template names its own step %.*s",
                             (int)n, name);
        if (i > self)
            return json_fail(err, len, at,
                             "template names step %.*s, which runs later",
                             (int)n, name);
        *out = i;
        return 0;
    }
    return json_fail(err, len, at, "template names unknown step %.*s", (int)n,
                     name);
}

/* Reads the template between q and close (q past "{{"). */
static int
parse_one(const char *q, const char *close, const struct spec_job *j,
          size_t self, const char *at, struct spec_tpl *t, char *err,
          size_t len)
{
    const char *rest;
    size_t item = item_len(q, j, self);

    t->item = item > 0;
    t->input = false;
    if (item > 0) {
        rest = q + item;
    } else if (strncmp(q, "input", 5) == 0) {
        t->input = true;
        rest = q + 5;
    } else {
        const char *name = q + 6, *end = strstr(name, output_tag);
        if (end == NULL || end >= close || (end + 7 != close && end[7] != '.'))
            return json_fail(err, len, at,
                             "bad template {{%.*s}}: write "
                             "{{steps.NAME.output}} or "
                             "{{steps.NAME.output.PATH}}",
                             (int)(close - q), q);
        if (find_step(j, self, name, (size_t)(end - name), at, &t->step, err,
                      len) != 0)
            return -EINVAL;
        t->input = false;
        rest = end + 7;
    }
    t->path = NULL;
    t->pathlen = 0;
    if (rest == close)
        return 0;
    if (*rest != '.' || !path_ok(rest + 1, (size_t)(close - rest - 1)))
        return json_fail(err, len, at,
                         "bad template {{%.*s}}: a path is keys and indices "
                         "split by dots, such as labels.0",
                         (int)(close - q), q);
    t->path = rest + 1;
    t->pathlen = (size_t)(close - t->path);
    return 0;
}

/* The message for a template of a namespace stepq does not fill here. */
static int
not_filled(const char *q, const char *close, const struct spec_opts *opts,
           const char *at, char *err, size_t len)
{
    int n = (int)(close - q);

    if (q[0] == 'e')
        return json_fail(err, len, at,
                         "{{%.*s}}: stepq fills no {{env.*}} template; a "
                         "header value \"env:%.*s\" is read from the "
                         "environment when sent",
                         n, q, n - 4, q + 4);
    if (opts != NULL && opts->schedule != NULL)
        return json_fail(err, len, at,
                         "{{%.*s}}: a schedule fills only {{schedule.slot}}, "
                         "{{schedule.date}} and {{schedule.name}}",
                         n, q);
    return json_fail(err, len, at,
                     "{{%.*s}}: only a schedule's job has {{schedule.*}} "
                     "filled in; this job is not a schedule's",
                     n, q);
}

int
spec__tpl_next(const char **pos, const struct spec_job *j, size_t self,
               const struct spec_opts *opts, const char *at, struct spec_tpl *t,
               char *err, size_t len)
{
    for (const char *p = strstr(*pos, "{{"); p != NULL;
         p = strstr(p + 2, "{{")) {
        const char *q = p + 2 + strspn(p + 2, " \t"), *close;

        if (!is_namespace(q, j, self))
            continue;
        close = strstr(q, "}}");
        /* Spaces around it would be sent as written ("{{ steps.a.output
         * }}"); a step's name may hold spaces, a path may not. */
        if (q != p + 2 || close == NULL || close[-1] == ' ' ||
            close[-1] == '\t')
            return json_fail(err, len, at,
                             "bad template near \"%.40s\": write "
                             "{{steps.NAME.output}}, without spaces, closed "
                             "by }}",
                             p);
        if (item_len(q, j, self) == 0 &&
            ((q[0] == 's' && q[1] == 'c') || q[0] == 'e'))
            return not_filled(q, close, opts, at, err, len);
        if (parse_one(q, close, j, self, at, t, err, len) != 0)
            return -EINVAL;
        t->at = p;
        t->len = (size_t)(close + 2 - p);
        *pos = close + 2;
        return 1;
    }
    return 0;
}

bool
spec__tpl_whole(const char *s, const struct spec_job *j, size_t self,
                const struct spec_opts *opts, struct spec_tpl *t)
{
    const char *pos = s;
    char err[8];

    return s[0] == '{' &&
           spec__tpl_next(&pos, j, self, opts, "", t, err, sizeof(err)) == 1 &&
           t->at == s && *pos == '\0';
}

/* The node at path[0..n) under v (borrowed), or NULL: each segment is an
 * object's key, or an array's index in decimal digits. */
static const cJSON *
walk(const cJSON *v, const char *path, size_t n)
{
    const char *p = path, *end;

    if (n == 0) /* no path ({{input}}): the value itself, path NULL */
        return v;
    end = path + n;

    while (v != NULL && p < end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t seg = (size_t)((dot ? dot : end) - p);
        const cJSON *c = NULL;

        if (cJSON_IsArray(v)) {
            size_t idx = 0, k = 0;
            for (; k < seg && p[k] >= '0' && p[k] <= '9' && idx < 1000000; k++)
                idx = idx * 10 + (size_t)(p[k] - '0');
            if (k == seg) {
                for (c = v->child; c != NULL && idx > 0; c = c->next)
                    idx--;
            }
        } else if (cJSON_IsObject(v)) {
            for (c = v->child; c != NULL; c = c->next) {
                if (strlen(c->string) == seg && strncmp(c->string, p, seg) == 0)
                    break;
            }
        }
        v = c;
        p += seg + (dot ? 1 : 0);
    }
    return v;
}

static cJSON *
dup(const cJSON *v)
{
    cJSON *c = cJSON_Duplicate(v, true);

    if (c == NULL) {
        fprintf(stderr, "stepq: out of memory copying a value\n");
        abort();
    }
    return c;
}

cJSON *
spec_output_json(const char *text, size_t len)
{
    if (text == NULL)
        return NULL;
    while (len > 0 && strchr(" \t\r\n", *text) && *text) {
        text++;
        len--;
    }
    if (len >= 3 && strncmp(text, "```", 3) == 0) {
        const char *nl = memchr(text, '\n', len), *close = NULL;
        for (const char *p = text + len - 3; nl != NULL && p > nl; p--) {
            if (strncmp(p, "```", 3) == 0) {
                close = p;
                break;
            }
        }
        if (close != NULL) {
            len = (size_t)(close - (nl + 1));
            text = nl + 1;
        }
    }
    return json_parse_exact(text, len);
}

/* ---- outputs parsed once (spec_vars' cache) ------------------------ */

struct spec_parsed {
    size_t n;     /* steps, one slot each; 0: not made yet */
    cJSON **json; /* owned, one per step: its output parsed, or NULL */
    bool *done;   /* one per step: parsed (json NULL: not JSON) */
    size_t parses;
};

void
spec_vars_init(struct spec_vars *v)
{
    memset(v, 0, sizeof(*v));
    v->parsed = xcalloc(1, sizeof(*v->parsed));
}

void
spec_vars_cleanup(struct spec_vars *v)
{
    struct spec_parsed *p = v != NULL ? v->parsed : NULL;

    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n; i++)
        cJSON_Delete(p->json[i]);
    free(p->json);
    free(p->done);
    free(p);
    v->parsed = NULL;
}

size_t
spec_vars_parses(const struct spec_vars *v)
{
    return v->parsed != NULL ? v->parsed->parses : 0;
}

/* Step k's output (text) as JSON, or NULL when it is not JSON: borrowed
 * from v's cache, which parses it on its first read, or, without one,
 * parsed now into *own (the caller deletes it). */
static const cJSON *
output_json(const struct spec_vars *v, const struct spec_job *j, size_t k,
            const char *text, cJSON **own)
{
    struct spec_parsed *p = v->parsed; /* the cache is v's to fill */

    *own = NULL;
    if (p == NULL || k >= j->nsteps)
        return *own = spec_output_json(text, strlen(text));
    if (p->n == 0) {
        p->n = j->nsteps;
        p->json = xcalloc(p->n, sizeof(*p->json));
        p->done = xcalloc(p->n, sizeof(*p->done));
    }
    if (k >= p->n)
        return *own = spec_output_json(text, strlen(text));
    if (!p->done[k]) {
        p->json[k] = spec_output_json(text, strlen(text));
        p->done[k] = true;
        p->parses++;
    }
    return p->json[k];
}

/* Writes why a value is absent into err; returns -ENOENT. */
static int absent(char *err, size_t len, const char *fmt, ...)
    STEPQ_PRINTF(3, 4);

static int
absent(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -ENOENT;
}

int
spec__tpl_value(const struct spec_tpl *t, const struct spec_job *j,
                const struct spec_vars *v, cJSON **out, char *err, size_t len)
{
    const char *name = t->input  ? "input"
                       : t->item ? "the element"
                                 : j->steps[t->step].name,
               *text;
    int tl = (int)t->len, n = (int)t->pathlen;
    const cJSON *node, *parsed;
    cJSON *own = NULL;

    if (t->input) {
        if (v->input == NULL)
            return absent(err, len, "%.*s: the job has no input", tl, t->at);
        if ((node = walk(v->input, t->path, t->pathlen)) == NULL)
            return absent(err, len, "%.*s: no %.*s in the input", tl, t->at, n,
                          t->path);
        *out = dup(node);
        return 0;
    }
    if (t->item) {
        if (v->item == NULL)
            return -EAGAIN;
        if ((node = walk(v->item, t->path, t->pathlen)) == NULL)
            return absent(err, len, "%.*s: no %.*s in the element", tl, t->at,
                          n, t->path);
        *out = dup(node);
        return 0;
    }
    if (v->outputs == NULL)
        return -EAGAIN;
    if (v->skipped != NULL && v->skipped[t->step])
        return absent(err, len,
                      "%.*s: step %s was skipped (its \"when\" was false)", tl,
                      t->at, name);
    text = v->outputs[t->step] ? v->outputs[t->step] : "";
    /* A foreach step's output is the array of its elements' outputs. */
    if (t->path == NULL && j->steps[t->step].foreach_in != NULL &&
        (parsed = output_json(v, j, t->step, text, &own)) != NULL) {
        *out = own != NULL ? own : dup(parsed);
        return 0;
    }
    if (t->path == NULL) {
        *out = cJSON_CreateString(text);
        return 0;
    }
    if ((parsed = output_json(v, j, t->step, text, &own)) == NULL)
        return absent(err, len, "%.*s: the output of step %s is not JSON", tl,
                      t->at, name);
    node = walk(parsed, t->path, t->pathlen);
    if (node != NULL)
        *out = dup(node);
    cJSON_Delete(own);
    if (node == NULL)
        return absent(err, len, "%.*s: no %.*s in the output of step %s", tl,
                      t->at, n, t->path, name);
    return 0;
}

/* ---- filling a step's body ----------------------------------------- */

void
spec__take(cJSON *node, cJSON *val)
{
    cJSON_free(node->valuestring);
    node->type = val->type;
    node->valueint = val->valueint;
    node->valuedouble = val->valuedouble;
    node->valuestring = val->valuestring;
    node->child = val->child;
    val->valuestring = NULL;
    val->child = NULL;
    cJSON_Delete(val);
}

enum how { AS_TEXT, AS_URL, AS_JSON };

/* Appends v as text: a string as itself, else compact JSON; percent-
 * encoded (every byte but letters, digits and -._~) for a url. */
static void
put_text(struct xbuf *b, const cJSON *v, bool url)
{
    char *own = cJSON_IsString(v) ? NULL : json_print(v);
    const char *s = own ? own : v->valuestring;

    if (url)
        httptext_query_escape(b, s);
    else
        xbuf_put(b, s, strlen(s));
    free(own);
}

/* Fills the templates of string node s in place; AS_JSON: a string that
 * is one template whole becomes the value itself. */
static int
fill_string(cJSON *s, enum how how, const struct spec_job *j, size_t self,
            const struct spec_vars *v, char *err, size_t len)
{
    const char *text = s->valuestring, *pos = text, *from = text;
    struct xbuf b = {0};
    struct spec_tpl t;
    cJSON *val = NULL;
    int rc;

    if (strstr(text, "{{") == NULL)
        return 0;
    if (how == AS_JSON && spec__tpl_whole(text, j, self, NULL, &t)) {
        if ((rc = spec__tpl_value(&t, j, v, &val, err, len)) != 0)
            return rc == -EAGAIN ? 0 : rc; /* not known yet: as written */
        spec__take(s, val);
        return 0;
    }
    while ((rc = spec__tpl_next(&pos, j, self, NULL, "", &t, err, len)) == 1) {
        xbuf_put(&b, from, (size_t)(t.at - from));
        from = pos;
        if ((rc = spec__tpl_value(&t, j, v, &val, err, len)) == -EAGAIN) {
            xbuf_put(&b, t.at, t.len); /* not known yet: as written */
            continue;
        }
        if (rc != 0)
            break;
        put_text(&b, val, how == AS_URL);
        cJSON_Delete(val);
    }
    if (rc != 0) {
        free(b.p);
        return rc;
    }
    xbuf_put(&b, from, strlen(from));
    cJSON_free(s->valuestring);
    s->valuestring = b.p;
    return 0;
}

static int
fill_node(cJSON *node, enum how how, const struct spec_job *j, size_t self,
          const struct spec_vars *v, char *err, size_t len)
{
    int rc;

    if (cJSON_IsString(node) && node->valuestring != NULL)
        return fill_string(node, how, j, self, v, err, len);
    for (cJSON *c = node->child; c != NULL; c = c->next) {
        if ((rc = fill_node(c, how, j, self, v, err, len)) != 0)
            return rc;
    }
    return 0;
}

int
spec__fill(cJSON *node, bool json, const struct spec_job *j, size_t self,
           const struct spec_vars *v, char *err, size_t len)
{
    return fill_node(node, json ? AS_JSON : AS_TEXT, j, self, v, err, len);
}

int
spec_http_fill(const struct spec_job *j, size_t i, const struct spec_vars *v,
               cJSON *http, char *err, size_t len)
{
    int rc = 0;

    if (j->steps[i].element >= 0) /* filled when it was made */
        return 0;

    /* The url's values are percent-encoded, so they land as text in a
     * path segment or query value; the body keeps JSON types; the method
     * and headers are text. */
    for (cJSON *c = http->child; c != NULL && rc == 0; c = c->next) {
        enum how how = strcmp(c->string, "url") == 0    ? AS_URL
                       : strcmp(c->string, "body") == 0 ? AS_JSON
                                                        : AS_TEXT;
        rc = fill_node(c, how, j, i, v, err, len);
    }
    return rc;
}

int
spec_step_fill(const struct spec_job *j, size_t i, const struct spec_vars *v,
               cJSON **out, char *err, size_t len)
{
    const struct spec_step *s = &j->steps[i];
    cJSON *copy = dup(s->request ? s->request : s->http);
    int rc;

    if (s->element >= 0) /* filled when it was made */
        rc = 0;
    else if (s->request != NULL)
        rc = fill_node(copy, AS_JSON, j, i, v, err, len);
    else
        rc = spec_http_fill(j, i, v, copy, err, len);
    if (rc != 0) {
        cJSON_Delete(copy);
        return rc;
    }
    *out = copy;
    return 0;
}

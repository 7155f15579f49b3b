/* template.c: what a step sends, walked once the job's step names are
 * known: every template (path.c) names an earlier step or an input that
 * is there, none is written in a form that would be sent as written, and
 * no object holds a member twice (validate.c calls it last). */
#include "spec/internal.h"

#include <stdio.h>
#include <string.h>

#include "common/json.h"

/* Every template of s (at path) is written as one, names an earlier
 * step, and, for an input the enqueue knows, reads a value that is there:
 * what cannot be filled where it stands is refused now, never sent as
 * written. A stored job is checked as it was enqueued, except its input
 * (the worker gives it; view/ reads jobs without it). */
static int
check_templates_in(const char *s, const char *path, const struct spec_job *job,
                   size_t self, const struct spec_opts *opts, bool *templated,
                   char *err, size_t len)
{
    struct spec_vars v = {.input = job->input};
    const char *pos = s;
    struct spec_tpl t;
    char why[512];
    cJSON *val = NULL;
    int rc;

    while ((rc = spec__tpl_next(&pos, job, self, opts, path, &t, err, len)) ==
           1) {
        *templated = true;
        if (!t.input || (opts != NULL && opts->stored))
            continue;
        if (spec__tpl_value(&t, job, &v, &val, why, sizeof(why)) != 0)
            return json_fail(err, len, path, "%s", why);
        cJSON_Delete(val);
    }
    return rc;
}

static void
format_path(const struct spec_seg *s, char *buf, size_t len)
{
    char tmp[PATH_LEN];

    if (s == NULL) {
        buf[0] = '\0';
        return;
    }
    format_path(s->up, tmp, sizeof(tmp));
    if (s->key != NULL)
        json_path_key(buf, len, tmp, s->key);
    else
        json_path_index(buf, len, tmp, s->index);
}

/* Walks every string under item; paths are formatted only on error. */
int
spec__check_sent(const cJSON *item, const struct spec_seg *at,
                 const struct spec_job *job, size_t self,
                 const struct spec_opts *opts, bool *templated, char *err,
                 size_t len)
{
    char p[PATH_LEN];
    const char *twice;
    int rc, i = 0;

    if (cJSON_IsString(item) && item->valuestring != NULL) {
        if (strstr(item->valuestring, "{{") == NULL)
            return 0;
        format_path(at, p, sizeof(p));
        return check_templates_in(item->valuestring, p, job, self, opts,
                                  templated, err, len);
    }
    if (!cJSON_IsArray(item) && !cJSON_IsObject(item))
        return 0;
    /* A member twice in one object would be sent twice, and each reader
     * keeps a different one (most the last): refused, as anywhere else in
     * a job file. */
    if (cJSON_IsObject(item) && (twice = json_first_duplicate(item)) != NULL) {
        format_path(at, p, sizeof(p));
        return json_fail(err, len, p, "%s: duplicate field", twice);
    }
    for (const cJSON *c = item->child; c != NULL; c = c->next, i++) {
        struct spec_seg s = {at, cJSON_IsArray(item) ? NULL : c->string, i};
        if ((rc = spec__check_sent(c, &s, job, self, opts, templated, err,
                                   len)) != 0)
            return rc;
    }
    return 0;
}

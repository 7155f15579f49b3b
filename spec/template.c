/* template.c: what a step sends, walked once the job's step names are
 * known: every "{{steps.NAME.output}}" names an earlier step, none is
 * written in a form that would be sent as written, and no object holds a
 * member twice (validate.c calls it last). */
#include "spec/internal.h"

#include <stdio.h>
#include <string.h>

#include "common/json.h"

#define PATH_LEN 256

/* Template references: "{{steps.NAME.output}}". Every reference in a step
 * must name an earlier step, so the output exists when the step runs. */
static int
check_templates_in(const char *s, const char *path, const struct spec_job *job,
                   size_t self, char *err, size_t len)
{
    static const char open_tag[] = "{{steps.";
    static const char close_tag[] = ".output}}";
    const char *p = s;

    /* "{{ steps.a.output }}" (as other template languages allow) would be
     * sent as it is written: it is refused, as a misspelt field is. */
    for (p = strstr(s, "{{"); p != NULL; p = strstr(p + 2, "{{")) {
        const char *q = p + 2 + strspn(p + 2, " \t");
        if (q != p + 2 && strncmp(q, "steps.", 6) == 0)
            return json_fail(err, len, path,
                             "bad template near \"%.40s\": write "
                             "{{steps.NAME.output}}, without spaces",
                             p);
    }
    p = s;
    while ((p = strstr(p, open_tag)) != NULL) {
        const char *name = p + sizeof(open_tag) - 1;
        const char *end = strstr(name, close_tag);
        const char *brace = strstr(name, "}}");
        size_t n;
        bool found = false;

        if (end == NULL || (brace != NULL && brace < end + 7))
            return json_fail(err, len, path,
                             "bad template near \"%.40s\": write "
                             "{{steps.NAME.output}}",
                             p);
        n = (size_t)(end - name);
        for (size_t i = 0; i < job->nsteps && i <= self; i++) {
            const char *sn = job->steps[i].name;
            if (sn != NULL && strlen(sn) == n && strncmp(sn, name, n) == 0) {
                if (i == self)
                    return json_fail(err, len, path,
                                     "template names its own step %.*s", (int)n,
                                     name);
                found = true;
                break;
            }
        }
        if (!found) {
            for (size_t i = self + 1; i < job->nsteps; i++) {
                const char *sn = job->steps[i].name;
                if (sn != NULL && strlen(sn) == n && strncmp(sn, name, n) == 0)
                    return json_fail(err, len, path,
                                     "template names step %.*s, which runs "
                                     "later",
                                     (int)n, name);
            }
            return json_fail(err, len, path, "template names unknown step %.*s",
                             (int)n, name);
        }
        p = end + sizeof(close_tag) - 1;
    }
    return 0;
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
                 const struct spec_job *job, size_t self, char *err, size_t len)
{
    char p[PATH_LEN];
    const char *twice;
    int rc, i = 0;

    if (cJSON_IsString(item) && item->valuestring != NULL) {
        if (strstr(item->valuestring, "{{") == NULL)
            return 0;
        format_path(at, p, sizeof(p));
        return check_templates_in(item->valuestring, p, job, self, err, len);
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
        if ((rc = spec__check_sent(c, &s, job, self, err, len)) != 0)
            return rc;
    }
    return 0;
}

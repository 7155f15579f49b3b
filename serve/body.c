/* body.c: reading a resolution's JSON body into park/'s decision and
 * filter: no connection and no store, so the fuzzer drives it as is. */
#include "serve/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Member name of object o as a string: *out stays NULL when absent or
 * null; false when it is there and not a string. */
static bool
text_member(const cJSON *o, const char *name, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

    *out = NULL;
    if (v == NULL || cJSON_IsNull(v))
        return true;
    if (!cJSON_IsString(v))
        return false;
    *out = v->valuestring;
    return true;
}

/* The fields a body may have; one item's stop before "reason". */
static const char *const known[] = {"resolution", "tier",   "output", "by",
                                    "note",       "reason", "job_id", NULL};
#define ONE_ITEM_FIELDS 5

static int fail(char *err, size_t len, const char *fmt, ...) STEPQ_PRINTF(3, 4);

static int
fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static int
parse(const struct config *cfg, const char *body, size_t len, bool bulk,
      cJSON **doc, struct park_decision *d, struct q_park_filter *f, char *err,
      size_t errlen)
{
    const char *how = NULL, *tier = NULL;
    const cJSON *job, *m;
    char why[256];

    *doc = NULL;
    /* The whole body is the object: nothing after it, no NUL inside, and
     * no NUL written as \u0000 either (text fields end at a NUL). */
    if (body != NULL && strstr(body, "\\u0000") != NULL)
        return fail(err, errlen, "text must not contain NUL (\\u0000)");
    *doc = body != NULL && strlen(body) == len
               ? cJSON_ParseWithOpts(body, NULL, true)
               : NULL;
    if (!cJSON_IsObject(*doc))
        return fail(err, errlen,
                    "the body must be one JSON object such as "
                    "{\"resolution\": \"retry\", \"by\": \"ana\"}");
    cJSON_ArrayForEach(m, *doc)
    {
        size_t i = 0;
        while (known[i] != NULL && strcmp(known[i], m->string) != 0)
            i++;
        if (known[i] == NULL || (!bulk && i >= ONE_ITEM_FIELDS))
            return fail(err, errlen, "%s: unknown field", m->string);
    }
    if (!text_member(*doc, "resolution", &how) ||
        !text_member(*doc, "tier", &tier) ||
        !text_member(*doc, "output", &d->output) ||
        !text_member(*doc, "by", &d->by) ||
        !text_member(*doc, "note", &d->note) ||
        !text_member(*doc, "reason", &f->reason))
        return fail(err, errlen,
                    "resolution, tier, output, by, note and reason are "
                    "strings");
    if (how == NULL || park_how_from_name(how, &d->how) != 0)
        return fail(err, errlen,
                    "resolution must be retry, skip, done or fail");
    job = cJSON_GetObjectItemCaseSensitive(*doc, "job_id");
    if (job != NULL && (!cJSON_IsNumber(job) || job->valuedouble < 1 ||
                        job->valuedouble > 9e15 ||
                        job->valuedouble != (double)(int64_t)job->valuedouble))
        return fail(err, errlen, "job_id must be a job id");
    f->job_id = job != NULL ? (int64_t)job->valuedouble : 0;
    /* In bulk, tier picks the items; for one item it is where to retry. */
    if (bulk)
        f->tier = tier;
    else
        d->tier = tier;
    d->output_len = d->output ? strlen(d->output) : 0;
    if (d->by == NULL)
        d->by = "";
    if (park_decision_check(d, bulk, cfg, why, sizeof(why)) != 0)
        return fail(err, errlen, "%s", why);
    /* A bulk retry's tier filter must name a tier of the config (a typo
     * would match nothing, silently); skip and fail may still clear the
     * items of a tier since removed, as on the CLI. */
    if (bulk && d->how == PARK_RETRY && f->tier != NULL && cfg != NULL &&
        config_find_tier(cfg, f->tier) == NULL)
        return fail(err, errlen, "no tier named %s in the config", f->tier);
    return 0;
}

int
serve_read_decision(const struct config *cfg, const char *body, size_t len,
                    bool bulk, cJSON **doc, struct park_decision *d,
                    struct q_park_filter *f, char *err, size_t errlen)
{
    int rc = parse(cfg, body, len, bulk, doc, d, f, err, errlen);

    if (rc != 0) {
        cJSON_Delete(*doc);
        *doc = NULL;
    }
    return rc;
}

/* body.c: reading a resolution's JSON body into park/'s decision and
 * filter: no connection and no store, so the fuzzer drives it as is. */
#include "serve/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/json.h"
#include "queue/park.h"

/* The fields a body may have: one item's, and the bulk form's. */
static const char *const one_fields[] = {"resolution", "tier", "output",
                                         "by",         "note", "not_before",
                                         "lift_wall",  "args", NULL};
static const char *const bulk_fields[] = {"resolution", "tier",      "by",
                                          "note",       "reason",    "job_id",
                                          "not_before", "lift_wall", NULL};

static int fail(char *err, size_t len, const char *fmt, ...) STEPQ_PRINTF(3, 4);

/* "args" (approve: a tool call's arguments as edited) is a JSON object:
 * kept in doc as its text, which d->args borrows. */
static int
take_args(cJSON *doc, struct park_decision *d, char *err, size_t errlen)
{
    cJSON *args = cJSON_GetObjectItemCaseSensitive(doc, "args");
    char *text;

    if (args == NULL)
        return 0;
    if (!cJSON_IsObject(args))
        return fail(err, errlen,
                    "args must be a JSON object (the tool "
                    "call's arguments)");
    text = cJSON_PrintUnformatted(args);
    cJSON_ReplaceItemInObjectCaseSensitive(doc, "args",
                                           cJSON_CreateString(text));
    cJSON_free(text);
    d->args = cJSON_GetObjectItemCaseSensitive(doc, "args")->valuestring;
    return 0;
}

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
    const char *how = NULL, *tier = NULL, *not_before = NULL;
    char why[256];
    int rc;

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
    /* Fields checked as job files are: unknown or repeated ones refused,
     * each of its type, the message naming it. */
    if (json_check_object(*doc, "", bulk ? bulk_fields : one_fields, err,
                          errlen) != 0 ||
        json_get_string(*doc, "resolution", true, "", &how, err, errlen) ||
        json_get_string(*doc, "tier", false, "", &tier, err, errlen) ||
        json_get_string(*doc, "output", false, "", &d->output, err, errlen) ||
        json_get_string(*doc, "by", false, "", &d->by, err, errlen) ||
        json_get_string(*doc, "note", false, "", &d->note, err, errlen) ||
        json_get_string(*doc, "reason", false, "", &f->reason, err, errlen) ||
        json_get_string(*doc, "not_before", false, "", &not_before, err,
                        errlen) ||
        json_get_bool(*doc, "lift_wall", "", &d->lift_wall, err, errlen) ||
        json_get_int(*doc, "job_id", 1, INT64_MAX, "", &f->job_id, err, errlen))
        return -EINVAL;
    if (park_how_from_name(how, &d->how) != 0)
        return fail(err, errlen,
                    "resolution must be retry, skip, done, fail, "
                    "approve or reject");
    if ((rc = take_args(*doc, d, err, errlen)) != 0)
        return rc;
    if (not_before != NULL && clock_parse_utc(not_before, &d->not_before) != 0)
        return fail(err, errlen,
                    "not_before must be an RFC 3339 time, such as "
                    "\"2026-11-30T06:00:00Z\"");
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

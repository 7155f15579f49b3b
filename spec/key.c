/* key.c: the rules of a job's dedupe key, one list for a job file's
 * (validate.c) and for spec_key_check's (--key, libstepq, serve), and the
 * keys that are the schedules' own; and the other fields of a job that
 * name or time it from outside its steps: its hooks' names, its run_at. */
#include "spec/internal.h"

#include <string.h>

#include "common/clock.h"
#include "common/json.h"

#define STR_(x)      #x
#define STR(x)       STR_(x)
#define KEY_TOO_LONG "key: longer than " STR(SPEC_KEY_MAX_BYTES) " bytes"

/* The rules of a job's key, one list for a job file's and for
 * spec_key_check's (--key, libstepq, serve). stored: the key of a job an
 * older stepq stored, which may break today's bounds (its length, its
 * characters) and must still run. */
int
spec__key_rules(const char *key, bool stored, char *err, size_t len)
{
    if (key[0] == '\0')
        return json_fail(err, len, "key", "must not be empty");
    if (!stored && strlen(key) > SPEC_KEY_MAX_BYTES)
        return json_fail(err, len, "", KEY_TOO_LONG);
    if (spec_key_reserved(key))
        return json_fail(err, len, "key",
                         "keys starting with " SPEC_SCHEDULE_KEY_PREFIX
                         " are the schedules' own");
    if (!stored && strncmp(key, SPEC_FOREACH_KEY_PREFIX,
                           strlen(SPEC_FOREACH_KEY_PREFIX)) == 0)
        return json_fail(err, len, "key",
                         "keys starting with " SPEC_FOREACH_KEY_PREFIX
                         " are the foreach elements' own");
    if (!stored && !json_utf8_valid(key, strlen(key)))
        return json_fail(err, len, "key", "not valid UTF-8");
    if (!stored && !json_plain_text(key, false))
        return json_fail(err, len, "key", "must not hold control characters");
    return 0;
}

bool
spec_key_reserved(const char *key)
{
    return key != NULL && strncmp(key, SPEC_SCHEDULE_KEY_PREFIX,
                                  strlen(SPEC_SCHEDULE_KEY_PREFIX)) == 0;
}

int
spec_key_check(const char *key, char *err, size_t len)
{
    return spec__key_rules(key, false, err, len);
}

int
spec__hook_name(const cJSON *root, const char *key,
                const struct spec_opts *opts, const char **name, char *err,
                size_t len)
{
    int rc = json_get_string(root, key, true, "", name, err, len);

    if (rc == 0 && opts != NULL && opts->hooks != NULL &&
        config_find_hook(opts->hooks, *name) == NULL)
        return json_fail(err, len, key,
                         "the config has no hook named %s (a job names one "
                         "of the config's \"hooks\", it cannot carry a "
                         "command)",
                         *name);
    return rc;
}

int
spec__run_at(const char *run_at, struct spec_job *j, char *err, size_t len)
{
    j->run_after_ms = -1;
    if (run_at != NULL &&
        clock_parse_after(run_at, &j->run_at, &j->run_after_ms) != 0)
        return json_fail(err, len, "run_at",
                         "must be an RFC 3339 time such as "
                         "2026-11-30T03:40:00Z, or a span from the enqueue "
                         "such as +90s, +10m, +2h or +1d");
    return 0;
}

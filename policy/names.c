/* names.c: the names of policy's enums as docs/reference.md prints them
 * ("soft_throttle", "backoff_retry", "half_open", "daily_cap"), both ways. The
 * tables are indexed by the enum value, so their order is the enums' order in
 * policy/policy.h.
 */
#include "policy/policy.h"

#include <errno.h>
#include <string.h>

static const char *const outcome_names[POLICY_OUTCOME_COUNT] = {
    "ok",      "soft_throttle", "hard_quota", "truncated", "schema_invalid",
    "refused", "server_error",  "timeout",    "unknown"};

static const char *const action_names[POLICY_ACTION_COUNT] = {
    "commit",
    "backoff_retry",
    "switch_tier_replay",
    "degrade_then_retry",
    "park_for_human",
    "fail_loud"};

static const char *const transport_names[POLICY_TRANSPORT_COUNT] = {
    "none", "timeout",   "refused",      "reset",
    "tls",  "too_large", "bad_response", "tls_certificate"};

static const char *const breaker_names[POLICY_BREAKER_COUNT] = {
    "closed", "open", "half_open"};

#define REASON_NAME(id, name) name,
static const char *const reason_names[POLICY_REASON_COUNT] = {
    POLICY_REASON_LIST(REASON_NAME)};
#undef REASON_NAME

static int
from_name(const char *const *names, int n, const char *name, int *out)
{
    if (name == NULL)
        return -EINVAL;
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i], name) == 0) {
            *out = i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *
policy_outcome_name(enum policy_outcome o)
{
    return (unsigned)o < POLICY_OUTCOME_COUNT ? outcome_names[o] : "?";
}

int
policy_outcome_from_name(const char *name, enum policy_outcome *out)
{
    int i, rc = from_name(outcome_names, POLICY_OUTCOME_COUNT, name, &i);

    if (rc == 0)
        *out = (enum policy_outcome)i;
    return rc;
}

const char *
policy_action_name(enum policy_action a)
{
    return (unsigned)a < POLICY_ACTION_COUNT ? action_names[a] : "?";
}

int
policy_action_from_name(const char *name, enum policy_action *out)
{
    int i, rc = from_name(action_names, POLICY_ACTION_COUNT, name, &i);

    if (rc == 0)
        *out = (enum policy_action)i;
    return rc;
}

const char *
policy_transport_name(enum policy_transport t)
{
    return (unsigned)t < POLICY_TRANSPORT_COUNT ? transport_names[t] : "?";
}

int
policy_transport_from_name(const char *name, enum policy_transport *out)
{
    int i, rc = from_name(transport_names, POLICY_TRANSPORT_COUNT, name, &i);

    if (rc == 0)
        *out = (enum policy_transport)i;
    return rc;
}

const char *
policy_breaker_name(enum policy_breaker b)
{
    return (unsigned)b < POLICY_BREAKER_COUNT ? breaker_names[b] : "?";
}

int
policy_breaker_from_name(const char *name, enum policy_breaker *out)
{
    int i, rc = from_name(breaker_names, POLICY_BREAKER_COUNT, name, &i);

    if (rc == 0)
        *out = (enum policy_breaker)i;
    return rc;
}

const char *
policy_reason_name(enum policy_reason r)
{
    return (unsigned)r < POLICY_REASON_COUNT ? reason_names[r] : "?";
}

int
policy_reason_from_name(const char *name, enum policy_reason *out)
{
    int i, rc = from_name(reason_names, POLICY_REASON_COUNT, name, &i);

    if (rc == 0)
        *out = (enum policy_reason)i;
    return rc;
}

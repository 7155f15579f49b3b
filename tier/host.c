/* host.c: walls of http endpoints. An http step has no tier, but its host
 * answers walls as a tier's endpoint does (a daily cap of comments, say):
 * the wall is kept in a tier row of its own, named by host and port, so
 * that every worker on the store sends nothing more there until it ends,
 * and a side-effecting post parks without being sent rather than meeting
 * the same wall again. */
#include "tier/tier.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/httptext.h"
#include "queue/tiers.h"

#define DAY_MS  86400000
#define HOUR_MS 3600000

int
tier_host_key(const char *url, char *out, size_t len)
{
    bool tls = strncmp(url, "https://", 8) == 0;
    const char *rest, *end, *at, *port = NULL;
    int n;

    if (!tls && strncmp(url, "http://", 7) != 0)
        return -EINVAL;
    rest = url + (tls ? 8 : 7);
    end = rest + strcspn(rest, "/?#");
    if (httptext_authority_problem(rest, end) != NULL)
        return -EINVAL;
    /* userinfo is not part of the host */
    at = memchr(rest, '@', (size_t)(end - rest));
    if (at != NULL)
        rest = at + 1;
    /* the port: after the last ':' that is not inside an [IPv6] */
    for (const char *p = end; p > rest; p--) {
        if (p[-1] == ']')
            break;
        if (p[-1] == ':') {
            port = p;
            break;
        }
    }
    if (port != NULL)
        n = snprintf(out, len, TIER_HOST_PREFIX "%.*s", (int)(end - rest),
                     rest);
    else
        n = snprintf(out, len, TIER_HOST_PREFIX "%.*s:%s", (int)(end - rest),
                     rest, tls ? "443" : "80");
    if (n < 0 || (size_t)n >= len)
        return -EINVAL;
    /* host names are not case-sensitive: one row per host */
    for (char *p = out; *p != '\0'; p++) {
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    }
    return 0;
}

int
tier_host_wall(q_db *db, const char *key, int64_t now, int64_t *until,
               char reason[32])
{
    struct q_tier_state st;
    int rc = q_tier_load(db, key, &st);

    if (rc != 0)
        return rc;
    *until = st.exhausted_until > now ? st.exhausted_until : 0;
    snprintf(reason, 32, "%s", *until > 0 ? st.exhausted_reason : "");
    return 0;
}

int64_t
tier_host_wall_until(const struct policy_class *c, int64_t now)
{
    bool daily = c->why == POLICY_REASON_DAILY_CAP;

    if (c->reset_at_ms > now && !(daily && c->reset_at_ms < now + HOUR_MS))
        return c->reset_at_ms;
    if (daily)
        return (now / DAY_MS + 1) * DAY_MS;
    return now + HOUR_MS;
}

/* Sets host key's wall to until (0: none) for reason, in a level of its
 * own; a later wall is kept unless lift. */
static int
set_wall(q_db *db, const char *key, int64_t until, const char *reason,
         bool lift)
{
    struct q_tier_state st;
    int rc = q_tx_begin(db);

    if (rc != 0)
        return rc;
    if ((rc = q_tier_load(db, key, &st)) == 0) {
        if (lift || until > st.exhausted_until) {
            st.exhausted_until = until;
            snprintf(st.exhausted_reason, sizeof(st.exhausted_reason), "%s",
                     reason);
        }
        rc = q_tier_store(db, key, &st);
    }
    if (rc != 0) {
        q_tx_rollback(db);
        return rc;
    }
    return q_tx_commit(db);
}

int
tier_host_wall_set(q_db *db, const char *key, int64_t until, const char *reason)
{
    return set_wall(db, key, until, reason != NULL ? reason : "wall", false);
}

int
tier_host_wall_lift(q_db *db, const char *key)
{
    return set_wall(db, key, 0, "", true);
}

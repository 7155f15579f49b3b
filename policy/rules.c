/* rules.c: what policy reads from the configuration: the numbers of config
 * "policy" (policy_config_init) and the user classify rules, compiled once
 * (policy_rules_new) and matched against an answer before any default rule
 * (policy__rules_match).
 *
 * A rule is a status, a body expression and a header expression, all
 * optional; all given must hold. Expressions are POSIX extended, matched
 * case-insensitively, and refused when glibc would need too much memory to
 * compile them.
 */
#include "policy/policy.h"

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "policy/internal.h"

static int64_t
secs_to_ms(double s, int64_t dflt)
{
    if (!(s >= 0))
        return dflt;
    if (s > (double)POLICY_MAX_WAIT_MS / 1000)
        return POLICY_MAX_WAIT_MS;
    return (int64_t)(s * 1000 + 0.5);
}

void
policy_config_init(struct policy_config *cfg,
                   const struct config_policy *numbers,
                   const policy_rules *rules)
{
    cfg->switch_wait_ms = 60000;
    cfg->escalate_after_ms = 300000;
    cfg->max_throttle_waits = 20;
    cfg->backoff_base_ms = 1000;
    cfg->backoff_cap_ms = 20000;
    cfg->rules = rules;
    if (numbers == NULL)
        return;
    cfg->switch_wait_ms = secs_to_ms(numbers->switch_wait_s, 60000);
    cfg->escalate_after_ms = secs_to_ms(numbers->escalate_after_s, 300000);
    cfg->max_throttle_waits =
        numbers->max_throttle_waits >= 0 ? numbers->max_throttle_waits : 20;
    cfg->backoff_base_ms = secs_to_ms(numbers->backoff_base_s, 1000);
    cfg->backoff_cap_ms = secs_to_ms(numbers->backoff_cap_s, 20000);
}

struct prule {
    int status;
    bool has_body, has_header;
    regex_t body;
    regex_t header_value;
    char *header_name;      /* owned */
    char *reason;           /* owned */
    enum policy_reason why; /* reason's, or POLICY_REASON_RULE */
    enum policy_outcome outcome;
};

struct policy_rules {
    struct prule *r; /* owned array of n */
    size_t n;
};

void
policy_rules_free(policy_rules *rules)
{
    if (rules == NULL)
        return;
    for (size_t i = 0; i < rules->n; i++) {
        struct prule *p = &rules->r[i];
        if (p->has_body)
            regfree(&p->body);
        if (p->has_header)
            regfree(&p->header_value);
        free(p->header_name);
        free(p->reason);
    }
    free(rules->r);
    free(rules);
}

/* glibc's regcomp copies the subexpression of every "+" and "{n,m}" (X+
 * is XX*), so stacked repetitions grow the compiled expression
 * exponentially: "a++++++++++++++++++++" takes 1.3 GB. A classify rule is
 * a few words; refuse what would cost more than a few thousand copies. */
#define RULE_MAX_LEN    1024
#define RULE_MAX_COPIES 4096

static const char *
too_costly(const char *src)
{
    double copies = 1;
    bool after_rep = false;

    if (strlen(src) > RULE_MAX_LEN)
        return "longer than 1024 characters";
    for (const char *p = src; *p; p++) {
        double times = 0;
        if (*p == '\\' && p[1] != '\0') {
            p++;
            after_rep = false;
            continue;
        }
        if (*p == '[') { /* a bracket expression: no operators inside */
            const char *q = p + 1;
            if (*q == '^')
                q++;
            if (*q == ']')
                q++;
            while (*q && *q != ']')
                q++;
            p = *q ? q : q - 1;
            after_rep = false;
            continue;
        }
        if (*p == '+') {
            times = 2;
        } else if (*p == '{' && p[1] >= '0' && p[1] <= '9') {
            char *end;
            const char *close = strchr(p, '}');
            long lo = strtol(p + 1, &end, 10), hi = lo;
            /* Checked before any arithmetic: strtol saturates at LONG_MAX
             * (found by fuzz_config). */
            if (lo > 255)
                return "a repetition bound above 255";
            if (*end == ',')
                hi = end[1] == '}' ? lo + 1 : strtol(end + 1, &end, 10);
            if (hi > 255)
                return "a repetition bound above 255";
            times = hi > 1 ? (double)hi : 1;
            if (close != NULL)
                p = close; /* the bound's digits are not atoms */
        } else if (*p == '*' || *p == '?') {
            times = 1;
        } else {
            after_rep = false;
            continue;
        }
        if (after_rep)
            return "a repetition of a repetition (such as ++ or *{2})";
        after_rep = true;
        copies *= times;
        if (copies > RULE_MAX_COPIES)
            return "too many repetitions (+ and {n,m} multiply its size)";
    }
    return NULL;
}

static int
compile(regex_t *re, const char *src, size_t idx, const char *field, char *err,
        size_t errlen)
{
    char msg[256];
    const char *why = too_costly(src);
    int rc;

    if (why != NULL) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "classify[%zu].%s: refused: %s", idx, field,
                     why);
        return -EINVAL;
    }
    rc = regcomp(re, src, REG_EXTENDED | REG_ICASE | REG_NOSUB);
    if (rc == 0)
        return 0;
    regerror(rc, re, msg, sizeof(msg));
    if (err != NULL && errlen > 0)
        snprintf(err, errlen,
                 "classify[%zu].%s: bad regular expression "
                 "\"%s\": %s",
                 idx, field, src, msg);
    return -EINVAL;
}

int
policy_rules_new(const struct config_rule *rules, size_t n, policy_rules **out,
                 char *err, size_t errlen)
{
    policy_rules *pr = xcalloc(1, sizeof(*pr));
    int rc = 0;

    pr->r = xcalloc(n + 1, sizeof(*pr->r));
    for (size_t i = 0; i < n; i++) {
        const struct config_rule *c = &rules[i];
        struct prule *p = &pr->r[i];

        pr->n = i + 1;
        if (c->outcome == NULL ||
            policy_outcome_from_name(c->outcome, &p->outcome) != 0) {
            if (err != NULL && errlen > 0)
                snprintf(err, errlen,
                         "classify[%zu].outcome: unknown outcome \"%s\" "
                         "(ok, soft_throttle, hard_quota, truncated, "
                         "schema_invalid, refused, server_error, timeout "
                         "or unknown)",
                         i, c->outcome ? c->outcome : "");
            rc = -EINVAL;
            goto fail;
        }
        p->status = c->status;
        if (c->body != NULL) {
            if ((rc = compile(&p->body, c->body, i, "body", err, errlen)))
                goto fail;
            p->has_body = true;
        }
        if (c->header_name != NULL) {
            if ((rc = compile(&p->header_value,
                              c->header_value ? c->header_value : "", i,
                              "header_value", err, errlen)))
                goto fail;
            p->has_header = true;
            p->header_name = xstrdup(c->header_name);
        }
        p->reason = xstrdup(c->reason ? c->reason : "rule");
        /* A rule naming a known reason ("daily_cap") acts as it; any other
         * name is the rule's own, carried as text. */
        if (policy_reason_from_name(p->reason, &p->why) != 0 ||
            p->why == POLICY_REASON_NONE)
            p->why = POLICY_REASON_RULE;
    }
    *out = pr;
    return 0;
fail:
    policy_rules_free(pr);
    return rc;
}

static bool
rule_matches(const struct prule *r, const struct policy_input *in,
             const char *body)
{
    if (r->status != 0 && r->status != in->status)
        return false;
    if (r->has_body && regexec(&r->body, body, 0, NULL, 0) != 0)
        return false;
    if (r->has_header) {
        bool hit = false;
        for (size_t i = 0; i < in->nheaders && !hit; i++) {
            const struct policy_header *h = &in->headers[i];
            hit = h->value != NULL && policy__header_is(h, r->header_name) &&
                  regexec(&r->header_value, h->value, 0, NULL, 0) == 0;
        }
        if (!hit)
            return false;
    }
    return true;
}

/* The body is copied once, NUL-terminated, for regexec. */
int
policy__rules_match(const policy_rules *rules, const struct policy_input *in,
                    struct policy_class *out)
{
    char *body = NULL;
    int hit = -1;

    if (rules == NULL || rules->n == 0)
        return -1;
    for (size_t i = 0; i < rules->n && hit < 0; i++) {
        if (rules->r[i].has_body && body == NULL) {
            size_t n = in->body == NULL                    ? 0
                       : in->body_len < POLICY__RULE_BYTES ? in->body_len
                                                           : POLICY__RULE_BYTES;
            body = xmalloc(n + 1);
            for (size_t k = 0; k < n; k++)
                body[k] = in->body[k] == '\0' ? ' ' : in->body[k];
            body[n] = '\0';
        }
        if (rule_matches(&rules->r[i], in, body))
            hit = (int)i;
    }
    free(body);
    if (hit >= 0) {
        policy__set(out, rules->r[hit].outcome, rules->r[hit].why);
        out->reason = rules->r[hit].reason;
        out->rule = hit;
    }
    return hit;
}

/* fuzz_classify.c: libFuzzer target for policy_classify over an arbitrary
 * answer, followed by policy_decide, checking the reference's park rules.
 *
 * Input layout (seeds in this form come from make_seeds.py):
 *   byte 0-1  HTTP status, big-endian, modulo 1000
 *   byte 2    transport (modulo POLICY_TRANSPORT_COUNT)
 *   byte 3    parsed (modulo 3)
 *   byte 4    flags: 1 http step, 2 streak, 4 user rules, 8 finish_reason,
 *             16 replayable, 32 side effects, 64 idempotency key,
 *             128 degraded
 *   byte 5    attempts left (low 3 bits), tiers left (next 2 bits),
 *             schema retried (bit 5), breaker (bits 6-7)
 *   byte 6    slack: 0 .. 255 times 10 s
 *   byte 7    throttle waits used (modulo 32)
 *   then text: with flag 8, a first line holding finish_reason; then header
 *   lines "name: value" up to an empty line; the rest is the body, passed
 *   in an exact-size buffer with no terminating NUL. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_HEADERS 64

static policy_rules *rules;

/* A fixed set of user rules, compiled once, so the rule path is fuzzed. */
static void
rules_init(void)
{
    static struct config_rule r[] = {
        {429, "daily|insufficient_quota", NULL, NULL, "hard_quota", NULL},
        {0, NULL, "x-error", "^quota", "refused", "custom"},
        {500, "overload(ed)?", NULL, NULL, "server_error", "busy"},
        {0, "[[:digit:]]{3}-limit", "retry-after", "[0-9]+", "soft_throttle",
         NULL},
    };
    char err[128];

    if (rules == NULL && policy_rules_new(r, sizeof(r) / sizeof(r[0]), &rules,
                                          err, sizeof(err)) != 0)
        abort();
}

static bool
in_doubt_outcome(const struct policy_class *c)
{
    /* A request refused before it ran (context too long, too large for
     * the tier) did not write anything, whatever its status. */
    if (c->outcome == POLICY_TRUNCATED &&
        (c->why == POLICY_REASON_CONTEXT_OVERFLOW ||
         c->why == POLICY_REASON_TOO_LARGE))
        return false;
    return c->outcome == POLICY_TRUNCATED ||
           c->outcome == POLICY_SCHEMA_INVALID ||
           c->outcome == POLICY_SERVER_ERROR || c->outcome == POLICY_TIMEOUT ||
           c->outcome == POLICY_UNKNOWN;
}

/* Splits text into NUL-terminated lines in place (the buffer is a copy). */
static size_t
split_headers(char **text, char *end, struct policy_header *h)
{
    size_t n = 0;

    while (*text < end) {
        char *nl = memchr(*text, '\n', (size_t)(end - *text));
        char *line = *text, *colon;

        if (nl == NULL)
            break;
        *nl = '\0';
        *text = nl + 1;
        if (line[0] == '\0')
            break; /* the empty line ends the headers */
        colon = strchr(line, ':');
        if (colon == NULL || n == MAX_HEADERS)
            continue;
        *colon = '\0';
        h[n].name = line;
        h[n].value = colon + 1 + (colon[1] == ' ');
        n++;
    }
    return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct policy_header headers[MAX_HEADERS];
    struct policy_input in;
    struct policy_config cfg;
    struct policy_streak streak = {0, 0};
    struct policy_class c;
    struct policy_step s;
    struct policy_decision d;
    char *text, *p, *end, *body = NULL;
    uint8_t flags;

    if (size < 8)
        return 0;
    rules_init();
    flags = data[4];
    memset(&in, 0, sizeof(in));
    in.status = ((data[0] << 8) | data[1]) % 1000;
    in.transport = (enum policy_transport)(data[2] % POLICY_TRANSPORT_COUNT);
    in.parsed = (enum policy_parsed)(data[3] % 3);
    in.http_step = (flags & 1) != 0;
    in.now_ms = 1764473000123;
    /* The text part, NUL-terminated so header strings can point into it. */
    text = malloc(size - 8 + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data + 8, size - 8);
    text[size - 8] = '\0';
    p = text;
    end = text + (size - 8);
    if (flags & 8) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl != NULL) {
            *nl = '\0';
            in.finish_reason = p;
            p = nl + 1;
        }
    }
    in.headers = headers;
    in.nheaders = split_headers(&p, end, headers);
    /* The body in an exact-size buffer: a read past body_len is reported. */
    in.body_len = (size_t)(end - p);
    body = malloc(in.body_len > 0 ? in.body_len : 1);
    if (body == NULL) {
        free(text);
        return 0;
    }
    memcpy(body, p, in.body_len);
    in.body = body;
    if (flags & 2) {
        streak.count = 3;
        streak.first_ms = in.now_ms - 400000;
    }

    policy_config_init(&cfg, NULL, (flags & 4) ? rules : NULL);
    policy_classify(&in, &cfg, (flags & 2) ? &streak : NULL, &c);
    if ((unsigned)c.outcome >= POLICY_OUTCOME_COUNT)
        abort();
    if (c.outcome != POLICY_OK && c.reason == NULL)
        abort();
    /* wait_ms is not documented as clamped (an unsuffixed
     * x-ratelimit-reset of N < 1e9 seconds gives N * 1000 ms, beyond
     * POLICY_MAX_WAIT_MS), so only its sign is checked. */
    if (c.wait_ms < -1)
        abort();

    memset(&s, 0, sizeof(s));
    s.attempts_left = data[5] & 7;
    s.attempts_used = 3 - (s.attempts_left > 3 ? 3 : s.attempts_left);
    s.input_tokens = 1200;
    s.token_budget = (flags & 128) ? 0 : 1500;
    s.tiers_left = (data[5] >> 3) & 3;
    s.replayable = (flags & 16) != 0;
    s.side_effects = (flags & 32) != 0;
    s.idempotency_key = (flags & 64) != 0;
    s.write_may_have_happened = policy_write_may_have_happened(&in);
    s.degraded = (flags & 128) != 0;
    s.schema_retried = (data[5] & 32) != 0;
    s.breaker = (enum policy_breaker)((data[5] >> 6) % POLICY_BREAKER_COUNT);
    s.slack_ms = (int64_t)data[6] * 10000;
    s.throttle_waits_used = data[7] % 32;
    s.now_ms = in.now_ms;
    s.seed = (uint64_t)size * 2654435761u;
    policy_decide(&c, &s, &cfg, &d);
    if ((unsigned)d.action >= POLICY_ACTION_COUNT || d.wait_ms < 0 ||
        d.reason == NULL)
        abort();
    /* docs/reference.md: a side-effecting step without a key whose write may
     * have happened, or that hit a wall or a refusal, goes to a human. */
    if (s.side_effects && !s.idempotency_key && !s.replayable) {
        if (s.write_may_have_happened && in_doubt_outcome(&c) &&
            d.action != POLICY_PARK_FOR_HUMAN)
            abort();
        if ((c.outcome == POLICY_HARD_QUOTA || c.outcome == POLICY_REFUSED) &&
            d.action != POLICY_PARK_FOR_HUMAN)
            abort();
        if (d.action == POLICY_SWITCH_TIER_REPLAY)
            abort();
    }
    free(body);
    free(text);
    return 0;
}

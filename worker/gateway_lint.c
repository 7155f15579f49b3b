/* gateway_lint.c: worker_gateway_warnings (declared in worker/worker.h), what
 * `stepq tiers --check` warns of in a tier that goes through a gateway.
 *
 * Two things a gateway can quietly undo, whatever the provider behind it:
 *
 * - Replay safety. stepq sends a step's idempotency key as Idempotency-Key;
 *   a side-effecting step is replayed after a lost answer only because the
 *   provider sees that key. The Portkey gateway does not pass the header
 *   on unless the request names it in x-portkey-forward-headers (checked
 *   against @portkey-ai/gateway 1.15.2: the provider saw no key without
 *   it, the key with it). The LiteLLM proxy forwards only x- headers to a
 *   provider (its documentation), so no tier setting can carry the key.
 * - Retries. A gateway that retries by itself multiplies stepq's attempts
 *   and hides the provider's 429 and its wait: on the Portkey gateway a
 *   retried 429 came back late, or as a 500 (docs/endpoints.md).
 *
 * Only the config is read: an env: value is not read, so what it holds is
 * not judged (no warning either way). A gateway is known by its headers
 * (x-portkey-*, x-litellm-*, cf-aig-*) or by its host.
 */
#include "worker/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "common/config.h"

#define FORWARD "x-portkey-forward-headers"

enum gateway { GW_NONE, GW_PORTKEY, GW_LITELLM, GW_CLOUDFLARE };

static const char *
header(const struct config_tier *t, const char *name)
{
    for (size_t i = 0; i < t->nheaders; i++)
        if (strcasecmp(t->headers[i].name, name) == 0)
            return t->headers[i].value;
    return NULL;
}

static bool
is_env(const char *v)
{
    return v != NULL && strncmp(v, "env:", 4) == 0;
}

/* host_has tells whether the host of base_url holds word (lower-case). */
static bool
host_has(const char *base_url, const char *word)
{
    const char *h = strstr(base_url, "://");
    char host[256];
    size_t n = 0;

    h = h != NULL ? h + 3 : base_url;
    for (; h[n] != '\0' && strchr("/:?#", h[n]) == NULL; n++) {
        if (n + 1 >= sizeof(host))
            break;
        host[n] = (char)(h[n] >= 'A' && h[n] <= 'Z' ? h[n] + 32 : h[n]);
    }
    host[n] = '\0';
    return strstr(host, word) != NULL;
}

static enum gateway
gateway_of(const struct config_tier *t)
{
    for (size_t i = 0; i < t->nheaders; i++) {
        if (strncasecmp(t->headers[i].name, "x-portkey-", 10) == 0)
            return GW_PORTKEY;
        if (strncasecmp(t->headers[i].name, "x-litellm-", 10) == 0)
            return GW_LITELLM;
        if (strncasecmp(t->headers[i].name, "cf-aig-", 7) == 0)
            return GW_CLOUDFLARE;
    }
    if (host_has(t->base_url, "portkey"))
        return GW_PORTKEY;
    if (host_has(t->base_url, "litellm"))
        return GW_LITELLM;
    if (host_has(t->base_url, "gateway.ai.cloudflare.com"))
        return GW_CLOUDFLARE;
    return GW_NONE;
}

/* list_has tells whether a comma-separated list holds name (any case). */
static bool
list_has(const char *list, const char *name)
{
    size_t len = strlen(name);

    for (const char *p = list; *p != '\0';) {
        const char *end;
        size_t n;

        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        end = p + strcspn(p, ",");
        n = (size_t)(end - p);
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n == len && strncasecmp(p, name, len) == 0)
            return true;
        p = end;
    }
    return false;
}

/* config_forwards tells whether an inline config (or a target of it) lists
 * idempotency-key in forward_headers. */
static bool
config_forwards(const cJSON *c)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "forward_headers");
    const cJSON *e;

    cJSON_ArrayForEach(e, f)
    {
        if (cJSON_IsString(e) &&
            strcasecmp(e->valuestring, "idempotency-key") == 0)
            return true;
    }
    cJSON_ArrayForEach(e, c)
    {
        if ((cJSON_IsObject(e) || cJSON_IsArray(e)) && config_forwards(e))
            return true;
    }
    return false;
}

/* config_retries returns the largest retry.attempts of an inline config
 * and its targets (0: none). */
static int
config_retries(const cJSON *c)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(c, "retry");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "attempts");
    const cJSON *e;
    int most = 0, n;

    if (cJSON_IsObject(r) && cJSON_IsNumber(a) && a->valuedouble >= 1)
        most = a->valuedouble > 1e6 ? 1000000 : (int)a->valuedouble;
    cJSON_ArrayForEach(e, c)
    {
        if ((cJSON_IsObject(e) || cJSON_IsArray(e)) &&
            (n = config_retries(e)) > most)
            most = n;
    }
    return most;
}

#define RETRY_HARM                                                             \
    "leave retries to stepq (the gateway's retries multiply stepq's and "      \
    "hide the provider's 429 and its wait)"
#define KEY_HARM "so a side-effecting step through it loses its replay safety"

static void
add(cJSON *warnings, const char *text)
{
    cJSON_AddItemToArray(warnings, cJSON_CreateString(text));
}

static void
portkey(const struct config_tier *t, cJSON *warnings)
{
    const char *fwd = header(t, FORWARD);
    const char *cfg = header(t, "x-portkey-config");
    cJSON *inline_cfg = NULL;
    bool forwarded = fwd != NULL && list_has(fwd, "idempotency-key");
    char buf[512];
    int tries = 0;

    if (cfg != NULL && !is_env(cfg))
        inline_cfg = cJSON_Parse(cfg); /* a saved config id is not JSON */
    if (cJSON_IsObject(inline_cfg)) {
        /* The header, when sent, is the whole list: the gateway reads the
         * config's forward_headers only without it. */
        forwarded = fwd != NULL ? forwarded : config_forwards(inline_cfg);
        tries = config_retries(inline_cfg);
    }
    if (!forwarded && !is_env(fwd) && !is_env(cfg)) {
        snprintf(buf, sizeof(buf),
                 "tier %s: Portkey drops Idempotency-Key, " KEY_HARM
                 ": add the header \"" FORWARD "\": \"idempotency-key\"",
                 t->name);
        add(warnings, buf);
    }
    if (tries > 0) {
        snprintf(buf, sizeof(buf),
                 "tier %s: x-portkey-config asks the gateway to retry "
                 "(retry.attempts %d): remove \"retry\" and " RETRY_HARM,
                 t->name, tries);
        add(warnings, buf);
    }
    cJSON_Delete(inline_cfg);
}

/* count_header warns when a header asks for more than one attempt (or
 * above zero retries): min is the first value that does. */
static void
count_header(const struct config_tier *t, const char *name, long min,
             cJSON *warnings)
{
    const char *v = header(t, name);
    char buf[512], *end;
    long n;

    if (v == NULL || is_env(v))
        return;
    n = strtol(v, &end, 10);
    if (end == v || n < min)
        return;
    snprintf(buf, sizeof(buf),
             "tier %s: the header %s asks the gateway to retry: remove it "
             "and " RETRY_HARM,
             t->name, name);
    add(warnings, buf);
}

void
worker_gateway_warnings(const struct config_tier *t, cJSON *warnings)
{
    char buf[512];

    switch (gateway_of(t)) {
    case GW_PORTKEY:
        portkey(t, warnings);
        break;
    case GW_LITELLM:
        snprintf(buf, sizeof(buf),
                 "tier %s: the LiteLLM proxy forwards no Idempotency-Key to "
                 "the provider (only x- headers), " KEY_HARM
                 ": give such steps a tier that reaches the provider "
                 "directly",
                 t->name);
        add(warnings, buf);
        count_header(t, "x-litellm-num-retries", 1, warnings);
        break;
    case GW_CLOUDFLARE:
        count_header(t, "cf-aig-max-attempts", 2, warnings);
        break;
    case GW_NONE:
        break;
    }
}

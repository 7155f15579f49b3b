/* fuzz_serve_route.c: libFuzzer target for the router of `stepq serve`
 * (serve_match): the input is "METHOD URL", split at the first space. Any
 * input must be matched or refused (404, 405), never crash; a match must
 * be stable: the path written again from the route and its id matches
 * the same way. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/internal.h"

/* The path of route r with id, as a client would write it. */
static const char *
path_of(enum serve_route_id r, int64_t id, char *buf, size_t len)
{
    static const char *const fixed[] = {
        [R_HEALTH] = "/healthz",   [R_STATUS] = "/v1/status",
        [R_TIERS] = "/v1/tiers",   [R_JOBS_LIST] = "/v1/jobs",
        [R_JOBS_ADD] = "/v1/jobs", [R_PARK_LIST] = "/v1/park",
        [R_METRICS] = "/metrics",  [R_PARK_RESOLVE_ALL] = "/v1/park/resolve",
    };
    static const char *const with_id[] = {
        [R_JOB] = "/v1/jobs/%lld",
        [R_JOB_CANCEL] = "/v1/jobs/%lld/cancel",
        [R_JOB_RETRY] = "/v1/jobs/%lld/retry",
        [R_PARK] = "/v1/park/%lld",
        [R_PARK_RESOLVE] = "/v1/park/%lld/resolve",
    };

    if (r < sizeof(with_id) / sizeof(with_id[0]) && with_id[r] != NULL) {
        snprintf(buf, len, with_id[r], (long long)id);
        return buf;
    }
    return r < sizeof(fixed) / sizeof(fixed[0]) ? fixed[r] : NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), *url, again[64];
    enum serve_route_id r, r2;
    const struct serve_asset *page = NULL, *page2 = NULL;
    int64_t id = 0, id2 = 0;
    int rc;

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    url = strchr(text, ' ');
    if (url == NULL) {
        free(text);
        return 0;
    }
    *url++ = '\0';
    rc = serve_match(text, url, &r, &id, &page);
    if (rc != 0 && rc != -ENOENT && rc != -EPERM)
        abort();
    if (rc == 0 && r == R_PAGE && (page == NULL || strcmp(page->url, url)))
        abort();
    if (rc == 0 && r != R_PAGE) {
        const char *p = path_of(r, id, again, sizeof(again));
        if (p == NULL || id < 0 ||
            serve_match(text, p, &r2, &id2, &page2) != 0 || r2 != r ||
            id2 != id)
            abort();
    }
    free(text);
    return 0;
}

/* route.c: which route a request is for, by its method and path; no
 * I/O, so the fuzzer can drive it (fuzz/fuzz_serve_route.c). */
#include "serve/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A route: a method and a path of fixed words, where "#" stands for an id. */
static const struct {
    enum serve_route_id r;
    const char *method, *path;
} routes[] = {
    {R_HEALTH, "GET", "/healthz"},
    {R_STATUS, "GET", "/v1/status"},
    {R_TIERS, "GET", "/v1/tiers"},
    {R_JOBS_LIST, "GET", "/v1/jobs"},
    {R_JOBS_ADD, "POST", "/v1/jobs"},
    {R_JOBS_CHECK, "POST", "/v1/jobs/check"},
    {R_JOB, "GET", "/v1/jobs/#"},
    {R_JOB_CANCEL, "POST", "/v1/jobs/#/cancel"},
    {R_PARK_LIST, "GET", "/v1/park"},
    {R_PARK_RESOLVE_ALL, "POST", "/v1/park/resolve"},
    {R_PARK, "GET", "/v1/park/#"},
    {R_PARK_RESOLVE, "POST", "/v1/park/#/resolve"},
    {R_METRICS, "GET", "/metrics"},
    {R_REPORT, "GET", "/v1/report"},
    {R_JOB_RETRY, "POST", "/v1/jobs/#/retry"},
    {R_ME, "GET", "/v1/me"},
    {R_AUDIT, "GET", "/v1/audit"},
};

int64_t
serve_whole(const char *s, size_t n)
{
    int64_t v = 0;

    if (n == 0 || n > 18)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* Whether url fits pattern; *id gets the number "#" stood for. */
static bool
fits(const char *pattern, const char *url, int64_t *id)
{
    while (*pattern != '\0') {
        if (*pattern == '#') {
            size_t n = strspn(url, "0123456789");
            int64_t v = serve_whole(url, n);
            if (v < 1)
                return false;
            *id = v;
            url += n;
            pattern++;
        } else if (*pattern++ != *url++) {
            return false;
        }
    }
    return *url == '\0';
}

static bool
is_get(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}

int
serve_match(const char *method, const char *url, enum serve_route_id *r,
            int64_t *id, const struct serve_asset **page)
{
    const struct serve_asset *a = serve_asset_find(url);
    bool path_known = a != NULL;
    int64_t n = 0;

    if (a != NULL && is_get(method)) {
        *r = R_PAGE;
        *page = a;
        return 0;
    }
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        if (!fits(routes[i].path, url, &n))
            continue;
        path_known = true;
        if (strcmp(routes[i].method, method) == 0 ||
            (strcmp(routes[i].method, "GET") == 0 && is_get(method))) {
            *r = routes[i].r;
            *id = n;
            return 0;
        }
    }
    return path_known ? -EPERM : -ENOENT;
}

void
serve_allowed(const char *url, char *buf, size_t len)
{
    bool get = serve_asset_find(url) != NULL, post = false;
    int64_t n = 0;

    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        if (fits(routes[i].path, url, &n)) {
            get = get || strcmp(routes[i].method, "GET") == 0;
            post = post || strcmp(routes[i].method, "POST") == 0;
        }
    }
    snprintf(buf, len, "%s%s%s", get ? "GET, HEAD" : "",
             get && post ? ", " : "", post ? "POST" : "");
}

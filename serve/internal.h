/* internal.h: what serve/'s files share (private to serve/). */
#ifndef STEPQ_SERVE_INTERNAL_H
#define STEPQ_SERVE_INTERNAL_H

#include <microhttpd.h>

#include <cjson/cJSON.h>

#include "park/park.h"
#include "serve/serve.h"

/* One request: its body as it arrives. */
struct serve_req {
    char *body; /* owned; NUL-terminated */
    size_t len, cap;
    /* Bytes of a body without an announced length read past --max-body
     * and dropped, so that its end can be answered with a 413. */
    size_t dropped;
};

/* The routes of the API, and the web view's files (R_PAGE). */
enum serve_route_id {
    R_PAGE,
    R_HEALTH,
    R_STATUS,
    R_TIERS,
    R_JOBS_LIST,
    R_JOBS_ADD,
    R_JOB,
    R_JOB_CANCEL,
    R_PARK_LIST,
    R_PARK_RESOLVE_ALL,
    R_PARK,
    R_PARK_RESOLVE,
    R_METRICS,
    R_REPORT,
    R_JOB_RETRY,
    R_JOBS_CHECK
};

struct serve_asset;

/* serve_match finds the route of method on url (the path, without the
 * query): 0 with *r set, *id the number in the path (job or park id;
 * left alone when the path has none) and, for R_PAGE, *page the file;
 * -EPERM when the path exists with other methods only (405); -ENOENT when
 * no route has the path (404). Ids are 1 to 18 digits. */
int serve_match(const char *method, const char *url, enum serve_route_id *r,
                int64_t *id, const struct serve_asset **page);

/* serve_allowed writes the methods url has routes for into buf (len
 * bytes): "GET, HEAD", "POST" or both, for a 405's Allow header. */
void serve_allowed(const char *url, char *buf, size_t len);

/* serve_whole reads text of n bytes as a whole number of at most 18
 * digits (an id, a page size), or returns -1 if it is not one. */
int64_t serve_whole(const char *s, size_t n);

/* serve_authorized tells whether c carries o's token ("Authorization:
 * Bearer TOKEN"); always true when o asks none. */
bool serve_authorized(const struct serve_opts *o, struct MHD_Connection *c);

/* serve_host_is_local tells whether c's Host names this machine
 * (127.0.0.1, localhost, [::1], any port; none given counts): without a
 * token, a page on a name rebound to 127.0.0.1 must get nothing. */
bool serve_host_is_local(struct MHD_Connection *c);

/* serve_cross_site tells whether a request of method on c is a write
 * from another site's page (its Origin is not this server's, or its
 * Sec-Fetch-Site is not same-origin). */
bool serve_cross_site(struct MHD_Connection *c, const char *method);

/* serve_route answers one whole request (body of len bytes, or NULL) on
 * c: the API of docs/reference.md ("stepq serve"). */
enum MHD_Result serve_route(const struct serve_opts *o,
                            struct MHD_Connection *c, const char *method,
                            const char *url, const char *body, size_t len);

/* serve_read_decision reads a resolution body (len bytes, NUL-terminated;
 * NULL when empty) into d, and in bulk the filter f, and checks it by
 * park/'s rules against cfg (NULL: tiers not checked). Returns 0 with
 * *doc set (the strings of d and f point into it: the caller deletes it
 * after use), or -EINVAL with the reason in err and *doc NULL. d->now is
 * left for the caller. */
int serve_read_decision(const struct config *cfg, const char *body, size_t len,
                        bool bulk, cJSON **doc, struct park_decision *d,
                        struct q_park_filter *f, char *err, size_t errlen);

/* serve_metrics answers GET /metrics: the store's numbers as of now in
 * Prometheus' text format; 503 when the store cannot be read. */
enum MHD_Result serve_metrics(const struct serve_opts *o,
                              struct MHD_Connection *c, int64_t now);

/* One file of the web park view, built into the binary. */
struct serve_asset {
    const char *url, *type;
    const unsigned char *data;
    size_t len;
};

/* serve_assets lists the web view's files, ending with a NULL url (made at
 * build time by cmake/embed.cmake from serve/web/). */
extern const struct serve_asset serve_assets[];

/* serve_asset_find is the file served at url (GET), or NULL. */
const struct serve_asset *serve_asset_find(const char *url);

/* serve_reply_asset queues a (borrowed, static) as the answer, with the
 * headers that keep the page to itself: no framing by other sites, no
 * script or style but its own, no sniffing. */
enum MHD_Result serve_reply_asset(struct MHD_Connection *c,
                                  const struct serve_asset *a);

/* serve_reply_json queues body (consumed, whatever happens) as the
 * answer with status. */
enum MHD_Result serve_reply_json(struct MHD_Connection *c, unsigned status,
                                 cJSON *body);

/* serve_reply_error queues {"error": {"code", "message"}} with status. */
enum MHD_Result serve_reply_error(struct MHD_Connection *c, unsigned status,
                                  const char *code, const char *fmt, ...)
    STEPQ_PRINTF(4, 5);

#endif

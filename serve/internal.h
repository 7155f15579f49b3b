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
};

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

/* serve_reply_json queues body (consumed, whatever happens) as the
 * answer with status. */
enum MHD_Result serve_reply_json(struct MHD_Connection *c, unsigned status,
                                 cJSON *body);

/* serve_reply_error queues {"error": {"code", "message"}} with status. */
enum MHD_Result serve_reply_error(struct MHD_Connection *c, unsigned status,
                                  const char *code, const char *fmt, ...)
    STEPQ_PRINTF(4, 5);

#endif

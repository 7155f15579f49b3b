/* internal.h: what serve/'s files share (private to serve/). */
#ifndef STEPQ_SERVE_INTERNAL_H
#define STEPQ_SERVE_INTERNAL_H

#include <microhttpd.h>

#include <cjson/cJSON.h>

#include "park/park.h"
#include "queue/park.h"
#include "serve/serve.h"

/* Who made a request: a named operator, the holder of the shared token
 * (--token-env, no operator in the store) or anyone (--no-auth, no
 * operator), with the role that allows; and the client's address. */
enum serve_mode { SERVE_OPEN, SERVE_SHARED, SERVE_NAMED }; /* 0: a page's */
struct serve_caller {
    enum serve_mode mode;
    struct park_caller op; /* SERVE_NAMED: the name; every mode: the role */
    char addr[64];         /* "127.0.0.1", "::1" */
};

/* Failed logins per client address, for slowing them (checks.c): after
 * SERVE_GATE_FAILS failures within SERVE_GATE_WINDOW_MS of the first,
 * every request of that address is answered 429 with Retry-After until
 * the window ends. */
#define SERVE_GATE_FAILS     10
#define SERVE_GATE_WINDOW_MS 60000
#define SERVE_GATE_SLOTS     256
struct serve_gate {
    struct {
        char addr[64];
        int64_t first; /* loop time of the window's first failure */
        unsigned fails;
    } slot[SERVE_GATE_SLOTS];
};

/* One request: its body as it arrives. */
struct serve_req {
    struct serve_caller who;
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
    R_ME,
    R_AUDIT,
    R_JOBS_CHECK
};

struct serve_asset;

/* serve_open_listener binds where ("HOST:PORT") and listens: 0 with *fd
 * and the address taken in addr ("127.0.0.1:40117"), or a negative errno
 * with the reason in err (listen.c). */
int serve_open_listener(const char *where, int *fd, char *addr, size_t alen,
                        char *err, size_t len);

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

/* serve_identify tells who c is by its "Authorization: Bearer TOKEN":
 * a named operator's token once the store has operators (then nothing
 * else), else o's shared token (any caller when o has none). g slows
 * failed logins per address (now: the loop's time, ms). Returns 0 with
 * *who set; -EACCES for a missing or wrong token (401; counted); -EAGAIN
 * when the address failed too often (429, *retry_s the seconds left of
 * its window); or the store's error (503). */
int serve_identify(const struct serve_opts *o, struct serve_gate *g,
                   struct MHD_Connection *c, int64_t now,
                   struct serve_caller *who, unsigned *retry_s);

/* serve_role_allows tells whether who may call route r with method:
 * every role reads (GET, HEAD); resolver and admin resolve park items
 * and cancel jobs; everything else is admin's. */
bool serve_role_allows(const struct serve_caller *who, enum serve_route_id r,
                       const char *method);

/* serve_audit_by fills who, source and now of an audit row (park_audit)
 * for a write by who: the operator's name, "token" (the shared token) or
 * "anonymous" (--no-auth). */
void serve_audit_by(const struct serve_caller *who, int64_t now,
                    struct park_audit *a);

/* serve_by_refused checks the "by" of a resolution or retry against who:
 * a named operator's must be its own name (by was set to it before the
 * body was read, so a body without one takes it). Returns false, or true
 * after queueing a 403 on c (*ret). */
bool serve_by_refused(const struct serve_caller *who, const char *by,
                      struct MHD_Connection *c, enum MHD_Result *ret);

/* serve_conflict_resolved answers 409 for park item id that a racing
 * resolution closed first, naming who resolved it and how. */
enum MHD_Result serve_conflict_resolved(const struct serve_opts *o,
                                        struct MHD_Connection *c, int64_t id);

/* serve_me answers GET /v1/me: {"name", "role", "mode"}; serve_audit
 * answers GET /v1/audit?since= as `stepq audit --json`. */
enum MHD_Result serve_me(const struct serve_caller *who,
                         struct MHD_Connection *c);
enum MHD_Result serve_audit(const struct serve_opts *o,
                            struct MHD_Connection *c, int64_t now);

/* serve_host_is_local tells whether c's Host names this machine
 * (127.0.0.1, localhost, [::1], any port; none given counts): without a
 * token, a page on a name rebound to 127.0.0.1 must get nothing. */
bool serve_host_is_local(struct MHD_Connection *c);

/* serve_cross_site tells whether a request of method on c is a write
 * from another site's page (its Origin is not this server's, or its
 * Sec-Fetch-Site is not same-origin). */
bool serve_cross_site(struct MHD_Connection *c, const char *method);

/* serve_route answers one whole request (body of len bytes, or NULL) on
 * c for who: the API of docs/reference.md ("stepq serve"). */
enum MHD_Result serve_route(const struct serve_opts *o,
                            const struct serve_caller *who,
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

/* serve_storage_error answers a storage error: 503 when the store is busy
 * or away (try again), else 500, saying what it could not do. */
enum MHD_Result serve_storage_error(struct MHD_Connection *c, int rc,
                                    const char *doing);
/* serve_store_now is now by the store's clock (ms). */
int64_t serve_store_now(const struct serve_opts *o);
/* serve_arg is query parameter name of c, or NULL. */
const char *serve_arg(struct MHD_Connection *c, const char *name);

/* serve_job_show answers GET /v1/jobs/ID: the job as `jobs show --json`
 * gives it; 404 when there is none. */
enum MHD_Result serve_job_show(const struct serve_opts *o,
                               struct MHD_Connection *c, int64_t id);

/* ---- the long-poll (wait.c) -------------------------------------------
 * GET /v1/jobs/ID?wait=SECONDS: a request whose job has not ended is
 * suspended until it ends or parks, or its seconds are up, and then
 * answered as GET /v1/jobs/ID; on the server's one loop, no thread each. */
#define SERVE_WAIT_MAX_S 50

struct serve_waits;
struct uv_loop_s;

/* serve_waits_new makes the waiters' registry of a server on loop (its
 * timer reads the waited jobs through o->db; kick(arg) runs the daemon
 * once it resumed some). Free with serve_waits_close (the memory goes in
 * the timer's close callback: run the loop after). */
struct serve_waits *serve_waits_new(struct uv_loop_s *loop,
                                    const struct serve_opts *o,
                                    void (*kick)(void *arg), void *arg);
void serve_waits_close(struct serve_waits *w);
/* serve_waits_stop resumes every waiter now (the caller runs the daemon
 * after), and answers every later wait at once (a stop). */
void serve_waits_stop(struct serve_waits *w);
/* serve_waits_forget drops the waiter of c's request (its request
 * completed, or its connection closed); w NULL (closed): nothing. */
void serve_waits_forget(struct serve_waits *w, struct MHD_Connection *c);
/* serve_waits_of is the registry of the server c belongs to (server.c). */
struct serve_waits *serve_waits_of(struct MHD_Connection *c);
/* serve_wait_job answers GET /v1/jobs/ID?wait=: at once when the job has
 * ended (or parked since), is unknown, or wait is 0; else suspends c until
 * then (MHD_YES, nothing queued) and answers when its request comes back;
 * 400 when wait is not 0 to SERVE_WAIT_MAX_S whole seconds. */
enum MHD_Result serve_wait_job(struct MHD_Connection *c, int64_t id);

/* The park routes (api_park.c); serve_route calls them. */
enum MHD_Result serve_park_list(const struct serve_opts *o,
                                struct MHD_Connection *c);
enum MHD_Result serve_park_show(const struct serve_opts *o,
                                struct MHD_Connection *c, int64_t id);
enum MHD_Result serve_park_resolve_one(const struct serve_opts *o,
                                       const struct serve_caller *who,
                                       struct MHD_Connection *c, int64_t id,
                                       const char *body, size_t len);
enum MHD_Result serve_park_resolve_all(const struct serve_opts *o,
                                       const struct serve_caller *who,
                                       struct MHD_Connection *c,
                                       const char *body, size_t len);

#endif

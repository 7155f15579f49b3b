/* wait.c: GET /v1/jobs/ID?wait=SECONDS, the long-poll. A request whose
 * job has not ended is suspended (libmicrohttpd's suspend and resume on
 * the server's one loop: a waiter holds a connection and a few bytes, no
 * thread), and one timer reads the waited jobs from the store every
 * WAIT_POLL_MS while any waits. A waiter is resumed when its job ends,
 * parks (view_wait_over), goes away, its time is up or the server
 * stops; the resumed request comes through its route again, finds its
 * waiter finished and answers with the job as GET /v1/jobs/ID does. */
#include "serve/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "view/view.h"

/* How often the waited jobs are read from the store. */
#define WAIT_POLL_MS 200

struct serve_waiter {
    struct serve_waiter *prev, *next;
    struct MHD_Connection *c;
    int64_t job_id;
    int64_t until;      /* loop time (ms) at which it answers as it is */
    int64_t parked_ver; /* the job's updated_at while parked at the start;
                           -1: it was not parked */
    bool done;          /* resumed: its request answers when it comes back */
};

struct serve_waits {
    const struct serve_opts *o;
    uv_loop_t *loop;
    void (*kick)(void *arg); /* runs libmicrohttpd after a resume */
    void *arg;
    uv_timer_t timer;
    struct serve_waiter *list; /* every waiter, suspended or done */
    size_t n;                  /* of them, suspended */
    bool stopping;             /* no new waits: each is answered at once */
};

struct serve_waits *
serve_waits_new(uv_loop_t *loop, const struct serve_opts *o,
                void (*kick)(void *arg), void *arg)
{
    struct serve_waits *w = xcalloc(1, sizeof(*w));

    w->o = o;
    w->kick = kick;
    w->arg = arg;
    w->loop = loop;
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    return w;
}

static void
on_timer_closed(uv_handle_t *h)
{
    free(h->data);
}

void
serve_waits_close(struct serve_waits *w)
{
    if (w == NULL)
        return;
    while (w->list != NULL) { /* done ones whose request never came back */
        struct serve_waiter *x = w->list;
        w->list = x->next;
        free(x);
    }
    uv_close((uv_handle_t *)&w->timer, on_timer_closed);
}

/* Resumes x: its request comes back through its route and answers. */
static void
wake(struct serve_waits *w, struct serve_waiter *x)
{
    if (x->done)
        return;
    x->done = true;
    w->n--;
    MHD_resume_connection(x->c);
}

static int
cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* Reads each waited job once (many may wait on one) and wakes the
 * waiters whose job answers, is gone, or whose time is up. */
static void
on_poll(uv_timer_t *t)
{
    struct serve_waits *w = t->data;
    int64_t now = (int64_t)uv_now(w->loop);
    int64_t *ids = xcalloc(w->n + 1, sizeof(*ids));
    struct {
        enum q_job_state st;
        int64_t ver;
        int rc;
    } *seen = xcalloc(w->n + 1, sizeof(*seen));
    size_t n = 0, k = 0, woken = w->n;
    /* One read lock for every waited job, not one a job (200 waiters: 200
     * locks taken and dropped every poll). Without it the reads go on,
     * each on its own. */
    bool snap;

    for (struct serve_waiter *x = w->list; x != NULL; x = x->next)
        if (!x->done)
            ids[n++] = x->job_id;
    qsort(ids, n, sizeof(*ids), cmp_id);
    snap = n > 0 && q_read_begin(w->o->db) == 0;
    for (size_t i = 0; i < n; i++) {
        struct q_job j = {0};
        if (k > 0 && ids[k - 1] == ids[i])
            continue;
        ids[k] = ids[i];
        seen[k].rc = q_job_get(w->o->db, ids[i], &j);
        seen[k].st = j.state;
        seen[k++].ver = j.updated_at;
        q_job_cleanup(&j);
    }
    if (snap)
        q_read_end(w->o->db);
    for (struct serve_waiter *x = w->list; x != NULL; x = x->next) {
        const int64_t *at =
            x->done ? NULL : bsearch(&x->job_id, ids, k, sizeof(*ids), cmp_id);
        size_t i = at != NULL ? (size_t)(at - ids) : 0;
        if (at == NULL)
            continue;
        /* A store that cannot be read now is asked again at the next
         * poll; a job gone (pruned) is answered: 404. */
        if (now >= x->until || seen[i].rc == -ENOENT ||
            (seen[i].rc == 0 &&
             view_wait_over(seen[i].st, seen[i].ver, x->parked_ver)))
            wake(w, x);
    }
    free(ids);
    free(seen);
    if (w->n == 0)
        uv_timer_stop(&w->timer);
    /* A resumed connection is handled at the daemon's next run: now,
     * rather than at its next event or timeout (microhttpd.h says so of
     * external polling). */
    if (w->n < woken)
        w->kick(w->arg);
}

void
serve_waits_stop(struct serve_waits *w)
{
    w->stopping = true;
    for (struct serve_waiter *x = w->list; x != NULL; x = x->next)
        wake(w, x);
    uv_timer_stop(&w->timer);
}

/* The waiter of c's request, or NULL. */
static struct serve_waiter *
find(struct serve_waits *w, struct MHD_Connection *c)
{
    for (struct serve_waiter *x = w->list; x != NULL; x = x->next)
        if (x->c == c)
            return x;
    return NULL;
}

static void
unlink_waiter(struct serve_waits *w, struct serve_waiter *x)
{
    if (x->prev != NULL)
        x->prev->next = x->next;
    else
        w->list = x->next;
    if (x->next != NULL)
        x->next->prev = x->prev;
    free(x);
}

/* Reads ?wait= (whole seconds, 0 to SERVE_WAIT_MAX_S) into *s; false
 * after queueing the 400 on c (*ret). */
static bool
wait_seconds(struct MHD_Connection *c, int64_t *s, enum MHD_Result *ret)
{
    const char *v = serve_arg(c, "wait");

    *s = v != NULL ? serve_whole(v, strlen(v)) : -1;
    if (*s >= 0 && *s <= SERVE_WAIT_MAX_S)
        return true;
    *ret = serve_reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request",
                             "wait must be a whole number of seconds from 0 "
                             "to %d (under the 60 s a proxy such as nginx "
                             "waits for an answer by default); to wait "
                             "longer, ask again",
                             SERVE_WAIT_MAX_S);
    return false;
}

void
serve_waits_forget(struct serve_waits *w, struct MHD_Connection *c)
{
    struct serve_waiter *x = w != NULL ? find(w, c) : NULL;

    if (x == NULL)
        return;
    if (!x->done)
        w->n--;
    unlink_waiter(w, x);
}

enum MHD_Result
serve_wait_job(struct MHD_Connection *c, int64_t id)
{
    struct serve_waits *w = serve_waits_of(c);
    struct serve_waiter *x = find(w, c);
    struct q_job j = {0};
    enum MHD_Result ret;
    int64_t secs;
    int rc;

    if (x != NULL) { /* back after its wait */
        unlink_waiter(w, x);
        return serve_job_show(w->o, c, id);
    }
    if (!wait_seconds(c, &secs, &ret))
        return ret;
    if ((rc = q_job_get(w->o->db, id, &j)) != 0 || secs == 0 || w->stopping) {
        q_job_cleanup(&j);
        return rc == 0 || rc == -ENOENT
                   ? serve_job_show(w->o, c, id)
                   : serve_storage_error(c, rc, "read the job");
    }
    x = xcalloc(1, sizeof(*x));
    x->c = c;
    x->job_id = id;
    /* From now, not from the loop's time, which is as old as this turn
     * of the loop (the requests read before this one, the read above):
     * a wait of 2 s answered after 1,985 ms on PostgreSQL. */
    uv_update_time(w->loop);
    x->until = (int64_t)uv_now(w->loop) + secs * 1000;
    x->parked_ver = j.state == Q_JOB_PARKED ? j.updated_at : -1;
    x->done = view_wait_over(j.state, j.updated_at, x->parked_ver);
    q_job_cleanup(&j);
    if (x->done) {
        free(x);
        return serve_job_show(w->o, c, id);
    }
    x->next = w->list;
    if (w->list != NULL)
        w->list->prev = x;
    w->list = x;
    if (w->n++ == 0)
        uv_timer_start(&w->timer, on_poll, WAIT_POLL_MS, WAIT_POLL_MS);
    MHD_suspend_connection(c);
    return MHD_YES;
}

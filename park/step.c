/* step.c: parking a step: the park item and the job's parked state
 * written together under one savepoint, and the on_park hook, told of the
 * item once the caller's transaction has committed. */
#include "park/park.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "park/internal.h"
#include "queue/park.h"

int (*park__tx_begin)(q_db *db) = q_tx_begin;

int
park_step(q_db *db, const struct q_park_new *p, const char *worker, int64_t *id)
{
    int64_t got = 0;
    int rc;

    /* A savepoint inside the caller's transaction: when it cannot even be
     * opened there is nothing of ours to roll back, and a rollback here
     * would abandon the caller's level, the whole turn. */
    if ((rc = park__tx_begin(db)) != 0)
        return rc;
    if ((rc = q_park_add(db, p, &got)) != 0 ||
        (rc = q_park_job(db, p->job_id, worker, p->parked_at)) != 0) {
        q_tx_rollback(db);
        return rc;
    }
    if ((rc = q_tx_commit(db)) != 0)
        return rc;
    *id = got;
    return 0;
}

/* One running hook; freed when its last handle has closed. */
struct hook {
    uv_process_t proc;
    uv_pipe_t in;
    uv_timer_t timer;
    uv_write_t wr;
    char *json;
    char *cmd;
    const char *name; /* "on_park" or "on_report": static */
    int open_handles;
    const char *killed; /* why it was killed, or NULL */
};

static void
on_closed(uv_handle_t *h)
{
    struct hook *k = h->data;

    if (--k->open_handles == 0) {
        free(k->json);
        free(k->cmd);
        free(k);
    }
}

static void
on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    struct hook *k = p->data;

    if (k->killed != NULL)
        log_warn("%s hook killed %s: %s", k->name, k->killed, k->cmd);
    else if (status != 0 || sig != 0)
        log_warn("%s hook exited with status %lld (signal %d): %s", k->name,
                 (long long)status, sig, k->cmd);
    else
        log_info("%s hook ran: %s", k->name, k->cmd);
    uv_close((uv_handle_t *)&k->proc, on_closed);
    uv_close((uv_handle_t *)&k->timer, on_closed);
    if (!uv_is_closing((uv_handle_t *)&k->in))
        uv_close((uv_handle_t *)&k->in, on_closed);
}

static void
kill_hook(struct hook *k, const char *why)
{
    k->killed = why;
    /* The hook runs in its own process group: kill what it started too
     * (a shell's children would otherwise keep our stderr open). */
    if (uv_kill(-k->proc.pid, SIGKILL) != 0)
        uv_process_kill(&k->proc, SIGKILL);
}

static void
on_timeout(uv_timer_t *t)
{
    kill_hook(t->data, "after its time limit");
}

static void
kill_walk_cb(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (h->type == UV_PROCESS && !uv_is_closing(h))
        kill_hook(h->data, "as the worker stopped");
}

void
park_hooks_kill(uv_loop_t *loop)
{
    uv_walk(loop, kill_walk_cb, NULL);
}

static void
on_written(uv_write_t *w, int status)
{
    struct hook *k = w->data;

    /* A hook that does not read its input gets EPIPE: not an error of
     * ours. Closing the pipe gives the hook EOF. */
    (void)status;
    if (!uv_is_closing((uv_handle_t *)&k->in))
        uv_close((uv_handle_t *)&k->in, on_closed);
}

int
park_hook_run(uv_loop_t *loop, const char *name, const char *cmd,
              int64_t timeout_ms, const char *json)
{
    struct hook *k = xcalloc(1, sizeof(*k));
    uv_process_options_t o;
    uv_stdio_container_t stdio[3];
    char *args[4];
    uv_buf_t buf;
    int rc;

    k->json = xstrdup(json);
    k->cmd = xstrdup(cmd);
    k->name = name;
    uv_pipe_init(loop, &k->in, 0);
    k->in.data = k;
    k->open_handles = 1;
    memset(&o, 0, sizeof(o));
    args[0] = "/bin/sh";
    args[1] = "-c";
    args[2] = k->cmd;
    args[3] = NULL;
    stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
    stdio[0].data.stream = (uv_stream_t *)&k->in;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = 2; /* the hook's output goes to our log */
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
    o.file = args[0];
    o.args = args;
    o.stdio = stdio;
    o.stdio_count = 3;
    o.exit_cb = on_exit_cb;
    o.flags = UV_PROCESS_DETACHED; /* its own process group, see on_timeout */
    k->proc.data = k;
    rc = uv_spawn(loop, &k->proc, &o);
    if (rc != 0) {
        log_error("%s hook cannot start: %s: %s", name, cmd, uv_strerror(rc));
        /* uv_spawn failed: the process handle must still be closed. */
        k->open_handles++;
        uv_close((uv_handle_t *)&k->proc, on_closed);
        uv_close((uv_handle_t *)&k->in, on_closed);
        return rc;
    }
    k->open_handles += 2; /* proc and timer */
    uv_timer_init(loop, &k->timer);
    k->timer.data = k;
    uv_timer_start(&k->timer, on_timeout, (uint64_t)timeout_ms, 0);
    buf = uv_buf_init(k->json, (unsigned)strlen(k->json));
    k->wr.data = k;
    if (uv_write(&k->wr, (uv_stream_t *)&k->in, &buf, 1, on_written) != 0)
        uv_close((uv_handle_t *)&k->in, on_closed);
    return 0;
}

/* Runs the on_park command with the item's JSON on its input. A failing or
 * hanging hook never blocks the caller: it runs beside the loop and is
 * killed at its time limit. */
int
park_notify(uv_loop_t *loop, q_db *db, const char *cmd, int64_t timeout_ms,
            int64_t id)
{
    struct q_park_item it;
    cJSON *o;
    char *json;
    int rc;

    if (cmd == NULL)
        return 0;
    if ((rc = q_park_get(db, id, &it)) != 0)
        return rc;
    o = park_item_json(&it);
    q_park_item_cleanup(&it);
    json = json_print(o);
    cJSON_Delete(o);
    rc = park_hook_run(loop, "on_park", cmd, timeout_ms, json);
    if (rc != 0)
        log_warn("park item %lld: on_park hook did not start", (long long)id);
    free(json);
    return rc;
}

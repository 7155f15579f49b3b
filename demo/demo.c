/* demo.c: `stepq demo` from the outside: opening the demo (its folder and
 * files, then the side loop, the mocks, the config, the batch and the side
 * thread, in that order), running the worker on it, and closing it.
 *
 * side.c holds the scripted endpoints and the thread that serves them and
 * samples progress; jobs.c writes the config and makes and enqueues the
 * jobs. What they share is in demo/internal.h.
 */
#include "demo/demo.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "demo/internal.h"
#include "worker/worker.h"

/* ---- files ------------------------------------------------------------ */

static char *
join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = xmalloc(n);

    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

int
demo__write_text(const char *path, const char *text, char *err, size_t len)
{
    FILE *f = fopen(path, "w");
    int rc = 0;

    if (f == NULL || fputs(text, f) == EOF)
        rc = -errno;
    if (f != NULL && fclose(f) != 0 && rc == 0)
        rc = -errno;
    if (rc != 0)
        snprintf(err, len, "cannot write %s: %s", path, strerror(-rc));
    return rc;
}

static int
make_dir(demo *d, char *err, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    char *tpl;
    char name[40];

    if (tmp == NULL || tmp[0] == '\0')
        tmp = "/tmp";
    tpl = join(tmp, "stepq-demo-XXXXXX");
    if (mkdtemp(tpl) == NULL) {
        int rc = -errno;
        snprintf(err, len, "cannot make a folder in %s: %s", tmp,
                 strerror(errno));
        free(tpl);
        return rc;
    }
    d->paths_buf[0] = tpl;
    d->paths_buf[1] = join(tpl, "stepq.db");
    d->paths_buf[2] = join(tpl, "stepq.json");
    d->paths_buf[3] = join(tpl, "jobs.jsonl");
    d->paths_buf[4] = join(tpl, "worker.log");
    d->paths.dir = d->paths_buf[0];
    d->paths.db = d->paths_buf[1];
    d->paths.config = d->paths_buf[2];
    d->paths.jobs = d->paths_buf[3];
    d->paths.worker_log = d->paths_buf[4];
    for (int i = 0; i < DEMO_NENDPOINTS; i++) {
        snprintf(name, sizeof(name), "mock-%s.log", demo__endpoints[i].name);
        d->paths_buf[5 + i] = join(tpl, name);
        d->paths.mock_logs[i] = d->paths_buf[5 + i];
    }
    return 0;
}

/* ---- public ------------------------------------------------------------- */

int
demo_open(const struct demo_opts *opts, demo **out, char *err, size_t len)
{
    demo *d = xcalloc(1, sizeof(*d));
    int rc;

    d->opts = *opts;
    if (d->opts.njobs <= 0)
        d->opts.njobs = DEMO_JOBS_DEFAULT;
    if (d->opts.njobs > DEMO_JOBS_MAX) {
        snprintf(err, len, "at most %d jobs", DEMO_JOBS_MAX);
        free(d);
        return -EINVAL;
    }
    if (d->opts.progress_ms <= 0)
        d->opts.progress_ms = PROGRESS_MS_DEFAULT;
    if (d->opts.limit_ms <= 0)
        d->opts.limit_ms = LIMIT_MS_DEFAULT;
    d->started_ms = clock_mono_ms();
    atomic_init(&d->worker_running, false);
    atomic_init(&d->cut, false);
    atomic_init(&d->interrupted, false);
    /* Ignored before any socket exists: the mocks write to clients that
     * may hang up. */
    signal(SIGPIPE, SIG_IGN);
    if ((rc = make_dir(d, err, len)) != 0 ||
        (rc = demo__start_loop(d, err, len)) != 0 ||
        (rc = demo__start_mocks(d, err, len)) != 0 ||
        (rc = demo__write_config(d, err, len)) != 0 ||
        (rc = demo__enqueue_batch(d, err, len)) != 0 ||
        (rc = demo__start_thread(d, err, len)) != 0) {
        demo_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

int
demo_run(demo *d)
{
    struct worker_opts wo = {0};
    int saved = -1, fd, rc;

    wo.db_path = d->paths.db;
    wo.cfg = d->cfg;
    wo.concurrency = DEMO_CONCURRENCY;
    wo.drain = true;
    wo.grace_ms = DEMO_GRACE_MS;
    /* The worker writes a JSON line per attempt on standard error; the
     * demo shows a summary instead and keeps the lines in a file. */
    fflush(stderr);
    fd = open(d->paths.worker_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
              0600);
    if (fd >= 0) {
        saved = dup(STDERR_FILENO);
        if (saved >= 0)
            dup2(fd, STDERR_FILENO);
        close(fd);
    }
    atomic_store(&d->worker_running, true);
    /* A signal before the worker started: skip it, keep what is there. */
    rc = atomic_load(&d->interrupted) ? 0 : worker_run(&wo);
    atomic_store(&d->worker_running, false);
    if (saved >= 0) {
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
    }
    return rc;
}

bool
demo_was_cut(const demo *d)
{
    return atomic_load(&d->cut);
}

bool
demo_was_interrupted(const demo *d)
{
    return atomic_load(&d->interrupted);
}

int64_t
demo_started_ms(const demo *d)
{
    return d->started_ms;
}

const struct demo_paths *
demo_paths_get(const demo *d)
{
    return &d->paths;
}

const struct demo_endpoint *
demo_endpoint_get(const demo *d, int i)
{
    return &d->ep[i];
}

void
demo_stop(demo *d)
{
    if (d->stopped || !d->loop_ready)
        return;
    d->stopped = true;
    if (d->thread_started) {
        uv_async_send(&d->stop);
        pthread_join(d->thread, NULL);
    } else {
        demo__stop_all(d);
        uv_run(&d->loop, UV_RUN_DEFAULT);
    }
    if (uv_loop_close(&d->loop) != 0)
        log_warn("demo: handles left open on the mock loop");
}

void
demo_mock_stats(const demo *d, int i, struct mock_stats *out)
{
    *out = d->stats[i];
}

void
demo_close(demo *d)
{
    if (d == NULL)
        return;
    demo_stop(d);
    config_free(d->cfg);
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(d->paths_buf); i++)
        free(d->paths_buf[i]);
    free(d);
}

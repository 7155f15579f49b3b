/* e2e.c: end-to-end test helpers: the mock with a script, the config
 * pointing at it, the binary run to enqueue, work and show, and the
 * mock's request log read back; see e2e.h. */
#include "tests/support/e2e.h"

#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/json.h"
#include "common/xalloc.h"
#include "tests/support/pgfix.h"
#include "tests/support/support.h"

char *e2e_dir;
char *e2e_db;
struct mockproc e2e_mock;

void
e2e_setup(void)
{
    fixture_setup();
    e2e_dir = fixture_dir;
    e2e_db = pgfix_db_new(NULL, "stepq.db", false);
    run_db = e2e_db;
    setenv("FREE_KEY", "sk-test-secret-123", 1);
    memset(&e2e_mock, 0, sizeof(e2e_mock));
}

void
e2e_teardown(void)
{
    if (e2e_mock.pid > 0)
        mockproc_stop(&e2e_mock);
    fixture_teardown();
    e2e_dir = NULL;
    run_db = NULL;
    free(e2e_db);
    e2e_db = NULL;
}

/* Writes stepq.json: leases of lease_s, fast backoffs, tier "free" on the
 * mock's /free route and tier "local" on its /local route, each with its
 * fields spliced in, and extra spliced into the object (each may be ""). */
static void
write_config(int lease_s, const char *free_fields, const char *local_fields,
             const char *extra)
{
    char cfg[4096];
    int n;

    n = snprintf(
        cfg, sizeof(cfg),
        "{\"worker\": {\"lease_s\": %d},"
        " \"policy\": {\"backoff_base_s\": 0.05, \"backoff_cap_s\": 0.2},"
        " \"tiers\": ["
        "{\"name\": \"free\", \"base_url\": "
        "\"http://127.0.0.1:%d/free/v1\", \"model\": \"small\"%s%s},"
        "{\"name\": \"local\", \"base_url\": "
        "\"http://127.0.0.1:%d/local/v1\", \"model\": \"llama\"%s%s}]"
        "%s%s}",
        lease_s, e2e_mock.port, free_fields[0] ? ", " : "", free_fields,
        e2e_mock.port, local_fields[0] ? ", " : "", local_fields,
        extra[0] ? ", " : "", extra);
    ck_assert_int_lt(n, (int)sizeof(cfg));
    free(tmpdir_write(e2e_dir, "stepq.json", cfg, strlen(cfg)));
}

void
e2e_config(int lease_s, const char *free_fields)
{
    write_config(lease_s, free_fields, "", "");
}

/* Starts the mock on the script at path, logging to mock.log, writes the
 * e2e config and creates the database. */
static void
start(const char *path, const char *extra)
{
    const char *args[] = {"--script", path, "--log", "mock.log", NULL};

    mockproc_start(&e2e_mock, args);
    write_config(1, "\"api_key_env\": \"FREE_KEY\", \"timeout_s\": 5",
                 "\"timeout_s\": 5", extra);
    e2e_init();
}

void
e2e_start(const char *script, const char *extra)
{
    free(tmpdir_write(e2e_dir, "script.json", script, strlen(script)));
    start("script.json", extra);
}

void
e2e_start_file(const char *name, const char *extra)
{
    char *rel = tmpdir_join("tests/data/e2e", name);
    char *path = source_path(rel);

    start(path, extra);
    free(path);
    free(rel);
}

void
e2e_init(void)
{
    fixture_init(NULL);
}

void
e2e_enqueue(const char *job)
{
    struct run_result r;
    ck_assert_msg(RUN(&r, job, "enqueue", "-") == 0, "enqueue: %s", r.err);
    run_result_free(&r);
}

/* Runs `stepq work --drain` to the end; returns its stderr (caller frees). */
char *
e2e_drain(void)
{
    struct run_result r;
    ck_assert_msg(RUN(&r, NULL, "work", "--drain") == 0, "work exited %d: %s",
                  r.status, r.err);
    free(r.out);
    return r.err;
}

void
e2e_drain_at(const char *concurrency)
{
    struct run_result r;

    ck_assert_msg(
        RUN(&r, NULL, "work", "--drain", "--concurrency", concurrency) == 0,
        "work exited %d: %s", r.status, r.err);
    run_result_free(&r);
}

void
e2e_config_refused(const char *fields, const char *want)
{
    struct run_result r;
    char cfg[512];

    snprintf(cfg, sizeof(cfg),
             "{\"tiers\": [{\"name\": \"a\", \"base_url\": "
             "\"https://127.0.0.1:1/v1\", \"model\": \"m\", %s}]}",
             fields);
    free(tmpdir_write(e2e_dir, "stepq.json", cfg, strlen(cfg)));
    ck_assert_int_eq(RUN(&r, NULL, "tiers", "--check"), 2);
    ck_assert_msg(strstr(r.err, want) != NULL, "%s: %s", fields, r.err);
    run_result_free(&r);
}

cJSON *
e2e_run_job(const char *script, const char *job)
{
    e2e_start_file(script, "");
    e2e_enqueue(job);
    free(e2e_drain());
    return e2e_show(1);
}

cJSON *
e2e_show(int id)
{
    struct run_result r;
    char ids[16];
    cJSON *o;

    snprintf(ids, sizeof(ids), "%d", id);
    ck_assert_int_eq(RUN(&r, NULL, "jobs", "show", ids, "--json"), 0);
    /* JSON is UTF-8 whatever an endpoint sent. */
    ck_assert_msg(json_utf8_valid(r.out, strlen(r.out)), "not UTF-8: %s",
                  r.out);
    o = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(o);
    run_result_free(&r);
    return o;
}

const char *
e2e_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

const cJSON *
e2e_step_of(const cJSON *job, int i)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItem(job, "steps"), i);
}

const cJSON *
e2e_hist(const cJSON *job, int step, int attempt)
{
    return cJSON_GetArrayItem(
        cJSON_GetObjectItem(e2e_step_of(job, step), "history"), attempt);
}

void
e2e_expect_attempt(const cJSON *job, int attempt, const char *outcome,
                   const char *reason, const char *decision)
{
    const cJSON *h = e2e_hist(job, 0, attempt);

    ck_assert_msg(h != NULL, "no attempt %d", attempt);
    if (outcome != NULL)
        ck_assert_str_eq(e2e_str(h, "outcome"), outcome);
    if (reason != NULL)
        ck_assert_str_eq(e2e_str(h, "reason"), reason);
    if (decision != NULL)
        ck_assert_str_eq(e2e_str(h, "decision"), decision);
}

/* The mock's request log, one parsed object per request, as an array.
 * Read while the mock runs, the last line may be half written: only
 * lines that end in a newline count. */
cJSON *
e2e_mock_log(void)
{
    cJSON *arr = cJSON_CreateArray();
    char *text = NULL, *line, *save = NULL;
    size_t len = 0;

    if (file_read_all("mock.log", 64 << 20, &text, &len) != 0)
        return arr;
    while (len > 0 && text[len - 1] != '\n')
        text[--len] = '\0';
    for (line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(line);
        ck_assert_msg(o != NULL, "bad log line %s", line);
        cJSON_AddItemToArray(arr, o);
    }
    free(text);
    return arr;
}

int
e2e_arrivals(const cJSON *log, const char *prefix, double *at, int max,
             int *n429)
{
    cJSON *fresh = log == NULL ? e2e_mock_log() : NULL;
    const cJSON *reqs = fresh ? fresh : log, *it;
    int n = 0, n4 = 0;

    cJSON_ArrayForEach(it, reqs)
    {
        const char *p = e2e_str(it, "path");
        const cJSON *st = cJSON_GetObjectItem(it, "status");
        if (p == NULL || strncmp(p, prefix, strlen(prefix)) != 0)
            continue;
        if (n < max)
            at[n] = cJSON_GetNumberValue(cJSON_GetObjectItem(it, "ts_ms"));
        n++;
        n4 += cJSON_IsNumber(st) && st->valueint == 429;
    }
    if (n429 != NULL)
        *n429 = n4;
    cJSON_Delete(fresh);
    return n;
}

/* Requests the mock saw whose path starts with prefix. */
int
e2e_sent_to(const cJSON *log, const char *prefix)
{
    return e2e_arrivals(log, prefix, NULL, 0, NULL);
}

void
e2e_expect_each_sent_once(int n)
{
    unsigned char *seen = xcalloc((size_t)n, 1);
    cJSON *log = e2e_mock_log();
    const cJSON *it;

    ck_assert_int_eq(cJSON_GetArraySize(log), n);
    cJSON_ArrayForEach(it, log)
    {
        cJSON *b = e2e_body_of(it);
        const char *c =
            e2e_str(cJSON_GetArrayItem(cJSON_GetObjectItem(b, "messages"), 0),
                    "content");
        int i = c != NULL && c[0] == 'n' ? atoi(c + 1) : -1;

        ck_assert_msg(i >= 0 && i < n, "a request of no job: %s", c);
        ck_assert_msg(seen[i] == 0, "job j%d sent twice", i);
        seen[i] = 1;
        cJSON_Delete(b);
    }
    cJSON_Delete(log);
    free(seen);
}

/* The request body the mock logged for one request, parsed. */
cJSON *
e2e_body_of(const cJSON *req)
{
    const cJSON *b = cJSON_GetObjectItem(req, "body");
    if (cJSON_IsString(b))
        return cJSON_Parse(b->valuestring);
    return cJSON_Duplicate(b, true);
}

cJSON *
e2e_sent_body(const cJSON *log, int i)
{
    return e2e_body_of(cJSON_GetArrayItem(log, i));
}

pid_t
e2e_spawn_under(const char *const *wrapper, const char *const *args)
{
    const char **argv = run_argv("work", args), **full = argv;
    size_t nw = 0, na = 0;
    pid_t pid;

    while (wrapper != NULL && wrapper[nw] != NULL)
        nw++;
    if (nw > 0) {
        while (argv[na] != NULL)
            na++;
        full = xcalloc(nw + na + 1, sizeof(*full));
        memcpy(full, wrapper, nw * sizeof(*full));
        memcpy(full + nw, argv, na * sizeof(*full));
    }
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open("work.log", O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(fd, 2);
        execvp(full[0], (char *const *)full);
        _exit(127);
    }
    if (full != argv)
        free(full);
    free(argv);
    return pid;
}

pid_t
e2e_spawn_faked(const char *faketime, bool real_monotonic,
                const char *const *args)
{
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[512], preload[512], ft[256];
    glob_t g;
    pid_t pid;

    /* Debian's libfaketime is preloaded rather than run through the
     * faketime program, which forks and waits: a signal meant for the
     * worker would reach only it. An ASan build wants its runtime first
     * among the preloaded libraries: that check is off for this child.
     * FAKETIME's "@..." is read in the local zone: UTC, whatever the
     * host's. A process on the host's monotonic clock has its loop's
     * waits kept on the host's time too (bench/month_shim.c, first):
     * libfaketime divides them by its speed, and the loop would spin. */
    ck_assert_int_eq(glob("/usr/lib/*/faketime/libfaketime.so.1", 0, NULL, &g),
                     0);
    snprintf(preload, sizeof(preload), "LD_PRELOAD=%s%s%s",
             real_monotonic ? STEPQ_LOOP_SHIM : "", real_monotonic ? ":" : "",
             g.gl_pathv[0]);
    globfree(&g);
    snprintf(ft, sizeof(ft), "FAKETIME=%s", faketime);
    snprintf(opts, sizeof(opts), "ASAN_OPTIONS=%s%sverify_asan_link_order=0",
             asan ? asan : "", asan && asan[0] ? ":" : "");
    pid = e2e_spawn_under(
        (const char *[]){"env", preload, ft, opts, "TZ=UTC",
                         real_monotonic ? "FAKETIME_DONT_FAKE_MONOTONIC=1"
                                        : "FAKETIME_DONT_FAKE_MONOTONIC=0",
                         NULL},
        args);
    return pid;
}

pid_t
e2e_spawn_workerv(const char *const *args)
{
    return e2e_spawn_under(NULL, args);
}

pid_t
e2e_spawn_worker(const char *extra)
{
    return e2e_spawn_workerv(
        (const char *[]){"--concurrency", "200", extra, NULL});
}

/* Waits (with a deadline) until the mock has logged n requests. */
void
e2e_wait_for_requests(int n, int64_t timeout_ms)
{
    int64_t end = clock_mono_ms() + timeout_ms;

    for (;;) {
        cJSON *log = e2e_mock_log();
        int got = cJSON_GetArraySize(log);
        cJSON_Delete(log);
        if (got >= n)
            return;
        ck_assert_msg(clock_mono_ms() < end, "mock saw %d of %d requests", got,
                      n);
        poll(NULL, 0, 20);
    }
}

int
e2e_wait_exit(pid_t pid)
{
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

cJSON *
e2e_tiers(void)
{
    struct run_result r;
    cJSON *o;

    ck_assert_msg(RUN(&r, NULL, "tiers", "--json") == 0, "tiers: %s", r.err);
    o = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(o);
    run_result_free(&r);
    return o;
}

cJSON *
e2e_tier(const char *name)
{
    cJSON *arr = e2e_tiers(), *found = NULL;
    const cJSON *it;

    cJSON_ArrayForEach(it, arr)
    {
        if (strcmp(e2e_str(it, "name"), name) == 0)
            found = cJSON_Duplicate(it, true);
    }
    cJSON_Delete(arr);
    ck_assert_msg(found != NULL, "no tier %s in tiers --json", name);
    return found;
}

cJSON *
e2e_status(void)
{
    struct run_result r;
    cJSON *o;

    RUN(&r, NULL, "status", "--json");
    o = cJSON_Parse(r.out);
    run_result_free(&r);
    return cJSON_GetObjectItem(o, "jobs") ? o : NULL;
}

/* Both workers share the database, each through its own connection. */
void
e2e_drain_two(void)
{
    pid_t w1 = e2e_spawn_worker("--drain");
    pid_t w2 = e2e_spawn_worker("--drain");

    ck_assert_int_eq(e2e_wait_exit(w1), 0);
    ck_assert_int_eq(e2e_wait_exit(w2), 0);
}

void
e2e_kill_mid_request_then_drain(void)
{
    pid_t w = e2e_spawn_worker("--drain");

    e2e_wait_for_requests(1, 10000);
    kill(w, SIGKILL);
    ck_assert_int_eq(e2e_wait_exit(w), 128 + SIGKILL);
    free(e2e_drain()); /* waits for the dead lease, then takes over */
}

int
e2e_count(const cJSON *st, const char *state)
{
    cJSON *fresh = st == NULL ? e2e_status() : NULL;
    const cJSON *jobs = cJSON_GetObjectItem(fresh ? fresh : st, "jobs");
    int n = cJSON_GetObjectItem(jobs, state)->valueint;

    cJSON_Delete(fresh);
    return n;
}

void
e2e_enqueue_many(int n, const char *tiers)
{
    size_t cap = (size_t)n * 200 + 16, len = 0;
    char *text = xmalloc(cap);

    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len,
                                "{\"name\":\"j%d\",\"steps\":[{\"name\":\"a\","
                                "%s\"request\":{\"messages\":[{\"role\":"
                                "\"user\",\"content\":\"n%d\"}]}}]}\n",
                                i, tiers, i);
    e2e_enqueue(text);
    free(text);
}

int
e2e_race(int n, const char *const *argv)
{
    pid_t pids[16];
    int ok = 0, go[2];

    ck_assert_int_le(n, 16);
    ck_assert_int_eq(pipe(go), 0);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            const char **args = run_argv(NULL, argv);
            char c;
            close(go[1]);
            if (read(go[0], &c, 1) != 0)
                _exit(99);
            execv(args[0], (char *const *)args);
            _exit(127);
        }
    }
    close(go[0]);
    close(go[1]); /* all start at once */
    for (int i = 0; i < n; i++) {
        int st, code;
        ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
        code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        ck_assert_msg(code == 0 || code == 4, "exit %d", code);
        ok += code == 0;
    }
    return ok;
}

void
e2e_enqueue_two_posts(int n)
{
    size_t cap = (size_t)n * 400, len = 0;
    char *text = xmalloc(cap);

    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, E2E_TWO_POSTS, i,
                                e2e_mock.port, i, e2e_mock.port, i);
    e2e_enqueue(text);
    free(text);
}

int
e2e_log_count(const char *what)
{
    char *text = NULL;
    size_t len = 0;
    int n = 0;

    if (file_read_all("work.log", 1 << 24, &text, &len) != 0)
        return 0;
    for (char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    free(text);
    return n;
}

cJSON *
e2e_one_file(const char *pattern)
{
    char *text = NULL;
    size_t len = 0;
    glob_t g;
    cJSON *o;

    ck_assert_int_eq(glob(pattern, 0, NULL, &g), 0);
    ck_assert_uint_eq(g.gl_pathc, 1);
    ck_assert_int_eq(file_read_all(g.gl_pathv[0], 1 << 20, &text, &len), 0);
    globfree(&g);
    o = cJSON_Parse(text);
    ck_assert_msg(o != NULL, "not JSON: %s", text);
    free(text);
    return o;
}

/* cmd_jobs_wait.c: stepq jobs wait — wait until a job ends or parks (or a
 * timeout), reading it from the store every WAIT_POLL_MS, and tell the
 * outcome by the exit code. The rule of when a wait is over is view/'s,
 * shared with GET /v1/jobs/ID?wait=. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "queue/queue.h"
#include "view/view.h"

/* How often the job is read. */
#define WAIT_POLL_MS 200

/* The exit code of a wait that is over, or timed out. */
static int
outcome(enum q_job_state st, bool over)
{
    if (!over)
        return CLI_WAIT_TIMEOUT;
    return st == Q_JOB_SUCCEEDED ? CLI_OK
           : st == Q_JOB_PARKED  ? CLI_WAIT_PARKED
                                 : CLI_WAIT_FAILED;
}

/* --timeout: whole seconds ("90") or a span ("90s", "10m", "2h"). */
static int
parse_timeout(const char *s, int64_t *ms)
{
    char span[32];

    if (s == NULL) {
        *ms = -1;
        return 0;
    }
    snprintf(span, sizeof(span), "%s%s", s,
             s[0] != '\0' && strspn(s, "0123456789") == strlen(s) ? "s" : "");
    if (clock_parse_span(span, ms) == 0)
        return 0;
    cli_error("jobs wait: --timeout %s is not a number of seconds or a span "
              "(90, 90s, 10m, 2h)",
              s);
    return CLI_USAGE;
}

/* Reads job id until its wait is over or timeout_ms (-1: none) passed;
 * *job gets it as last read. 0 or the storage error. Unlike the API's
 * long-poll, which a program asks again in a loop, a job parked already
 * is an answer: a script runs this once, and learns at once that a
 * person must act. */
static int
watch(q_db *db, int64_t id, int64_t timeout_ms, struct q_job *job, bool *over)
{
    int64_t start = clock_mono_ms();
    struct timespec nap = {0, WAIT_POLL_MS * 1000000L};
    int rc;

    for (;;) {
        q_job_cleanup(job);
        memset(job, 0, sizeof(*job));
        if ((rc = q_job_get(db, id, job)) != 0)
            return rc;
        *over = view_wait_over(job->state, job->updated_at, -1);
        if (*over || (timeout_ms >= 0 && clock_mono_ms() - start >= timeout_ms))
            return 0;
        nanosleep(&nap, NULL);
    }
}

static void
print_text(const struct q_job *j, bool over, int64_t timeout_ms)
{
    if (!over)
        printf("job %lld is still %s after %llds\n", (long long)j->id,
               q_job_state_name(j->state), (long long)(timeout_ms / 1000));
    else if (j->state == Q_JOB_PARKED)
        printf("job %lld parked: a person must resolve it (stepq park list "
               "--job %lld)\n",
               (long long)j->id, (long long)j->id);
    else
        printf("job %lld %s%s%s\n", (long long)j->id,
               q_job_state_name(j->state), j->error ? ": " : "",
               j->error ? j->error : "");
}

int
cli_jobs_wait(struct cli_env *env, int argc, char **argv, const char *usage)
{
    const char *timeout = NULL;
    bool json = false, over = false;
    struct cli_opt opts[] = {
        {"timeout", &timeout, NULL}, {"json", NULL, &json}, {NULL, NULL, NULL}};
    struct q_job job = {0};
    int64_t timeout_ms = -1;
    long long id = 0;
    cJSON *o = NULL;
    q_db *db = NULL;
    int rc;

    if ((rc = cli_jobs_args(argc, argv, opts, "wait", usage, &id)) != 0 ||
        (rc = parse_timeout(timeout, &timeout_ms)) != 0 ||
        (rc = cli_open_db(env, &db)) != 0)
        return rc;
    rc = watch(db, id, timeout_ms, &job, &over);
    if (rc == 0 && json)
        rc = view_job(db, id, &o);
    q_close(db);
    if (rc == 0 && json)
        cli_print_json(o);
    else if (rc == 0)
        print_text(&job, over, timeout_ms);
    else if (rc == -ENOENT)
        cli_error("jobs wait: no job %lld", id);
    else
        cli_error("jobs wait: cannot read the database");
    rc = rc == -ENOENT ? CLI_NOTFOUND
         : rc != 0     ? CLI_RUNTIME
                       : outcome(job.state, over);
    q_job_cleanup(&job);
    return rc;
}

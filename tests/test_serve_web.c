/* test_serve_web.c: the web park view of `stepq serve` in a real browser.
 * A real worker run parks three side-effecting steps on daily walls (two
 * posts to a comments API, one chat step on tier free); then Debian's
 * headless Chromium (tests/browser/park_view.mjs, playwright-core) opens
 * the page, finds them, resolves a post as done and the chat step as a
 * retry on tier local with the buttons, and loses a race for the other
 * post; the database and the worker's next run are checked after. A second run
 * shows a page of another site cannot post to a server without a token.
 * Then a real morning (tests/browser/morning.mjs): a newcomer's flow with
 * search, keys, addresses, the double-send warning, bulk skip, cancel,
 * an agent's transcript and approval, checked by axe-core; and 1,000
 * open items, with the timings printed. */
#define _GNU_SOURCE /* asprintf */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/support/e2e.h"
#include "tests/support/httpcl.h"
#include "tests/support/servefix.h"

/* A draft from the local tier, then a post of it to the comments API
 * (which meets a daily wall twice). */
#define POST_JOB                                                               \
    "{\"name\":\"nightly-comment\",\"steps\":[{\"name\":\"draft\","            \
    "\"tiers\":[\"local\"],\"request\":{\"messages\":[{\"role\":\"user\","     \
    "\"content\":\"Draft a comment\"}]}},{\"name\":\"post\",\"kind\":"         \
    "\"http\",\"http\":{\"url\":\"http://127.0.0.1:%d/comments\",\"body\":"    \
    "{\"text\":\"{{steps.draft.output}}\",\"tag\":\"drafted-nightly\"}}}]}"
/* A chat step with side effects: tier free's daily wall parks it there. */
#define ANNOUNCE_JOB                                                           \
    "{\"name\":\"nightly-announce\",\"steps\":[{\"name\":\"announce\","        \
    "\"side_effects\":true,\"replayable\":false,\"request\":{\"messages\":"    \
    "[{\"role\":\"user\",\"content\":\"Announce the release\"}]}}]}"

/* Gives tier local of the e2e config a price ($1 and $2 per million in
 * and out), so that the report and the job show money. */
static void
price_local(void)
{
    char *path = tmpdir_join(e2e_dir, "stepq.json"), *text, buf[8192];
    FILE *f = fopen(path, "r");
    size_t n;
    cJSON *cfg, *local;

    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    cfg = cJSON_Parse(buf);
    local = cJSON_GetArrayItem(cJSON_GetObjectItem(cfg, "tiers"), 1);
    ck_assert_str_eq(e2e_str(local, "name"), "local");
    cJSON_AddItemToObject(
        local, "price",
        cJSON_Parse("{\"input_per_mtok\": 1, \"output_per_mtok\": 2}"));
    text = cJSON_PrintUnformatted(cfg);
    free(tmpdir_write(e2e_dir, "stepq.json", text, strlen(text)));
    free(text);
    free(path);
    cJSON_Delete(cfg);
}

/* The ids of the park items, by what parked them. */
static int post_item[2], announce_item, announce_job;

static void
web_setup(void)
{
    struct run_result r;
    char job[1024];
    cJSON *list, *it;
    int posts = 0;

    e2e_setup();
    e2e_start_file("web-review.json", "");
    price_local();
    /* One at a time: the first post meets the comments host's wall, which
     * parks the second unsent. */
    snprintf(job, sizeof(job), POST_JOB, e2e_mock.port);
    e2e_enqueue(job);
    free(e2e_drain());
    e2e_enqueue(job);
    free(e2e_drain());
    e2e_enqueue(ANNOUNCE_JOB);
    free(e2e_drain());
    ck_assert_int_eq(RUN_ARGS(&r, "park", "list", "--json"), 0);
    list = cJSON_Parse(r.out);
    run_result_free(&r);
    ck_assert_int_eq(cJSON_GetArraySize(list), 3);
    cJSON_ArrayForEach(it, list)
    {
        int id = cJSON_GetObjectItem(it, "id")->valueint;
        if (strcmp(e2e_str(it, "step"), "announce") == 0) {
            ck_assert_str_eq(e2e_str(it, "tier"), "free");
            announce_item = id;
            announce_job = cJSON_GetObjectItem(it, "job_id")->valueint;
        } else {
            ck_assert_int_lt(posts, 2);
            post_item[posts++] = id;
        }
    }
    cJSON_Delete(list);
}

/* Runs tests/browser/FILE MODE against s with env (NAME=VALUE ...);
 * fails the test with its output unless it exits 0, and with echo prints
 * it (the timings of the scale mode). With $STEPQ_SCREENSHOTS set to a
 * folder, the page is photographed there (docs/ has them). */
static void
browse_with(const char *file, const struct server *s, const char *mode,
            const char *env, bool echo)
{
    char *rel = tmpdir_join("tests/browser", file);
    char *script = source_path(rel), *cmd = NULL;
    char *out = NULL, shots[1024] = "";
    const char *dir = getenv("STEPQ_SCREENSHOTS");
    int rc;

    if (dir != NULL)
        snprintf(shots, sizeof(shots),
                 "SCREENSHOT=%s/park-view.png "
                 "SCREENSHOT_PHONE=%s/park-view-phone.png",
                 dir, dir);
    ck_assert_int_ne(asprintf(&cmd,
                              "env -u http_proxy -u HTTP_PROXY "
                              "STEPQ_URL=http://127.0.0.1:%d %s %s node %s %s",
                              s->port, env, shots, script, mode),
                     -1);
    rc = run_sh(cmd, &out);
    ck_assert_msg(rc == 0,
                  "%s: exit %d:\n%.3000s\n(no playwright-core or chromium? "
                  "scripts/deps.sh --browser installs them)",
                  mode, rc, out);
    if (echo)
        fprintf(stderr, "%s", out);
    free(out);
    free(cmd);
    free(script);
    free(rel);
}

static void
browse(const struct server *s, const char *mode, const char *env)
{
    browse_with("park_view.mjs", s, mode, env, false);
}

/* `stepq park show ID --json`, parsed (cJSON_Delete it). */
static cJSON *
park_show(int id)
{
    struct run_result r;
    char arg[16];
    cJSON *o;

    snprintf(arg, sizeof(arg), "%d", id);
    ck_assert_int_eq(RUN_ARGS(&r, "park", "show", arg, "--json"), 0);
    o = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(o);
    run_result_free(&r);
    return o;
}

START_TEST(test_operator_resolves_in_the_browser)
{
    struct server s;
    cJSON *item, *job, *log;
    char env[256];
    int job_id;

    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    snprintf(env, sizeof(env),
             "STEPQ_TOKEN=" TOKEN " PARK_ID=%d RACE_ID=%d TIER_ID=%d",
             post_item[0], post_item[1], announce_item);
    browse(&s, "park", env);
    serve_stop(&s);

    /* what the buttons did is in the store, as the CLI shows it */
    item = park_show(post_item[0]);
    ck_assert_str_eq(e2e_str(item, "resolution"), "done");
    ck_assert_str_eq(e2e_str(item, "resolved_by"), "ana");
    ck_assert_str_eq(e2e_str(item, "note"), "posted by hand");
    job_id = cJSON_GetObjectItem(item, "job_id")->valueint;
    cJSON_Delete(item);
    item = park_show(post_item[1]);
    ck_assert_str_eq(e2e_str(item, "resolved_by"), "bo"); /* the race */
    cJSON_Delete(item);
    item = park_show(announce_item);
    ck_assert_str_eq(e2e_str(item, "resolution"), "retry");
    cJSON_Delete(item);
    job = e2e_show(job_id);
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 1), "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 1), "output"),
                     "comment 123 posted by hand");
    cJSON_Delete(job);

    /* the worker finishes every job: nothing was posted again (the one
     * post sent met the wall; the other was held unsent), and the
     * announcement went out once more, on the tier the operator chose */
    free(e2e_drain());
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 3);
    log = e2e_mock_log();
    ck_assert_int_eq(e2e_sent_to(log, "/comments"), 1);
    ck_assert_int_eq(e2e_sent_to(log, "/free"), 1);
    cJSON_Delete(log);
    job = e2e_show(announce_job);
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "tier"), "local");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 0), "tier"), "free");
    ck_assert_str_eq(e2e_str(e2e_hist(job, 0, 1), "tier"), "local");
    cJSON_Delete(job);
}
END_TEST

START_TEST(test_named_operator_logs_in_and_out)
{
    char rita[80], vera[80], env[512];
    struct server s;
    cJSON *item;

    serve_operator_add("rita", "resolver", rita, sizeof(rita));
    serve_operator_add("vera", "viewer", vera, sizeof(vera));
    ck_assert_int_eq(serve_start(&s, NULL, NULL), -1);
    snprintf(env, sizeof(env),
             "OP_TOKEN=%s VIEWER_TOKEN=%s PARK_ID=%d OPEN_ID=%d", rita, vera,
             post_item[0], post_item[1]);
    browse(&s, "operators", env);
    serve_stop(&s);
    item = park_show(post_item[0]);
    ck_assert_str_eq(e2e_str(item, "resolution"), "skip");
    ck_assert_str_eq(e2e_str(item, "resolved_by"), "rita");
    cJSON_Delete(item);
    item = park_show(post_item[1]);
    ck_assert_str_eq(e2e_str(item, "state"), "open"); /* the viewer's */
    cJSON_Delete(item);
}
END_TEST

START_TEST(test_another_site_cannot_post)
{
    static const char *const no_auth[] = {"--no-auth", NULL};
    struct server s;
    int before = run_job_count(e2e_db);

    ck_assert_int_eq(serve_start(&s, NULL, no_auth), -1);
    browse(&s, "csrf", "");
    serve_stop(&s);
    ck_assert_int_eq(run_job_count(e2e_db), before);
}
END_TEST

/* A job that fails before it sends (a header's variable is not set): the
 * page's Retry queues it again, by the name given. */
START_TEST(test_operator_retries_a_failed_job)
{
    struct server s;
    char job[512], env[128];
    cJSON *o;
    int id = run_job_count(e2e_db) + 1;

    snprintf(job, sizeof(job),
             "{\"name\":\"nightly-digest\",\"steps\":[{\"name\":\"send\","
             "\"kind\":\"http\",\"http\":{\"url\":\"http://127.0.0.1:%d/"
             "digest\",\"headers\":{\"X-Key\":\"env:STEPQ_TEST_UNSET\"},"
             "\"body\":{}}}]}",
             e2e_mock.port);
    e2e_enqueue(job);
    free(e2e_drain());
    o = e2e_show(id);
    ck_assert_str_eq(e2e_str(o, "state"), "failed");
    cJSON_Delete(o);
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    snprintf(env, sizeof(env), "STEPQ_TOKEN=" TOKEN " JOB_ID=%d", id);
    browse(&s, "retry", env);
    serve_stop(&s);
    o = e2e_show(id);
    ck_assert_str_eq(e2e_str(o, "state"), "queued");
    ck_assert_str_eq(
        e2e_str(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "retries"), 0), "by"),
        "ana");
    cJSON_Delete(o);
}
END_TEST

/* The page's files need no token and carry the headers that keep them
 * to themselves; as they need no token they read no body, so a client
 * without one cannot make the server hold --max-body. Behind a proxy
 * that adds TLS, the page's https Origin is its own. */
START_TEST(test_page_files_and_their_limits)
{
    struct server s;
    struct reply r = {0};

    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    req(s.port, "GET", "/", NULL, "", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(hdr(&r, "Content-Type"), "text/html; charset=utf-8");
    ck_assert_ptr_nonnull(
        strstr(hdr(&r, "Content-Security-Policy"), "script-src 'self'"));
    ck_assert_str_eq(hdr(&r, "X-Frame-Options"), "DENY");
    ck_assert_ptr_nonnull(strstr(r.body, "/ui/app.js"));
    reply_free(&r);
    req(s.port, "GET", "/ui/app.js?v=2", NULL, "", &r);
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
    req(s.port, "GET", "/", NULL, "0123456789", &r);
    ck_assert_int_eq(r.status, 413);
    reply_free(&r);
    req(s.port, "GET", "/index.html", NULL, "", &r); /* not a page: a token */
    ck_assert_int_eq(r.status, 401);
    reply_free(&r);
    req(s.port, "POST", "/", AUTH, "", &r);
    ck_assert_int_eq(r.status, 405);
    ck_assert_pstr_eq(hdr(&r, "Allow"), "GET, HEAD");
    reply_free(&r);
    req(s.port, "PUT", "/v1/jobs", AUTH, "", &r);
    ck_assert_int_eq(r.status, 405);
    ck_assert_pstr_eq(hdr(&r, "Allow"), "GET, HEAD, POST");
    reply_free(&r);
    req(s.port, "GET", "/v1/park/resolve", AUTH, "", &r);
    ck_assert_int_eq(r.status, 405);
    ck_assert_pstr_eq(hdr(&r, "Allow"), "POST");
    reply_free(&r);
    req(s.port, "POST", "/v1/park/resolve",
        AUTH "Origin: https://127.0.0.1\r\n",
        "{\"resolution\":\"skip\",\"by\":\"ana\",\"reason\":\"none\"}", &r);
    ck_assert_int_eq(r.status, 200);
    reply_free(&r);
    serve_stop(&s);
}
END_TEST

/* ---- a real morning: morning.mjs ------------------------------------ */

/* Posts (http steps with side effects and no key) to the mock's path,
 * each answered with a 5xx: parked in doubt. */
#define DOUBT_JOB                                                              \
    "{\"name\":\"%s-%04d\",\"steps\":[{\"name\":\"post\",\"kind\":\"http\","   \
    "\"http\":{\"url\":\"http://127.0.0.1:%d/%s\",\"body\":{\"n\":%d}}}]}\n"
/* An agent on tier local: it labels the issue, then asks to comment,
 * which needs an approval. */
#define AGENT_JOB                                                              \
    "{\"name\":\"triage-412\",\"steps\":[{\"name\":\"triage\",\"tiers\":"      \
    "[\"local\"],\"tools\":[{\"name\":\"add_label\",\"parameters\":{\"type\":" \
    "\"object\",\"properties\":{\"label\":{\"type\":\"string\"}}},"            \
    "\"action\":{\"http\":{\"method\":\"POST\",\"url\":\"http://127.0.0.1:%d"  \
    "/labels/{{args.label}}\",\"body\":{}}}},{\"name\":\"post_comment\","      \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"body\":{"           \
    "\"type\":\"string\"}}},\"needs_approval\":\"always\","                    \
    "\"action\":{\"http\":{\"method\":\"POST\",\"url\":\"http://127.0.0.1:%d"  \
    "/comments\",\"body\":{\"body\":\"{{args.body}}\"}}}}],\"request\":"       \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"triage 412\"}]}}]}"

/* Enqueues n posts named name to path, then drains the queue. */
static void
park_posts(const char *name, const char *path, int n)
{
    size_t cap = (size_t)n * 256 + 1, len = 0;
    char *text = malloc(cap);

    ck_assert_ptr_nonnull(text);
    text[0] = '\0';
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, DOUBT_JOB, name, i,
                                e2e_mock.port, path, i);
    e2e_enqueue(text);
    free(text);
    e2e_drain_at("200");
}

static void
morning_setup(void)
{
    char job[2048];

    e2e_setup();
    e2e_start_file("web-morning.json", "");
    park_posts("nightly-order", "orders", 1);
    park_posts("nightly-sync", "sync", 4);
    snprintf(job, sizeof(job), AGENT_JOB, e2e_mock.port, e2e_mock.port);
    e2e_enqueue(job);
    free(e2e_drain());
}

/* A newcomer's morning, in the browser: finds the order post by search,
 * opens it by keyboard, is warned before a Retry that may post twice,
 * resolves it Done in a new tab opened on its address; cancels a job and
 * skips two items at once; reads an agent's transcript and approves its
 * call, which a worker then sends. axe-core finds nothing serious at
 * each view. The store and the mock are checked after. */
START_TEST(test_a_newcomers_morning)
{
    struct server s;
    struct reply r = {0};
    cJSON *log, *job, *items, *first;
    char later[32];
    pid_t worker;
    int orders;

    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    /* GET /v1/park names each item's job, which the page searches, when
     * asked (by default it is park list's); another value is refused */
    req(s.port, "GET", "/v1/park?job_names=yes", AUTH, "", &r);
    ck_assert_int_eq(r.status, 400);
    reply_free(&r);
    req(s.port, "GET", "/v1/park?job_names=true", AUTH, "", &r);
    ck_assert_int_eq(r.status, 200);
    items = cJSON_Parse(r.body);
    reply_free(&r);
    first = cJSON_GetArrayItem(items, 0);
    ck_assert_str_eq(e2e_str(first, "job_name"), "nightly-order-0000");
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(first, "job_key")));
    cJSON_Delete(items);
    worker = e2e_spawn_worker(NULL);
    browse_with("morning.mjs", &s, "morning", "STEPQ_TOKEN=" TOKEN, false);
    kill(worker, SIGTERM);
    ck_assert_int_eq(e2e_wait_exit(worker), 0);
    serve_stop(&s);

    job = e2e_show(1); /* the order post: done by hand, never sent again */
    ck_assert_str_eq(e2e_str(job, "state"), "succeeded");
    ck_assert_str_eq(e2e_str(e2e_step_of(job, 0), "output"),
                     "order 77 was placed");
    cJSON_Delete(job);
    /* of the sync posts one was retried not before 6 h from now, one
     * cancelled from its job's view, and two skipped */
    ck_assert_int_eq(e2e_count(NULL, "cancelled"), 1);
    ck_assert_int_eq(e2e_count(NULL, "queued"), 1);
    strftime(later, sizeof(later), "%Y-%m-%dT%H:%M:%SZ",
             gmtime(&(time_t){time(NULL) + 5 * 3600}));
    for (int id = 2; id <= 5; id++) {
        job = e2e_show(id);
        if (strcmp(e2e_str(job, "state"), "queued") == 0)
            ck_assert_str_gt(e2e_str(job, "run_at"), later);
        cJSON_Delete(job);
    }
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 4); /* 2 skipped, agent */
    log = e2e_mock_log();
    orders = e2e_sent_to(log, "/orders");
    ck_assert_int_eq(orders, 1);
    ck_assert_int_eq(e2e_sent_to(log, "/sync"), 4);
    ck_assert_int_eq(e2e_sent_to(log, "/comments"), 1); /* once approved */
    cJSON_Delete(log);
}
END_TEST

/* 1,000 open items: the page lists, searches, filters, opens and skips
 * them all; the timings are printed, not asserted (a loaded machine). */
START_TEST(test_a_thousand_items)
{
    struct server s;

    e2e_setup();
    e2e_start_file("web-morning.json", "");
    park_posts("night-post", "orders", 1000);
    ck_assert_int_eq(e2e_count(NULL, "parked"), 1000);
    ck_assert_int_eq(serve_start(&s, TOKEN, NULL), -1);
    browse_with("morning.mjs", &s, "scale", "STEPQ_TOKEN=" TOKEN " ITEMS=1000",
                true);
    serve_stop(&s);
    ck_assert_int_eq(e2e_count(NULL, "succeeded"), 1000);
    e2e_teardown();
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("serve_web");
    TCase *tc = tcase_create("browser");

    tcase_add_checked_fixture(tc, web_setup, e2e_teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, test_operator_resolves_in_the_browser);
    tcase_add_test(tc, test_operator_retries_a_failed_job);
    tcase_add_test(tc, test_named_operator_logs_in_and_out);
    tcase_add_test(tc, test_another_site_cannot_post);
    tcase_add_test(tc, test_page_files_and_their_limits);
    suite_add_tcase(s, tc);
    tc = tcase_create("morning");
    tcase_add_checked_fixture(tc, morning_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_a_newcomers_morning);
    suite_add_tcase(s, tc);
    tc = tcase_create("scale");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_a_thousand_items);
    suite_add_tcase(s, tc);
    return s;
}

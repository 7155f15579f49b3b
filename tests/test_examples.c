/* test_examples.c: what a newcomer runs first. Every example job file goes
 * through `stepq enqueue` (with the example config, so tier names are
 * checked); the shell and Python examples enqueue through the CLI;
 * `stepq demo` ends 0 with a summary that matches the database; and
 * `cmake --install` into a DESTDIR gives a binary, a man page and a
 * pkg-config file that examples/enqueue.c builds and runs against. */
#include "tests/support/support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/xalloc.h"

/* The fixture's folder, also TMPDIR (the demo makes its own folder in
 * it), and no STEPQ_LOG from the caller's environment. */
static void
setup(void)
{
    fixture_setup();
    unsetenv("STEPQ_LOG");
    setenv("TMPDIR", fixture_dir, 1);
}

/* The examples enqueue into FIXTURE_DB, which (as on a user's machine)
 * only `stepq init` creates. */
static void
setup_db(void)
{
    setup();
    fixture_init(FIXTURE_DB);
}

static const char *
env_or_fail(const char *name)
{
    const char *v = getenv(name);
    ck_assert_msg(v != NULL && v[0] != '\0', "%s is not set", name);
    return v;
}

/* ---- job files and enqueue examples ----------------------------------- */

static const char *const job_files[] = {
    "examples/nightly-changelog.json",
    "examples/batch-prompts.jsonl",
    "examples/extract-json.json",
    "examples/triage-agent.json",
};
static const int job_counts[] = {1, 5, 1, 1};

START_TEST(test_job_file_validates)
{
    char *file = source_path(job_files[_i]);
    char *cfg = source_path("examples/stepq.json");
    struct run_result r;
    cJSON *o;

    ck_assert_msg(RUN(&r, NULL, "--config", cfg, "--db", FIXTURE_DB, "enqueue",
                      file, "--json") == 0,
                  "%s: %s", job_files[_i], r.err);
    o = cJSON_Parse(r.out);
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(cJSON_IsArray(o) ? cJSON_GetArraySize(o) : 1,
                     job_counts[_i]);
    cJSON_Delete(o);
    run_result_free(&r);
    free(cfg);
    free(file);
}
END_TEST

START_TEST(test_enqueue_sh_dedupes_per_day)
{
    char *script = source_path("examples/enqueue.sh");
    char *job = source_path("examples/nightly-changelog.json");
    char cmd[4096], *out;

    setenv("STEPQ", stepq_bin(), 1);
    setenv("STEPQ_DB", FIXTURE_DB, 1);
    snprintf(cmd, sizeof(cmd), "sh '%s' '%s'", script, job);
    ck_assert_int_eq(run_sh(cmd, &out), 0);
    ck_assert_msg(strstr(out, "enqueued job 1 (key nightly-changelog-"), "%s",
                  out);
    free(out);
    ck_assert_int_eq(run_sh(cmd, &out), 0);
    ck_assert_msg(strstr(out, "job 1 already enqueued today"), "%s", out);
    free(out);
    snprintf(cmd, sizeof(cmd), "echo '{}' > bad.json && sh '%s' bad.json",
             script);
    ck_assert_int_eq(run_sh(cmd, &out), 2);
    ck_assert_msg(strstr(out, "name: missing"), "%s", out);
    free(out);
    free(job);
    free(script);
}
END_TEST

START_TEST(test_enqueue_py_sends_a_batch)
{
    char *script = source_path("examples/enqueue.py");
    char cmd[4096], *out;

    ck_assert_msg(run_sh("command -v python3", &out) == 0,
                  "no python3: scripts/deps.sh installs it");
    free(out);
    setenv("STEPQ", stepq_bin(), 1);
    setenv("STEPQ_DB", FIXTURE_DB, 1);
    snprintf(cmd, sizeof(cmd), "python3 '%s' 'first prompt' 'second prompt'",
             script);
    ck_assert_int_eq(run_sh(cmd, &out), 0);
    ck_assert_msg(strstr(out, "enqueued job 1: first prompt") &&
                      strstr(out, "enqueued job 2: second prompt"),
                  "%s", out);
    free(out);
    snprintf(cmd, sizeof(cmd), "python3 '%s' 'second prompt'", script);
    ck_assert_int_eq(run_sh(cmd, &out), 0);
    ck_assert_msg(strstr(out, "already queued job 2"), "%s", out);
    free(out);
    free(script);
}
END_TEST

START_TEST(test_demo_rejects_bad_usage)
{
    struct run_result r;

    ck_assert_int_eq(RUN(&r, NULL, "demo", "--jobs", "0"), 2);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "demo", "--help"), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: stepq demo"));
    run_result_free(&r);
}
END_TEST

/* ---- stepq demo ------------------------------------------------------- */

/* The rest of the first line that starts with prefix (caller frees). */
static char *
line_value(const char *text, const char *prefix)
{
    const char *p = text, *end;

    while ((p = strstr(p, prefix)) != NULL && p != text && p[-1] != '\n')
        p++;
    ck_assert_msg(p != NULL, "no line starting with '%s'", prefix);
    p += strlen(prefix);
    end = strchr(p, '\n');
    return xstrndup(p, end ? (size_t)(end - p) : strlen(p));
}

static long long
num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    ck_assert_msg(cJSON_IsNumber(v), "no number %s", k);
    return (long long)v->valuedouble;
}

/* The demo's closing "park list" command, run by /bin/sh exactly as
 * printed, on a PATH with no stepq (a newcomer after scripts/demo.sh),
 * lists the parked items. */
static void
check_printed_command_runs(const char *out)
{
    const char *at = strstr(out, "\nInspect and resolve:\n  ");
    char *line, cmd[4096], *res;

    ck_assert_ptr_nonnull(at);
    at += strlen("\nInspect and resolve:\n  ");
    line = xstrndup(at, strcspn(at, "\n"));
    ck_assert_msg(strstr(line, " park list") != NULL, "%s", line);
    snprintf(cmd, sizeof(cmd), "PATH=/usr/bin:/bin; %s --json", line);
    ck_assert_msg(run_sh(cmd, &res) == 0, "%s\n%s", cmd, res);
    ck_assert_msg(res[0] == '[' && (strstr(res, "\"state\":\"open\"") ||
                                    strstr(res, "\"state\": \"open\"")),
                  "%s\n%s", cmd, res);
    free(res);
    free(line);
}

/* The demo's agent: its two labels were posted once each with their
 * keys, its comment waits in an approval item showing the exact
 * arguments, and the printed --approve command resolves it. */
static void
check_agent_parked(const char *out, const char *db)
{
    const char *at;
    char *line = NULL, cmd[4096], *res, *log, *dir;
    struct run_result r;
    cJSON *items, *it, *appr = NULL;

    ck_assert_int_eq(RUN(&r, NULL, "--db", db, "park", "list", "--json"), 0);
    items = cJSON_Parse(r.out);
    run_result_free(&r);
    cJSON_ArrayForEach(it, items)
    {
        const cJSON *reason = cJSON_GetObjectItem(it, "reason");
        if (strcmp(reason->valuestring, "approval") == 0)
            appr = it;
    }
    ck_assert_msg(appr != NULL, "no approval item: %s", out);
    it = cJSON_GetObjectItem(appr, "call");
    ck_assert_str_eq(cJSON_GetObjectItem(it, "tool")->valuestring,
                     "post_comment");
    ck_assert_ptr_nonnull(
        strstr(cJSON_GetObjectItem(cJSON_GetObjectItem(it, "args"), "body")
                   ->valuestring,
               "Reproduced on 1.48"));
    cJSON_Delete(items);
    dir = xstrndup(db, strrchr(db, '/') - db);
    snprintf(cmd, sizeof(cmd),
             "grep -c '\"path\":\"/repos/api/issues/412/labels/' "
             "'%s/mock-comments.log'; grep -c 'issue-412-label-bug' "
             "'%s/mock-comments.log'; grep -c '/issues/412/comments' "
             "'%s/mock-comments.log'",
             dir, dir, dir);
    ck_assert_int_eq(run_sh(cmd, &log), 1); /* the last grep finds none */
    ck_assert_str_eq(log, "2\n1\n0\n");
    free(log);
    free(dir);
    at = strstr(out, "--approve --by you\n");
    ck_assert_ptr_nonnull(at);
    while (at > out && at[-1] != '\n')
        at--;
    line = xstrndup(at, strcspn(at, "\n"));
    snprintf(cmd, sizeof(cmd), "PATH=/usr/bin:/bin; %s", line);
    ck_assert_msg(run_sh(cmd, &res) == 0, "%s\n%s", cmd, res);
    free(res);
    free(line);
}

START_TEST(test_demo_summary_matches_database)
{
    struct run_result r, s;
    long long ok, parked, failed, queued, running, cancelled, park_open;
    char *db, *counts;
    int64_t t0 = clock_mono_ms(), took;
    cJSON *st, *jobs;
    struct stat sb;

    RUN(&r, NULL, "demo");
    took = clock_mono_ms() - t0;
    if (r.status != 0)
        fprintf(stderr, "demo output:\n%s\n%s\n", r.out, r.err);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(took < 30000, "demo took %lld ms", (long long)took);
    /* Not a terminal: plain progress lines, no carriage returns. */
    ck_assert_ptr_null(strchr(r.out, '\r'));
    ck_assert_ptr_nonnull(strstr(r.out, "s] jobs "));
    db = line_value(r.out, "database: ");
    ck_assert_msg(strncmp(db, fixture_dir, strlen(fixture_dir)) == 0, "db %s",
                  db);
    ck_assert_int_eq(stat(db, &sb), 0);
    counts = line_value(r.out, "jobs: ");
    ck_assert_int_eq(sscanf(counts,
                            "%lld succeeded, %lld parked, %lld failed, %lld "
                            "queued, %lld running, %lld cancelled; park "
                            "items open: %lld",
                            &ok, &parked, &failed, &queued, &running,
                            &cancelled, &park_open),
                     7);
    ck_assert_int_eq(RUN(&s, NULL, "--db", db, "status", "--json"), 0);
    st = cJSON_Parse(s.out);
    ck_assert_ptr_nonnull(st);
    jobs = cJSON_GetObjectItem(st, "jobs");
    ck_assert_int_eq(num(jobs, "succeeded"), ok);
    ck_assert_int_eq(num(jobs, "parked"), parked);
    ck_assert_int_eq(num(jobs, "failed"), failed);
    ck_assert_int_eq(num(jobs, "queued"), queued);
    ck_assert_int_eq(num(jobs, "running"), running);
    ck_assert_int_eq(num(jobs, "cancelled"), cancelled);
    ck_assert_int_eq(num(st, "park_open"), park_open);
    /* The batch drained, and the scripted trouble parked the two posts
     * without an idempotency key that met it; the posts that came after
     * the comments API's daily limit (how many depends on timing) were
     * parked unsent, held by its wall. The agent's comment waits for
     * approval. */
    ck_assert_int_eq(ok + parked + failed, 21);
    ck_assert_int_ge(parked, 3);
    ck_assert_int_eq(park_open, parked);
    /* The post for search (no key) is parked for a human either way: in
     * doubt when its 502 came first, or held unsent when billing's daily
     * limit walled the comments host before it went (the order of the two
     * posts depends on the jobs' timing: an ASan run saw the second). */
    ck_assert_msg(strstr(r.out, "changelog-search, step post_comment, reason "
                                "in_doubt") != NULL ||
                      strstr(r.out, "changelog-search, step post_comment, "
                                    "reason hard_quota") != NULL,
                  "the search post is not parked:\n%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "HTTP 429 hard_quota (daily_cap)"));
    if (parked > 2)
        ck_assert_ptr_nonnull(strstr(r.out, "not sent: 127.0.0.1:"));
    ck_assert_ptr_nonnull(strstr(r.out, "park resolve"));
    ck_assert_ptr_nonnull(strstr(r.out, "switch_tier_replay"));
    check_printed_command_runs(r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "reason approval"));
    ck_assert_ptr_nonnull(strstr(r.out, "agent    ok"));
    check_agent_parked(r.out, db);
    cJSON_Delete(st);
    run_result_free(&s);
    run_result_free(&r);
    free(counts);
    free(db);
}
END_TEST

/* ---- install ---------------------------------------------------------- */

START_TEST(test_install_then_build_c_example_with_pkg_config)
{
    const char *build = env_or_fail("STEPQ_BUILD_DIR");
    const char *cmake = env_or_fail("STEPQ_CMAKE");
    const char *cc = env_or_fail("STEPQ_CC");
    const char *prefix = env_or_fail("STEPQ_INSTALL_PREFIX");
    const char *cflags = getenv("STEPQ_TEST_CFLAGS");
    char *root = tmpdir_join(fixture_dir, "root"), *job, *out, cmd[8192],
         p[4096];
    static const char *const files[] = {"bin/stepq",
                                        "lib/libstepq.so",
                                        "lib/libstepq.a",
                                        "include/stepq.h",
                                        "lib/pkgconfig/stepq.pc",
                                        "share/man/man1/stepq.1",
                                        "share/stepq/examples/enqueue.c"};
    struct stat sb;

    snprintf(cmd, sizeof(cmd), "DESTDIR='%s' '%s' --install '%s'", root, cmake,
             build);
    ck_assert_msg(run_sh(cmd, &out) == 0, "%s", out);
    free(out);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(p, sizeof(p), "%s%s/%s", root, prefix, files[i]);
        ck_assert_msg(stat(p, &sb) == 0, "not installed: %s", p);
    }
    snprintf(cmd, sizeof(cmd), "grep -c '^\\.SS' '%s%s/share/man/man1/stepq.1'",
             root, prefix);
    ck_assert_int_eq(run_sh(cmd, &out), 0);
    ck_assert_int_ge(atoi(out), 10);
    free(out);
    /* The installed copy of the example, built the way its comment says. */
    snprintf(cmd, sizeof(cmd),
             "export PKG_CONFIG_PATH='%s%s/lib/pkgconfig' "
             "PKG_CONFIG_SYSROOT_DIR='%s' && "
             "'%s' %s '%s%s/share/stepq/examples/enqueue.c' "
             "$(pkg-config --cflags --libs stepq) -o enqueue",
             root, prefix, root, cc, cflags ? cflags : "", root, prefix);
    ck_assert_msg(run_sh(cmd, &out) == 0, "%s\n%s", cmd, out);
    free(out);
    job = source_path("examples/nightly-changelog.json");
    snprintf(cmd, sizeof(cmd),
             "LD_LIBRARY_PATH='%s%s/lib' ./enqueue q.db '%s' && "
             "'%s%s/bin/stepq' --db q.db jobs show 1 --json",
             root, prefix, job, root, prefix);
    ck_assert_msg(run_sh(cmd, &out) == 0, "%s", out);
    ck_assert_msg(strncmp(out, "1\n", 2) == 0, "%s", out);
    ck_assert_msg(strstr(out, "\"name\":\"nightly-changelog\"") ||
                      strstr(out, "\"name\": \"nightly-changelog\""),
                  "%s", out);
    free(out);
    /* The same example linked with libstepq.a: it needs no libstepq.so. */
    snprintf(
        cmd, sizeof(cmd),
        "'%s' %s '%s%s/share/stepq/examples/enqueue.c' -I'%s%s/include' "
        "'%s%s/lib/libstepq.a' $(pkg-config --libs sqlite3 libcjson libpq) -lm "
        "-o enqueue-static && ! readelf -d enqueue-static | grep libstepq "
        "&& ./enqueue-static q.db '%s'",
        cc, cflags ? cflags : "", root, prefix, root, prefix, root, prefix,
        job);
    ck_assert_msg(run_sh(cmd, &out) == 0, "%s\n%s", cmd, out);
    ck_assert_msg(strstr(out, "1 (duplicate)\n") != NULL, "%s", out);
    free(out);
    free(job);
    free(root);
}
END_TEST

/* The build tree's stepq.pc: a program builds and runs against a build
 * that is not installed, both libraries and stepq.h found through it. */
START_TEST(test_build_tree_pkg_config)
{
    const char *build = env_or_fail("STEPQ_BUILD_DIR");
    const char *cc = env_or_fail("STEPQ_CC");
    const char *cflags = getenv("STEPQ_TEST_CFLAGS");
    char *src = source_path("examples/enqueue.c");
    char *job = source_path("examples/nightly-changelog.json"), cmd[8192], *out;

    snprintf(cmd, sizeof(cmd),
             "export PKG_CONFIG_PATH='%s/lib' && '%s' %s '%s' "
             "$(pkg-config --cflags --libs stepq) -o enqueue && "
             "LD_LIBRARY_PATH=\"$(pkg-config --variable=libdir stepq)\" "
             "./enqueue q.db '%s' && test -f \"$(pkg-config --variable=libdir "
             "stepq)/libstepq.a\"",
             build, cc, cflags ? cflags : "", src, job);
    ck_assert_msg(run_sh(cmd, &out) == 0, "%s\n%s", cmd, out);
    ck_assert_msg(strncmp(out, "1\n", 2) == 0, "%s", out);
    free(out);
    free(job);
    free(src);
}
END_TEST

static int
count_of(const char *s, const char *what)
{
    int n = 0;

    for (; (s = strstr(s, what)) != NULL; s += strlen(what))
        n++;
    return n;
}

/* libstepq.so exports the stepq_* functions and nothing else. */
START_TEST(test_installed_library_exports_only_stepq)
{
    const char *build = env_or_fail("STEPQ_BUILD_DIR");
    char cmd[4096], *out;

    snprintf(cmd, sizeof(cmd),
             "nm -D --defined-only '%s/lib/libstepq.so' | awk '{print $NF}'",
             build);
    ck_assert_int_eq(run_sh(cmd, &out), 0);
    ck_assert_msg(strstr(out, "stepq_open") && strstr(out, "stepq_enqueue"),
                  "%s", out);
    for (char *l = strtok(out, "\n"); l != NULL; l = strtok(NULL, "\n"))
        ck_assert_msg(strncmp(l, "stepq_", 6) == 0, "exported: %s", l);
    free(out);
}
END_TEST

/* A host program with its own xmalloc and log_write links libstepq
 * statically and dynamically, and each keeps to its own functions. */
START_TEST(test_host_with_own_xmalloc_links_both_ways)
{
    const char *build = env_or_fail("STEPQ_BUILD_DIR");
    const char *cc = env_or_fail("STEPQ_CC");
    const char *cflags = getenv("STEPQ_TEST_CFLAGS");
    char *src = source_path("tests/data/libstepq_host.c");
    char *inc = source_path("include"), cmd[8192], *out;
    struct run_result r;

    ck_assert_int_eq(RUN(&r, NULL, "--db", "newer.db", "init"), 0);
    run_result_free(&r);
    ck_assert_int_eq(
        run_sh("sqlite3 newer.db 'PRAGMA user_version = 999'", &out), 0);
    free(out);
    snprintf(cmd, sizeof(cmd),
             "'%s' %s '%s' -I'%s' '%s/lib/libstepq.a' $(pkg-config --libs "
             "sqlite3 libcjson libpq) -lm -o host-static && ./host-static q.db "
             "newer.db && '%s' %s '%s' -I'%s' -L'%s/lib' -lstepq -o "
             "host-shared && LD_LIBRARY_PATH='%s/lib' ./host-shared q.db "
             "newer.db",
             cc, cflags ? cflags : "", src, inc, build, cc,
             cflags ? cflags : "", src, inc, build, build);
    ck_assert_msg(run_sh(cmd, &out) == 0, "%s\n%s", cmd, out);
    ck_assert_msg(count_of(out, "job 1 queued, host calls 0\n") == 2, "%s",
                  out);
    free(out);
    free(inc);
    free(src);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("examples");
    TCase *ex = tcase_create("examples");
    TCase *demo = tcase_create("demo");
    TCase *inst = tcase_create("install");

    tcase_add_checked_fixture(ex, setup_db, fixture_teardown);
    tcase_set_timeout(ex, 30);
    tcase_add_loop_test(ex, test_job_file_validates, 0,
                        (int)(sizeof(job_files) / sizeof(job_files[0])));
    tcase_add_test(ex, test_enqueue_sh_dedupes_per_day);
    tcase_add_test(ex, test_enqueue_py_sends_a_batch);
    tcase_add_test(ex, test_demo_rejects_bad_usage);
    suite_add_tcase(s, ex);

    tcase_add_checked_fixture(demo, setup, fixture_teardown);
    tcase_set_timeout(demo, 60);
    tcase_add_test(demo, test_demo_summary_matches_database);
    suite_add_tcase(s, demo);

    tcase_add_checked_fixture(inst, setup_db, fixture_teardown);
    tcase_set_timeout(inst, 120);
    tcase_add_test(inst, test_install_then_build_c_example_with_pkg_config);
    tcase_add_test(inst, test_build_tree_pkg_config);
    tcase_add_test(inst, test_installed_library_exports_only_stepq);
    tcase_add_test(inst, test_host_with_own_xmalloc_links_both_ways);
    suite_add_tcase(s, inst);
    return s;
}

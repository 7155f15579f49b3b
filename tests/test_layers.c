/* test_layers.c: the arrows of docs/architecture.md hold, and break loudly.
 *
 * The check (scripts/layers.py, run by scripts/test.sh before the builds)
 * passes on the tree, and on a copy of it with a wrong-way include, link
 * or engine header planted it fails naming the file, the line and the
 * arrow. The build (cmake/rooms.cmake) is asked too: with the include path
 * a room's target gets, a wrong-way include does not compile
 * (STEPQ_INC_<room>, STEPQ_CC: tests/CMakeLists.txt). */
#include <check.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "tests/support/support.h"

#define ARROWS_DOC "docs/architecture.md"

/* sh runs the printf-style command with /bin/sh and returns its exit
 * code; *out gets stdout and stderr (caller frees). */
static int sh(char **out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int
sh(char **out, const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    ck_assert_int_lt(n, (int)sizeof(cmd));
    return run_sh(cmd, out);
}

/* The repository copied into the per-test folder, as "tree". */
static void
copy_setup(void)
{
    char *src = source_path(""), *out;

    fixture_setup();
    ck_assert_msg(sh(&out,
                     "mkdir tree && tar -C '%s' --exclude='./build*' "
                     "--exclude=./.git -cf - . | tar -C tree -xf -",
                     src) == 0,
                  "copy: %s", out);
    free(out);
    free(src);
}

/* layers runs the check on root; returns its exit code, *out its words. */
static int
layers(const char *root, char **out)
{
    char *script = source_path("scripts/layers.py");
    int st = sh(out, "python3 '%s' --root '%s'", script, root);

    free(script);
    return st;
}

/* plant writes a file of text at tree/rel. */
static void
plant(const char *rel, const char *text)
{
    free(tmpdir_write("tree", rel, text, strlen(text)));
}

/* edit runs the shell command cmd (sed, echo) on the copy and asserts it
 * succeeded. */
static void
edit(const char *cmd)
{
    char *out;

    ck_assert_msg(sh(&out, "%s", cmd) == 0, "%s: %s", cmd, out);
    free(out);
}

/* fails_with runs the check on the copy and asserts it fails, naming what. */
static void
fails_with(const char *what)
{
    char *out;

    ck_assert_int_eq(layers("tree", &out), 1);
    ck_assert_msg(strstr(out, what) != NULL, "want \"%s\" in:\n%s", what, out);
    free(out);
}

START_TEST(test_tree_follows_arrows)
{
    char *root = source_path(""), *out;

    ck_assert_msg(layers(root, &out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "follow the arrows of " ARROWS_DOC));
    free(out);
    free(root);
}
END_TEST

START_TEST(test_lower_room_includes_higher)
{
    plant("policy/planted.c",
          "#include \"policy/policy.h\"\n#include \"worker/worker.h\"\n");
    plant("common/planted.c", "#include \"queue/queue.h\"\n");
    fails_with("policy/planted.c:2: policy -> worker is not an arrow of "
               "docs/architecture.md (policy may include: common)");
    fails_with("common/planted.c:1: common -> queue is not an arrow of "
               "docs/architecture.md");
}
END_TEST

START_TEST(test_arrow_within_layer_not_listed)
{
    plant("worker/planted.c", "#include \"view/view.h\"\n");
    plant("view/planted.h", "#include \"worker/worker.h\"\n");
    plant("tier/planted.c", "#include \"http/http.h\"\n");
    fails_with("worker/planted.c:1: worker -> view is not an arrow");
    fails_with("view/planted.h:1: view -> worker is not an arrow");
    fails_with("tier/planted.c:1: tier -> http is not an arrow");
}
END_TEST

START_TEST(test_list_is_the_doc)
{
    char *out;

    plant("worker/planted.c", "#include \"view/view.h\"\n");
    edit("echo 'target_link_libraries(stepq_worker PRIVATE stepq_view)' "
         ">> tree/worker/CMakeLists.txt");
    fails_with("worker -> view is not an arrow");
    edit("sed -i 's/^sched -> spec$/&\\nworker -> view/' tree/" ARROWS_DOC);
    ck_assert_msg(layers("tree", &out) == 0, "%s", out);
    free(out);
    edit("sed -i 's/^worker -> view$/common -> queue/' tree/" ARROWS_DOC);
    fails_with("common -> queue crosses layers");
}
END_TEST

START_TEST(test_internal_header_of_another_folder)
{
    plant("serve/planted.c", "#include \"park/internal.h\"\n");
    plant("queue/planted.c", "#include \"queue/sqlite/internal.h\"\n");
    fails_with("serve/planted.c:1: \"park/internal.h\" is private to park/: "
               "include park/park.h");
    fails_with("queue/planted.c:1: \"queue/sqlite/internal.h\" is private "
               "to queue/sqlite/");
}
END_TEST

START_TEST(test_include_not_from_root)
{
    plant("view/planted.c",
          "#include \"internal.h\"\n#include \"../tier/tier.h\"\n");
    fails_with("view/planted.c:1: \"internal.h\": spell a project include "
               "from the repository root, as \"view/internal.h\"");
    fails_with("view/planted.c:2: \"../tier/tier.h\": spell a project "
               "include from the repository root, as \"tier/tier.h\"");
}
END_TEST

START_TEST(test_engine_header_outside_its_folder)
{
    plant("worker/planted.c", "#include <sqlite3.h>\n");
    plant("queue/pg/planted.c", "#include <curl/curl.h>\n");
    plant("view/planted.c", "#include <libpq-fe.h>\n#include "
                            "<microhttpd.h>\n");
    fails_with("worker/planted.c:1: <sqlite3.h> is included only in "
               "queue/sqlite/");
    fails_with("queue/pg/planted.c:1: <curl/curl.h> is included only in "
               "http/");
    fails_with("view/planted.c:1: <libpq-fe.h> is included only in "
               "queue/pg/");
    fails_with("view/planted.c:2: <microhttpd.h> is included only in "
               "serve/");
}
END_TEST

START_TEST(test_link_against_arrows)
{
    /* Directly, and through a PUBLIC link: demo may include worker, but
     * not park, which worker would then pass on. */
    edit("echo 'target_link_libraries(stepq_queue PRIVATE stepq_spec)' >> "
         "tree/queue/CMakeLists.txt");
    edit("echo 'target_link_libraries(stepq_worker PUBLIC stepq_park)' >> "
         "tree/worker/CMakeLists.txt");
    fails_with("stepq_queue reaches spec/'s headers: queue -> spec is not "
               "an arrow");
    fails_with("stepq_demo reaches park/'s headers (through stepq_worker, "
               "which links stepq_park PUBLIC): demo -> park is not an "
               "arrow");
}
END_TEST

/* An allowed include whose room is not linked would fail to compile: the
 * check says which line of CMake to change before the build does. */
START_TEST(test_include_needs_its_link)
{
    plant("view/planted.c", "#include \"http/http.h\"\n");
    edit("sed -i 's|^#include \"common/defs.h\"|&\\n#include "
         "\"tier/tier.h\"|' tree/worker/worker.h");
    fails_with("view/planted.c:1: \"http/http.h\": view/CMakeLists.txt does "
               "not link stepq_http: add it to target_link_libraries");
    fails_with("\"tier/tier.h\" in a public header: worker/CMakeLists.txt "
               "links stepq_tier PUBLIC");
}
END_TEST

/* policy is pure: a call that reads the clock, logs or does I/O fails,
 * one named in a comment or a string does not. */
START_TEST(test_policy_stays_pure)
{
    plant("policy/planted.c", "/* time(NULL) */\n#include <time.h>\n"
                              "long f(void);\nconst char *g = \"log_info(\";\n"
                              "long\nf(void)\n{\n    return time(NULL);\n}\n");
    fails_with("policy/planted.c:8: time(): policy is pure (no I/O, no "
               "clock, no logging)");
    fails_with("layers: 1 problem(s)");
}
END_TEST

START_TEST(test_new_folder_and_examples)
{
    plant("examples/planted.c", "#include <stepq.h>\n#include "
                                "\"queue/queue.h\"\n");
    ck_assert_int_eq(system("mkdir tree/room"), 0);
    plant("room/a.c", "int a;\n");
    fails_with("examples/planted.c:2: queue/queue.h: an example includes "
               "only stepq.h");
    fails_with("room/: a folder of C code that no layer of "
               "docs/architecture.md's arrows block names");
}
END_TEST

/* compiles reports whether text compiles with the include path of room's
 * target (STEPQ_INC_<room>: the build's own, ':'-separated); *out gets
 * the compiler's words. */
static int
compiles(const char *room, const char *text, char **out)
{
    char var[64], *path, *p, flags[8192] = "";
    const char *cc = getenv("STEPQ_CC");

    snprintf(var, sizeof(var), "STEPQ_INC_%s", room);
    ck_assert_msg(cc != NULL && getenv(var) != NULL, "%s unset", var);
    path = xstrdup(getenv(var));
    for (p = strtok(path, ":"); p != NULL; p = strtok(NULL, ":")) {
        strcat(flags, " -I");
        strcat(flags, p);
    }
    free(path);
    plant("planted.c", text);
    return sh(out,
              "%s -std=c11 -D_POSIX_C_SOURCE=200809L -fsyntax-only%s "
              "tree/planted.c",
              cc, flags) == 0;
}

/* What a room's target finds on its include path. cli links stepq_worker,
 * which links stepq_tier and stepq_http PRIVATE: cli finds worker.h, not
 * tier.h or http.h. */
static const struct reach_case {
    const char *room, *header;
    bool found;
} reach[] = {
    {"policy", "policy/policy.h", true},  {"policy", "common/log.h", true},
    {"policy", "worker/worker.h", false}, {"policy", "queue/queue.h", false},
    {"common", "common/defs.h", true},    {"common", "queue/queue.h", false},
    {"cli", "worker/worker.h", true},     {"cli", "tier/tier.h", false},
    {"cli", "http/http.h", false},
};

START_TEST(test_build_finds_only_what_it_links)
{
    const struct reach_case *c = &reach[_i];
    char text[128], *out;

    ck_assert_int_eq(system("mkdir tree"), 0);
    snprintf(text, sizeof(text), "#include \"%s\"\n", c->header);
    ck_assert_msg(compiles(c->room, text, &out) == c->found, "%s: %s\n%s",
                  c->room, c->header, out);
    if (!c->found)
        ck_assert_ptr_nonnull(strstr(out, ": No such file or directory"));
    free(out);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("layers");
    TCase *check = tcase_create("check");
    TCase *build = tcase_create("build");

    tcase_add_checked_fixture(check, copy_setup, fixture_teardown);
    tcase_set_timeout(check, 30);
    tcase_add_test(check, test_tree_follows_arrows);
    tcase_add_test(check, test_lower_room_includes_higher);
    tcase_add_test(check, test_arrow_within_layer_not_listed);
    tcase_add_test(check, test_list_is_the_doc);
    tcase_add_test(check, test_internal_header_of_another_folder);
    tcase_add_test(check, test_include_not_from_root);
    tcase_add_test(check, test_engine_header_outside_its_folder);
    tcase_add_test(check, test_link_against_arrows);
    tcase_add_test(check, test_include_needs_its_link);
    tcase_add_test(check, test_policy_stays_pure);
    tcase_add_test(check, test_new_folder_and_examples);
    suite_add_tcase(s, check);

    tcase_add_checked_fixture(build, fixture_setup, fixture_teardown);
    tcase_set_timeout(build, 30);
    tcase_add_loop_test(build, test_build_finds_only_what_it_links, 0,
                        (int)(sizeof(reach) / sizeof(reach[0])));
    suite_add_tcase(s, build);
    return s;
}

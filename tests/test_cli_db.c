/* test_cli_db.c: only `stepq init` creates or migrates a database. Every
 * other command, and libstepq, given a path with no stepq database says
 * so (exit 1) and leaves nothing behind; an older schema waits for `stepq
 * init`, a newer one is refused. Also the dispatcher's exit codes: help
 * is 0 and a raw -errno that escaped a command is 1, never success; and
 * the text tables line up whatever their cells hold. Real processes, each
 * test in its own temporary directory. */
#include "tests/support/support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "include/stepq.h"

#define GOOD_JOB(key)                                                          \
    "{\"name\":\"n\",\"key\":\"" key "\",\"steps\":[{\"name\":\"a\","          \
    "\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}}]}"

/* ---- only `stepq init` creates a database ----------------------------- */

static const char *const db_commands[][5] = {
    {"status", NULL},          {"status", "--json", NULL},
    {"tiers", NULL},           {"enqueue", "-", NULL},
    {"jobs", "list", NULL},    {"jobs", "show", "1", NULL},
    {"jobs", "cancel", "1"},   {"park", "list", NULL},
    {"park", "show", "1"},     {"park", "resolve", "1", "--skip"},
    {"work", "--drain", NULL},
};

/* Runs db_commands[i] on db with a valid job on stdin; the exit code. */
static int
run_on(struct run_result *r, int i, const char *db)
{
    const char *argv[8] = {"--db", db};
    int n = 2;

    for (int k = 0; k < 5 && db_commands[i][k] != NULL; k++)
        argv[n++] = db_commands[i][k];
    argv[n] = NULL;
    return run_cmd(r, GOOD_JOB("k"), argv);
}

/* The names in the test's folder, sorted and joined by spaces. */
static char *
dir_listing(void)
{
    struct dirent **names = NULL;
    int n = scandir(".", &names, NULL, alphasort);
    char *out = xstrdup("");

    ck_assert_int_ge(n, 0);
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            char *next = xmalloc(strlen(out) + strlen(names[i]->d_name) + 2);
            sprintf(next, "%s%s%s", out, out[0] ? " " : "", names[i]->d_name);
            free(out);
            out = next;
        }
        free(names[i]);
    }
    free(names);
    return out;
}

START_TEST(test_no_database_exit_1_nothing_created)
{
    struct run_result r;
    struct stat st;
    char *ls;

    ck_assert_int_eq(run_on(&r, _i, "typo.db"), 1);
    ck_assert_str_eq(r.err, "stepq: no stepq database at typo.db (create it "
                            "with `stepq init`)\n");
    ck_assert_str_eq(r.out, "");
    run_result_free(&r);
    ck_assert_str_eq(ls = dir_listing(), "");
    free(ls);
    /* An empty file is no database either, and it stays empty. */
    close(open("empty.db", O_WRONLY | O_CREAT, 0600));
    ck_assert_int_eq(run_on(&r, _i, "empty.db"), 1);
    ck_assert_ptr_nonnull(strstr(r.err, "no stepq database at empty.db ("));
    run_result_free(&r);
    ck_assert_str_eq(ls = dir_listing(), "empty.db");
    free(ls);
    ck_assert_int_eq(stat("empty.db", &st), 0);
    ck_assert_int_eq(st.st_size, 0);
}
END_TEST

/* A PostgreSQL location's password is never printed: every command that
 * cannot reach the server (nothing listens on port 1) names the location
 * with the password masked. */
START_TEST(test_pg_password_never_printed)
{
    static const char loc[] = "postgresql://u:S3cretPw@127.0.0.1:1/q";
    struct run_result r;

    ck_assert_int_eq(run_on(&r, _i, loc), 1);
    ck_assert_ptr_null(strstr(r.out, "S3cretPw"));
    ck_assert_ptr_null(strstr(r.err, "S3cretPw"));
    ck_assert_ptr_nonnull(strstr(r.err, "postgresql://u:***@127.0.0.1:1/q"));
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "init", "--db", loc), 1);
    ck_assert_ptr_null(strstr(r.err, "S3cretPw"));
    ck_assert_ptr_nonnull(strstr(r.err, "u:***@"));
    run_result_free(&r);
}
END_TEST

/* A location no backend of this build serves is bad input: exit 2 naming
 * it, and nothing is created; sqlite:PATH is the same file as PATH. */
START_TEST(test_unsupported_location_exit_2)
{
    struct run_result r;
    char *ls;

    ck_assert_int_eq(run_on(&r, _i, "mysql://127.0.0.1/stepq"), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "mysql://127.0.0.1/stepq: not a "
                                        "database location"));
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "init", "--db", "mysql://h/q"), 2);
    run_result_free(&r);
    ck_assert_str_eq(ls = dir_listing(), "");
    free(ls);
    ck_assert_int_eq(RUN(&r, NULL, "init", "--db", "sqlite:q.db"), 0);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "status", "--db", "q.db"), 0);
    run_result_free(&r);
}
END_TEST

/* sqlite3 (the shell) runs sql on db; returns its first output line. */
static char *
sqlite(const char *db, const char *sql)
{
    char cmd[1024], line[256] = "";
    FILE *p;

    snprintf(cmd, sizeof(cmd), "sqlite3 '%s' '%s'", db, sql);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    if (fgets(line, sizeof(line), p) == NULL)
        line[0] = '\0';
    ck_assert_int_eq(pclose(p), 0);
    line[strcspn(line, "\n")] = '\0';
    return xstrdup(line);
}

/* Turns a fresh database into one of schema version 1. */
#define V2_TO_V1                                                               \
    "DROP TRIGGER attempts_total_insert; DROP TRIGGER attempts_total_update; " \
    "DROP TABLE attempt_totals; "                                              \
    "DROP INDEX jobs_finished; DROP INDEX attempts_body; "                     \
    "DROP TABLE park; DROP TABLE tiers; DROP TABLE schedules; "                \
    "DROP TABLE tier_events; ALTER TABLE attempts DROP COLUMN masked; "        \
    "ALTER TABLE attempts DROP COLUMN route; "                                 \
    "ALTER TABLE attempts DROP COLUMN kind; "                                  \
    "ALTER TABLE attempts DROP COLUMN call_id; "                               \
    "ALTER TABLE attempts DROP COLUMN tool; "                                  \
    "ALTER TABLE attempts DROP COLUMN args; "                                  \
    "ALTER TABLE attempts DROP COLUMN cost_nusd; "                             \
    "ALTER TABLE attempts DROP COLUMN cost_estimated; DROP TABLE budgets; "    \
    "DROP TABLE job_retries; DROP TABLE batch_items; DROP TABLE batches; "     \
    "DROP TABLE operators; DROP TABLE audit; "                                 \
    "ALTER TABLE jobs DROP COLUMN input; "                                     \
    "PRAGMA user_version = 1;"

/* A database of schema version 1 (before the park and tier tables) is
 * refused, untouched, by everything but init, which migrates it; one
 * from a newer stepq is refused by init too. */
START_TEST(test_older_database_waits_for_init_newer_refused)
{
    struct run_result r;
    char *v;

    ck_assert_int_eq(RUN(&r, NULL, "init", "--db", "q.db"), 0);
    run_result_free(&r);
    free(sqlite("q.db", V2_TO_V1));
    ck_assert_int_eq(RUN(&r, GOOD_JOB("a"), "enqueue", "--db", "q.db"), 1);
    ck_assert_ptr_nonnull(strstr(r.err, "the database at q.db is from an "
                                        "older stepq: run `stepq init`"));
    run_result_free(&r);
    ck_assert_str_eq(v = sqlite("q.db", "PRAGMA user_version"), "1");
    free(v);
    ck_assert_int_eq(RUN(&r, NULL, "init", "--db", "q.db"), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "database q.db migrated from an older "
                                        "schema (schema version"));
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "init", "--db", "q.db"), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "database q.db ready"));
    run_result_free(&r);
    ck_assert_int_eq(run_job_count(FIXTURE_DB), 0);
    free(sqlite("q.db", "PRAGMA user_version = 999"));
    ck_assert_int_eq(RUN(&r, NULL, "status", "--db", "q.db"), 1);
    ck_assert_ptr_nonnull(strstr(r.err, "made by a newer stepq"));
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "init", "--db", "q.db"), 1);
    ck_assert_ptr_nonnull(strstr(r.err, "made by a newer stepq"));
    run_result_free(&r);
    ck_assert_str_eq(v = sqlite("q.db", "PRAGMA user_version"), "999");
    free(v);
}
END_TEST

/* libstepq tells "no database" and "needs init" apart from other errors
 * and, like the CLI, creates nothing. */
START_TEST(test_libstepq_open_needs_init)
{
    struct run_result r;
    stepq *q = NULL;
    char err[256], *ls;

    ck_assert_int_eq(stepq_open("typo.db", &q, err, sizeof(err)), -ENOENT);
    ck_assert_str_eq(err, "no stepq database at typo.db (create it with "
                          "`stepq init`)");
    ck_assert_ptr_null(q);
    ck_assert_int_eq(stepq_open("mysql://h/q", &q, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "not a database location"));
    ck_assert_ptr_null(q);
    ck_assert_str_eq(ls = dir_listing(), "");
    free(ls);
    ck_assert_int_eq(RUN(&r, NULL, "init", "--db", "q.db"), 0);
    run_result_free(&r);
    free(sqlite("q.db", V2_TO_V1));
    ck_assert_int_eq(stepq_open("q.db", &q, err, sizeof(err)), -ESTALE);
    ck_assert_ptr_nonnull(strstr(err, "run `stepq init`"));
    ck_assert_int_eq(RUN(&r, NULL, "init", "--db", "q.db"), 0);
    run_result_free(&r);
    ck_assert_int_eq(stepq_open("q.db", &q, err, sizeof(err)), 0);
    stepq_close(q);
}
END_TEST

/* ---- exit codes from the dispatcher ----------------------------------- */

static int
cmd_raw_errno(struct cli_env *env, int argc, char **argv)
{
    (void)env, (void)argc, (void)argv;
    return -ENOENT;
}

static int
cmd_help(struct cli_env *env, int argc, char **argv)
{
    (void)env, (void)argc, (void)argv;
    return CLI_HELP;
}

static int
cmd_conflict(struct cli_env *env, int argc, char **argv)
{
    (void)env, (void)argc, (void)argv;
    return CLI_CONFLICT;
}

START_TEST(test_raw_errno_exits_1_help_exits_0)
{
    static const struct cli_command cmds[] = {
        {"raw", cmd_raw_errno}, {"help", cmd_help}, {"busy", cmd_conflict}};
    static const char *const want[][2] = {
        {"raw", "1"}, {"help", "0"}, {"busy", "4"}, {"nope", "2"}};
    struct cli_env env = {0};

    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char *argv[] = {"stepq", (char *)want[i][0], NULL};
        ck_assert_int_eq(cli_dispatch(&env, cmds, 3, 2, argv),
                         atoi(want[i][1]));
    }
}
END_TEST

/* A database file this user may not write, or one in a folder it may not
 * write, is refused naming why: SQLite's WAL mode writes both, even to
 * read. Root is not stopped by modes: then the command runs as nobody
 * (setpriv). */
static const char *const unwritable[][2] = {
    {"chmod 400 ro/q.db", "ro/q.db: cannot open it for writing"},
    {"chmod 555 ro", "ro/q.db: its folder ro is not writable"},
};

START_TEST(test_unwritable_database_says_why)
{
    const char *bin = stepq_bin();
    bool root = geteuid() == 0;
    char cmd[4096], *out = NULL;

    snprintf(cmd, sizeof(cmd),
             "cd '%s' && chmod 711 . && mkdir ro && '%s' --db ro/q.db init"
             " >/dev/null && %s %s; %s '%s' --db ro/q.db status; rc=$?;"
             " chmod 755 ro; chmod 600 ro/q.db; exit $rc",
             fixture_dir, bin, root ? "chown -R 65534:65534 ro &&" : "",
             unwritable[_i][0],
             root ? "setpriv --reuid=65534 --regid=65534 --clear-groups" : "",
             bin);
    ck_assert_int_eq(run_sh(cmd, &out), 1);
    ck_assert_msg(strstr(out, unwritable[_i][1]) != NULL, "%s", out);
    free(out);
}
END_TEST

/* Output that cannot be written fails the command (exit 1, saying so),
 * even when the command did its work: an enqueue whose id is lost must
 * not look like success to a script. */
START_TEST(test_lost_output_exits_1)
{
    static const char *const cmds[] = {"status --json", "jobs list --json",
                                       "enqueue --json < job.json", "--help"};
    const char *bin = getenv("STEPQ_BIN");
    char cmd[1024], *err = NULL;
    size_t len = 0;
    struct run_result r;

    ck_assert_ptr_nonnull(bin);
    ck_assert_int_eq(RUN(&r, NULL, "--db", "q.db", "init"), 0);
    run_result_free(&r);
    free(tmpdir_write(".", "job.json", GOOD_JOB("k"), strlen(GOOD_JOB("k"))));
    for (size_t i = 0; i < STEPQ_ARRAY_LEN(cmds); i++) {
        snprintf(cmd, sizeof(cmd), "'%s' --db q.db %s > /dev/full 2> err.txt",
                 bin, cmds[i]);
        int status = system(cmd);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1,
                      "%s: status %d", cmds[i], status);
        ck_assert_int_eq(file_read_all("err.txt", 1 << 16, &err, &len), 0);
        ck_assert_msg(strstr(err, "cannot write the output") != NULL, "%s: %s",
                      cmds[i], err);
        free(err);
    }
}
END_TEST

/* ---- tables ------------------------------------------------------------ */

/* Checks that every row of the table printed in out lines up with its
 * headings: a left-aligned cell starts where its heading does, a
 * right-aligned one ends where its heading ends. */
static void
check_columns(const char *out, const char *const *heads, const char *align,
              int n)
{
    const char *nl = strchr(out, '\n'), *line, *from = out;
    size_t at[16], end[16];

    ck_assert_ptr_nonnull(nl);
    for (int c = 0; c < n; c++) {
        const char *h = strstr(from, heads[c]);
        ck_assert_msg(h != NULL && h < nl, "no heading %s:\n%s", heads[c], out);
        at[c] = (size_t)(h - out);
        end[c] = at[c] + strlen(heads[c]);
        from = h + strlen(heads[c]);
    }
    for (line = nl + 1; *line != '\0'; line = strchr(line, '\n') + 1) {
        for (int c = 0; c < n; c++) {
            bool ok = align[c] == 'r'
                          ? line[end[c] - 1] != ' ' &&
                                (line[end[c]] == ' ' || line[end[c]] == '\n')
                          : line[at[c]] != ' ' &&
                                (at[c] == 0 || line[at[c] - 1] == ' ');
            ck_assert_msg(ok, "%s out of line:\n%s", heads[c], out);
        }
    }
}

/* Columns as wide as their widest cell: a job name and a tier name longer
 * than any fixed width keep the rest of their rows in line. */
START_TEST(test_tables_line_up)
{
    static const char *const jobs[] = {"ID", "STATE", "CREATED", "NAME", "KEY"};
    static const char *const tiers[] = {
        "TIER",      "BREAKER",   "OPEN UNTIL", "EXHAUSTED UNTIL",
        "REASON",    "PACE RPM",  "RPM",        "TPM",
        "ALLOWANCE", "IN FLIGHT", "STEPS"};
    static const char cfg[] =
        "{\"tiers\": [{\"name\": \"a-free-tier-with-a-rather-long-name\","
        " \"base_url\": \"http://127.0.0.1:9/v1\", \"model\": \"m\","
        " \"rpm\": 60}, {\"name\": \"local\", \"base_url\":"
        " \"http://127.0.0.1:9/v1\", \"model\": \"m\"}]}";
    struct run_result r;

    free(tmpdir_write(".", "stepq.json", cfg, strlen(cfg)));
    ck_assert_int_eq(RUN(&r, NULL, "init"), 0);
    run_result_free(&r);
    ck_assert_int_eq(
        RUN(&r,
            "{\"name\":\"a-job-name-longer-than-any-column-was\",\"steps\":"
            "[{\"name\":\"a\",\"request\":{\"messages\":[{\"role\":\"user\","
            "\"content\":\"hi\"}]}}]}\n"
            "{\"name\":\"n\",\"key\":\"k\",\"steps\":[{\"name\":\"a\","
            "\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
            "}}]}",
            "enqueue", "-"),
        0);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "jobs", "list"), 0);
    check_columns(r.out, jobs, "lllll", 5);
    run_result_free(&r);
    ck_assert_int_eq(RUN(&r, NULL, "tiers"), 0);
    check_columns(r.out, tiers, "lllllrrrrrl", 11);
    run_result_free(&r);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("cli_db");
    TCase *nodb = tcase_create("database");
    TCase *exits = tcase_create("exit codes");
    TCase *tables = tcase_create("output");

    tcase_add_checked_fixture(nodb, fixture_setup, fixture_teardown);
    tcase_set_timeout(nodb, 60);
    tcase_add_loop_test(nodb, test_no_database_exit_1_nothing_created, 0,
                        (int)(sizeof(db_commands) / sizeof(db_commands[0])));
    tcase_add_loop_test(nodb, test_pg_password_never_printed, 0,
                        STEPQ_ARRAY_LEN(db_commands));
    tcase_add_loop_test(nodb, test_unsupported_location_exit_2, 0,
                        (int)(sizeof(db_commands) / sizeof(db_commands[0])));
    tcase_add_test(nodb, test_older_database_waits_for_init_newer_refused);
    tcase_add_test(nodb, test_libstepq_open_needs_init);
    tcase_add_loop_test(nodb, test_unwritable_database_says_why, 0,
                        STEPQ_ARRAY_LEN(unwritable));
    suite_add_tcase(s, nodb);

    tcase_add_checked_fixture(tables, fixture_setup, fixture_teardown);
    tcase_set_timeout(tables, 30);
    tcase_add_test(tables, test_tables_line_up);
    tcase_add_test(tables, test_lost_output_exits_1);
    suite_add_tcase(s, tables);

    tcase_set_timeout(exits, 10);
    tcase_add_test(exits, test_raw_errno_exits_1_help_exits_0);
    suite_add_tcase(s, exits);
    return s;
}

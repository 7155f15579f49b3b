/* test_units.c: the systemd units of packaging/ load as systemd would
 * load them, and the commands they run exist with the flags they pass,
 * without building the Debian package (scripts/package.sh does that, on
 * demand): scripts/check-units.sh passes on packaging/ with this build's
 * stepq, and fails, naming the unit and the problem, on a copy with an
 * unknown setting, a bad calendar, a command stepq does not have, or a
 * flag its command does not take. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/support.h"

/* Runs the check on dir; its exit code, *out its words (caller frees). */
static int
check_units(const char *dir, char **out)
{
    char *script = source_path("scripts/check-units.sh");
    char cmd[4096];
    int rc;

    snprintf(cmd, sizeof(cmd), "bash '%s' --bin '%s' '%s'", script, stepq_bin(),
             dir);
    rc = run_sh(cmd, out);
    free(script);
    return rc;
}

START_TEST(test_the_units_verify)
{
    char *dir = source_path("packaging"), *out = NULL;

    ck_assert_msg(check_units(dir, &out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "check-units: 4 units verified") != NULL, "%s",
                  out);
    free(out);
    free(dir);
}
END_TEST

/* Each row: a sed expression planted in a copy of packaging/, and what
 * the check must say. */
static const char *const broken[][2] = {
    {"s/^ExecStart=stepq serve/ExecStrat=stepq serve/",
     "stepq-serve.service: "},
    {"s/^OnCalendar=.*/OnCalendar=*-*-* 27:00:00/",
     "Failed to parse calendar specification"},
    {"s/^ExecStart=stepq report/ExecStart=stepq reprot/",
     "stepq-report.service: stepq reprot: no such command"},
    {"s/--grace 30/--linger 30/", "stepq-worker@.service: stepq work has no "
                                  "--linger"},
};

START_TEST(test_a_broken_unit_fails_naming_it)
{
    char *src = source_path("packaging"), *out = NULL, cmd[4096];

    snprintf(cmd, sizeof(cmd),
             "cp -r '%s' units && sed -i '%s' units/*.service units/*.timer",
             src, broken[_i][0]);
    ck_assert_int_eq(run_sh(cmd, &out), 0);
    free(out);
    ck_assert_int_eq(check_units("units", &out), 1);
    ck_assert_msg(strstr(out, broken[_i][1]) != NULL, "%s", out);
    free(out);
    free(src);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("units");
    TCase *tc = tcase_create("units");

    tcase_add_checked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_the_units_verify);
    tcase_add_loop_test(tc, test_a_broken_unit_fails_naming_it, 0,
                        (int)(sizeof(broken) / sizeof(broken[0])));
    suite_add_tcase(s, tc);
    return s;
}

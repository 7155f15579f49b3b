/* main.c: runs the suite of one test binary. Fails when a test failed and
 * also when no test ran (a CK_RUN_CASE typo must not be green). */
#include "tests/support/support.h"

#include <stdlib.h>

int
main(void)
{
    SRunner *sr = srunner_create(test_suite());
    int failed, ran;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    ran = srunner_ntests_run(sr);
    srunner_free(sr);
    return failed == 0 && ran > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

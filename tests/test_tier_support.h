/* test_tier_support.h: what the tier suites (tests/test_tier_*.c) share:
 * a fixed clock and the tier they start from. */
#ifndef STEPQ_TESTS_TEST_TIER_SUPPORT_H
#define STEPQ_TESTS_TEST_TIER_SUPPORT_H

#include <stdint.h>

#include "common/config.h"

#define T0 INT64_C(1800000000000) /* 2027-01-15T08:00:00Z */

/* free_tier returns the tier "free": no limits, a day's allowance window
 * (no allowance), degrade_at 0.8, 10 s timeout, breaker after 3 failures
 * with a 30 s cooldown. Its strings are static. */
struct config_tier free_tier(void);

#endif

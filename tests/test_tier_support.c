/* test_tier_support.c: the tier the tier suites start from (see
 * test_tier_support.h). */
#include "tests/test_tier_support.h"

#include <string.h>

struct config_tier
free_tier(void)
{
    struct config_tier t;
    memset(&t, 0, sizeof(t));
    t.name = "free";
    t.base_url = "http://127.0.0.1:1/v1";
    t.model = "m";
    t.window_s = 60;
    t.allowance_window_s = 86400;
    t.degrade_at = 0.8;
    t.timeout_s = 10;
    t.breaker.failures = 3;
    t.breaker.cooldown_s = 30;
    return t;
}

/* internal.h: what the common/ sources share (private to common/). */
#ifndef STEPQ_COMMON_INTERNAL_H
#define STEPQ_COMMON_INTERNAL_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "common/config.h"
#include "common/defs.h"

/* config__parse_tier validates the tier object o (at JSON path path) into
 * *t, which it fills only on success (nothing to free on failure); dir
 * (may be NULL) resolves its relative file paths. Returns 0, or -EINVAL
 * with "PATH: problem" in err (config_tier.c). */
STEPQ_MUST_CHECK int config__parse_tier(const cJSON *o, const char *path,
                                        const char *dir, struct config_tier *t,
                                        char *err, size_t len);

/* config__resolve_path returns rel resolved against dir (rel itself when
 * absolute or dir is NULL or empty). Caller frees (config.c). */
char *config__resolve_path(const char *dir, const char *rel);

/* config__tier_cleanup frees what t owns (config_tier.c). */
void config__tier_cleanup(struct config_tier *t);

#endif

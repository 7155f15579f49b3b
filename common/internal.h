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

/* config__parse_batch reads a tier's "mode", "batch" and, in batch mode,
 * its "realtime_price" into t (after its price). Returns 0, or -EINVAL
 * with "PATH: problem" in err (config_batch.c). */
STEPQ_MUST_CHECK int config__parse_batch(const cJSON *o, const char *path,
                                         struct config_tier *t, char *err,
                                         size_t len);
/* config__parse_price reads the price object member key of o (absent:
 * none, out untouched) into *out. Returns 0, or -EINVAL with "PATH:
 * problem" in err (config_tier.c). */
STEPQ_MUST_CHECK int config__parse_price(const cJSON *o, const char *path,
                                         const char *key, struct price *out,
                                         char *err, size_t len);
/* config__resolve_path returns rel resolved against dir (rel itself when
 * absolute or dir is NULL or empty). Caller frees (config.c). */
char *config__resolve_path(const char *dir, const char *rel);

/* config__parse_api reads the tier o's "api", "max_tokens", "stream",
 * "first_byte_timeout_s" and "idle_timeout_s" into t
 * (config_api.c). Returns 0, or -EINVAL with "PATH.api: problem" in err. */
STEPQ_MUST_CHECK int config__parse_api(const cJSON *o, const char *path,
                                       struct config_tier *t, char *err,
                                       size_t len);

/* config__tier_cleanup frees what t owns (config_tier.c). */
void config__tier_cleanup(struct config_tier *t);

/* config__window_seconds reads "minute", "hour", "day", "week" or "month"
 * (30 days) into *out; -EINVAL for anything else (config_tier.c). */
STEPQ_MUST_CHECK int config__window_seconds(const char *s, int64_t *out);

/* config__parse_budgets validates "budgets" (v, an array) into c's
 * budgets, after its tiers and schedules, whose names it checks. Returns
 * 0, or -EINVAL with "PATH: problem" in err; what was parsed is c's to
 * free either way (config_budget.c). */
STEPQ_MUST_CHECK int config__parse_budgets(const cJSON *v, struct config *c,
                                           char *err, size_t len);

/* config__budgets_free frees c's budgets (config_budget.c). */
void config__budgets_free(struct config *c);

/* config__parse_tools validates "tools" (v, an array of objects with a
 * unique "name") into *out, copying each definition. Returns 0, or -EINVAL
 * with "PATH: problem" in err; what was parsed is out's to free either way
 * (config_tools.c). */
STEPQ_MUST_CHECK int config__parse_tools(const cJSON *v,
                                         struct config_tools *out, char *err,
                                         size_t len);

/* config__parse_hooks validates "hooks" (v, an object of name: command)
 * into *out. Returns 0, or -EINVAL with "hooks.NAME: problem" in err;
 * what was parsed is out's to free either way (config_hooks.c). */
STEPQ_MUST_CHECK int config__parse_hooks(const cJSON *v,
                                         struct config_hooks *out, char *err,
                                         size_t len);
/* config__hooks_free frees what hooks owns and zeroes it. */
void config__hooks_free(struct config_hooks *hooks);

/* config__tools_free frees what tools owns and zeroes it (config_tools.c). */
void config__tools_free(struct config_tools *tools);

#endif

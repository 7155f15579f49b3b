/* defs.h: attributes and tiny macros shared by every module.
 *
 * common/ is the leaf every folder may use and that uses none of them
 * (libc and cJSON only): defs.h, xalloc.h (allocation that aborts on
 * OOM), log.h, clock.h, file.h (capped reads), json.h (validation with
 * JSON paths, output helpers) and config.h (the config file). */
#ifndef STEPQ_COMMON_DEFS_H
#define STEPQ_COMMON_DEFS_H

/* STEPQ_MUST_CHECK marks functions whose result must not be ignored. */
#define STEPQ_MUST_CHECK __attribute__((warn_unused_result))

/* STEPQ_PRINTF(f, a) checks printf-style format arguments. */
#define STEPQ_PRINTF(f, a) __attribute__((format(printf, f, a)))

#define STEPQ_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif

/* internal.h: declarations shared inside spec/ only. */
#ifndef STEPQ_SPEC_INTERNAL_H
#define STEPQ_SPEC_INTERNAL_H

#include <stddef.h>

#include "spec/spec.h"

/* spec__validate checks j->root against every rule of docs/reference.md
 * "Job file" and fills the rest of j (borrowed from j->root). Returns 0, or
 * -EINVAL with the JSON path of the first problem in err. */
int spec__validate(struct spec_job *j, const struct spec_opts *opts, char *err,
                   size_t len);

#endif

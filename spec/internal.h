/* internal.h: declarations shared inside spec/ only. */
#ifndef STEPQ_SPEC_INTERNAL_H
#define STEPQ_SPEC_INTERNAL_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "spec/spec.h"

/* spec__validate checks j->root against every rule of docs/reference.md
 * "Job file" and fills the rest of j (borrowed from j->root). Returns 0, or
 * -EINVAL with the JSON path of the first problem in err. */
int spec__validate(struct spec_job *j, const struct spec_opts *opts, char *err,
                   size_t len);

/* One level of a JSON path, kept on the stack while walking; the text
 * "steps[0].request.messages[1].content" is only formatted on error. */
struct spec_seg {
    const struct spec_seg *up;
    const char *key; /* member name, or NULL for an array index */
    int index;
};

/* spec__check_sent checks item (a step's request or http, at path at) as
 * it will be sent, for step self of job (whose step names are all read):
 * templates name earlier steps and are written as such, and no object
 * holds a member twice. Returns 0, or -EINVAL with the path in err. */
int spec__check_sent(const cJSON *item, const struct spec_seg *at,
                     const struct spec_job *job, size_t self, char *err,
                     size_t len);

/* spec__check_http_url checks an http step's url (path: the step's
 * "http" object): http or https, a host and port templates cannot change,
 * no byte that would split the request line; templates only in the path
 * and query. spec__check_http_headers checks its headers object: HTTP
 * tokens, one of each in any case, no framing header, field values, an
 * "env:" value naming a variable. Both return 0, or -EINVAL with the
 * JSON path of the problem in err. */
int spec__check_http_url(const char *url, const char *path, char *err,
                         size_t len);
int spec__check_http_headers(const cJSON *headers, const char *path, char *err,
                             size_t len);

/* ---- tools (tools.c, tool_args.c) ---------------------------------------- */

/* The step fields of tools.c, in this order, in validate.c's step_keys:
 * "tools" and its loop's bounds. */
#define SPEC_TOOL_STEP_KEYS                                                    \
    "tools", "max_turns", "max_tool_calls_per_turn", "tool_parallelism",       \
        "max_tool_errors"

/* spec__step_tools reads a step's tools and loop bounds (o, the step at
 * path). has: bit i set when the i-th name of SPEC_TOOL_STEP_KEYS is
 * there. Tools are resolved against opts->tools when set, else their names
 * are only checked. Returns 0, or -EINVAL with the path in err. */
int spec__step_tools(const cJSON *o, unsigned has, const char *path,
                     struct spec_step *s, const struct spec_opts *opts,
                     char *err, size_t len);

/* spec__arg_path_ok tells whether the n bytes at p are an argument path:
 * NAME, then ".NAME" or "[INDEX]" any number of times. */
bool spec__arg_path_ok(const char *p, size_t n);

/* spec__arg_known tells whether an argument's name (n bytes at name) is
 * a property params declare, or one they let through
 * (additionalProperties true or a schema). */
bool spec__arg_known(const cJSON *params, const char *name, size_t n);

/* spec__parse_approval reads tool object o's "needs_approval" (at path)
 * into t (its parameters already set): "never", "always" or a condition
 * whose argument paths name its properties. */
int spec__parse_approval(const cJSON *o, const char *path, struct spec_tool *t,
                         char *err, size_t len);

#endif

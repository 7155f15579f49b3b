/* internal.h: declarations shared inside spec/ only. */
#ifndef STEPQ_SPEC_INTERNAL_H
#define STEPQ_SPEC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "spec/spec.h"

/* The size of a buffer a JSON path of an error is written into. */
#define PATH_LEN 256

/* spec__key_rules checks a job's key (key.c): not empty, not a schedule's;
 * unless stored (the key of a job an older stepq stored, which must still
 * run), at most SPEC_KEY_MAX_BYTES of UTF-8 without control characters.
 * Returns 0, or -EINVAL with the JSON path and why in err. */
int spec__key_rules(const char *key, bool stored, char *err, size_t len);
/* spec__hook_name reads the job's on_done or on_fail (key, present in
 * root) into *name (borrowed from root): the name of one of opts' hooks
 * when opts names them (key.c). Returns 0, or -EINVAL with "KEY: ..." in
 * err. */
int spec__hook_name(const cJSON *root, const char *key,
                    const struct spec_opts *opts, const char **name, char *err,
                    size_t len);
/* spec__run_at reads a job's run_at (NULL: none) into j->run_at, or, for
 * a span ("+10m"), j->run_after_ms (key.c). Returns 0, or -EINVAL with
 * "run_at: ..." in err. */
int spec__run_at(const char *run_at, struct spec_job *j, char *err, size_t len);

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
 * holds a member twice; *templated is set when it holds a template.
 * Returns 0, or -EINVAL with the path in err. */
int spec__check_sent(const cJSON *item, const struct spec_seg *at,
                     const struct spec_job *job, size_t self,
                     const struct spec_opts *opts, bool *templated, char *err,
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

/* One template found in a string (path.c). */
struct spec_tpl {
    const char *at;   /* its "{{" */
    size_t len;       /* through its "}}" */
    bool input;       /* {{input...}}; else {{steps.NAME.output...}} */
    bool item;        /* a foreach step's element ({{item...}}) */
    size_t step;      /* the step it names */
    const char *path; /* the PATH after "output." or "input.", or NULL */
    size_t pathlen;
};

/* spec__tpl_next finds the next template in a string at or after *pos, for a
 * string of step self (it may name earlier steps only); at is the JSON
 * path of the string, for messages; opts may be NULL. Returns 1 with *t
 * set and *pos past it, 0 when none is left, or -EINVAL with "at: why" in
 * err: a template written with spaces or without its "}}", naming an
 * unknown, later or its own step, {{schedule.*}} outside a schedule,
 * {{env.*}}. Text in braces of no namespace stepq knows ("{{name}}") is
 * not a template: it is sent as written. */
int spec__tpl_next(const char **pos, const struct spec_job *j, size_t self,
                   const struct spec_opts *opts, const char *at,
                   struct spec_tpl *t, char *err, size_t len);

/* spec__tpl_value is the value t reads from v: 0 with *out (a copy,
 * caller cJSON_Deletes it), -ENOENT when it is absent (err says why:
 * "{{input.x}}: no x in the input"), or -EAGAIN when v cannot know it
 * (v->outputs is NULL: a step's output before the job runs). */
int spec__tpl_value(const struct spec_tpl *t, const struct spec_job *j,
                    const struct spec_vars *v, cJSON **out, char *err,
                    size_t len);

/* spec__tpl_whole tells whether s is exactly one template (then *t). */
bool spec__tpl_whole(const char *s, const struct spec_job *j, size_t self,
                     const struct spec_opts *opts, struct spec_tpl *t);

/* spec__fill fills the templates of every string under node in place,
 * for step self: json, a string that is one template whole takes the
 * value's JSON type; else values are text. Returns 0, or -ENOENT with
 * "{{...}}: why" in err. */
int spec__fill(cJSON *node, bool json, const struct spec_job *j, size_t self,
               const struct spec_vars *v, char *err, size_t len);

/* spec__step_foreach reads step object o's "foreach" (at path) into s;
 * key: the job's key (an element's step is allowed only in a job whose
 * key is a foreach's). Returns 0, or -EINVAL with the path in err. */
int spec__step_foreach(const cJSON *o, const char *path, const char *key,
                       struct spec_step *s, char *err, size_t len);
/* spec__check_step_url checks url, the http url of step object step (at
 * path), as spec__check_http_url does, a foreach step's element read
 * where a template may stand. Returns 0 or -EINVAL with the path in err. */
int spec__check_step_url(const cJSON *step, const char *url, const char *path,
                         char *err, size_t len);
/* spec__foreach_tools returns a copy of tools (step object step's) with
 * the element's templates in each tool's http url written as
 * spec__check_step_url reads them, for the checks of the tools; NULL when
 * the step has no foreach. Caller cJSON_Deletes it. */
cJSON *spec__foreach_tools(const cJSON *step, const cJSON *tools);
/* spec__check_foreach checks step i's "foreach" source once every step's
 * name is known: one template whole, not its own element; an input it
 * reads is there and an array of at most SPEC_FOREACH_MAX (unless
 * opts->stored); a step's output read whole is refused (it is text)
 * unless that step is a foreach's. Returns 0 or -EINVAL. */
int spec__check_foreach(const struct spec_job *j, size_t i,
                        const struct spec_opts *opts, char *err, size_t len);

/* spec__take makes string node (a leaf) the value val, which it takes
 * (and frees): its type and contents, keeping node's place and name in
 * its parent. */
void spec__take(cJSON *node, cJSON *val);

/* spec__check_when checks step self's "when" (at: its JSON path): the
 * forms of when.c, templates as spec__tpl_next takes them, each the whole
 * of its string, and {{input.*}} present in opts' input. Returns 0 or
 * -EINVAL with the JSON path of the problem in err. */
int spec__check_when(const cJSON *when, const char *at,
                     const struct spec_job *j, size_t self,
                     const struct spec_opts *opts, char *err, size_t len);

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
/* spec__tool_templates checks the http actions of step self's tools (an
 * inline tool's, and a shared one's when opts->tools has it) as what the
 * step sends is checked (spec__check_sent): every template names an
 * earlier step, an input that is there, no {{schedule.*}} outside a
 * schedule. Returns 0, or -EINVAL with the path in err (a shared tool's
 * named). */
int spec__tool_templates(const struct spec_job *j, size_t self,
                         const struct spec_opts *opts, char *err, size_t len);

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

/* spec__check_request checks a chat step's request (at path's
 * "request"): an object with a non-empty messages array of objects with a
 * role, and no option stepq cannot honour ("stream", "n"). spec__check_degrade
 * checks a step's "degrade" object (at path). 0, or -EINVAL with err
 * naming the path (request.c). */
int spec__check_request(const cJSON *req, const char *path, char *err,
                        size_t len);
int spec__check_degrade(const cJSON *d, const char *path, char *err,
                        size_t len);

#endif

/* spec.h: job files: parse, validate, and the bulk framings (one job, a
 * JSON array of jobs, JSON lines), per docs/reference.md "Job file".
 *
 * spec/ owns what a valid job is. It does no I/O: callers read the bytes
 * (cli, libstepq, the demo) and hand the validated jobs to the queue as
 * rows (spec_job_row); the worker parses a stored job's text again to run
 * it. Errors name the JSON path of the first problem. Nothing here stores.
 */
#ifndef STEPQ_SPEC_SPEC_H
#define STEPQ_SPEC_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/config.h"
#include "common/defs.h"
#include "queue/queue.h"

enum spec_step_kind { SPEC_STEP_CHAT = 0, SPEC_STEP_HTTP = 1 };

/* One validated step. Pointers to cJSON are borrowed from the owning
 * spec_job's tree; strings are owned by it too. */
struct spec_step {
    const char *name;
    enum spec_step_kind kind;
    bool replayable;             /* default: chat true, http false */
    bool side_effects;           /* default: chat false, http true */
    const char *idempotency_key; /* NULL: none */
    int max_attempts;            /* default 3 */
    int64_t token_budget;        /* tokens one request is planned to fit
                                    (input + output); default 8000: the
                                    yardstick of decide's 60% rule */
    int64_t max_total_tokens;    /* cap on the tokens the step spends over
                                    all attempts and tiers; 0: none */
    double timeout_s;            /* one attempt, send to last byte; 0: the
                                    tier's timeout_s (http steps: 60) */
    const cJSON *expect_json;    /* array of key strings, or NULL */
    const cJSON *tiers;          /* array of tier names, or NULL: all */
    const cJSON *request;        /* chat body (object), NULL for http */
    const cJSON *http;           /* {method,url,headers,body}, NULL for chat */
    const cJSON *degrade;        /* {max_tokens,drop_tools,...} or NULL */
    const cJSON *when;           /* the step's condition (when.c), or NULL */
    bool stream;                 /* chat: streamed on every tier it uses */
    bool templated;              /* what it sends holds a template */
    /* A chat step's tools (tools.c): "tools" as given, names of the
     * config's shared tools and inline definitions, or NULL; and the
     * bounds of its tool loop (defaults 10, 16, 4, 5). */
    const cJSON *tools;
    int max_turns, max_tool_calls_per_turn, tool_parallelism;
    int max_tool_errors;
    /* "foreach" (foreach.c): the array the step runs over (one template
     * whole), the name its elements are read by in the step's templates
     * ("item" by default) and how many of them run at once; foreach_in
     * NULL: none. element >= 0: the step is element K of another job's
     * foreach step (a job stepq made, key "foreach:..."), its templates
     * already filled; -1 otherwise. */
    const char *foreach_in;
    const char *foreach_as;
    int foreach_parallelism;
    int element;
};

/* A parsed, validated job. Caller owns it; free with spec_job_free(). */
struct spec_job {
    cJSON *root;      /* owned: the job as given */
    char *text;       /* owned: the job as JSON text, as it is stored */
    const char *name; /* borrowed from root */
    const char *key;  /* NULL: no dedupe key */
    int64_t priority; /* higher runs first; default 0 */
    int64_t run_at;   /* ms; 0 = at enqueue time */
    /* A run_at given as a span ("+10m"): its ms after the enqueue's time,
     * which spec_enqueue adds; -1: none (run_at is absolute or 0). */
    int64_t run_after_ms;
    int64_t deadline_s; /* default 3600, counted from run_at */
    /* The config hooks told when the job ends succeeded (on_done) or
     * failed (on_fail), by name; NULL: none. Borrowed from root. */
    const char *on_done, *on_fail;
    /* "max_cost_usd" in nano-dollars: what the job's attempts may cost in
     * all (docs/reference.md "Budgets"); -1: no cap */
    int64_t max_cost_nusd;
    size_t nsteps;
    struct spec_step *steps; /* owned array */
    /* The job's input: spec_opts.input (a copy, owned in input_own) or
     * the job's own "input" field (borrowed from root); NULL: none. */
    const cJSON *input;
    cJSON *input_own; /* owned */
    char *input_text; /* owned: input as compact JSON, as it is stored */
};

/* What validation may check beyond the job itself. */
struct spec_opts {
    const char *const *tiers; /* known tier names (NULL: not checked) */
    size_t ntiers;
    /* true: the job was stored by an enqueue, maybe of an older stepq;
     * rules added since for what a store takes (the key's length and
     * characters) are not applied again, so that a job queued before them
     * still runs. */
    bool stored;
    /* Every job's input (borrowed; it outlives the validation), which
     * replaces a job's own "input" field; NULL: each job's own. */
    const cJSON *input;
    /* The name of the schedule whose job this is (its {{schedule.*}}
     * are filled in, and it may have no key of its own); NULL: none. */
    const char *schedule;
    /* The config's shared tool definitions, which steps name in "tools"
     * (NULL: names are not checked here; the worker resolves them). */
    const struct config_tools *tools;
    /* The config's named hooks, which a job's on_done and on_fail must
     * name (NULL: not checked, as for a stored job: the worker looks the
     * name up when the job ends). */
    const struct config_hooks *hooks;
};

/* The largest input, as compact JSON text. */
#define SPEC_INPUT_MAX_BYTES (256 * 1024)

/* The keys of schedules' jobs ("schedule:NAME:SLOT"): no other job may
 * take one, so that a job with such a key is a slot's. */
#define SPEC_SCHEDULE_KEY_PREFIX "schedule:"

/* spec_key_reserved tells whether key is one only a schedule gives. */
bool spec_key_reserved(const char *key);
/* The longest key, in bytes. Every store indexes keys for dedupe, and
 * PostgreSQL's index takes at most about 2,700 bytes a row: a longer key
 * would be refused there alone, with a storage error. */
#define SPEC_KEY_MAX_BYTES 1024

/* spec_key_check applies a job file's rules for a key to a key given
 * apart from the job (stepq enqueue --key, libstepq): not empty, at most
 * SPEC_KEY_MAX_BYTES, not a schedule's, UTF-8 without control characters.
 * Returns 0, or -EINVAL with "key: ..." in err (len bytes). */
STEPQ_MUST_CHECK int spec_key_check(const char *key, char *err, size_t len);

/* Largest accepted job, as JSON text. */
#define SPEC_JOB_MAX_BYTES (1024 * 1024)

/* spec_parse validates one job's JSON text (every rule of
 * docs/reference.md "Job file") and returns it parsed. Returns 0, or -EINVAL
 * with the JSON path of the first problem in err ("steps[1].request: missing").
 * opts may be NULL. Caller owns *out. */
STEPQ_MUST_CHECK int spec_parse(const char *text, size_t len,
                                const struct spec_opts *opts,
                                struct spec_job **out, char *err,
                                size_t errlen);
/* spec_from_json validates an already parsed job object and takes
 * ownership of it (also on failure: it is then deleted). */
STEPQ_MUST_CHECK int spec_from_json(cJSON *job, const struct spec_opts *opts,
                                    struct spec_job **out, char *err,
                                    size_t errlen);
/* spec_parse_many accepts one job, a JSON array of jobs, or JSON lines
 * (one job per line). Every job is validated before anything is returned;
 * the error is prefixed with the job ("job 3: steps[0].name: missing", or
 * "line 4: ..." for JSON lines). Caller owns the array (*out, *n) and frees
 * it with spec_jobs_free(). It holds every job at once: a caller that
 * stores them uses a spec_stream instead. */
STEPQ_MUST_CHECK int spec_parse_many(const char *text, size_t len,
                                     const struct spec_opts *opts,
                                     struct spec_job ***out, size_t *n,
                                     char *err, size_t errlen);
/* spec_job_free releases a job spec; NULL is a no-op. */
void spec_job_free(struct spec_job *spec);
/* spec_jobs_free releases an array of n specs and the array. */
void spec_jobs_free(struct spec_job **specs, size_t n);

/* spec_input_parse parses the JSON text of an input given apart from a
 * job (stepq enqueue --input, POST /v1/jobs "input", libstepq) and checks
 * its size (at most SPEC_INPUT_MAX_BYTES as compact JSON). Returns 0 with
 * *out (caller cJSON_Deletes it), or -EINVAL with "input: ..." in err. */
STEPQ_MUST_CHECK int spec_input_parse(const char *text, size_t len, cJSON **out,
                                      char *err, size_t errlen);

/* spec_job_row fills row with what the queue stores of j (borrowed from
 * j: valid while j is). */
void spec_job_row(const struct spec_job *j, struct q_job_new *row);
/* spec_job_rows returns n rows for jobs, in order. Caller owns the array
 * (free()); the strings in it are borrowed from jobs. */
struct q_job_new *spec_job_rows(struct spec_job *const *jobs, size_t n);

/* ---- templates and conditions at run time (path.c, when.c) ----------
 *
 * docs/reference.md "Templates": {{steps.NAME.output}},
 * {{steps.NAME.output.PATH}} and {{input.PATH}} (PATH: object keys and
 * array indices split by dots, "labels.0"). What they read: */
struct spec_vars {
    const cJSON *input;         /* the job's input, NULL: none */
    const char *const *outputs; /* one per step: its output, NULL: none */
    const bool *skipped;        /* one per step: skipped by its "when"
                                   (a reference to its output fails; in a
                                   condition it is absent), or NULL */
    const cJSON *item; /* a foreach step's element being filled, NULL: not
                          known yet (its templates stay as written) */
    /* owned (spec_vars_init makes it, spec_vars_cleanup frees it): each
     * output a template reads into, parsed as JSON once however many
     * templates read it; NULL: parsed again for each template */
    struct spec_parsed *parsed;
};

/* spec_vars_init zeroes v and gives it a cache of parsed outputs: the
 * caller then sets what the templates read, which must not change until
 * spec_vars_cleanup (a new output is a new spec_vars). */
void spec_vars_init(struct spec_vars *v);
/* spec_vars_cleanup frees v's cache; v may be used again only after
 * spec_vars_init. A v without one (NULL) is left as is. */
void spec_vars_cleanup(struct spec_vars *v);
/* spec_vars_parses is how many outputs v's cache has parsed (0 without
 * one): a count for tests and benchmarks. */
size_t spec_vars_parses(const struct spec_vars *v);

/* spec_step_fill returns a copy of step i's body (a chat step's request,
 * an http step's http object) with every template filled from v: a string
 * that is exactly one template in the request or http "body" keeps the
 * value's JSON type; inside a longer string a value is text (a string as
 * itself, anything else as compact JSON), percent-encoded in the url.
 * With v->outputs NULL (before the job runs: stepq check), the templates
 * of outputs stay as written. Returns 0 with *out (caller cJSON_Deletes
 * it), or -ENOENT with "{{...}}: why" in err when a template cannot be
 * filled (a path missing from an output or the input, an output that is
 * not JSON, a skipped step); *out untouched. */
STEPQ_MUST_CHECK int spec_step_fill(const struct spec_job *j, size_t i,
                                    const struct spec_vars *v, cJSON **out,
                                    char *err, size_t len);

/* spec_http_fill fills the templates of http, an http object (an http
 * step's, or a tool's http action made by spec_tool_request), in place, as
 * step i's are filled (spec_step_fill). Returns 0, or -ENOENT with
 * "{{...}}: why" in err. */
STEPQ_MUST_CHECK int spec_http_fill(const struct spec_job *j, size_t i,
                                    const struct spec_vars *v, cJSON *http,
                                    char *err, size_t len);

/* spec_when_holds evaluates step i's "when" (true when it has none) from
 * v into *holds. When it does not hold, why gets the condition with each
 * template replaced by what it read ("when was false: {\"eq\":
 * [\"feature\",\"bug\"]}"). Nothing fails: a template that cannot be
 * filled is absent, and a comparison with an absent value is false. */
void spec_when_holds(const struct spec_job *j, size_t i,
                     const struct spec_vars *v, bool *holds, char *why,
                     size_t len);

/* spec_output_json parses a step's output as JSON (a Markdown code fence
 * around it is accepted, as models write it); NULL when it is not JSON.
 * Caller cJSON_Deletes the result. */
cJSON *spec_output_json(const char *text, size_t len);

/* spec_check validates text (one job, a JSON array of jobs, JSON lines)
 * as an enqueue with cfg and input would, and more, writing and sending
 * nothing: every tier a step names must be in cfg (also when cfg names
 * none), and every environment variable an http step's "env:NAME" header
 * names must be set. *report (caller cJSON_Deletes it) is
 * {"ok": true, "jobs": [{"name", "input", "steps": [{"name", "kind",
 * "when", "sends"}]}]}, "sends" being what the step sends with every
 * template filled that can be before the job runs (the outputs' stay as
 * written). Returns 0, -EINVAL (a job that is not valid: the message as
 * enqueue's), or -ENOENT ("job 2: steps[1].http.headers.Authorization:
 * environment variable TOKEN is not set"). */
STEPQ_MUST_CHECK int spec_check(const char *text, size_t len,
                                const struct config *cfg, const cJSON *input,
                                cJSON **report, char *err, size_t errlen);

/* ---- streams: bulk input validated as it is read ----------------------
 *
 * A spec_stream takes the bytes of one job, a JSON array of jobs or JSON
 * lines in pieces of any size (spec_stream_feed), validates each job once
 * its last byte is in, and hands them on in batches (spec_batch_fn), so
 * that it holds one job's bytes and one batch at a time, whatever the size
 * of the input. The framing and the messages are spec_parse_many's; a job
 * array element is stored as given (its bytes, not printed again). */

/* A batch of validated jobs, in input order. */
struct spec_batch {
    struct spec_job **jobs; /* n jobs; the callback may take one: it then
                               sets the entry to NULL and owns the job */
    struct q_job_new *rows; /* their rows (spec_job_row), borrowed */
    size_t n;
    size_t first; /* the input index of jobs[0] (0-based) */
};

/* Called with each full batch, and the last one from spec_stream_end. A
 * value other than 0 stops the stream: feed and end return it as is (the
 * callback writes its own message, if any). The batch is freed after. */
typedef int (*spec_batch_fn)(void *ctx, struct spec_batch *b);

typedef struct spec_stream spec_stream;

/* The batch stepq enqueue and libstepq write with one q_enqueue: on
 * PostgreSQL one statement each, and batches of 500 made a 100,000-job
 * enqueue 12% slower than one statement for all. */
#define SPEC_BATCH_JOBS 2000

/* spec_stream_new makes a stream that validates with opts (copied; its
 * tier names are borrowed and must outlive the stream; NULL: none) and
 * calls fn(ctx, ...) with batches of up to batch jobs (fewer when their
 * text reaches 2 MiB). Caller owns the
 * result; free with spec_stream_free(). */
spec_stream *spec_stream_new(const struct spec_opts *opts, size_t batch,
                             spec_batch_fn fn, void *ctx);
/* spec_stream_feed takes the next len bytes of the input. Returns 0,
 * -EINVAL with the message in err ("line 4: name: missing", "job 2: ...",
 * "not valid JSON ..."; the input is then refused whole, and the stream is
 * done), or what the batch callback returned. */
STEPQ_MUST_CHECK int spec_stream_feed(spec_stream *s, const char *data,
                                      size_t len, char *err, size_t errlen);
/* spec_stream_end says the input is over: validates what is left, fails
 * when the input held no job or was cut short, and hands on the last
 * batch. Returns as spec_stream_feed. */
STEPQ_MUST_CHECK int spec_stream_end(spec_stream *s, char *err, size_t errlen);
/* spec_stream_count is the number of jobs validated so far. */
size_t spec_stream_count(const spec_stream *s);
/* spec_stream_is_array tells whether the input is a JSON array. */
bool spec_stream_is_array(const spec_stream *s);
/* spec_stream_free releases s and the jobs it holds; NULL is a no-op. */
void spec_stream_free(spec_stream *s);

/* ---- one enqueue path (enqueue.c) -------------------------------------
 *
 * What `stepq enqueue`, `POST /v1/jobs`, libstepq and schedules share:
 * the tier names of the config, the input, the stream validating job by
 * job, and the batches written with q_enqueue inside one transaction of
 * the store, committed at spec_enqueue_end: all jobs or none. */
struct spec_enqueue_opts {
    q_db *db;    /* NULL: open() gives it at the first batch */
    int64_t now; /* the store's time, with db */
    /* Called at the first batch when db is NULL (a bad first job needs
     * no store): 0 with *db and *now set, or a value that stops the
     * enqueue, returned by feed or end as is (the callback reported). */
    int (*open)(void *ctx, q_db **db, int64_t *now);
    void *ctx;
    const struct config *cfg;          /* tiers checked when it names any,
                                          tools resolved; NULL: not */
    const cJSON *input;                /* every job's input, or NULL */
    const char *schedule;              /* a schedule's job: its name */
    const struct q_enqueue_opts *over; /* NULL: none; over->key is taken
                                          as given (callers check it) */
    /* With over and has_run_after: its run_at is run_after_ms after now
     * (--run-at +10m), set when the store's now is known. */
    bool has_run_after;
    int64_t run_after_ms;
    /* Called with ctx and every result once all jobs are written, inside
     * the transaction, before it commits (an audit row): a value other
     * than 0 rolls it all back and is returned by end as a storage error.
     * NULL: none. Not called when nothing was written. */
    int (*before_commit)(void *ctx, q_db *db,
                         const struct q_enqueue_result *res, size_t n);
};

typedef struct spec_enqueue spec_enqueue;

/* spec_enqueue_new starts an enqueue with o (copied; what it points to
 * is borrowed and must outlive it). Caller owns the result; free with
 * spec_enqueue_free(). */
spec_enqueue *spec_enqueue_new(const struct spec_enqueue_opts *o);
/* spec_enqueue_feed takes the next len bytes of the input (one job, an
 * array of jobs, JSON lines) and writes the jobs validated so far in
 * batches. spec_enqueue_end validates what is left, writes it and
 * commits. Both return 0; -EINVAL with the message in err (a job that is
 * not valid, "job 3: steps[0].name: missing"; --key with more than one
 * job); open()'s value; or a storage error (spec_enqueue_store_failed()
 * is then true, and err says "cannot write the jobs to the database").
 * After a failure nothing is written. */
STEPQ_MUST_CHECK int spec_enqueue_feed(spec_enqueue *e, const char *data,
                                       size_t len, char *err, size_t errlen);
STEPQ_MUST_CHECK int spec_enqueue_end(spec_enqueue *e, char *err,
                                      size_t errlen);
/* spec_enqueue_next ends the input fed so far as spec_enqueue_end
 * does, but writes without committing: the next bytes fed are another
 * input (another file), read from its own start and written in the same
 * transaction. Returns as spec_enqueue_end; the error is the finished
 * input's ("job 2: ..."). */
STEPQ_MUST_CHECK int spec_enqueue_next(spec_enqueue *e, char *err,
                                       size_t errlen);
/* spec_enqueue_text feeds the whole of text and ends. */
STEPQ_MUST_CHECK int spec_enqueue_text(spec_enqueue *e, const char *text,
                                       size_t len, char *err, size_t errlen);
/* spec_enqueue_results is one result per job, in input order (borrowed:
 * valid until spec_enqueue_free); *many: the input was an array or more
 * than one job (print a list). */
const struct q_enqueue_result *spec_enqueue_results(const spec_enqueue *e,
                                                    size_t *n, bool *many);
/* spec_enqueue_store_failed tells a storage error from a bad job. */
bool spec_enqueue_store_failed(const spec_enqueue *e);
/* spec_enqueue_free rolls back what is not committed and frees e; NULL
 * is a no-op. */
void spec_enqueue_free(spec_enqueue *e);

/* spec_tier_names lists cfg's tier names for spec_opts (NULL when cfg
 * names none: then steps' tiers are not checked). Caller frees the
 * array; the names are borrowed from cfg. */
const char **spec_tier_names(const struct config *cfg);

/* ---- tools: what a chat step's model may call (tools.c, schema.c) -----
 *
 * A chat step's "tools" names shared definitions of the config ("tools"
 * there) and holds inline ones (docs/reference.md "Tools"). Each tool is
 * sent to the model as name, description and parameters (a JSON Schema
 * object); the worker checks each call's arguments against the schema and
 * runs its action: an HTTP request templated from the arguments
 * ("{{args.PATH}}"), or a question to a human. */

enum spec_tool_kind { SPEC_TOOL_HTTP = 0, SPEC_TOOL_ASK = 1 };

/* needs_approval: "never" (default), "always", or a condition on the
 * arguments (spec_tool_needs_approval). */
enum spec_approval {
    SPEC_APPROVAL_NEVER = 0,
    SPEC_APPROVAL_ALWAYS,
    SPEC_APPROVAL_IF,
};

/* One validated tool. Pointers are borrowed from the JSON it was read
 * from (the step's tree or the config's definition). */
struct spec_tool {
    const char *name;        /* ^[a-zA-Z0-9_-]{1,64}$ */
    const char *description; /* "" when not given */
    const cJSON *parameters; /* a JSON Schema of "type": "object" */
    enum spec_tool_kind kind;
    const cJSON *http;           /* SPEC_TOOL_HTTP: {method,url,headers,body} */
    const char *ask;             /* SPEC_TOOL_ASK: the question */
    bool replayable;             /* http: false; ask: true */
    bool side_effects;           /* http: true; ask: false */
    const char *idempotency_key; /* template; NULL: none (http only) */
    enum spec_approval approval;
    const cJSON *approval_if; /* SPEC_APPROVAL_IF: the condition object */
    bool shared;              /* a definition of the config's "tools" */
};

/* A step's tools, resolved. Owns the array only. */
struct spec_toolset {
    struct spec_tool *tools;
    size_t n;
};

#define SPEC_TOOLS_MAX 128 /* tools one step may offer */

/* spec_tool_parse validates one tool definition o (at JSON path path)
 * into *out (borrowed from o). Returns 0, or -EINVAL with
 * "PATH.field: problem" in err. */
STEPQ_MUST_CHECK int spec_tool_parse(const cJSON *o, const char *path,
                                     struct spec_tool *out, char *err,
                                     size_t len);
/* spec_toolset_build resolves a step's "tools" array (at path): names
 * are looked up in shared (NULL: the config has none), objects are
 * parsed; a name twice is refused. Returns 0 with *out filled (free with
 * spec_toolset_cleanup; borrowed from tools and shared), or -EINVAL with
 * the path in err (*out then holds nothing). */
STEPQ_MUST_CHECK int spec_toolset_build(const cJSON *tools, const char *path,
                                        const struct config_tools *shared,
                                        struct spec_toolset *out, char *err,
                                        size_t len);
/* spec_toolset_cleanup frees the array of ts and zeroes it. */
void spec_toolset_cleanup(struct spec_toolset *ts);
/* spec_toolset_find returns the tool named name, or NULL. Borrowed. */
const struct spec_tool *spec_toolset_find(const struct spec_toolset *ts,
                                          const char *name);
/* spec_tools_check_config validates every shared tool of cfg as a tool
 * definition ("tools[1].parameters: ..."). Returns 0 or -EINVAL. */
STEPQ_MUST_CHECK int spec_tools_check_config(const struct config *cfg,
                                             char *err, size_t len);
/* spec_tool_needs_approval tells whether a call of t with args (the
 * parsed arguments, borrowed) must be approved before it is sent. */
bool spec_tool_needs_approval(const struct spec_tool *t, const cJSON *args);
/* spec_tool_request fills t's http action with args: every
 * "{{args.PATH}}" is replaced by the value at PATH (a string as it is, any
 * other value as JSON; in the url percent-encoded; a body string that is a
 * whole template takes the value with its JSON type), and the
 * idempotency_key likewise. Other templates ({{steps...}}, {{input...}})
 * are left as written for the step's own expansion. Returns 0 with *http
 * (caller cJSON_Deletes it) and *key (NULL when the tool has none; caller
 * frees), or -EINVAL with err naming the template whose path args lack,
 * or a header value that would hold a line break. */
STEPQ_MUST_CHECK int spec_tool_request(const struct spec_tool *t,
                                       const cJSON *args, cJSON **http,
                                       char **key, char *err, size_t len);

/* spec_schema_check tells whether schema (at JSON path path) is a JSON
 * Schema stepq can check: the keywords type (a name or an array of them),
 * properties, required, additionalProperties, enum, const, items,
 * minItems, maxItems, minLength, maxLength, minimum, maximum, nullable,
 * anyOf, and the annotations description, title, default, examples,
 * format. Returns 0 or -EINVAL with "PATH.keyword: problem". */
STEPQ_MUST_CHECK int spec_schema_check(const cJSON *schema, const char *path,
                                       char *err, size_t len);
/* spec_schema_validate checks value against schema (one that passed
 * spec_schema_check). Returns 0, or -EINVAL with the path of the first
 * problem under path ("args.labels[1]: expected string, got number"). */
STEPQ_MUST_CHECK int spec_schema_validate(const cJSON *schema,
                                          const cJSON *value, const char *path,
                                          char *err, size_t len);

/* ---- foreach: a step run once per element of an array (foreach.c) ----
 *
 * docs/reference.md "Foreach". Each element runs as a job of its own (one
 * step, its templates filled with the element, key
 * "foreach:JOB:STEP:ELEMENT"), which the worker of the foreach step makes
 * and reads back; the step's output is the array of their outputs. */

#define SPEC_FOREACH_MAX          1000 /* elements one step may run over */
#define SPEC_FOREACH_PARALLEL_MAX 64   /* elements that may run at once */
#define SPEC_FOREACH_KEY_PREFIX   "foreach:"

/* spec_foreach_items reads the array step i runs over from v. Returns 0
 * with *out (a copy; caller cJSON_Deletes it), or -EINVAL with "foreach
 * {{...}}: why" in err (absent, not an array, more than SPEC_FOREACH_MAX
 * elements). */
STEPQ_MUST_CHECK int spec_foreach_items(const struct spec_job *j, size_t i,
                                        const struct spec_vars *v, cJSON **out,
                                        char *err, size_t len);
/* spec_foreach_when_per_element tells whether step i's "when" reads its
 * element (then it is asked per element; else once, for the step). */
bool spec_foreach_when_per_element(const struct spec_job *j, size_t i);
/* What spec_foreach_element makes a job of. */
struct spec_element {
    int64_t job_id; /* the job whose step it is */
    int k;          /* its index in the array */
    int64_t now;    /* ms: its deadline is what is left of the job's */
    int64_t deadline_at;
};
/* spec_foreach_element makes element e->k of step i (v->item the
 * element) a job of its own: its text (caller frees *text) and its key
 * (*key, caller frees), every template of the step filled from v, its
 * "when" left out (asked before). Returns 0, or -ENOENT / -EINVAL with
 * why in err (a template that cannot be filled). */
STEPQ_MUST_CHECK int spec_foreach_element(const struct spec_job *j, size_t i,
                                          const struct spec_vars *v,
                                          const struct spec_element *e,
                                          char **text, char **key, char *err,
                                          size_t len);
/* spec_foreach_value is what element output text (NULL: skipped) is in
 * the step's output array: its JSON when it is JSON, else the text, and
 * null for a skipped element. Caller owns it. */
cJSON *spec_foreach_value(const char *text);

#endif

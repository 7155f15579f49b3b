/* cli.h: what the cmd_<name>.c files share (private to cli/).
 *
 * Each command is int cmd_NAME(struct cli_env *env, int argc, char **argv)
 * with argv[0] the command's own name and the global options (--db,
 * --config, -v) already removed.  It returns the process exit code of
 * docs/reference.md: 0 ok, 1 runtime error, 2 bad usage or input, 3 not found,
 * 4 conflict. Only cli/ prints messages for users.
 */
#ifndef STEPQ_CLI_CLI_H
#define STEPQ_CLI_CLI_H

#include <stdbool.h>

#include "common/config.h"
#include "common/defs.h"

enum {
    CLI_OK = 0,
    CLI_RUNTIME = 1,
    CLI_USAGE = 2,
    CLI_NOTFOUND = 3,
    CLI_CONFLICT = 4,
    /* `jobs wait` only: the job failed or was cancelled; it parked; the
     * timeout came first. */
    CLI_WAIT_FAILED = 5,
    CLI_WAIT_PARKED = 6,
    CLI_WAIT_TIMEOUT = 7,
    /* Not an exit code: the command printed its help on request. The
     * dispatcher turns it into exit 0; it is positive so that a negative
     * errno can never be mistaken for it. */
    CLI_HELP = 100
};

struct cli_env {
    const char *db_opt;     /* --db, borrowed from argv; NULL if absent */
    const char *config_opt; /* --config, borrowed; NULL if absent */
    struct config *cfg;     /* owned; loaded by cli_config() on first use */
};

/* One long option of a command. Exactly one of value/flag is set. */
struct cli_opt {
    const char *name;   /* without dashes: "json" */
    const char **value; /* takes an argument: stored here (borrowed argv) */
    bool *flag;         /* no argument: set to true when present */
};

/* cli_parse_args parses argv[1..argc) into opts and up to maxpos
 * positionals ("-" counts as one). --help/-h prints usage to stdout and
 * returns CLI_HELP; a bad option prints an error and usage to stderr and
 * returns CLI_USAGE; success returns 0 with *npos set. */
int cli_parse_args(int argc, char **argv, const struct cli_opt *opts,
                   const char **pos, int maxpos, int *npos, const char *usage);

/* cli_login_name is who runs the command: the login name of the user the
 * process runs as (getpwuid), else $USER, else "unknown": the default of
 * --by, and the who of the CLI's audit rows. Borrowed. */
const char *cli_login_name(void);

/* cli_audit_by fills who (cli_login_name), source ("cli") and now (the
 * store's clock) of the audit row of a write the CLI makes on db
 * (park/park.h). */
struct park_audit;
struct q_db;
void cli_audit_by(const struct q_db *db, struct park_audit *a);
/* cli_audited ends the transaction (q_tx_begin) of a write to schedule
 * whose result is rc: with rc 0 it appends the write's audit row (action,
 * job_id, {"schedule": schedule}, by cli_audit_by) and commits, else it
 * rolls back. Returns rc, or the audit's or commit's error. */
int cli_audited(struct q_db *db, int rc, const char *action, int64_t job_id,
                const char *schedule);
/* cli_print_audit prints audit rows (view_audit's array; NULL: none) one
 * a line, each after indent; with an indent, under an "audit:" line. */
struct cJSON;
void cli_print_audit(const struct cJSON *rows, const char *indent);

/* cli_config loads the config once (docs/reference.md: --config, $STEPQ_CONFIG,
 * ./stepq.json; a missing default file means built-in defaults). On error
 * prints it and returns CLI_USAGE (bad file) or CLI_RUNTIME; 0 on success
 * with *out borrowed from env. */
int cli_config(struct cli_env *env, const struct config **out);

/* cli_db_path resolves the database path (docs/reference.md: --db, $STEPQ_DB,
 * config "db", ./stepq.db). Loads the config if needed; returns 0 or an exit
 * code after printing. *out is borrowed. */
int cli_db_path(struct cli_env *env, const char **out);

/* cli_open_db opens the database cli_db_path names: the one opener of
 * every command but `init`. It creates and migrates nothing: a path with
 * no stepq database is "no stepq database at PATH (create it with `stepq
 * init`)", exit 1, and nothing is left behind. Prints the problem and
 * returns an exit code on failure; 0 with *db set (caller closes it with
 * q_close) on success. */
struct q_db;
int cli_open_db(struct cli_env *env, struct q_db **db);
/* cli_now is the store's time in ms since the epoch (this host's clock
 * plus q_clock_offset): what a command passes to q_* as now. */
int64_t cli_now(const struct q_db *db);

/* cli_open_failed prints why q_open(location) failed with rc (-ENOENT no
 * database, -ESTALE needs `stepq init`, -ENOTSUP newer, ...), naming the
 * location with its password masked, and returns the exit code: 2 for a
 * location no backend serves, 1 for the rest. */
int cli_open_failed(const char *location, int rc);

/* cli_same_store is true when the two locations name one store: written
 * the same, or two paths of one existing file (cmd_copy.c). */
bool cli_same_store(const char *a, const char *b);

/* The room a location takes in messages, password masked
 * (q_location_redact): a longest path and more. */
#define CLI_WHERE_MAX 4200

/* One top-level command: "status" is {"status", cmd_status}. */
struct cli_command {
    const char *name;
    int (*fn)(struct cli_env *env, int argc, char **argv);
};

/* cli_dispatch runs the command argv[1] from cmds (n of them) with argv
 * shifted by one and returns the process exit code: a command's CLI_HELP
 * is 0; a negative return (a raw -errno that escaped a command) is
 * reported and is 1, never success; an unknown command is 2. */
int cli_dispatch(struct cli_env *env, const struct cli_command *cmds, size_t n,
                 int argc, char **argv);

/* cli_exit_code maps a negative errno to the reference's exit code: EINVAL 2,
 * ENOENT 3, EALREADY/EBUSY/EEXIST 4, anything else 1. */
int cli_exit_code(int rc);

/* cli_error prints "stepq: message" on stderr. */
void cli_error(const char *fmt, ...) STEPQ_PRINTF(1, 2);

/* cli_print_json prints item compactly as one line on stdout, then frees it:
 * the caller's item is consumed (cJSON_Delete), whatever happens. */
struct cJSON;
void cli_print_json(struct cJSON *item);

/* cli_json_text is the string member name of o, or "-" when it is null
 * or missing: a table cell. Borrowed from o. */
const char *cli_json_text(const struct cJSON *o, const char *name);

/* A text table: each column as wide as its widest cell (table.c). heads
 * (ncols names) and align (ncols characters, 'l' or 'r') are borrowed
 * and must outlive it; the cells are copied. */
struct cli_table {
    int ncols;
    const char *const *heads;
    const char *align;
    char **cells; /* owned: nrows rows of ncols copies */
    size_t nrows, cap;
};
/* cli_table_init starts an empty table t of ncols columns. */
void cli_table_init(struct cli_table *t, int ncols, const char *const *heads,
                    const char *align);
/* cli_table_add appends a row of ncols cells (copied; NULL shows "-"). */
void cli_table_add(struct cli_table *t, const char *const *cells);
/* cli_table_print prints the heads and the rows on stdout. */
void cli_table_print(const struct cli_table *t);
/* cli_table_cleanup frees the cells; t may be initialised again. */
void cli_table_cleanup(struct cli_table *t);

/* A subcommand: "jobs list" is {"list", jobs_list}. */
struct cli_sub {
    const char *name;
    int (*fn)(struct cli_env *env, int argc, char **argv);
};

/* cli_usage_asked handles a command line with nothing after argv[0]
 * (usage to stderr, CLI_USAGE) or asking for help with --help, -h or help
 * (usage to stdout, CLI_HELP); otherwise it returns 0. */
int cli_usage_asked(int argc, char **argv, const char *usage);

/* cli_subcommand runs the subcommand argv[1] from the NULL-terminated
 * table subs with argv shifted by one; --help/-h/help prints usage
 * (CLI_HELP), a missing or unknown subcommand prints an error and usage
 * (exit 2). */
int cli_subcommand(struct cli_env *env, int argc, char **argv,
                   const struct cli_sub *subs, const char *usage);

/* cli_jobs_args parses the arguments of `jobs SUB ID [options]` into
 * opts and *id; 0, or the exit code (message printed: "jobs SUB: which
 * job?" without an ID). cmd_jobs.c. */
int cli_jobs_args(int argc, char **argv, const struct cli_opt *opts,
                  const char *sub, const char *usage, long long *id);
/* cli_jobs_wait runs `stepq jobs wait ID [--timeout S] [--json]`
 * (cmd_jobs_wait.c; usage: the jobs command's): exit 0 when the job
 * succeeded, CLI_WAIT_FAILED, CLI_WAIT_PARKED or CLI_WAIT_TIMEOUT. */
int cli_jobs_wait(struct cli_env *env, int argc, char **argv,
                  const char *usage);

/* cli_read_input reads the --input of command cmd: JSON text, or @FILE
 * to read it from a file (arg NULL: none, *out NULL). Returns 0 with *out
 * (caller cJSON_Deletes it), or CLI_USAGE after printing what is wrong. */
int cli_read_input(const char *cmd, const char *arg, struct cJSON **out);
/* cli_parse_id parses a positive job or park id; prints and returns
 * CLI_USAGE when s is not one. */
int cli_parse_id(const char *s, long long *out);

int cmd_init(struct cli_env *env, int argc, char **argv);
int cmd_enqueue(struct cli_env *env, int argc, char **argv);
int cmd_check(struct cli_env *env, int argc, char **argv);
int cmd_jobs(struct cli_env *env, int argc, char **argv);
int cmd_status(struct cli_env *env, int argc, char **argv);
int cmd_tiers(struct cli_env *env, int argc, char **argv);
int cmd_work(struct cli_env *env, int argc, char **argv);
int cmd_park(struct cli_env *env, int argc, char **argv);
int cmd_policy(struct cli_env *env, int argc, char **argv);
int cmd_mock(struct cli_env *env, int argc, char **argv);
int cmd_demo(struct cli_env *env, int argc, char **argv);
int cmd_copy(struct cli_env *env, int argc, char **argv);
int cmd_serve(struct cli_env *env, int argc, char **argv);
int cmd_schedules(struct cli_env *env, int argc, char **argv);
int cmd_report(struct cli_env *env, int argc, char **argv);
int cmd_backup(struct cli_env *env, int argc, char **argv);
int cmd_prune(struct cli_env *env, int argc, char **argv);
int cmd_operators(struct cli_env *env, int argc, char **argv);
int cmd_audit(struct cli_env *env, int argc, char **argv);

#endif

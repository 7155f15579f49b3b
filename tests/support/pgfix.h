/* pgfix.h: the throwaway PostgreSQL cluster a test run uses (started by
 * the CTest fixture pg_cluster_start with scripts/pg-cluster.sh, whose
 * folder is $STEPQ_TEST_PG_DIR), and a fresh schema in it per store.
 *
 * A test that needs a store calls pgfix_location; the location it gets is
 * the cluster's URL with `options=-csearch_path%3D<schema>`, so the
 * backend's tables land in a schema no other test sees. Schemas are not
 * dropped: the cluster is removed at the end of the run.
 */
#ifndef STEPQ_TESTS_SUPPORT_PGFIX_H
#define STEPQ_TESTS_SUPPORT_PGFIX_H

#include <stdbool.h>
#include <stddef.h>

/* pgfix_available is true when $STEPQ_TEST_PG_DIR is set and its url file
 * is readable (the cluster was started). */
bool pgfix_available(void);

/* pgfix_url returns the cluster's base URL (DIR/url without its newline),
 * read once and cached. Borrowed: valid for the process's life. NULL when
 * the cluster is not available. */
const char *pgfix_url(void);

/* pgfix_location creates a fresh schema (named t<pid>_<time>_<n>, unique
 * per process and call) with psql and writes the location of a store in
 * it into buf. Returns 0, -ENOENT when no cluster is available, -ENOSPC
 * when buf is too small, -EIO when psql failed (its stderr is the test's),
 * or another -errno from fork/exec. */
int pgfix_location(char *buf, size_t size);

/* pgfix_query runs sql on the store at location (a pgfix_location) with
 * psql (unaligned, tuples only: one row a line, columns split by '|') and
 * puts its output in *out (caller frees; untouched on failure). Returns 0,
 * -EIO when psql failed (its stderr is the test's), or -errno. */
int pgfix_query(const char *location, const char *sql, char **out);

/* pgfix_backend_is_pg is true when $STEPQ_TEST_BACKEND is "pg": the run
 * stores everything in the cluster instead of SQLite files. */
bool pgfix_backend_is_pg(void);

/* pgfix_db_new is where a test's store goes, by $STEPQ_TEST_BACKEND: with
 * "pg" a fresh schema's location (pgfix_location, asserting success: a pg
 * run without a cluster fails the test); otherwise dir/name (just name
 * when dir is NULL), with "sqlite:" in front when scheme is set. Caller
 * owns the result; free with free(). Pass it as --db to the binary. */
char *pgfix_db_new(const char *dir, const char *name, bool scheme);

#endif

/* tmpdir.c: temporary folders (made, joined, written to, removed) and
 * the per-test folder fixture built on them. */
/* nftw() is an XSI extension. */
#define _XOPEN_SOURCE 700

#include "tests/support/support.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/xalloc.h"

char *
tmpdir_new(void)
{
    const char *base = getenv("TMPDIR");
    char *tmpl;
    size_t n;

    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    n = strlen(base) + 32;
    tmpl = xmalloc(n);
    snprintf(tmpl, n, "%s/stepq-test-XXXXXX", base);
    ck_assert_msg(mkdtemp(tmpl) != NULL, "mkdtemp: %s", strerror(errno));
    return tmpl;
}

static int
rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void
tmpdir_remove(char *dir)
{
    if (dir == NULL)
        return;
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

char *
tmpdir_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

char *
tmpdir_write(const char *dir, const char *name, const char *data, size_t len)
{
    char *p = tmpdir_join(dir, name);
    FILE *f = fopen(p, "wb");

    ck_assert_msg(f != NULL, "open %s: %s", p, strerror(errno));
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
    return p;
}

char *fixture_dir;

void
fixture_setup(void)
{
    fixture_dir = tmpdir_new();
    run_db = NULL;
    ck_assert_int_eq(chdir(fixture_dir), 0);
    unsetenv("STEPQ_DB");
    unsetenv("STEPQ_CONFIG");
}

/* Only `stepq init` creates a database; every other command needs one. */
void
fixture_init(const char *db)
{
    const char *argv[] = {"init", db ? "--db" : NULL, db, NULL};
    struct run_result r;

    ck_assert_msg(run_args(&r, argv) == 0, "init: %s", r.err);
    run_result_free(&r);
}

void
fixture_setup_db(void)
{
    fixture_setup();
    fixture_init(FIXTURE_DB);
}

void
fixture_teardown(void)
{
    tmpdir_remove(fixture_dir);
    fixture_dir = NULL;
}

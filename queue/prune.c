/* prune.c: backup and retention, neutral to the backend. q_backup writes
 * a consistent copy of the store to a new SQLite file (the backend's own
 * snapshot where it has one, else q_copy), through a temporary file that
 * is flushed and renamed, so that DEST is either absent, the old file
 * (--force), or a whole backup. q_prune runs the backend's counts and
 * writes (the SQL is written once, Q__PRUNE_* in queue/sql.h) in one
 * transaction, or none for a dry run. */
#include "queue/admin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "queue/internal.h"

/* path + suffix, owned by the caller. */
static char *
with_suffix(const char *path, const char *suffix)
{
    size_t n = strlen(path), k = strlen(suffix);
    char *p = xmalloc(n + k + 1);

    memcpy(p, path, n);
    memcpy(p + n, suffix, k + 1);
    return p;
}

/* Removes path + suffix if it is there; false (logged) when it is there
 * and cannot be removed. */
static bool
remove_side(const char *path, const char *suffix)
{
    char *p = with_suffix(path, suffix);
    bool ok = unlink(p) == 0 || errno == ENOENT;

    if (!ok)
        log_error("%s: cannot remove it: %s", p, strerror(errno));
    free(p);
    return ok;
}

/* Flushes path (a file, or with dir its folder) to disk; -EIO logged. */
static int
sync_path(const char *path, bool dir)
{
    char *d = NULL;
    const char *slash = strrchr(path, '/');
    int fd, rc = 0;

    if (dir)
        d = slash == NULL   ? xstrdup(".")
            : slash == path ? xstrdup("/")
                            : xstrndup(path, (size_t)(slash - path));
    fd = open(dir ? d : path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        log_error("%s: cannot flush it to disk: %s", dir ? d : path,
                  strerror(errno));
        rc = -EIO;
    }
    if (fd >= 0)
        close(fd);
    free(d);
    return rc;
}

/* The copy of a store that has no snapshot of its own: a SQLite store
 * made in tmp (an empty file), filled by q_copy in one transaction. */
static int
copy_into(q_db *db, const char *tmp)
{
    char *loc = xmalloc(strlen(tmp) + 8);
    q_db *to = NULL;
    int rc;

    snprintf(loc, strlen(tmp) + 8, "sqlite:%s", tmp);
    if ((rc = q_open(loc, NULL, &to)) == 0)
        rc = q_copy(db, to, false, NULL);
    if (q_close(to) != 0 && rc == 0)
        rc = -EIO;
    free(loc);
    return rc == -EEXIST ? -EIO : rc;
}

/* Writes the backup into tmp, made empty and 0600 here. */
static int
write_tmp(q_db *db, const char *tmp)
{
    int fd, rc;

    if (!remove_side(tmp, "") || !remove_side(tmp, "-wal") ||
        !remove_side(tmp, "-shm"))
        return -EIO;
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        log_error("%s: cannot create it: %s", tmp, strerror(errno));
        return -EIO;
    }
    close(fd);
    rc =
        db->ops->backup != NULL ? db->ops->backup(db, tmp) : copy_into(db, tmp);
    if (rc == 0)
        rc = sync_path(tmp, false);
    return rc;
}

int
q_backup(q_db *db, const char *dest, bool force, struct q_backup_info *info)
{
    struct stat st;
    char *tmp;
    int rc;

    if (dest == NULL || dest[0] == '\0')
        return -EINVAL;
    if (lstat(dest, &st) == 0 && !force)
        return -EEXIST;
    tmp = with_suffix(dest, ".tmp");
    rc = write_tmp(db, tmp);
    /* A -wal beside an old DEST would be read into the new file as if it
     * were its own: it goes before the rename. */
    if (rc == 0 && (!remove_side(dest, "-wal") || !remove_side(dest, "-shm")))
        rc = -EIO;
    if (rc == 0 && rename(tmp, dest) != 0) {
        log_error("%s: cannot rename it to %s: %s", tmp, dest, strerror(errno));
        rc = -EIO;
    }
    if (rc == 0)
        rc = sync_path(dest, true);
    if (rc != 0) {
        remove_side(tmp, "");
        remove_side(tmp, "-wal");
        remove_side(tmp, "-shm");
    } else if (info != NULL) {
        info->bytes = stat(dest, &st) == 0 ? (int64_t)st.st_size : 0;
        info->copied = db->ops->backup == NULL;
    }
    free(tmp);
    return rc;
}

int
q_prune(q_db *db, const struct q_prune *p, struct q_prune_counts *out)
{
    struct q_prune_counts c = {0};
    int64_t limit;
    int rc;

    if (p == NULL || p->jobs_before < 0 || p->bodies_before < 0 ||
        p->budgets_before < 0 || p->limit < 0 || p->bodies_from_job < 0)
        return -EINVAL;
    limit = p->limit > 0 && !p->dry_run ? p->limit : INT64_MAX;
    if (p->dry_run) {
        rc = db->ops->prune(db, p, limit, false, &c);
    } else {
        if ((rc = q_tx_begin(db)) != 0)
            return rc;
        if ((rc = db->ops->prune(db, p, limit, true, &c)) == 0)
            rc = q_tx_commit(db);
        else
            q_tx_rollback(db);
    }
    if (rc == 0 && out != NULL)
        *out = c;
    return rc;
}

/* now - age, or 0 (nothing) for no age or a time before the epoch. */
static int64_t
before(int64_t age, int64_t now)
{
    return age > 0 && now > age ? now - age : 0;
}

void
q_prune_plan(int64_t jobs_ms, int64_t bodies_ms, int64_t now, struct q_prune *p)
{
    memset(p, 0, sizeof(*p));
    p->jobs_before = before(jobs_ms, now);
    p->bodies_before = before(bodies_ms, now);
    /* A window still open keeps counting what was spent in it. */
    if (p->jobs_before > 0)
        p->budgets_before = before(
            jobs_ms > Q_BUDGET_WINDOW_MAX_MS ? jobs_ms : Q_BUDGET_WINDOW_MAX_MS,
            now);
}

/* files.c: the database file before SQLite opens it: created mode 0600,
 * or checked to be a file this process may write, in a folder that takes
 * SQLite's -wal and -shm files; each refusal logged with its reason. */
#include "queue/sqlite/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/xalloc.h"

/* side_file_ok: path + suffix exists and may be written. */
static bool
side_file_ok(const char *path, const char *suffix)
{
    size_t n = strlen(path), k = strlen(suffix);
    char *p = xmalloc(n + k + 1);
    bool ok;

    memcpy(p, path, n);
    memcpy(p + n, suffix, k + 1);
    ok = access(p, R_OK | W_OK) == 0;
    free(p);
    return ok;
}

/* folder_writable checks that the folder of path takes new files (or
 * already holds a writable path-wal and path-shm): SQLite
 * makes path-wal and path-shm there, for reads too (WAL mode). Logs and
 * returns -EIO when it does not. */
static int
folder_writable(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash == NULL   ? xstrdup(".")
                : slash == path ? xstrdup("/")
                                : xstrndup(path, (size_t)(slash - path));
    int e = access(dir, W_OK | X_OK) == 0 ? 0 : errno, rc = 0;

    if (e != 0 && !(side_file_ok(path, "-wal") && side_file_ok(path, "-shm"))) {
        log_error("%s: its folder %s is not writable (%s): SQLite keeps its "
                  "-wal and -shm files next to the database, even to read",
                  path, dir, strerror(e));
        rc = -EIO;
    }
    free(dir);
    return rc;
}

/* cannot_write says why path, which exists, cannot be opened for writing:
 * every command needs that, even one that only reads (WAL mode). */
static void
cannot_write(const char *path, int e)
{
    if (e == EACCES || e == EPERM || e == EROFS)
        log_error("%s: cannot open it for writing (%s): every stepq command "
                  "needs to write the database file and its folder, even to "
                  "read (SQLite's WAL mode)",
                  path, strerror(e));
    else
        log_error("%s: cannot open: %s", path, strerror(e));
}

/* Create the file with mode 0600 before SQLite opens it: SQLite would use
 * 0644 (umask permitting) and the queue holds prompts and outputs. The
 * -wal and -shm files SQLite makes take the main file's permissions. */
int
q__file_create(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

    if (fd < 0) {
        int e = errno;
        if (access(path, F_OK) == 0)
            cannot_write(path, e);
        else
            log_error("%s: cannot create: %s", path, strerror(e));
        return -EIO;
    }
    close(fd);
    return folder_writable(path);
}

/* q__file_open_existing checks, without creating anything, that path is a
 * file this process may read and write in a folder it may write (what
 * q__file_create checks for `stepq init`): -ENOENT when there is none,
 * -EIO naming the problem (a read-only file or folder, a folder given as
 * the file) otherwise. */
int
q__file_open_existing(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);

    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return -ENOENT;
        cannot_write(path, errno);
        return -EIO;
    }
    close(fd);
    return folder_writable(path);
}

void
q__file_note(struct q__sqlite *db)
{
    struct stat st;

    if (db->path != NULL && strcmp(db->path, ":memory:") != 0 &&
        stat(db->path, &st) == 0) {
        db->file_dev = (unsigned long long)st.st_dev;
        db->file_ino = (unsigned long long)st.st_ino;
    }
}

/* A file removed or replaced under a process that has it open is not the
 * store any more: writes would go to a file nobody else sees, or, with
 * the old -wal left beside a restored copy, corrupt that copy. */
bool
q__file_moved(struct q__sqlite *db)
{
    struct stat st;

    if (db->moved)
        return true;
    if (db->file_ino == 0)
        return false;
    if (stat(db->path, &st) == 0 &&
        (unsigned long long)st.st_dev == db->file_dev &&
        (unsigned long long)st.st_ino == db->file_ino)
        return false;
    if (!db->moved)
        log_error("%s: the file was removed or replaced since this process "
                  "opened it: nothing more is written to it (stop every stepq "
                  "process before moving, restoring or removing a database; "
                  "stepq copy makes a copy of a queue in use)",
                  db->path);
    db->moved = true;
    return true;
}

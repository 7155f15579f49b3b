/* enqueue.c: enqueue a job file from C through libstepq.
 *
 *   cc enqueue.c $(pkg-config --cflags --libs stepq) -o enqueue
 *   stepq --db stepq.db init      # once: only init creates the database
 *   ./enqueue stepq.db examples/nightly-changelog.json
 *
 * Or with libstepq.a linked in (then SQLite, cJSON and libpq are needed
 * at run time):
 *   cc enqueue.c $(pkg-config --cflags stepq) -o enqueue \
 *       "$(pkg-config --variable=libdir stepq)/libstepq.a" \
 *       $(pkg-config --libs sqlite3 libcjson libpq) -lm
 */
#include <stdio.h>
#include <stdlib.h>

#include "stepq.h"

static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (f == NULL)
        return NULL;
    do {
        if (len + 4096 + 1 > cap) {
            cap = (len + 4096 + 1) * 2;
            char *nb = realloc(buf, cap);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        n = fread(buf + len, 1, 4096, f);
        len += n;
    } while (n > 0);
    fclose(f);
    buf[len] = '\0';
    return buf;
}

int
main(int argc, char **argv)
{
    char err[512];
    stepq *q = NULL;
    int64_t id = 0;
    bool dup = false;
    char *job;
    int rc;

    if (argc != 3) {
        fprintf(stderr, "usage: %s DATABASE JOB.json\n", argv[0]);
        return 2;
    }
    if ((job = slurp(argv[2])) == NULL) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 2;
    }
    if (stepq_open(argv[1], &q, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        free(job);
        return 1;
    }
    rc = stepq_enqueue(q, job, NULL, &id, &dup, err, sizeof(err));
    free(job);
    stepq_close(q);
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", argv[2], err);
        return 2;
    }
    printf("%lld%s\n", (long long)id, dup ? " (duplicate)" : "");
    return 0;
}

/* sqlcount.c: an LD_PRELOAD library that counts SQLite statements, run on
 * demand (never by the tests): docs/benchmarks.md "Statements per step".
 *
 *   LD_PRELOAD=build/release/bench/libsqlcount.so \
 *   SQLCOUNT_OUT=/tmp/sql.txt stepq work --drain
 *
 * Wraps sqlite3_step and sqlite3_reset: for each statement text it counts
 * the executions (a step after a reset) and the time spent inside
 * sqlite3_step, and writes the table to SQLCOUNT_OUT (default stderr) at
 * exit, costliest first. Single-threaded use only, as in `stepq work`.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS 512

struct slot {
    const char *sql; /* interned copy */
    uint64_t runs;
    uint64_t steps;
    uint64_t ns;
};

static struct slot slots[SLOTS];
static sqlite3_stmt *running[SLOTS]; /* statements inside a run (stepped, not
                                        yet done or reset) */
static int (*real_step)(sqlite3_stmt *);
static int (*real_reset)(sqlite3_stmt *);

static uint64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct slot *
slot_of(const char *sql)
{
    size_t h = 5381;
    for (const char *p = sql; *p; p++)
        h = h * 33 + (unsigned char)*p;
    for (size_t i = 0; i < SLOTS; i++) {
        struct slot *s = &slots[(h + i) % SLOTS];
        if (s->sql == NULL) {
            s->sql = strdup(sql);
            return s;
        }
        if (strcmp(s->sql, sql) == 0)
            return s;
    }
    return NULL;
}

static int
run_starts(sqlite3_stmt *st)
{
    /* A statement not in the table has not been stepped since its reset
     * (or ever): its next step starts a run. */
    size_t h = ((uintptr_t)st >> 4) % SLOTS;
    for (size_t i = 0; i < SLOTS; i++) {
        sqlite3_stmt **p = &running[(h + i) % SLOTS];
        if (*p == st)
            return 0;
        if (*p == NULL) {
            *p = st;
            return 1;
        }
    }
    return 1;
}

static void
forget(sqlite3_stmt *st)
{
    size_t h = ((uintptr_t)st >> 4) % SLOTS;
    for (size_t i = 0; i < SLOTS; i++) {
        size_t k = (h + i) % SLOTS;
        if (running[k] == NULL)
            return;
        if (running[k] == st) {
            /* Re-insert the rest of the probe chain after removing. */
            running[k] = NULL;
            for (size_t j = 1; j < SLOTS; j++) {
                size_t m = (k + j) % SLOTS;
                sqlite3_stmt *o = running[m];
                if (o == NULL)
                    return;
                running[m] = NULL;
                (void)run_starts(o);
            }
            return;
        }
    }
}

static int
by_ns(const void *a, const void *b)
{
    const struct slot *x = a, *y = b;
    return (x->ns < y->ns) - (x->ns > y->ns);
}

static void
dump(void)
{
    const char *path = getenv("SQLCOUNT_OUT");
    FILE *f = path ? fopen(path, "w") : stderr;
    uint64_t runs = 0, ns = 0;

    if (f == NULL)
        return;
    qsort(slots, SLOTS, sizeof(slots[0]), by_ns);
    for (size_t i = 0; i < SLOTS && slots[i].sql; i++) {
        runs += slots[i].runs;
        ns += slots[i].ns;
    }
    fprintf(f, "%10s %10s %10s  statement (total: %llu runs, %.1f ms)\n",
            "runs", "steps", "ms", (unsigned long long)runs, ns / 1e6);
    for (size_t i = 0; i < SLOTS && slots[i].sql; i++) {
        char one[161];
        snprintf(one, sizeof(one), "%s", slots[i].sql);
        for (char *p = one; *p; p++) {
            if (*p == '\n' || *p == '\t')
                *p = ' ';
        }
        fprintf(f, "%10llu %10llu %10.1f  %s\n",
                (unsigned long long)slots[i].runs,
                (unsigned long long)slots[i].steps, slots[i].ns / 1e6, one);
    }
    if (f != stderr)
        fclose(f);
}

/* The library's own functions, by the dlsym idiom POSIX gives for
 * function pointers. */
static void
resolve(void)
{
    if (real_step != NULL)
        return;
    *(void **)&real_step = dlsym(RTLD_NEXT, "sqlite3_step");
    *(void **)&real_reset = dlsym(RTLD_NEXT, "sqlite3_reset");
}

int
sqlite3_step(sqlite3_stmt *st)
{
    static int armed;
    struct slot *s;
    uint64_t t0;
    int rc;

    resolve();
    if (!armed) {
        armed = 1;
        atexit(dump);
    }
    s = slot_of(sqlite3_sql(st) ? sqlite3_sql(st) : "?");
    if (s != NULL && run_starts(st))
        s->runs++;
    t0 = now_ns();
    rc = real_step(st);
    if (s != NULL) {
        s->steps++;
        s->ns += now_ns() - t0;
    }
    if (rc != SQLITE_ROW)
        forget(st);
    return rc;
}

int
sqlite3_reset(sqlite3_stmt *st)
{
    resolve();
    forget(st);
    return real_reset(st);
}

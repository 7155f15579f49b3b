/* test_queue_location.c: locations (queue/queue.h): which backend a
 * location picks when it is opened, and q_location_redact, what messages
 * print instead of a location that may hold a password, and which "db"
 * of a config is a path resolved against its folder. Table-driven: one
 * row per case. */
#include "tests/support/support.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "queue/queue.h"

/* ---- masking passwords --------------------------------------------- */

static const struct {
    const char *in;
    size_t size; /* passed to q_location_redact; 0 here: the whole buffer */
    const char *want;
} redact_rows[] = {
    {"postgresql://user:secret@host/db", 0, "postgresql://user:***@host/db"},
    {"postgres://u:secret@h:5432/d?sslmode=require", 0,
     "postgres://u:***@h:5432/d?sslmode=require"},
    {"postgresql://user@host/db", 0, "postgresql://user@host/db"},
    {"postgresql://h/d?password=secret&sslmode=disable", 0,
     "postgresql://h/d?password=***&sslmode=disable"},
    {"postgres://h/d?sslmode=disable&password=secret", 0,
     "postgres://h/d?sslmode=disable&password=***"},
    /* libpq decodes %XX in keys too */
    {"postgresql://h/d?%70assword=secret&a=b", 0,
     "postgresql://h/d?%70assword=***&a=b"},
    {"postgresql://h/d?pass%77ORD=x&pass%77ord=y", 0,
     "postgresql://h/d?pass%77ORD=***&pass%77ord=***"},
    /* keys libpq refuses, which its error would show with the location */
    {"postgresql://h/d?PASSWORD=Wr0ngK&a=b", 0,
     "postgresql://h/d?PASSWORD=***&a=b"},
    {"host=127.0.0.1 passwd=Wr0ngM", 0, "host=127.0.0.1 passwd=***"},
    {"host=h Client_Secret=x user=u", 0, "host=h Client_Secret=*** user=u"},
    {"postgresql://u:sec@ret@h/d", 0, "postgresql://u:***@h/d"},
    {"postgresql://u:pa/ss@h/db", 0, "postgresql://u:***@h/db"},
    {"host=h password=s3cret application_name=http://x", 0,
     "host=h password=*** application_name=http://x"},
    {"postgresql://", 0, "postgresql://"},
    {"host=/tmp password=secret dbname=x", 0,
     "host=/tmp password=*** dbname=x"},
    {"password = 'a secret\\' c' host=h", 0, "password=*** host=h"},
    {"dbname=x password=", 0, "dbname=x password=***"},
    {"user=me passwords=1", 0, "user=me passwords=***"},
    {"/srv/password=x.db", 0, "/srv/password=x.db"},
    {"sqlite:/tmp/q.db", 0, "sqlite:/tmp/q.db"},
    {"", 0, ""},
    {"postgresql://user:secret@host/db", 20, "postgresql://user:*"},
    {"password=secret", 5, "pass"},
    {"password=secret", 1, ""},
};

START_TEST(test_redact_masks_passwords_only)
{
    char buf[96];
    size_t size = redact_rows[_i].size ? redact_rows[_i].size : 64;

    memset(buf, 'X', sizeof(buf));
    ck_assert_ptr_eq(q_location_redact(redact_rows[_i].in, buf, size), buf);
    ck_assert_str_eq(buf, redact_rows[_i].want);
    ck_assert_ptr_null(strstr(buf, "secret"));
    ck_assert_int_eq(buf[size], 'X'); /* nothing written past size */
}
END_TEST

START_TEST(test_redact_size_zero_writes_nothing)
{
    char buf[4] = "XXX";

    ck_assert_ptr_eq(q_location_redact("password=secret", buf, 0), buf);
    ck_assert_str_eq(buf, "XXX");
}
END_TEST

/* ---- which backend a location picks -------------------------------- */

enum pick { SQLITE, PG, UNSUPPORTED, INVALID };

static const struct {
    const char *location;
    enum pick pick;
} pick_rows[] = {
    {"q.db", SQLITE},
    {"sqlite:q.db", SQLITE},
    {"postgresql://127.0.0.1:1/x", PG},
    {"postgres://127.0.0.1:1/x", PG},
    {"postgresql://", PG},
    {"host=127.0.0.1 port=1 dbname=x", PG},
    {"dbname = x", PG},
    {"redis://127.0.0.1:1/0", UNSUPPORTED},
    {"sqlite:", INVALID},
    {"", INVALID},
};

static char *dir;

/* Each row runs in its own empty folder, so "no file was made" is "the
 * folder is still empty"; libpq's defaults point at nothing there. */
static void
setup(void)
{
    dir = tmpdir_new();
    ck_assert_int_eq(chdir(dir), 0);
    setenv("PGHOST", dir, 1);
    setenv("PGPORT", "1", 1);
    setenv("PGCONNECT_TIMEOUT", "2", 1);
}

static void
teardown(void)
{
    tmpdir_remove(dir);
}

static int
entries(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

START_TEST(test_location_picks_backend)
{
    const char *loc = pick_rows[_i].location;
    static const int existing[] = {[SQLITE] = -ENOENT,
                                   [UNSUPPORTED] = -EPROTONOSUPPORT,
                                   [INVALID] = -EINVAL};
    enum pick want = pick_rows[_i].pick;
    q_db *db = NULL;
    int rc = q_open_existing(loc, NULL, &db);

    if (want == PG)
        ck_assert(rc != 0 && rc != -EINVAL && rc != -ENOENT);
    else
        ck_assert_int_eq(rc, existing[want]);
    rc = q_open(loc, NULL, &db);
    ck_assert_int_eq(rc == 0, want == SQLITE);
    ck_assert_int_eq(entries(dir) > 0, want == SQLITE);
    ck_assert_int_eq(q_close(want == SQLITE ? db : NULL), 0);
}
END_TEST

/* ---- a config's "db" --------------------------------------------- */

static const struct {
    const char *db;
    const char *want; /* after resolving against the folder /cfg */
} config_rows[] = {
    {"q.db", "/cfg/q.db"},
    {"sqlite:q.db", "sqlite:/cfg/q.db"},
    {"/abs/q.db", "/abs/q.db"},
    {"postgresql://u:pw@h/d", "postgresql://u:pw@h/d"},
    {"host=/tmp dbname=x", "host=/tmp dbname=x"},
    {"dbname = x", "dbname = x"},
};

START_TEST(test_config_resolves_only_paths)
{
    char text[128], err[128];
    struct config *c = NULL;

    snprintf(text, sizeof(text), "{\"db\": \"%s\"}", config_rows[_i].db);
    ck_assert_int_eq(
        config_parse(text, strlen(text), "/cfg", &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c->db, config_rows[_i].want);
    config_free(c);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("queue: location");
    TCase *redact = tcase_create("redact");
    TCase *pick = tcase_create("pick");
    TCase *config = tcase_create("config");

    tcase_add_loop_test(redact, test_redact_masks_passwords_only, 0,
                        (int)STEPQ_ARRAY_LEN(redact_rows));
    tcase_add_test(redact, test_redact_size_zero_writes_nothing);
    suite_add_tcase(s, redact);

    tcase_add_checked_fixture(pick, setup, teardown);
    tcase_add_loop_test(pick, test_location_picks_backend, 0,
                        (int)STEPQ_ARRAY_LEN(pick_rows));
    suite_add_tcase(s, pick);

    tcase_add_loop_test(config, test_config_resolves_only_paths, 0,
                        (int)STEPQ_ARRAY_LEN(config_rows));
    suite_add_tcase(s, config);
    return s;
}

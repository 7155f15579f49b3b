/* test_reference.c: docs/reference.md, the contract users of an installed
 * stepq read, kept true to the binary. The commands `stepq --help` lists
 * and the commands of the reference's command block are the same set;
 * each command's flags in its --help and in that block are the same set;
 * and the installed man page points to the installed reference. Doctored
 * copies of the help text and the reference show that the comparison
 * catches a command or flag missing on either side. */
#include "tests/support/support.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/file.h"
#include "common/xalloc.h"

/* The line the reference puts just above its command block. */
#define BLOCK_MARKER "tests/test_reference.c"
#define MAX_DOC      (4 * 1024 * 1024)
#define LOWER        "abcdefghijklmnopqrstuvwxyz"

/* ---- a small set of words ------------------------------------------- */

struct words {
    char **v; /* owned, each owned */
    size_t n;
};

static bool
words_has(const struct words *w, const char *s)
{
    for (size_t i = 0; i < w->n; i++) {
        if (strcmp(w->v[i], s) == 0)
            return true;
    }
    return false;
}

static void
words_add(struct words *w, const char *s, size_t len)
{
    char *c = xstrndup(s, len);

    if (words_has(w, c)) {
        free(c);
        return;
    }
    w->v = xrealloc(w->v, (w->n + 1) * sizeof(*w->v));
    w->v[w->n++] = c;
}

static void
words_free(struct words *w)
{
    for (size_t i = 0; i < w->n; i++)
        free(w->v[i]);
    free(w->v);
    *w = (struct words){0};
}

/* missing returns the words of a that b lacks, comma-separated ("" when
 * none). Caller frees. */
static char *
missing(const struct words *a, const struct words *b)
{
    char *out = xcalloc(1, 1);
    size_t len = 0;

    for (size_t i = 0; i < a->n; i++) {
        size_t n = strlen(a->v[i]);
        if (words_has(b, a->v[i]))
            continue;
        out = xrealloc(out, len + n + 3);
        len += (size_t)sprintf(out + len, "%s%s", len ? ", " : "", a->v[i]);
    }
    return out;
}

/* ---- parsing the help text and the reference ------------------------ */

static size_t
word_len(const char *p, const char *chars)
{
    return strspn(p, chars);
}

/* help_commands reads the "commands:" list of `stepq --help`: "  jobs
 * list|show|cancel   text" gives "jobs list", "jobs show", "jobs cancel";
 * "  enqueue [FILE|-]   text" gives "enqueue". */
static void
help_commands(const char *help, struct words *out)
{
    const char *p = strstr(help, "\ncommands:\n");

    ck_assert_msg(p != NULL, "no \"commands:\" in stepq --help");
    for (p = strchr(p + 1, '\n') + 1; strncmp(p, "  ", 2) == 0;
         p += strcspn(p, "\n") + (p[strcspn(p, "\n")] != '\0')) {
        const char *w = p + 2, *sub = w + word_len(w, LOWER) + 1;
        size_t n = word_len(w, LOWER), sn = 0;
        if (w[n] == ' ' && sub[0] >= 'a' && sub[0] <= 'z')
            sn = word_len(sub, LOWER "|");
        if (sn == 0 || (sub[sn] != ' ' && sub[sn] != '\n')) {
            words_add(out, w, n);
            continue;
        }
        for (const char *s = sub; s < sub + sn; s += strcspn(s, "|") + 1) {
            char buf[256];
            int k = (int)strcspn(s, "| \n");
            snprintf(buf, sizeof(buf), "%.*s %.*s", (int)n, w, k, s);
            words_add(out, buf, strlen(buf));
        }
    }
}

/* ref_block returns the reference's command block (the fenced block after
 * the marker line), *len bytes from the result. Fails the test without
 * one. */
static const char *
ref_block(const char *ref, size_t *len)
{
    const char *m = strstr(ref, BLOCK_MARKER), *start, *end;

    ck_assert_msg(m != NULL, "no %s marker in the reference", BLOCK_MARKER);
    start = strstr(m, "\n```");
    ck_assert_msg(start != NULL, "no command block after the marker");
    start = strchr(start + 1, '\n') + 1;
    end = strstr(start, "\n```");
    ck_assert_msg(end != NULL, "the command block is not closed");
    *len = (size_t)(end - start) + 1;
    return start;
}

/* ref_commands reads "stepq jobs show ID ..." as "jobs show" and
 * "stepq enqueue [FILE|-] ..." as "enqueue". */
static void
ref_commands(const char *ref, struct words *out)
{
    size_t len;
    const char *b = ref_block(ref, &len), *end = b + len;

    for (const char *p = b; p < end; p = strchr(p, '\n') + 1) {
        const char *w = p + 6, *sub;
        size_t n, sn;
        if (strncmp(p, "stepq ", 6) != 0)
            continue;
        n = word_len(w, LOWER);
        sub = w + n + 1;
        sn = w[n] == ' ' ? word_len(sub, LOWER) : 0;
        if (sn > 0 && (sub[sn] == ' ' || sub[sn] == '\n'))
            words_add(out, p + 6, (size_t)(sub + sn - w));
        else
            words_add(out, w, n);
    }
}

static bool
is_word(const char *p, size_t n, const char *word)
{
    return strlen(word) == n && strncmp(p, word, n) == 0;
}

/* text_flags adds every "--name" in text[0..len), except the global ones
 * (--db, --config) and --help. */
static void
text_flags(const char *text, size_t len, struct words *out)
{
    for (const char *p = text; p + 2 < text + len; p++) {
        size_t n;
        if (p[0] != '-' || p[1] != '-' || (p > text && p[-1] == '-') ||
            p[2] < 'a' || p[2] > 'z')
            continue;
        n = 2 + word_len(p + 2, LOWER "0123456789-");
        while (p[n - 1] == '-')
            n--;
        if (!is_word(p, n, "--db") && !is_word(p, n, "--config") &&
            !is_word(p, n, "--help"))
            words_add(out, p, n);
        p += n - 1;
    }
}

/* ref_flags adds the flags of the block's lines for command cmd ("park"):
 * lines "stepq park ..." and the indented lines that continue them. */
static void
ref_flags(const char *ref, const char *cmd, struct words *out)
{
    size_t len, cl = strlen(cmd);
    const char *b = ref_block(ref, &len), *end = b + len;
    bool in = false;

    for (const char *p = b; p < end; p = strchr(p, '\n') + 1) {
        size_t ll = (size_t)(strchr(p, '\n') - p);
        if (strncmp(p, "stepq ", 6) == 0)
            in = strncmp(p + 6, cmd, cl) == 0 &&
                 (p[6 + cl] == ' ' || p[6 + cl] == '\n');
        else if (p[0] != ' ')
            in = false;
        if (in)
            text_flags(p, ll, out);
    }
}

/* ---- helpers ---------------------------------------------------------- */

static char *
read_file(const char *path)
{
    char *text = NULL;
    size_t len = 0;

    ck_assert_msg(file_read_all(path, MAX_DOC, &text, &len) == 0,
                  "cannot read %s", path);
    return text;
}

static char *
read_reference(void)
{
    char *path = source_path("docs/reference.md"), *text = read_file(path);

    free(path);
    return text;
}

/* help_of returns what `stepq [cmd] --help` prints (cmd NULL: the top
 * level), which must exit 0. Caller frees. */
static char *
help_of(const char *cmd)
{
    const char *argv[3] = {cmd ? cmd : "--help", cmd ? "--help" : NULL, NULL};
    struct run_result r;
    char *out;

    ck_assert_msg(run_args(&r, argv) == 0, "stepq %s --help exited %d: %s",
                  cmd ? cmd : "", r.status, r.err);
    out = r.out;
    r.out = NULL;
    run_result_free(&r);
    return out;
}

/* cut removes the first occurrence of what from s (which must hold it),
 * up to and including the end of its line when whole_line is set. */
static void
cut(char *s, const char *what, bool whole_line)
{
    char *at = strstr(s, what);
    size_t n = strlen(what);

    ck_assert_msg(at != NULL, "\"%s\" not found", what);
    if (whole_line)
        n = strcspn(at, "\n") + 1;
    memmove(at, at + n, strlen(at + n) + 1);
}

/* flag_diff compares the flags of cmd in help and in ref: "" when they
 * agree, else what each side lacks. Caller frees. */
static char *
flag_diff(const char *help, const char *ref, const char *cmd)
{
    struct words h = {0}, r = {0};
    char *a, *b, *out = xmalloc(1024);

    text_flags(help, strlen(help), &h);
    ref_flags(ref, cmd, &r);
    a = missing(&h, &r);
    b = missing(&r, &h);
    if (a[0] || b[0])
        snprintf(out, 1024,
                 "%s: not in the reference: [%s]; not in --help: "
                 "[%s]",
                 cmd, a, b);
    else
        out[0] = '\0';
    free(a);
    free(b);
    words_free(&h);
    words_free(&r);
    return out;
}

/* ---- the reference against the binary --------------------------------- */

/* The command sets of `stepq --help` and of the reference, compared one
 * way: the commands of one side (of help when from_help) that the other
 * lacks must be want. Before the comparison, cut_ref (cut_help) is cut
 * from the reference (the help text) to show that the check can fail. */
struct command_case {
    bool from_help;
    size_t min_commands; /* at least this many on the side compared */
    const char *cut_ref, *cut_help;
    const char *want;
};

static const struct command_case command_cases[] = {
    /* every help command is in the reference */
    {true, 14, NULL, NULL, ""},
    /* every reference command is in help */
    {false, 14, NULL, NULL, ""},
    /* the check catches a command missing from the reference */
    {true, 0, "stepq jobs cancel ID", NULL, "jobs cancel"},
    /* the check catches a command missing from help */
    {false, 0, NULL, "  demo ", "demo"},
};

START_TEST(test_command_sets_compared)
{
    const struct command_case *c = &command_cases[_i];
    char *help = help_of(NULL), *ref = read_reference(), *m;
    struct words h = {0}, r = {0};

    if (c->cut_ref != NULL)
        cut(ref, c->cut_ref, true);
    if (c->cut_help != NULL)
        cut(help, c->cut_help, true);
    help_commands(help, &h);
    ref_commands(ref, &r);
    ck_assert_uint_ge(c->from_help ? h.n : r.n, c->min_commands);
    m = c->from_help ? missing(&h, &r) : missing(&r, &h);
    ck_assert_msg(strcmp(m, c->want) == 0, "in %s, not in the %s: [%s]",
                  c->from_help ? "stepq --help" : "the reference",
                  c->from_help ? "reference" : "stepq --help", m);
    free(m);
    words_free(&h);
    words_free(&r);
    free(help);
    free(ref);
}
END_TEST

START_TEST(test_each_command_has_the_same_flags_in_help_and_reference)
{
    char *top = help_of(NULL), *ref = read_reference();
    struct words h = {0}, cmds = {0};

    help_commands(top, &h);
    for (size_t i = 0; i < h.n; i++)
        words_add(&cmds, h.v[i], strcspn(h.v[i], " "));
    for (size_t i = 0; i < cmds.n; i++) {
        char *help = help_of(cmds.v[i]), *d = flag_diff(help, ref, cmds.v[i]);
        ck_assert_msg(d[0] == '\0', "%s", d);
        free(d);
        free(help);
    }
    words_free(&h);
    words_free(&cmds);
    free(top);
    free(ref);
}
END_TEST

/* ---- the comparison can fail ------------------------------------------ */

START_TEST(test_check_catches_a_flag_missing_on_either_side)
{
    char *help = help_of("work"), *ref = read_reference(), *d;

    cut(ref, " [--grace S]", false);
    d = flag_diff(help, ref, "work");
    ck_assert_str_eq(d, "work: not in the reference: [--grace]; not in "
                        "--help: []");
    free(d);
    cut(help, "--drain", false);
    cut(help, "--drain", false);
    d = flag_diff(help, ref, "work");
    ck_assert_str_eq(d, "work: not in the reference: [--grace]; not in "
                        "--help: [--drain]");
    free(d);
    free(help);
    free(ref);
}
END_TEST

/* ---- installed documentation ------------------------------------------ */

START_TEST(test_installed_man_page_points_to_installed_reference)
{
    const char *cmake = getenv("STEPQ_CMAKE"),
               *build = getenv("STEPQ_BUILD_DIR");
    char cmd[4096], *want = read_reference(), *got, *man, *p;

    ck_assert_msg(cmake && build, "STEPQ_CMAKE and STEPQ_BUILD_DIR are set");
    snprintf(cmd, sizeof(cmd),
             "'%s' --install '%s' --component docs --prefix '%s/usr' "
             ">/dev/null",
             cmake, build, fixture_dir);
    ck_assert_int_eq(system(cmd), 0);
    p = tmpdir_join(fixture_dir, "usr/share/doc/stepq/reference.md");
    got = read_file(p);
    ck_assert_msg(strcmp(got, want) == 0, "%s differs from the source", p);
    free(p);
    p = tmpdir_join(fixture_dir, "usr/share/man/man1/stepq.1");
    man = read_file(p);
    ck_assert_ptr_nonnull(strstr(man, "share/doc/stepq/reference.md"));
    free(p);
    /* The pages the reference links to are installed next to it. */
    p = tmpdir_join(fixture_dir, "usr/share/doc/stepq/endpoints.md");
    free(read_file(p));
    ck_assert_ptr_nonnull(strstr(man, "share/doc/stepq/endpoints.md"));
    free(p);
    free(man);
    free(got);
    free(want);
}
END_TEST

Suite *
test_suite(void)
{
    Suite *s = suite_create("reference");
    TCase *cmds = tcase_create("commands");
    TCase *neg = tcase_create("the check can fail");
    TCase *inst = tcase_create("install");

    tcase_add_checked_fixture(cmds, fixture_setup, fixture_teardown);
    tcase_set_timeout(cmds, 60);
    tcase_add_loop_test(cmds, test_command_sets_compared, 0, 2);
    tcase_add_test(cmds,
                   test_each_command_has_the_same_flags_in_help_and_reference);
    suite_add_tcase(s, cmds);
    tcase_add_checked_fixture(neg, fixture_setup, fixture_teardown);
    tcase_set_timeout(neg, 30);
    tcase_add_loop_test(neg, test_command_sets_compared, 2, 4);
    tcase_add_test(neg, test_check_catches_a_flag_missing_on_either_side);
    suite_add_tcase(s, neg);
    tcase_add_checked_fixture(inst, fixture_setup, fixture_teardown);
    tcase_set_timeout(inst, 60);
    tcase_add_test(inst, test_installed_man_page_points_to_installed_reference);
    suite_add_tcase(s, inst);
    return s;
}

/* table.c: the text tables of the commands (jobs list, park list, tiers,
 * schedules, report): each column as wide as its widest cell, so that a
 * long tier, step or zone name does not push the rest of its row out of
 * line. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

void
cli_table_init(struct cli_table *t, int ncols, const char *const *heads,
               const char *align)
{
    memset(t, 0, sizeof(*t));
    t->ncols = ncols;
    t->heads = heads;
    t->align = align;
}

void
cli_table_add(struct cli_table *t, const char *const *cells)
{
    size_t need = (t->nrows + 1) * (size_t)t->ncols;

    if (need > t->cap) {
        t->cap = need * 2;
        t->cells = xrealloc(t->cells, t->cap * sizeof(*t->cells));
    }
    for (int i = 0; i < t->ncols; i++)
        t->cells[t->nrows * (size_t)t->ncols + (size_t)i] =
            xstrdup(cells[i] != NULL ? cells[i] : "-");
    t->nrows++;
}

/* One line: each cell padded to its column's width (on the left for a
 * column aligned 'r'), the last one on the left only. */
static void
print_line(const struct cli_table *t, const char *const *cells,
           const int *width)
{
    for (int i = 0; i < t->ncols; i++) {
        bool last = i == t->ncols - 1, right = t->align[i] == 'r';
        if (right)
            printf("%*s", width[i], cells[i]);
        else if (last)
            printf("%s", cells[i]);
        else
            printf("%-*s", width[i], cells[i]);
        printf(last ? "\n" : " ");
    }
}

void
cli_table_print(const struct cli_table *t)
{
    int *width = xcalloc((size_t)t->ncols, sizeof(*width));

    for (int i = 0; i < t->ncols; i++)
        width[i] = (int)strlen(t->heads[i]);
    for (size_t r = 0; r < t->nrows; r++) {
        for (int i = 0; i < t->ncols; i++) {
            int n = (int)strlen(t->cells[r * (size_t)t->ncols + (size_t)i]);
            if (n > width[i])
                width[i] = n;
        }
    }
    print_line(t, t->heads, width);
    for (size_t r = 0; r < t->nrows; r++)
        print_line(t, (const char *const *)&t->cells[r * (size_t)t->ncols],
                   width);
    free(width);
}

void
cli_table_cleanup(struct cli_table *t)
{
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof(*t));
}

/* budget.c: the budgets' storage calls (declared in queue/queue.h): the
 * arguments every backend would check alike, checked once here, the call
 * passed to the open store's table, and the rows freed. */
#include "queue/internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "queue/tiers.h"

/* The arguments every backend would check alike. */
static bool
budget_args_bad(const char *name, const char *window, int64_t a, int64_t b)
{
    return name == NULL || name[0] == '\0' || window == NULL ||
           window[0] == '\0' || a < 0 || b < 0;
}

int
q_budget_reserve(q_db *db, const char *name, const char *window,
                 int64_t limit_nusd, int64_t amount_nusd, int64_t now)
{
    if (budget_args_bad(name, window, limit_nusd, amount_nusd))
        return -EINVAL;
    return db->ops->budget_reserve(db, name, window, limit_nusd, amount_nusd,
                                   now);
}

int
q_budget_settle(q_db *db, const char *name, const char *window,
                int64_t reserved_nusd, int64_t spent_nusd, int64_t now)
{
    if (budget_args_bad(name, window, reserved_nusd, spent_nusd))
        return -EINVAL;
    return db->ops->budget_settle(db, name, window, reserved_nusd, spent_nusd,
                                  now);
}

int
q_budgets_list(q_db *db, int64_t since, struct q_budget **out, size_t *n)
{
    return db->ops->budgets_list(db, since, out, n);
}

void
q__budget_clean(void *e)
{
    struct q_budget *b = e;

    free(b->name);
    free(b->window);
}

void
q_budgets_free(struct q_budget *b, size_t n)
{
    q__array_free(b, n, sizeof(*b), q__budget_clean);
}

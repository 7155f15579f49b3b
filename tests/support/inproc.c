/* inproc.c: the worker run inside the test's own process (inproc.h). */
#include "tests/support/inproc.h"

#include <check.h>

#include "common/config.h"
#include "worker/worker.h"

void
inproc_drain(const char *id, int concurrency)
{
    struct config *cfg = NULL;
    struct worker_opts o = {.db_path = "stepq.db",
                            .drain = true,
                            .worker_id = id,
                            .concurrency = concurrency};
    char err[512];

    ck_assert_msg(config_load("stepq.json", &cfg, err, sizeof(err)) == 0, "%s",
                  err);
    o.cfg = cfg;
    ck_assert_int_eq(worker_run(&o), 0);
    config_free(cfg);
}

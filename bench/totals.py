#!/usr/bin/env python3
"""bench/totals.py: a /metrics scrape on a big ledger, two builds side by
side in one run, run on demand (never in tests).

    python3 bench/totals.py --before BIN --after BIN [--attempts 200000]
        [--scrapes 20] [--runs 3] [--db sqlite|LOCATION] [--dir /var/tmp]
        [--keep]

Both binaries read the same ledger: a store made by the --before binary
(schema 17: its /metrics read the whole ledger on every scrape) and
filled with SQL with --attempts finished attempts of --attempts / 2
succeeded jobs (tiers free and local and http steps, outcomes ok,
server_error and soft_throttle, latencies up to 5 s, tokens, costs on
free, a 400-byte body each, as retention keeps them for a week); a
copy of it (SQLite: the file; PostgreSQL: a second schema filled by the
same SQL) is opened by `--after init`, which migrates it (schema 18:
the running totals filled from the ended attempts of the ledger, here
all of them; the time is printed). Then
for each of --runs runs, `stepq serve` of each binary on its store, and
--scrapes GET /metrics of each, taking turns (before, after, before...),
one client on a kept-alive connection (serve's -v log in serve.log): the
median and the 90th percentile of a scrape's latency, and the server's
CPU per scrape (from /proc). Medians of the runs are printed, with whether both builds print
the same ledger counters (they must: nothing was pruned).

With --db LOCATION (a PostgreSQL server), each store is a fresh schema
of its own there (made and dropped with psql).
"""

import argparse
import http.client
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (cpu_model, die, mem_gib, pg_drop, pg_fresh,  # noqa: E402
                      psql, run_stepq)
from serve import TOKEN, proc_cpu, start_serve, stop_serve  # noqa: E402

SERIES = ("stepq_attempts_total", "stepq_tokens_total",
          "stepq_cost_usd_total", "stepq_request_latency_seconds")


def fill_sql(n, pg):
    """The SQL that fills a store at schema 17 with n attempts."""
    body = "repeat('x', 400)" if pg else "printf('%.400c', 'x')"
    rows = ("WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s"
            " WHERE i < %d) " % n)
    return (rows + "INSERT INTO jobs (id, name, state, run_at, deadline_at,"
            " created_at, updated_at, spec) SELECT i, 'j', 2, 0, 0, 0, 0,"
            " '{}' FROM s WHERE i <= %d;" % ((n + 1) // 2) +
            rows + "INSERT INTO attempts (job_id, step, attempt, tier,"
            " est_tokens, started_at, finished_at, status, outcome, reason,"
            " decision, latency_ms, tokens, cost_nusd, body) SELECT"
            " (i + 1) / 2, 0, 1 + i % 2, CASE i % 5 WHEN 0 THEN NULL"
            " WHEN 1 THEN 'local' ELSE 'free' END, 100, i, i + 1, 200,"
            " CASE i % 7 WHEN 0 THEN 'soft_throttle' WHEN 1 THEN"
            " 'server_error' ELSE 'ok' END, CASE i % 7 WHEN 0 THEN 'rpm'"
            " WHEN 1 THEN 'http_500' END, CASE WHEN i % 7 < 2 THEN 'retry'"
            " ELSE 'commit' END, (i * 37) % 5000, i % 300, CASE WHEN i % 5"
            " > 1 THEN (i % 300) * 1000 END, " + body + " FROM s;")


def make_stores(args, folder):
    """Makes the before and after stores; returns their --db arguments
    and the after store's migration time (s)."""
    before_bin, after_bin = args.before, args.after
    if args.db == "sqlite":
        run_stepq(before_bin, folder, ["--db", "before.db", "init"])
        r = subprocess.run(["sqlite3", "before.db", fill_sql(args.attempts,
                                                             False)],
                           cwd=folder, stderr=subprocess.PIPE)
        if r.returncode != 0:
            die("sqlite3: %s" % r.stderr.decode())
        shutil.copy(os.path.join(folder, "before.db"),
                    os.path.join(folder, "after.db"))
        dbs = (["--db", "before.db"], ["--db", "after.db"])
    else:
        dbs = []
        for name in ("totals_before", "totals_after"):
            loc = pg_fresh(args.db, name)
            run_stepq(before_bin, folder, ["--db", loc, "init"])
            psql(loc, fill_sql(args.attempts, True) + " ANALYZE;")
            dbs.append(["--db", loc])
        dbs = tuple(dbs)
    t0 = time.monotonic()
    out = run_stepq(after_bin, folder, dbs[1] + ["init"]).decode()
    took = time.monotonic() - t0
    if "schema version 18" not in out:
        die("--after init did not migrate to 18: %s" % out.strip())
    return dbs, took


def scrape(conn):
    """One GET /metrics: (seconds, body)."""
    t0 = time.perf_counter()
    conn.request("GET", "/metrics",
                 headers={"Authorization": "Bearer " + TOKEN})
    r = conn.getresponse()
    body = r.read().decode()
    took = time.perf_counter() - t0
    if r.status != 200:
        die("GET /metrics: %d %s" % (r.status, body[:200]))
    return took, body


def ledger_lines(body):
    return sorted(line for line in body.splitlines()
                  if line.startswith(SERIES))


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def one_run(args, folder, dbs):
    procs = [start_serve(b, folder, d)
             for b, d in ((args.before, dbs[0]), (args.after, dbs[1]))]
    try:
        conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                 for _, port in procs]
        lats = ([], [])
        bodies = [None, None]
        cpu0 = [proc_cpu(p.pid) for p, _ in procs]
        for _ in range(args.scrapes):
            for k in (0, 1):
                took, bodies[k] = scrape(conns[k])
                lats[k].append(took)
        cpu = [(proc_cpu(p.pid) - c) / args.scrapes
               for (p, _), c in zip(procs, cpu0)]
        same = ledger_lines(bodies[0]) == ledger_lines(bodies[1])
        return [{"p50": pct(lats[k], 0.5), "p90": pct(lats[k], 0.9),
                 "cpu": cpu[k]} for k in (0, 1)], same
    finally:
        for p, _ in procs:
            stop_serve(p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--attempts", type=int, default=200000)
    ap.add_argument("--scrapes", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--db", default="sqlite")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    args.before = os.path.abspath(args.before)
    args.after = os.path.abspath(args.after)
    folder = tempfile.mkdtemp(prefix="stepq-bench-totals.", dir=args.dir)
    try:
        with open(os.path.join(folder, "stepq.json"), "w") as f:
            f.write('{"tiers": [{"name": "free", "base_url":'
                    ' "http://127.0.0.1:9/v1", "model": "m"}, {"name":'
                    ' "local", "base_url": "http://127.0.0.1:9/v1",'
                    ' "model": "m"}]}')
        dbs, migrate_s = make_stores(args, folder)
        runs = [one_run(args, folder, dbs) for _ in range(args.runs)]
    finally:
        if args.db != "sqlite":
            for name in ("totals_before", "totals_after"):
                pg_drop(args.db, name)
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print("machine: %s, %d CPUs, %.1f GiB" % (cpu_model(), os.cpu_count(),
                                              mem_gib()))
    print("store: %s, %d attempts; --after's migration to 18: %.2f s"
          % ("SQLite" if args.db == "sqlite" else "PostgreSQL",
             args.attempts, migrate_s))
    print("same ledger counters in every run: %s"
          % all(same for _, same in runs))
    print("| build | scrape p50 (ms) | scrape p90 (ms) | serve CPU per"
          " scrape (ms) |")
    print("|---|---|---|---|")
    for k, name in ((0, "before"), (1, "after")):
        med = {m: statistics.median(r[0][k][m] for r in runs)
               for m in ("p50", "p90", "cpu")}
        print("| %s | %.2f | %.2f | %.2f |" % (name, med["p50"] * 1e3,
                                               med["p90"] * 1e3,
                                               med["cpu"] * 1e3))


if __name__ == "__main__":
    main()

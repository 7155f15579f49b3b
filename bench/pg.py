#!/usr/bin/env python3
"""bench/pg.py: stepq on SQLite and on PostgreSQL, and graphile-worker on
the same PostgreSQL, in one run; prints one markdown table. bench/pg.sh
starts the throwaway cluster, runs this, and stops the cluster:

    bench/pg.sh [--runs 3] [--backlog 100000] [--drain 20000] [--single 5000]
        [--full] [--concurrency 1,16,256] [--jobs 1:2000,...]
        [--skip queue,peer,e2e,sqlite,pg]

Rows (each the median of --runs runs, every run on a fresh store: a new
SQLite file, a new schema on the server):
  - bench_queue rows 0-5 (enqueue 1 and 100 per transaction, parsed and
    validated; claim+complete with 1 and 4 processes, 1 and 32 per claim,
    timed over the first --drain jobs of a backlog of --backlog), SQLite at
    synchronous=NORMAL (and FULL with --full), PostgreSQL (its commits are
    always synchronous, as graphile-worker's are on the same server);
  - graphile-worker (bench/peers/graphile/bench.js) on the same server:
    enqueue with add_job (1 per transaction) and add_jobs (100 per
    transaction), and draining the first --drain of --backlog no-op jobs
    with 1 and 4 processes at concurrency 1 and 32 per process (it claims
    one job per query; in the 32 rows it batches as it can: localQueue of
    32, completions of one tick in one query), timed from its first job's
    success (its start-up left out, in its favour);
  - bench/worker.py end to end (one-step jobs against `stepq mock`) at each
    --concurrency on SQLite and on PostgreSQL: steps/s and worker CPU per
    step.
--skip leaves out parts: queue (stepq's store rows), peer, e2e (end to
end), sqlite or pg (stepq on that store, in every part); a cell left out
stays empty. The location is read from --url-file and never printed.
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import worker  # noqa: E402
from benchlib import (cpu_model, cpu_ticks, die, mem_gib, pg_drop,  # noqa
                      pg_fresh, psql, steal_since)

PEER = os.path.join(HERE, "peers", "graphile")
QUEUE_ROWS = [
    "enqueue, 1 per transaction",
    "enqueue, 100 per transaction",
    "claim+complete, 1 process, 1 per claim",
    "claim+complete, 4 processes, 1 per claim",
    "claim+complete, 1 process, 32 per claim",
    "claim+complete, 4 processes, 32 per claim",
]


def note(msg):
    print("pg.py: " + msg, file=sys.stderr, flush=True)


def bench_queue(a, server, durable):
    """Runs bench_queue rows 0-5; returns {row: (median, [runs])} for the
    one column asked for (durable off or on)."""
    args = [a.bench_queue, "--tsv", "--runs", str(a.runs), "--only",
            "0,1,2,3,4,5", "--backlog", str(a.backlog), "--drain",
            str(a.drain), "--single",
            str(a.single), "--durable", "yes" if durable else "no",
            "--db", server or "sqlite", "--dir", a.dir]
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        die("bench_queue failed (exit %d): %s" % (
            r.returncode, r.stderr.decode()[-2000:]))
    out = {}
    for line in r.stdout.decode().splitlines():
        f = line.split("\t")
        col = 2 if durable else 1
        runs = [float(x) for x in f[3 + durable].split(",")]
        out[f[0]] = (float(f[col]), runs)
    return out


def peer(a, server, mode, n, extra):
    """One graphile-worker measurement on a fresh schema: enqueue n jobs
    (timed in enqueue mode), then in drain mode time draining them."""
    schema = "bench_peer_%d" % os.getpid()
    pg_drop(server, schema)

    def node(m, more):
        r = subprocess.run(
            ["node", "bench.js", m, "--url", server, "--schema", schema,
             "--jobs", str(n)] + more, cwd=PEER, stdout=subprocess.PIPE)
        if r.returncode != 0:
            die("graphile-worker %s failed (exit %d)" % (m, r.returncode))
        return float(r.stdout.decode().split()[-1])

    try:
        rate = node("enqueue", extra if mode == "enqueue" else [])
        if mode == "drain":
            rate = node("drain", extra)
        return rate
    finally:
        pg_drop(server, schema)


def med(xs):
    return (statistics.median(xs), xs)


def fmt(cell):
    if cell is None:
        return ""
    m, runs = cell
    return "{:,.0f} ({})".format(m, "/".join("%.0f" % r for r in runs))


def machine(server):
    kernel = platform.release()
    ver = psql(server, "SHOW server_version").strip()
    settings = psql(server, "SELECT string_agg(name || '=' || setting, ', ' "
                    "ORDER BY name) FROM pg_settings WHERE name IN "
                    "('fsync','synchronous_commit','shared_buffers',"
                    "'wal_level')").strip()
    node = subprocess.run(["node", "--version"], stdout=subprocess.PIPE)
    gw = subprocess.run(
        ["node", "-p", "require('graphile-worker/package.json').version"],
        cwd=PEER, stdout=subprocess.PIPE)
    return ("nproc %d, %s, %.1f GiB RAM, Linux %s, load %.2f %.2f %.2f; "
            "PostgreSQL %s (%s; loopback TCP); node %s, graphile-worker %s"
            % ((os.cpu_count(), cpu_model(), mem_gib(), kernel)
               + os.getloadavg()
               + (ver.split()[0], settings, node.stdout.decode().strip(),
                  gw.stdout.decode().strip())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url-file", required=True)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build",
                                                     "release"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backlog", type=int, default=100000)
    ap.add_argument("--single", type=int, default=5000)
    ap.add_argument("--drain", type=int, default=20000,
                    help="claim rows: jobs timed of the backlog")
    ap.add_argument("--full", action="store_true",
                    help="also SQLite at synchronous=FULL")
    ap.add_argument("--concurrency", default="1,16,256")
    ap.add_argument("--jobs", default="1:2000,16:20000,256:20000")
    ap.add_argument("--skip", default="",
                    help="parts to leave out: queue,peer,e2e,sqlite,pg")
    ap.add_argument("--dir", default=None,
                    help="where SQLite files and folders go (not tmpfs)")
    a = ap.parse_args()
    with open(a.url_file) as f:
        server = f.read().strip()
    a.bench_queue = os.path.join(a.build, "bench", "bench_queue")
    stepq = os.path.abspath(os.path.join(a.build, "cli", "stepq"))
    a.dir = a.dir or tempfile.gettempdir()
    skip = set(a.skip.split(","))

    ticks = cpu_ticks()
    print("machine: " + machine(server))
    print("stepq: %s, commit %s" % (stepq, subprocess.run(
        ["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
        stdout=subprocess.PIPE).stdout.decode().strip()))
    print()
    sys.stdout.flush()
    cols = ["stepq SQLite NORMAL", "stepq SQLite FULL",
            "stepq PostgreSQL (sync commit off)",
            "stepq PostgreSQL (sync commit on)",
            "graphile-worker (sync commit on)"]
    table = {r: [None] * 5 for r in QUEUE_ROWS}
    if "queue" not in skip:
        for i, (srv, durable) in enumerate([(None, False), (None, True),
                                            (server, False), (server, True)]):
            # A PostgreSQL store ignores durable (its commits are always
            # synchronous: queue/pg/store.c), so durable off would measure
            # the durable column again.
            if ("pg" if srv else "sqlite") in skip or (i == 1 and not
                                                         a.full) or i == 2:
                continue
            note("bench_queue, column %s" % cols[i])
            for row, cell in bench_queue(a, srv, durable).items():
                table[row][i] = cell
    if "peer" not in skip:
        note("graphile-worker")
        table[QUEUE_ROWS[0]][4] = med([peer(a, server, "enqueue", a.single,
                                            ["--per", "1"])
                                       for _ in range(a.runs)])
        table[QUEUE_ROWS[1]][4] = med([peer(a, server, "enqueue", a.backlog,
                                            ["--per", "100"])
                                       for _ in range(a.runs)])
        for k, (procs, conc) in enumerate([(1, 1), (4, 1), (1, 32), (4, 32)]):
            # 32 per claim: its batching (localQueue 32, completions of a
            # tick in one query) beside our 32 per claim.
            note("graphile-worker drain, %d x %d" % (procs, conc))
            table[QUEUE_ROWS[2 + k]][4] = med(
                [peer(a, server, "drain", a.backlog,
                      ["--procs", str(procs), "--concurrency", str(conc),
                       "--take", str(a.drain), "--batch", str(conc)])
                 for _ in range(a.runs)])

    print("Queue store, jobs/s: median (runs). Claims: the first %d jobs "
          "of a backlog of %d (graphile-worker: no-op jobs; 1 per claim: "
          "concurrency 1 per process; 32 per claim: concurrency 32, "
          "localQueue 32, batched completions); bulk enqueue %d jobs; %d "
          "for 1 per transaction."
          % (a.drain, a.backlog, a.backlog, a.single))
    print()
    shown = [i for i in range(len(cols))
             if any(table[r][i] is not None for r in QUEUE_ROWS)]
    print("| operation | " + " | ".join(cols[i] for i in shown) + " |")
    print("|---" * (len(shown) + 1) + "|")
    for r in QUEUE_ROWS:
        print("| %s | %s |" % (r, " | ".join(fmt(table[r][i])
                                             for i in shown)))
    print()
    sys.stdout.flush()

    if "e2e" in skip:
        print("CPU steal (time the host took) during the whole run: %.1f%%"
              % steal_since(ticks))
        return
    jobs = worker.parse_jobs(a.jobs)
    print("End to end (`stepq work --drain` vs `stepq mock`, one-step jobs): "
          "steps/s wall, median (runs); worker CPU per step, median.")
    print()
    print("| concurrency | jobs | SQLite steps/s | SQLite CPU/step "
          "| PostgreSQL steps/s | PostgreSQL CPU/step | PostgreSQL / SQLite |")
    print("|---|---|---|---|---|---|---|")
    for c in [int(x) for x in a.concurrency.split(",")]:
        n = jobs.get(c, max(jobs.values()))
        cells = []
        for srv in (None, server):
            if ("pg" if srv else "sqlite") in skip:
                cells.append(((float("nan"), []), float("nan")))
                continue
            note("end to end, concurrency %d, %s"
                 % (c, "PostgreSQL" if srv else "SQLite"))
            rs = [worker.one_run(stepq, a.dir, c, n, False, srv)
                  for _ in range(a.runs)]
            cells.append((med([r["wall"] for r in rs]),
                          statistics.median(r["cpu_us"] for r in rs)))
        print("| %d | %d | %s | %.0f µs | %s | %.0f µs | %.2fx |"
              % (c, n, fmt(cells[0][0]), cells[0][1], fmt(cells[1][0]),
                 cells[1][1], cells[1][0][0] / cells[0][0][0]))
        sys.stdout.flush()
    print()
    print("CPU steal (time the host took) during the whole run: %.1f%%"
          % steal_since(ticks))


if __name__ == "__main__":
    main()

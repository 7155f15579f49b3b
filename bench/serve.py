#!/usr/bin/env python3
"""bench/serve.py: `stepq serve` over loopback, run on demand (never in tests).

    python3 bench/serve.py [--runs 3] [--bin build/release/cli/stepq]
        [--db sqlite|LOCATION] [--seconds 3] [--clients 1,8]

For each run, in a fresh folder with a fresh store (a SQLite file, or with
--db a fresh schema on that PostgreSQL server), starts `stepq serve
--listen 127.0.0.1:0` with a token and measures, each for --seconds:

  - enqueue, one job per request: POST /v1/jobs from C client threads,
    each on its own kept-alive connection (requests/s, median and 99th
    percentile latency);
  - enqueue, 100 jobs per request (JSON lines): jobs/s;
  - reads: GET /v1/status, GET /v1/jobs/ID, GET /v1/jobs?limit=100 and
    GET /metrics from one client (requests/s, median latency);
  - side by side, the other way a program enqueues: one `stepq enqueue`
    process per job (jobs/s), on the same store.

Also the server's CPU per request (from /proc) and its peak RSS. Medians
of the runs are printed. The clients are Python threads (one core's worth
at most): the table says how much CPU they took, so a client-bound figure
shows as one.
"""

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (cpu_model, cpu_ticks, die, job_text,  # noqa: E402
                      mem_gib, pg_drop, pg_fresh, run_stepq, steal_since)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BIN = os.path.join(HERE, "..", "build", "release", "cli", "stepq")
TOKEN = "bench-token-0123456789abcdef"
HZ = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def proc_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def start_serve(binary, folder, dbargs):
    env = dict(os.environ, STEPQ_TOKEN=TOKEN)
    p = subprocess.Popen(
        [binary] + dbargs + ["serve", "--listen", "127.0.0.1:0"],
        cwd=folder, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL)
    line = p.stdout.readline().decode().strip()
    if not line.startswith("listening 127.0.0.1:"):
        p.kill()
        p.wait()
        die("stepq serve did not start: %r" % line)
    return p, int(line.rsplit(":", 1)[1])


def stop_serve(p):
    p.terminate()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        die("stepq serve did not stop on SIGTERM")
    p.stdout.close()
    if p.returncode != 0:
        die("stepq serve exited %d" % p.returncode)


HEADERS = {"Authorization": "Bearer " + TOKEN,
           "Content-Type": "application/json"}


def hammer(port, seconds, nclients, method, path_of, body_of, expect):
    """nclients threads send requests for seconds; returns (count,
    latencies in ms, client CPU s)."""
    stop = time.monotonic() + seconds
    lats, counts, errors = [], [0] * nclients, []
    lock = threading.Lock()
    t_cpu = time.process_time()

    def client(k):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = []
        i = 0
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            conn.request(method, path_of(k, i), body=body_of(k, i),
                         headers=HEADERS)
            r = conn.getresponse()
            data = r.read()
            mine.append((time.perf_counter() - t0) * 1000)
            if r.status not in expect:
                errors.append("%d %s" % (r.status, data[:200]))
                break
            i += 1
        conn.close()
        counts[k] = i
        with lock:
            lats.extend(mine)

    threads = [threading.Thread(target=client, args=(k,))
               for k in range(nclients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        die("%s: %s" % (method, errors[0]))
    return sum(counts), lats, time.process_time() - t_cpu


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * q))] if v else 0.0


def one_run(binary, base, server, seconds, clients, keep):
    folder = tempfile.mkdtemp(prefix="bench-serve-", dir=base)
    schema = "bench_serve_%d_%s" % (os.getpid(), os.path.basename(folder)
                                    .replace("-", "_").lower())
    dbargs = ["--db", pg_fresh(server, schema)] if server else []
    p = None
    rows = {}
    try:
        with open(os.path.join(folder, "stepq.json"), "w") as f:
            json.dump({"tiers": [{"name": "mock", "base_url":
                                  "http://127.0.0.1:9/v1", "model": "m"}]}, f)
        run_stepq(binary, folder, dbargs + ["init"])
        p, port = start_serve(binary, folder, dbargs)
        job = json.loads(job_text("bench"))

        def one_job(k, i):
            job["key"] = "c%d-%d" % (k, i)
            return json.dumps(job)

        for c in clients:
            cpu0 = proc_cpu(p.pid)
            n, lats, ccpu = hammer(port, seconds, c, "POST",
                                   lambda k, i: "/v1/jobs",
                                   lambda k, i, c=c: one_job(k + 100 * c, i),
                                   (201,))
            rows["enqueue 1/request, %d client(s)" % c] = {
                "rate": n / seconds, "p50": pct(lats, 0.5),
                "p99": pct(lats, 0.99),
                "cpu_us": (proc_cpu(p.pid) - cpu0) * 1e6 / max(n, 1),
                "client_cpu": ccpu / seconds}

        def hundred(k, i):
            out = []
            for j in range(100):
                job["key"] = "h%d-%d-%d" % (k, i, j)
                out.append(json.dumps(job))
            return "\n".join(out) + "\n"

        cpu0 = proc_cpu(p.pid)
        n, lats, ccpu = hammer(port, seconds, 1, "POST",
                               lambda k, i: "/v1/jobs", hundred, (201,))
        rows["enqueue 100/request (jobs/s)"] = {
            "rate": n * 100 / seconds, "p50": pct(lats, 0.5),
            "p99": pct(lats, 0.99),
            "cpu_us": (proc_cpu(p.pid) - cpu0) * 1e6 / max(n * 100, 1),
            "client_cpu": ccpu / seconds}
        for name, path in (("GET /v1/status", "/v1/status"),
                           ("GET /v1/jobs/ID", "/v1/jobs/7"),
                           ("GET /v1/jobs?limit=100", "/v1/jobs?limit=100"),
                           ("GET /metrics", "/metrics")):
            cpu0 = proc_cpu(p.pid)
            n, lats, ccpu = hammer(port, seconds, 1, "GET",
                                   lambda k, i, path=path: path,
                                   lambda k, i: None, (200,))
            rows[name] = {"rate": n / seconds, "p50": pct(lats, 0.5),
                          "p99": pct(lats, 0.99),
                          "cpu_us": (proc_cpu(p.pid) - cpu0) * 1e6 / max(n, 1),
                          "client_cpu": ccpu / seconds}
        rss = proc_rss_kib(p.pid)
        stop_serve(p)
        p = None
        # side by side: one `stepq enqueue` process per job
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < seconds:
            job["key"] = "cli-%d" % n
            subprocess.run([binary] + dbargs + ["enqueue", "-"], cwd=folder,
                           input=json.dumps(job).encode(), check=True,
                           stdout=subprocess.DEVNULL)
            n += 1
        rows["stepq enqueue, one process per job"] = {
            "rate": n / (time.monotonic() - t0), "p50": 0, "p99": 0,
            "cpu_us": 0, "client_cpu": 0}
        return rows, rss
    finally:
        if p is not None:
            p.kill()
            p.wait()
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
            if server:
                pg_drop(server, schema)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("STEPQ_BIN", DEFAULT_BIN))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--clients", default="1,8")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--db", default="sqlite",
                    help="sqlite, or a PostgreSQL location to make schemas on")
    a = ap.parse_args()
    if not os.access(a.bin, os.X_OK):
        die("no stepq binary at %s (build the release preset)" % a.bin)
    server = None if a.db == "sqlite" else a.db
    clients = [int(c) for c in a.clients.split(",")]
    print("machine: %s, %.1f GiB; store: %s; %d run(s) of %.0f s per row"
          % (cpu_model(), mem_gib(), "PostgreSQL" if server else "SQLite",
             a.runs, a.seconds))
    ticks = cpu_ticks()
    runs, rss = [], []
    for _ in range(a.runs):
        r, m = one_run(a.bin, a.dir, server, a.seconds, clients, a.keep)
        runs.append(r)
        rss.append(m)
    print("%-36s %10s %8s %8s %12s %10s" % ("row (medians)", "per s",
                                             "p50 ms", "p99 ms",
                                             "server us", "client CPU"))
    for name in runs[0]:
        med = {k: statistics.median(r[name][k] for r in runs)
               for k in runs[0][name]}
        print("%-36s %10.0f %8.2f %8.2f %12.0f %10.2f"
              % (name, med["rate"], med["p50"], med["p99"], med["cpu_us"],
                 med["client_cpu"]))
    print("server peak RSS: %.1f MiB (median); CPU steal during the runs: "
          "%.1f%%" % (statistics.median(rss) / 1024, steal_since(ticks)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/serve.py: `stepq serve` over loopback, run on demand (never in tests).

    python3 bench/serve.py [--runs 3] [--bin build/release/cli/stepq]
        [--db sqlite|LOCATION] [--seconds 3] [--clients 1,8]
        [--park 10000] [--park-only]

For each run, in a fresh folder with a fresh store (a SQLite file, or with
--db a fresh schema on that PostgreSQL server), starts `stepq serve
--listen 127.0.0.1:0` with a token and measures, each for --seconds:

  - enqueue, one job per request: POST /v1/jobs from client threads,
    each on its own kept-alive connection (requests/s, median and 99th
    percentile latency);
  - enqueue, 100 jobs per request (JSON lines): jobs/s;
  - reads: GET /v1/status, GET /v1/jobs/ID, GET /v1/jobs?limit=100 and
    GET /metrics from one client (requests/s, median latency);
  - side by side, the other way a program enqueues: one `stepq enqueue`
    process per job (jobs/s), on the same store.

With --park N, each run also makes a second fresh store holding N open
park items, made the way they are made in production: N one-step jobs
whose step posts a comment (kind http, side effects, no idempotency key)
are enqueued in bulk (JSON lines, one `stepq enqueue`), and a real
`stepq work --drain` runs them against `stepq mock`, whose /comments
route answers every post 429 "daily quota exceeded": the first posts are
sent once each and parked as hard_quota, and once the host is walled the
rest are parked hard_quota unsent (docs/reference.md, "Walls of http
endpoints"). Then `stepq serve` on that store is
measured for GET /v1/park (all N open items, the default filter), GET
/v1/park/ID (one item, with its request and history) and GET
/v1/park?job_id=ID (a filtered list of one item), and the size of each
answer and the build-up time are printed. --park-only skips the other
rows. The server's standard error (-v) goes to serve.log in the run's
folder, kept with --keep.

Also the server's CPU per request (from /proc) and its peak RSS. Medians
of the runs are printed. The clients are Python threads (one core's worth
at most): the table says how much CPU they took, so a client-bound figure
shows as one.
"""

import argparse
import http.client
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (cpu_model, cpu_ticks, die, job_text,  # noqa: E402
                      mem_gib, pg_drop, pg_fresh, read_jsonl, run_stepq,
                      start_mock, steal_since, stop_mock)

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
    with open(os.path.join(folder, "serve.log"), "ab") as err:
        p = subprocess.Popen(
            [binary] + dbargs + ["-v", "serve", "--listen", "127.0.0.1:0"],
            cwd=folder, env=env, stdout=subprocess.PIPE, stderr=err)
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
            try:
                conn.request(method, path_of(k, i), body=body_of(k, i),
                             headers=HEADERS)
                r = conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException) as e:
                errors.append("request %d of client %d, %.1f s into the "
                              "row: %r" % (i + 1, k, seconds -
                                           (stop - time.monotonic()), e))
                break
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
        die("%s %s: %s" % (method, path_of(0, 0), errors[0]))
    return sum(counts), lats, time.process_time() - t_cpu


def busy_now():
    """(CPU seconds all processes used so far, CPU seconds this script
    and its waited-for children used so far, wall seconds)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:8]]
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((v[0] + v[1] + v[2] + v[5] + v[6]) / HZ,
            me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime,
            time.monotonic())


def others_since(start):
    """The CPU the rest of the machine used since start (busy_now()), in
    cores: other programs on the machine make the rows slower. With --db
    the PostgreSQL server counts here, and so does the kernel's work on
    interrupts (loopback traffic)."""
    now = busy_now()
    return max(0.0, (now[0] - start[0]) - (now[1] - start[1])) / max(
        now[2] - start[2], 1e-9)


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * q))] if v else 0.0


def get_row(p, port, seconds, path):
    """GET path from one client for seconds: one row of the table."""
    cpu0 = proc_cpu(p.pid)
    n, lats, ccpu = hammer(port, seconds, 1, "GET", lambda k, i: path,
                           lambda k, i: None, (200,))
    return {"rate": n / seconds, "p50": pct(lats, 0.5),
            "p99": pct(lats, 0.99),
            "cpu_us": (proc_cpu(p.pid) - cpu0) * 1e6 / max(n, 1),
            "client_cpu": ccpu / seconds}


def get_once(port, path):
    """One GET of path; returns the answer's bytes."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers=HEADERS)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    if r.status != 200:
        die("GET %s: %d %s" % (path, r.status, data[:200]))
    return data


# The comments API of the park store: every post meets a daily quota
# wall (as tests/data/e2e/comments-daily-wall.json), which parks a step
# with side effects and no idempotency key as hard_quota.
PARK_SCRIPT = {"routes": [{"path": "/comments", "loop": True, "answers": [
    {"status": 429, "body": "daily quota exceeded"}]}]}


def post_job(port, i):
    """Job i of the park store: one nightly comment post (kind http, so
    side effects by default, and no idempotency key)."""
    return json.dumps({
        "name": "nightly-changelog", "key": "changelog-%05d" % i,
        "steps": [{
            "name": "post_comment", "kind": "http",
            "http": {"method": "POST",
                     "url": "http://127.0.0.1:%d/comments" % port,
                     "headers": {"Authorization": "env:COMMENTS_TOKEN"},
                     "body": {"issue": 1000 + i, "text":
                              "Nightly changelog for repository %d: 3 pull "
                              "requests merged (fix the retry of uploads, "
                              "document the config, bump libcurl)." % i}}}]},
        separators=(",", ":"))


def park_run(binary, base, server, seconds, nitems, keep):
    """One run of the park rows on a fresh store with nitems open park
    items, made by a real worker; returns (rows, facts)."""
    folder = tempfile.mkdtemp(prefix="bench-serve-park-", dir=base)
    schema = "bench_serve_%d_%s" % (os.getpid(), os.path.basename(folder)
                                    .replace("-", "_").lower())
    dbargs = ["--db", pg_fresh(server, schema)] if server else []
    mock = p = None
    rows, facts = {}, {}
    try:
        with open(os.path.join(folder, "stepq.json"), "w") as f:
            json.dump({"tiers": [{"name": "mock", "base_url":
                                  "http://127.0.0.1:9/v1", "model": "m"}]}, f)
        run_stepq(binary, folder, dbargs + ["init"])
        mock, mport = start_mock(binary, folder, PARK_SCRIPT)
        with open(os.path.join(folder, "jobs.jsonl"), "w") as f:
            for i in range(nitems):
                f.write(post_job(mport, i) + "\n")
        t0 = time.monotonic()
        run_stepq(binary, folder, dbargs + ["enqueue", "jobs.jsonl"])
        t1 = time.monotonic()
        with open(os.path.join(folder, "work.log"), "wb") as err:
            w = subprocess.run([binary] + dbargs + ["work", "--drain"],
                               cwd=folder, stdout=subprocess.DEVNULL,
                               stderr=err,
                               env=dict(os.environ, COMMENTS_TOKEN="t"))
        t2 = time.monotonic()
        if w.returncode != 0:
            die("stepq work exited %d (see %s/work.log)"
                % (w.returncode, folder))
        stop_mock(mock)
        mock = None
        sent = len(read_jsonl(os.path.join(folder, "mock.log")))
        st = json.loads(run_stepq(binary, folder,
                                  dbargs + ["status", "--json"]))
        # The first posts meet the wall; once the host is walled, the rest
        # are parked hard_quota unsent, so 1 to nitems posts go out.
        if (st["park_open"] != nitems or st["jobs"]["parked"] != nitems
                or not 1 <= sent <= nitems):
            die("park store: %d open items, %d parked jobs, %d posts sent; "
                "wanted %d items and jobs, 1 to %d posts (folder %s)"
                % (st["park_open"], st["jobs"]["parked"], sent, nitems,
                   nitems, folder))
        facts.update(enqueue_s=t1 - t0, work_s=t2 - t1, total_s=t2 - t0,
                     posts_sent=sent)
        p, port = start_serve(binary, folder, dbargs)
        big = get_once(port, "/v1/park")
        items = json.loads(big)
        if (len(items) != nitems or
                any(it["reason"] != "hard_quota" or it["state"] != "open"
                    for it in items)):
            die("GET /v1/park: %d items, wanted %d open hard_quota ones"
                % (len(items), nitems))
        mid = items[len(items) // 2]
        one = "/v1/park/%d" % mid["id"]
        by_job = "/v1/park?job_id=%d" % mid["job_id"]
        if len(json.loads(get_once(port, by_job))) != 1:
            die("GET %s: not one item" % by_job)
        facts.update(list_bytes=len(big), show_bytes=len(get_once(port, one)))
        rows["GET /v1/park (%d open)" % nitems] = get_row(p, port, seconds,
                                                          "/v1/park")
        rows["GET /v1/park/ID (of %d)" % nitems] = get_row(p, port, seconds,
                                                           one)
        rows["GET /v1/park?job_id=ID (of %d)" % nitems] = get_row(
            p, port, seconds, by_job)
        facts["rss_kib"] = proc_rss_kib(p.pid)
        stop_serve(p)
        p = None
        return rows, facts
    finally:
        if p is not None:
            p.kill()
            p.wait()
        if mock is not None:
            stop_mock(mock)
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
            if server:
                pg_drop(server, schema)


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
            rows[name] = get_row(p, port, seconds, path)
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
    ap.add_argument("--park", type=int, default=0, metavar="N",
                    help="also measure GET /v1/park on a store with N open "
                    "park items made by a real worker (0: not)")
    ap.add_argument("--park-only", action="store_true",
                    help="only the park rows (needs --park N)")
    a = ap.parse_args()
    if a.park < 0 or (a.park_only and a.park == 0):
        die("--park wants a positive count (and --park-only needs it)")
    if not os.access(a.bin, os.X_OK):
        die("no stepq binary at %s (build the release preset)" % a.bin)
    server = None if a.db == "sqlite" else a.db
    clients = [int(c) for c in a.clients.split(",")]
    print("machine: %s, %.1f GiB; store: %s; %d run(s) of %.0f s per row"
          % (cpu_model(), mem_gib(), "PostgreSQL" if server else "SQLite",
             a.runs, a.seconds))
    ticks, busy = cpu_ticks(), busy_now()
    runs, rss, parks = [], [], []
    for _ in range(a.runs):
        r, m = {}, 0
        if not a.park_only:
            r, m = one_run(a.bin, a.dir, server, a.seconds, clients, a.keep)
        if a.park:
            pr, facts = park_run(a.bin, a.dir, server, a.seconds, a.park,
                                 a.keep)
            r.update(pr)
            parks.append(facts)
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
    if not a.park_only:
        print("server peak RSS: %.1f MiB (median)"
              % (statistics.median(rss) / 1024))
    if parks:
        def mp(k):
            return statistics.median(f[k] for f in parks)
        print("park store (medians): %d open items made in %.1f s (enqueue "
              "%.2f s, work --drain %.1f s: %.0f steps/s); GET /v1/park "
              "answer %d bytes (%.0f per item), GET /v1/park/ID %d bytes; "
              "server peak RSS %.1f MiB"
              % (a.park, mp("total_s"), mp("enqueue_s"),
                 mp("work_s"), a.park / mp("work_s"), mp("list_bytes"),
                 mp("list_bytes") / a.park, mp("show_bytes"),
                 mp("rss_kib") / 1024))
    print("CPU steal during the runs: %.1f%%; CPU used by other processes: "
          "%.2f cores" % (steal_since(ticks), others_since(busy)))


if __name__ == "__main__":
    main()

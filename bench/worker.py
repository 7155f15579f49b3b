#!/usr/bin/env python3
"""bench/worker.py: `stepq work` end to end, run on demand (never in tests).

    python3 bench/worker.py [--runs 5] [--concurrency 1,16,256]
        [--jobs 1:2000,16:20000,256:20000] [--bin build/release/cli/stepq]
        [--dir /tmp] [--keep] [--db sqlite|LOCATION] [--latency MS]
        [--workers N] [--tls [--ca-path DIR] [--http2]] [--sdk]

Drives the real binary the way a user does. For each concurrency C and each
of --runs runs, in a fresh temporary folder with a fresh database (a SQLite
file in the folder, or with --db a PostgreSQL location: a fresh schema of
its own on that server, made and dropped with psql; every stepq command
then gets `--db LOCATION`, and the location is never printed):

  1. start `stepq mock --port 0 --log mock.log` (zero latency, or with
     --latency MS a script whose every answer waits MS ms: the shape of
     real LLM calls) and read its `listening 127.0.0.1:PORT` line;
  2. write stepq.json with one tier pointing at it;
  3. enqueue N one-step chat jobs in bulk (JSON lines through
     `stepq enqueue FILE`; not timed);
  4. time `stepq work --drain --concurrency C` from start to exit (attempt
     log on stderr to work.log, as a user would redirect it); with
     --workers N, N such processes at once (worker ids w0 ... w(N-1), each
     at concurrency C, logs work0.log ...: hosts sharing one store), until
     the last one exits;
  5. check that all N jobs succeeded and the mock saw exactly N requests.

Reported, the median of the runs for each C:
  - steps/s (wall): N / time from exec to exit of `stepq work --drain`;
  - steps/s (mock): (N - 1) / time from the first to the last request in the
    mock's log (excludes start-up, the last answers' commit and the drain's
    final idle check);
  - tail: wall time minus the first-to-last span (start-up plus drain end);
  - worker CPU per step (user + system of `stepq work`, from wait4; of all
    of them with --workers);
  - the worker's peak RSS (VmHWM, read every 20 ms while it runs; the
    largest one's with --workers), and that divided by the
    concurrency (RSS per step in flight, start-up included).

Build first: cmake --preset release && cmake --build --preset release
With --tls each row is followed by the same over TLS (bench/tls.py). With
--sdk each row is followed by the official openai SDK (node, npm "openai",
bench/peers/openai/bench.js; `npm ci` there first) making the same calls
at the same concurrency against a fresh mock (behind nginx for TLS rows):
its wall rate, CPU a call (from its first send, start-up left out) and
peak RSS.

With --tls --http2, nginx offers HTTP/2 and HTTP/1.1 and each concurrency
gives two rows, the tier with "http2": "off" (HTTP/1.1) and with "auto"
(HTTP/2), plus the SDK's (--sdk; Node's fetch speaks HTTP/1.1 only), run
side by side: each of the --runs rounds runs stepq over HTTP/1.1, stepq
over HTTP/2 and the SDK in turn, and the medians are reported with the
connections each opened (distinct $connection in nginx's access log) and
the protocol nginx logged for every request.

Only the Python standard library is needed (and node for --sdk).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (cpu_model, cpu_ticks, die, job_text,  # noqa: E402
                      mem_gib, pg_drop, pg_fresh, read_jsonl, run_stepq,
                      start_mock, steal_since, stop_mock)
from tls import (make_certs, nginx_conns, start_nginx,  # noqa: E402
                 stop_nginx)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BIN = os.path.join(HERE, "..", "build", "release", "cli", "stepq")

JOB = job_text("bench")


def read_log(folder):
    return read_jsonl(os.path.join(folder, "mock.log"))


def timed_work(binary, folder, conc, dbargs, workers=1):
    """Runs `workers` processes of `stepq work --drain` at once (worker ids
    w0, w1, ...: hosts on one store); returns (wall s until the last one
    exits, cpu s of all of them, the largest peak RSS KiB)."""
    errs, procs = [], []
    t0 = time.monotonic()
    for i in range(workers):
        errs.append(open(os.path.join(folder, "work%s.log" % (
            "" if workers == 1 else str(i))), "wb"))
        procs.append(subprocess.Popen(
            [binary] + dbargs + ["work", "--drain", "--concurrency",
                                 str(conc)]
            + (["--worker-id", "w%d" % i] if workers > 1 else []),
            cwd=folder,
            stdout=subprocess.DEVNULL,
            stderr=errs[-1],
        ))
    # wait4's ru_maxrss is no use here: a child made with vfork starts with
    # this Python process's high-water mark. VmHWM belongs to the program's
    # own memory, so it is read while it runs.
    hwm, cpu, left = 0, 0.0, {p.pid: p for p in procs}
    while left:
        for pid in list(left):
            got, status, ru = os.wait4(pid, os.WNOHANG)
            if got == 0:
                hwm = max(hwm, vm_hwm_kib(pid))
                continue
            cpu += ru.ru_utime + ru.ru_stime
            code = os.waitstatus_to_exitcode(status)
            del left[pid]
            if code != 0:
                die("stepq work exited %d (see %s/work*.log)"
                    % (code, folder))
        time.sleep(0.02)
    wall = time.monotonic() - t0
    for e in errs:
        e.close()
    return wall, cpu, hwm


def vm_hwm_kib(pid):
    """The peak resident set of process pid so far, in KiB (0 if gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def one_run(binary, base, conc, njobs, keep, server=None, latency=0,
            workers=1, tls=False, ca_path=None, h2=None):
    """One run at concurrency conc on a fresh store (SQLite in the folder,
    or a fresh schema on server); returns the figures of the table. With
    tls, through nginx (bench/tls.py), the tier's ca_file a bundle of the
    system's CAs and the throwaway one. h2 not None: nginx offers HTTP/2
    and the tier's "http2" is "auto" (h2 True) or "off"; the figures then
    have the connections nginx saw."""
    folder = tempfile.mkdtemp(prefix="bench-worker-", dir=base)
    mock = ngx = None
    schema = "bench_worker_%d_%s" % (os.getpid(), os.path.basename(folder)
                                     .replace("-", "_").lower())
    dbargs = ["--db", pg_fresh(server, schema)] if server else []
    try:
        mock, port = start_mock(binary, folder,
                                {"latency_ms": latency} if latency else None)
        tier = {
            "name": "mock",
            "base_url": "http://127.0.0.1:%d/v1" % port,
            "model": "bench-model",
            "timeout_s": 60,
        }
        if tls:
            tier["ca_file"] = make_certs(folder)
            ngx, port = start_nginx(folder, port, h2 is not None)
            tier["base_url"] = "https://127.0.0.1:%d/v1" % port
            if ca_path:
                tier["ca_path"] = ca_path
            if h2 is False:
                tier["http2"] = "off"
        cfg = {"tiers": [tier]}
        with open(os.path.join(folder, "stepq.json"), "w") as f:
            json.dump(cfg, f)
        with open(os.path.join(folder, "jobs.jsonl"), "w") as f:
            f.write((JOB + "\n") * njobs)
        run_stepq(binary, folder, dbargs + ["init"])
        run_stepq(binary, folder, dbargs + ["enqueue", "jobs.jsonl"])
        wall, cpu, rss = timed_work(binary, folder, conc, dbargs, workers)
        conns = None
        if ngx is not None:
            stop_nginx(ngx)
            ngx = None
            conns = wire_check(folder, njobs, "HTTP/2.0" if h2 else "HTTP/1.1")
        stop_mock(mock)
        mock = None
        st = json.loads(run_stepq(binary, folder,
                                  dbargs + ["status", "--json"]))
        ok = st["jobs"]["succeeded"]
        log = read_log(folder)
        good = sum(1 for e in log if e.get("status") == 200)
        if ok != njobs or len(log) != njobs or good != njobs:
            die(
                "C=%d: %d of %d jobs succeeded, mock saw %d requests (%d ok);"
                " folder %s" % (conc, ok, njobs, len(log), good, folder)
            )
        span = (log[-1]["ts_ms"] - log[0]["ts_ms"]) / 1000.0
        return {
            "wall": njobs / wall,
            "mock": (njobs - 1) / span if span > 0 else float("inf"),
            "tail": wall - span,
            "wall_s": wall,
            "cpu_us": cpu * 1e6 / njobs,
            "rss_mib": rss / 1024.0,
            "conns": conns or 0,
        }
    finally:
        if ngx is not None:
            stop_nginx(ngx)
        if mock is not None:
            stop_mock(mock)
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
            if server:
                pg_drop(server, schema)


def wire_check(folder, n, proto):
    """The connections in nginx's log; dies unless it logged n requests,
    all over proto."""
    conns, reqs, protos = nginx_conns(folder)
    if reqs != n or protos.get(proto, 0) != n:
        die("nginx logged %d requests (%s), not %d over %s; folder %s"
            % (reqs, protos, n, proto, folder))
    return conns


SDK = os.path.join(HERE, "peers", "openai", "bench.js")


def sdk_run(binary, base, conc, ncalls, latency=0, tls=False, h2=False):
    """The openai SDK (bench/peers/openai) making the jobs' calls at
    concurrency conc against a fresh mock (behind nginx with tls); returns
    the figures of the table that it has."""
    folder = tempfile.mkdtemp(prefix="bench-sdk-", dir=base)
    mock = ngx = None
    try:
        mock, port = start_mock(binary, folder,
                                {"latency_ms": latency} if latency else None)
        env = dict(os.environ)
        url = "http://127.0.0.1:%d/v1" % port
        if tls:
            make_certs(folder)
            ngx, port = start_nginx(folder, port, h2)
            env["NODE_EXTRA_CA_CERTS"] = os.path.join(folder, "ca.pem")
            url = "https://127.0.0.1:%d/v1" % port
        out = subprocess.run(
            ["node", SDK, "--base-url", url, "--calls", str(ncalls),
             "--concurrency", str(conc)],
            env=env, check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        if r["ok"] != ncalls:
            die("SDK C=%d: %d of %d calls succeeded" % (conc, r["ok"], ncalls))
        conns = 0
        if ngx is not None:
            stop_nginx(ngx)
            ngx = None
            conns = wire_check(folder, ncalls, "HTTP/1.1")
        return {"wall": ncalls / r["wall_s"], "wall_s": r["wall_s"],
                "cpu_us": r["cpu_us"], "rss_mib": r["rss_mib"],
                "conns": conns}
    finally:
        if ngx is not None:
            stop_nginx(ngx)
        if mock is not None:
            stop_mock(mock)
        shutil.rmtree(folder, ignore_errors=True)


def h2_rows(a, binary, server, concs, jobs):
    """--tls --http2: per concurrency, rounds of stepq over HTTP/1.1,
    stepq over HTTP/2 and (--sdk) the SDK, side by side; medians."""
    print("%-16s %7s %10s %8s %12s %8s %10s %8s"
          % ("row", "calls", "calls/s", "wall s", "CPU us/call", "RSS MiB",
             "KiB/flight", "conns"))
    for c in concs:
        n = jobs.get(c, max(jobs.values()))
        names = ["stepq h1", "stepq h2"] + (["SDK (h1)"] if a.sdk else [])
        got = {k: [] for k in names}
        ticks, loads = cpu_ticks(), []
        for _ in range(a.runs):
            for h2 in (False, True):
                got[names[h2]].append(one_run(
                    binary, a.dir, c, n, a.keep, server, a.latency,
                    a.workers, True, a.ca_path, h2))
                loads.append(os.getloadavg()[0])
            if a.sdk:
                got["SDK (h1)"].append(sdk_run(binary, a.dir, c, n,
                                               a.latency, True, True))
                loads.append(os.getloadavg()[0])
        steal = steal_since(ticks)
        for k in names:
            rs = got[k]
            med = {f: statistics.median(r[f] for r in rs) for f in rs[0]}
            print("%-16s %7d %10.0f %8.2f %12.1f %8.1f %10.1f %8.0f"
                  % ("%d %s" % (c, k), n, med["wall"], med["wall_s"],
                     med["cpu_us"], med["rss_mib"],
                     med["rss_mib"] * 1024 / c, med["conns"]))
            print("                 runs, CPU us/call: %s"
                  % " ".join("%.1f" % r["cpu_us"] for r in rs))
        print("                 load (1 min) after each run: %s; CPU steal "
              "%.1f%%" % (" ".join("%.2f" % x for x in loads), steal))
        sys.stdout.flush()


def parse_jobs(spec):
    out = {}
    for part in spec.split(","):
        c, n = part.split(":")
        out[int(c)] = int(n)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("STEPQ_BIN", DEFAULT_BIN))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--concurrency", default="1,16,256")
    ap.add_argument("--jobs", default="1:2000,16:20000,256:20000",
                    help="C:N pairs; a C not listed uses the largest N")
    ap.add_argument("--dir", default=None, help="parent of the temp folders")
    ap.add_argument("--keep", action="store_true", help="keep the folders")
    ap.add_argument("--db", default="sqlite",
                    help="sqlite (a file per run) or a PostgreSQL location "
                    "(a fresh schema per run)")
    ap.add_argument("--workers", type=int, default=1,
                    help="stepq work processes at once, each at C")
    ap.add_argument("--latency", type=int, default=0,
                    help="ms the mock waits before every answer")
    ap.add_argument("--tls", action="store_true",
                    help="after each row, the same over TLS (nginx in front "
                    "of the mock, bench/tls.py)")
    ap.add_argument("--sdk", action="store_true",
                    help="after each row, the official openai SDK making the "
                    "same calls (bench/peers/openai: npm ci there first)")
    ap.add_argument("--ca-path", default=None,
                    help="with --tls, the tier's ca_path too (/etc/ssl/certs: "
                    "Debian libcurl's default, no CA store cache: the cost "
                    "before)")
    ap.add_argument("--http2", action="store_true",
                    help="with --tls, stepq over HTTP/1.1 and HTTP/2 (and the "
                    "SDK with --sdk) side by side, a round each run")
    a = ap.parse_args()
    server = None if a.db == "sqlite" else a.db
    binary = os.path.abspath(a.bin)
    if not os.access(binary, os.X_OK):
        die("no stepq binary at %s (cmake --preset release && "
            "cmake --build --preset release)" % binary)
    concs = [int(c) for c in a.concurrency.split(",")]
    jobs = parse_jobs(a.jobs)
    if (a.runs < 1 or any(c < 1 for c in concs) or a.latency < 0
            or a.workers < 1):
        die("bad numbers")

    print("stepq: %s" % binary)
    print("machine: nproc %d, %s, %.1f GiB RAM, load %.2f %.2f %.2f"
          % ((os.cpu_count(), cpu_model(), mem_gib()) + os.getloadavg()))
    print("one-step chat jobs, `stepq mock` at %d ms latency, "
          "median of %d runs each, store: %s, %d worker process%s"
          % (a.latency, a.runs, "PostgreSQL" if server else "SQLite",
             a.workers, "" if a.workers == 1 else "es at C each"))
    if a.http2:
        if not a.tls:
            die("--http2 needs --tls")
        h2_rows(a, binary, server, concs, jobs)
        return
    print("%-11s %7s %12s %12s %8s %8s %12s %8s %10s"
          % ("concurrency", "jobs", "steps/s wall", "steps/s mock",
             "tail s", "wall s", "CPU us/step", "RSS MiB", "KiB/flight"))
    sys.stdout.flush()
    for c, tls in [(c, t) for c in concs for t in ([False, True]
                                                  if a.tls else [False])]:
        n = jobs.get(c, max(jobs.values()))
        ticks = cpu_ticks()
        rs = [one_run(binary, a.dir, c, n, a.keep, server, a.latency,
                      a.workers, tls, a.ca_path)
              for _ in range(a.runs)]
        steal = steal_since(ticks)
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print("%-11s %7d %12.0f %12.0f %8.2f %8.2f %12.1f %8.1f %10.1f"
              % ("%d%s" % (c, " TLS" if tls else ""), n, med["wall"],
                 med["mock"], med["tail"], med["wall_s"],
                 med["cpu_us"], med["rss_mib"], med["rss_mib"] * 1024 / c))
        print("            runs, steps/s wall: %s; CPU steal %.1f%%"
              % (" ".join("%.0f" % r["wall"] for r in rs), steal))
        sys.stdout.flush()
        if not a.sdk:
            continue
        rs = [sdk_run(binary, a.dir, c, n, a.latency, tls)
              for _ in range(a.runs)]
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print("%-11s %7d %12.0f %12s %8s %8.2f %12.1f %8.1f %10.1f"
              % ("%d%s SDK" % (c, " TLS" if tls else ""), n, med["wall"],
                 "-", "-", med["wall_s"], med["cpu_us"], med["rss_mib"],
                 med["rss_mib"] * 1024 / c))
        sys.stdout.flush()


if __name__ == "__main__":
    main()

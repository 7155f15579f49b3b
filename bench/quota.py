#!/usr/bin/env python3
"""bench/quota.py: quota utilisation of `stepq work`, run on demand (never in
tests).

    python3 bench/quota.py [--runs 3] [--jobs 1000] [--rpm 60,30]
        [--window-s 6] [--concurrency 64] [--bin build/release/cli/stepq]
        [--dir /tmp] [--keep]

Two `stepq mock` routes with request limits (by default 60 and 30 requests
per 6 s sliding window: the 600 and 300 per minute of the issue, with the
window scaled down 10 times so that a run takes about a minute instead of
ten) and two tiers in stepq.json with the same limits ("rpm" per
"window_s"). For each of --runs runs, in a fresh folder with a fresh
database: start the mock, enqueue --jobs one-step chat jobs (JSON lines
through `stepq enqueue`), run `stepq work --drain --concurrency C` to the
end, then count from the mock's request log (and cross-check with the
attempts ledger, read-only through Python's sqlite3):

  - goodput: successes inside the whole windows from the first request,
    [t0, t0 + k*W) with k = floor((last success - t0) / W), divided by
    k * (combined limit). An ideal client that keeps both tiers full gets
    1.0 (the backlog never runs dry inside those windows). Target >= 0.95.
  - 429s received per success. Target <= 0.01.
  - the drain's span (first request to last success) against the ideal
    floor((N - 1) / L) * W (their ratio is a stricter goodput that also
    counts the worker's lag at each window edge), and the final job states.

Prints the median of the runs. Only the Python standard library is needed.
"""

import argparse
import collections
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (cpu_model, die, job_text, mem_gib,  # noqa: E402
                      read_jsonl, run_stepq, start_mock, stop_mock)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BIN = os.path.join(HERE, "..", "build", "release", "cli", "stepq")

JOB = job_text("bench-quota")

TIERS = "abcdefgh"


def ledger(folder):
    """Counts attempts by (tier, status) from the database, read-only."""
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(folder, "stepq.db"),
                         uri=True)
    try:
        rows = db.execute("SELECT tier, status, count(*) FROM attempts "
                          "GROUP BY tier, status").fetchall()
    finally:
        db.close()
    return {(t, s): n for t, s, n in rows}


def one_run(a, binary, rpms, keep):
    folder = tempfile.mkdtemp(prefix="bench-quota-", dir=a.dir)
    win_ms = int(a.window_s * 1000)
    names = TIERS[: len(rpms)]
    mock = None
    try:
        script = {"routes": [{"path": "/" + n, "rpm": r, "rpm_window_ms": win_ms}
                             for n, r in zip(names, rpms)]}
        mock, port = start_mock(binary, folder, script)
        cfg = {"tiers": [{"name": n,
                          "base_url": "http://127.0.0.1:%d/%s/v1" % (port, n),
                          "model": "bench-model", "rpm": r,
                          "window_s": a.window_s, "timeout_s": 60}
                         for n, r in zip(names, rpms)]}
        with open(os.path.join(folder, "stepq.json"), "w") as f:
            json.dump(cfg, f)
        with open(os.path.join(folder, "jobs.jsonl"), "w") as f:
            f.write((JOB + "\n") * a.jobs)
        run_stepq(binary, folder, ["init"])
        run_stepq(binary, folder, ["enqueue", "jobs.jsonl"])
        with open(os.path.join(folder, "work.log"), "wb") as err:
            t0 = time.monotonic()
            rc = subprocess.call(
                [binary, "work", "--drain", "--concurrency", str(a.concurrency)],
                cwd=folder, stdout=subprocess.DEVNULL, stderr=err)
            wall = time.monotonic() - t0
        if rc != 0:
            die("stepq work exited %d (see %s/work.log)" % (rc, folder))
        stop_mock(mock)
        mock = None

        log = read_jsonl(os.path.join(folder, "mock.log"))
        ok = [e for e in log if e.get("status") == 200]
        r429 = [e for e in log if e.get("status") == 429]
        if not ok:
            die("no request succeeded; folder %s" % folder)
        t_first = log[0]["ts_ms"]
        t_last = ok[-1]["ts_ms"]
        limit = sum(rpms)
        k = (t_last - t_first) // win_ms
        if k >= 1:
            inside = sum(1 for e in ok if e["ts_ms"] < t_first + k * win_ms)
            goodput = inside / float(k * limit)
        else:
            goodput = float("nan")
        per_tier = collections.Counter(e["route"] for e in ok)
        per_tier_429 = collections.Counter(e["route"] for e in r429)
        st = json.loads(run_stepq(binary, folder, ["status", "--json"]))["jobs"]
        try:
            led = ledger(folder)
        except sqlite3.Error as e:
            led = {("?", str(e)): 0}
        led_429 = sum(n for (t, s), n in led.items() if s == 429)
        led_ok = sum(n for (t, s), n in led.items() if s == 200)
        attempts = read_jsonl(os.path.join(folder, "work.log"))
        decisions = collections.Counter(
            "%s/%s" % (x.get("status"), x.get("decision")) for x in attempts
            if "decision" in x)
        return {
            "goodput": goodput,
            "r429_per_ok": len(r429) / float(len(ok)),
            "ok": len(ok),
            "r429": len(r429),
            "other": len(log) - len(ok) - len(r429),
            "span_s": (t_last - t_first) / 1000.0,
            "ideal_s": ((a.jobs - 1) // limit) * a.window_s,
            "wall_s": wall,
            "rate": (len(ok) - 1) / ((t_last - t_first) / 1000.0),
            "span_eff": (((a.jobs - 1) // limit) * win_ms
                         / float(max(t_last - t_first, 1))),
            "per_tier": dict(per_tier),
            "per_tier_429": dict(per_tier_429),
            "ledger_ok": led_ok,
            "ledger_429": led_429,
            "states": {s: n for s, n in st.items() if n},
            "decisions": dict(decisions),
            "folder": folder,
        }
    finally:
        if mock is not None:
            stop_mock(mock)
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("STEPQ_BIN", DEFAULT_BIN))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--rpm", default="60,30",
                    help="requests per window for each tier (up to 8)")
    ap.add_argument("--window-s", type=float, default=6.0)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--dir", default=None, help="parent of the temp folders")
    ap.add_argument("--keep", action="store_true", help="keep the folders")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    rpms = [int(x) for x in a.rpm.split(",")]
    if not os.access(binary, os.X_OK):
        die("no stepq binary at %s (cmake --preset release && "
            "cmake --build --preset release)" % binary)
    if (a.runs < 1 or a.jobs < 2 or not 0 < len(rpms) <= len(TIERS)
            or min(rpms) < 1 or a.window_s * 1000 < 1):
        die("bad numbers")
    limit = sum(rpms)

    print("stepq: %s" % binary)
    print("machine: nproc %d, %s, %.1f GiB RAM, load %.2f %.2f %.2f"
          % ((os.cpu_count(), cpu_model(), mem_gib()) + os.getloadavg()))
    print("%d one-step jobs, tiers %s requests per %g s window "
          "(= %s per minute x %g), combined %d per window, --concurrency %d"
          % (a.jobs, "/".join(map(str, rpms)), a.window_s,
             "/".join("%g" % (r * 60 / a.window_s) for r in rpms),
             a.window_s / 60, limit, a.concurrency))
    sys.stdout.flush()
    rs = []
    for i in range(a.runs):
        r = one_run(a, binary, rpms, a.keep)
        rs.append(r)
        print("run %d: goodput %.3f, 429/success %.4f (%d ok, %d 429, %d "
              "other), span %.1f s (ideal %.1f), wall %.1f s, ok per tier %s, "
              "429 per tier %s, ledger %d ok %d 429, jobs %s, status/decision "
              "%s%s"
              % (i + 1, r["goodput"], r["r429_per_ok"], r["ok"], r["r429"],
                 r["other"], r["span_s"], r["ideal_s"], r["wall_s"],
                 r["per_tier"], r["per_tier_429"], r["ledger_ok"],
                 r["ledger_429"], r["states"], r["decisions"],
                 ", kept " + r["folder"] if a.keep else ""))
        sys.stdout.flush()
    med = {k: statistics.median(r[k] for r in rs)
           for k in ("goodput", "r429_per_ok", "span_s", "wall_s", "rate",
                     "span_eff")}
    print("%-34s %10s %8s" % ("median of %d runs" % a.runs, "value", "target"))
    print("%-34s %10.3f %8s" % ("goodput (fraction of limit)",
                                med["goodput"], ">= 0.95"))
    print("%-34s %10.4f %8s" % ("429s per success", med["r429_per_ok"],
                                "<= 0.01"))
    print("%-34s %10.2f %8.2f" % ("successes/s, first to last",
                                  med["rate"], limit / a.window_s))
    print("%-34s %10.1f %8.1f" % ("span s, first to last success",
                                  med["span_s"], rs[0]["ideal_s"]))
    print("%-34s %10.3f" % ("ideal span / span", med["span_eff"]))
    print("%-34s %10.1f" % ("wall s, stepq work --drain", med["wall_s"]))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/batch.py: what a tier in batch mode costs against the realtime
tier at the same model prices. Run on demand, never in tests. Standard
library only.

    python3 bench/batch.py [--jobs 1000] [--api openai,anthropic]
        [--delay-ms 2000] [--runs 3] [--json FILE|-]
        [--bin build/release/cli/stepq] [--dir /tmp] [--keep]

--jobs one-step replayable chat jobs (deadline 1 h), all enqueued at once,
one `stepq work --drain --concurrency 64`, against the mock, twice:

  realtime  tier "rt" alone, priced $0.15 in and $0.60 out a million
            tokens (a small model's list price)
  batch     tier "cheap" in batch mode first (the provider's batch API of
            --api, gather 2 s, at most 1,000 items a batch, polled every
            second, the mock ending each batch --delay-ms after its
            creation), "rt" behind it; the batch price is half the
            realtime one, as both providers bill a batch

Each run's cost is the report's (`report --json`: every attempt's cost,
from the usage its answer reported). Checked: every job succeeded, and
every step has its result in its own ledger row (the report's ok
attempts equal the jobs; in batch mode, the report's batch items too).
Prints one line per run and a table of medians.
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
from benchlib import (cpu_model, die, mem_gib, run_stepq,  # noqa: E402
                      start_mock, stop_mock, write_json)

PRICE = {"input_per_mtok": 0.15, "output_per_mtok": 0.60}
HALF = {k: v / 2 for k, v in PRICE.items()}


def job(i):
    return json.dumps({
        "name": "night-%d" % i,
        "deadline_s": 3600,
        "steps": [{
            "name": "summarize",
            "request": {"messages": [{"role": "user", "content":
                                      "Summarize change %d as JSON." % i}],
                        "max_tokens": 200}}]}, separators=(",", ":"))


def config(port, mode, api):
    rt = {"name": "rt", "model": "bench-model", "price": PRICE,
          "base_url": "http://127.0.0.1:%d/v1" % port}
    if mode == "realtime":
        return {"tiers": [rt]}
    cheap = {"name": "cheap", "model": "bench-model", "mode": "batch",
             "base_url": "http://127.0.0.1:%d/v1" % port, "price": HALF,
             "batch": {"api": api, "max_items": 1000, "gather_s": 2,
                       "poll_s": 1, "expect_s": 60}}
    return {"tiers": [cheap, rt]}


def run_one(a, mode, api):
    folder = tempfile.mkdtemp(prefix="bench-batch-", dir=a.dir)
    mock, port = start_mock(a.bin, folder,
                            {"batch": {"delay_ms": a.delay_ms}})
    try:
        with open(os.path.join(folder, "stepq.json"), "w") as f:
            json.dump(config(port, mode, api), f)
        run_stepq(a.bin, folder, ["init"])
        with open(os.path.join(folder, "jobs.jsonl"), "w") as f:
            for i in range(a.jobs):
                f.write(job(i) + "\n")
        run_stepq(a.bin, folder, ["enqueue", "jobs.jsonl"])
        t0 = time.monotonic()
        with open(os.path.join(folder, "work.log"), "wb") as log:
            rc = subprocess.call([a.bin, "work", "--drain", "--concurrency",
                                  "64"], cwd=folder,
                                 stdout=subprocess.DEVNULL, stderr=log)
        wall = time.monotonic() - t0
    finally:
        stop_mock(mock)
    if rc != 0:
        die("stepq work exited %d (see %s/work.log)" % (rc, folder))
    st = json.loads(run_stepq(a.bin, folder, ["status", "--json"]))["jobs"]
    rep = json.loads(run_stepq(a.bin, folder, ["report", "--json"]))
    ok = sum(t["ok"] for t in rep["tiers"])
    items = sum(b["items"] for b in rep.get("batches", []))
    saved = sum(b["saved_usd"] for b in rep.get("batches", []))
    if st.get("succeeded", 0) != a.jobs or ok != a.jobs:
        die("%s: %d of %d succeeded, %d ok attempts (see %s)" %
            (mode, st.get("succeeded", 0), a.jobs, ok, folder))
    if mode == "batch" and items != a.jobs:
        die("batch: %d batch items for %d jobs (see %s)" %
            (items, a.jobs, folder))
    if not a.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return {"mode": mode, "api": api if mode == "batch" else "-",
            "cost_usd": rep["cost_usd"], "ok_rows": ok, "items": items,
            "saved_usd": saved, "wall_s": wall}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--api", default="openai,anthropic")
    p.add_argument("--delay-ms", type=int, default=2000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--json")
    p.add_argument("--bin", default="build/release/cli/stepq")
    p.add_argument("--dir", default=None)
    p.add_argument("--keep", action="store_true")
    a = p.parse_args()
    a.api = [x for x in a.api.split(",") if x]
    for x in a.api:
        if x not in ("openai", "anthropic"):
            die("unknown api %s (openai, anthropic)" % x)
    if not os.access(a.bin, os.X_OK):
        die("no binary at %s (cmake --workflow --preset release)" % a.bin)
    a.bin = os.path.abspath(a.bin)
    return a


def median_of(runs):
    med = dict(runs[0])
    for k in ("cost_usd", "wall_s", "saved_usd"):
        med[k] = statistics.median(r[k] for r in runs)
    return med


def main():
    a = parse_args()
    print("# %s, %.1f GiB, %d CPUs; %d jobs, batch delay %d ms" %
          (cpu_model(), mem_gib(), os.cpu_count(), a.jobs, a.delay_ms))
    rows = []
    for mode, api in [("realtime", "-")] + [("batch", x) for x in a.api]:
        runs = [run_one(a, mode, api) for _ in range(a.runs)]
        for r in runs:
            print("%-8s %-9s cost $%.6f, %d ok rows, %d items, %.1f s" %
                  (r["mode"], r["api"], r["cost_usd"], r["ok_rows"],
                   r["items"], r["wall_s"]), flush=True)
        rows.append(median_of(runs))
    base = rows[0]["cost_usd"]
    print("\n| mode | api | cost (USD) | × realtime | report: saved | "
          "ledger rows ok | wall s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        r["vs_realtime"] = r["cost_usd"] / base if base else None
        print("| %s | %s | %.6f | %.3f | %.6f | %d | %.1f |" %
              (r["mode"], r["api"], r["cost_usd"], r["vs_realtime"],
               r["saved_usd"], r["ok_rows"], r["wall_s"]))
    if a.json:
        write_json(a.json, rows)


if __name__ == "__main__":
    main()

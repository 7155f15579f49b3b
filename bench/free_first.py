#!/usr/bin/env python3
"""bench/free_first.py: does work the free tier can finish before its
deadline stay off the paid tier? Run on demand, never in tests. Standard
library only.

    python3 bench/free_first.py [--cases long,short] [--combos 16x1,64x1,16x2,64x2]
        [--spill deadline,now] [--jobs 240] [--rpm 120] [--runs 1]
        [--json FILE|-] [--bin build/release/cli/stepq] [--dir /tmp]

The most common config of a user of free tiers: tier "free" first, a
token bucket of --rpm requests a minute declared in the config (`rpm`),
and tier "paid" behind it with no limit. The mock models the free tier as
providers document it: a token bucket of --rpm a minute holding one
second's worth (`limit.shape: token_bucket`, OpenAI's headers), the paid
one answers everything. --jobs one-step replayable chat jobs, all enqueued
at once, each with the case's deadline; `stepq work --drain --concurrency
C` in W processes on one SQLite file (--combos CxW).

  long    deadline 600 s: the free tier alone finishes every job in about
          jobs / (rpm / 60) s, so the least paid share is 0
  short   deadline 60 s: the free tier can serve rpm + burst requests
          before the deadline; the least paid share that meets every
          deadline is (jobs - that) / jobs
  budget  the short case with the paid tier priced at $0.01 a request and
          a budget (per day, over the paid tier) of half that overflow:
          spend <= the budget exactly, the rest parked with reason budget

--spill runs each case with the free tier's `spill` set to each value:
`deadline` (the default since 2026-12-06) and `now` (the first tier that
admits now: what stepq did before). Counted from the mock's request log
(successes per route) and the jobs' states (a failed job missed its
deadline). Prints one line per run and a table of medians.
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
from benchlib import (cpu_model, die, mem_gib, read_jsonl,  # noqa: E402
                      run_stepq, start_mock, stop_mock, write_json)

CASES = {"long": 600, "short": 60, "budget": 60}
# The budget case: the short case with the paid tier at $0.01 a request
# (no token price, so what a send may cost is what it costs) and a budget
# of half the overflow the least paid share leaves to it.
PER_REQUEST_USD = 0.01


def job(i, deadline_s):
    return json.dumps({
        "name": "night-%d" % i,
        "deadline_s": deadline_s,
        "steps": [{
            "name": "summarize",
            "request": {"messages": [{"role": "user", "content":
                                      "Summarize change %d as JSON." % i}],
                        "max_tokens": 200},
            "expect_json": ["summary"]}]}, separators=(",", ":"))


def least_paid(jobs, rpm, deadline_s):
    """The least paid share that meets every deadline: the free tier serves
    rpm/60 a second, plus the one second's worth its bucket holds."""
    burst = max(1, rpm // 60)
    free_cap = int(rpm / 60.0 * deadline_s) + burst
    return max(0, jobs - free_cap) / float(jobs)


def run_one(a, case, spill, conc, workers):
    deadline_s = CASES[case]
    folder = tempfile.mkdtemp(prefix="bench-free-first-", dir=a.dir)
    script = {"routes": [
        {"path": "/free", "limit": {"shape": "token_bucket", "rpm": a.rpm}},
        {"path": "/paid"}]}
    mock, port = start_mock(a.bin, folder, script)
    procs, logs = [], []
    try:
        tiers = []
        for name in ("free", "paid"):
            t = {"name": name, "model": "bench-model",
                 "base_url": "http://127.0.0.1:%d/%s/v1" % (port, name)}
            if name == "free":
                t["rpm"] = a.rpm
                t["spill"] = spill
            tiers.append(t)
        cfg = {"tiers": tiers}
        budget_usd = None
        if case == "budget":
            tiers[1]["price"] = {"per_request": PER_REQUEST_USD}
            overflow = round(least_paid(a.jobs, a.rpm, deadline_s) * a.jobs)
            budget_usd = round(overflow // 2 * PER_REQUEST_USD, 2)
            cfg["budgets"] = [{"name": "paid-daily", "usd": budget_usd,
                               "per": "day", "tiers": ["paid"]}]
        with open(os.path.join(folder, "stepq.json"), "w") as f:
            json.dump(cfg, f)
        run_stepq(a.bin, folder, ["init"])
        with open(os.path.join(folder, "jobs.jsonl"), "w") as f:
            for i in range(a.jobs):
                f.write(job(i, deadline_s) + "\n")
        run_stepq(a.bin, folder, ["enqueue", "jobs.jsonl"])
        t0 = time.monotonic()
        for i in range(workers):
            logs.append(open(os.path.join(folder, "work-%d.log" % i), "wb"))
            procs.append(subprocess.Popen(
                [a.bin, "work", "--drain", "--concurrency", str(conc)],
                cwd=folder, stdout=subprocess.DEVNULL, stderr=logs[-1]))
        for p in procs:
            p.wait(timeout=deadline_s + 120)
        wall = time.monotonic() - t0
        rcs = [p.returncode for p in procs]
        procs = []
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for f in logs:
            f.close()
        stop_mock(mock)
    if any(rc != 0 for rc in rcs):
        die("stepq work exited %s (see %s/work-*.log)" % (rcs, folder))
    ok = {"/free": 0, "/paid": 0}
    r429 = 0
    for e in read_jsonl(os.path.join(folder, "mock.log")):
        if e.get("status") == 200 and e.get("route") in ok:
            ok[e["route"]] += 1
        elif e.get("status") == 429:
            r429 += 1
    st = json.loads(run_stepq(a.bin, folder, ["status", "--json"]))["jobs"]
    spent, parked_budget = None, 0
    if case == "budget":
        rep = json.loads(run_stepq(a.bin, folder, ["report", "--json"]))
        spent = sum(b["spent_usd"] + b["reserved_usd"]
                    for b in rep["budgets"])
        items = json.loads(run_stepq(a.bin, folder,
                                     ["park", "list", "--json"]))
        parked_budget = sum(1 for i in items if i["reason"] == "budget")
    if not a.keep:
        shutil.rmtree(folder, ignore_errors=True)
    least = least_paid(a.jobs, a.rpm, deadline_s)
    share = ok["/paid"] / float(a.jobs)
    return {"case": case, "spill": spill, "conc": conc, "workers": workers,
            "free": ok["/free"], "paid": ok["/paid"], "r429": r429,
            "succeeded": st.get("succeeded", 0),
            "missed": st.get("failed", 0), "paid_share": share,
            "least_share": least, "budget_usd": budget_usd,
            "spent_usd": spent, "parked_budget": parked_budget,
            "vs_least": (share / least) if least > 0 else None,
            "wall_s": wall}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default="long,short")
    p.add_argument("--combos", default="16x1,64x1,16x2,64x2")
    p.add_argument("--spill", default="deadline,now")
    p.add_argument("--jobs", type=int, default=240)
    p.add_argument("--rpm", type=int, default=120)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--json")
    p.add_argument("--bin", default="build/release/cli/stepq")
    p.add_argument("--dir", default=None)
    p.add_argument("--keep", action="store_true")
    a = p.parse_args()
    a.cases = [c for c in a.cases.split(",") if c]
    for c in a.cases:
        if c not in CASES:
            die("unknown case %s (long, short, budget)" % c)
    a.combos = [tuple(int(x) for x in c.split("x"))
                for c in a.combos.split(",") if c]
    a.spill = [s for s in a.spill.split(",") if s]
    if not os.access(a.bin, os.X_OK):
        die("no binary at %s (cmake --workflow --preset release)" % a.bin)
    a.bin = os.path.abspath(a.bin)
    return a


def main():
    a = parse_args()
    print("# %s, %.1f GiB, %d CPUs; %d jobs, free %d rpm" %
          (cpu_model(), mem_gib(), os.cpu_count(), a.jobs, a.rpm))
    rows = []
    for case in a.cases:
        for spill in a.spill:
            for conc, workers in a.combos:
                runs = [run_one(a, case, spill, conc, workers)
                        for _ in range(a.runs)]
                for r in runs:
                    print("%-5s spill %-8s %3dx%d: free %3d paid %3d 429s %d "
                          "missed %d paid share %.3f (least %.3f) %.1f s" %
                          (case, spill, conc, workers, r["free"], r["paid"],
                           r["r429"], r["missed"], r["paid_share"],
                           r["least_share"], r["wall_s"]), flush=True)
                    if r["budget_usd"] is not None:
                        print("      budget $%.2f: spent $%.2f, %d parked "
                              "with reason budget" %
                              (r["budget_usd"], r["spent_usd"],
                               r["parked_budget"]), flush=True)
                med = dict(runs[0])
                for k in ("free", "paid", "missed", "paid_share", "wall_s",
                          "r429"):
                    med[k] = statistics.median(r[k] for r in runs)
                if med["least_share"] > 0:
                    med["vs_least"] = med["paid_share"] / med["least_share"]
                rows.append(med)
    print("\n| case | spill | conc × workers | free | paid | missed | paid "
          "share | least | × least | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s (deadline %d s) | %s | %d×%d | %d | %d | %d | %.3f | "
              "%.3f | %s | %.1f |" %
              (r["case"], CASES[r["case"]], r["spill"], r["conc"],
               r["workers"], r["free"], r["paid"], r["missed"],
               r["paid_share"], r["least_share"],
               "%.2f" % r["vs_least"] if r["vs_least"] else "-", r["wall_s"]))
    if a.json:
        write_json(a.json, rows)


if __name__ == "__main__":
    main()

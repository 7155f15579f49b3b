#!/usr/bin/env python3
"""bench/quota.py: how much of two rate-limited tiers `stepq work` turns into
finished jobs, against a mock that limits the way providers document it,
side by side with a plain retry loop in the same run. Run on
demand, never in tests. Standard library only.

    python3 bench/quota.py [--cases all|NAME,...] [--combos 64x1,256x2]
        [--jobs 400] [--window-jobs 1000] [--runs 1]
        [--clients stepq,baseline]
        [--json FILE|-] [--bin build/release/cli/stepq] [--dir /tmp]
        [--timeout 300] [--keep]

Real time, no scaled windows. Two mock routes /a and /b (tiers a and b) at
600 and 300 requests per minute: combined limit L = 15 requests/s. Every
case uses the same stepq config shape (tiers a then b, "rpm" as the case
says, "spill": "now" so that b serves whatever a does not admit at once,
nothing else) and a fresh mock, folder and database:

  right-bucket   rpm declared right; the mock is a token bucket holding one
                 second's worth (10 and 5), refilled continuously
  right-fixed    rpm declared right; fixed window per minute (resets at :00),
                 --window-jobs jobs (default 1000: a minute admits 900, so
                 with fewer jobs a window never refuses anything)
  right-sliding  rpm declared right; sliding window of a minute, likewise
  undeclared     no rpm in the config (stepq must learn from headers and
                 429s); token bucket
  high           rpm declared 2x too high (1200 and 600); token bucket
  undeclared-silent
                 no rpm in the config and no rate-limit headers (the mock's
                 headers "none", as many free tiers: Gemini, some OpenRouter
                 models): a 429 says only its wait, in the error's text
                 ("Please try again in 120ms."); stepq must learn the rate
                 from its 429s; token bucket
  wall           tier a a quota wall (every request 429 insufficient_quota),
                 b a token bucket, 200 jobs: counts the requests that
                 reached a
  storm          tier a answers 503 for 30 s from its first request, b a
                 token bucket, 300 jobs arriving at 10/s (enqueued over time
                 while one `stepq work` runs): counts the requests answered
                 by the storm

--combos lists CONCURRENCYxWORKERS: WORKERS `stepq work --drain
--concurrency CONCURRENCY` processes on one database (each with that
concurrency). The token-bucket rate cases (right-bucket, undeclared, high,
undeclared-silent) run every combo; the others run the first combo only
(storm always with one worker), which keeps the default matrix near 14
minutes. The baseline runs at the first combo's concurrency, on
right-bucket, right-fixed, right-sliding, wall and storm (undeclared,
undeclared-silent and high would be the same run as right-bucket: it reads
no config). The baseline (bench/baseline.py): threads, on 429 sleep
Retry-After then resend, after 3 failures the next tier.

Everything is counted from the mock's request log (one line per request:
route, status, kind, ts_ms when the answer was decided):

  goodput    (successes - B) / (span * L), span = first request to last
             success (s), B = L * 1 s = 15: the burst a client may send at
             once into buckets that hold one second's worth. A client that
             starts with a full second's burst and then keeps both tiers
             exactly at their rate scores 1.0. The window shapes admit a
             whole minute (900) at once, so a client that bursts can score
             above 1 there (up to a minute's worth early); a pacing client
             scores 1.0 and shows whether it loses anything at the window
             edges. n/a when the span is under 1 s.
  429/ok     429s from the limiters divided by successes
  a, b       requests and 429s per tier (route)
  wall/storm requests that reached the wall (all requests to /a: the wall
             route has no limiter in front), or that the storm answered (/a
             answers with kind "storm")

Output: one line per run as it ends, then a table of medians over --runs
(case, client, CxW, ok/jobs, span s, goodput, 429/ok, a req/429, b req/429,
wall/storm hits, wall s) with the issue's targets; --json FILE (or - for
stdout) also writes every run and the medians as JSON. The load average is
printed before and after each run.

Build first: cmake --preset release && cmake --build --preset release
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline  # noqa: E402
from benchlib import (cpu_model, die, job_text, mem_gib,  # noqa: E402
                      read_jsonl, run_stepq, start_mock, stop_mock)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BIN = os.path.join(HERE, "..", "build", "release", "cli", "stepq")

JOB = job_text("bench-quota")
RPM = (("a", 600), ("b", 300))
LIMIT_PER_S = sum(r for _, r in RPM) / 60.0
BURST = LIMIT_PER_S * 1.0
WALL_BODY = {"error": {"message": "You exceeded your current quota, please "
                       "check your plan and billing details.",
                       "type": "insufficient_quota", "param": None,
                       "code": "insufficient_quota"}}

CASES = {
    "right-bucket": {"shape": "token_bucket", "declare": 1.0},
    "right-fixed": {"shape": "fixed_window", "declare": 1.0,
                    "window": True},
    "right-sliding": {"shape": "sliding_window", "declare": 1.0,
                      "window": True},
    "undeclared": {"shape": "token_bucket", "declare": None},
    "high": {"shape": "token_bucket", "declare": 2.0},
    "undeclared-silent": {"shape": "token_bucket", "declare": None,
                          "headers": "none"},
    "wall": {"shape": "token_bucket", "declare": 1.0, "special": "wall",
             "jobs": 200},
    "storm": {"shape": "token_bucket", "declare": 1.0, "special": "storm",
              "jobs": 300, "arrival": 10.0},
}
TARGETS = {
    "right-bucket": "goodput >= 0.95, 429/ok <= 0.01",
    "right-fixed": "goodput >= 0.95, 429/ok <= 0.01",
    "right-sliding": "goodput >= 0.95, 429/ok <= 0.01",
    "undeclared": "goodput >= 0.85, 429/ok <= 0.05",
    "high": "goodput >= 0.85, 429/ok <= 0.05",
    "undeclared-silent": "goodput >= 0.85, 429/ok <= 0.05",
    "wall": "requests into the wall: 1",
    "storm": "into the storm <= breaker failures + one probe per cooldown",
}
BASELINE_CASES = ("right-bucket", "right-fixed", "right-sliding", "wall",
                  "storm")


def mock_script(case):
    c = CASES[case]
    routes = [{"path": "/" + n, "limit": {"shape": c["shape"], "rpm": r}}
              for n, r in RPM]
    if "headers" in c:
        for rt in routes:
            rt["limit"]["headers"] = c["headers"]
    if c.get("special") == "wall":
        # Every request meets the wall: no limiter in front of it.
        del routes[0]["limit"]
        routes[0]["answers"] = [{"status": 429, "body": WALL_BODY}]
        routes[0]["loop"] = True
    elif c.get("special") == "storm":
        routes[0]["storm"] = {"status": 503, "seconds": 30, "after": 0}
    return {"routes": routes}


def stepq_config(case, port):
    tiers = []
    for n, r in RPM:
        # spill "now": a step goes to b whenever a does not admit it now.
        # This measures how much of both tiers' quota is used; by default
        # (spill "deadline", since 2026-12-06) a step waits for the tier it
        # prefers while its deadline allows, and b would serve nothing.
        t = {"name": n, "base_url": "http://127.0.0.1:%d/%s/v1" % (port, n),
             "model": "bench-model", "timeout_s": 60, "spill": "now"}
        if CASES[case]["declare"] is not None:
            t["rpm"] = int(r * CASES[case]["declare"])
        tiers.append(t)
    return {"tiers": tiers}


def analyse(log):
    """Counts the mock's request log (see the module docstring)."""
    routes = {"/" + n: {"req": 0, "ok": 0, "r429": 0, "other": 0,
                        "storm": 0} for n, _ in RPM}
    t_first, t_last_ok = None, None
    for e in log:
        r = routes.setdefault(e.get("route") or "?",
                              {"req": 0, "ok": 0, "r429": 0, "other": 0,
                               "storm": 0})
        r["req"] += 1
        ts = e["ts_ms"]
        t_first = ts if t_first is None else min(t_first, ts)
        if e.get("status") == 200:
            r["ok"] += 1
            t_last_ok = ts if t_last_ok is None else max(t_last_ok, ts)
        elif e.get("status") == 429 and e.get("kind") == "rate_limit":
            r["r429"] += 1
        else:
            r["other"] += 1
        if e.get("kind") == "storm":
            r["storm"] += 1
    ok = sum(r["ok"] for r in routes.values())
    r429 = sum(r["r429"] for r in routes.values())
    span = (t_last_ok - t_first) / 1000.0 if ok else 0.0
    goodput = ((ok - BURST) / (span * LIMIT_PER_S) if span >= 1.0
               else float("nan"))
    return {"ok": ok, "r429": r429, "span_s": span, "goodput": goodput,
            "r429_per_ok": r429 / float(ok) if ok else float("nan"),
            "a_req": routes["/a"]["req"], "a_429": routes["/a"]["r429"],
            "b_req": routes["/b"]["req"], "b_429": routes["/b"]["r429"],
            "a_storm": routes["/a"]["storm"], "routes": routes}


def job_states(binary, folder):
    st = json.loads(run_stepq(binary, folder, ["status", "--json"]))["jobs"]
    return {s: n for s, n in st.items() if n}


def terminal(states):
    return sum(states.get(s, 0)
               for s in ("succeeded", "failed", "parked", "cancelled"))


def enqueue_over_time(binary, folder, jobs, per_s, errors):
    t0 = time.monotonic()
    for i in range(jobs):
        delay = t0 + i / per_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        r = subprocess.run([binary, "enqueue", "-"], cwd=folder,
                           input=(JOB + "\n").encode(),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode != 0:
            errors.append(r.stderr.decode(errors="replace"))
            return


def case_jobs(a, case):
    c = CASES[case]
    return a.window_jobs if c.get("window") else c.get("jobs", a.jobs)


def run_stepq_case(a, binary, case, conc, workers, folder):
    c = CASES[case]
    jobs = case_jobs(a, case)
    mock, port = start_mock(binary, folder, mock_script(case))
    procs, logs, errors = [], [], []
    timed_out = False
    try:
        with open(os.path.join(folder, "stepq.json"), "w") as f:
            json.dump(stepq_config(case, port), f)
        run_stepq(binary, folder, ["init"])
        arrival = c.get("arrival")
        args = [binary, "work", "--concurrency", str(conc)]
        if arrival is None:
            with open(os.path.join(folder, "jobs.jsonl"), "w") as f:
                f.write((JOB + "\n") * jobs)
            run_stepq(binary, folder, ["enqueue", "jobs.jsonl"])
            args.append("--drain")
        t0 = time.monotonic()
        for i in range(workers):
            logs.append(open(os.path.join(folder, "work-%d.log" % i), "wb"))
            procs.append(subprocess.Popen(args, cwd=folder,
                                          stdout=subprocess.DEVNULL,
                                          stderr=logs[-1]))
        deadline = t0 + a.timeout
        if arrival is not None:
            # `work --drain` would exit in a gap between arrivals: run a
            # plain worker and stop it (SIGTERM) once every job has ended.
            feeder = threading.Thread(
                target=enqueue_over_time,
                args=(binary, folder, jobs, arrival, errors), daemon=True)
            feeder.start()
            while time.monotonic() < deadline and not errors:
                time.sleep(0.5)
                if (not feeder.is_alive()
                        and terminal(job_states(binary, folder)) >= jobs):
                    break
            for p in procs:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                p.kill()
                p.wait()
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
    if errors:
        die("enqueue failed: %s" % errors[0])
    if any(rc != 0 for rc in rcs) and not timed_out:
        die("stepq work exited %s (see %s/work-*.log)" % (rcs, folder))
    r = analyse(read_jsonl(os.path.join(folder, "mock.log")))
    r.update({"jobs": jobs, "wall_s": wall, "timed_out": timed_out,
              "states": job_states(binary, folder)})
    return r


def run_baseline_case(a, binary, case, conc, folder):
    c = CASES[case]
    jobs = case_jobs(a, case)
    mock, port = start_mock(binary, folder, mock_script(case))
    try:
        res = baseline.run(port, [(n, "/%s/v1/chat/completions" % n)
                                  for n, _ in RPM], JOB, jobs, conc,
                           arrival_per_s=c.get("arrival"),
                           deadline_s=a.timeout)
    finally:
        stop_mock(mock)
    r = analyse(read_jsonl(os.path.join(folder, "mock.log")))
    r.update({"jobs": jobs, "wall_s": res["wall_s"],
              "timed_out": res["ok"] + res["failed"] < jobs,
              "states": {k: v for k, v in (("succeeded", res["ok"]),
                                           ("failed", res["failed"])) if v}})
    return r


def one(a, binary, case, client, conc, workers):
    folder = tempfile.mkdtemp(prefix="bench-quota-%s-" % case, dir=a.dir)
    load0 = os.getloadavg()[0]
    try:
        if client == "stepq":
            r = run_stepq_case(a, binary, case, conc, workers, folder)
        else:
            r = run_baseline_case(a, binary, case, conc, folder)
    finally:
        if not a.keep:
            shutil.rmtree(folder, ignore_errors=True)
    r["load"] = [load0, os.getloadavg()[0]]
    if a.keep:
        r["folder"] = folder
    return r


def fmt(v, spec):
    if isinstance(v, float) and v != v:
        return "n/a"
    return spec % v


def hits(case, r):
    if case == "wall":
        return "%d" % r["a_req"]
    if case == "storm":
        return "%d" % r["a_storm"]
    return "-"


def run_line(case, client, conc, workers, r):
    return ("%-17s %-8s %4dx%d  ok %d/%d  span %.1f s  goodput %s  429/ok %s"
            "  a %d/%d  b %d/%d  hits %s  wall %.1f s  jobs %s  load %.2f->"
            "%.2f%s" % (case, client, conc, workers, r["ok"], r["jobs"],
                        r["span_s"], fmt(r["goodput"], "%.3f"),
                        fmt(r["r429_per_ok"], "%.3f"), r["a_req"], r["a_429"],
                        r["b_req"], r["b_429"], hits(case, r), r["wall_s"],
                        r["states"], r["load"][0], r["load"][1],
                        "  TIMED OUT" if r["timed_out"] else ""))


def median(rs, key):
    vals = [r[key] for r in rs if not (isinstance(r[key], float)
                                       and r[key] != r[key])]
    return statistics.median(vals) if vals else float("nan")


def plan(a):
    combos = a.combos
    out = []
    for case in a.cases:
        special = CASES[case].get("special")
        if "stepq" in a.clients:
            if special is None and not CASES[case].get("window"):
                out += [(case, "stepq", cw[0], cw[1]) for cw in combos]
            else:
                out.append((case, "stepq", combos[0][0],
                            1 if special == "storm" else combos[0][1]))
        if "baseline" in a.clients and case in BASELINE_CASES:
            out.append((case, "baseline", combos[0][0], 1))
    return out


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("STEPQ_BIN", DEFAULT_BIN))
    ap.add_argument("--cases", default="all",
                    help="all, or a comma list of: " + ", ".join(CASES))
    ap.add_argument("--combos", default="64x1,256x2",
                    help="CONCURRENCYxWORKERS list (default 64x1,256x2)")
    ap.add_argument("--jobs", type=int, default=400,
                    help="jobs of the token-bucket rate cases (wall 200, "
                    "storm 300)")
    ap.add_argument("--window-jobs", type=int, default=1000,
                    help="jobs of right-fixed and right-sliding (more than "
                    "the 900 a minute window admits, so the window bites)")
    ap.add_argument("--runs", type=int, default=1,
                    help="runs of each line; the table shows medians")
    ap.add_argument("--clients", default="stepq,baseline")
    ap.add_argument("--timeout", type=float, default=300,
                    help="seconds one run may take before it is killed")
    ap.add_argument("--json", default=None, help="write results here (- for "
                    "stdout)")
    ap.add_argument("--dir", default=None, help="parent of the temp folders")
    ap.add_argument("--keep", action="store_true", help="keep the folders")
    a = ap.parse_args()
    a.cases = list(CASES) if a.cases == "all" else a.cases.split(",")
    for c in a.cases:
        if c not in CASES:
            die("unknown case %r (one of %s)" % (c, ", ".join(CASES)))
    try:
        a.combos = [tuple(int(x) for x in cw.split("x"))
                    for cw in a.combos.split(",")]
    except ValueError:
        die("--combos: want CONCURRENCYxWORKERS,... such as 64x1,256x2")
    if any(len(cw) != 2 or cw[0] < 1 or cw[1] < 1 for cw in a.combos):
        die("--combos: want CONCURRENCYxWORKERS,... such as 64x1,256x2")
    a.clients = a.clients.split(",")
    if not set(a.clients) <= {"stepq", "baseline"} or not a.clients:
        die("--clients: stepq, baseline or both")
    if a.runs < 1 or a.jobs < 16 or a.window_jobs < 16 or a.timeout < 10:
        die("bad numbers (--runs >= 1, --jobs and --window-jobs >= 16, "
            "--timeout >= 10)")
    return a


def main():
    a = parse_args()
    binary = os.path.abspath(a.bin)
    if not os.access(binary, os.X_OK):
        die("no stepq binary at %s (cmake --preset release && "
            "cmake --build --preset release)" % binary)
    out = sys.stderr if a.json == "-" else sys.stdout
    head = ("machine: nproc %d, %s, %.1f GiB RAM, load %.2f %.2f %.2f"
            % ((os.cpu_count(), cpu_model(), mem_gib()) + os.getloadavg()))
    print("stepq: %s" % binary, file=out)
    print(head, file=out)
    print("tiers a/b %d/%d rpm (L = %g/s), goodput = (ok - %g) / (span * L)"
          % (RPM[0][1], RPM[1][1], LIMIT_PER_S, BURST), file=out)
    out.flush()
    rows = []
    for case, client, conc, workers in plan(a):
        rs = []
        for _ in range(a.runs):
            r = one(a, binary, case, client, conc, workers)
            rs.append(r)
            print(run_line(case, client, conc, workers, r), file=out)
            out.flush()
        med = {k: median(rs, k) for k in
               ("ok", "span_s", "goodput", "r429_per_ok", "a_req", "a_429",
                "b_req", "b_429", "a_storm", "wall_s")}
        rows.append({"case": case, "client": client, "concurrency": conc,
                     "workers": workers, "jobs": rs[0]["jobs"],
                     "median": med, "runs": rs})
    print("", file=out)
    print("median of %d run(s)" % a.runs, file=out)
    print("%-17s %-8s %6s %8s %7s %7s %7s %10s %10s %6s %7s  %s"
          % ("case", "client", "CxW", "ok/jobs", "span s", "goodput",
             "429/ok", "a req/429", "b req/429", "hits", "wall s", "target"),
          file=out)
    for row in rows:
        m = row["median"]
        h = ("%d" % m["a_req"] if row["case"] == "wall" else
             "%d" % m["a_storm"] if row["case"] == "storm" else "-")
        print("%-17s %-8s %6s %8s %7.1f %7s %7s %10s %10s %6s %7.1f  %s"
              % (row["case"], row["client"],
                 "%dx%d" % (row["concurrency"], row["workers"]),
                 "%d/%d" % (m["ok"], row["jobs"]), m["span_s"],
                 fmt(m["goodput"], "%.3f"), fmt(m["r429_per_ok"], "%.3f"),
                 "%d/%d" % (m["a_req"], m["a_429"]),
                 "%d/%d" % (m["b_req"], m["b_429"]), h, m["wall_s"],
                 TARGETS[row["case"]] if row["client"] == "stepq" else ""),
              file=out)
    out.flush()
    if a.json is not None:
        doc = {"stepq": binary, "machine": head, "limit_per_s": LIMIT_PER_S,
               "burst": BURST, "rows": rows}
        if a.json == "-":
            json.dump(doc, sys.stdout, indent=1)
            print()
        else:
            with open(a.json, "w") as f:
                json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()

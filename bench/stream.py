#!/usr/bin/env python3
"""bench/stream.py: streamed answers, stepq against the openai SDK, run on
demand (never in tests).

    python3 bench/stream.py [--runs 3] [--calls 2000] [--concurrency 64]
        [--bytes 4000] [--bin build/release/cli/stepq] [--dir /tmp]
        [--stall-cap 30]

1. CPU per answer. Each of --runs rounds runs, each against a fresh
   `stepq mock` whose answer is a JSON object of --bytes bytes of text
   (the mock streams 8 bytes a delta: 4,000 bytes are 500 events, the
   size of a 500-token answer sent a token or two an event):
     - stepq: --calls one-step chat jobs (expect_json, the ledger, the
       commit) drained by `stepq work --concurrency C`, the tier plain,
       then with "stream": true and the stall watch on
       (first_byte_timeout_s 10, idle_timeout_s 5);
     - the SDK (bench/peers/openai, `npm ci` there first): the same calls
       at the same concurrency, plain, then streamed (its deltas joined
       and parsed, as expect_json does).
   Reported: medians of CPU us a call (stepq: user + system of the worker;
   the SDK: of node from its first send), wall calls/s, and stepq's share
   of the SDK's CPU.
2. A stall. One call whose answer stalls half-way with the connection
   open (the mock's "stall") and one whose answer never starts ("hang"):
   when stepq's attempt ends (idle_timeout_s 2, first_byte_timeout_s 2,
   timeout_s 20) and when the SDK's call ends (timeout 20 s, which runs
   until the answer's headers only); the SDK is given --stall-cap seconds.

Only the Python standard library is needed (and node).
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
                      run_stepq, start_mock, stop_mock)
from worker import timed_work  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BIN = os.path.join(HERE, "..", "build", "release", "cli", "stepq")
SDK = os.path.join(HERE, "peers", "openai", "bench.js")


def content(nbytes):
    """A JSON object of about nbytes bytes: what expect_json reads."""
    words = ("merged pull request fixes the flaky test of the queue "
             "and the docs of the tiers ")
    text = (words * (nbytes // len(words) + 1))[:max(nbytes - 16, 1)]
    return {"summary": text}


def job(i):
    return json.dumps({
        "name": "s%d" % i,
        "steps": [{
            "name": "summarize",
            "request": {"messages": [{
                "role": "user",
                "content": "Summarize the merged pull requests of the night "
                           "as JSON."}], "max_tokens": 800},
            "expect_json": ["summary"]}]}, separators=(",", ":"))


def stepq_run(binary, base, script, conc, n, tier_extra):
    """n jobs drained at conc against a fresh mock of script; returns
    (the figures, the folder's first attempt as `jobs show` has it)."""
    folder = tempfile.mkdtemp(prefix="bench-stream-", dir=base)
    mock = None
    try:
        mock, port = start_mock(binary, folder, script)
        tier = {"name": "mock", "base_url": "http://127.0.0.1:%d/v1" % port,
                "model": "bench-model", "timeout_s": 20}
        tier.update(tier_extra)
        with open(os.path.join(folder, "stepq.json"), "w") as f:
            json.dump({"tiers": [tier],
                       "policy": {"backoff_base_s": 0.05,
                                  "backoff_cap_s": 0.2}}, f)
        with open(os.path.join(folder, "jobs.jsonl"), "w") as f:
            f.write("".join(job(i) + "\n" for i in range(n)))
        run_stepq(binary, folder, ["init"])
        run_stepq(binary, folder, ["enqueue", "jobs.jsonl"])
        wall, cpu, _ = timed_work(binary, folder, conc, [])
        stop_mock(mock)
        mock = None
        st = json.loads(run_stepq(binary, folder, ["status", "--json"]))
        if st["jobs"]["succeeded"] != n:
            die("stepq: %d of %d jobs succeeded; folder %s"
                % (st["jobs"]["succeeded"], n, folder))
        shown = json.loads(run_stepq(binary, folder,
                                     ["jobs", "show", "1", "--json"]))
        log = read_jsonl(os.path.join(folder, "mock.log"))
        return ({"cpu_us": cpu * 1e6 / n, "wall": n / wall,
                 "requests": len(log)}, shown)
    finally:
        if mock is not None:
            stop_mock(mock)
        shutil.rmtree(folder, ignore_errors=True)


def sdk_run(binary, base, script, conc, n, streamed, cap=None):
    """The SDK making n calls at conc against a fresh mock of script;
    returns its JSON line, or None when it ran past cap seconds."""
    folder = tempfile.mkdtemp(prefix="bench-stream-sdk-", dir=base)
    mock = None
    try:
        mock, port = start_mock(binary, folder, script)
        args = ["node", SDK, "--base-url", "http://127.0.0.1:%d/v1" % port,
                "--calls", str(n), "--concurrency", str(conc),
                "--timeout", "20000"] + (["--stream"] if streamed else [])
        try:
            out = subprocess.run(args, check=True, capture_output=True,
                                 text=True, timeout=cap).stdout
        except subprocess.TimeoutExpired:
            return None
        return json.loads(out)
    finally:
        if mock is not None:
            stop_mock(mock)
        shutil.rmtree(folder, ignore_errors=True)


def cpu_rows(a, binary):
    script = {"content": content(a.bytes), "completion_tokens": 500}
    names = ["stepq plain", "stepq streamed", "SDK plain", "SDK streamed"]
    got = {k: [] for k in names}
    loads = []
    watch = {"stream": True, "first_byte_timeout_s": 10,
             "idle_timeout_s": 5}
    for _ in range(a.runs):
        for k, extra in (("stepq plain", {}), ("stepq streamed", watch)):
            r, _ = stepq_run(binary, a.dir, script, a.concurrency, a.calls,
                             extra)
            if r["requests"] != a.calls:
                die("%s: the mock saw %d requests" % (k, r["requests"]))
            got[k].append(r)
            loads.append(os.getloadavg()[0])
        for k, streamed in (("SDK plain", False), ("SDK streamed", True)):
            r = sdk_run(binary, a.dir, script, a.concurrency, a.calls,
                        streamed)
            if r["ok"] != a.calls:
                die("%s: %d of %d calls succeeded: %s"
                    % (k, r["ok"], a.calls, r["errors"]))
            got[k].append({"cpu_us": r["cpu_us"],
                           "wall": a.calls / r["wall_s"]})
            loads.append(os.getloadavg()[0])
    med = {k: {f: statistics.median(r[f] for r in got[k])
               for f in ("cpu_us", "wall")} for k in names}
    print("%-16s %12s %10s %s" % ("row", "CPU us/call", "calls/s",
                                  "runs (CPU us/call)"))
    for k in names:
        print("%-16s %12.1f %10.0f %s"
              % (k, med[k]["cpu_us"], med[k]["wall"],
                 " ".join("%.1f" % r["cpu_us"] for r in got[k])))
    print("stepq / SDK: plain %.3fx, streamed %.3fx; a stream costs stepq "
          "%.1f us more than a plain answer, the SDK %.1f us"
          % (med["stepq plain"]["cpu_us"] / med["SDK plain"]["cpu_us"],
             med["stepq streamed"]["cpu_us"] / med["SDK streamed"]["cpu_us"],
             med["stepq streamed"]["cpu_us"] - med["stepq plain"]["cpu_us"],
             med["SDK streamed"]["cpu_us"] - med["SDK plain"]["cpu_us"]))
    print("load (1 min) after each run: %s"
          % " ".join("%.2f" % x for x in loads))


def stall_rows(a, binary):
    watch = {"stream": True, "first_byte_timeout_s": 2, "idle_timeout_s": 2}
    print("%-8s %-34s %s" % ("fault", "stepq (idle 2 s, first byte 2 s)",
                             "SDK (timeout 20 s)"))
    for fault in ("stall", "hang"):
        script = {"content": content(a.bytes), "completion_tokens": 500,
                  "answers": [{"fault": fault}]}
        _, shown = stepq_run(binary, a.dir, script, 1, 1, watch)
        first = shown["steps"][0]["history"][0]
        t0 = time.monotonic()
        r = sdk_run(binary, a.dir, script, 1, 1, True, a.stall_cap)
        took = time.monotonic() - t0
        sdk = ("not ended after %.0f s (killed)" % took if r is None else
               "ended after %.1f s: %s" % (r["end_ms"] / 1000.0,
                                           "; ".join(r["errors"]) or "ok"))
        print("%-8s %-34s %s"
              % (fault, "ended after %.2f s: %s, then retried"
                 % (first["latency_ms"] / 1000.0, first.get("reason")), sdk))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("STEPQ_BIN", DEFAULT_BIN))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--bytes", type=int, default=4000)
    ap.add_argument("--dir", default=None, help="parent of the temp folders")
    ap.add_argument("--stall-cap", type=float, default=30,
                    help="seconds the SDK is given on a stalled stream")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    if not os.access(binary, os.X_OK):
        die("no stepq binary at %s (cmake --preset release && "
            "cmake --build --preset release)" % binary)
    if a.runs < 1 or a.calls < 1 or a.concurrency < 1 or a.bytes < 32:
        die("bad numbers")
    print("stepq: %s" % binary)
    print("machine: nproc %d, %s, %.1f GiB RAM, load %.2f %.2f %.2f"
          % ((os.cpu_count(), cpu_model(), mem_gib()) + os.getloadavg()))
    print("%d calls at %d in flight, answers of %d bytes (%d events "
          "streamed), median of %d rounds"
          % (a.calls, a.concurrency, a.bytes, (a.bytes + 7) // 8, a.runs))
    sys.stdout.flush()
    cpu_rows(a, binary)
    sys.stdout.flush()
    stall_rows(a, binary)


if __name__ == "__main__":
    main()

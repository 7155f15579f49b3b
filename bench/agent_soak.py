"""bench/agent_soak.py: part 2 of bench/agent.py, the crash soak of agent
jobs side by side: stepq and LangGraph JS, each killed with SIGKILL at
random moments, then run to the end; the side effects are counted where
they land, at the sink. Standard library only."""

import collections
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from agent import (agent_job, peer_cmd, start_pair,  # noqa: E402
                   stepq_setup, tool_turns)
from benchlib import die, read_jsonl, run_stepq, stop_mock  # noqa: E402


def logged(folder, mocks=("model", "sink")):
    """Requests the mocks have logged so far."""
    n = 0
    for name in mocks:
        try:
            with open(os.path.join(folder, name, "mock.log"), "rb") as f:
                n += f.read().count(b"\n")
        except OSError:
            pass
    return n


def lives(folder, cmd, kills, rng, need, idle=None):
    """Starts cmd kills times in folder, each time killing it with SIGKILL
    once the model saw need more turns and then 0-999 ms passed (or 90 s
    went by: a stepq worker that starts after a kill sends no model turn
    until the killed one's count as ended, timeout_s + 30 s, though it
    resends tool calls at once); returns how many were killed while
    still running. Stops early once idle() says nothing is left to run
    (every job ended: parked ones wait for a human)."""
    killed = 0
    settle(folder)
    with open(os.path.join(folder, "lives.log"), "ab") as err:
        for k in range(kills):
            if idle is not None and idle():
                break
            before = logged(folder, ("model",))
            p = subprocess.Popen(cmd(k), cwd=folder, stdout=subprocess.DEVNULL,
                                 stderr=err)
            deadline = time.monotonic() + 90
            while (logged(folder, ("model",)) < before + need
                   and p.poll() is None
                   and time.monotonic() < deadline):
                time.sleep(0.01)
            time.sleep(rng.random())
            if p.poll() is None:
                p.kill()
                killed += 1
            p.wait()
            settle(folder)
    return killed


def settle(folder):
    """Waits until the mocks log nothing new for 0.5 s: the answers to a
    killed process's requests are logged when they are due, and would
    otherwise pass for the next process's work."""
    last, t = logged(folder), time.monotonic()
    while time.monotonic() - t < 0.5:
        time.sleep(0.05)
        now = logged(folder)
        if now != last:
            last, t = now, time.monotonic()


def effects(folder):
    """What reached the sink: {comments: {(path, body): n}, keys: {key:
    n}, label_keys: {path: set of keys}, gets: n}."""
    out = {"comments": collections.Counter(), "keys": collections.Counter(),
           "label_keys": collections.defaultdict(set), "gets": 0}
    for e in read_jsonl(os.path.join(folder, "sink", "mock.log")):
        path = e["path"]
        if e["method"] == "GET":
            out["gets"] += 1
        elif path.endswith("/comments"):
            out["comments"][(path, json.dumps(e.get("body")))] += 1
        elif "/labels/" in path:
            key = e.get("idempotency_key")
            out["keys"][key] += 1
            out["label_keys"][path].add(key)
    return out


def summary(eff, n, expect):
    """The soak's counts from effects eff of n agents, each meant to post
    expect[name] times."""
    c, keys = eff["comments"], eff["keys"]
    return {
        "comments_twice": sum(v - 1 for v in c.values() if v > 1),
        "comments_once": sum(1 for v in c.values() if v == 1),
        "comments_never": n * expect["post_comment"] - len(c),
        "keyed_resent": sum(v - 1 for v in keys.values() if v > 1),
        "labels_applied_twice": sum(len(s) - 1
                                    for s in eff["label_keys"].values()
                                    if len(s) > 1),
        "labels_never": n * expect["add_label"] - len(eff["label_keys"]),
    }


def need(a):
    """Model turns a life waits for before its random moment: a tenth
    of the agents' (so each life kills work in full flow)."""
    return max(1, a.soak_agents // 10)


def settled(binary, folder):
    """Whether every stepq job ended (none queued or running)."""
    st = json.loads(run_stepq(binary, folder, ["status", "--json"]))
    return st["jobs"]["queued"] + st["jobs"]["running"] == 0


def stepq_soak(a, rng, folder):
    binary = a.bin
    (mock, mport), (sink, sport) = start_pair(binary, folder, a.turns,
                                              a.calls, a.soak_latency)
    try:
        stepq_setup(binary, folder, mport, lease=2)
        with open(os.path.join(folder, "jobs.jsonl"), "w") as f:
            for i in range(1, a.soak_agents + 1):
                f.write(agent_job(i, sport) + "\n")
        run_stepq(binary, folder, ["enqueue", "jobs.jsonl"])
        conc = str(a.soak_agents)
        t0 = time.monotonic()
        killed = lives(folder, lambda k: [
            binary, "work", "--concurrency", conc, "--worker-id",
            "soak-%d" % k], a.kills, rng, need(a),
            lambda: settled(binary, folder))
        t1 = time.monotonic()
        for r in range(3):
            run_stepq(binary, folder, ["work", "--drain", "--concurrency",
                                       conc, "--worker-id", "drain-%d" % r])
            if settled(binary, folder):
                break
        st = json.loads(run_stepq(binary, folder, ["status", "--json"]))
        wall, drain = time.monotonic() - t0, time.monotonic() - t1
        items = json.loads(run_stepq(binary, folder, ["park", "list",
                                                      "--json"]))
        bad = unexplained(binary, folder, items)
    finally:
        stop_mock(mock)
        stop_mock(sink)
    j = st["jobs"]
    reasons = collections.Counter(
        "%s %s" % (i["reason"], (i.get("call") or {}).get("tool", ""))
        for i in items if i["state"] == "open")
    return {"killed": killed, "wall_s": wall, "drain_s": drain,
            "succeeded": j["succeeded"],
            "parked": j["parked"], "failed": j["failed"],
            "lost": a.soak_agents - j["succeeded"] - j["parked"] - j["failed"],
            "park_reasons": dict(reasons), "unexplained": bad}


def unexplained(binary, folder, items):
    """Jobs that ended without a reason: failed without an error, or
    parked without an open park item (stepq's invariant)."""
    bad = []
    parked = {i["job_id"] for i in items if i["state"] == "open"}
    for state in ("failed", "parked"):
        for j in json.loads(run_stepq(binary, folder, [
                "jobs", "list", "--state", state, "--json"])):
            if state == "parked" and j["id"] not in parked:
                bad.append(j["id"])
            elif state == "failed" and not json.loads(run_stepq(
                    binary, folder, ["jobs", "show", str(j["id"]),
                                     "--json"])).get("error"):
                bad.append(j["id"])
    return bad


def peer_soak(a, rng, folder):
    (mock, mport), (sink, sport) = start_pair(a.bin, folder, a.turns,
                                              a.calls, a.soak_latency)
    try:
        cmd = peer_cmd(folder, mport, sport, a.soak_agents, resume=True)
        t0 = time.monotonic()
        killed = lives(folder, lambda k: cmd, a.kills, rng, need(a))
        r = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
        wall = time.monotonic() - t0
        if r.returncode != 0:
            die("langgraph exited %d: %s" % (r.returncode, r.stderr[-2000:]))
        out = json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        stop_mock(mock)
        stop_mock(sink)
    return {"killed": killed, "wall_s": wall, "succeeded": out["finished"],
            "parked": 0, "failed": out["failed"],
            "lost": a.soak_agents - out["finished"] - out["failed"],
            "resumed_last": out["resumed"]}


def part2(a):
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    expect = collections.Counter(c["name"] for turn in tool_turns(
        a.turns, a.calls) for c in turn)
    print("part 2: crash soak, %d agents at once (%d tool turns of %d "
          "calls: %s each), killed -9 %d times at random moments, then run "
          "to the end; every answer after %d ms; seed %d"
          % (a.soak_agents, a.turns, a.calls,
             ", ".join("%d %s" % (v, k) for k, v in sorted(expect.items())),
             a.kills, a.soak_latency, seed))
    sys.stdout.flush()
    rows = []
    for name, fn in (("stepq", stepq_soak), ("LangGraph", peer_soak)):
        if name.lower() not in a.soak_systems.lower().split(","):
            continue
        folder = tempfile.mkdtemp(prefix="bench-agent-soak-", dir=a.dir)
        try:
            r = fn(a, random.Random(seed), folder)
            r.update(summary(effects(folder), a.soak_agents, expect))
        finally:
            if not a.keep:
                shutil.rmtree(folder, ignore_errors=True)
        rows.append((name, r))
        print("  %s: %s" % (name, json.dumps(r)))
        sys.stdout.flush()
    print("%-10s %6s %9s %6s %6s %4s %14s %13s %12s %14s"
          % ("", "kills", "succeeded", "parked", "failed", "lost",
             "comments twice", "keyed resent", "keys twice", "comments never"))
    for name, r in rows:
        print("%-10s %6d %9d %6d %6d %4d %14d %13d %12d %14d"
              % (name, r["killed"], r["succeeded"], r["parked"], r["failed"],
                 r["lost"], r["comments_twice"], r["keyed_resent"],
                 r["labels_applied_twice"], r["comments_never"]))
    sys.stdout.flush()

#!/usr/bin/env python3
"""bench/agent.py: agent jobs (issue 41) end to end, side by side with
LangGraph JS, run on demand (never in tests).

    python3 bench/agent.py [--runs 3] [--agents 1000] [--turns 5]
        [--calls 2] [--latency 200] [--no-peer] [--soak-only | --no-soak]
        [--soak-systems stepq,langgraph] [--soak-agents 200]
        [--kills 30] [--seed S]
        [--bin build/release/cli/stepq] [--dir /tmp] [--keep]

The agent: a ReAct loop whose model (`stepq mock`, a route's "tool_turns")
calls tools --turns times, --calls at a time, then answers; the tools go
over HTTP to a second `stepq mock` (the sink, its generic endpoint, which
dedupes on Idempotency-Key): get_issue (GET, read-only, replayable),
add_label (POST with an idempotency key of issue and label) and
post_comment (POST, side effects, no key). stepq runs it as one chat step
with "tools"; the peer (bench/peers/langgraph, installed here with
`npm ci` when its node_modules is missing) as createReactAgent with
ChatOpenAI and the SqliteSaver checkpointer, thread per agent.

Part 1, CPU and memory. Each of --runs rounds runs, each on fresh mocks
and a fresh store, with every answer of both mocks waiting --latency ms
(so all agents are mid-loop at once):
  - plain: agents x (model turns + tool calls) one-step chat jobs through
    `stepq work --drain --concurrency AGENTS`: CPU per plain chat step;
  - stepq A: --agents agent jobs at once (--turns x --calls);
  - stepq B: the same with one call a turn; A and B give CPU per model
    turn and per tool call (per job: (T+1) turn + T*C call);
  - LangGraph: the agents of A at once in one node process.
Worker CPU is user + system from wait4 (stepq, start-up included) or
process.cpuUsage() from the first invoke (node, start-up left out).
Memory per agent: the worker's peak RSS in A minus its peak in the plain
run (as many requests in flight), divided by --agents; "beyond messages"
subtracts the JSON bytes of the longest conversation the model was sent.

Part 2, the crash soak (bench/agent_soak.py): --soak-agents agents at
once for stepq (lease_s 2, timeout_s 2) and then LangGraph, every answer
after --soak-latency ms, each killed with SIGKILL --kills times: each
life runs until the model saw a tenth of the agents' turns more, then a
random 0-999 ms; then a last life runs to the end (`stepq work --drain`;
node with --resume).
Counted at the sink: post_comment bodies that reached it more than once
(a side effect done twice without a human), keyed posts sent again and
keys applied more than once after its dedupe, and jobs lost (not
finished: stepq's must end succeeded, parked or failed with a reason).

Build first: cmake --preset release && cmake --build --preset release.
Needs node and npm for the peer (Node 20: better-sqlite3 12 is built
from source with the system's node headers).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (cpu_model, cpu_ticks, die, job_text,  # noqa: E402
                      mem_gib, read_jsonl, run_stepq, start_mock,
                      steal_since, stop_mock)
from worker import timed_work  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BIN = os.path.join(HERE, "..", "build", "release", "cli", "stepq")
PEER = os.path.join(HERE, "peers", "langgraph")

# The tool of call j of turn k is SEQ[(2k + j) % 10]: with two calls a
# turn, turns mix a read, a keyed post and a post without a key.
SEQ = ["get_issue", "add_label", "add_label", "post_comment", "get_issue",
       "post_comment", "add_label", "post_comment", "add_label", "get_issue"]
SYSTEM = ("You triage bug reports: read the issue, label it with add_label, "
          "comment with post_comment, then answer with one line.")


def tool_turns(turns, calls):
    """The mock's tool_turns: turns lists of calls."""
    out = []
    for k in range(turns):
        row = []
        for j in range(calls):
            name = SEQ[(2 * k + j) % len(SEQ)]
            args = {}
            if name == "add_label":
                args = {"label": "l%d-%d" % (k, j)}
            elif name == "post_comment":
                args = {"body": "turn %d call %d" % (k, j)}
            row.append({"name": name, "arguments": args})
        out.append(row)
    return out


def agent_job(i, sink):
    """The stepq job of agent i (issue i), its tools posting to sink."""
    base = "http://127.0.0.1:%d/issues/%d" % (sink, i)
    obj = {"type": "object", "additionalProperties": False}
    tools = [
        {"name": "get_issue", "description": "Read the issue",
         "parameters": dict(obj, properties={}),
         "action": {"http": {"method": "GET", "url": base}},
         "replayable": True, "side_effects": False},
        {"name": "add_label", "description": "Add one label to the issue",
         "parameters": dict(obj, required=["label"], properties={
             "label": {"type": "string", "maxLength": 50}}),
         "action": {"http": {"method": "POST",
                             "url": base + "/labels/{{args.label}}",
                             "body": {"label": "{{args.label}}"}}},
         "idempotency_key": "issue-%d-label-{{args.label}}" % i},
        {"name": "post_comment", "description": "Post a comment on the issue",
         "parameters": dict(obj, required=["body"], properties={
             "body": {"type": "string", "maxLength": 4000}}),
         "action": {"http": {"method": "POST", "url": base + "/comments",
                             "body": {"body": "{{args.body}}"}}}},
    ]
    step = {"name": "triage", "max_turns": 10, "tool_parallelism": 4,
            "request": {"messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": "Triage issue #%d." % i}]},
            "tools": tools}
    return json.dumps({"name": "agent-%d" % i, "key": "agent-%d" % i,
                       "steps": [step]}, separators=(",", ":"))


def start_pair(binary, folder, turns, calls, latency):
    """The model mock (turns of tool_turns, none for 0; logging to
    model/mock.log) and the sink
    (logging to sink/mock.log), each answering after latency ms; returns
    ((model Popen, port), (sink Popen, port))."""
    out = []
    model = {"tool_turns": tool_turns(turns, calls)} if turns else {}
    for name, script in (("model", model), ("sink", {})):
        d = os.path.join(folder, name)
        os.makedirs(d, exist_ok=True)
        if latency:
            script["latency_ms"] = latency
        out.append(start_mock(binary, d, script))
    return out


def stepq_setup(binary, folder, mport, lease=None):
    cfg = {"tiers": [{"name": "mock",
                      "base_url": "http://127.0.0.1:%d/v1" % mport,
                      "model": "bench-model", "timeout_s": 120}]}
    if lease:
        # A worker that starts holds a tier "in_doubt" while a killed
        # worker's requests count as in flight: timeout_s + 30 s. A short
        # timeout (the mock answers in --soak-latency ms) keeps that wait
        # near 32 s a life instead of 150 s.
        cfg["worker"] = {"lease_s": lease}
        cfg["tiers"][0]["timeout_s"] = 2
    with open(os.path.join(folder, "stepq.json"), "w") as f:
        json.dump(cfg, f)
    run_stepq(binary, folder, ["init"])


def status(binary, folder):
    return json.loads(run_stepq(binary, folder, ["status", "--json"]))


def stepq_run(binary, base, a, calls, plain=0, keep=False):
    """One stepq run: plain one-step chat jobs (plain > 0) or --agents
    agent jobs of --turns x calls, all at once; returns (cpu s, peak RSS
    KiB, bytes of the longest messages the model was sent)."""
    folder = tempfile.mkdtemp(prefix="bench-agent-", dir=base)
    mocks = []
    try:
        mocks = start_pair(binary, folder, 0 if plain else a.turns, calls,
                           a.latency)
        stepq_setup(binary, folder, mocks[0][1])
        with open(os.path.join(folder, "jobs.jsonl"), "w") as f:
            if plain:
                f.write((job_text("bench") + "\n") * plain)
            else:
                for i in range(1, a.agents + 1):
                    f.write(agent_job(i, mocks[1][1]) + "\n")
        run_stepq(binary, folder, ["enqueue", "jobs.jsonl"])
        _, cpu, hwm = timed_work(binary, folder, a.agents, [])
        for m in mocks:
            stop_mock(m[0])
        mocks = []
        n = plain or a.agents
        st = status(binary, folder)
        if st["jobs"]["succeeded"] != n:
            die("%d of %d jobs succeeded; folder %s"
                % (st["jobs"]["succeeded"], n, folder))
        model = read_jsonl(os.path.join(folder, "model", "mock.log"))
        sink = read_jsonl(os.path.join(folder, "sink", "mock.log"))
        want = (n, 0) if plain else (n * (a.turns + 1), n * a.turns * calls)
        if (len(model), len(sink)) != want:
            die("the mocks saw %d model and %d tool requests, not %d and %d;"
                " folder %s" % (len(model), len(sink), want[0], want[1],
                                folder))
        return cpu, hwm, max(messages_bytes(e) for e in model)
    finally:
        for m in mocks:
            stop_mock(m[0])
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def messages_bytes(entry):
    body = entry.get("body")
    if not isinstance(body, dict):
        return 0
    return len(json.dumps(body.get("messages", []), separators=(",", ":")))


def npm_ci():
    """Installs the peer's packages when they are missing."""
    if os.path.isdir(os.path.join(PEER, "node_modules")):
        return
    print("installing the peer: npm ci in %s" % PEER)
    sys.stdout.flush()
    env = dict(os.environ)
    # better-sqlite3 12 is built from source on Node 20 (no internet for
    # a prebuilt one): with the system's node headers where they are.
    if "npm_config_nodedir" not in env and os.path.exists(
            "/usr/include/node/node.h"):
        env["npm_config_nodedir"] = "/usr"
    r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=PEER,
                       env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    if r.returncode != 0:
        shutil.rmtree(os.path.join(PEER, "node_modules"), ignore_errors=True)
        die("npm ci in %s failed: %s" % (PEER, r.stdout.decode()[-2000:]))


def peer_cmd(folder, mport, sport, agents, resume=False):
    return (["node", os.path.join(PEER, "bench.js"),
             "--model-url", "http://127.0.0.1:%d/v1" % mport,
             "--sink-url", "http://127.0.0.1:%d" % sport,
             "--db", os.path.join(folder, "langgraph.db"),
             "--agents", str(agents)] + (["--resume"] if resume else []))


def peer_run(binary, base, a, keep=False):
    """One LangGraph run of the agents of stepq A; returns (cpu s, peak
    RSS KiB, model turns)."""
    folder = tempfile.mkdtemp(prefix="bench-agent-lg-", dir=base)
    mocks = []
    try:
        mocks = start_pair(binary, folder, a.turns, a.calls, a.latency)
        r = subprocess.run(peer_cmd(folder, mocks[0][1], mocks[1][1],
                                    a.agents),
                           capture_output=True, text=True)
        if r.returncode != 0:
            die("langgraph exited %d: %s" % (r.returncode, r.stderr[-2000:]))
        out = json.loads(r.stdout.strip().splitlines()[-1])
        calls = len(read_jsonl(os.path.join(folder, "sink", "mock.log")))
        if (out["finished"] != a.agents or calls != a.agents * a.turns *
                a.calls or out["turns"] != a.agents * (a.turns + 1)):
            die("langgraph: %s, %d tool calls; folder %s"
                % (out, calls, folder))
        return out["cpu_us"] / 1e6, out["rss_mib"] * 1024, out["turns"]
    finally:
        for m in mocks:
            stop_mock(m[0])
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def part1(binary, a):
    T, C, N = a.turns, a.calls, a.agents
    turns = N * (T + 1)
    reqs = turns + N * T * C
    print("part 1: %d agents at once, %d tool turns of %d calls, then the "
          "answer (%d model turns, %d tool calls); plain: %d one-step chat "
          "jobs at %d at once; every answer after %d ms; median of %d rounds"
          % (N, T, C, turns, N * T * C, reqs, N, a.latency, a.runs))
    sys.stdout.flush()
    rows = {k: [] for k in ("plain", "A", "B", "peer")}
    ticks = cpu_ticks()
    for _ in range(a.runs):
        cpu, hwm, _ = stepq_run(binary, a.dir, a, 1, plain=reqs, keep=a.keep)
        rows["plain"].append((cpu / reqs, hwm))
        cpu, hwm, msgs = stepq_run(binary, a.dir, a, C, keep=a.keep)
        rows["A"].append((cpu, hwm, msgs))
        cpu, hwm, _ = stepq_run(binary, a.dir, a, 1, keep=a.keep)
        rows["B"].append((cpu, hwm))
        if not a.no_peer:
            rows["peer"].append(peer_run(binary, a.dir, a, a.keep))
        print("  round: plain %.1f us/step; A %.2f s; B %.2f s%s; load %.2f"
              % (rows["plain"][-1][0] * 1e6, rows["A"][-1][0],
                 rows["B"][-1][0],
                 "; LangGraph %.1f s" % rows["peer"][-1][0]
                 if rows["peer"] else "", os.getloadavg()[0]))
        sys.stdout.flush()
    steal = steal_since(ticks)
    med = statistics.median
    plain = med(r[0] for r in rows["plain"])
    # Per round: a call = (A - B) / (N T (C - 1)), a turn = the rest of B.
    calls = [(ra[0] - rb[0]) / (N * T * (C - 1))
             for ra, rb in zip(rows["A"], rows["B"])] if C > 1 else [0]
    turn = [(rb[0] - N * T * c) / turns for rb, c in zip(rows["B"], calls)]
    whole = [ra[0] / turns for ra in rows["A"]]
    kib = [(ra[1] - rp[1]) / N for ra, rp in zip(rows["A"], rows["plain"])]
    msgs = med(ra[2] for ra in rows["A"]) / 1024.0
    print("%-44s %10s %8s" % ("stepq", "us CPU", "x plain"))
    for name, v in (("plain chat step", plain),
                    ("model turn (agent)", med(turn)),
                    ("tool call", med(calls)),
                    ("a request of the loop (turn or call)",
                     med(ra[0] for ra in rows["A"]) / reqs),
                    ("model turn, its tool calls included", med(whole))):
        print("%-44s %10.1f %8.2f" % (name, v * 1e6, v / plain))
    print("  rounds, us a turn / a call: %s" % " ".join(
        "%.1f/%.1f" % (t * 1e6, c * 1e6) for t, c in zip(turn, calls)))
    print("memory per running agent: %.1f KiB over a plain step in flight "
          "(peak RSS %.1f MiB vs %.1f MiB); its longest messages %.1f KiB; "
          "beyond them %.1f KiB"
          % (med(kib), med(r[1] for r in rows["A"]) / 1024,
             med(r[1] for r in rows["plain"]) / 1024, msgs, med(kib) - msgs))
    if rows["peer"]:
        pcpu = [r[0] / turns for r in rows["peer"]]
        print("LangGraph: %.1f us CPU a model turn, its tool calls included "
              "(rounds %s); peak RSS %.1f MiB, %.1f KiB an agent; stepq / "
              "LangGraph: %.4fx"
              % (med(pcpu) * 1e6, " ".join("%.0f" % (x * 1e6) for x in pcpu),
                 med(r[1] for r in rows["peer"]) / 1024,
                 med(r[1] for r in rows["peer"]) / N,
                 med(whole) / med(pcpu)))
    print("  CPU steal %.1f%%" % steal)
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("STEPQ_BIN", DEFAULT_BIN))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2)
    ap.add_argument("--latency", type=int, default=200,
                    help="ms both mocks wait before every answer")
    ap.add_argument("--no-peer", action="store_true",
                    help="leave LangGraph out")
    ap.add_argument("--no-soak", action="store_true")
    ap.add_argument("--soak-only", action="store_true")
    ap.add_argument("--soak-systems", default="stepq,langgraph",
                    help="which the soak runs")
    ap.add_argument("--soak-agents", type=int, default=200)
    ap.add_argument("--kills", type=int, default=30)
    ap.add_argument("--soak-latency", type=int, default=100)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--dir", default=None, help="parent of the temp folders")
    ap.add_argument("--keep", action="store_true", help="keep the folders")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    if not os.access(a.bin, os.X_OK):
        die("no stepq binary at %s (cmake --preset release && "
            "cmake --build --preset release)" % a.bin)
    if (a.runs < 1 or a.agents < 1 or a.turns < 1 or a.calls < 2
            or a.calls > 16 or a.kills < 0 or a.soak_agents < 1):
        die("bad numbers (--calls 2 to 16: a call's CPU is A minus B)")
    print("stepq: %s" % a.bin)
    print("machine: nproc %d, %s, %.1f GiB RAM, load %.2f %.2f %.2f"
          % ((os.cpu_count(), cpu_model(), mem_gib()) + os.getloadavg()))
    if a.no_peer:
        a.soak_systems = "stepq"
    if "langgraph" in a.soak_systems.lower() or not (a.no_peer or
                                                      a.soak_only):
        npm_ci()
    if not a.soak_only:
        part1(a.bin, a)
    if not a.no_soak:
        import agent_soak
        agent_soak.part2(a)


if __name__ == "__main__":
    main()

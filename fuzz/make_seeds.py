#!/usr/bin/env python3
"""make_seeds.py OUT: writes the seed corpus of every fuzz target to
OUT/<target>/ from the repository's examples/*.json(l) and the policy case
tables tests/cases/*.json, plus a few hand-made inputs (fuzz/seeds/). Seeds
are generated rather than committed; run again to refresh."""
import glob
import hashlib
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRANSPORTS = ["", "timeout", "refused", "reset", "tls", "too_large"]


def put(out, target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def load(path):
    with open(path, "rb") as f:
        return f.read()


def classify_seed(case):
    """One case of a policy table in fuzz_classify's input layout."""
    r = case.get("response", {})
    st = case.get("step", {})
    status = r.get("status", 0) if isinstance(r.get("status"), int) else 0
    tr = TRANSPORTS.index(r["transport_error"]) \
        if r.get("transport_error") in TRANSPORTS else 0
    parsed = {None: 0, True: 1, False: 2}.get(r.get("parsed_ok"), 0)
    flags = 0
    if r.get("finish_reason") is not None:
        flags |= 8
    if st.get("replayable", True):
        flags |= 16
    if st.get("side_effects", False):
        flags |= 32
    if st.get("idempotency_key", False):
        flags |= 64
    b5 = min(int(st.get("attempts_left", 2)), 7) | \
        (min(int(st.get("tiers_left", 1)), 3) << 3)
    b6 = min(int(st.get("slack_s", 90)) // 10, 255)
    head = struct.pack(">HBBBBBB", status % 1000, tr, parsed, flags, b5, b6, 0)
    text = ""
    if flags & 8:
        text += str(r["finish_reason"]) + "\n"
    for k, v in (r.get("headers") or {}).items():
        text += "%s: %s\n" % (k, v)
    text += "\n"
    body = r.get("body", "")
    text += body if isinstance(body, str) else json.dumps(body)
    return head + text.encode()


def main():
    out = sys.argv[1]
    jobs, configs, cases, requests = [], [], [], []
    for p in sorted(glob.glob(os.path.join(ROOT, "examples", "*.json*"))):
        data = load(p)
        try:
            docs = [json.loads(data)]
        except ValueError:
            docs = [json.loads(l) for l in data.splitlines() if l.strip()]
        for doc in docs:
            if isinstance(doc, dict) and "steps" in doc:
                jobs.append(doc)
            elif isinstance(doc, dict) and ("tiers" in doc or "worker" in doc):
                configs.append(data)
        if any(isinstance(d, dict) and "steps" in d for d in docs):
            put(out, "jobspec", data)
    for p in sorted(glob.glob(os.path.join(ROOT, "tests", "cases", "*.json"))):
        cases += json.loads(load(p))
    hand = os.path.join(ROOT, "fuzz", "seeds")
    for p in sorted(glob.glob(os.path.join(hand, "*", "*"))):
        put(out, os.path.basename(os.path.dirname(p)), load(p))

    put(out, "jobspec", json.dumps(jobs))
    for j in jobs:
        put(out, "jobspec", json.dumps(j))
        for s in j["steps"]:
            for k in ("request", "http"):
                if k in s:
                    requests.append(s[k])
    for c in configs:
        put(out, "config", c)
    for c in cases:
        put(out, "classify", classify_seed(c))
        r = c.get("response", {})
        for v in (r.get("headers") or {}).values():
            put(out, "headers", str(v))
        body = r.get("body")
        if body is not None:
            put(out, "headers",
                (body if isinstance(body, str) else json.dumps(body)).lower())
    for r in requests:
        put(out, "expand", json.dumps(r))
    # tools: the provider-shaped answers of tests/data/toolcalls
    for p in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "toolcalls",
                                           "*.json"))):
        if os.path.basename(p) != "cases.json":
            put(out, "tools", load(p))
    # serve_body: the first byte's low bit is "bulk"
    for bulk, body in ((0, {"resolution": "retry", "by": "ana", "tier": "free",
                            "note": "wall over"}),
                       (0, {"resolution": "done", "by": "ana", "output": "x"}),
                       (1, {"resolution": "skip", "by": "ana",
                            "reason": "hard_quota", "tier": "free",
                            "job_id": 3}),
                       (1, {"resolution": "fail", "by": "bo"})):
        put(out, "serve_body", bytes([bulk]) + json.dumps(body).encode())
    # serve_route: "METHOD URL", one of each route and some near misses
    for line in ("GET /healthz", "GET /v1/status", "HEAD /v1/tiers",
                 "GET /v1/jobs", "POST /v1/jobs", "GET /v1/jobs/7",
                 "POST /v1/jobs/7/cancel", "POST /v1/jobs/7/retry",
                 "GET /v1/park",
                 "POST /v1/park/resolve", "GET /v1/park/3",
                 "POST /v1/park/3/resolve", "GET /metrics", "GET /",
                 "GET /ui/app.js", "POST /", "DELETE /v1/jobs/0",
                 "GET /v1/jobs/0012/", "GET /v1/park/99999999999999999999"):
        put(out, "serve_route", line.encode())
    # tier_text: the first byte's low bit is "flight" (else usage)
    for flight, text in ((0, "1800000000 0:3:4096 7:1:12 59:2:900"),
                         (0, ""), (0, "1800000000"),
                         (1, "0 1800000040:2 1:5 30:1"),
                         (1, "1800000009000 1800000010:1"), (1, "0")):
        put(out, "tier_text", bytes([flight]) + text.encode())


main()

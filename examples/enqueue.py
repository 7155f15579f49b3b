#!/usr/bin/env python3
"""enqueue.py: enqueue jobs from Python through the stepq CLI (stdlib only).

Builds one single-step job per prompt and sends them all in one call as a
JSON array: stepq validates every job first and writes all of them in one
transaction, or none. Keys make a rerun harmless: a job whose key exists
comes back with "duplicate": true.

    STEPQ_DB=stepq.db stepq init    # once: only init creates the database
    STEPQ_DB=stepq.db python3 examples/enqueue.py "Summarize RFC 9110" "Explain WAL mode"

STEPQ names the binary (default: stepq on PATH).
"""
import hashlib
import json
import os
import subprocess
import sys


def job_for(prompt):
    key = "prompt-" + hashlib.sha256(prompt.encode()).hexdigest()[:16]
    return {
        "name": "one-prompt",
        "key": key,
        "steps": [{
            "name": "answer",
            "request": {"messages": [{"role": "user", "content": prompt}],
                        "max_tokens": 400},
        }],
    }


def enqueue(jobs, stepq=None):
    """Returns [{"id": N, "duplicate": bool}, ...] in input order.

    Raises ValueError with stepq's message (the JSON path of the first
    problem, e.g. "job 2: steps[0].request: missing") when a job is not
    valid, RuntimeError for anything else."""
    stepq = stepq or os.environ.get("STEPQ", "stepq")
    proc = subprocess.run([stepq, "enqueue", "-", "--json"],
                          input=json.dumps(jobs), capture_output=True,
                          text=True, check=False)
    if proc.returncode == 2:
        raise ValueError(proc.stderr.strip())
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip() or "stepq exited %d" % proc.returncode)
    out = json.loads(proc.stdout)
    return out if isinstance(out, list) else [out]


def main(argv):
    if any(a in ("-h", "--help") for a in argv[1:]):
        print(__doc__.strip())
        return 0
    prompts = argv[1:] or ["Summarize today's merged pull requests."]
    try:
        results = enqueue([job_for(p) for p in prompts])
    except ValueError as e:
        print("not enqueued: %s" % e, file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as e:
        print("stepq failed: %s" % e, file=sys.stderr)
        return 1
    for prompt, r in zip(prompts, results):
        state = "already queued" if r["duplicate"] else "enqueued"
        print("%s job %d: %s" % (state, r["id"], prompt))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

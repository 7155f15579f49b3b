"""benchlib.py: what bench/worker.py and bench/quota.py share: starting
`stepq mock`, running the binary, reading logs, describing the machine.
Standard library only."""

import json
import os
import platform
import re
import select
import signal
import subprocess
import sys
import time


def job_text(name):
    """One one-step chat job (JSON line) as both benchmarks enqueue it."""
    return json.dumps(
        {
            "name": name,
            "steps": [
                {
                    "name": "summarize",
                    "request": {
                        "messages": [
                            {
                                "role": "user",
                                "content": "Summarize the merged pull requests "
                                "of the night as JSON.",
                            }
                        ],
                        "max_tokens": 800,
                    },
                    "expect_json": ["summary"],
                }
            ],
        },
        separators=(",", ":"),
    )


def redact(text):
    """text with any password of a PostgreSQL location in it replaced by
    ***: what messages print instead."""
    text = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)
    return re.sub(r"(password\s*=\s*)('[^']*'|\S+)", r"\1***", text)


def die(msg):
    name = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    print("bench_%s: %s" % (name, redact(msg)), file=sys.stderr)
    sys.exit(1)


def start_mock(binary, folder, script=None):
    """Starts `stepq mock --port 0` in folder, logging to mock.log, with
    script (a JSON value) when given; returns (Popen, port)."""
    args = [binary, "mock", "--port", "0", "--log", "mock.log"]
    if script is not None:
        with open(os.path.join(folder, "script.json"), "w") as f:
            json.dump(script, f)
        args += ["--script", "script.json"]
    p = subprocess.Popen(
        args, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    line = b""
    deadline = time.monotonic() + 5
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        r, _, _ = select.select([p.stdout], [], [], 0.1)
        if r:
            c = os.read(p.stdout.fileno(), 1)
            if not c:
                break
            line += c
    text = line.decode().strip()
    if not text.startswith("listening 127.0.0.1:"):
        p.kill()
        p.wait()
        die("mock did not start: %r" % text)
    return p, int(text.rsplit(":", 1)[1])


def stop_mock(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    p.stdout.close()


def run_stepq(binary, folder, args, stdin=None):
    r = subprocess.run(
        [binary] + args,
        cwd=folder,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    if r.returncode != 0:
        die("stepq %s exited %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return r.stdout


def psql(server, sql):
    """Runs sql on the server (a PostgreSQL location) with psql; dies on
    failure without printing the location (it may hold a password)."""
    r = subprocess.run(
        ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", server, "-c",
         "SET client_min_messages TO warning; " + sql],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        die("psql failed (%s): %s" % (sql, r.stderr.decode().strip()))
    return r.stdout.decode()


def pg_fresh(server, schema):
    """Makes an empty schema on the server; returns the location whose
    connections use it (search_path set through libpq's options)."""
    psql(server, "DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s"
         % (schema, schema))
    if "://" in server:
        sep = "&" if "?" in server else "?"
        return "%s%soptions=-csearch_path%%3D%s" % (server, sep, schema)
    return "%s options=-csearch_path=%s" % (server, schema)


def pg_drop(server, schema):
    psql(server, "DROP SCHEMA IF EXISTS %s CASCADE" % schema)


def write_json(dest, rows):
    """Writes rows as indented JSON to dest: a file, or "-" for stdout."""
    text = json.dumps(rows, indent=1)
    if dest == "-":
        print(text)
    else:
        with open(dest, "w") as f:
            f.write(text + "\n")


def read_jsonl(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
    return out


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem_gib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 1048576.0
    except OSError:
        pass
    return 0.0


def cpu_ticks():
    """(steal, total) jiffies of all CPUs so far, from /proc/stat; a
    virtual machine whose host runs other guests loses time as steal,
    which makes a run slower for reasons outside it."""
    try:
        with open("/proc/stat") as f:
            vals = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return (0, 0)
    return (vals[7] if len(vals) > 7 else 0, sum(vals[:8]))


def steal_since(start):
    """The share of CPU time the host took since start (cpu_ticks()), in
    percent: runs with more than a few percent are not comparable."""
    now = cpu_ticks()
    total = now[1] - start[1]
    return 100.0 * (now[0] - start[0]) / total if total > 0 else 0.0


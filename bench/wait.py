#!/usr/bin/env python3
"""bench/wait.py: the long-poll GET /v1/jobs/ID?wait= against polling, run
on demand (never in tests).

    python3 bench/wait.py [--bin build/release/cli/stepq] [--waiters 200]
        [--seconds 10] [--poll-every 1.0] [--runs 3]

Each run, in a fresh folder with a fresh SQLite store holding WAITERS
queued one-step jobs (no worker: they stay queued), starts `stepq serve`
and measures, side by side:

  - long-poll: WAITERS connections each wait on its own job
    (?wait=50); the server's CPU over --seconds while they wait (ms of CPU
    a second) and its peak RSS; then every job is cancelled through
    POST /v1/jobs/ID/cancel from another connection, and each waiter's
    answer is timed from its job's cancel (median and worst, ms);
  - polling, the way a program learnt of an end before: WAITERS clients
    each GET /v1/jobs/ID every --poll-every seconds (one kept-alive
    connection each) for --seconds; the server's CPU (ms a second), and
    the mean delay such a poll adds to learning of an end (half the
    period).

Medians of the runs are printed, with the machine.
"""

import argparse
import http.client
import os
import selectors
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import cpu_model, die, job_text, run_stepq  # noqa: E402
from serve import (HEADERS, TOKEN, proc_cpu, proc_rss_kib,  # noqa: E402
                   start_serve, stop_serve)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BIN = os.path.join(HERE, "..", "build", "release", "cli", "stepq")


def waiter(port, job):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(("GET /v1/jobs/%d?wait=50 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               "Authorization: Bearer %s\r\n\r\n" % (job, TOKEN)).encode())
    return s


def long_poll(p, port, n, seconds):
    socks = [waiter(port, i + 1) for i in range(n)]
    time.sleep(0.5)  # every request read and suspended
    cpu0 = proc_cpu(p.pid)
    time.sleep(seconds)
    idle_ms = (proc_cpu(p.pid) - cpu0) * 1000 / seconds
    cancelled, answered = {}, {}
    sel = selectors.DefaultSelector()
    for i, s in enumerate(socks):
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i + 1)

    def read():
        bufs = {}
        while len(answered) < n:
            for key, _ in sel.select(timeout=60):
                data = key.fileobj.recv(65536)
                bufs[key.data] = bufs.get(key.data, b"") + data
                if b'"state":"cancelled"' in bufs[key.data]:
                    answered[key.data] = time.monotonic()
                    sel.unregister(key.fileobj)
                elif not data:
                    die("waiter %d: closed without its answer" % key.data)

    t = threading.Thread(target=read)
    t.start()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for job in range(1, n + 1):
        conn.request("POST", "/v1/jobs/%d/cancel" % job, body="{}",
                     headers=HEADERS)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            die("cancel %d: %d" % (job, r.status))
        cancelled[job] = time.monotonic()
    t.join()
    conn.close()
    for s in socks:
        s.close()
    lat = [(answered[j] - cancelled[j]) * 1000 for j in range(1, n + 1)]
    return idle_ms, statistics.median(lat), max(lat), proc_rss_kib(p.pid)


def polling(p, port, n, seconds, every):
    stop = time.monotonic() + seconds
    cpu0 = proc_cpu(p.pid)

    def client(job):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while time.monotonic() < stop:
            conn.request("GET", "/v1/jobs/%d" % job, headers=HEADERS)
            r = conn.getresponse()
            r.read()
            time.sleep(every)
        conn.close()

    threads = [threading.Thread(target=client, args=(j,))
               for j in range(1, n + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (proc_cpu(p.pid) - cpu0) * 1000 / seconds


def one_run(binary, n, seconds, every):
    folder = tempfile.mkdtemp(prefix="stepq-wait-")
    try:
        run_stepq(binary, folder, ["init"])
        with open(os.path.join(folder, "jobs.jsonl"), "w") as f:
            f.write("\n".join(job_text("w%d" % i) for i in range(n)) + "\n")
        run_stepq(binary, folder, ["enqueue", "jobs.jsonl"])
        p, port = start_serve(binary, folder, [])
        try:
            poll_ms = polling(p, port, n, seconds, every)
            idle_ms, p50, worst, rss = long_poll(p, port, n, seconds)
        finally:
            stop_serve(p)
        return {"poll_ms": poll_ms, "idle_ms": idle_ms, "p50": p50,
                "worst": worst, "rss": rss}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=DEFAULT_BIN)
    ap.add_argument("--waiters", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--poll-every", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    if not os.access(a.bin, os.X_OK):
        die("no stepq at %s (build it, or give --bin)" % a.bin)
    rows = [one_run(a.bin, a.waiters, a.seconds, a.poll_every)
            for _ in range(a.runs)]

    def med(k):
        return statistics.median(r[k] for r in rows)

    print("machine: %s, %d CPUs; %d waiters, median of %d runs" %
          (cpu_model(), os.cpu_count(), a.waiters, a.runs))
    print("%-34s %12s %18s" % ("", "server CPU", "end learnt after"))
    print("%-34s %9.1f ms/s %11.0f ms mean" %
          ("polling every %gs" % a.poll_every, med("poll_ms"),
           a.poll_every * 500))
    print("%-34s %9.1f ms/s %7.0f ms median, %.0f ms worst" %
          ("long-poll (?wait=50)", med("idle_ms"), med("p50"),
           med("worst")))
    print("server peak RSS with the waiters: %.1f MiB" % (med("rss") / 1024))


if __name__ == "__main__":
    main()

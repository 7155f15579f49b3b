#!/usr/bin/env python3
"""bench/month.py: a month of nights in an hour (issue 45), run on demand,
never in the test command.

    python3 bench/month.py [--jobs 1000000] [--nights 30] [--night-s 120]
        [--bin build/release/cli/stepq] [--concurrency 64] [--dir DIR]
        [--keep] [--json FILE]

One `stepq work` and one `stepq serve` on one SQLite file, both on a
clock that starts at 2026-10-31 22:00 UTC and runs 86,400 / --night-s
times as fast (Debian's libfaketime, preloaded; their timers stay on the
host's monotonic clock), and every `stepq enqueue` on the same clock.
--jobs jobs (default 1,000,000) are spread over --nights nights. Each job
asks the mock (tier `free`) for a summary, then posts it without an
idempotency key: to /posts/I of the main mock, whose every 200th answer
is a 502 (the post is in doubt: parked `in_doubt` for a human), or, one
job in 100, to /capped/I of a second mock (another host), which answers
a daily cap ("429 daily quota exceeded") after every 250 posts (at
33,333 jobs a night; three quarters of a night's posts to it): its wall
holds until the end of the UTC day, and every post to it meanwhile is
parked unsent (`hard_quota`). Each night from 00:00 to 06:00 the jobs
come in chunks of 1,000, as programs enqueue them: by turns a file of
1,000 JSON lines through `stepq enqueue` and ten `POST /v1/jobs` of 100
through serve. Four schedules fire at 01:15, 02:15, 03:15 and 04:15 (a
chat step and a post to /comments/NAME/DATE), the morning report goes
to a hook at 07:00, and the retention keeps finished jobs 3 days and
their bodies 1 day. At 08:00 a script resolves every open park item
through serve's API (`in_doubt`: done 60%, retry 20%, fail 20%;
`hard_quota`: retry not before the next midnight 80%, done 10%, fail
10%). All along a reader asks serve for /v1/status, /metrics, a page of
jobs and /v1/park every second and the report every 10 s.

At 12:00 each night the bench samples the worker's and serve's largest
VmRSS and open descriptors since the last sample (/proc, read every
second: at one moment they swing between levels), their CPU seconds, the database file and its
-wal (bytes) and its page count. After the last night it resolves what
is left as done, waits for the queue to empty and stops both with
SIGTERM (each must exit 0: an ASan build's LeakSanitizer report makes
the exit non-zero and is printed). Then it reads the mocks' request logs:
a job whose post was never answered 2xx, that no human ended and that
the store never held as failed (looked at each night) is lost; a post
answered 2xx twice, or sent more often than once plus its retries, was
sent twice.

It prints a table of the nights and a verdict, and exits 1 when, from
night 4 on, the worker's or serve's RSS (not judged in an ASan build:
its quarantine keeps freed memory), their descriptors or the database's
pages (as SQLite sees them, the -wal's included) or the bytes of the
file and its -wal at noon grew by more than 5% (the largest of the last
three nights against the largest of nights 4 to 6), when a job was lost or failed (other than by a human), a post
sent twice, a schedule's post missing, a report missing, or a process
did not end cleanly, or the -wal at a noon was over 33 MiB (it is
folded into the file at 32 MiB and cut back to that size each time it
starts over; while serve's readers hold snapshots it grows past it, and
the table shows each night's largest, read every second, as wal_top).
The table and the verdict are bench/month_report.py. The processes' event loops wait on the host's time:
libfaketime would divide their timeouts by its speed, and an idle loop
would spin (month_shim.c, built with cc and preloaded first). Standard
library only.
"""

import argparse
import calendar
import glob
import http.client
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import die, start_mock, stop_mock  # noqa: E402
from month_report import (DAY, NIGHT0, SCHEDULES, counts, mib,  # noqa: E402
                          report)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BIN = os.path.join(HERE, "..", "build", "release", "cli", "stepq")
TOKEN = "month-token-0123456789abcdef"
HZ = os.sysconf("SC_CLK_TCK")
START = calendar.timegm((2026, 10, 31, 22, 0, 0))  # fake clock at start
CHUNK = 1000  # jobs per enqueue chunk


class Clock:
    """The fake clock every stepq process of the run shares."""

    def __init__(self, rate):
        self.rate = rate
        self.real0 = time.time()

    def now(self):
        return START + (time.time() - self.real0) * self.rate

    def sleep_until(self, fake):
        left = (fake - self.now()) / self.rate
        if left > 0:
            time.sleep(left)

    shim = None  # month_shim.so, built by build_shim()

    def env(self):
        """The environment of a process started now on this clock: its
        libfaketime starts at the next whole fake second, so the process
        is started when that second comes."""
        fake = int(self.now()) + 1
        self.sleep_until(fake)
        lib = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
        if not lib:
            die("libfaketime is not installed (apt-get install faketime)")
        asan = os.environ.get("ASAN_OPTIONS", "")
        return dict(
            os.environ,
            LD_PRELOAD="%s:%s" % (self.shim, lib[0]),
            FAKETIME="@%s x%g" % (time.strftime("%Y-%m-%d %H:%M:%S",
                                                time.gmtime(fake)), self.rate),
            FAKETIME_DONT_FAKE_MONOTONIC="1",
            TZ="UTC",
            STEPQ_TOKEN=TOKEN,
            ASAN_OPTIONS=(asan + ":" if asan else "")
            + "verify_asan_link_order=0",
        )


def build_shim(folder):
    """Builds month_shim.c (the event loops' waits on the host's time,
    not libfaketime's) into folder; returns its path."""
    out = os.path.join(folder, "month_shim.so")
    r = subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", out,
                        os.path.join(HERE, "month_shim.c"), "-ldl"],
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        die("cc month_shim.c: %s" % r.stderr.decode())
    return out


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def job_line(i, port, capped_port):
    if i % 100 == 99:
        url = "http://127.0.0.1:%d/capped/%d" % (capped_port, i)
    else:
        url = "http://127.0.0.1:%d/posts/%d" % (port, i)
    return json.dumps({
        "name": "m%d" % i,
        "deadline_s": DAY,
        "steps": [
            {"name": "ask", "request": {"messages": [
                {"role": "user", "content": "Summarize item %d of the night" % i}]}},
            {"name": "post", "kind": "http", "http": {
                "method": "POST", "url": url,
                "body": {"text": "{{steps.ask.output}}"}}},
        ],
    }, separators=(",", ":"))


def config(port):
    scheds = []
    for name, hour in SCHEDULES:
        scheds.append({
            "name": name, "cron": "15 %d * * *" % hour,
            "job": {"name": name, "deadline_s": DAY, "steps": [
                {"name": "ask", "request": {"messages": [
                    {"role": "user", "content": "night of {{schedule.date}}"}]}},
                {"name": "post", "kind": "http", "http": {
                    "method": "POST",
                    "url": "http://127.0.0.1:%d/comments/{{schedule.name}}/"
                           "{{schedule.date}}" % port,
                    "body": {"text": "{{steps.ask.output}}"}}}]}})
    return {
        "worker": {"lease_s": 86400, "idle_poll_ms": 100},
        "tiers": [{"name": "free", "base_url": "http://127.0.0.1:%d/free/v1" % port,
                   "model": "small"}],
        "retention": {"finished_jobs_days": 3, "attempt_bodies_days": 1},
        "on_report": {"cron": "0 7 * * *",
                      "command": "cat >> reports.jsonl; echo >> reports.jsonl"},
        "schedules": scheds,
    }


class Serve:
    """A kept-alive connection to serve (one per thread)."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def call(self, method, path, body=None):
        for attempt in range(50):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(
                        "127.0.0.1", self.port, timeout=120)
                self.conn.request(method, path, body=body, headers={
                    "Authorization": "Bearer " + TOKEN,
                    "Content-Type": "application/json"})
                r = self.conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException):
                self.conn = None
                time.sleep(0.1)
                continue
            if r.status == 503:  # busy: try again, as a program would
                time.sleep(0.05)
                continue
            return r.status, data
        die("serve: %s %s failed 50 times" % (method, path))


def proc_sample(pid):
    with open("/proc/%d/status" % pid) as f:
        rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    fds = len(os.listdir("/proc/%d/fd" % pid))
    with open("/proc/%d/stat" % pid) as f:
        st = f.read().rsplit(")", 1)[1].split()
    return rss, fds, (int(st[11]) + int(st[12])) / HZ


def size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class Run:
    def __init__(self, args, folder):
        self.a = args
        self.dir = folder
        self.rate = DAY / args.night_s
        self.clock = Clock(self.rate)
        self.per_night = args.jobs // args.nights
        self.stop_reader = threading.Event()
        self.reads = [0, 0]  # answered, failed
        # the largest RSS and descriptors of each process since the last
        # noon's sample, read every second by the reader
        self.peaks = {}
        self.ended_by_human = set()  # job indexes resolved done or fail
        self.retries = {}  # job index -> retries a human asked for
        self.resolved = {"retry": 0, "done": 0, "fail": 0}
        self.failed = {}  # job name -> error, of every job seen failed
        self.procs = {}
        ldd = subprocess.run(["ldd", args.bin], stdout=subprocess.PIPE)
        self.asan = b"libasan" in ldd.stdout

    def path(self, name):
        return os.path.join(self.dir, name)

    def spawn(self, name, argv):
        err = open(self.path(name + ".log"), "ab")
        p = subprocess.Popen([self.a.bin, "--db", "stepq.db"] + argv,
                             cwd=self.dir, env=self.clock.env(),
                             stdout=subprocess.PIPE, stderr=err)
        err.close()
        self.procs[name] = p
        return p

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        Clock.shim = build_shim(self.dir)
        script = {"routes": [
            {"path": "/posts", "loop": True,
             "answers": [{"count": 199}, {"status": 502}]},
            {"path": "/comments"}, {"path": "/free"}]}
        self.mock, self.port = start_mock(self.a.bin, self.dir, script)
        capped_dir = self.path("capped")
        os.makedirs(capped_dir, exist_ok=True)
        self.capped, self.capped_port = start_mock(self.a.bin, capped_dir, {
            "routes": [{"path": "/capped", "loop": True, "answers": [
                {"count": max(5, self.per_night // 100 * 3 // 4)},
                {"status": 429, "body": "daily quota exceeded"}]}]})
        with open(self.path("stepq.json"), "w") as f:
            json.dump(config(self.port), f)
        r = subprocess.run([self.a.bin, "--db", "stepq.db", "init"],
                           cwd=self.dir, env=self.clock.env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            die("stepq init: %s" % r.stderr.decode())
        self.worker = self.spawn("work", ["work", "--concurrency",
                                          str(self.a.concurrency),
                                          "--worker-id", "w"])
        self.serve = self.spawn("serve", ["serve", "--listen", "127.0.0.1:0"])
        line = self.serve.stdout.readline().decode().strip()
        if not line.startswith("listening 127.0.0.1:"):
            die("serve did not start: %r" % line)
        self.api = Serve(int(line.rsplit(":", 1)[1]))
        self.reader = threading.Thread(target=self.read_loop, daemon=True)
        self.reader.start()

    def read_loop(self):
        api = Serve(self.api.port)
        n = 0
        while not self.stop_reader.wait(1.0):
            paths = ["/v1/status", "/metrics", "/v1/jobs?state=all&limit=100",
                     "/v1/park"]
            if n % 10 == 0:
                paths.append("/v1/report?since=24h")
            for p in paths:
                st, _ = api.call("GET", p)
                self.reads[0 if st == 200 else 1] += 1
            self.note_peaks()
            n += 1

    def note_peaks(self):
        wal = size(self.path("stepq.db-wal"))
        self.peaks["wal"] = max(self.peaks.get("wal", 0), wal)
        for who, proc in (("w", self.worker), ("s", self.serve)):
            try:
                rss, fds, _ = proc_sample(proc.pid)
            except (OSError, StopIteration):
                continue  # ended: the last sample stands
            for key, v in (("rss", rss), ("fds", fds)):
                k = who + "_" + key
                self.peaks[k] = max(self.peaks.get(k, 0), v)

    def enqueue_chunk(self, first, count, k):
        lines = [job_line(i, self.port, self.capped_port)
                 for i in range(first, first + count)]
        if k % 2 == 0:  # a program's file through `stepq enqueue`
            path = self.path("chunk.jsonl")
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            r = subprocess.run([self.a.bin, "--db", "stepq.db", "enqueue",
                                "chunk.jsonl"], cwd=self.dir,
                               env=self.clock.env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
            if r.returncode != 0:
                die("stepq enqueue: exit %d: %s" % (r.returncode, r.stderr))
            return
        for at in range(0, count, 100):  # a program through the API
            st, body = self.api.call("POST", "/v1/jobs",
                                     "\n".join(lines[at:at + 100]))
            if st != 201:
                die("POST /v1/jobs: %d %s" % (st, body[:200]))

    def night(self, d, first):
        """Night d (0-based): its jobs first..first+per_night-1."""
        midnight = NIGHT0 + d * DAY
        n = self.per_night if d < self.a.nights - 1 else \
            self.a.jobs - first
        chunks = (n + CHUNK - 1) // CHUNK
        for k in range(chunks):
            self.clock.sleep_until(midnight + 6 * 3600 * k / max(chunks, 1))
            self.enqueue_chunk(first + k * CHUNK,
                               min(CHUNK, n - k * CHUNK), k)
        self.clock.sleep_until(midnight + 8 * 3600)
        before = sum(self.resolved.values())
        self.resolve_all(morning=midnight + 8 * 3600)
        resolved = sum(self.resolved.values()) - before
        self.clock.sleep_until(midnight + 12 * 3600)
        return self.sample(d) | {"resolved": resolved}, first + n

    def open_items(self):
        st, body = self.api.call("GET", "/v1/park?state=open&job_names=true")
        if st != 200:
            die("GET /v1/park: %d" % st)
        return json.loads(body)

    def resolve(self, item, how, not_before=None):
        body = {"resolution": how, "by": "morning-script",
                "note": "month bench"}
        if how == "done":
            body["output"] = "checked by hand"
        if not_before is not None:
            body["not_before"] = iso(not_before)
        st, data = self.api.call("POST", "/v1/park/%d/resolve" % item["id"],
                                 json.dumps(body))
        if st == 409:
            return
        if st != 200:
            die("resolve %d %s: %d %s" % (item["id"], how, st, data[:200]))
        i = int(item["job_name"][1:]) if item["job_name"][0] == "m" else -1
        self.resolved[how] += 1
        if how == "retry":
            self.retries[i] = self.retries.get(i, 0) + 1
        else:
            self.ended_by_human.add(i)

    def resolve_all(self, morning=None):
        """The morning script (morning: the fake time it runs at), or with
        None the last sweep (everything done)."""
        for item in self.open_items():
            h = item["id"] % 10
            if morning is None:
                self.resolve(item, "done")
            elif item["reason"] == "hard_quota":
                if h < 8:
                    next_midnight = (int(morning) // DAY + 1) * DAY + 300
                    self.resolve(item, "retry", next_midnight)
                else:
                    self.resolve(item, "done" if h == 8 else "fail")
            else:
                self.resolve(item, "done" if h < 6 else
                             "retry" if h < 8 else "fail")

    def status(self):
        st, body = self.api.call("GET", "/v1/status")
        return json.loads(body)

    def sample(self, d):
        s = {"night": d + 1}
        s["w_rss"], s["w_fds"], s["w_cpu"] = proc_sample(self.worker.pid)
        s["s_rss"], s["s_fds"], s["s_cpu"] = proc_sample(self.serve.pid)
        # RSS and descriptors are the night's largest (read every second):
        # at one moment they swing between levels (mimalloc gives pages
        # back or not; connections open or not) and say nothing of growth
        self.note_peaks()
        for k in ("w_rss", "w_fds", "s_rss", "s_fds"):
            s[k] = max(s[k], self.peaks.pop(k, 0))
        s["db"] = size(self.path("stepq.db"))
        s["wal"] = size(self.path("stepq.db-wal"))
        s["wal_top"] = max(s["wal"], self.peaks.pop("wal", 0))
        con = sqlite3.connect("file:%s?mode=ro" % self.path("stepq.db"),
                              uri=True, timeout=30)
        s["pages"] = con.execute("PRAGMA page_count").fetchone()[0]
        s["free"] = con.execute("PRAGMA freelist_count").fetchone()[0]
        con.close()
        self.read_failed()
        st = self.status()
        s["jobs"] = st
        s["real_s"] = time.time() - self.clock.real0
        return s

    def read_failed(self):
        """Notes the jobs the store holds as failed (state 3) with their
        error: the retention keeps them 3 days, so a look each night sees
        every one."""
        con = sqlite3.connect("file:%s?mode=ro" % self.path("stepq.db"),
                              uri=True, timeout=30)
        for name, err in con.execute(
                "SELECT name, error FROM jobs WHERE state = 3"):
            self.failed[name] = err or ""
        con.close()

    def finish(self):
        """Resolve what is left, wait for the queue to empty, stop both."""
        deadline = time.time() + 600
        while time.time() < deadline:
            self.resolve_all()
            c = counts(self.status())
            if c.get("queued", 0) + c.get("running", 0) + \
                    c.get("parked", 0) == 0:
                break
            time.sleep(1)
        else:
            print("month: the queue did not empty in 600 s: %s" % c)
        self.stop_reader.set()
        self.reader.join()
        codes = {}
        for name in ("work", "serve"):
            p = self.procs[name]
            p.send_signal(signal.SIGTERM)
            try:
                codes[name] = p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                codes[name] = p.wait()
            p.stdout.close()
        stop_mock(self.mock)
        stop_mock(self.capped)
        self.read_failed()
        return codes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=1000000)
    ap.add_argument("--nights", type=int, default=30)
    ap.add_argument("--night-s", type=float, default=120.0)
    ap.add_argument("--bin", default=DEFAULT_BIN)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--dir", help="run folder (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the folder")
    ap.add_argument("--json", help="write the samples to this file")
    a = ap.parse_args()
    if a.jobs < a.nights or a.nights < 1 or a.nights > 60 or a.night_s < 5:
        die("--jobs at least --nights, --nights 1 to 60, --night-s >= 5")
    a.bin = os.path.abspath(a.bin)
    if not os.access(a.bin, os.X_OK):
        die("no binary at %s (cmake --build --preset release)" % a.bin)
    folder = a.dir or tempfile.mkdtemp(prefix="stepq-month-")
    run = Run(a, folder)
    t0 = time.time()
    samples, first = [], 0
    try:
        run.start()
        for d in range(a.nights):
            s, first = run.night(d, first)
            samples.append(s)
            c = counts(s["jobs"])
            print("night %2d: %7.0f s, worker %.1f MiB %d fds, serve %.1f MiB,"
                  " file %.1f + %.1f MiB, backlog %d, parked %d" % (
                      d + 1, s["real_s"], s["w_rss"] / 1024.0, s["w_fds"],
                      s["s_rss"] / 1024.0, mib(s["db"]), mib(s["wal"]),
                      c.get("queued", 0) + c.get("running", 0),
                      c.get("parked", 0)), flush=True)
        codes = run.finish()
    except BaseException:
        for p in run.procs.values():
            if p.poll() is None:
                p.kill()
        print("month: run folder %s" % folder, file=sys.stderr)
        raise
    fails = report(run, samples, codes, time.time() - t0)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(samples, f, indent=1)
    if a.keep or fails:
        print("run folder: %s" % folder)
    else:
        shutil.rmtree(folder)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()

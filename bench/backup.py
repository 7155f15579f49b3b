#!/usr/bin/env python3
"""backup.py: `stepq backup` and `stepq prune` on big SQLite files
(issue 45). Standard library only; run on demand, never in the tests.

  python3 bench/backup.py --bin build/release/cli/stepq [--jobs 100000]
      [--prune-jobs 250000] [--runs 3]

Backup: a file of JOBS finished jobs (one step, two attempts each with a
400-byte body) is made once with `stepq init` and rows inserted through
Python's sqlite3 (the same libsqlite3 as stepq). Then, median of RUNS:
  vacuum_into      `stepq backup DEST` (VACUUM INTO, what stepq does)
  api_one_step     sqlite3_backup_step(-1): the online backup in one step
  api_stepped      sqlite3_backup_step(100 pages), 1 ms sleep between steps
and the last two again while another process commits a write every 5 ms
(as workers do): a stepped backup starts over whenever another connection
writes between two of its steps (capped at 60 s).

Prune: PRUNE_JOBS finished jobs with four attempts each (1,000,000
attempts at the default), `stepq prune --older-than 0s` on a fresh copy
each run.
"""

import argparse
import multiprocessing
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

BODY = "x" * 400


def make_file(bin_, path, jobs, attempts_per_job):
    subprocess.run([bin_, "--db", path, "init"], check=True,
                   stdout=subprocess.DEVNULL)
    db = sqlite3.connect(path)
    now = int(time.time() * 1000) - 3600 * 1000
    spec = ('{"name":"n","steps":[{"name":"a","request":{"messages":'
            '[{"role":"user","content":"hi"}]}}]}')
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO jobs (id, name, state, run_at, deadline_at, created_at,"
        " updated_at, spec) VALUES (?, 'n', 2, ?, ?, ?, ?, ?)",
        # Even jobs finished two days ago: `prune --older-than 1d` takes
        # half.
        ((i, now, now + 3600000, now, now - (i % 2 == 0) * 2 * 86400000, spec)
         for i in range(1, jobs + 1)))
    db.executemany(
        "INSERT INTO steps (job_id, idx, state, tier, attempts, output)"
        " VALUES (?, 0, 2, 'free', ?, 'done')",
        ((i, attempts_per_job) for i in range(1, jobs + 1)))
    db.executemany(
        "INSERT INTO attempts (job_id, step, attempt, tier, worker,"
        " started_at, finished_at, status, outcome, decision, latency_ms,"
        " tokens, body) VALUES (?, 0, ?, 'free', 'w', ?, ?, 200, 'ok',"
        " 'commit', 100, 50, ?)",
        ((i, a, now, now, BODY) for i in range(1, jobs + 1)
         for a in range(attempts_per_job)))
    db.execute("COMMIT")
    db.close()


def writer(path, stop):
    """Commits a small write every 5 ms until stop is set."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA busy_timeout = 5000")
    n = 0
    while not stop.is_set():
        db.execute("UPDATE jobs SET updated_at = updated_at + 1 WHERE id = ?",
                   (1 + n % 1000,))
        n += 1
        time.sleep(0.005)
    db.close()


def api_backup(src, dest, pages, sleep, cap_s=60.0):
    """The online backup API; seconds, or None when it did not end."""
    s = sqlite3.connect(src)
    d = sqlite3.connect(dest)
    t0 = time.monotonic()
    done = True
    if pages < 0:
        s.backup(d)
    else:
        # sqlite3's own loop has no cap: step by hand with the same calls.
        class Cap(Exception):
            pass

        # Python's own sleep= applies only after SQLITE_BUSY: sleep after
        # every step here, as a backup that leaves room to workers would.
        def progress(status, remaining, total):
            if time.monotonic() - t0 > cap_s:
                raise Cap()
            time.sleep(sleep)

        try:
            s.backup(d, pages=pages, progress=progress)
        except Cap:
            done = False
    el = time.monotonic() - t0
    s.close()
    d.close()
    return el if done else None


def vacuum_into(bin_, src, dest):
    t0 = time.monotonic()
    subprocess.run([bin_, "--db", src, "backup", dest], check=True,
                   stdout=subprocess.DEVNULL)
    return time.monotonic() - t0


def timed(fn, runs, dest):
    xs = []
    for _ in range(runs):
        for p in (dest, dest + ".tmp"):
            if os.path.exists(p):
                os.unlink(p)
        xs.append(fn())
    return xs


def fmt(xs):
    ok = [x for x in xs if x is not None]
    if len(ok) < len(xs):
        return "did not end within 60 s in %d of %d runs" % (
            len(xs) - len(ok), len(xs))
    return "%.2f s (runs %s)" % (statistics.median(ok),
                                 ", ".join("%.2f" % x for x in ok))


def bench_backup(bin_, d, jobs, runs):
    src = os.path.join(d, "src.db")
    dest = os.path.join(d, "b.db")
    make_file(bin_, src, jobs, 2)
    print("file: %d jobs, %d attempts, %.1f MB" %
          (jobs, 2 * jobs, os.path.getsize(src) / 1e6))
    rows = [
        ("vacuum_into", lambda: vacuum_into(bin_, src, dest)),
        ("api_one_step", lambda: api_backup(src, dest, -1, 0)),
        ("api_stepped", lambda: api_backup(src, dest, 100, 0.001)),
    ]
    for name, fn in rows:
        xs = timed(fn, runs, dest)
        print("%-14s idle:        %s, %.1f MB" %
              (name, fmt(xs), os.path.getsize(dest) / 1e6))
    for name, fn in rows:
        stop = multiprocessing.Event()
        w = multiprocessing.Process(target=writer, args=(src, stop))
        w.start()
        time.sleep(0.2)
        xs = timed(fn, runs, dest)
        stop.set()
        w.join()
        print("%-14s under writes: %s" % (name, fmt(xs)))


def bench_compact(bin_, d, jobs):
    """After a prune of half the jobs the file keeps its size (free
    pages): a page copy keeps them, VACUUM INTO leaves them out."""
    src = os.path.join(d, "src.db")
    dest = os.path.join(d, "b.db")
    make_file(bin_, src, jobs, 2)
    subprocess.run([bin_, "--db", src, "prune", "--older-than", "1d"],
                   check=True, stdout=subprocess.DEVNULL)
    print("after pruning half the jobs: file %.1f MB" %
          (os.path.getsize(src) / 1e6))
    for name, fn in (("vacuum_into", lambda: vacuum_into(bin_, src, dest)),
                     ("api_one_step", lambda: api_backup(src, dest, -1, 0))):
        x = timed(fn, 1, dest)[0]
        print("%-14s backup: %.2f s, %.1f MB" %
              (name, x, os.path.getsize(dest) / 1e6))


def bench_prune(bin_, d, jobs, runs):
    tmpl = os.path.join(d, "prune-template.db")
    make_file(bin_, tmpl, jobs, 4)
    print("file: %d jobs, %d attempts, %.1f MB" %
          (jobs, 4 * jobs, os.path.getsize(tmpl) / 1e6))
    cfg = os.path.join(d, "bodies.json")
    with open(cfg, "w") as f:
        f.write('{"retention": {"attempt_bodies_days": 1}}')
    for what, args in (
            ("prune --older-than 0s (every job)", ["--older-than", "0s"]),
            ("prune, attempt_bodies_days 1 (half the bodies)",
             ["--config", cfg])):
        xs = []
        for _ in range(runs):
            db = os.path.join(d, "prune.db")
            shutil.copy(tmpl, db)
            t0 = time.monotonic()
            subprocess.run([bin_, "--db", db, "prune"] + args, check=True,
                           stdout=subprocess.DEVNULL)
            xs.append(time.monotonic() - t0)
            os.unlink(db)
        print("%s: %s" % (what, fmt(xs)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--jobs", type=int, default=100000)
    ap.add_argument("--prune-jobs", type=int, default=250000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", choices=["backup", "compact", "prune"])
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="stepq-bench-backup-")
    try:
        if a.only in (None, "backup"):
            bench_backup(os.path.abspath(a.bin), d, a.jobs, a.runs)
        if a.only in (None, "compact"):
            bench_compact(os.path.abspath(a.bin), d, a.jobs)
        if a.only in (None, "prune"):
            bench_prune(os.path.abspath(a.bin), d, a.prune_jobs, a.runs)
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    sys.exit(main())

"""bench/month_report.py: the table and the verdict of bench/month.py
(read its docstring): the nights' samples, the mocks' request logs read
for lost jobs and posts sent twice, and the rules a month must pass.
Standard library only."""

import calendar
import os
import re
import time

from benchlib import cpu_model, mem_gib

DAY = 86400
NIGHT0 = calendar.timegm((2026, 11, 1, 0, 0, 0))  # midnight of night 1
SCHEDULES = (("a", 1), ("b", 2), ("c", 3), ("d", 4))
# The -wal at noon: folded in at 32 MiB (8,192 pages) and cut back to
# that (journal_size_limit) each time it starts over, plus a transaction
WAL_CAP = 33 << 20
WARM = 3  # nights 1..WARM are warm-up; the rule reads nights 4 on


def counts(status):
    """status --json's counts of jobs by state (shape-tolerant)."""
    jobs = status.get("jobs", status)
    return {k: v for k, v in jobs.items() if isinstance(v, int)}


POST_RE = re.compile(rb'"path":"/(posts|capped|comments)/([^"]*)".*?"status":(\d+|null)')


def read_posts(path, n):
    """Per job index: 2xx answers and sends; and the schedules' 2xx posts."""
    ok, sent, comments = bytearray(n), bytearray(n), {}
    with open(path, "rb") as f:
        for line in f:
            m = POST_RE.search(line)
            if m is None:
                continue
            good = m.group(3).startswith(b"2")
            if m.group(1) == b"comments":
                key = m.group(2).decode()
                comments[key] = comments.get(key, 0) + good
                continue
            i = int(m.group(2))
            sent[i] = min(sent[i] + 1, 255)
            ok[i] = min(ok[i] + good, 255)
    return ok, sent, comments


def mib(b):
    return b / 1048576.0


def growth(samples, key):
    """The largest of the last three nights against the largest of nights
    WARM+1..WARM+3, as a ratio (1.0: flat)."""
    base = max(s[key] for s in samples[WARM:WARM + 3])
    end = max(s[key] for s in samples[-3:])
    return end / base if base else 1.0


def report(run, samples, codes, t_wall):
    a = run.a
    print("month: %d jobs over %d nights of %g s (clock x%g), concurrency %d"
          % (a.jobs, a.nights, a.night_s, run.rate, a.concurrency))
    print("machine: %s, %d CPUs, %.1f GiB; load at the end %.2f %.2f %.2f"
          % (cpu_model(), os.cpu_count(), mem_gib(), *os.getloadavg()))
    print("binary: %s" % a.bin)
    print()
    print("night  real_s  w_rss_MiB w_fds w_cpu_s  s_rss_MiB s_fds s_cpu_s"
          "   db_MiB wal_MiB wal_top   pages  free  jobs_in_db backlog"
          " parked resolved")
    for s in samples:
        c = counts(s["jobs"])
        total = sum(c.values())
        backlog = c.get("queued", 0) + c.get("running", 0)
        print("%5d %7.0f %10.1f %5d %7.1f %10.1f %5d %7.1f %8.1f %7.1f %7.1f"
              " %7d %5d %11d %7d %6d %8d" % (
                  s["night"], s["real_s"], s["w_rss"] / 1024.0, s["w_fds"],
                  s["w_cpu"], s["s_rss"] / 1024.0, s["s_fds"], s["s_cpu"],
                  mib(s["db"]), mib(s["wal"]), mib(s["wal_top"]), s["pages"],
                  s["free"], total, backlog, c.get("parked", 0),
                  s["resolved"]))
    fails = []
    print()
    for s in samples:
        s["disk"] = s["db"] + s["wal"]
    if len(samples) >= WARM + 6:
        for key, what in (("w_rss", "worker RSS"), ("w_fds", "worker fds"),
                          ("s_rss", "serve RSS"), ("s_fds", "serve fds"),
                          ("pages", "database pages"),
                          ("disk", "file and -wal")):
            g = growth(samples, key)
            judged = not (run.asan and key.endswith("rss"))
            print("%-16s last 3 nights / nights %d-%d: %.3f%s" % (
                what, WARM + 1, WARM + 3, g, "" if judged else
                " (not judged: ASan's quarantine keeps freed memory)"))
            if g > 1.05 and judged:
                fails.append("%s grew %.1f%%" % (what, (g - 1) * 100))
    else:
        print("too few nights for the growth rule (%d)" % len(samples))
    wal = max(s["wal"] for s in samples)
    print("-wal at noon: at most %.1f MiB (folded into the file at 32 MiB and"
          " cut back to it); its largest, read every second: %.1f MiB"
          % (mib(wal), mib(max(s["wal_top"] for s in samples))))
    if wal > WAL_CAP:
        fails.append("the -wal was %.1f MiB at a noon" % mib(wal))
    ok, sent, comments = read_posts(run.path("mock.log"), a.jobs)
    cok, csent, _ = read_posts(run.path("capped/mock.log"), a.jobs)
    lost = twice = 0
    examples, why = [], {}
    for i in range(a.jobs):
        good, n = ok[i] + cok[i], sent[i] + csent[i]
        if good == 0 and i not in run.ended_by_human:
            err = run.failed.get("m%d" % i)
            if err is not None:  # failed by the worker, not by a human
                key = re.sub(r"[0-9T:Z-]{10,}", "T", err)[:90]
                why[key] = why.get(key, 0) + 1
                continue
            lost += 1
            if len(examples) < 5:
                examples.append("m%d lost" % i)
        if good > 1 or n > 1 + run.retries.get(i, 0):
            twice += 1
            if len(examples) < 5:
                examples.append("m%d: %d sends, %d answered 2xx" % (i, n, good))
    missing = [name for name in ("%s/2026-%s" % (s, d)
               for d in nights_dates(a.nights) for s, _ in SCHEDULES)
               if comments.get(name, 0) != 1]
    reports = 0
    try:
        with open(run.path("reports.jsonl")) as f:
            reports = sum(1 for l in f if '"since"' in l)
    except OSError:
        pass
    print("jobs: %d enqueued, %d posted, %d ended by a human (done or fail),"
          " %d failed by the worker, %d lost, %d posts sent twice" % (
              a.jobs, sum(1 for i in range(a.jobs) if ok[i] or cok[i]),
              len(run.ended_by_human), sum(why.values()), lost, twice))
    for key, k in sorted(why.items(), key=lambda kv: -kv[1])[:4]:
        print("  failed %d: %s" % (k, key))
    print("park items resolved by the morning script: %s"
          % ", ".join("%s %d" % kv for kv in run.resolved.items()))
    print("schedules' posts: %d of %d sent once; reports: %d of %d"
          % (4 * a.nights - len(missing), 4 * a.nights, reports, a.nights))
    print("API reads: %d answered 200, %d not" % tuple(run.reads))
    print("exit codes: worker %s, serve %s; wall time %.0f s"
          % (codes["work"], codes["serve"], t_wall))
    for e in examples:
        print("  " + e)
    if lost:
        fails.append("%d jobs lost" % lost)
    if why:
        fails.append("%d jobs failed by the worker" % sum(why.values()))
    if twice:
        fails.append("%d posts sent twice" % twice)
    if missing:
        fails.append("schedules' posts not sent once: %s" % missing[:4])
    if reports < a.nights:
        fails.append("%d reports for %d mornings" % (reports, a.nights))
    for name, code in codes.items():
        if code != 0:
            fails.append("%s exited %s (see %s.log)" % (name, code, name))
    leaks = []
    for name in ("work", "serve"):
        with open(run.path(name + ".log"), errors="replace") as f:
            if "LeakSanitizer" in f.read():
                leaks.append(name)
    if leaks:
        fails.append("LeakSanitizer reported in %s" % ", ".join(leaks))
    print("verdict: %s" % ("FAIL: " + "; ".join(fails) if fails else
                           "PASS: flat after night %d, nothing lost or sent"
                           " twice" % WARM))
    return fails


def nights_dates(n):
    for d in range(n):
        t = time.gmtime(NIGHT0 + d * DAY)
        yield "%02d-%02d" % (t.tm_mon, t.tm_mday)

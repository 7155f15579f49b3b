"""baseline.py: a plain retry loop, the client stepq is compared with in
bench/quota.py. Standard library only.

It is what many scripts do: T threads (T = the concurrency being measured),
each takes the next job and sends its one chat request to the first tier;
on a 429 it sleeps what Retry-After says (1 s when absent) and sends again;
any other failure (5xx, a transport error) is sent again at once; after 3
failures on a tier it goes to the next tier; after the last tier the job
fails. One keep-alive connection per thread. It reads no other header and
knows no limit: it learns nothing.
"""

import http.client
import json
import queue
import threading
import time

FAILURES_PER_TIER = 3


def _request_body(job_text, model):
    job = json.loads(job_text)
    req = dict(job["steps"][0]["request"])
    req["model"] = model
    return json.dumps(req).encode()


class _Conn:
    def __init__(self, port, timeout):
        self.port = port
        self.timeout = timeout
        self.c = None

    def post(self, path, body):
        """Returns (status, headers dict lower-cased) or (None, {})."""
        for _ in range(2):
            if self.c is None:
                self.c = http.client.HTTPConnection("127.0.0.1", self.port,
                                                    timeout=self.timeout)
            try:
                self.c.request("POST", path, body=body, headers={
                    "Content-Type": "application/json",
                    "Authorization": "Bearer baseline"})
                r = self.c.getresponse()
                r.read()
                h = {k.lower(): v for k, v in r.getheaders()}
                if h.get("connection", "").lower() == "close":
                    self.close()
                return r.status, h
            except (OSError, http.client.HTTPException):
                self.close()
        return None, {}

    def close(self):
        if self.c is not None:
            self.c.close()
            self.c = None


def _retry_after(h):
    try:
        v = float(h.get("retry-after", "1"))
        return v if 0 <= v <= 600 else 1.0
    except ValueError:
        return 1.0


def run(port, tiers, job_text, jobs, concurrency, arrival_per_s=None,
        timeout_s=60, deadline_s=600):
    """Runs jobs one-step jobs against tiers (a list of (name, path)) with
    concurrency threads; with arrival_per_s the jobs arrive at that rate
    instead of all at once. Returns {"ok", "failed", "wall_s"}."""
    bodies = {name: _request_body(job_text, "bench-model")
              for name, _ in tiers}
    q = queue.Queue()
    done = {"ok": 0, "failed": 0}
    lock = threading.Lock()
    stop_at = time.monotonic() + deadline_s

    def worker():
        conn = _Conn(port, timeout_s)
        try:
            while True:
                job = q.get()
                if job is None:
                    return
                ok = False
                for name, path in tiers:
                    failures = 0
                    while failures < FAILURES_PER_TIER and not ok:
                        if time.monotonic() > stop_at:
                            break
                        status, h = conn.post(path, bodies[name])
                        if status == 200:
                            ok = True
                        else:
                            failures += 1
                            if status == 429 and failures < FAILURES_PER_TIER:
                                time.sleep(_retry_after(h))
                    if ok:
                        break
                with lock:
                    done["ok" if ok else "failed"] += 1
        finally:
            conn.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, daemon=True)
               for _ in range(concurrency)]
    for t in threads:
        t.start()
    for i in range(jobs):
        if arrival_per_s:
            delay = t0 + i / float(arrival_per_s) - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        q.put(i)
    for _ in threads:
        q.put(None)
    for t in threads:
        t.join(max(0.0, stop_at - time.monotonic()) + 1)
    return {"ok": done["ok"], "failed": done["failed"],
            "wall_s": time.monotonic() - t0}

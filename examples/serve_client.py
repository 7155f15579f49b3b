#!/usr/bin/env python3
"""A client of `stepq serve`, Python standard library only.

    export STEPQ_TOKEN=...            # the token the server was started with
    python3 serve_client.py http://127.0.0.1:8377 enqueue job.json
    python3 serve_client.py http://127.0.0.1:8377 jobs [--state parked]
    python3 serve_client.py http://127.0.0.1:8377 park
    python3 serve_client.py http://127.0.0.1:8377 resolve 3 retry --by ana
    python3 serve_client.py http://127.0.0.1:8377 wait 7 --timeout 600

Each command prints the server's JSON answer. An error answer is printed
on stderr ("409 conflict: park item 3 is already resolved") and the exit
code is 1 (2 for a bad request, 3 not found, 4 conflict), as the CLI's.
`wait` exits as `stepq jobs wait` does: 0 succeeded, 5 failed or
cancelled, 6 parked, 7 the timeout came first.

Use the StepqClient class from your own program; its methods return the
decoded JSON and raise StepqError for an error answer.
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


class StepqError(Exception):
    """An error answer: HTTP status, error code and message."""

    def __init__(self, status, code, message):
        super().__init__("%d %s: %s" % (status, code, message))
        self.status, self.code, self.message = status, code, message


class StepqClient:
    """The API of `stepq serve` (docs/reference.md, "serve")."""

    def __init__(self, base, token=None, timeout=30):
        self.base = base.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _call(self, method, path, body=None, query=None, timeout=None):
        url = self.base + path
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(url, data=data, method=method,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) \
                    as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                err = json.loads(e.read())["error"]
                raise StepqError(e.code, err["code"], err["message"]) from None
            except (ValueError, KeyError, TypeError):
                raise StepqError(e.code, "http", e.reason) from None

    def enqueue(self, jobs):
        """One job (a dict), a list of jobs, or JSON text (bytes or str) as
        `stepq enqueue` reads it; all or none are written."""
        if isinstance(jobs, str):
            jobs = jobs.encode()
        return self._call("POST", "/v1/jobs", jobs)

    def jobs(self, state=None, limit=None, after=None):
        """One page of jobs, by id."""
        return self._call("GET", "/v1/jobs",
                          query={"state": state, "limit": limit,
                                 "after": after})

    def all_jobs(self, state=None, page=500):
        """Every job, page after page."""
        after = 0
        while True:
            rows = self.jobs(state, page, after)
            yield from rows
            if len(rows) < page:
                return
            after = rows[-1]["id"]

    def job(self, job_id):
        return self._call("GET", "/v1/jobs/%d" % job_id)

    # The server answers a wait within WAIT_MAX seconds (the long-poll's
    # bound): a longer wait asks again.
    WAIT_MAX = 50
    ENDS = ("succeeded", "failed", "cancelled", "parked")

    def wait(self, job_id, timeout=None):
        """The job once it ends or parks (GET /v1/jobs/ID?wait=), or as it
        is when timeout seconds (None: no limit) have passed. No request
        is sent more often than the job changes or 50 s pass. A job parked
        already is returned at once, as `stepq jobs wait` does (the server
        would wait for it to move on)."""
        end = None if timeout is None else time.monotonic() + timeout
        job = self.job(job_id)
        while job["state"] not in self.ENDS:
            left = self.WAIT_MAX if end is None else max(
                0, min(self.WAIT_MAX, int(end - time.monotonic())))
            job = self._call("GET", "/v1/jobs/%d" % job_id,
                             query={"wait": left},
                             timeout=left + self.timeout)
            if left == 0:
                break
        return job

    def cancel(self, job_id):
        return self._call("POST", "/v1/jobs/%d/cancel" % job_id, b"")

    def retry(self, job_id, from_step=None, by=None,
              force_side_effects=False):
        """Queue a failed or cancelled job again (jobs retry)."""
        body = {}
        for k, v in (("from", from_step), ("by", by)):
            if v is not None:
                body[k] = v
        if force_side_effects:
            body["force_side_effects"] = True
        return self._call("POST", "/v1/jobs/%d/retry" % job_id,
                          json.dumps(body).encode())

    def park(self, state=None, reason=None, tier=None, job_id=None):
        return self._call("GET", "/v1/park",
                          query={"state": state, "reason": reason,
                                 "tier": tier, "job_id": job_id})

    def park_item(self, item_id):
        return self._call("GET", "/v1/park/%d" % item_id)

    def resolve(self, item_id, resolution, by, note=None, tier=None,
                output=None):
        body = {"resolution": resolution, "by": by}
        for k, v in (("note", note), ("tier", tier), ("output", output)):
            if v is not None:
                body[k] = v
        return self._call("POST", "/v1/park/%d/resolve" % item_id, body)

    def resolve_matching(self, resolution, by, note=None, reason=None,
                         tier=None, job_id=None):
        body = {"resolution": resolution, "by": by}
        for k, v in (("note", note), ("reason", reason), ("tier", tier),
                     ("job_id", job_id)):
            if v is not None:
                body[k] = v
        return self._call("POST", "/v1/park/resolve", body)

    def tiers(self):
        return self._call("GET", "/v1/tiers")

    def status(self):
        return self._call("GET", "/v1/status")


EXIT = {400: 2, 404: 3, 409: 4}
WAIT_EXIT = {"succeeded": 0, "failed": 5, "cancelled": 5, "parked": 6}


def main(argv):
    ap = argparse.ArgumentParser(description="a client of stepq serve")
    ap.add_argument("url", help="the server, e.g. http://127.0.0.1:8377")
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("enqueue", help="enqueue a job file (- for stdin)")
    e.add_argument("file")
    j = sub.add_parser("jobs", help="every job")
    j.add_argument("--state")
    s = sub.add_parser("show", help="one job")
    s.add_argument("id", type=int)
    c = sub.add_parser("cancel", help="cancel a job")
    c.add_argument("id", type=int)
    w = sub.add_parser("wait", help="wait until a job ends or parks")
    w.add_argument("id", type=int)
    w.add_argument("--timeout", type=int, help="seconds (default: no limit)")
    p = sub.add_parser("park", help="open park items")
    p.add_argument("--all", action="store_true")
    r = sub.add_parser("resolve", help="resolve a park item")
    r.add_argument("id", type=int)
    r.add_argument("resolution", choices=["retry", "skip", "done", "fail"])
    r.add_argument("--by", default=os.environ.get("USER", "unknown"))
    r.add_argument("--note")
    r.add_argument("--tier")
    r.add_argument("--output", help="a file whose text is the step's output")
    sub.add_parser("tiers", help="each tier's state")
    sub.add_parser("status", help="jobs by state")
    a = ap.parse_args(argv)

    cl = StepqClient(a.url, os.environ.get("STEPQ_TOKEN"))
    try:
        if a.cmd == "enqueue":
            f = sys.stdin.buffer if a.file == "-" else open(a.file, "rb")
            with f:
                out = cl.enqueue(f.read())
        elif a.cmd == "jobs":
            out = list(cl.all_jobs(a.state))
        elif a.cmd == "show":
            out = cl.job(a.id)
        elif a.cmd == "cancel":
            out = cl.cancel(a.id)
        elif a.cmd == "wait":
            out = cl.wait(a.id, a.timeout)
            print(json.dumps(out))
            return WAIT_EXIT.get(out["state"], 7)
        elif a.cmd == "park":
            out = cl.park("all" if a.all else None)
        elif a.cmd == "resolve":
            output = None
            if a.output is not None:
                with open(a.output, encoding="utf-8") as f:
                    output = f.read()
            out = cl.resolve(a.id, a.resolution, a.by, a.note, a.tier, output)
        elif a.cmd == "tiers":
            out = cl.tiers()
        else:
            out = cl.status()
    except StepqError as err:
        print("serve_client: %s" % err, file=sys.stderr)
        return EXIT.get(err.status, 1)
    except (OSError, urllib.error.URLError) as err:
        print("serve_client: %s: %s" % (a.url, err), file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

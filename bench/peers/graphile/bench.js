#!/usr/bin/env node
/* bench/peers/graphile/bench.js: graphile-worker, the peer queue of
 * bench/pg.sh, measured the way bench_queue measures stepq's store.
 *
 *   node bench.js enqueue --url URL --schema S --jobs N --per 100|1
 *   node bench.js drain   --url URL --schema S --jobs N --procs P
 *                         --concurrency C [--take M] [--batch K]
 *
 * enqueue: migrates schema S (graphile-worker's own tables, not timed),
 *   then times adding N jobs, --per at a time: 100 per transaction with
 *   S.add_jobs (its bulk add) fed one JSON array per call, or one per
 *   transaction with S.add_job; prints jobs/s. Payload: the same JSON job
 *   text as bench_queue's, so both store rows of the same size.
 * drain: starts P worker processes (graphile-worker's run(), a no-op task,
 *   C jobs at a time each, a pool of C + 2 connections; with --batch K
 *   its batching: localQueue.size K, one query locking K jobs for the
 *   pool, and completeJobBatchDelay 0, the completions of one tick in one
 *   query), waits until each has loaded, then times from the first job's
 *   success (in any worker) until all N jobs queued in S have succeeded
 *   (counted from each worker's job:success events), or the first M of
 *   them with --take M (the queue as deep, the run shorter):
 *   (M - 1) / that span. The workers' start-up (connecting, checking the
 *   schema) is left out, in the peer's favour; stepq's rows include
 *   theirs (fork and connect). Prints jobs/s.
 * Output: one line "jobs/s NUMBER". The URL is never printed.
 */
"use strict";
const { fork } = require("child_process");
const { EventEmitter } = require("events");
const { Client } = require("pg");
const gw = require("graphile-worker");

const JOB = JSON.stringify({
  name: "bench",
  steps: [
    {
      name: "summarize",
      request: {
        messages: [
          {
            role: "user",
            content:
              "Summarize the merged pull requests of the night as JSON.",
          },
        ],
        max_tokens: 800,
      },
      expect_json: ["summary"],
    },
  ],
});

function args(argv) {
  const o = { mode: argv[0], jobs: 100000, per: 100, procs: 1,
    concurrency: 1, schema: "graphile_worker" };
  for (let i = 1; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, "");
    o[k] = ["url", "schema"].includes(k) ? argv[i + 1] : Number(argv[i + 1]);
  }
  if (!o.url || !/^[a-z_][a-z0-9_]*$/.test(o.schema)) {
    console.error("usage: see the comment at the top of bench.js");
    process.exit(2);
  }
  return o;
}

const quiet = new gw.Logger(() => () => {});

async function enqueue(o) {
  await gw.runMigrations({ connectionString: o.url, schema: o.schema,
    logger: quiet });
  const c = new Client({ connectionString: o.url });
  await c.connect();
  const specs = [];
  for (let i = 0; i < o.per; i++)
    specs.push({ identifier: "noop", payload: JSON.parse(JOB) });
  const many = JSON.stringify(specs);
  const t0 = process.hrtime.bigint();
  for (let done = 0; done < o.jobs; done += o.per) {
    if (o.per === 1)
      await c.query(`select ${o.schema}.add_job('noop', $1::json)`, [JOB]);
    else
      await c.query(`select ${o.schema}.add_jobs(array(select s from ` +
        `json_populate_recordset(null::${o.schema}.job_spec, $1::json) s))`,
        [many]);
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  await c.end();
  return o.jobs / secs;
}

/* A child: run() a worker on "go", report successes every 10 ms, stop on
 * "stop". */
async function child(o) {
  const events = new EventEmitter();
  let done = 0, sent = 0, runner = null, first = null;
  events.on("job:success", () => {
    if (done++ === 0) first = process.hrtime.bigint();
  });
  /* hrtime is the system's monotonic clock, the same in every process. */
  const tick = setInterval(() => {
    if (done > sent) {
      process.send({ done: done - sent, first: String(first) });
      sent = done;
    }
  }, 10);
  process.on("message", async (m) => {
    if (m === "go") {
      runner = await gw.run({ connectionString: o.url, schema: o.schema,
        concurrency: o.concurrency, maxPoolSize: o.concurrency + 2,
        noHandleSignals: true, pollInterval: 1000, logger: quiet, events,
        taskList: { noop: async () => {} },
        preset: o.batch > 1 ? { worker: { localQueue: { size: o.batch },
          completeJobBatchDelay: 0 } } : {} });
    } else if (m === "stop") {
      clearInterval(tick);
      if (runner) await runner.stop();
      process.exit(0);
    }
  });
  process.send({ ready: true });
}

function drain(o) {
  return new Promise((resolve, reject) => {
    const kids = [];
    let ready = 0, total = 0, t0 = null;
    for (let p = 0; p < o.procs; p++) {
      const k = fork(__filename, ["child", ...process.argv.slice(3)]);
      k.on("exit", (code) => {
        if (code !== 0) reject(new Error("worker exited " + code));
      });
      k.on("message", (m) => {
        if (m.ready && ++ready === o.procs) kids.forEach((x) => x.send("go"));
        if (m.done) {
          const first = BigInt(m.first);
          if (t0 === null || first < t0) t0 = first;
          total += m.done;
          const take = o.take > 0 && o.take < o.jobs ? o.take : o.jobs;
          if (total >= take && t0 !== -1n) {
            const secs = Number(process.hrtime.bigint() - t0) / 1e9;
            t0 = -1n;
            kids.forEach((x) => x.send("stop"));
            resolve((take - 1) / secs);
          }
        }
      });
      kids.push(k);
    }
  });
}

async function main() {
  const o = args(process.argv.slice(2));
  if (o.mode === "child") return child(o);
  const rate = o.mode === "enqueue" ? await enqueue(o) : await drain(o);
  console.log("jobs/s " + rate.toFixed(0));
}

main().catch((e) => {
  console.error("bench.js: " + e.message);
  process.exit(1);
});

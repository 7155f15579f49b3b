#!/usr/bin/env node
/* bench/peers/openai/bench.js: the official openai SDK (npm "openai"),
 * the peer client of bench/worker.py --sdk, making the calls stepq's jobs
 * make, at the same concurrency, against the same mock (and nginx).
 *
 *   node bench.js --base-url URL --calls N --concurrency C [--stream]
 *       [--timeout MS]
 *
 * C async loops share one OpenAI client (maxRetries 0: stepq's retries are
 * its own policy, none happen against the mock) and each sends
 * chat.completions.create with the jobs' request until N are sent. For
 * https, NODE_EXTRA_CA_CERTS names the throwaway CA. Prints one JSON
 * line: {"calls", "ok", "failed", "wall_s", "cpu_us", "rss_mib"}: cpu_us
 * is the process's user + system CPU a call from the first send to the
 * last answer (node's start-up left out, in the SDK's favour), rss_mib
 * its peak RSS.
 *
 * --stream asks for each answer as a stream ("stream": true, usage in
 * the last chunk) and joins its deltas before parsing, as a user of the
 * SDK's streaming does; each call then also reports, in "first_ms" and
 * "end_ms" (medians), when its first delta and its end came, and failed
 * calls their error's message in "errors" (at most 3): what a stalled or
 * hung stream did to the SDK, whose --timeout (default 60,000 ms) runs
 * until the answer's headers only.
 */
"use strict";
const { OpenAI } = require("openai");

function arg(name, def) {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : def;
}

const baseURL = arg("--base-url");
const calls = parseInt(arg("--calls", "1000"), 10);
const conc = parseInt(arg("--concurrency", "64"), 10);
const streamed = process.argv.includes("--stream");
const timeout = parseInt(arg("--timeout", "60000"), 10);
const request = {
  model: "bench-model",
  messages: [
    {
      role: "user",
      content: "Summarize the merged pull requests of the night as JSON.",
    },
  ],
  max_tokens: 800,
};

async function main() {
  const client = new OpenAI({
    apiKey: "sk-bench",
    baseURL,
    maxRetries: 0,
    timeout,
  });
  let sent = 0;
  let ok = 0;
  let failed = 0;
  const firsts = [];
  const ends = [];
  const errors = [];
  /* One streamed call: the deltas joined, then parsed. */
  async function streamOne() {
    const t = performance.now();
    const s = await client.chat.completions.create({
      ...request,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    for await (const chunk of s) {
      const d = chunk.choices[0]?.delta?.content;
      if (d) {
        if (text === "") firsts.push(performance.now() - t);
        text += d;
      }
    }
    ends.push(performance.now() - t);
    JSON.parse(text);
  }
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  async function loop() {
    while (sent < calls) {
      sent++;
      const t = performance.now();
      try {
        if (streamed) {
          await streamOne();
        } else {
          const r = await client.chat.completions.create(request);
          JSON.parse(r.choices[0].message.content); /* as expect_json */
        }
        ok++;
      } catch (e) {
        ends.push(performance.now() - t);
        if (errors.length < 3) errors.push(e.message);
        if (failed++ === 0) console.error("openai: " + e.message);
      }
    }
  }
  await Promise.all(Array.from({ length: conc }, loop));
  const cpu = process.cpuUsage(c0);
  const median = (v) =>
    v.length ? v.sort((a, b) => a - b)[Math.floor(v.length / 2)] : null;
  console.log(
    JSON.stringify({
      calls,
      ok,
      failed,
      wall_s: (performance.now() - t0) / 1000,
      cpu_us: (cpu.user + cpu.system) / calls,
      rss_mib: process.resourceUsage().maxRSS / 1024,
      first_ms: median(firsts),
      end_ms: median(ends),
      errors,
    })
  );
}

main();

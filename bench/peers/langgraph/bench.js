#!/usr/bin/env node
/* bench/peers/langgraph/bench.js: LangGraph JS (npm "@langchain/langgraph")
 * with its SQLite checkpointer, the peer agent of bench/agent.py: the same
 * agent as stepq's (a ReAct loop whose tools get_issue, add_label and
 * post_comment go over HTTP to the same sink) against the same
 * `stepq mock`, whose route's "tool_turns" script the model.
 *
 *   node bench.js --model-url URL --sink-url URL --db FILE --agents N
 *                 [--resume]
 *
 * Runs N threads (thread_id "t<i>", the agent of issue i) at once with
 * createReactAgent, ChatOpenAI (maxRetries 0) and SqliteSaver on FILE.
 * Without --resume every thread starts; with --resume (the crash soak,
 * after a kill -9) each thread is read back from the checkpointer and
 * started when it has no checkpoint, resumed (invoke(null), as LangGraph's
 * docs say) when it has one with a next node, left alone when finished.
 * add_label sends an Idempotency-Key of the issue and label, as stepq's
 * tool does; post_comment sends none.
 *
 * Prints one JSON line: {"agents", "started", "resumed", "finished",
 * "failed", "turns", "wall_s", "cpu_us", "rss_mib"}: turns counts model
 * answers, cpu_us is the process's user + system CPU from the first
 * invoke to the last (node's start-up and module loading left out, in the
 * peer's favour), rss_mib its peak RSS.
 */
"use strict";
const { ChatOpenAI } = require("@langchain/openai");
const { tool } = require("@langchain/core/tools");
const { SystemMessage, HumanMessage } = require("@langchain/core/messages");
const { createReactAgent } = require("@langchain/langgraph/prebuilt");
const { SqliteSaver } = require("@langchain/langgraph-checkpoint-sqlite");
const { z } = require("zod");

function arg(name, def) {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : def;
}

const modelURL = arg("--model-url");
const sinkURL = arg("--sink-url");
const dbPath = arg("--db", "langgraph.db");
const agents = parseInt(arg("--agents", "1000"), 10);
const resume = process.argv.includes("--resume");
let turns = 0;

async function send(method, path, body, key) {
  const headers = { "content-type": "application/json" };
  if (key) headers["Idempotency-Key"] = key;
  const r = await fetch(sinkURL + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.ok) throw new Error("HTTP " + r.status + ": " + text);
  return text;
}

const issueOf = (config) => config.configurable.issue;

const tools = [
  tool(async (_, config) => send("GET", "/issues/" + issueOf(config)), {
    name: "get_issue",
    description: "Read the issue",
    schema: z.object({}),
  }),
  tool(
    async ({ label }, config) =>
      send(
        "POST",
        "/issues/" + issueOf(config) + "/labels/" + encodeURIComponent(label),
        { label },
        "issue-" + issueOf(config) + "-label-" + label
      ),
    {
      name: "add_label",
      description: "Add one label to the issue",
      schema: z.object({ label: z.string().max(50) }),
    }
  ),
  tool(
    async ({ body }, config) =>
      send("POST", "/issues/" + issueOf(config) + "/comments", { body }),
    {
      name: "post_comment",
      description: "Post a comment on the issue",
      schema: z.object({ body: z.string().max(4000) }),
    }
  ),
];

function prompt(i) {
  return [
    new SystemMessage(
      "You triage bug reports: read the issue, label it with add_label, " +
        "comment with post_comment, then answer with one line."
    ),
    new HumanMessage("Triage issue #" + i + "."),
  ];
}

async function main() {
  const llm = new ChatOpenAI({
    model: "bench-model",
    apiKey: "sk-bench",
    configuration: { baseURL: modelURL },
    maxRetries: 0,
    timeout: 120000,
    callbacks: [{ handleLLMEnd: () => void turns++ }],
  });
  const checkpointer = SqliteSaver.fromConnString(dbPath);
  const graph = createReactAgent({ llm, tools, checkpointer });
  const count = { started: 0, resumed: 0, finished: 0, failed: 0 };
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  async function one(i) {
    const config = {
      configurable: { thread_id: "t" + i, issue: i },
      recursionLimit: 100,
    };
    let input = { messages: prompt(i) };
    if (resume) {
      const st = await graph.getState(config);
      const msgs = (st.values && st.values.messages) || [];
      if (msgs.length > 0 && st.next.length === 0) {
        const last = msgs[msgs.length - 1];
        if (!last.tool_calls || last.tool_calls.length === 0) {
          count.finished++;
          return;
        }
      }
      if (msgs.length > 0) input = null;
    }
    if (input === null) count.resumed++;
    else count.started++;
    try {
      await graph.invoke(input, config);
      count.finished++;
    } catch (e) {
      if (count.failed++ === 0) console.error("langgraph: " + e.message);
    }
  }
  await Promise.all(Array.from({ length: agents }, (_, i) => one(i + 1)));
  const cpu = process.cpuUsage(c0);
  console.log(
    JSON.stringify({
      agents,
      ...count,
      turns,
      wall_s: (performance.now() - t0) / 1000,
      cpu_us: cpu.user + cpu.system,
      rss_mib: process.resourceUsage().maxRSS / 1024,
    })
  );
}

main();

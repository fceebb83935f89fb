// An upstream A2A 1.0 agent on the official JavaScript SDK (@a2a-js/sdk's server on
// Express), with the scenarios of tests/a2a_agents (README.md there): stream N [MS], ask,
// fail, crash, slow, message, echo. JSON-RPC at /, HTTP+JSON under / (/message:send,
// /tasks/{id}, ...), the card at /.well-known/agent-card.json, the call log at GET /calls.
//
//   node a2a_agent.mjs [PORT] [--no-streaming] [--break-after K] [--break-mode abort|eof]
//                      [--calls-file PATH] [--compat03]
//
// Environment instead of flags: A2A_PEER_PORT, A2A_PEER_NO_STREAMING=1,
// A2A_PEER_BREAK_AFTER, A2A_PEER_BREAK_MODE, A2A_PEER_CALLS_FILE, A2A_PEER_COMPAT03=1.
// The bound port is printed alone on the first line of stdout. It lives beside
// tests/js/node_modules so that Node resolves the SDK and Express from there.
import { randomUUID } from "node:crypto";
import { appendFileSync } from "node:fs";
import http from "node:http";

import express from "express";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { UserBuilder, agentCardHandler, jsonRpcHandler, restHandler } from "@a2a-js/sdk/server/express";

// --- Options ---------------------------------------------------------------------------
const env = process.env;
const opts = {
  port: Number(env.A2A_PEER_PORT || 0),
  streaming: ["", "0", undefined].includes(env.A2A_PEER_NO_STREAMING),
  breakAfter: env.A2A_PEER_BREAK_AFTER ? Number(env.A2A_PEER_BREAK_AFTER) : 0,
  breakMode: env.A2A_PEER_BREAK_MODE || "abort",
  callsFile: env.A2A_PEER_CALLS_FILE || "",
  compat03: !["", "0", undefined].includes(env.A2A_PEER_COMPAT03),
};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const arg = argv[i];
  if (arg === "--no-streaming") opts.streaming = false;
  else if (arg === "--break-after") opts.breakAfter = Number(argv[++i]);
  else if (arg === "--break-mode") opts.breakMode = argv[++i];
  else if (arg === "--calls-file") opts.callsFile = argv[++i];
  else if (arg === "--compat03") opts.compat03 = true;
  else if (/^\d+$/.test(arg)) opts.port = Number(arg);
  else {
    console.error(`unknown argument ${arg}`);
    process.exit(2);
  }
}
if (!["abort", "eof"].includes(opts.breakMode)) {
  console.error(`--break-mode must be abort or eof, not ${opts.breakMode}`);
  process.exit(2);
}

// --- Scenarios (the same rules as tests/a2a_agents/peer_common.py) ----------------------
const SCENARIOS = ["stream", "ask", "fail", "crash", "slow", "message", "echo"];
const ID_PREFIX = new RegExp(`^(${SCENARIOS.join("|")})(?:-(\\d+))?(?:-(\\d+))?(?:-|$)`);

function parseScenario(text, messageId) {
  const words = text.split(/\s+/).filter(Boolean);
  let name;
  let numbers;
  if (words.length && SCENARIOS.includes(words[0].toLowerCase())) {
    name = words[0].toLowerCase();
    numbers = words.slice(1, 3);
  } else {
    const match = ID_PREFIX.exec(messageId || "");
    if (!match) return { name: "echo" };
    name = match[1];
    numbers = match.slice(2).filter(Boolean);
  }
  const scenario = { name, chunks: 3, intervalMs: 50 };
  if (name === "stream") {
    if (/^\d+$/.test(numbers[0] ?? "")) scenario.chunks = Math.max(1, Number(numbers[0]));
    if (/^\d+$/.test(numbers[1] ?? "")) scenario.intervalMs = Number(numbers[1]);
  }
  return scenario;
}

const chunkText = (i, n) => `chunk ${i}/${n}\n`;
const SLOW_TICK_MS = 200;
const SLOW_TOTAL_MS = 60_000;

// TaskState and Role as the SDK's generated types number them.
const State = { SUBMITTED: 1, WORKING: 2, COMPLETED: 3, FAILED: 4, CANCELED: 5, INPUT_REQUIRED: 6 };
const STATE_NAMES = Object.fromEntries(Object.entries(State).map(([k, v]) => [v, `TASK_STATE_${k}`]));
const ROLE_AGENT = 2;

// --- Call log ------------------------------------------------------------------------------
const RECORDED_HEADERS = [
  "a2a-version",
  "a2a-extensions",
  "x-a2a-extensions",
  "x-amzn-bedrock-agentcore-runtime-session-id",
  "x-amzn-bedrock-agentcore-runtime-request-id",
];
const calls = [];
function record(op, fields) {
  const entry = { op, at: Date.now() / 1000, ...fields };
  calls.push(entry);
  if (opts.callsFile) appendFileSync(opts.callsFile, JSON.stringify(entry) + "\n");
}
function recordedHeaders(context) {
  const headers = context?.state?.get?.("headers") ?? {};
  const out = {};
  for (const name of RECORDED_HEADERS) {
    if (headers[name] !== undefined) out[name] = String(headers[name]);
  }
  return out;
}

// --- Executor ------------------------------------------------------------------------------
const textPart = (text) => ({ content: { $case: "text", value: text }, mediaType: "text/plain", filename: "", metadata: {} });
const textOf = (message) =>
  (message?.parts ?? []).filter((p) => p.content?.$case === "text").map((p) => p.content.value).join("\n");
const now = () => new Date().toISOString();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function agentMessage(taskId, contextId, text) {
  return {
    role: ROLE_AGENT,
    messageId: randomUUID(),
    taskId,
    contextId,
    parts: [textPart(text)],
    metadata: {},
    extensions: [],
    referenceTaskIds: [],
  };
}

class ScenarioExecutor {
  constructor() {
    this.firstTurns = new Map(); // ask: the ids the first turn saw, by task id
    this.stopped = new Set(); // slow: tasks whose cancel was asked
    this.contexts = new Map(); // task id -> context id, for cancel
  }

  async execute(requestContext, bus) {
    const { taskId, contextId, task } = requestContext;
    const message = requestContext.userMessage;
    const text = textOf(message);
    const followUp = task !== undefined && task.status?.state === State.INPUT_REQUIRED;
    const scenario = followUp ? { name: "ask-answer" } : parseScenario(text, message.messageId);
    this.contexts.set(taskId, contextId);
    record("execute", {
      agent: "js",
      sdk: "@a2a-js/sdk",
      scenario: scenario.name,
      task_id: taskId,
      context_id: contextId,
      message_id: message.messageId,
      text,
      headers: recordedHeaders(requestContext.context),
    });

    if (scenario.name === "message") {
      const reply = agentMessage(undefined, contextId, `message: ${text}`);
      delete reply.taskId;
      bus.publish(AgentEvent.message(reply));
      bus.finished();
      return;
    }

    const status = (state, words) => {
      bus.publish(
        AgentEvent.statusUpdate({
          taskId,
          contextId,
          status: {
            state,
            message: words === undefined ? undefined : agentMessage(taskId, contextId, words),
            timestamp: now(),
          },
          metadata: {},
        }),
      );
    };
    const artifact = (artifactId, words, append, lastChunk) => {
      bus.publish(
        AgentEvent.artifactUpdate({
          taskId,
          contextId,
          artifact: { artifactId, name: artifactId, description: "", parts: [textPart(words)], metadata: {}, extensions: [] },
          append,
          lastChunk,
          metadata: {},
        }),
      );
    };

    // Every execute call starts with the task (the SDK requires it on follow-ups too).
    bus.publish(
      AgentEvent.task(
        task ?? {
          id: taskId,
          contextId,
          status: { state: State.SUBMITTED, message: undefined, timestamp: now() },
          artifacts: [],
          history: [message],
          metadata: {},
        },
      ),
    );
    status(State.WORKING);

    switch (scenario.name) {
      case "stream":
        for (let i = 1; i <= scenario.chunks; i++) {
          if (i > 1) await sleep(scenario.intervalMs);
          artifact("stream", chunkText(i, scenario.chunks), i > 1, i === scenario.chunks);
        }
        status(State.COMPLETED);
        break;
      case "ask":
        this.firstTurns.set(taskId, { task_id: taskId, context_id: contextId });
        status(State.INPUT_REQUIRED, `What is your answer? (asked in task ${taskId})`);
        break;
      case "ask-answer": {
        const answer = { answer: text, context_id: contextId, first_turn: this.firstTurns.get(taskId) ?? null, task_id: taskId };
        artifact("answer", JSON.stringify(answer), false, true);
        status(State.COMPLETED);
        break;
      }
      case "fail":
        status(State.FAILED, `failed on purpose: ${text}`);
        break;
      case "crash":
        throw new Error(`crashed on purpose: ${text}`);
      case "slow": {
        const ticks = SLOW_TOTAL_MS / SLOW_TICK_MS;
        for (let i = 1; i <= ticks; i++) {
          if (this.stopped.has(taskId)) break;
          artifact("slow", `tick ${i}\n`, i > 1, false);
          await sleep(SLOW_TICK_MS);
        }
        if (!this.stopped.has(taskId)) status(State.COMPLETED);
        break;
      }
      default:
        artifact("echo", `echo: ${text}`, false, true);
        status(State.COMPLETED);
    }
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    const contextId = this.contexts.get(taskId) ?? "";
    record("cancel", { agent: "js", task_id: taskId, context_id: contextId, headers: {} });
    this.stopped.add(taskId);
    bus.publish(
      AgentEvent.statusUpdate({
        taskId,
        contextId,
        status: { state: State.CANCELED, message: agentMessage(taskId, contextId, "canceled on request"), timestamp: now() },
        metadata: {},
      }),
    );
  }
}

// --- Breaking a stream on purpose ----------------------------------------------------------
// The first SSE response carrying artifact updates of a task is cut right after its K-th
// artifact update: `abort` destroys the socket (no final chunk), `eof` ends the body. The
// SDK is not told (it never watches for a vanished client): its later writes go nowhere.
const brokenTasks = new Set();
function breakStreams(req, res, next) {
  if (!opts.breakAfter) return next();
  const write = res.write.bind(res);
  const end = res.end.bind(res);
  let pending = "";
  let count = 0;
  let broken = false;
  res.write = (chunk, encoding, callback) => {
    if (broken) return true;
    const type = String(res.getHeader("content-type") ?? "");
    if (!type.startsWith("text/event-stream")) return write(chunk, encoding, callback);
    pending += Buffer.isBuffer(chunk) ? chunk.toString("utf8") : String(chunk);
    let out = "";
    let match;
    const separator = /\r\n\r\n|\n\n|\r\r/g;
    let consumed = 0;
    while ((match = separator.exec(pending)) !== null) {
      const event = pending.slice(consumed, match.index + match[0].length);
      consumed = match.index + match[0].length;
      out += event;
      if (event.includes('"artifactUpdate"') || event.includes('"artifact-update"')) {
        const taskId = /"taskId"\s*:\s*"([^"]+)"/.exec(event)?.[1] ?? "";
        if (brokenTasks.has(taskId)) continue;
        count += 1;
        if (count >= opts.breakAfter) {
          brokenTasks.add(taskId);
          broken = true;
          break;
        }
      }
    }
    pending = broken ? "" : pending.slice(consumed);
    if (broken) {
      // Cut once the bytes so far are flushed: destroy() would drop them.
      const cut = () => (opts.breakMode === "eof" ? end() : res.socket?.destroy());
      if (out) write(out, cut);
      else cut();
    } else if (out) {
      write(out);
    }
    if (typeof callback === "function") callback();
    return true;
  };
  res.end = (...args) => (broken ? res : end(...args));
  next();
}

// --- Server --------------------------------------------------------------------------------
const card = {
  name: "a2a-peer-js",
  description: "Test upstream agent on @a2a-js/sdk: stream N, ask, fail, crash, slow, message, echo.",
  supportedInterfaces: [],
  version: "1.0.0",
  capabilities: { streaming: opts.streaming, pushNotifications: false, extensions: [] },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ["text/plain"],
  defaultOutputModes: ["text/plain"],
  skills: [
    {
      id: "scenarios",
      name: "Test scenarios",
      description: "The first word of the message picks the scenario.",
      tags: ["test"],
      examples: [],
      inputModes: [],
      outputModes: [],
      securityRequirements: [],
    },
  ],
  signatures: [],
};

const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new ScenarioExecutor());
const legacyCompat = { enabled: opts.compat03 };
const app = express();
app.get("/calls", (_req, res) => res.json({ calls }));
app.use("/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: requestHandler, legacyCompat }));
app.use(breakStreams);
app.post("/", jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat }));
app.use(restHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat }));

const server = http.createServer(app);
server.listen(opts.port, "127.0.0.1", () => {
  const { port } = server.address();
  const base = `http://127.0.0.1:${port}`;
  card.supportedInterfaces.push(
    { url: `${base}/`, protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "" },
    { url: base, protocolBinding: "HTTP+JSON", protocolVersion: "1.0", tenant: "" },
  );
  if (opts.compat03) {
    card.supportedInterfaces.push(
      { url: `${base}/`, protocolBinding: "JSONRPC", protocolVersion: "0.3", tenant: "" },
      { url: base, protocolBinding: "HTTP+JSON", protocolVersion: "0.3", tenant: "" },
    );
  }
  process.stdout.write(`${port}\n`);
});
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    server.closeAllConnections?.();
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 500).unref();
  });
}
